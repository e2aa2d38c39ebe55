// ChildOOMWatch: whether the OOM killer ended `crashport run`'s child, from the OOM-kill counter
// of the child's own memory cgroup, read while it lives (OOMCounters.reading) and reread from
// the same file at its death. A machine-wide count (/proc/vmstat) would call any SIGKILL an OOM
// kill when another cgroup ran out of memory meanwhile; it is used only when no counter of the
// child's cgroup can be read, or the child moved to another cgroup (whose count at the start
// is unknown), and the report's notes say which was used.

import LiveProcess
import ReportModel
import Reports
import Store

#if canImport(Glibc)
import Glibc
#endif

struct ChildOOMWatch {
    let pid: ProcessID
    /// The child's cgroup counter at the start; nil when it has none that can be read.
    let start: OOMCounters.Reading?
    let machineStart: UInt64?
    /// Its memory cgroup and what the cgroup's counters said at the start (for the session's
    /// memory: what they did during the run).
    let memoryCgroup: MemoryState.Cgroup?
    let memoryStart: MemoryRecord?
    /// Under --trace-exit, with crashport charged to the child's limited memory cgroup: the
    /// snapshots taken as the limit nears, for the stacks an OOM kill's reaper frees.
    var pressure: PressureSampler?

    /// Reads the counters now: call while the child lives (before its exec is fine: the exec
    /// keeps the cgroup).
    init(pid: ProcessID) {
        self.pid = pid
        start = OOMCounters.reading(of: pid)
        machineStart = OOMCounters.systemWide()
        // The counter's file names the cgroup: /proc/PID/cgroup is read once.
        memoryCgroup = start.flatMap { MemoryState.cgroup(ofCounterFile: $0.file) }
        memoryStart = memoryCgroup.flatMap { MemoryState.record(cgroup: $0, status: nil) }
    }

    /// The run's memory, once it has been reaped: the peak resident set of crashport's largest
    /// reaped child (the program: RUSAGE_CHILDREN's ru_maxrss) and its cgroup's counters since
    /// the start.
    func sessionMemory(oomKilled: Bool) -> SessionMemory? {
        var usage = rusage()
        let peak = getrusage(RUSAGE_CHILDREN.rawValue, &usage) == 0 ? UInt64(max(0, usage.ru_maxrss)) * 1024 : nil
        guard memoryCgroup != nil || peak != nil else { return nil }
        let end = memoryCgroup.flatMap { MemoryState.record(cgroup: $0, status: nil) }
        return SessionMemory.over(start: memoryStart, end: end, peakRSS: peak, oomKilled: oomKilled)
    }

    /// The count over the child's life, read at its death (while it is held at its exit, or a
    /// zombie: /proc/PID/cgroup still names its cgroup), and why the machine's count stands in
    /// when it does. Nil count: nothing could be read.
    func atDeath() -> (count: AbnormalEnd.OOMCount?, fallback: String?) {
        let now = OOMCounters.counterFile(of: pid)
        if let start, now == nil || now == start.file, let after = OOMCounters.kills(inFile: start.file) {
            return (AbnormalEnd.OOMCount(cgroup: start.cgroup, before: start.kills, after: after), nil)
        }
        let why: String
        switch (start, now) {
        case (let start?, let now?):
            let directory = now.lastIndex(of: "/").map { String(now[..<$0]) } ?? now
            why =
                "it moved from the memory cgroup \(start.cgroup) to \(directory) while it ran, and the count there at its start is unknown"
        case (let start?, nil):
            why = "its memory cgroup's counter \(start.file) could no longer be read"
        case (nil, _):
            why = "no OOM-kill counter of its memory cgroup could be read when it started"
        }
        guard let machineStart, let after = OOMCounters.systemWide() else { return (nil, why) }
        return (.machineWide(before: machineStart, after: after), why)
    }
}
