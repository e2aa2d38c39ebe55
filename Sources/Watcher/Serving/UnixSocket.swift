// UnixSocket: the crash socket's system calls (CShims' socket.c), one wrapper per call: listen,
// connect, accept, the peer's credentials, whether a passed descriptor is a listening
// SOCK_SEQPACKET socket, one message received with its sender and descriptors, and sd_notify's
// datagram. The one Watcher file that calls socket.c; failures are SystemCallErrors.

import BoundedBytes
import CShims
import ReportModel
#if canImport(Glibc)
import Glibc
#endif

/// A descriptor of an AF_UNIX SOCK_SEQPACKET socket. Does not own it: whoever keeps it closes it
/// (the sidecar's client table, the launcher's socketpair).
struct UnixSocket {
    let fd: Int32

    /// cp_unix_listen: bound to `name` (a path, or '@' for the abstract namespace), listening,
    /// with SO_PASSCRED, close-on-exec and non-blocking.
    static func listen(on name: String, backlog: Int32) throws(SystemCallError) -> UnixSocket {
        let fd = cp_unix_listen(name, backlog)
        guard fd >= 0 else { throw SystemCallError("listen", errno: errno) }
        return UnixSocket(fd: fd)
    }

    /// cp_unix_connect: connected to `name`, close-on-exec.
    static func connect(to name: String) throws(SystemCallError) -> UnixSocket {
        let fd = cp_unix_connect(name)
        guard fd >= 0 else { throw SystemCallError("connect", errno: errno) }
        return UnixSocket(fd: fd)
    }

    /// cp_unix_accept (accept4): the next connection, close-on-exec, non-blocking, with
    /// SO_PASSCRED.
    func accept() throws(SystemCallError) -> UnixSocket {
        let fd = cp_unix_accept(self.fd)
        guard fd >= 0 else { throw SystemCallError("accept4", errno: errno) }
        return UnixSocket(fd: fd)
    }

    /// cp_peer_credentials (SO_PEERCRED): who was at the other end when it connected.
    func peer() throws(SystemCallError) -> Sender {
        var pid: Int32 = 0, uid: UInt32 = 0, gid: UInt32 = 0
        guard cp_peer_credentials(fd, &pid, &uid, &gid) == 0 else {
            throw SystemCallError("getsockopt SO_PEERCRED", errno: errno)
        }
        return Sender(pid: ProcessID(pid), uid: uid, gid: gid)
    }

    /// cp_is_listening_seqpacket (SO_TYPE, SO_DOMAIN, SO_ACCEPTCONN): whether it is a listening
    /// AF_UNIX SOCK_SEQPACKET socket, as socket activation must hand us.
    var isListeningSeqpacket: Bool { cp_is_listening_seqpacket(fd) == 1 }

    /// One message, as cp_receive_message (recvmsg with SCM_CREDENTIALS and SCM_RIGHTS) got it.
    struct Message {
        /// The bytes received, at the start of the buffer.
        var count: Int
        /// It was larger than the buffer, or carried more descriptors than asked for.
        var truncated: Bool
        /// The kernel's credentials of the process that sent it.
        var sender: Sender
        /// The descriptors it passed (the caller closes them).
        var descriptors: [Int32]
    }

    /// cp_receive_message without blocking: a message into `buffer`, with at most
    /// `maxDescriptors` descriptors (the rest closed); nil at end of file.
    func receive(into buffer: inout [UInt8], maxDescriptors: Int) throws(SystemCallError) -> Message? {
        var truncated: Int32 = 0, pid: Int32 = 0, uid: UInt32 = 0, gid: UInt32 = 0, fdCount: Int32 = 0
        var fds = [Int32](repeating: -1, count: maxDescriptors)
        let count = buffer.withUnsafeMutableBytes { bytes in
            cp_receive_message(
                fd, bytes.baseAddress, UInt(bytes.count), &truncated, &pid, &uid, &gid, &fds, Int32(maxDescriptors),
                &fdCount, Int32(MSG_DONTWAIT))
        }
        if count < 0 { throw SystemCallError("recvmsg", errno: errno) }
        if count == 0 { return nil }
        return Message(
            count: count, truncated: truncated != 0, sender: Sender(pid: ProcessID(pid), uid: uid, gid: gid),
            descriptors: Array(fds.prefix(Int(fdCount))))
    }

    /// cp_notify: sd_notify's one datagram of `text` to the socket NOTIFY_SOCKET names.
    static func notify(_ socket: String, _ text: String) throws(SystemCallError) {
        guard cp_notify(socket, text) == 0 else { throw SystemCallError("sendto", errno: errno) }
    }
}
