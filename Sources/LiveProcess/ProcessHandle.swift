// ProcessHandle: a pidfd on a process that is not our child (a sidecar's client), and what it
// can still tell once the process is gone: whether it has exited, and how.
//
// The pidfd is taken from the client's connection (SO_PEERPIDFD: the process that connected,
// with no pid to race against), else opened by pid. It stays valid whatever happens to the pid,
// so nothing read through it can belong to a process that later took the same pid. The exit
// status comes from the kernel (PIDFD_GET_INFO with PIDFD_INFO_EXIT, Linux 6.15), which records
// it once the process is reaped; before that, a zombie's /proc/PID/stat holds it (field 52),
// read only while the pidfd says the process still exists, so the pid is still its own.

import CShims
import Processes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

/// Owns one pidfd (closed at deinit). Used from one thread (the sidecar's serving loop).
public final class ProcessHandle {
    public let pid: ProcessID
    /// The pidfd: readable (POLLIN) once every thread of the process has exited.
    public let fd: Int32

    /// The process at the other end of a connected Unix socket (SO_PEERPIDFD), else `pid` by
    /// number (pidfd_open); nil when neither works (a kernel before 5.3, the process gone).
    public init?(peerOf socket: Int32, pid: ProcessID) {
        var fd = cp_peer_pidfd(socket)
        if fd < 0 { fd = cp_pidfd_open(pid.rawValue) }
        guard fd >= 0 else { return nil }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        self.pid = pid
        self.fd = fd
    }

    /// Our own child `pid` by number (pidfd_open: its pid cannot be reused before we reap it);
    /// nil when the kernel cannot open one (before 5.3).
    public init?(child pid: ProcessID) {
        let fd = cp_pidfd_open(pid.rawValue)
        guard fd >= 0 else { return nil }
        self.pid = pid
        self.fd = fd
    }

    deinit { close(fd) }

    /// Whether every thread of the process has exited (it is a zombie, or reaped).
    public var hasExited: Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents != 0
    }

    /// How the process ended, once it has.
    public enum ExitLookup: Equatable, Sendable {
        /// Known, and where from ("the kernel's pidfd", "/proc/PID/stat of its zombie").
        case known(ProcessExit, source: String)
        /// Not yet: it runs, or is a zombie its parent has not reaped (the kernel records the
        /// status for a pidfd at the reaping).
        case notYet
        /// The kernel will not say, and why.
        case unknown(String)
    }

    /// The exit status: the kernel's (through the pidfd) when it has it; with `zombie`, also a
    /// zombie's own /proc/PID/stat (its parent has not reaped it yet).
    public func exitStatus(zombie: Bool) -> ExitLookup {
        var status: Int32 = 0
        let answer = cp_pidfd_exit_status(fd, &status)
        if answer == 1 {
            return ProcessExit(waitStatus: status).map { .known($0, source: "the kernel's pidfd (PIDFD_INFO_EXIT)") }
                ?? .unknown("the kernel reported wait status \(status), which is not an end")
        }
        let failure = errno
        let unsupported = answer < 0 && (failure == ENOTTY || failure == EINVAL || failure == EOPNOTSUPP)
        if answer < 0 && !unsupported {
            // A moment around the reaping can answer with an error (seen once under load, with no
            // word of which): asked again until the caller's grace is over.
            guard zombie else { return .notYet }
            return .unknown("the kernel kept no exit status (\(String(cString: strerror(failure))))")
        }
        if zombie || unsupported, let exit = zombieStatus() { return .known(exit, source: "/proc/\(pid)/stat of its zombie") }
        if unsupported, cp_pidfd_exists(fd) == 0 {
            return .unknown(
                "it was reaped, and this kernel keeps no exit status for another process's child (PIDFD_INFO_EXIT needs Linux 6.15)"
            )
        }
        return .notYet
    }

    /// A zombie's exit status (/proc/PID/stat field 52, waitpid's form), read only while the
    /// pidfd says its process still exists: the pid then cannot have been reused.
    func zombieStatus() -> ProcessExit? {
        guard let fields = ProcFiles.statFields(of: pid), fields.first == "Z", fields.count > 49,
            let status = Int32(fields[49]), cp_pidfd_exists(fd) == 1
        else { return nil }
        return ProcessExit(waitStatus: status)
    }

    /// Whether the process (while it still exists) is on its way out: PF_EXITING in its
    /// /proc/PID/stat flags (field 9), or already a zombie. A connection closed by a process
    /// that is not exiting was closed on purpose (exec, close), not by its death.
    public var isExiting: Bool {
        if hasExited { return true }
        guard let fields = ProcFiles.statFields(of: pid), fields.count > 6, let flags = UInt32(fields[6]) else {
            return true
        }
        let exiting: UInt32 = 0x4  // PF_EXITING, include/linux/sched.h
        return flags & exiting != 0 || fields[0] == "Z" || fields[0] == "X"
    }
}
