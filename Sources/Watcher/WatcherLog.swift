// WatcherLog: the sidecar's log, one line per event on stderr (journald takes it from there)
// or in --log FILE (reopened on SIGHUP, for logrotate), never more lines per second than a
// flood allows: a token bucket lets bursts through, then counts what it drops and says how many
// once lines flow again.

import BoundedBytes
import FoundationEssentials
import LiveProcess
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public final class WatcherLog: Sendable {
    struct State {
        var fd: Int32 = STDERR_FILENO
        var tokens: Double
        var refilled: UInt64
        var suppressed = 0
    }

    let path: String?
    let perSecond: Double
    let burst: Double
    private let state: Mutex<State>

    /// Lines to `path` (appended; nil: stderr), at most `perSecond` on average after a burst.
    public init(path: String?, perSecond: Double = 20, burst: Double = 200) {
        self.path = path
        self.perSecond = perSecond
        self.burst = burst
        state = Mutex(State(tokens: burst, refilled: monotonicNanoseconds()))
        reopen()
    }

    /// Opens the log file again (after logrotate moved it); stderr when there is none or it
    /// cannot be opened (said once there).
    public func reopen() {
        guard let path else { return }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
        state.withLock { state in
            if state.fd != STDERR_FILENO { close(state.fd) }
            state.fd = fd >= 0 ? fd : STDERR_FILENO
        }
        if fd < 0 { say("cannot open the log \(path) (\(String(cString: strerror(errno)))); logging to stderr") }
    }

    /// One line, "crashport: " first, unless the flood limit drops it.
    public func say(_ text: String) {
        let now = monotonicNanoseconds()
        let taken: (fd: Int32, dropped: Int)? = state.withLock { state in
            state.tokens = min(burst, state.tokens + Double(now &- state.refilled) / 1e9 * perSecond)
            state.refilled = now
            guard state.tokens >= 1 else {
                state.suppressed += 1
                return nil
            }
            state.tokens -= 1
            defer { state.suppressed = 0 }
            return (state.fd, state.suppressed)
        }
        guard let (fd, dropped) = taken else { return }
        var line = ""
        if dropped > 0 { line += "crashport: (\(dropped) log line(s) dropped: more than \(Int(perSecond))/s)\n" }
        line += "crashport: " + text + "\n"
        _ = line.withCString { write(fd, $0, strlen($0)) }
    }
}

/// Text to stderr as it is (no limit, no prefix): the command line's messages.
public enum StandardError {
    public static func write(_ text: String) {
        writeAll(STDERR_FILENO, Array(text.utf8))
    }
}
