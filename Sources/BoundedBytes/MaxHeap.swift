// MaxHeap: a binary max-heap, for the sweeps that need "the greatest still open" (the DWARF
// address map's innermost unit, a perf map's newest line). Inlinable so each use is specialised
// for its element type: the DWARF address map's build is on symbolication's hot path.

public struct MaxHeap<Element: Comparable> {
    @usableFromInline var items: [Element] = []

    @inlinable public init() {}

    @inlinable public var top: Element? { items.first }

    @inlinable public var isEmpty: Bool { items.isEmpty }

    @inlinable public mutating func push(_ value: Element) {
        items.append(value)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[parent] < items[child] else { break }
            items.swapAt(parent, child)
            child = parent
        }
    }

    /// Removes the greatest element (nothing when empty).
    @inlinable public mutating func pop() {
        guard !items.isEmpty else { return }
        items.swapAt(0, items.count - 1)
        items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var largest = parent
            if left < items.count, items[left] > items[largest] { largest = left }
            if right < items.count, items[right] > items[largest] { largest = right }
            guard largest != parent else { return }
            items.swapAt(parent, largest)
            parent = largest
        }
    }
}
