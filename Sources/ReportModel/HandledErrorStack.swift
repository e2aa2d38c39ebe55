// HandledErrorStack: a handled error's own stack (crashport_report_error_stack), decoded from
// the stub's cp_error_stack block read out of the process (crashport_protocol.h).
//
// The bytes are the process's memory, so hostile: the block is taken only when its sequence is
// even, it is in use and names a thread; its count is clamped to CP_ERROR_FRAME_MAX and to the
// bytes read; a frame is taken only when its slot is used and it has an address or a function;
// text ends at its first NUL or the end of its array, and invalid UTF-8 is replaced.

import CCrashPortProtocol

public struct HandledErrorStack: Sendable, Equatable {
    /// One frame as the program gave it: an address (a return address), or an interpreter's
    /// function, file and line, or both.
    public struct Frame: Sendable, Equatable {
        public var address: UInt64?
        public var function: String?
        public var file: String?
        public var line: Int?
        /// Its function or file was cut to the stub's limit.
        public var truncated: Bool

        public init(
            address: UInt64? = nil, function: String? = nil, file: String? = nil, line: Int? = nil, truncated: Bool = false
        ) {
            self.address = address
            self.function = function
            self.file = file
            self.line = line
            self.truncated = truncated
        }
    }

    /// The thread that reported it (and wrote the block).
    public var thread: ThreadID
    /// Innermost first.
    public var frames: [Frame]
    /// Frames the program gave past the stub's limit.
    public var leftOut: UInt64

    /// The stub's limits (crashport.h, crashport_report_error_stack).
    public static let maximumFrames = Int(CP_ERROR_FRAME_MAX)
    /// The block's header: read first, for its count.
    public static let headerSize = MemoryLayout<cp_error_stack>.offset(of: \cp_error_stack.frames)!
    public static let frameSize = MemoryLayout<cp_error_frame>.size

    public init(thread: ThreadID, frames: [Frame], leftOut: UInt64 = 0) {
        self.thread = thread
        self.frames = frames
        self.leftOut = leftOut
    }

    /// The bytes worth reading after a header: the header and `count` frames, clamped.
    public static func size(header bytes: [UInt8]) -> Int {
        guard bytes.count >= headerSize else { return 0 }
        let count = min(Int(WireBytes(bytes: bytes).u32(field(\.count))), maximumFrames)
        return headerSize + count * frameSize
    }

    /// Decodes a block (its header and the frames after it), nil when it is free, being
    /// written, names no thread or holds no frame and left none out.
    public init?(bytes: [UInt8]) {
        guard bytes.count >= Self.headerSize else { return nil }
        let wire = WireBytes(bytes: bytes)
        guard wire.u32(Self.field(\.sequence)) & 1 == 0, wire.u32(Self.field(\.flags)) & CP_SLOT_USED != 0 else {
            return nil
        }
        let tid = Int32(bitPattern: wire.u32(Self.field(\.tid)))
        guard tid > 0 else { return nil }
        let count = min(
            Int(wire.u32(Self.field(\.count))), Self.maximumFrames, (bytes.count - Self.headerSize) / Self.frameSize)
        func text(_ start: Int, _ capacity: Int) -> String? {
            let field = bytes[start..<start + capacity].prefix { $0 != 0 }
            return field.isEmpty ? nil : String(decoding: field, as: UTF8.self)
        }
        var frames: [Frame] = []
        for index in 0..<count {
            let start = Self.headerSize + index * Self.frameSize
            func at<T>(_ path: KeyPath<cp_error_frame, T>) -> Int { start + MemoryLayout<cp_error_frame>.offset(of: path)! }
            let flags = wire.u32(at(\.flags))
            guard flags & CP_SLOT_USED != 0 else { continue }
            let address = wire.u64(at(\.address))
            let function = text(at(\.function), Int(CP_ERROR_FUNCTION_BYTES))
            guard address != 0 || function != nil else { continue }
            let line = wire.u32(at(\.line))
            frames.append(
                Frame(
                    address: address == 0 ? nil : address, function: function,
                    file: text(at(\.file), Int(CP_ERROR_FILE_BYTES)), line: line == 0 ? nil : Int(line),
                    truncated: flags & CP_SLOT_TRUNCATED != 0))
        }
        let leftOut = wire.u64(Self.field(\.left_out))
        guard !frames.isEmpty || leftOut > 0 else { return nil }
        self.init(thread: ThreadID(tid), frames: frames, leftOut: leftOut)
    }

    private static func field<T>(_ path: KeyPath<cp_error_stack, T>) -> Int {
        MemoryLayout<cp_error_stack>.offset(of: path)!
    }
}
