// UploadConfiguration: crashport.toml, the file that says where reports go when neither flags nor
// the environment do (flags first, then the environment, then the file). TOML 1.0, read by
// toml++ (Debian's libtomlplusplus-dev, through CSupport/toml), in an [upload] table:
//
//     [upload]
//     sentry_dsn = "https://KEY@o1.ingest.sentry.io/42"     # or a list of DSNs
//     url = "https://crashes.example.com/submit"           # or a list of collectors
//     environment = "production"
//     ca_file = "/etc/ssl/private-ca.pem"
//     timeout_ms = 30000
//     send_pii = false
//     sentry_minidump = false      # Sentry's minidump endpoint instead of envelopes
//     before_send = "/usr/local/bin/scrub-report"
//     after_send = "/usr/local/bin/report-delivered"   # told what came of each attempt
//     otlp_endpoint = "http://collector:4318"     # an OpenTelemetry collector (/v1/logs added)
//     otlp_protocol = "http/protobuf"              # or "http/json"
//     otlp_headers = { "api-key" = "…" }           # or "api-key=…,k2=v2", as OTEL_…_HEADERS
//     otlp_compression = "gzip"                    # or "none"
//
// Where: --config FILE, else CRASHPORT_CONFIG, else $XDG_CONFIG_HOME/crashport/crashport.toml
// (~/.config/…) for a user and /etc/crashport/crashport.toml for root; a missing default file is
// no configuration. Every error names the file, and the key where there is one: an unknown key
// or table, a value of the wrong type, a file that is not TOML.

import CTOML
import FoundationEssentials
import Glibc
import ReportModel
import Store

public struct UploadConfiguration: Equatable, Sendable {
    public var sentryDSNs: [String] = []
    public var urls: [String] = []
    public var environment: String?
    public var caFile: String?
    public var timeoutMilliseconds: Int?
    public var sendPII: Bool?
    /// send_variables: each frame's variables go to Sentry (left out by default: they hold the
    /// program's data).
    public var sendVariables: Bool?
    public var beforeSend: String?
    public var afterSend: String?
    /// Send to Sentry's minidump endpoint instead of its envelopes.
    public var sentryMinidump: Bool?
    /// An OpenTelemetry collector's base OTLP/HTTP endpoint, and how to send it (OTLPEndpoint).
    public var otlpEndpoint: String?
    public var otlpProtocol: String?
    public var otlpHeaders: [OTLPKeyValue]?
    public var otlpCompression: String?
    /// The file it came from, nil when none was read.
    public var file: String?

    public init() {}

    /// The default file for this user.
    public static func defaultPath(environment: [String: String], uid: UInt32) -> String {
        if uid == 0 { return "/etc/crashport/crashport.toml" }
        let home = ReportStore.homeDirectory(environment: environment)
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.config"
        return config + "/crashport/crashport.toml"
    }

    /// The configuration in `path` (`explicit`: named by --config or CRASHPORT_CONFIG, so a
    /// missing file is an error; the default file may be missing).
    public static func load(path: String, explicit: Bool) throws -> UploadConfiguration {
        // Opened without waiting (a FIFO at the path fails, it does not hold a sidecar's SIGHUP),
        // following a link (a configuration manager's), and read only when a regular file of at
        // most 1 MiB.
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            if !explicit && errno == ENOENT { return UploadConfiguration() }
            throw UploadError("\(path) cannot be read")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw UploadError("\(path) is not a regular file")
        }
        guard info.st_size <= 1 << 20 else { throw UploadError("\(path) is larger than any configuration (1 MiB)") }
        var data = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var count = 0
        while count < data.count {
            let got = data.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { throw UploadError("\(path) cannot be read") }
            if got == 0 { break }
            count += got
        }
        // One byte more than its size: a file that grew meanwhile past the bound is refused too.
        guard count <= 1 << 20 else { throw UploadError("\(path) is larger than any configuration (1 MiB)") }
        var configuration = try parse(String(decoding: data[0..<count], as: UTF8.self), file: path)
        configuration.file = path
        return configuration
    }

    /// The configuration in TOML `text`; errors name `file`.
    public static func parse(_ text: String, file: String) throws -> UploadConfiguration {
        var json: UnsafeMutablePointer<CChar>?
        let line = text.withCString { cp_toml_to_json($0, strlen($0), &json) }
        defer { free(json) }
        guard let json else { throw UploadError("\(file): out of memory reading it") }
        guard line == 0 else {
            throw UploadError("\(file)\(line > 0 ? ":\(line)" : ""): not TOML: \(String(cString: json))")
        }
        guard let table = JSONObject.parseObject(Array(UnsafeRawBufferPointer(start: json, count: strlen(json)))) else {
            throw UploadError("\(file): not TOML: toml++ gave no table")
        }
        var configuration = UploadConfiguration()
        for key in table.keys.sorted() where key != "upload" {
            throw UploadError("\(file): unknown table or key '\(key)' (crashport.toml has an [upload] table)")
        }
        guard let upload = table["upload"] else { return configuration }
        guard let settings = upload as? [String: Any] else {
            throw UploadError("\(file): upload must be a table ([upload])")
        }
        func bad(_ key: String, _ what: String) -> UploadError { UploadError("\(file): upload.\(key) must be \(what)") }
        func strings(_ key: String) throws -> [String] {
            guard let value = settings[key] else { return [] }
            if let text = value as? String { return [text] }
            guard let array = value as? [Any] else { throw bad(key, "a string or a list of strings") }
            return try array.map { item in
                guard let text = item as? String else { throw bad(key, "a string or a list of strings") }
                return text
            }
        }
        func string(_ key: String) throws -> String? {
            guard let value = settings[key] else { return nil }
            guard let text = value as? String else { throw bad(key, "a string") }
            return text
        }
        for key in settings.keys.sorted() {
            switch key {
            case "sentry_dsn": configuration.sentryDSNs = try strings(key)
            case "url": configuration.urls = try strings(key)
            case "environment": configuration.environment = try string(key)
            case "ca_file": configuration.caFile = try string(key)
            case "before_send": configuration.beforeSend = try string(key)
            case "otlp_endpoint": configuration.otlpEndpoint = try string(key)
            case "otlp_protocol": configuration.otlpProtocol = try string(key)
            case "otlp_compression":
                let value = try string(key)
                guard value == "gzip" || value == "none" else { throw bad(key, "\"gzip\" or \"none\"") }
                configuration.otlpCompression = value
            case "otlp_headers":
                // A table of strings, or the environment variable's k=v,k2=v2.
                if let table = settings[key] as? [String: Any] {
                    configuration.otlpHeaders = try table.keys.sorted().map { name in
                        guard let value = table[name] as? String else { throw bad(key, "a table of strings or a string") }
                        return OTLPKeyValue(key: name, value: value)
                    }
                } else if let text = settings[key] as? String {
                    do {
                        configuration.otlpHeaders = try OTLPEndpoint.keyValues(text, from: "\(file): upload.\(key)")
                    } catch {
                        throw bad(key, "a table of strings or a string of k=v pairs (\(error))")
                    }
                } else {
                    throw bad(key, "a table of strings or a string")
                }
            case "after_send": configuration.afterSend = try string(key)
            case "timeout_ms":
                guard let milliseconds = settings[key] as? Int, milliseconds > 0 else { throw bad(key, "a positive integer") }
                configuration.timeoutMilliseconds = milliseconds
            case "send_pii", "sentry_minidump", "send_variables":
                guard let flag = settings[key] as? Bool else { throw bad(key, "true or false") }
                switch key {
                case "send_pii": configuration.sendPII = flag
                case "send_variables": configuration.sendVariables = flag
                default: configuration.sentryMinidump = flag
                }
            default:
                throw UploadError(
                    "\(file): unknown key upload.\(key) (known: sentry_dsn, sentry_minidump, url, otlp_endpoint, otlp_protocol, otlp_headers, otlp_compression, environment, ca_file, timeout_ms, send_pii, send_variables, before_send, after_send)"
                )
            }
        }
        return configuration
    }
}
