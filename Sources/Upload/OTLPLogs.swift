// OTLPLogs: the OpenTelemetry logs request (`ExportLogsServiceRequest`, opentelemetry-proto's
// collector/logs/v1/logs_service.proto) as crashport sends it over OTLP/HTTP, in the two
// encodings the OTLP specification defines for it: binary protobuf (`application/x-protobuf`)
// and protobuf's JSON mapping as OTLP restricts it (`application/json`: lowerCamelCase field
// names, enums as numbers, 64-bit integers as decimal strings, bytes as base64 except trace and
// span ids, which crashport never sends).
//
// Four messages and their parts, written by hand (ProtobufWriter) rather than generated:
// crashport sends one log record per request and reads two small answers, which is no reason for
// a dependency on swift-protobuf and a build step for generated code. The field numbers are
// opentelemetry-proto's (v1.x), named after its fields so they can be checked against the .proto
// files; the end-to-end tests decode every request with the official Python bindings.
//
// The JSON form is also what a before_send hook sees and answers with; `init(json:)` reads the
// hook's answer back (either encoding then goes from that).

import FoundationEssentials
import ReportModel

/// An `AnyValue` (common/v1/common.proto).
public indirect enum OTLPValue: Equatable, Sendable {
    case string(String)
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case array([OTLPValue])
    case keyValues([OTLPAttribute])
    case bytes([UInt8])
}

/// A `KeyValue`: an attribute.
public struct OTLPAttribute: Equatable, Sendable {
    public var key: String
    public var value: OTLPValue

    public init(_ key: String, _ value: OTLPValue) {
        self.key = key
        self.value = value
    }
}

/// `SeverityNumber` (logs/v1/logs.proto), the values crashport uses.
public enum OTLPSeverity: Int, Sendable {
    case error = 17  // SEVERITY_NUMBER_ERROR
    case fatal = 21  // SEVERITY_NUMBER_FATAL

    /// The severity text OpenTelemetry's data model gives each range's first number.
    public var text: String {
        switch self {
        case .error: return "ERROR"
        case .fatal: return "FATAL"
        }
    }
}

/// A `LogRecord`, the fields crashport fills.
public struct OTLPLogRecord: Equatable, Sendable {
    public var timeUnixNano: UInt64 = 0
    public var observedTimeUnixNano: UInt64 = 0
    public var severityNumber = 0
    public var severityText = ""
    public var body: OTLPValue?
    public var attributes: [OTLPAttribute] = []
    public var eventName = ""

    public init() {}
}

/// An `ExportLogsServiceRequest`: resource logs, each a resource's attributes and its scopes'
/// records.
public struct OTLPLogsRequest: Equatable, Sendable {
    public struct ScopeLogs: Equatable, Sendable {
        /// The `InstrumentationScope`.
        public var scopeName = ""
        public var scopeVersion = ""
        public var logRecords: [OTLPLogRecord] = []

        public init(scopeName: String = "", scopeVersion: String = "", logRecords: [OTLPLogRecord] = []) {
            self.scopeName = scopeName
            self.scopeVersion = scopeVersion
            self.logRecords = logRecords
        }
    }

    public struct ResourceLogs: Equatable, Sendable {
        /// The `Resource`'s attributes.
        public var resource: [OTLPAttribute] = []
        public var scopeLogs: [ScopeLogs] = []

        public init(resource: [OTLPAttribute] = [], scopeLogs: [ScopeLogs] = []) {
            self.resource = resource
            self.scopeLogs = scopeLogs
        }
    }

    public var resourceLogs: [ResourceLogs] = []

    public init(resourceLogs: [ResourceLogs] = []) { self.resourceLogs = resourceLogs }

    /// How many log records it carries.
    public var recordCount: Int { resourceLogs.reduce(0) { $0 + $1.scopeLogs.reduce(0) { $0 + $1.logRecords.count } } }

    // MARK: protobuf

    /// The binary protobuf encoding.
    public var protobuf: [UInt8] {
        var request = ProtobufWriter()
        for resourceLogs in resourceLogs {
            // ExportLogsServiceRequest.resource_logs = 1
            request.message(1) { writer in
                // ResourceLogs.resource = 1 (Resource.attributes = 1)
                writer.message(1) { resource in
                    for attribute in resourceLogs.resource { resource.message(1) { Self.write(attribute, to: &$0) } }
                }
                for scopeLogs in resourceLogs.scopeLogs {
                    // ResourceLogs.scope_logs = 2
                    writer.message(2) { writer in
                        // ScopeLogs.scope = 1 (InstrumentationScope.name = 1, .version = 2)
                        writer.message(1) { scope in
                            scope.string(1, scopeLogs.scopeName)
                            scope.string(2, scopeLogs.scopeVersion)
                        }
                        // ScopeLogs.log_records = 2
                        for record in scopeLogs.logRecords { writer.message(2) { Self.write(record, to: &$0) } }
                    }
                }
            }
        }
        return request.bytes
    }

    static func write(_ record: OTLPLogRecord, to writer: inout ProtobufWriter) {
        writer.fixed64(1, record.timeUnixNano)  // time_unix_nano
        writer.varint(2, UInt64(record.severityNumber))  // severity_number
        writer.string(3, record.severityText)  // severity_text
        if let body = record.body { writer.message(5) { write(body, to: &$0) } }  // body
        for attribute in record.attributes { writer.message(6) { write(attribute, to: &$0) } }  // attributes
        writer.fixed64(11, record.observedTimeUnixNano)  // observed_time_unix_nano
        writer.string(12, record.eventName)  // event_name
    }

    static func write(_ attribute: OTLPAttribute, to writer: inout ProtobufWriter) {
        writer.string(1, attribute.key)  // KeyValue.key
        writer.message(2) { write(attribute.value, to: &$0) }  // KeyValue.value
    }

    /// An AnyValue: one field of its `oneof value`, written even when it holds the default (a
    /// oneof's member is present when set).
    static func write(_ value: OTLPValue, to writer: inout ProtobufWriter) {
        switch value {
        case .string(let text): writer.bytes(1, Array(text.utf8), always: true)  // string_value
        case .bool(let flag): writer.varint(2, flag ? 1 : 0, always: true)  // bool_value
        case .int(let number): writer.varint(3, UInt64(bitPattern: number), always: true)  // int_value
        case .double(let number): writer.fixed64(4, number.bitPattern, always: true)  // double_value
        case .array(let values):  // array_value: ArrayValue.values = 1
            writer.message(5, always: true) { array in
                for value in values { array.message(1, always: true) { write(value, to: &$0) } }
            }
        case .keyValues(let attributes):  // kvlist_value: KeyValueList.values = 1
            writer.message(6, always: true) { list in
                for attribute in attributes { list.message(1, always: true) { write(attribute, to: &$0) } }
            }
        case .bytes(let bytes): writer.bytes(7, bytes, always: true)  // bytes_value
        }
    }

    // MARK: JSON

    /// The OTLP/JSON encoding as loose JSON values (JSONObject): what is sent as
    /// `application/json`, and what before_send sees. Fields at their default are left out, as
    /// protobuf's JSON mapping does.
    public var json: [String: Any] {
        [
            "resourceLogs": resourceLogs.map { resourceLogs -> [String: Any] in
                [
                    "resource": ["attributes": resourceLogs.resource.map(Self.json)],
                    "scopeLogs": resourceLogs.scopeLogs.map { scopeLogs -> [String: Any] in
                        var scope: [String: Any] = [:]
                        if !scopeLogs.scopeName.isEmpty { scope["name"] = scopeLogs.scopeName }
                        if !scopeLogs.scopeVersion.isEmpty { scope["version"] = scopeLogs.scopeVersion }
                        return ["scope": scope, "logRecords": scopeLogs.logRecords.map(Self.json)]
                    },
                ]
            }
        ]
    }

    static func json(_ record: OTLPLogRecord) -> [String: Any] {
        var object: [String: Any] = [:]
        if record.timeUnixNano != 0 { object["timeUnixNano"] = String(record.timeUnixNano) }
        if record.observedTimeUnixNano != 0 { object["observedTimeUnixNano"] = String(record.observedTimeUnixNano) }
        if record.severityNumber != 0 { object["severityNumber"] = record.severityNumber }
        if !record.severityText.isEmpty { object["severityText"] = record.severityText }
        if let body = record.body { object["body"] = json(body) }
        if !record.attributes.isEmpty { object["attributes"] = record.attributes.map(json) }
        if !record.eventName.isEmpty { object["eventName"] = record.eventName }
        return object
    }

    static func json(_ attribute: OTLPAttribute) -> [String: Any] {
        ["key": attribute.key, "value": json(attribute.value)]
    }

    static func json(_ value: OTLPValue) -> [String: Any] {
        switch value {
        case .string(let text): return ["stringValue": text]
        case .bool(let flag): return ["boolValue": flag]
        case .int(let number): return ["intValue": String(number)]
        case .double(let number): return ["doubleValue": number]
        case .array(let values): return ["arrayValue": ["values": values.map(json)]]
        case .keyValues(let attributes): return ["kvlistValue": ["values": attributes.map(json)]]
        case .bytes(let bytes): return ["bytesValue": Data(bytes).base64EncodedString()]
        }
    }

    /// A request read from its OTLP/JSON form (a before_send hook's answer): the fields crashport
    /// sends, in lowerCamelCase (protobuf's JSON parsers also take the proto names; so does
    /// this), 64-bit integers as strings or numbers. Anything else in it is left out.
    public init(json object: [String: Any]) throws {
        func field(_ object: [String: Any], _ name: String, _ protoName: String) -> Any? {
            object[name] ?? object[protoName]
        }
        func objects(_ value: Any?, _ what: String) throws -> [[String: Any]] {
            guard let value else { return [] }
            guard let array = value as? [Any], let objects = array as? [[String: Any]] else {
                throw UploadError("\(what) is not a list of objects")
            }
            return objects
        }
        func string(_ value: Any?, _ what: String) throws -> String {
            guard let value else { return "" }
            guard let text = value as? String else { throw UploadError("\(what) is not a string") }
            return text
        }
        func unsigned(_ value: Any?, _ what: String) throws -> UInt64 {
            switch value {
            case nil: return 0
            case let text as String:
                guard let number = UInt64(text) else { throw UploadError("\(what) is not an unsigned 64-bit integer") }
                return number
            case let number as Int where number >= 0: return UInt64(number)
            default: throw UploadError("\(what) is not an unsigned 64-bit integer")
            }
        }
        for (index, resourceObject) in try objects(field(object, "resourceLogs", "resource_logs"), "resourceLogs")
            .enumerated()
        {
            let at = "resourceLogs[\(index)]"
            var resourceLogs = ResourceLogs()
            if let resource = resourceObject["resource"] {
                guard let resource = resource as? [String: Any] else { throw UploadError("\(at).resource is not an object") }
                resourceLogs.resource = try objects(resource["attributes"], "\(at).resource.attributes").map {
                    try Self.attribute(json: $0)
                }
            }
            for (scopeIndex, scopeObject) in try objects(field(resourceObject, "scopeLogs", "scope_logs"), "\(at).scopeLogs")
                .enumerated()
            {
                let at = "\(at).scopeLogs[\(scopeIndex)]"
                var scopeLogs = ScopeLogs()
                if let scope = scopeObject["scope"] {
                    guard let scope = scope as? [String: Any] else { throw UploadError("\(at).scope is not an object") }
                    scopeLogs.scopeName = try string(scope["name"], "\(at).scope.name")
                    scopeLogs.scopeVersion = try string(scope["version"], "\(at).scope.version")
                }
                for (recordIndex, recordObject) in try objects(
                    field(scopeObject, "logRecords", "log_records"), "\(at).logRecords"
                ).enumerated() {
                    let at = "\(at).logRecords[\(recordIndex)]"
                    var record = OTLPLogRecord()
                    record.timeUnixNano = try unsigned(
                        field(recordObject, "timeUnixNano", "time_unix_nano"), at + ".timeUnixNano")
                    record.observedTimeUnixNano = try unsigned(
                        field(recordObject, "observedTimeUnixNano", "observed_time_unix_nano"), at + ".observedTimeUnixNano")
                    let severity = try unsigned(field(recordObject, "severityNumber", "severity_number"), at + ".severityNumber")
                    guard severity <= 24 else { throw UploadError("\(at).severityNumber is not a SeverityNumber") }
                    record.severityNumber = Int(severity)
                    record.severityText = try string(field(recordObject, "severityText", "severity_text"), at + ".severityText")
                    if let body = recordObject["body"] {
                        guard let body = body as? [String: Any] else { throw UploadError("\(at).body is not an object") }
                        record.body = try Self.value(json: body)
                    }
                    record.attributes = try objects(recordObject["attributes"], at + ".attributes").map {
                        try Self.attribute(json: $0)
                    }
                    record.eventName = try string(field(recordObject, "eventName", "event_name"), at + ".eventName")
                    scopeLogs.logRecords.append(record)
                }
                resourceLogs.scopeLogs.append(scopeLogs)
            }
            self.resourceLogs.append(resourceLogs)
        }
    }

    static func attribute(json object: [String: Any]) throws -> OTLPAttribute {
        guard let key = object["key"] as? String else { throw UploadError("an attribute has no key") }
        guard let encoded = object["value"] as? [String: Any] else { throw UploadError("attribute \(key) has no value") }
        return OTLPAttribute(key, try value(json: encoded))
    }

    static func value(json object: [String: Any]) throws -> OTLPValue {
        func field(_ name: String, _ protoName: String) -> Any? { object[name] ?? object[protoName] }
        if let text = field("stringValue", "string_value") {
            guard let text = text as? String else { throw UploadError("a stringValue is not a string") }
            return .string(text)
        }
        if let flag = field("boolValue", "bool_value") {
            guard let flag = flag as? Bool else { throw UploadError("a boolValue is not true or false") }
            return .bool(flag)
        }
        if let number = field("intValue", "int_value") {
            if let number = number as? Int { return .int(Int64(number)) }
            guard let text = number as? String, let number = Int64(text) else {
                throw UploadError("an intValue is not a 64-bit integer")
            }
            return .int(number)
        }
        if let number = field("doubleValue", "double_value") {
            if let number = number as? Double { return .double(number) }
            guard let number = number as? Int else { throw UploadError("a doubleValue is not a number") }
            return .double(Double(number))
        }
        if let array = field("arrayValue", "array_value") {
            guard let array = array as? [String: Any] else { throw UploadError("an arrayValue is not an object") }
            guard let values = (array["values"] ?? [Any]()) as? [Any], let objects = values as? [[String: Any]] else {
                throw UploadError("an arrayValue's values are not a list of objects")
            }
            return .array(try objects.map { try value(json: $0) })
        }
        if let list = field("kvlistValue", "kvlist_value") {
            guard let list = list as? [String: Any] else { throw UploadError("a kvlistValue is not an object") }
            guard let values = (list["values"] ?? [Any]()) as? [Any], let objects = values as? [[String: Any]] else {
                throw UploadError("a kvlistValue's values are not a list of objects")
            }
            return .keyValues(try objects.map { try attribute(json: $0) })
        }
        if let encoded = field("bytesValue", "bytes_value") {
            guard let text = encoded as? String, let bytes = Data(base64Encoded: text) else {
                throw UploadError("a bytesValue is not base64")
            }
            return .bytes(Array(bytes))
        }
        throw UploadError("a value has none of AnyValue's fields")
    }
}

/// An OTLP/HTTP collector's answer to a request it took (`ExportLogsServiceResponse`), or to one
/// it refused (`google.rpc.Status`), in the request's encoding.
public enum OTLPResponse {
    /// A partial success: how many log records the collector rejected and its message; nil when
    /// the body says neither (a full success) or cannot be read.
    public static func partialSuccess(_ body: [UInt8], json: Bool) -> (rejected: Int64, message: String)? {
        var rejected: Int64 = 0
        var message = ""
        if json {
            guard let object = JSONObject.parseObject(body),
                let partial = (object["partialSuccess"] ?? object["partial_success"]) as? [String: Any]
            else { return nil }
            let count = partial["rejectedLogRecords"] ?? partial["rejected_log_records"]
            rejected = (count as? Int).map(Int64.init) ?? (count as? String).flatMap { Int64($0) } ?? 0
            message = (partial["errorMessage"] ?? partial["error_message"]) as? String ?? ""
        } else {
            // ExportLogsServiceResponse.partial_success = 1: ExportLogsPartialSuccess
            // { rejected_log_records = 1 (int64), error_message = 2 }
            guard let partial = ProtobufReader.fields(body)?.last(where: { $0.number == 1 })?.bytes,
                let fields = ProtobufReader.fields(partial)
            else { return nil }
            for field in fields {
                if field.number == 1, let value = field.varint { rejected = Int64(bitPattern: value) }
                if field.number == 2, let bytes = field.bytes { message = String(decoding: bytes, as: UTF8.self) }
            }
        }
        return rejected == 0 && message.isEmpty ? nil : (rejected, message)
    }

    /// The message of a refusal's `google.rpc.Status` (code = 1, message = 2), or of its JSON
    /// form; nil when the body is neither.
    public static func statusMessage(_ body: [UInt8], json: Bool) -> String? {
        if json {
            return (JSONObject.parseObject(body)?["message"] as? String).flatMap { $0.isEmpty ? nil : $0 }
        }
        guard let fields = ProtobufReader.fields(body), fields.allSatisfy({ (1...3).contains($0.number) }),
            let bytes = fields.last(where: { $0.number == 2 })?.bytes
        else { return nil }
        let message = String(decoding: bytes, as: UTF8.self)
        return message.isEmpty ? nil : message
    }
}
