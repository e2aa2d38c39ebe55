// Credentials: whose permissions apply when the watcher reads or writes for a user.
//
// A sidecar running as root serves every user, but reads a client's process and files only as
// that client's user could: on the calling thread it takes on the user's filesystem ids, the
// user's primary group and no supplementary group, and no effective capability
// (cp_thread_assume, CSupport/shims/credentials.c), so the kernel's own checks answer for the
// user: open(2) of a file, and of /proc/PID/mem, maps, environ, root (ptrace_may_access with
// PTRACE_MODE_*_FSCREDS: the same uid and gid, a dumpable process, no CAP_SYS_PTRACE). Root's
// real and saved uids stay, so a client's user cannot signal the thread meanwhile.
//
// The same credentials are what a root watcher writes a user's reports with (Store) and what
// it drops to, for good, in a child it starts for that user (ChildProcess). Reading a process
// as the user is LiveProcess's ProcessAccess, over these.

import BoundedBytes
import CShims

#if canImport(Glibc)
import Glibc
#endif

/// A user's credentials as the watcher applies them: uid, primary gid, and the supplementary
/// groups to keep (none by default: the sidecar never reads with groups the client's
/// connection did not vouch for).
public struct Credentials: Sendable, Hashable, CustomStringConvertible {
    public var uid: UInt32
    public var gid: UInt32
    public var groups: [UInt32]

    public init(uid: UInt32, gid: UInt32, groups: [UInt32] = []) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    /// Whether taking them on changes anything: the watcher runs as root, and they are another
    /// user's. (A watcher running as a user serves only that user; root's own clients are
    /// read as root.)
    public var apply: Bool { uid != 0 && Self.watcherIsRoot }

    static let watcherIsRoot = geteuid() == 0

    public var description: String { "uid \(uid) gid \(gid)" }

    /// Runs `body` on the calling thread with these credentials (see the file's comment), then
    /// gives root's back. Throws when the thread could not take them on (then `body` never
    /// ran: nothing is read with root's instead).
    public func perform<T>(_ body: () throws -> T) throws -> T {
        guard apply else { return try body() }
        let kept = groups.prefix(Int(CP_THREAD_GROUPS_MAX))
        let assumed = kept.withUnsafeBufferPointer {
            cp_thread_assume(uid, gid, $0.baseAddress, Int32($0.count))
        }
        guard assumed == 0 else { throw SystemCallError("taking on the credentials of \(self)", errno: errno) }
        defer { _ = cp_thread_restore() }
        return try body()
    }
}
