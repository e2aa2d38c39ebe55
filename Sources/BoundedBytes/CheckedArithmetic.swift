// Checked arithmetic for values read from hostile bytes.
//
// Every offset, count, size and address that comes from a file, a target process or a socket is
// combined through these helpers (or through ByteView, which checks its own offsets), so that an
// overflow is a nil the parser handles, never a Swift overflow trap that kills the watcher. The
// plain `+`, `-`, `*` and `Int(_:)` are for values crashport computed itself or that are bounded
// by a check just above (say which); `&+`/`&-` are for addresses, where wrapping is the meaning.
// `tools/fuzz` finds what review misses.

extension FixedWidthInteger {
    /// `self + other`, or nil when it overflows.
    @inlinable @inline(__always)
    public func checkedAdding(_ other: Self) -> Self? {
        let (result, overflow) = addingReportingOverflow(other)
        return overflow ? nil : result
    }

    /// `self - other`, or nil when it overflows (for unsigned values: when other > self).
    @inlinable @inline(__always)
    public func checkedSubtracting(_ other: Self) -> Self? {
        let (result, overflow) = subtractingReportingOverflow(other)
        return overflow ? nil : result
    }

    /// `self * other`, or nil when it overflows.
    @inlinable @inline(__always)
    public func checkedMultiplying(_ other: Self) -> Self? {
        let (result, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? nil : result
    }

    /// `self` rounded up to a multiple of `alignment` (a power of two), or nil when it overflows.
    @inlinable @inline(__always)
    public func checkedAligned(to alignment: Self) -> Self? {
        guard let bumped = checkedAdding(alignment - 1) else { return nil }
        return bumped & ~(alignment - 1)
    }
}

extension UInt64 {
    /// `start..<start + count`, or nil when the end overflows.
    @inlinable
    public static func checkedRange(start: UInt64, count: UInt64) -> Range<UInt64>? {
        guard let end = start.checkedAdding(count) else { return nil }
        return start..<end
    }
}

extension Int {
    /// A count or size from outside as an Int for indexing or allocation, or nil when it does not
    /// fit or exceeds `limit` (callers pass the most they are willing to allocate).
    @inlinable
    public init?(checkedCount value: UInt64, limit: Int = .max) {
        guard value <= UInt64(limit) else { return nil }
        self = Int(value)
    }
}
