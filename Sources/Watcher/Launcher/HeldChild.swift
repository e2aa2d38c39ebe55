// HeldChild: the launcher's child under --trace-exit, forked and held before its exec until its
// tracer has seized it (CShims' spawn.c: cp_spawn_held, cp_spawn_release). The one Watcher file
// that calls them.

import BoundedBytes
import CShims
import ReportModel
#if canImport(Glibc)
import Glibc
#endif

/// A child between its fork and its exec, waiting on a pipe. `release()` lets it exec (once).
struct HeldChild {
    let pid: ProcessID
    private let releaseFD: Int32
    private let errorFD: Int32

    /// cp_spawn_held: forks a child that resets crashport's handlers, blocks every signal and
    /// waits; once released, it takes `signalMask` and execs `path` with `arguments` and
    /// `environment` ("NAME=value").
    static func spawn(
        _ path: String, arguments: [String], environment: [String], signalMask: inout sigset_t
    ) throws(SystemCallError) -> HeldChild {
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var release: Int32 = -1, failure: Int32 = -1
        let pid = cp_spawn_held(path, argv, envp, &signalMask, &release, &failure)
        guard pid > 0 else { throw SystemCallError("fork", errno: errno) }
        return HeldChild(pid: ProcessID(pid), releaseFD: release, errorFD: failure)
    }

    /// cp_spawn_release: lets the child exec and waits for the outcome; throws the exec's
    /// errno, the child then reaped.
    func release() throws(SystemCallError) {
        let execError = cp_spawn_release(pid.rawValue, releaseFD, errorFD)
        guard execError == 0 else { throw SystemCallError("execve", errno: execError) }
    }

    /// Why the kernel would give the program privileges at its exec that a traced exec would
    /// not get ("set-user-ID root"); nil when it gains none, or crashport is root (whose
    /// CAP_SYS_PTRACE lets a traced exec keep them).
    static func privilegeOnExec(_ executable: String) -> String? {
        guard geteuid() != 0 else { return nil }
        var info = stat()
        guard stat(executable, &info) == 0 else { return nil }
        if info.st_mode & S_ISUID != 0 && info.st_uid != geteuid() { return "set-user-ID (uid \(info.st_uid))" }
        if info.st_mode & S_ISGID != 0 && info.st_gid != getegid() { return "set-group-ID (gid \(info.st_gid))" }
        if getxattr(executable, "security.capability", nil, 0) >= 0 { return "given file capabilities" }
        return nil
    }
}
