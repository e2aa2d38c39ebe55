// SystemCallError: a C call that failed and the errno it left, as swift-system's Errno is, with
// the call named. What the typed wrappers over CShims throw (Watcher's UnixSocket and
// SignalDescriptor; Processes' ChildProcess and Credentials) instead of handing a bare -1 and a
// global errno up to their callers.

#if canImport(Glibc)
import Glibc
#endif

public struct SystemCallError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The call, by its C name ("signalfd", "accept4").
    public var call: String
    /// The errno it set.
    public var errno: Int32

    public init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// strerror(3)'s words for the errno, as crashport's messages show it.
    public var reason: String { String(cString: strerror(errno)) }

    public var description: String { "\(call): \(reason)" }
}
