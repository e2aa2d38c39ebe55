// CoreStream: the core stream read forward only (a pipe or a socket cannot seek), through one
// fixed buffer. Every read is bounded by its caller; skipping and passing bytes by go through
// the buffer a chunk at a time, so a stream of any length costs the buffer's size and no more.
// Each call either consumes at least one byte or reports the end: no loop here can spin.

public struct CoreStream {
    /// Fills the buffer's start with the stream's next bytes and says how many; 0 at its end.
    public typealias Source = (UnsafeMutableRawBufferPointer) throws(CoreDumpError) -> Int

    private let source: Source
    private var buffer: [UInt8]
    /// Bytes of the stream consumed so far: the file offset of the next byte.
    private(set) var offset: UInt64 = 0
    /// Whether the source has said the stream ended.
    private(set) var ended = false

    init(source: @escaping Source, chunkSize: Int) {
        self.source = source
        buffer = [UInt8](repeating: 0, count: max(chunkSize, 64))
    }

    /// The next bytes, at most `limit` of them (the caller's bound on the buffer it asks for).
    private mutating func next(_ limit: Int) throws(CoreDumpError) -> Int {
        guard !ended, limit > 0 else { return 0 }
        let wanted = min(limit, buffer.count)
        // (withUnsafeMutableBytes rethrows untyped: the source's error comes out as a Result.)
        let count = try buffer.withUnsafeMutableBytes { raw in
            Result { () throws(CoreDumpError) -> Int in try source(UnsafeMutableRawBufferPointer(rebasing: raw[0..<wanted])) }
        }.get()
        // A source that claims more than it was given is a bug, not bytes: the stream ends.
        guard count > 0, count <= wanted else {
            ended = true
            return 0
        }
        offset += UInt64(count)
        return count
    }

    /// Exactly `count` bytes, or fewer when the stream ends first. `count` is the caller's
    /// bound (a header's size, a note the limits allow).
    mutating func read(_ count: Int) throws(CoreDumpError) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        try pass(UInt64(count)) { _, chunk in bytes.append(contentsOf: chunk) }
        return bytes
    }

    /// Reads and drops `count` bytes; returns how many there were.
    @discardableResult
    mutating func skip(_ count: UInt64) throws(CoreDumpError) -> UInt64 {
        try pass(count) { _, _ in }
    }

    /// Skips to stream offset `target`; false when it is behind the current offset or the
    /// stream ends first.
    mutating func skip(to target: UInt64) throws(CoreDumpError) -> Bool {
        guard target >= offset else { return false }
        let distance = target - offset
        return try skip(distance) == distance
    }

    /// Hands the next `count` bytes to `body` a chunk at a time, with each chunk's stream
    /// offset; returns how many bytes there were (fewer than `count`: the stream ended).
    @discardableResult
    mutating func pass(
        _ count: UInt64, _ body: (UInt64, UnsafeRawBufferPointer) -> Void
    ) throws(CoreDumpError) -> UInt64 {
        var passed: UInt64 = 0
        while passed < count {
            let at = offset
            let got = try next(Int(min(count - passed, UInt64(buffer.count))))
            guard got > 0 else { break }
            buffer.withUnsafeBytes { body(at, UnsafeRawBufferPointer(rebasing: $0[0..<got])) }
            passed += UInt64(got)
        }
        return passed
    }
}
