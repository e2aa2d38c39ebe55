// CoreDumpError: why a core stream gave no report at all. Anything less (a note that lies, a
// load out of order, a stream that ends among the loads) is a line in CoreDump.notes and the
// report goes on with what was kept.

public enum CoreDumpError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The stream ended at `offset`, before `what` was whole (the ELF header, the program
    /// headers, the first thread's registers).
    case truncated(what: String, offset: UInt64)
    /// Not an ELF core of this machine: a header field says otherwise.
    case unsupported(String)
    /// The headers contradict themselves (where the notes are, how large a header is).
    case malformed(String)
    /// read(2) failed with this errno.
    case read(errno: Int32)

    public var description: String {
        switch self {
        case .truncated(let what, let offset): return "the core stream ended at byte \(offset), inside \(what)"
        case .unsupported(let why): return "not an x86-64 ELF core: \(why)"
        case .malformed(let why): return "malformed core: \(why)"
        case .read(let errno): return "reading the core stream failed (errno \(errno))"
        }
    }
}
