// ChunkedSource: bytes handed out as a pipe would, a few at a time (read(2) on a pipe returns
// what the writer has written so far): what the core stream reader's tests read from.

public final class ChunkedSource {
    public let bytes: [UInt8]
    /// The most one read returns; each read returns 1...chunk bytes, cycling.
    public let chunk: Int
    public private(set) var position = 0
    private var turn = 0

    public init(_ bytes: [UInt8], chunk: Int = 7) {
        self.bytes = bytes
        self.chunk = max(chunk, 1)
    }

    /// read(2)'s contract: fills the buffer's start, returns the count, 0 at the end.
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        turn += 1
        let count = min(buffer.count, bytes.count - position, 1 + turn % chunk)
        guard count > 0 else { return 0 }
        bytes.withUnsafeBytes { source in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[position..<position + count]))
        }
        position += count
        return count
    }
}
