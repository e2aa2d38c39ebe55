// ChildProcess: the processes Upload starts: the hooks (before_send, after_send), run through
// posix_spawn with close-on-exec pipes for their stdin and stdout and a deadline, and
// `crashport upload` started in the background as a report's owner through CShims' spawn.c.
// The one Upload file that starts processes (HTTPClient is http.c's).

import BoundedBytes
import CShims
import ReportModel

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

    /// How a hook ran.
    enum HookRun: Equatable {
        /// It could not be started: why (posix_spawn's or pipe2's error).
        case cannotRun(String)
        /// It had not closed its output when its time was up: killed, with its process group.
        case timedOut
        /// It closed its output and was reaped: how it ended, the first bytes it printed (up to
        /// the limit), and how many more it printed, read and dropped.
        case finished(ProcessExit?, output: [UInt8], dropped: Int)
    }

    /// Runs `program` (argv[0] itself, then `arguments`) with crashport's environment, `input`
    /// on its stdin and its stdout read, stderr too when `standardErrorToo` (else it is
    /// crashport's), until it closes its output or `seconds` pass; then it is reaped, or killed
    /// first. It starts in a process group of its own, with no signal blocked and SIGPIPE at its
    /// default whatever crashport set for itself, so that the kill reaches what it started too.
    /// At most `outputLimit` bytes of its output are kept; the rest is read (it never blocks on
    /// a full pipe) and counted.
    static func hook(
        _ program: String, arguments: [String] = [], input: [UInt8], seconds: Double, outputLimit: Int = .max,
        standardErrorToo: Bool = false
    ) -> HookRun {
        let stdin: (read: Int32, write: Int32)
        let stdout: (read: Int32, write: Int32)
        do {
            stdin = try pipe()
        } catch {
            return .cannotRun("\(error.reason)")
        }
        do {
            stdout = try pipe()
        } catch {
            close(stdin.read)
            close(stdin.write)
            return .cannotRun("\(error.reason)")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin.read, STDIN_FILENO)
        posix_spawn_file_actions_adddup2(&actions, stdout.write, STDOUT_FILENO)
        if standardErrorToo { posix_spawn_file_actions_adddup2(&actions, stdout.write, STDERR_FILENO) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &pipeSignal)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        let argv: [UnsafeMutablePointer<CChar>?] = ([program] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = argv.withUnsafeBufferPointer {
            posix_spawn(&pid, program, &actions, &attributes, $0.baseAddress!, environ)
        }
        close(stdin.read)
        close(stdout.write)
        guard spawned == 0 else {
            close(stdin.write)
            close(stdout.read)
            return .cannotRun(String(cString: strerror(spawned)))
        }
        // Written and read in one poll loop: a hook that answers before reading all of its input
        // must not deadlock us on a full pipe. A hook past its time is killed.
        let answer = exchange(input, writingTo: stdin.write, readingFrom: stdout.read, seconds: seconds, keeping: outputLimit)
        close(stdout.read)
        if answer == nil { kill(-pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard let answer else { return .timedOut }
        return .finished(ProcessExit(waitStatus: status), output: answer.kept, dropped: answer.dropped)
    }

    /// Writes `bytes` to `writer` (closed when written, or when the reader stops taking them) while
    /// reading `reader` to its end, keeping the first `limit` bytes; what was kept and how many
    /// more were read, or nil when `seconds` passed first. SIGPIPE is held back on this thread
    /// meanwhile, and one it raised is taken before it is let through.
    static func exchange(
        _ bytes: [UInt8], writingTo writer: Int32, readingFrom reader: Int32, seconds: Double, keeping limit: Int = .max
    ) -> (kept: [UInt8], dropped: Int)? {
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
        defer {
            var none = timespec()
            while sigtimedwait(&pipeSignal, nil, &none) == SIGPIPE {}
            pthread_sigmask(SIG_SETMASK, &previous, nil)
        }
        _ = fcntl(writer, F_SETFL, fcntl(writer, F_GETFL) | O_NONBLOCK)
        var writing: Int32? = writer
        var written = 0
        if bytes.isEmpty {
            close(writer)
            writing = nil
        }
        var kept: [UInt8] = []
        var dropped = 0
        var chunk = [UInt8](repeating: 0, count: 65536)
        let deadline = monotonicNanoseconds() + UInt64(max(0, seconds) * 1e9)
        while true {
            let now = monotonicNanoseconds()
            guard now < deadline else {
                if let writing { close(writing) }
                return nil
            }
            var fds = [pollfd(fd: reader, events: Int16(POLLIN), revents: 0)]
            if let writing { fds.append(pollfd(fd: writing, events: Int16(POLLOUT), revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), Int32(min((deadline - now) / 1_000_000 + 1, 1000) as UInt64))
            if ready < 0 && errno != EINTR {
                if let writing { close(writing) }
                return nil
            }
            if let fd = writing, fds.count > 1, fds[1].revents != 0 {
                let count = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                if count > 0 { written += count }
                if written == bytes.count || (count < 0 && errno != EAGAIN && errno != EINTR) {
                    close(fd)
                    writing = nil
                }
            }
            if fds[0].revents != 0 {
                let count = chunk.withUnsafeMutableBytes { read(reader, $0.baseAddress, $0.count) }
                if count == 0 || (count < 0 && errno != EINTR && errno != EAGAIN) {
                    if let writing { close(writing) }
                    return (kept, dropped)
                }
                if count > 0 {
                    let taken = min(count, max(0, limit - kept.count))
                    kept += chunk[..<taken]
                    dropped += count - taken
                }
            }
        }
    }
}
