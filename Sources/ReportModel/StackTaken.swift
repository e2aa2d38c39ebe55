// StackTaken: when the stacks of a death the watcher saw at its exit (`crashport run
// --trace-exit`, a traced sidecar client) were taken. At the death itself, as a rule; but the
// kernel's OOM reaper frees an OOM-killed process's memory, stacks included, and a watcher in
// the same memory cgroup cannot read it before then: the stacks then come from a snapshot taken
// under memory pressure before the kill (LiveProcess/PressureSnapshot), or are lost. A report's
// `stack_taken` section.

public struct StackTaken: Codable, Sendable, Equatable {
    /// "at_death": read at the death. "before_death": gone at the death; every thread's
    /// registers and stack from a snapshot `millisecondsBefore` earlier. "lost": gone at the
    /// death and no snapshot was taken: the frames are what the registers alone give.
    public var when: String
    /// For "before_death": how long before the death the snapshot was taken.
    public var millisecondsBefore: UInt64?
    /// For "before_death": the memory cgroup's usage that led to the snapshot, in bytes.
    public var usage: UInt64?

    public static let atDeath = "at_death"
    public static let beforeDeath = "before_death"
    public static let lost = "lost"

    public init(when: String, millisecondsBefore: UInt64? = nil, usage: UInt64? = nil) {
        self.when = when
        self.millisecondsBefore = millisecondsBefore
        self.usage = usage
    }

    enum CodingKeys: String, CodingKey {
        case when
        case millisecondsBefore = "ms_before_death"
        case usage
    }
}
