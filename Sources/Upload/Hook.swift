// Hook: the programs Upload runs on a report (before_send, after_send), started through
// Processes' ChildProcess with close-on-exec pipes for their stdin and stdout, and given a
// deadline. (The other process Upload starts, `crashport upload` in the background, is
// UploadSpawner's.)

import BoundedBytes
import Processes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

enum Hook {
    /// How a hook ran.
    enum Run: Equatable {
        /// It could not be started: why (its start's or pipe2's error).
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
    static func run(
        _ program: String, arguments: [String] = [], input: [UInt8], seconds: Double, outputLimit: Int = .max,
        standardErrorToo: Bool = false
    ) -> Run {
        var options = ChildProcess.Options()
        options.standardInput = .pipe
        options.standardOutput = .pipe
        if standardErrorToo { options.standardError = .standardOutput }
        options.group = .own
        var none = sigset_t()
        sigemptyset(&none)
        options.signalMask = none
        options.defaultSignals = [SIGPIPE]
        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(program, arguments: [program] + arguments, options)
        } catch {
            return .cannotRun(error.reason)
        }
        // Written and read in one poll loop: a hook that answers before reading all of its input
        // must not deadlock us on a full pipe. A hook past its time is killed.
        let answer = exchange(input, writingTo: child.input!, readingFrom: child.output!, seconds: seconds, keeping: outputLimit)
        close(child.output!)
        if answer == nil { child.signal(SIGKILL, group: true) }
        let ended = child.wait()
        guard let answer else { return .timedOut }
        return .finished(ended.exit, output: answer.kept, dropped: answer.dropped)
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
