// MemoryRecord: what the kernel said about a process's memory when it was captured: its memory
// cgroup's limit, usage, peak and events (the OOM killer's, the limit's), the pressure (PSI) on
// it, and the process's own peak resident set. A report's `memory` section.

public struct MemoryRecord: Codable, Sendable, Equatable {
    /// The memory cgroup's directory ("/sys/fs/cgroup/memory/app", "/sys/fs/cgroup/app.slice").
    public var cgroup: String?
    /// Its limit in bytes (v1 memory.limit_in_bytes, v2 memory.max); nil when unlimited.
    public var limit: UInt64?
    /// Its usage when captured, and the most it has used (v1 max_usage_in_bytes, v2 memory.peak).
    public var usage: UInt64?
    public var peak: UInt64?
    /// The kernel's counters of the cgroup: `oom_kill` (the OOM killer killed in it), `oom` (it
    /// hit its limit and reclaim failed), `max` and `high` (v2: times at the limit or above
    /// memory.high), `failcnt` (v1: times an allocation hit the limit), `under_oom` (v1).
    public var events: [String: UInt64]?
    /// The share of time tasks were stalled on memory (PSI, percent, averaged over 10 s and 60 s):
    /// the cgroup's own (v2 memory.pressure), else the machine's (/proc/pressure/memory).
    public var pressure: PressureRecord?
    /// The process's own peak resident set (VmHWM), in bytes.
    public var processPeak: UInt64?

    public init() {}

    enum CodingKeys: String, CodingKey {
        case cgroup, limit, usage, peak, events, pressure
        case processPeak = "process_peak"
    }

    /// Whether the memory was under pressure: the OOM killer or the limit acted, usage came
    /// within 15 % of the limit, or tasks stalled on memory more than 10 % of the last 10 s.
    public var underPressure: Bool {
        if let events, ["oom_kill", "oom", "max", "under_oom"].contains(where: { (events[$0] ?? 0) > 0 }) { return true }
        if let limit, limit > 0, let peak = peak ?? usage, peak >= limit - limit / 100 * 15 { return true }
        return (pressure?.someAvg10 ?? 0) > 10
    }
}

public struct PressureRecord: Codable, Sendable, Equatable {
    /// "cgroup" or "machine".
    public var scope: String
    public var someAvg10: Double?
    public var someAvg60: Double?
    public var fullAvg10: Double?
    public var fullAvg60: Double?

    public init(scope: String) { self.scope = scope }

    enum CodingKeys: String, CodingKey {
        case scope
        case someAvg10 = "some_avg10"
        case someAvg60 = "some_avg60"
        case fullAvg10 = "full_avg10"
        case fullAvg60 = "full_avg60"
    }

    /// PSI's text ("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=…"); nil when
    /// no line parses.
    public init?(psi text: String, scope: String) {
        self.init(scope: scope)
        var any = false
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let kind = fields.first, kind == "some" || kind == "full" else { continue }
            var values: [Substring: Double] = [:]
            for field in fields.dropFirst() {
                let pair = field.split(separator: "=", maxSplits: 1)
                if pair.count == 2, let value = Double(pair[1]), value.isFinite, value >= 0 { values[pair[0]] = value }
            }
            if kind == "some" {
                someAvg10 = values["avg10"]
                someAvg60 = values["avg60"]
            } else {
                fullAvg10 = values["avg10"]
                fullAvg60 = values["avg60"]
            }
            any = any || !values.isEmpty
        }
        if !any { return nil }
    }
}
