// DWARFSortedIndex: sorted 64-bit keys (addresses) with a bucket table over their span, for
// upper-bound searches that touch a few cache lines instead of one per halving.
//
// The span from the smallest to the largest key is cut into a power-of-two number of equal
// buckets (about one per four keys); each bucket records the first key at or above its start.
// A search goes straight to the address's bucket and bisects only the keys inside it. Skewed
// keys (a cluster far from the rest) just make some buckets hold more keys: the result is the
// same as a plain binary search, only slower. Immutable after init.

import BoundedBytes
import ObjectFile

struct DWARFSortedIndex: Sendable {
    let keys: [UInt64]
    private let minimum: UInt64
    private let shift: UInt64
    private let buckets: [Int32]  // buckets.count - 1 buckets, then keys.count

    /// `keys` must be sorted ascending.
    init(keys: [UInt64]) {
        self.keys = keys
        guard keys.count >= 64, keys.count < Int(Int32.max), let first = keys.first, let last = keys.last else {
            minimum = 0
            shift = 64
            buckets = []
            return
        }
        minimum = first
        let span = last - first
        var target: UInt64 = 1
        while target < UInt64(keys.count / 4) { target <<= 1 }
        var shift: UInt64 = 0
        while shift < 63 && (span >> shift) >= target { shift += 1 }
        self.shift = shift
        let count = Int(span >> shift) + 1
        var buckets = [Int32](repeating: 0, count: count + 1)
        var index = 0
        for bucket in 0..<count {
            let start = first + (UInt64(bucket) << shift)
            while index < keys.count && keys[index] < start { index += 1 }
            buckets[bucket] = Int32(index)
        }
        buckets[count] = Int32(keys.count)
        self.buckets = buckets
    }

    /// The number of keys <= `value`: the index of the first key above it.
    @inline(__always)
    func upperBound(_ value: UInt64) -> Int {
        var low = 0, high = keys.count
        if !buckets.isEmpty {
            guard value >= minimum else { return 0 }
            let bucket = (value - minimum) >> shift
            guard bucket < UInt64(buckets.count - 1) else { return keys.count }
            low = Int(buckets[Int(bucket)])
            high = Int(buckets[Int(bucket) + 1])
        }
        while low < high {
            let middle = (low + high) >> 1
            if keys[middle] <= value { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
