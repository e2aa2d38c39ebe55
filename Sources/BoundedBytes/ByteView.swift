// ByteView: bounds-checked little-endian reads over bytes that came from outside (a file, a
// process or a socket). Every accessor returns nil rather than reading out of bounds, and every
// offset is checked for overflow, so a hostile offset or size is an error value, never a trap.

/// Bounds-checked little-endian reads over a byte buffer. Every accessor returns nil instead of
/// reading out of bounds; offsets are checked for overflow.
/// Unchecked: a raw pointer (not Sendable) to bytes its owner keeps alive and no one changes under a reader.
public struct ByteView: @unchecked Sendable {
    public let bytes: UnsafeRawBufferPointer

    public init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    public var count: Int { bytes.count }

    @inline(__always)
    public func has(_ offset: UInt64, _ size: UInt64) -> Bool {
        let (end, overflow) = offset.addingReportingOverflow(size)
        return !overflow && end <= UInt64(bytes.count)
    }

    @inline(__always)
    public func load<T: FixedWidthInteger>(_ offset: UInt64, as type: T.Type = T.self) -> T? {
        guard has(offset, UInt64(MemoryLayout<T>.size)) else { return nil }
        return T(littleEndian: bytes.loadUnaligned(fromByteOffset: Int(offset), as: T.self))
    }

    public func u8(_ offset: UInt64) -> UInt8? { load(offset) }
    public func u16(_ offset: UInt64) -> UInt16? { load(offset) }
    public func u32(_ offset: UInt64) -> UInt32? { load(offset) }
    public func u64(_ offset: UInt64) -> UInt64? { load(offset) }

    public func slice(_ offset: UInt64, _ size: UInt64) -> ByteView? {
        guard has(offset, size) else { return nil }
        return ByteView(UnsafeRawBufferPointer(rebasing: bytes[Int(offset)..<Int(offset + size)]))
    }

    /// A NUL-terminated string starting at offset, bounded by the view.
    public func cString(_ offset: UInt64) -> String? {
        guard offset < UInt64(bytes.count) else { return nil }
        let start = Int(offset)
        var end = start
        while end < bytes.count && bytes[end] != 0 { end += 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    public func array(_ offset: UInt64, _ size: UInt64) -> [UInt8]? {
        guard has(offset, size) else { return nil }
        return Array(bytes[Int(offset)..<Int(offset + size)])
    }
}
