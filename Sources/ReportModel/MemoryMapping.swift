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

    public func contains(_ address: UInt64) -> Bool { address >= start && address < end }

    /// Parses /proc/PID/maps text; malformed lines are skipped.
    public static func parse(_ text: String) -> [MemoryMapping] {
        var result: [MemoryMapping] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5 else { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt64(range[0], radix: 16), let end = UInt64(range[1], radix: 16),
                start < end, let offset = UInt64(fields[2], radix: 16), let inode = UInt64(fields[4])
            else { continue }
            let perms = Array(fields[1].utf8)
            guard perms.count >= 3 else { continue }
            let path = fields.count > 5 ? String(fields[5]).trimmingLeadingSpaces() : ""
            result.append(
                MemoryMapping(
                    start: start, end: end, readable: perms[0] == UInt8(ascii: "r"), writable: perms[1] == UInt8(ascii: "w"),
                    executable: perms[2] == UInt8(ascii: "x"), offset: offset, inode: inode, path: path))
        }
        return result
    }
}

extension String {
    fileprivate func trimmingLeadingSpaces() -> String {
        String(drop { $0 == " " })
    }
}
