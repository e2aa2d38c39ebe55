// CoreSocket: the host level's system calls (CShims' coredump.c), one wrapper per call: the
// coredump socket's listen and accept, the dying process's pidfd and what the kernel says of it
// (PIDFD_INFO_COREDUMP), the pipe helper's message with its descriptors, and the settings of the
// processes involved (the sidecar not dumpable, a handed-on handler's RLIMIT_CORE). The one Watcher file
// that calls coredump.c; failures are SystemCallErrors.

import BoundedBytes
import CShims
import ReportModel
#if canImport(Glibc)
import Glibc
#endif

/// A descriptor of an AF_UNIX SOCK_STREAM socket the kernel connects to. Does not own it.
struct CoreSocket {
    let fd: Int32

    /// cp_stream_listen: bound at `path` with mode 0600, listening, close-on-exec, non-blocking.
    static func listen(at path: String, backlog: Int32) throws(SystemCallError) -> CoreSocket {
        let fd = cp_stream_listen(path, backlog)
        guard fd >= 0 else { throw SystemCallError("listen", errno: errno) }
        return CoreSocket(fd: fd)
    }

    /// cp_stream_accept (accept4): the next connection, close-on-exec, blocking.
    func accept() throws(SystemCallError) -> CoreSocket {
        let fd = cp_stream_accept(self.fd)
        guard fd >= 0 else { throw SystemCallError("accept4", errno: errno) }
        return CoreSocket(fd: fd)
    }

    /// cp_peer_pidfd (SO_PEERPIDFD): a pidfd of the process that connected (the caller closes it).
    func peerPidfd() throws(SystemCallError) -> Int32 {
        let pidfd = cp_peer_pidfd(fd)
        guard pidfd >= 0 else { throw SystemCallError("getsockopt SO_PEERPIDFD", errno: errno) }
        return pidfd
    }
}

/// What the kernel says of a process through its pidfd (PIDFD_GET_INFO): its pid, real ids, and
/// whether and as whom it is dumping core.
struct KernelDumpInfo: Equatable {
    var pid: ProcessID
    var uid: UInt32
    var gid: UInt32
    /// PIDFD_INFO_COREDUMP's mask: 0 where the kernel gave none.
    var coredumpMask: UInt32

    /// The kernel dumps it as its user (PIDFD_COREDUMP_USER) or as root (PIDFD_COREDUMP_ROOT).
    var isDumping: Bool { coredumpMask & (4 | 8) != 0 }
    /// suid_dumpable 2: the dump is root's alone.
    var rootOnly: Bool { coredumpMask & 8 != 0 }

    /// cp_pidfd_coredump_info.
    init(pidfd: Int32) throws(SystemCallError) {
        var info = cp_coredump_info()
        let known = cp_pidfd_coredump_info(pidfd, &info)
        guard known >= 0 else { throw SystemCallError("ioctl PIDFD_GET_INFO", errno: errno) }
        pid = ProcessID(Int32(info.pid))
        uid = info.ruid
        gid = info.rgid
        coredumpMask = known == 1 ? info.coredump_mask : 0
    }
}

extension UnixSocket {
    /// cp_send_with_fds (sendmsg with SCM_RIGHTS): `bytes` with up to four descriptors.
    func send(_ bytes: [UInt8], descriptors: [Int32]) throws(SystemCallError) {
        let sent = bytes.withUnsafeBytes {
            cp_send_with_fds(fd, $0.baseAddress, UInt($0.count), descriptors, Int32(descriptors.count))
        }
        guard sent == 0 else { throw SystemCallError("sendmsg", errno: errno) }
    }
}

/// The host level's own process settings.
enum HostProcessSettings {
    /// cp_set_not_dumpable: a crash of the sidecar itself is not dumped to its own socket.
    static func notDumpable() throws(SystemCallError) {
        guard cp_set_not_dumpable() == 0 else { throw SystemCallError("prctl PR_SET_DUMPABLE", errno: errno) }
    }

    /// cp_limit_core_to_one: a handler started for a core dumps no core of its own.
    static func limitCoreToOne(_ pid: pid_t) throws(SystemCallError) {
        guard cp_limit_core_to_one(pid) == 0 else { throw SystemCallError("prlimit RLIMIT_CORE", errno: errno) }
    }

    /// cp_pipe: a pipe, both ends close-on-exec.
    static func pipe() throws(SystemCallError) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard cp_pipe(&ends) == 0 else { throw SystemCallError("pipe2", errno: errno) }
        return (ends[0], ends[1])
    }
}
