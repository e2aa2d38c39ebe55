// Upload: `crashport upload`, which delivers reports to the collectors a team already runs. Two
// kinds of destination: a Crashpad/Breakpad collector (Crashpad's handler, a Socorro/Antenna
// collector, Sentry's minidump endpoint), sent a multipart POST with the minidump as
// `upload_file_minidump`, the report's annotations as form fields, and `guid`, `prod`, `ver`,
// gzipped as Crashpad does; and a Sentry project (its DSN), sent an envelope with the event in
// Sentry's shape (SentryEvent.swift) and the minidump as `event.minidump`, gzipped, as
// sentry-native sends it, honouring X-Sentry-Rate-Limits; and an OpenTelemetry collector
// (OTLP/HTTP: OTLPEndpoint, OTLPEvent, OTLPLogs), sent one log record per report.
//
// The queue is the reports directory itself: each report keeps its upload state per destination
// in `upload.json` beside its event (pending, sent with the server's id, failed; attempts, the
// next attempt's time, the last error), replaced atomically (write, fsync, rename), so it
// survives restarts and crashes of crashport, and a report recorded as sent is never sent again.
// Delivery runs in its own process, by hand or from a timer, so the sidecar keeps no network
// stack (libcurl is loaded by this process only).
//
// Retry, as a server would want it (defaults near sentry-native's): a transport failure or a 5xx
// waits 15 minutes, doubled with each attempt up to 8 hours, with ±10% jitter, and gives up
// after 6 attempts or when the report is 7 days old; `Retry-After` (on a 429 or 503) is the
// server's and is kept even by `--now`, which skips only crashport's own backoff; a 413 or any
// other 4xx is recorded and never retried.

import BoundedBytes
import FoundationEssentials
import ReportModel
import Store

#if canImport(Glibc)
import Glibc
#endif

/// Where reports go: a Crashpad/Breakpad collector's URL (CRASHPORT_UPLOAD_URL), a Sentry
/// project's DSN (CRASHPORT_SENTRY_DSN), or an OpenTelemetry collector's OTLP/HTTP endpoint
/// (OTEL_EXPORTER_OTLP_ENDPOINT). Several at once, each with its own state per report.
public enum UploadDestination: Sendable, Equatable {
    case crashpad(url: String)
    case sentry(SentryDSN)
    /// Sentry's minidump endpoint instead of its envelopes (where asked: a Sentry that takes
    /// Crashpad's uploads and processes the minidump itself), sent Crashpad's multipart.
    case sentryMinidump(SentryDSN)
    /// An OpenTelemetry collector (OTLP/HTTP, the logs signal): one log record per report
    /// (OTLPEvent), no minidump.
    case otlp(OTLPEndpoint)

    public static func crashpad(checking url: String) throws -> UploadDestination {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), ["http", "https"].contains(scheme),
            parsed.host != nil
        else {
            throw UploadError("not an http(s) URL with a host: \(url)")
        }
        return .crashpad(url: url)
    }

    public static func sentry(checking dsn: String) throws -> UploadDestination {
        do {
            return .sentry(try SentryDSN(dsn))
        } catch {
            throw UploadError("\(error)")
        }
    }

    /// The destination's key in upload.json: a Crashpad URL without its query (which may carry
    /// a key that does not belong in every report directory); a Sentry project without its key.
    public var key: String {
        switch self {
        case .crashpad(let url): return "crashpad " + (url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? url)
        case .sentry(let dsn): return "sentry " + dsn.envelopeURL
        case .sentryMinidump(let dsn):
            return "sentry-minidump " + (dsn.minidumpURL.split(separator: "?").first.map(String.init) ?? "")
        case .otlp(let endpoint): return "otlp " + (endpoint.url.split(separator: "?").first.map(String.init) ?? "")
        }
    }

    /// Where requests go, for messages.
    public var url: String {
        switch self {
        case .crashpad(let url): return url
        case .sentry(let dsn): return dsn.envelopeURL
        case .sentryMinidump(let dsn): return dsn.minidumpURL
        case .otlp(let endpoint): return endpoint.url
        }
    }
}

public struct UploadError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// One report's upload state, per destination (upload.json).
public struct UploadState: Codable, Sendable, Equatable {
    public enum Status: String, Codable, Sendable {
        case pending, sent, failed
    }

    public struct Entry: Codable, Sendable, Equatable {
        public var status: Status = .pending
        public var attempts = 0
        /// When crashport's backoff allows the next attempt (seconds since 1970).
        public var nextAttempt: Double?
        /// When the server allows the next request (Retry-After): kept even by --now.
        public var notBefore: Double?
        /// The server's id for the report (Crashpad's, or Antenna's `bp-…`).
        public var serverID: String?
        public var sentAt: Double?
        public var lastError: String?

        enum CodingKeys: String, CodingKey {
            case status, attempts, nextAttempt = "next_attempt", notBefore = "not_before", serverID = "server_id"
            case sentAt = "sent_at", lastError = "last_error"
        }
    }

    public var destinations: [String: Entry] = [:]
    /// The user's decision on this report under `ask` (crashport send / discard), nil if none.
    public var consent: ReportConsent?

    public init() {}

    public static let fileName = "upload.json"

    /// The state kept in a report directory; an empty state when there is none. A file that does
    /// not decode is an error (never silently replaced: it may say "sent").
    public static func read(directory: String) throws -> UploadState {
        try readJSON(directory + "/" + fileName, what: "an upload state") ?? UploadState()
    }

    /// Replaces the state in `directory` atomically: a temporary file written and fsynced, then
    /// renamed over the old one, and the directory fsynced.
    public func write(directory: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        try replaceFile(directory: directory, name: Self.fileName, bytes: Array(try encoder.encode(self)))
    }
}

/// The JSON file at `path` decoded, nil when there is none; a file that does not decode (or is
/// larger than any of ours) is an error, never silently replaced: it may say "sent".
/// The JSON file at `path` (nil when missing), read through UserFile: it may be in a user's
/// reports directory, read by a root sidecar on its serving thread, so no symlink is followed,
/// only a regular file is read, and one larger than `maximumJSONSize` is refused unread.
func readJSON<T: Decodable>(_ path: String, what: String) throws -> T? {
    let bytes: [UInt8]?
    do {
        bytes = try UserFile.read(path, limit: maximumJSONSize)
    } catch {
        throw UploadError("\(error) (\(what))")
    }
    guard let bytes else { return nil }
    do {
        return try JSONDecoder().decode(T.self, from: Data(bytes))
    } catch {
        throw UploadError("\(path) is not \(what): \(error)")
    }
}

/// The largest consent settings or upload state read: both are a few hundred bytes (the consent
/// file grows by one line per program given its own choice, so 1 MiB is thousands of programs),
/// and a root sidecar reads the consent file at every HELLO.
let maximumJSONSize = 1 << 20

/// Replaces `directory/name` atomically: a fresh temporary file (O_EXCL, O_NOFOLLOW: nothing
/// placed at its name is followed) written and fsynced, renamed over the old one, the directory
/// fsynced.
func replaceFile(directory: String, name: String, bytes: [UInt8]) throws {
    let temporary = directory + "/.\(name).tmp-\(getpid())"
    unlink(temporary)
    let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw UploadError("cannot create \(temporary): \(String(cString: strerror(errno)))") }
    guard writeAll(fd, bytes) else {
        let why = String(cString: strerror(errno))
        close(fd)
        unlink(temporary)
        throw UploadError("cannot write \(temporary): \(why)")
    }
    fsync(fd)
    close(fd)
    guard rename(temporary, directory + "/" + name) == 0 else {
        let why = String(cString: strerror(errno))
        unlink(temporary)
        throw UploadError("cannot replace \(directory)/\(name): \(why)")
    }
    let parent = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if parent >= 0 {
        fsync(parent)
        close(parent)
    }
}

/// A decision on one report, App Center style: send it, or never send it.
public enum ReportConsent: String, Codable, Sendable {
    case granted, denied
}

/// Whether reports may be sent (`crashport consent`): `always`, `never` (kept locally, never
/// sent) or `ask` (held until `crashport send` or `crashport discard` decides), for every program
/// or for one executable. Kept in the reports directory, so it is per user.
public struct ConsentSettings: Codable, Sendable, Equatable {
    public enum Choice: String, Codable, Sendable, CaseIterable {
        case ask, always, never
    }

    /// Every program's choice; `always` when none was made (configuring a destination is the
    /// decision to send).
    public var choice: Choice = .always
    /// Choices for single programs, by executable path.
    public var programs: [String: Choice] = [:]

    public init() {}

    public static let fileName = ReportStore.consentFileName

    public func choice(for executable: String?) -> Choice {
        executable.flatMap { programs[$0] } ?? choice
    }

    public static func read(root: String) throws -> ConsentSettings {
        try readJSON(root + "/" + fileName, what: "crashport's consent settings") ?? ConsentSettings()
    }

    public func write(root: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        try replaceFile(directory: root, name: Self.fileName, bytes: Array(try encoder.encode(self)))
    }
}

/// The retry policy.
public struct UploadPolicy: Sendable {
    public var maximumAttempts = 6
    public var firstWait: Double = 15 * 60
    public var longestWait: Double = 8 * 3600
    public var maximumAge: Double = 7 * 24 * 3600
    /// What a server's Retry-After may impose at most (a day, as sentry-native caps it).
    public var longestServerWait: Double = 24 * 3600

    public init() {}

    /// Crashport's wait before attempt `attempts + 1`, with ±10% jitter.
    public func backoff(afterAttempts attempts: Int, jitter: Double = Double.random(in: -0.1...0.1)) -> Double {
        let base = min(firstWait * Double(1 << min(max(attempts - 1, 0), 10)), longestWait)
        return base * (1 + jitter)
    }

    /// Seconds a Retry-After value asks for: delta-seconds or an HTTP date; 60 when it is
    /// neither (as sentry-native reads it).
    public func serverWait(_ value: String, now: Date) -> Double {
        if let seconds = Double(value.trimmed), seconds >= 0 {
            return min(seconds, longestServerWait)
        }
        if let date = Self.httpDate(value) { return min(max(0, date.timeIntervalSince(now)), longestServerWait) }
        return 60
    }

    /// An HTTP date (RFC 9110's IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), or nil.
    static func httpDate(_ value: String) -> Date? {
        let words = value.trimmed.split(separator: " ")
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard words.count == 6, words[0].count == 4, words[0].hasSuffix(","), words[5] == "GMT",
            let day = Int32(words[1]), (1...31).contains(day), let month = months.firstIndex(of: String(words[2])),
            let year = Int32(words[3]), (1970...9999).contains(year)
        else { return nil }
        let clock = words[4].split(separator: ":", omittingEmptySubsequences: false).compactMap { Int32($0) }
        guard clock.count == 3, (0...23).contains(clock[0]), (0...59).contains(clock[1]), (0...60).contains(clock[2])
        else { return nil }
        var fields = tm()
        fields.tm_year = year - 1900
        fields.tm_mon = Int32(month)
        fields.tm_mday = day
        fields.tm_hour = clock[0]
        fields.tm_min = clock[1]
        fields.tm_sec = clock[2]
        return Date(timeIntervalSince1970: Double(timegm(&fields)))
    }
}

/// A Crashpad-style multipart upload of one report.
public enum CrashpadUpload {
    /// The form fields: the report's annotations, then `prod`, `ver`, `guid` and crashport's own
    /// (annotations named like them are replaced, as Crashpad's `guid` replaces).
    public static func fields(for event: Event, reportID: String) -> [(String, String)] {
        var fields: [(String, String)] = []
        for (key, value) in (event.annotations ?? [:]).sorted(by: { $0.key < $1.key }) { fields.append((key, value)) }
        let program = event.process?.executable.map { $0.pathBaseName } ?? "unknown"
        var own: [(String, String)] = [
            ("prod", event.annotations?["prod"] ?? program), ("ver", event.annotations?["ver"] ?? event.release ?? "0"),
            ("guid", guid(reportID)), ("plat", "Linux"), ("crashport_report_id", reportID),
            ("crashport_kind", event.kind?.rawValue ?? "crash"),
        ]
        let signed = [("crashport_fingerprint", event.fingerprint), ("crashport_signature", event.signature)]
        own += signed.compactMap { name, value in value.map { (name, $0) } }
        let ownNames = Set(own.map(\.0))
        return fields.filter { !ownNames.contains($0.0) } + own
    }

    /// A UUID-shaped id derived from the report id (stable: the same report, the same guid; the
    /// same 128 bits as its Sentry event id).
    static func guid(_ reportID: String) -> String {
        let characters = Array(SentryEvent.eventID(reportID: reportID))
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(characters[$0]) }.joined(separator: "-")
    }

    /// Crashpad's escaping of a part name (http_multipart_builder.cc): CR, LF, `"` and `%`.
    static func escape(_ name: String) -> String {
        var escaped = ""
        // By scalar: "\r\n" is one Character.
        for scalar in name.unicodeScalars {
            switch scalar {
            case "\r": escaped += "%0d"
            case "\n": escaped += "%0a"
            case "\"": escaped += "%22"
            case "%": escaped += "%25"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// The multipart body and its boundary.
    public static func body(
        fields: [(String, String)], minidump: [UInt8], fileName: String
    ) -> (
        body: [UInt8], boundary: String
    ) {
        let boundary = "---MultipartBoundary-" + String(UUID().uuidString.filter { $0 != "-" }) + "---"
        var body: [UInt8] = []
        for (name, value) in fields {
            body += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(escape(name))\"\r\n\r\n".utf8)
            body += Array(value.utf8) + Array("\r\n".utf8)
        }
        body += Array(
            "--\(boundary)\r\nContent-Disposition: form-data; name=\"upload_file_minidump\"; filename=\"\(escape(fileName))\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                .utf8)
        body += minidump + Array("\r\n--\(boundary)--\r\n".utf8)
        return (body, boundary)
    }

    /// The server's id for the report in its answer: Antenna's `CrashID=bp-…`, else the body's
    /// first line when it looks like an id (Crashpad's and Sentry's minidump endpoint answer with
    /// one), else nil.
    public static func serverID(in body: String) -> String? {
        let line = body.split(whereSeparator: \.isNewline).first.map(String.init)?.trimmed ?? ""
        if line.hasPrefix("CrashID=") { return String(line.dropFirst("CrashID=".count)) }
        func isIDCharacter(_ scalar: Unicode.Scalar) -> Bool {
            scalar.properties.isAlphabetic || scalar.properties.numericType != nil || scalar == "-" || scalar == "_"
        }
        guard !line.isEmpty, line.count <= 128, line.unicodeScalars.allSatisfy(isIDCharacter) else { return nil }
        return line
    }
}
