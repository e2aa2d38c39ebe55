// JSON as loose values, for the shapes crashport does not own: Sentry's event and envelope
// headers, a before-send hook's answer, a report's upload record read leniently. This is what
// JSONSerialization gave, over FoundationEssentials' JSONEncoder and JSONDecoder (crashport does
// not link full Foundation; see docs/architecture.md).
//
// Values are Swift's own: `[String: Any]` objects, `[Any]` arrays, `String`, `Bool`, numbers
// (`Int` when the number is integral and fits, else `Double`; any integer or floating-point type
// when writing) and `JSONObject.null`. A Bool is never a number here, nor a number a Bool.

import FoundationEssentials

public enum JSONObject {
    /// JSON's `null`, as a value of a loose tree (`nil` in an `[String: Any?]` is written as it too).
    public struct Null: Equatable, Sendable {}
    public static let null = Null()

    public enum Failure: Error, CustomStringConvertible, Equatable {
        /// A value of a type JSON cannot hold, or a number JSON cannot write (NaN, infinity).
        case unrepresentable(String)
        public var description: String {
            switch self {
            case .unrepresentable(let what): "not a JSON value: \(what)"
            }
        }
    }

    /// `object` as compact JSON, keys sorted, so the same tree gives the same bytes. Slashes
    /// are not escaped; control characters are.
    public static func data(_ object: Any) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(try Value(object)))
    }

    /// The tree of a JSON text; throws on anything that is not one whole JSON value, except
    /// that a trailing comma in an array is let through (JSONDecoder accepts it).
    public static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws -> Any {
        try JSONDecoder().decode(Value.self, from: Data(bytes)).loose
    }

    /// A parsed JSON object, or nil when the text is not JSON or not an object.
    public static func parseObject<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> [String: Any]? {
        (try? parse(bytes)) as? [String: Any]
    }

    /// The tree in typed form, which Codable reads and writes.
    private indirect enum Value: Codable {
        case null
        case bool(Bool)
        case integer(Int64)
        case unsigned(UInt64)
        case double(Double)
        case string(String)
        case array([Value])
        case object([String: Value])

        init(_ loose: Any) throws {
            switch loose {
            case is Null: self = .null
            case let value as Bool: self = .bool(value)
            case let value as String: self = .string(value)
            case let value as Substring: self = .string(String(value))
            case let value as Int: self = .integer(Int64(value))
            case let value as Int64: self = .integer(value)
            case let value as Int32: self = .integer(Int64(value))
            case let value as Int16: self = .integer(Int64(value))
            case let value as Int8: self = .integer(Int64(value))
            case let value as UInt: self = .unsigned(UInt64(value))
            case let value as UInt64: self = .unsigned(value)
            case let value as UInt32: self = .unsigned(UInt64(value))
            case let value as UInt16: self = .unsigned(UInt64(value))
            case let value as UInt8: self = .unsigned(UInt64(value))
            case let value as Double:
                guard value.isFinite else { throw Failure.unrepresentable("\(value)") }
                self = .double(value)
            case let value as Float:
                guard value.isFinite else { throw Failure.unrepresentable("\(value)") }
                self = .double(Double(value))
            case let value as [String: Any]: self = .object(try value.mapValues(Value.init))
            case let value as [Any]: self = .array(try value.map(Value.init))
            default:
                // An Optional in the tree: null, or what it wraps.
                let mirror = Mirror(reflecting: loose)
                guard mirror.displayStyle == .optional else { throw Failure.unrepresentable("a \(type(of: loose))") }
                guard let wrapped = mirror.children.first?.value else {
                    self = .null
                    return
                }
                self = try Value(wrapped)
            }
        }

        var loose: Any {
            switch self {
            case .null: JSONObject.null
            case .bool(let value): value
            case .integer(let value): Int(exactly: value).map { $0 as Any } ?? Double(value)
            case .unsigned(let value): Int(exactly: value).map { $0 as Any } ?? Double(value)
            case .double(let value): value
            case .string(let value): value
            case .array(let values): values.map(\.loose)
            case .object(let members): members.mapValues(\.loose)
            }
        }

        private struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(from decoder: Decoder) throws {
            if let members = try? decoder.container(keyedBy: Key.self) {
                var object: [String: Value] = [:]
                for key in members.allKeys { object[key.stringValue] = try members.decode(Value.self, forKey: key) }
                self = .object(object)
            } else if var elements = try? decoder.unkeyedContainer() {
                var array: [Value] = []
                while !elements.isAtEnd { array.append(try elements.decode(Value.self)) }
                self = .array(array)
            } else {
                let single = try decoder.singleValueContainer()
                if single.decodeNil() {
                    self = .null
                } else if let value = try? single.decode(Bool.self) {
                    self = .bool(value)
                } else if let value = try? single.decode(Int64.self) {
                    self = .integer(value)
                } else if let value = try? single.decode(UInt64.self) {
                    self = .unsigned(value)
                } else if let value = try? single.decode(Double.self) {
                    self = .double(value)
                } else {
                    self = .string(try single.decode(String.self))
                }
            }
        }

        func encode(to encoder: Encoder) throws {
            switch self {
            case .object(let members):
                var container = encoder.container(keyedBy: Key.self)
                for (key, value) in members { try container.encode(value, forKey: Key(stringValue: key)) }
            case .array(let values):
                var container = encoder.unkeyedContainer()
                for value in values { try container.encode(value) }
            case .null:
                var container = encoder.singleValueContainer()
                try container.encodeNil()
            case .bool(let value): try encodeSingle(value, to: encoder)
            case .integer(let value): try encodeSingle(value, to: encoder)
            case .unsigned(let value): try encodeSingle(value, to: encoder)
            case .double(let value): try encodeSingle(value, to: encoder)
            case .string(let value): try encodeSingle(value, to: encoder)
            }
        }

        private func encodeSingle<Single: Encodable>(_ value: Single, to encoder: Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(value)
        }
    }
}
