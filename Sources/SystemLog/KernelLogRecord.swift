// KernelLogRecord: one record of the kernel's log as /dev/kmsg gives it, one per read(2):
//
//     "PRIORITY,SEQUENCE,MICROSECONDS,FLAGS[,MORE...];TEXT\n" then " KEY=VALUE\n" lines
//
// (Documentation/ABI/testing/dev-kmsg). PRIORITY is the syslog facility times 8 plus the level,
// MICROSECONDS the kernel's clock when it was printed (local_clock: CLOCK_MONOTONIC's base, no
// time while suspended), FLAGS `-` or `c` (a continuation). The kernel escapes the text's
// control bytes as \xNN; the parser trusts nothing of that and escapes again whatever is not
// printable ASCII, so a record's text is always one line of plain text. The key/value lines a
// driver adds (SUBSYSTEM=, DEVICE=) are not kept.
//
// Hostile bytes: a record is parsed only through bounded, overflow-checked steps; a malformed
// one is nil (the reader skips it and goes on), never a trap.

import BoundedBytes

public struct KernelLogRecord: Sendable, Equatable {
    /// The syslog level (0 emergency … 7 debug) and facility (0: the kernel's own).
    public var level: UInt8
    public var facility: UInt32
    /// The record's sequence number: consecutive records of one printk burst are consecutive.
    public var sequence: UInt64
    /// When it was printed, in microseconds of the kernel's clock (CLOCK_MONOTONIC's base).
    public var microseconds: UInt64
    /// Its text, escaped to printable ASCII (`\xNN` for anything else), at most `textLimit` bytes.
    public var text: String

    /// The longest text kept of one record (the kernel's own limit is 1024 bytes).
    public static let textLimit = 2048

    public init(level: UInt8, facility: UInt32 = 0, sequence: UInt64, microseconds: UInt64, text: String) {
        self.level = level
        self.facility = facility
        self.sequence = sequence
        self.microseconds = microseconds
        self.text = text
    }

    /// The record one read(2) of /dev/kmsg returned; nil when its header is not the kernel's
    /// shape (three decimal fields and a flag before a `;`).
    public init?(_ bytes: some Collection<UInt8>) {
        let bytes = Array(bytes.prefix(64 << 10))
        guard let semicolon = bytes.firstIndex(of: UInt8(ascii: ";")) else { return nil }
        let fields = bytes[..<semicolon].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        guard fields.count >= 4, let priority = Self.decimal(fields[0]), let sequence = Self.decimal(fields[1]),
            let microseconds = Self.decimal(fields[2]), priority <= UInt64(UInt32.max)
        else { return nil }
        self.level = UInt8(priority & 7)
        self.facility = UInt32(priority >> 3)
        self.sequence = sequence
        self.microseconds = microseconds
        // The text ends at the first newline; what follows are the key/value lines.
        let body = bytes[(semicolon + 1)...]
        let end = body.firstIndex(of: UInt8(ascii: "\n")) ?? body.endIndex
        self.text = Self.escaped(body[..<end], limit: Self.textLimit)
    }

    /// A decimal field of at most 20 digits, nil when empty, not digits, or past UInt64.
    static func decimal(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 20 else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"),
                let next = value.checkedMultiplying(10)?.checkedAdding(UInt64(byte - UInt8(ascii: "0")))
            else { return nil }
            value = next
        }
        return value
    }

    /// `bytes` as printable ASCII: a tab, space to `~` as they are, every other byte `\xNN`;
    /// cut at `limit` bytes of output with `…[cut]` after.
    public static func escaped(_ bytes: some Collection<UInt8>, limit: Int) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(min(bytes.count, limit))
        let hex = Array("0123456789abcdef".utf8)
        for byte in bytes {
            if out.count >= limit {
                return String(decoding: out, as: UTF8.self) + "…[cut]"
            }
            if byte == 0x09 || (0x20...0x7E).contains(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "\\"), UInt8(ascii: "x"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The line as dmesg prints it: `[ 43749.921808] text`.
    public var line: String {
        let seconds = String(microseconds / 1_000_000)
        let fraction = String(microseconds % 1_000_000)
        let padding = String(repeating: " ", count: max(0, 5 - seconds.count))
        return "[\(padding)\(seconds).\(String(repeating: "0", count: 6 - fraction.count))\(fraction)] \(text)"
    }
}
