// DWARFCursor: the bounds-checked forward reader every parser of DWARF-encoded data reads
// through (the DWARF sections in Symbolication, .eh_frame here). Inlinable: it is the inner loop
// of symbolication, and it crosses a module boundary.

import BoundedBytes

/// A forward reader over a ByteView. Every read checks the bounds and returns nil past the
/// end; callers stop parsing at the first nil, so a truncated section ends a walk early.
/// Invariant: 0 <= offset <= view.count (callers that set `offset` keep it so).
@frozen
public struct DWARFCursor {
    public let view: ByteView
    public var offset: Int

    @inlinable public init(_ view: ByteView, offset: Int = 0) {
        self.view = view
        self.offset = min(max(offset, 0), view.count)
    }

    @inlinable public init(_ view: ByteView, offset: UInt64) {
        self.view = view
        self.offset = offset > UInt64(view.count) ? view.count : Int(offset)
    }

    @inlinable public var remaining: Int { view.count - offset }

    @inline(__always)
    @inlinable public mutating func skip(_ count: Int) -> Bool {
        guard count >= 0, count <= view.count - offset else { offset = view.count; return false }
        offset += count
        return true
    }

    @inline(__always)
    @inlinable public mutating func skip(_ count: UInt64) -> Bool {
        guard count <= UInt64(view.count - offset) else { offset = view.count; return false }
        offset += Int(count)
        return true
    }

    @inline(__always)
    @inlinable public mutating func u8() -> UInt8? {
        guard offset < view.count else { return nil }
        defer { offset += 1 }
        return view.bytes.load(fromByteOffset: offset, as: UInt8.self)
    }

    @inline(__always)
    @inlinable public mutating func fixed<T: FixedWidthInteger>(_ type: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard size <= view.count - offset else { offset = view.count; return nil }
        defer { offset += size }
        return T(littleEndian: view.bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    @inlinable public mutating func u16() -> UInt16? { fixed(UInt16.self) }
    @inlinable public mutating func u32() -> UInt32? { fixed(UInt32.self) }
    @inlinable public mutating func u64() -> UInt64? { fixed(UInt64.self) }

    /// A little-endian unsigned integer of 1...8 bytes (3-byte strx3/addrx3 included).
    @inline(__always)
    @inlinable public mutating func unsigned(size: Int) -> UInt64? {
        switch size {
        case 1: return u8().map(UInt64.init)
        case 2: return u16().map(UInt64.init)
        case 4: return u32().map(UInt64.init)
        case 8: return u64()
        default:
            guard size > 0, size <= 8, size <= view.count - offset else { offset = view.count; return nil }
            var value: UInt64 = 0
            for index in 0..<size {
                value |= UInt64(view.bytes.load(fromByteOffset: offset + index, as: UInt8.self)) << (8 * UInt64(index))
            }
            offset += size
            return value
        }
    }

    @inline(__always)
    @inlinable public mutating func uleb() -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while offset < view.count {
            let byte = view.bytes.load(fromByteOffset: offset, as: UInt8.self)
            offset += 1
            if shift < 64 { result |= UInt64(byte & 0x7F) << shift }
            shift += 7
            if byte & 0x80 == 0 { return result }
        }
        return nil
    }

    @inline(__always)
    @inlinable public mutating func sleb() -> Int64? {
        var result: Int64 = 0
        var shift: Int64 = 0
        while offset < view.count {
            let byte = view.bytes.load(fromByteOffset: offset, as: UInt8.self)
            offset += 1
            if shift < 64 { result |= Int64(byte & 0x7F) << shift }
            shift += 7
            if byte & 0x80 == 0 {
                if shift < 64 && byte & 0x40 != 0 { result |= Int64(bitPattern: UInt64.max << UInt64(shift)) }
                return result
            }
        }
        return nil
    }

    /// Skips a NUL-terminated string; returns its start offset.
    @inline(__always)
    @inlinable public mutating func skipCString() -> Int? {
        let start = offset
        while offset < view.count {
            let byte = view.bytes.load(fromByteOffset: offset, as: UInt8.self)
            offset += 1
            if byte == 0 { return start }
        }
        return nil
    }

    /// The initial length of a unit: (length, offsetSize), handling the 64-bit DWARF escape.
    @inlinable public mutating func initialLength() -> (length: UInt64, offsetSize: Int)? {
        guard let length32 = u32() else { return nil }
        if length32 == 0xFFFF_FFFF {
            guard let length64 = u64() else { return nil }
            return (length64, 8)
        }
        guard length32 < 0xFFFF_FFF0 else { return nil }
        return (UInt64(length32), 4)
    }
}

extension ByteView {
    /// The unsigned LEB128 at `offset`, which advances past it; nil when it runs off the end.
    /// The DWARF cursor's decoder, for other readers of DWARF-encoded data (.eh_frame).
    public func uleb128(at offset: inout UInt64) -> UInt64? {
        guard offset < UInt64(count) else { return nil }
        var cursor = DWARFCursor(self, offset: offset)
        defer { offset = UInt64(cursor.offset) }
        return cursor.uleb()
    }

    /// The signed LEB128 at `offset`, which advances past it; nil when it runs off the end.
    public func sleb128(at offset: inout UInt64) -> Int64? {
        guard offset < UInt64(count) else { return nil }
        var cursor = DWARFCursor(self, offset: offset)
        defer { offset = UInt64(cursor.offset) }
        return cursor.sleb()
    }
}
