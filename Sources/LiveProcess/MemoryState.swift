// MemoryState: a process's memory as the kernel accounts it, for a report's `memory` section
// (ReportModel/MemoryRecord). The cgroup is found as OOMCounters finds it (while the process
// is held: /proc/PID/cgroup is gone with it); its files are read after release, since a cgroup
// outlives its process. Every file is hostile text: what does not parse is left out.

import Processes
import ReportModel

public enum MemoryState {
    /// A memory cgroup: its directory, and whether it is v2's.
    public struct Cgroup: Sendable, Equatable {
        public var directory: String
        public var v2: Bool
    }

    /// The memory cgroup of `pid`, nil when there is none.
    public static func cgroup(of pid: ProcessID) -> Cgroup? {
        OOMCounters.counterFile(of: pid).flatMap(cgroup(ofCounterFile:))
    }

    /// The memory cgroup whose OOM-kill counter is `file` (OOMCounters.counterFile).
    public static func cgroup(ofCounterFile file: String) -> Cgroup? {
        guard let slash = file.lastIndex(of: "/") else { return nil }
        return Cgroup(directory: String(file[..<slash]), v2: file.hasSuffix("/memory.events"))
    }

    /// What the cgroup's files say now, with the process's peak resident set from its
    /// /proc/PID/status text (VmHWM).
    public static func record(cgroup: Cgroup?, status: String?) -> MemoryRecord? {
        var record = MemoryRecord()
        if let status { record.processPeak = processPeak(status: status) }
        if let cgroup {
            let directory = cgroup.directory, v2 = cgroup.v2
            record.cgroup = directory
            func number(_ name: String) -> UInt64? {
                ProcFiles.readText(directory + "/" + name).flatMap {
                    UInt64($0.split(separator: "\n").first.map(String.init) ?? "")
                }
            }
            var events: [String: UInt64] = [:]
            if v2 {
                record.limit = number("memory.max")  // "max" does not parse: unlimited
                record.usage = number("memory.current")
                record.peak = number("memory.peak")
                if let text = ProcFiles.readText(directory + "/memory.events") {
                    for name in ["oom_kill", "oom", "max", "high"] { events[name] = OOMCounters.counter(named: name, in: text) }
                }
                record.pressure = ProcFiles.readText(directory + "/memory.pressure").flatMap {
                    PressureRecord(psi: $0, scope: "cgroup")
                }
            } else {
                // v1 reports no limit as a huge number (PAGE_COUNTER_MAX pages).
                record.limit = number("memory.limit_in_bytes").flatMap { $0 >= 1 << 60 ? nil : $0 }
                record.usage = number("memory.usage_in_bytes")
                record.peak = number("memory.max_usage_in_bytes")
                if let text = ProcFiles.readText(directory + "/memory.oom_control") {
                    for name in ["oom_kill", "under_oom"] { events[name] = OOMCounters.counter(named: name, in: text) }
                }
                events["failcnt"] = number("memory.failcnt")
            }
            record.events = events.isEmpty ? nil : events
        }
        if record.pressure == nil {
            record.pressure = ProcFiles.readText("/proc/pressure/memory").flatMap { PressureRecord(psi: $0, scope: "machine") }
        }
        return record == MemoryRecord() ? nil : record
    }

    /// The peak resident set (VmHWM) in a /proc/PID/status text, in bytes.
    public static func processPeak(status: String) -> UInt64? { kilobytes("VmHWM:", in: status).map { $0 * 1024 } }

    /// "VmHWM:	  1234 kB" → 1234.
    static func kilobytes(_ key: String, in status: String) -> UInt64? {
        for line in status.split(separator: "\n") where line.hasPrefix(key) {
            let fields = line.dropFirst(key.count).split(whereSeparator: { $0 == " " || $0 == "\t" })
            return fields.first.flatMap { UInt64($0) }
        }
        return nil
    }
}
