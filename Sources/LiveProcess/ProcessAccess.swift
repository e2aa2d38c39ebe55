// ProcessAccess: a live process read with the credentials of the user it is read for.
//
// A root sidecar reads a client's process only as the client's user could (Processes'
// Credentials: the user's filesystem ids on the calling thread, no effective capability), so
// the kernel's own checks answer for the user: open(2) of /proc/PID/mem, maps, environ, root
// (ptrace_may_access with PTRACE_MODE_*_FSCREDS: the same uid and gid, a dumpable process, no
// CAP_SYS_PTRACE).
//
// ptrace itself is root's (PTRACE_SEIZE checks the real uid, which must stay root's): it only
// stops threads. Nothing is read from a stopped process until the kernel has said, for the
// user, that its memory is theirs to read (ProcessAccess.openMemory), and that descriptor stays
// bound to the memory the process had then: an exec into a setuid program afterwards leaves it
// reading nothing.

import BoundedBytes
import Processes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

/// A live process as one user may read it. Every read of a client's process (its memory, its
/// /proc files, its module files) goes through one of these, which carries whose credentials
/// apply; `credentials` nil is the watcher's own (`crashport run`'s child, which is the same
/// user's).
public struct ProcessAccess: Sendable {
    public let pid: ProcessID
    public let credentials: Credentials?

    public init(pid: ProcessID, as credentials: Credentials?) {
        self.pid = pid
        self.credentials = credentials?.apply == true ? credentials : nil
    }

    /// The process read with the watcher's own credentials.
    public static func own(_ pid: ProcessID) -> ProcessAccess { ProcessAccess(pid: pid, as: nil) }

    /// Runs `body` with the credentials that apply.
    public func perform<T>(_ body: () throws -> T) throws -> T {
        guard let credentials else { return try body() }
        return try credentials.perform(body)
    }

    /// The process's memory. For another user, /proc/PID/mem opened now with that user's
    /// credentials: the kernel decides (same ids, dumpable, no capabilities), and the reader
    /// stays bound to the memory the process had at this moment. With the watcher's own
    /// credentials, process_vm_readv first (faster), /proc/PID/mem when it refuses.
    public func openMemory() -> Result<ProcessMemory, InspectionError> {
        guard credentials != nil else { return .success(ProcessMemory(pid: pid)) }
        do {
            let (fd, error) = try perform {
                let fd = open("/proc/\(pid)/mem", O_RDONLY | O_CLOEXEC)
                return (fd, errno)
            }
            guard fd >= 0 else { return .failure(.system(call: "open(/proc/\(pid)/mem) as \(credentials!)", errno: error)) }
            return .success(ProcessMemory(pid: pid, boundDescriptor: fd))
        } catch let error as SystemCallError {
            return .failure(.system(call: error.call, errno: error.errno))
        } catch {
            return .failure(.malformed("\(error)"))
        }
    }

    /// Whether the kernel lets the user read the process's memory now (nil: the process is
    /// gone, so it cannot say).
    public func mayReadMemory() -> Bool? {
        switch openMemory() {
        case .success: return true
        case .failure(let error): return error.errno == ENOENT || error.errno == ESRCH ? nil : false
        }
    }

    /// /proc/PID/`name`, read with the credentials that apply; nil when it cannot be opened.
    public func read(_ name: String, limit: Int = 16 << 20) -> [UInt8]? {
        (try? perform { ProcFiles.read("/proc/\(pid)/\(name)", limit: limit) }) ?? nil
    }

    /// Several /proc/PID files and the target of /proc/PID/exe, read with one change of
    /// credentials (capture reads them all while the process is held); a file that cannot be
    /// opened is left out.
    public func procFiles(_ names: [String]) -> (files: [String: [UInt8]], executable: String?) {
        (try? perform {
            (
                Dictionary(
                    names.compactMap { name in ProcFiles.read("/proc/\(pid)/\(name)").map { (name, $0) } },
                    uniquingKeysWith: { first, _ in first }),
                ProcFiles.executable(of: pid)
            )
        }) ?? ([:], nil)
    }

    /// Threads' names (/proc/PID/task/TID/comm), as the user may see them, read with one change
    /// of credentials.
    public func threadNames(_ tids: [ThreadID]) -> [ThreadID: String] {
        (try? perform { Dictionary(tids.map { ($0, ProcFiles.threadName(pid: pid, tid: $0)) }, uniquingKeysWith: { a, _ in a }) })
            ?? [:]
    }
}
