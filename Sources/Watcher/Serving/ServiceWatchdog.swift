// ServiceWatchdog: systemd's watchdog for the sidecar (WatchdogSec= in crashport.service, which
// systemd passes as WATCHDOG_USEC, and WATCHDOG_PID when it names one process). The serving loop
// says WATCHDOG=1 on $NOTIFY_SOCKET every half interval, and only from the serving loop: a
// sidecar whose loop is stopped, deadlocked or stuck misses it, and systemd kills and restarts
// it (Restart=on-failure). What a dying process waits for meanwhile is the guard's
// (HostGuard.swift), not this: systemd acts after the whole interval.

import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

struct ServiceWatchdog {
    /// Nanoseconds between two WATCHDOG=1 (half systemd's interval); nil: no watchdog asked for.
    let period: UInt64?
    private var last: UInt64 = 0

    /// From systemd's variables: WATCHDOG_USEC, for this process (WATCHDOG_PID unset or ours).
    init(environment: [String: String] = ProcessInfo.processInfo.environment, pid: pid_t = getpid()) {
        guard let text = environment["WATCHDOG_USEC"], let microseconds = UInt64(text), microseconds > 0,
            environment["WATCHDOG_PID"].map({ Int32($0) == pid }) ?? true
        else {
            period = nil
            return
        }
        period = max(microseconds / 2, 1) * 1000
    }

    /// Whether WATCHDOG=1 is due at `now` (and counts it as said).
    mutating func due(now: UInt64) -> Bool {
        guard let period, now &- last >= period || last == 0 else { return false }
        last = now
        return true
    }

    /// How long the loop may sleep before the next one is due, in milliseconds (nil: no limit).
    func timeout(now: UInt64) -> Int32? {
        guard let period else { return nil }
        let next = last &+ period
        return next <= now ? 0 : Int32(clamping: (next - now) / 1_000_000 + 1)
    }
}
