// Credentials and ProcessAccess: whose permissions apply when the watcher reads for a client.
//
// A sidecar running as root serves every user, but reads a client's process and files only as
// that client's user could: on the calling thread it takes on the user's filesystem ids, the
// user's primary group and no supplementary group, and no effective capability
// (cp_thread_assume, CSupport/shims/credentials.c), so the kernel's own checks answer for the
// user: open(2) of a file, and of /proc/PID/mem, maps, environ, root (ptrace_may_access with
// PTRACE_MODE_*_FSCREDS: the same uid and gid, a dumpable process, no CAP_SYS_PTRACE). Root's
// real and saved uids stay, so a client's user cannot signal the thread meanwhile.
//
// ptrace itself is root's (PTRACE_SEIZE checks the real uid, which must stay root's): it only
// stops threads. Nothing is read from a stopped process until the kernel has said, for the
// user, that its memory is theirs to read (ProcessAccess.openMemory), and that descriptor stays
// bound to the memory the process had then: an exec into a setuid program afterwards leaves it
// reading nothing.

import CShims
import ReportModel

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
        guard assumed == 0 else {
            throw InspectionError.system(call: "taking on the credentials of \(self)", errno: errno)
        }
        defer { _ = cp_thread_restore() }
        return try body()
    }
}

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
        } catch let error as InspectionError {
            return .failure(error)
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
