// FrameRing: the frames of one unwind, bounded. A very deep stack (runaway recursion) keeps its
// first `head` frames (where the recursion started) and its last `capacity - head` (the crash
// end, nearest the outermost callers), and counts the ones left out between.

struct FrameRing<Element> {
    let capacity: Int
    let head: Int
    /// Frames pushed in all, kept or not.
    private(set) var walked = 0
    /// The first `capacity` frames in order; once full, slots from `head` on are a ring of the
    /// most recent `capacity - head` frames.
    private var storage: [Element] = []

    init(capacity: Int, head: Int) {
        self.capacity = max(capacity, 0)
        self.head = min(max(head, 0), self.capacity)
    }

    private var tail: Int { capacity - head }

    mutating func push(_ element: Element) {
        if walked < capacity {
            storage.append(element)
        } else if tail > 0 {
            storage[head + (walked - head) % tail] = element
        }
        walked += 1
    }

    /// Changes the most recently pushed element, if it is kept.
    mutating func updateLast(_ change: (inout Element) -> Void) {
        guard walked > 0 else { return }
        let last = walked - 1
        if last < capacity {
            change(&storage[last])
        } else if tail > 0 {
            change(&storage[head + (last - head) % tail])
        }
    }

    /// The kept frames in walk order, and how many were left out between head and tail.
    consuming func finish() -> (elements: [Element], skipped: Int) {
        guard walked > capacity else { return (storage, 0) }
        if tail > 0 {
            // The ring's oldest entry sits at head + (walked - head) % tail: rotate it to the
            // front, in place (three reversals).
            let start = (walked - head) % tail
            storage[head..<head + start].reverse()
            storage[head + start..<capacity].reverse()
            storage[head..<capacity].reverse()
        }
        return (storage, walked - capacity)
    }
}
