// SortedSearch: the one binary search behind every "which module / symbol / region holds this
// address" lookup (symbol tables, module lists, captured memory, code ranges).

extension RandomAccessCollection where Index == Int {
    /// In a collection sorted by `key`, the index of the last element whose key is at or below
    /// `value`; nil when every key is above it.
    @inlinable
    public func lastIndex(atOrBelow value: UInt64, key: (Element) -> UInt64) -> Int? {
        var low = startIndex, high = endIndex
        while low < high {
            let middle = low + (high - low) / 2
            if key(self[middle]) <= value { low = middle + 1 } else { high = middle }
        }
        return low > startIndex ? low - 1 : nil
    }
}
