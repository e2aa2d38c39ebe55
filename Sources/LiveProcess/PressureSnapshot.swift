// PressureSnapshot: every thread's registers and a bounded copy of its stack, taken in a brief
// stop of a traced process whose memory cgroup is near its limit, for the report of an OOM kill
// that may come next. When the OOM killer kills a process, the kernel's OOM reaper frees its
// anonymous memory, stacks included, about two seconds later (OOM_REAPER_DELAY); a watcher in the
// same memory cgroup cannot read the stacks before that, since every page it faults in waits
// on the cgroup's reclaim until the reaper has freed the victim's memory. The capture at the
// kill then uses this snapshot for the threads whose stacks it finds gone, and the report says
// how long before the kill it was taken.
//
// It is taken into SnapshotBuffers, prepared when the sampler is set up, since the watcher
// shares the cgroup whose limit is near; this is the copy the capture at the death uses. The
// stop is a capture's (ThreadHold.suspendAll, bounded), with no /proc file but maps (when a
// stack is not placed yet) and cmdline (once) read and nothing else of the process touched; its
// cost is measured by tools/bench (`memory`).

import BoundedBytes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public struct PressureSnapshot: Sendable {
    /// Every thread that stopped: registers and the stack from its stack pointer up, bounded.
    public var threads: [ThreadSnapshot]
    /// /proc/PID/cmdline when it was taken (the reaper takes the arguments too).
    public var commandLine: [UInt8]?
    /// CLOCK_MONOTONIC when the threads were stopped.
    public var takenNanoseconds: UInt64
    /// The cgroup's usage that led to it, in bytes.
    public var usage: UInt64
    /// How long the process was stopped for it.
    public var stoppedNanoseconds: UInt64
    /// CLOCK_MONOTONIC when the watcher last saw the process alive after taking it (its
    /// sampler's last look before the death): the death came after, within one sampling
    /// interval unless the watcher itself was stalled.
    public var aliveNanoseconds: UInt64
    /// Why it was taken, in words (the kernel's notice, or a look at the usage), for the notes.
    public var cause: String?

    public init(
        threads: [ThreadSnapshot], commandLine: [UInt8]?, takenNanoseconds: UInt64, usage: UInt64,
        stoppedNanoseconds: UInt64, aliveNanoseconds: UInt64, cause: String? = nil
    ) {
        self.threads = threads
        self.commandLine = commandLine
        self.takenNanoseconds = takenNanoseconds
        self.usage = usage
        self.stoppedNanoseconds = stoppedNanoseconds
        self.aliveNanoseconds = aliveNanoseconds
        self.cause = cause
    }

    /// Stack bytes kept per thread, and in all: the snapshot lives in the watcher, which may be
    /// in the very cgroup whose limit is near (SnapshotBuffers maps the whole of it, touched,
    /// before it is needed).
    public static let threadStackLimit = 128 << 10
    public static let totalStackLimit = 2 << 20
    /// How long the threads may take to stop before the snapshot goes on without the rest.
    public static let stopTimeoutMilliseconds = 50

    /// Whether a stack read at a death is gone: nothing read, or only zeros (the pages the
    /// reaper freed read back as fresh ones).
    public static func isGone(_ stack: MemoryRegion?) -> Bool {
        guard let stack, !stack.bytes.isEmpty else { return true }
        return !stack.bytes.contains { $0 != 0 }
    }
}
