// RateLimit: at most so many events per key (a process, a user, a program) in any minute. The
// wire server's per-process limits on errors, settings and consent queries, and the sidecar's
// termination reports per user and per program, are each one.

import BoundedBytes
import Synchronization

/// At most `perMinute` events per key in any minute; forgets everything past 4,096 keys (a
/// flood of distinct keys cannot grow it without bound).
final class RateLimit<Key: Hashable & Sendable>: Sendable {
    let perMinute: Int
    private let times = Mutex<[Key: [UInt64]]>([:])

    init(perMinute: Int) { self.perMinute = perMinute }

    /// Counts an event of `key` at `now` (CLOCK_MONOTONIC ns) when the minute before it holds
    /// fewer than `perMinute`; whether it did.
    func allows(_ key: Key, now: UInt64 = monotonicNanoseconds()) -> Bool {
        times.withLock { times in
            if times.count > 4096 { times.removeAll() }
            let recent = (times[key] ?? []).filter { now &- $0 < 60_000_000_000 }
            guard recent.count < perMinute else {
                times[key] = recent
                return false
            }
            times[key] = recent + [now]
            return true
        }
    }
}
