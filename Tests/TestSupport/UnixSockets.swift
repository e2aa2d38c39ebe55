// UnixSockets: the tests' AF_UNIX sockets by path: bound (a datagram listener standing in for
// systemd's NOTIFY_SOCKET) or connected (to a sidecar, the coredump socket), one place that
// fills a sockaddr_un.

#if canImport(Glibc)
import Glibc
#endif

public enum UnixSockets {
    /// A new socket of `type` bound (`bind`) or connected to `path`; the descriptor, or the errno.
    public static func open(_ path: String, type: Int32, bind: Bool = false) -> Result<Int32, Errno> {
        let fd = socket(AF_UNIX, type, 0)
        guard fd >= 0 else { return .failure(Errno(errno)) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            for (index, byte) in path.utf8.prefix(bytes.count - 1).enumerated() { bytes[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind
                    ? Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    : Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let error = errno
            close(fd)
            return .failure(Errno(error))
        }
        return .success(fd)
    }

    /// An errno, as a Result's failure.
    public struct Errno: Error, Equatable, CustomStringConvertible {
        public let code: Int32
        public init(_ code: Int32) { self.code = code }
        public var description: String { String(cString: strerror(code)) }
    }
}
