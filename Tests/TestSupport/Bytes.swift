// Bytes: the one little-endian writer and reader the tests build and patch binary input with
// (ELF files, minidumps, the wire ABI), after rust-minidump's minidump-synth: fixed-width
// integers, text and padding appended in order, a field overwritten at an offset once its value
// is known, and a field read back. The format builders (ELFImage, MinidumpBytes, WireBytes) are
// written over it. Every host crashport supports is little-endian, and so is every format here.

extension Array where Element == UInt8 {
    /// The little-endian bytes of `value`, as many as its type is wide.
    public init<T: FixedWidthInteger>(littleEndian value: T) {
        self = (0..<(T.bitWidth / 8)).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    // MARK: Appending

    public mutating func append(u8 value: UInt8) { append(value) }
    public mutating func append(u16 value: UInt16) { append(contentsOf: [UInt8](littleEndian: value)) }
    public mutating func append(u32 value: UInt32) { append(contentsOf: [UInt8](littleEndian: value)) }
    public mutating func append(u64 value: UInt64) { append(contentsOf: [UInt8](littleEndian: value)) }
    public mutating func append(i32 value: Int32) { append(contentsOf: [UInt8](littleEndian: value)) }

    /// `count` zero bytes.
    public mutating func append(zeros count: Int) { append(contentsOf: repeatElement(0, count: count)) }

    /// Zero bytes up to `offset` (none when the bytes already reach it).
    public mutating func pad(to offset: Int) { append(zeros: Swift.max(0, offset - count)) }

    /// Zero bytes up to the next multiple of `alignment`.
    public mutating func align(to alignment: Int) { pad(to: (count + alignment - 1) / alignment * alignment) }

    /// The text's UTF-8 and a NUL.
    public mutating func append(cString text: String) { append(contentsOf: Array(text.utf8) + [0]) }

    /// The text's UTF-8 in a field of `size` bytes: cut to fit, the rest NUL.
    public mutating func append(_ text: String, fieldSize size: Int) {
        let utf8 = Array(text.utf8.prefix(size))
        append(contentsOf: utf8)
        append(zeros: size - utf8.count)
    }

    // MARK: Patching in place

    /// Overwrites the `size` bytes at `offset` with the low `size` bytes of `value`,
    /// little-endian. Past the end it traps, as a subscript does.
    public mutating func put(_ value: UInt64, at offset: Int, size: Int) {
        for index in 0..<size { self[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
    }

    public mutating func put(u16 value: UInt16, at offset: Int) { put(UInt64(value), at: offset, size: 2) }
    public mutating func put(u32 value: UInt32, at offset: Int) { put(UInt64(value), at: offset, size: 4) }
    public mutating func put(u64 value: UInt64, at offset: Int) { put(value, at: offset, size: 8) }

    // MARK: Reading

    public func u16(at offset: Int) -> UInt16 { UInt16(self[offset]) | UInt16(self[offset + 1]) << 8 }
    public func u32(at offset: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(self[offset + $1]) << UInt32(8 * $1) } }
    public func u64(at offset: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(self[offset + $1]) << UInt64(8 * $1) } }
}
