// HangMonitor: `--hang-ms MS`. The program calls crashport_heartbeat() from the loop whose stall
// is a hang; the watcher reads the heartbeat from outside (64 bytes of the app area's header,
// with process_vm_readv: no signal sent, no thread of ours inside the program) and judges it
// by its own clock: any change of the beat count is a beat, so a program's clock, a time
// namespace or garbage in the area cannot fake one's age. A program that never beat is never
// hung. One report per stall: the next only after the heartbeat has moved again; and at most
// `perWindow` in `window`, however the area is scribbled on (the rest are logged, not written).

import ReportModel

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

    init(milliseconds: UInt64) { limitNanoseconds = milliseconds * 1_000_000 }

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
