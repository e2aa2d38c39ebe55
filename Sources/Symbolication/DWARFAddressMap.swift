// DWARFAddressMap: address ranges that may overlap, flattened into sorted disjoint segments,
// each owned by one value, for O(log n) lookup.
//
// Where ranges overlap, one value wins: the highest (the inline tree numbers DIEs in preorder,
// so the highest is the innermost scope, as LLVM's address-to-DIE map ends up) or the lowest
// (the unit map: LLVM's DWARFDebugAranges gives an address to the first unit describing it).
// Built by one sweep over the sorted range ends with a heap of the ranges open at each point.

import BoundedBytes
import ObjectFile

struct DWARFAddressMap: Sendable {
    enum Winner: Sendable { case highest, lowest }

    private let starts: DWARFSortedIndex
    private let ends: [UInt64]
    private let values: [Int32]

    init() {
        starts = DWARFSortedIndex(keys: [])
        ends = []
        values = []
    }

    /// `ranges[i]` belongs to `owners[i]`; owners lie in 0..<ownerCount. Empty ranges are ignored.
    init(ranges: [DWARFRange], owners: [Int32], ownerCount: Int, winner: Winner) {
        let (starts, ends, values) = DWARFAddressMap.flatten(
            ranges: ranges, owners: owners, ownerCount: ownerCount, winner: winner)
        self.starts = DWARFSortedIndex(keys: starts)
        self.ends = ends
        self.values = values
    }

    private static func flatten(
        ranges: [DWARFRange], owners: [Int32], ownerCount: Int, winner: Winner
    ) -> ([UInt64], [UInt64], [Int32]) {
        struct Event {
            var address: UInt64
            var owner: Int32
            var isStart: Bool
        }
        let count = min(ranges.count, owners.count)
        var starts: [UInt64] = [], ends: [UInt64] = [], values: [Int32] = []
        var events: [Event] = []
        events.reserveCapacity(count * 2)
        for index in 0..<count {
            let range = ranges[index], owner = owners[index]
            guard range.low < range.high, owner >= 0, Int(owner) < ownerCount else { continue }
            events.append(Event(address: range.low, owner: owner, isStart: true))
            events.append(Event(address: range.high, owner: owner, isStart: false))
        }
        guard !events.isEmpty else { return ([], [], []) }
        events.sort { $0.address < $1.address }

        var open = [Int32](repeating: 0, count: ownerCount)
        var heap = MaxHeap<Int32>()
        // The heap is a max-heap; for `lowest` it holds negated owners.
        let key: (Int32) -> Int32 = winner == .highest ? { $0 } : { -$0 }
        var previous: UInt64 = 0
        var index = 0
        while index < events.count {
            let address = events[index].address
            if let top = heap.top, previous < address {
                let owner = key(top)
                if let last = ends.last, last == previous, values.last == owner {
                    ends[ends.count - 1] = address
                } else {
                    starts.append(previous)
                    ends.append(address)
                    values.append(owner)
                }
            }
            while index < events.count && events[index].address == address {
                let event = events[index]
                if event.isStart {
                    open[Int(event.owner)] += 1
                    heap.push(key(event.owner))
                } else {
                    open[Int(event.owner)] -= 1
                }
                index += 1
            }
            while let top = heap.top, open[Int(key(top))] <= 0 { heap.pop() }
            previous = address
        }
        return (starts, ends, values)
    }

    /// The owner of the segment containing `address`, if any.
    @inline(__always)
    func lookup(_ address: UInt64) -> Int32? {
        let index = starts.upperBound(address)
        guard index > 0, address < ends[index - 1] else { return nil }
        return values[index - 1]
    }
}
