// ProcessID and ThreadID: the kernel's pid_t values, typed so that a thread id is never passed
// where a process id is meant. In JSON they are plain integers (RawRepresentable's Codable), so
// the event's schema is unchanged.

/// A process id (`getpid(2)`, the thread-group id).
public struct ProcessID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByIntegerLiteral
{
    public var rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }
    public init(_ rawValue: Int32) { self.rawValue = rawValue }
    public init(integerLiteral value: Int32) { rawValue = value }

    public var description: String { String(rawValue) }
}

/// A thread id (`gettid(2)`); the main thread's equals its process's id.
public struct ThreadID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByIntegerLiteral
{
    public var rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }
    public init(_ rawValue: Int32) { self.rawValue = rawValue }
    public init(integerLiteral value: Int32) { rawValue = value }

    public var description: String { String(rawValue) }
}
