// Boxed: a stored property kept on the heap, out of line, with value semantics (copied on write).
//
// The sidecar's clients live in one dictionary, whose storage holds every bucket's value inline
// and at least a quarter of its buckets empty: a client's session and watch inline made each
// bucket 976 bytes, 245 KB of storage for 100 connected clients. Boxed, a bucket holds two
// pointers for them, and each client's state takes what it needs.

@propertyWrapper
struct Boxed<Value> {
    private final class Box {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    private var box: Box

    init(wrappedValue: Value) { box = Box(wrappedValue) }

    var wrappedValue: Value {
        get { box.value }
        set {
            if isKnownUniquelyReferenced(&box) {
                box.value = newValue
            } else {
                box = Box(newValue)
            }
        }
    }
}
