// ProtobufWriter: protobuf's binary wire format (protobuf.dev, "Encoding"), as much as the OTLP
// logs request needs: varints, fixed64, length-delimited fields (strings, bytes, nested
// messages). Proto3 rules: a scalar at its default is left out unless it is a oneof's member.
// ProtobufReader reads the top level of a message back (a collector's short answers), bounded
// and checked: the bytes are a server's.

public struct ProtobufWriter {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    /// Wire types.
    static let varintType: UInt64 = 0
    static let fixed64Type: UInt64 = 1
    static let lengthDelimitedType: UInt64 = 2

    mutating func appendVarint(_ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    mutating func tag(_ number: Int, _ type: UInt64) {
        appendVarint(UInt64(number) << 3 | type)
    }

    /// A varint field (uint64, an enum, a bool; an int64 as its two's complement).
    public mutating func varint(_ number: Int, _ value: UInt64, always: Bool = false) {
        guard value != 0 || always else { return }
        tag(number, Self.varintType)
        appendVarint(value)
    }

    /// A fixed64 or double field, little-endian.
    public mutating func fixed64(_ number: Int, _ value: UInt64, always: Bool = false) {
        guard value != 0 || always else { return }
        tag(number, Self.fixed64Type)
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    /// A bytes field.
    public mutating func bytes(_ number: Int, _ value: [UInt8], always: Bool = false) {
        guard !value.isEmpty || always else { return }
        tag(number, Self.lengthDelimitedType)
        appendVarint(UInt64(value.count))
        bytes += value
    }

    /// A string field, UTF-8.
    public mutating func string(_ number: Int, _ value: String, always: Bool = false) {
        bytes(number, Array(value.utf8), always: always)
    }

    /// A nested message: written by `body` into a writer of its own, then length-prefixed. An
    /// empty message is left out unless `always` (a message field is present when set).
    public mutating func message(_ number: Int, always: Bool = false, _ body: (inout ProtobufWriter) -> Void) {
        var nested = ProtobufWriter()
        body(&nested)
        bytes(number, nested.bytes, always: always)
    }
}

/// The fields at the top level of a protobuf message.
public enum ProtobufReader {
    public struct Field: Equatable {
        public var number: Int
        /// A varint's value (wire type 0).
        public var varint: UInt64?
        /// A length-delimited field's bytes (wire type 2).
        public var bytes: [UInt8]?
    }

    /// The message's fields in order, or nil when `message` is not one (a truncated field, a
    /// varint longer than ten bytes, a group, an unknown wire type, a length past the end).
    public static func fields(_ message: [UInt8]) -> [Field]? {
        var fields: [Field] = []
        var position = 0
        func varint() -> UInt64? {
            var value: UInt64 = 0
            for index in 0..<10 {
                guard position < message.count else { return nil }
                let byte = message[position]
                position += 1
                value |= UInt64(byte & 0x7F) << UInt64(7 * index)
                if byte & 0x80 == 0 { return value }
            }
            return nil
        }
        while position < message.count {
            guard let key = varint(), key >> 3 > 0, key >> 3 <= 536_870_911 else { return nil }
            let number = Int(key >> 3)
            switch key & 7 {
            case 0:
                guard let value = varint() else { return nil }
                fields.append(Field(number: number, varint: value))
            case 1, 5:
                let size = key & 7 == 1 ? 8 : 4
                guard message.count - position >= size else { return nil }
                position += size
                fields.append(Field(number: number))
            case 2:
                guard let length = varint(), length <= UInt64(message.count - position) else { return nil }
                fields.append(Field(number: number, bytes: Array(message[position..<position + Int(length)])))
                position += Int(length)
            default:
                return nil
            }
        }
        return fields
    }
}
