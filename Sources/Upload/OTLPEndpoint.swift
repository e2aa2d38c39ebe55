// OTLPEndpoint: an OpenTelemetry collector reached over OTLP/HTTP, configured as OpenTelemetry's
// SDK specification says an OTLP exporter is ("OpenTelemetry Protocol Exporter"): the logs
// signal's own variable first, then the general one, each
//
//     OTEL_EXPORTER_OTLP_LOGS_ENDPOINT     the URL, used as it is
//     OTEL_EXPORTER_OTLP_ENDPOINT          the base URL, `/v1/logs` appended to its path
//     OTEL_EXPORTER_OTLP[_LOGS]_PROTOCOL   http/protobuf (the default) or http/json; grpc refused
//     OTEL_EXPORTER_OTLP[_LOGS]_HEADERS    k=v,k2=v2, each key and value percent-decoded
//     OTEL_EXPORTER_OTLP[_LOGS]_TIMEOUT    milliseconds per request
//     OTEL_EXPORTER_OTLP[_LOGS]_COMPRESSION gzip or none (the default)
//     OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES  the resource (OTLPEvent says how they merge)
//
// with crashport's own order around them: a flag (--otlp-endpoint, --otlp-protocol) before the
// environment, crashport.toml's otlp_* keys after it. An endpoint alone is a destination, as
// CRASHPORT_SENTRY_DSN is.

import FoundationEssentials

/// Where and how one OTLP/HTTP collector is sent reports.
public struct OTLPEndpoint: Sendable, Equatable {
    /// The OTLP/HTTP encodings (OTEL_EXPORTER_OTLP_PROTOCOL's values).
    public enum Encoding: String, Sendable, CaseIterable {
        case protobuf = "http/protobuf"
        case json = "http/json"

        public var contentType: String {
            switch self {
            case .protobuf: return "application/x-protobuf"
            case .json: return "application/json"
            }
        }
    }

    /// The logs URL requests are POSTed to.
    public var url: String
    public var encoding: Encoding = .protobuf
    /// Extra request headers, in order (an API key).
    public var headers: [OTLPHeader] = []
    public var gzip = false
    /// OTEL_EXPORTER_OTLP[_LOGS]_TIMEOUT, nil when not set (then the upload's timeout holds).
    public var timeoutMilliseconds: Int?
    /// OTEL_SERVICE_NAME.
    public var serviceName: String?
    /// OTEL_RESOURCE_ATTRIBUTES.
    public var resourceAttributes: [OTLPAttribute] = []

    public init(url: String) { self.url = url }

    /// The logs URL of a base endpoint (OTEL_EXPORTER_OTLP_ENDPOINT, --otlp-endpoint):
    /// `/v1/logs` appended to its path, as the specification has it.
    public static func logsURL(base: String) -> String {
        let parts = base.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var path = String(parts[0])
        while path.hasSuffix("/") { path.removeLast() }
        return path + "/v1/logs" + (parts.count > 1 ? "?" + parts[1] : "")
    }

    /// `url` when it is an http(s) URL with a host.
    static func checked(_ url: String, from source: String) throws -> String {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), ["http", "https"].contains(scheme),
            parsed.host != nil
        else {
            throw UploadError("\(source): not an http(s) URL with a host: \(url)")
        }
        return url
    }

    /// A `k=v,k2=v2` list (OTEL_EXPORTER_OTLP_HEADERS, OTEL_RESOURCE_ATTRIBUTES: the W3C
    /// baggage's shape without its properties), each key and value trimmed and percent-decoded;
    /// empty entries are skipped. An entry without `=`, an empty key or a bad `%` escape makes
    /// the whole list an error.
    public static func keyValues(_ text: String, from source: String) throws -> [OTLPKeyValue] {
        var pairs: [OTLPKeyValue] = []
        for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
            let trimmed = entry.trimmed
            if trimmed.isEmpty { continue }
            guard let equals = trimmed.firstIndex(of: "=") else { throw UploadError("\(source): '\(trimmed)' is not key=value") }
            guard let key = percentDecoded(trimmed[..<equals].trimmed),
                let value = percentDecoded(trimmed[trimmed.index(after: equals)...].trimmed)
            else { throw UploadError("\(source): '\(trimmed)' has a bad percent escape") }
            guard !key.isEmpty else { throw UploadError("\(source): '\(trimmed)' has no key") }
            pairs.append(OTLPKeyValue(key: key, value: value))
        }
        return pairs
    }

    /// `text` with each `%XX` replaced by its byte; nil when an escape is not two hex digits or
    /// the bytes are not UTF-8.
    static func percentDecoded(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var input = Array(text.utf8)[...]
        while let byte = input.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard input.count >= 2, let high = hexDigit(input.removeFirst()), let low = hexDigit(input.removeFirst()) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// The headers of a `k=v` list, each a valid HTTP field: a token for a name, no control
    /// character in a value (a decoded `%0D%0A` would start a header of its own).
    static func headers(_ text: String, from source: String) throws -> [OTLPHeader] {
        try keyValues(text, from: source).map { try OTLPHeader(name: $0.key, value: $0.value, from: source) }
    }

    /// The encoding a protocol names; grpc is refused with why.
    static func encoding(_ name: String, from source: String) throws -> Encoding {
        if let encoding = Encoding(rawValue: name.trimmed) { return encoding }
        if name.trimmed == "grpc" {
            throw UploadError(
                "\(source): grpc: crashport sends OTLP over HTTP only (http/protobuf or http/json); give the collector's OTLP/HTTP endpoint (port 4318 by default)"
            )
        }
        throw UploadError("\(source): '\(name)' is not an OTLP protocol crashport sends (http/protobuf, http/json)")
    }

    /// The collector that the flags, the environment and crashport.toml name, in that order for
    /// each setting; nil when none names an endpoint.
    static func resolving(
        endpoint flagEndpoint: String?, protocol flagProtocol: String?, environment: [String: String],
        file: UploadConfiguration
    ) throws -> OTLPEndpoint? {
        func variable(_ name: String) -> (name: String, value: String)? {
            environment[name].flatMap { $0.isEmpty ? nil : (name, $0) }
        }
        // The logs signal's variable, else the general one (the specification's order).
        func otel(_ setting: String) -> (name: String, value: String)? {
            variable("OTEL_EXPORTER_OTLP_LOGS_" + setting) ?? variable("OTEL_EXPORTER_OTLP_" + setting)
        }
        let fileName = file.file ?? "crashport.toml"
        var endpoint: OTLPEndpoint
        if let flagEndpoint {
            endpoint = OTLPEndpoint(url: logsURL(base: try checked(flagEndpoint, from: "--otlp-endpoint")))
        } else if let logs = variable("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") {
            endpoint = OTLPEndpoint(url: try checked(logs.value, from: logs.name))
        } else if let base = variable("OTEL_EXPORTER_OTLP_ENDPOINT") {
            endpoint = OTLPEndpoint(url: logsURL(base: try checked(base.value, from: base.name)))
        } else if let base = file.otlpEndpoint {
            endpoint = OTLPEndpoint(url: logsURL(base: try checked(base, from: fileName + ": upload.otlp_endpoint")))
        } else {
            return nil
        }
        if let flagProtocol {
            endpoint.encoding = try encoding(flagProtocol, from: "--otlp-protocol")
        } else if let given = otel("PROTOCOL") {
            endpoint.encoding = try encoding(given.value, from: given.name)
        } else if let given = file.otlpProtocol {
            endpoint.encoding = try encoding(given, from: fileName + ": upload.otlp_protocol")
        }
        if let given = otel("HEADERS") {
            endpoint.headers = try headers(given.value, from: given.name)
        } else if let given = file.otlpHeaders {
            endpoint.headers = try given.map {
                try OTLPHeader(name: $0.key, value: $0.value, from: fileName + ": upload.otlp_headers")
            }
        }
        if let given = otel("COMPRESSION") {
            switch given.value.trimmed {
            case "gzip": endpoint.gzip = true
            case "none": endpoint.gzip = false
            default: throw UploadError("\(given.name): '\(given.value)' is not gzip or none")
            }
        } else if let given = file.otlpCompression {
            endpoint.gzip = given == "gzip"
        }
        if let given = otel("TIMEOUT") {
            guard let milliseconds = Int(given.value.trimmed), milliseconds > 0 else {
                throw UploadError("\(given.name): '\(given.value)' is not a positive number of milliseconds")
            }
            endpoint.timeoutMilliseconds = milliseconds
        }
        if let attributes = variable("OTEL_RESOURCE_ATTRIBUTES") {
            endpoint.resourceAttributes = try keyValues(attributes.value, from: attributes.name).map {
                OTLPAttribute($0.key, .string($0.value))
            }
        }
        endpoint.serviceName = variable("OTEL_SERVICE_NAME")?.value
        return endpoint
    }
}

/// One `k=v` of a list (OTEL_EXPORTER_OTLP_HEADERS, OTEL_RESOURCE_ATTRIBUTES), decoded.
public struct OTLPKeyValue: Sendable, Equatable {
    public var key: String
    public var value: String

    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }
}

/// One request header for a collector: a valid HTTP field.
public struct OTLPHeader: Sendable, Equatable {
    public var name: String
    public var value: String

    init(name: String, value: String, from source: String) throws {
        let token = name.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
                || "!#$%&'*+-.^_`|~".unicodeScalars.contains($0)
        }
        guard !name.isEmpty, token else { throw UploadError("\(source): '\(name)' is not an HTTP header name") }
        guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw UploadError("\(source): the value of \(name) holds a control character")
        }
        self.name = name
        self.value = value
    }

    /// As libcurl takes it.
    var line: String { "\(name): \(value)" }
}
