// ChildProcess: the processes Upload starts, through CShims' spawn.c: a close-on-exec pipe for
// before_send's stdin and stdout, and `crashport upload` started in the background as a
// report's owner. The one Upload file that calls spawn.c (HTTPClient is http.c's).

import BoundedBytes
import CShims
#if canImport(Glibc)
import Glibc
#endif

enum ChildProcess {
    /// cp_pipe (pipe2 with O_CLOEXEC): its read end and its write end.
    static func pipe() throws(SystemCallError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard cp_pipe(&fds) == 0 else { throw SystemCallError("pipe2", errno: errno) }
        return (fds[0], fds[1])
    }

    /// cp_spawn_detached: `path` with `arguments` and `environment` ("NAME=value") in its own
    /// session, as `uid` and `gid` when they differ from ours (no supplementary groups), stdin
    /// from /dev/null, stdout and stderr appended to `logPath` (opened by the child, with its
    /// ids). Its pid; the caller reaps it.
    static func detached(
        _ path: String, arguments: [String], environment: [String], logPath: String, uid: UInt32, gid: UInt32
    ) throws(SystemCallError) -> pid_t {
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        let child = argv.withUnsafeBufferPointer { arguments in
            envp.withUnsafeBufferPointer { variables in
                cp_spawn_detached(path, arguments.baseAddress, variables.baseAddress, logPath, uid, gid)
            }
        }
        guard child > 0 else { throw SystemCallError("fork", errno: errno) }
        return child
    }
}
