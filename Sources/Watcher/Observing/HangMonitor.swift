// HangMonitor: `--hang-ms MS`. The program calls crashport_heartbeat() from the loop whose stall
// is a hang; the watcher reads the heartbeat from outside (64 bytes of the app area's header,
// with process_vm_readv: no signal sent, no thread of ours inside the program) and judges it
// by its own clock: any change of the beat count is a beat, so a program's clock, a time
// namespace or garbage in the area cannot fake one's age. A program that never beat is never
// hung. One report per stall: the next only after the heartbeat has moved again; and at most
// `perWindow` in `window`, however the area is scribbled on (the rest are logged, not written).

import BoundedBytes
import LiveProcess
import ReportModel
import Reports
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct HangMonitor {
    enum Verdict: Equatable {
        case fine
        /// No beat for `milliseconds`; `thread` beat last (the process's word, to be checked);
        /// the `ordinal`th report in the window (1...perWindow).
        case hung(milliseconds: UInt64, thread: ThreadID, ordinal: Int)
        /// A hang was reported and the heartbeat moved again.
        case resumed
        /// A hang past the rate limit: logged, not reported.
        case suppressed
    }

    let limitNanoseconds: UInt64
    var lastCount: UInt64?
    var lastChange: UInt64 = 0
    var reported = false
    var reportTimes: [UInt64] = []
    static let perWindow = 5
    static let window: UInt64 = 600_000_000_000

    /// `milliseconds` come from a configuration file, a flag or a client's HELLO: in
    /// nanoseconds they saturate at UInt64.max (never hung) rather than overflow.
    init(milliseconds: UInt64) { limitNanoseconds = milliseconds.checkedMultiplying(1_000_000) ?? .max }

    /// How often to look: a quarter of the limit, between 10 ms and 1 s.
    var interval: Int32 { Int32(clamping: min(max(limitNanoseconds / 4_000_000, 10), 1000)) }

    /// Judges one look at the area's header (nil: unreadable or not in use) at monotonic `now`.
    mutating func look(header: [UInt8]?, now: UInt64) -> Verdict {
        guard let header, let beat = AppArea.heartbeat(header: header), beat.count != 0 else { return .fine }
        if beat.count != lastCount {
            lastCount = beat.count
            lastChange = now
            if reported {
                reported = false
                return .resumed
            }
            return .fine
        }
        guard !reported, now &- lastChange > limitNanoseconds else { return .fine }
        reported = true
        reportTimes = reportTimes.filter { now &- $0 < Self.window }
        guard reportTimes.count < Self.perWindow else { return .suppressed }
        reportTimes.append(now)
        return .hung(milliseconds: (now &- lastChange) / 1_000_000, thread: beat.thread, ordinal: reportTimes.count)
    }
}

/// What the crash report of a SIGABRT that follows a hang needs to know (read on the report
/// threads): each process's last hang report, whether crashport's hang-kill sent the SIGABRT,
/// and whether `crashport run` passed on a SIGABRT it got from pid 1 (systemd's watchdog, when
/// the service's main process is crashport run).
final class HangReports: Sendable {
    private struct Entry {
        var hang: String?
        var killed = false
        var relayedFromPidOne = false
        var at: UInt64
    }

    private let entries = Mutex<[ProcessID: Entry]>([:])

    private func update(_ pid: ProcessID, _ change: (inout Entry) -> Void) {
        entries.withLock { entries in
            let now = monotonicNanoseconds()
            if entries.count > 4096 { entries = entries.filter { now &- $0.value.at < 3_600_000_000_000 } }
            var entry = entries[pid] ?? Entry(at: now)
            entry.at = now
            change(&entry)
            entries[pid] = entry
        }
    }

    /// A hang report was written for `pid`; `killing`: crashport's hang-kill sends SIGABRT next.
    func hung(_ pid: ProcessID, report id: String, killing: Bool) {
        update(pid) {
            $0.hang = id
            $0.killed = killing
        }
    }

    /// crashport run passed on to `pid` a SIGABRT that pid 1 sent it.
    func relayedWatchdog(to pid: ProcessID) { update(pid) { $0.relayedFromPidOne = true } }

    /// A new process under a pid seen before: nothing of the old one applies.
    func forget(_ pid: ProcessID) { entries.withLock { _ = $0.removeValue(forKey: pid) } }

    /// Marks a SIGABRT's crash report: crashport's hang-kill (after the hang report), a watchdog's
    /// kill that crashport run passed on from pid 1, or one inferred from its sender (pid 1);
    /// the latter two link to a hang report before them, when there is one.
    func amend(_ event: inout Event, _ record: CrashRecord) {
        guard let entry = entries.withLock({ $0[record.pid] }) else { return }
        let fromUs =
            record.signal == SIGABRT && record.observation == nil && record.senderPID == ProcessID(getpid())
        var notes = event.notes ?? []
        if fromUs, entry.killed, let hang = entry.hang {
            event.cause = Watchdog.cause
            notes.append("crashport's hang-kill sent SIGABRT after hang report \(hang)")
        } else if fromUs, entry.relayedFromPidOne {
            event.cause = Watchdog.cause
            notes.append(Watchdog.relayedNote)
        } else if event.cause != Watchdog.cause {
            return
        }
        if let hang = entry.hang {
            event.related = hang
            if !entry.killed { notes.append("the process had hung before: hang report \(hang)") }
        }
        event.notes = notes
        event.title = Culprit.title(event)
    }
}
