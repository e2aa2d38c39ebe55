// SidecarMemory: what a sidecar client's run did to its memory, for its session (RunHistory's
// SessionMemory), as `crashport run` records it for its child (ChildOOMWatch): its memory
// cgroup's limit, and its counters at HELLO and at the end (OOM kills, limit hits, the peak),
// the client's own peak resident set (VmHWM: read at its checks while it runs in a cgroup with a
// limit, and at its end while its process can still be read), and whether the OOM killer ended
// it. A client that ended before a check read its peak has none. So the last-run info's memory flags (crashport_last_run_detail's `oom_killed` and
// `memory_pressure`) hold under the sidecar too.

import LiveProcess
import Processes
import ReportModel
import Store

struct SidecarMemory: Sendable {
    let cgroup: MemoryState.Cgroup?
    let start: MemoryRecord?
    private(set) var peakRSS: UInt64?

    /// At HELLO: the cgroup named by the client's OOM-kill counter file (ClientWatch.oom), read now.
    init(counterFile: String?) {
        cgroup = counterFile.flatMap(MemoryState.cgroup(ofCounterFile:))
        start = cgroup.flatMap { MemoryState.record(cgroup: $0, status: nil) }
    }

    /// Whether a look at the client's peak while it runs is worth its read: a cgroup with a limit.
    var watchesPeak: Bool { start?.limit != nil }

    /// The client's peak resident set from its /proc/PID/status now, nil when unreadable.
    static func peak(of pid: ProcessID) -> UInt64? {
        ProcFiles.readText("/proc/\(pid)/status").flatMap(MemoryState.processPeak(status:))
    }

    /// Keeps a peak read while the client ran (the peak only grows: a read that failed keeps the last).
    mutating func keep(_ peak: UInt64) {
        peakRSS = max(peakRSS ?? 0, peak)
    }

    /// The run's memory at its end; nil when nothing was known of it.
    func session(oomKilled: Bool) -> SessionMemory? {
        guard cgroup != nil || peakRSS != nil else { return nil }
        let end = cgroup.flatMap { MemoryState.record(cgroup: $0, status: nil) }
        return SessionMemory.over(start: start, end: end, peakRSS: peakRSS, oomKilled: oomKilled)
    }
}
