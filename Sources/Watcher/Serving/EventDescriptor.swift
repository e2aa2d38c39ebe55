// EventDescriptor: an eventfd (CShims' cp_eventfd: Swift's Glibc module has no
// <sys/eventfd.h>), the counter the kernel signals a cgroup v1 memory threshold or OOM notice on
// (MemoryNotices). The one Watcher file that calls it.

import BoundedBytes
import CShims
#if canImport(Glibc)
import Glibc
#endif

/// A non-blocking, close-on-exec eventfd. Its owner closes `fd`.
struct EventDescriptor {
    let fd: Int32

    /// cp_eventfd: a new counter at 0.
    static func make() throws(SystemCallError) -> EventDescriptor {
        let fd = cp_eventfd(0, 1)
        guard fd >= 0 else { throw SystemCallError("eventfd", errno: errno) }
        return EventDescriptor(fd: fd)
    }

    /// Reads the counter, which sets it back to 0: how many times it was signalled since the
    /// last read, 0 when it was not.
    func take() -> UInt64 {
        var value: UInt64 = 0
        return Glibc.read(fd, &value, 8) == 8 ? value : 0
    }
}
