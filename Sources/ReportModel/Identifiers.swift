// ProcessID and ThreadID: the kernel's pid_t values, typed so that a thread id is never passed
// where a process id is meant. In JSON they are plain integers (RawRepresentable's Codable), so
// the event's schema is unchanged.

/// A pid_t with a meaning: what ProcessID and ThreadID share.
public protocol KernelID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByIntegerLiteral
where RawValue == Int32, IntegerLiteralType == Int32 {
    init(rawValue: Int32)
}

extension KernelID {
    public init(_ rawValue: Int32) { self.init(rawValue: rawValue) }
    public init(integerLiteral value: Int32) { self.init(rawValue: value) }
    public var description: String { String(rawValue) }
}

/// A process id (`getpid(2)`, the thread-group id).
public struct ProcessID: KernelID {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Its main thread, whose id is the process's.
    public var mainThread: ThreadID { ThreadID(rawValue) }
}

/// A thread id (`gettid(2)`); the main thread's equals its process's id.
public struct ThreadID: KernelID {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
}
