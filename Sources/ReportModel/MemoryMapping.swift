// MemoryMapping: one line of /proc/PID/maps, as a value.
//
// The text crosses a boundary twice: the capture reads it from /proc, and the minidump keeps it
// verbatim in its LinuxMaps stream, so a report built offline from a minidump parses the same
// lines the live capture did (modules there, the stack-overflow verdict here in both). The text
// is hostile: a line that does not parse is skipped, never fatal.

/// One line of /proc/PID/maps.
public struct MemoryMapping: Sendable, Equatable {
    public var start: UInt64
    public var end: UInt64
    public var readable: Bool
    public var writable: Bool
    public var executable: Bool
    public var offset: UInt64
    public var inode: UInt64
    public var path: String

    public init(
        start: UInt64, end: UInt64, readable: Bool, writable: Bool, executable: Bool, offset: UInt64, inode: UInt64,
        path: String
    ) {
        self.start = start
        self.end = end
        self.readable = readable
        self.writable = writable
        self.executable = executable
        self.offset = offset
        self.inode = inode
        self.path = path
    }

    public func contains(_ address: UInt64) -> Bool { address >= start && address < end }

    /// Parses /proc/PID/maps text; malformed lines are skipped.
    public static func parse(_ text: String) -> [MemoryMapping] {
        var text = text
        return text.withUTF8 { parse(bytes: $0) }
    }

    /// Parses /proc/PID/maps as read; malformed lines are skipped.
    public static func parse(_ bytes: [UInt8]) -> [MemoryMapping] {
        bytes.withUnsafeBufferPointer { parse(bytes: $0) }
    }

    /// Parses /proc/PID/maps bytes; malformed lines are skipped. Byte by byte, without building
    /// strings for the fields: the capture parses maps while the process is held.
    public static func parse(bytes: UnsafeBufferPointer<UInt8>) -> [MemoryMapping] {
        var result: [MemoryMapping] = []
        var lineStart = 0
        while lineStart < bytes.count {
            var lineEnd = lineStart
            while lineEnd < bytes.count && bytes[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
            var line = MapsLine(bytes: bytes, position: lineStart, end: lineEnd)
            if let mapping = line.mapping() { result.append(mapping) }
            lineStart = lineEnd + 1
        }
        return result
    }
}

/// One line of maps: `start-end perms offset dev inode   path`, fields split by runs of spaces.
private struct MapsLine {
    let bytes: UnsafeBufferPointer<UInt8>
    var position: Int
    let end: Int

    mutating func mapping() -> MemoryMapping? {
        let range = field()
        let perms = field()
        let offsetField = field()
        _ = field()  // the device
        let inodeField = field()
        guard let range, let perms, perms.count >= 3, let offsetField, let inodeField,
            let dash = range.firstIndex(of: UInt8(ascii: "-")), !range[(dash + 1)...].contains(UInt8(ascii: "-")),
            let start = Self.number(range[..<dash], radix: 16), let end = Self.number(range[(dash + 1)...], radix: 16),
            start < end, let offset = Self.number(offsetField, radix: 16), let inode = Self.number(inodeField, radix: 10)
        else { return nil }
        skipSpaces()
        let path = String(decoding: UnsafeBufferPointer(rebasing: bytes[position..<self.end]), as: UTF8.self)
        return MemoryMapping(
            start: start, end: end, readable: perms[perms.startIndex] == UInt8(ascii: "r"),
            writable: perms[perms.startIndex + 1] == UInt8(ascii: "w"),
            executable: perms[perms.startIndex + 2] == UInt8(ascii: "x"), offset: offset, inode: inode, path: path)
    }

    mutating func skipSpaces() {
        while position < end && bytes[position] == UInt8(ascii: " ") { position += 1 }
    }

    /// The next run of non-spaces, nil at the end of the line.
    mutating func field() -> Slice<UnsafeBufferPointer<UInt8>>? {
        skipSpaces()
        let from = position
        while position < end && bytes[position] != UInt8(ascii: " ") { position += 1 }
        return from < position ? bytes[from..<position] : nil
    }

    /// A whole field as an unsigned number; nil when empty, not all digits, or too large.
    static func number(_ digits: Slice<UnsafeBufferPointer<UInt8>>, radix: UInt64) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 20 else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            let digit: UInt64
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt64(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt64(byte - UInt8(ascii: "A") + 10)
            default: return nil
            }
            guard digit < radix else { return nil }
            let (shifted, overflow) = value.multipliedReportingOverflow(by: radix)
            let (sum, carry) = shifted.addingReportingOverflow(digit)
            guard !overflow, !carry else { return nil }
            value = sum
        }
        return value
    }
}
