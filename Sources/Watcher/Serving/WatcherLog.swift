// WatcherLog: the sidecar's log, one line per event on stderr (journald takes it from there)
// or in --log FILE (reopened on SIGHUP, for logrotate), never more lines per second than a
// flood allows: a token bucket lets bursts through, then counts what it drops and says how many
// once lines flow again. The buckets are per user: a line about a client is counted against its
// uid's bucket, so one user's flood drops that user's lines, never another user's; lines about no
// client (start, stop, SIGHUP) share one bucket of their own.

import BoundedBytes
import FoundationEssentials
import LiveProcess
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public final class WatcherLog: Sendable {
    /// One token bucket, and what it dropped since it last let a line through.
    struct Bucket {
        var tokens: Double
        var refilled: UInt64
        var suppressed = 0
    }

    struct State {
        var fd: Int32 = STDERR_FILENO
        /// Lines about no client.
        var global: Bucket
        /// Lines about a client, by its uid.
        var users: [UInt32: Bucket] = [:]
    }

    let path: String?
    let perSecond: Double
    let burst: Double
    private let state: Mutex<State>
    /// Users whose buckets are kept at most; past it, the buckets that dropped nothing are
    /// forgotten (a forgotten user starts again with a full burst).
    static let maximumUsers = 4096

    /// Lines to `path` (appended; nil: stderr), at most `perSecond` on average after a burst, for
    /// each user and for the lines about no client.
    public init(path: String?, perSecond: Double = 20, burst: Double = 200) {
        self.path = path
        self.perSecond = perSecond
        self.burst = burst
        state = Mutex(State(global: Bucket(tokens: burst, refilled: monotonicNanoseconds())))
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

    /// One line, "crashport: " first, unless the flood limit drops it: `uid`'s limit for a line
    /// about a client of that uid, the shared one for a line about none. Thread-safe.
    public func say(_ text: String, uid: UInt32? = nil) {
        let now = monotonicNanoseconds()
        let taken: (fd: Int32, dropped: Int)? = state.withLock { state in
            if let uid {
                if state.users[uid] == nil && state.users.count >= Self.maximumUsers {
                    state.users = state.users.filter { $0.value.suppressed > 0 }
                }
                var bucket = state.users[uid] ?? Bucket(tokens: burst, refilled: now)
                defer { state.users[uid] = bucket }
                return take(&bucket, now: now).map { (state.fd, $0) }
            }
            return take(&state.global, now: now).map { (state.fd, $0) }
        }
        guard let (fd, dropped) = taken else { return }
        var line = ""
        if dropped > 0 {
            let about = uid.map { " about uid \($0)" } ?? ""
            line += "crashport: (\(dropped) log line(s)\(about) dropped: more than \(Int(perSecond))/s)\n"
        }
        line += "crashport: " + text + "\n"
        _ = line.withCString { write(fd, $0, strlen($0)) }
    }

    /// Refills `bucket` and takes a token: the count dropped before this line (then reset), or
    /// nil when this line is dropped too.
    private func take(_ bucket: inout Bucket, now: UInt64) -> Int? {
        bucket.tokens = min(burst, bucket.tokens + Double(now &- bucket.refilled) / 1e9 * perSecond)
        bucket.refilled = now
        guard bucket.tokens >= 1 else {
            bucket.suppressed += 1
            return nil
        }
        bucket.tokens -= 1
        defer { bucket.suppressed = 0 }
        return bucket.suppressed
    }
}
