// PressureSampler: `crashport run --trace-exit` inside its child's memory cgroup, as a
// container's entrypoint runs it. An OOM kill there would lose its stacks: the kernel's OOM
// reaper frees the victim's memory about two seconds after the kill, and the watcher, whose
// every new page waits on the same cgroup's reclaim until then, reads them too late (measured:
// held 2.15 s, one frame left). So the watcher takes a PressureSnapshot of every thread (a stop
// of a fraction of a millisecond) as the limit nears, and the capture at the kill uses the
// latest for the stacks it finds gone.
//
// What wakes it first is the kernel's own notice (MemoryNotices: on v1 the usage crossing half
// the limit, 80 %, 85, 90 or 95 %, and the cgroup's OOM; on v2 memory.events' `high`, `max`,
// `oom` and a PSI trigger), polled by the serving loop with its other descriptors: a program
// that goes from idle to its limit in tens of milliseconds falls between two looks, not between
// two notices. A notice with usage at half the limit or more takes a snapshot at once (an OOM
// notice at any usage). Besides, as before, the watcher looks at the usage (one pread of
// memory.current or memory.usage_in_bytes, kept open) at an interval set by the rate it grows
// at, and from 80 % of the limit on (or from half of it when the limit is under 100 ms away at
// that rate) takes a snapshot: the fallback where no notice can be set up, and what refreshes
// the snapshot, whenever usage grew by another 2 % of the limit (at most every 10 ms) or a
// second has passed. Snapshots are taken into SnapshotBuffers, mapped and touched here, before
// the program is anywhere near its limit, so that taking one allocates nothing. The cost is
// measured by tools/bench (`memory`, docs/measuring.md).
//
// Only then: traced (the snapshot needs the threads the tracer holds), a cgroup with a limit,
// and crashport charged to it (its cgroup is the child's or below it). A watcher outside the
// cgroup reads the stacks at the kill, before the reaper, and samples nothing.

import BoundedBytes
import LiveProcess
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

final class PressureSampler {
    let child: ProcessID
    let limit: UInt64
    /// memory.current (v2) or memory.usage_in_bytes (v1), open for the sampler's life.
    private let usageFD: Int32
    /// Where the snapshots are taken, prepared here.
    let buffers: SnapshotBuffers
    /// The kernel's notices, polled by the serving loop (`pollDescriptors`, in this order).
    let notices: MemoryNotices
    /// The last moment the process was seen alive after the latest snapshot.
    private var aliveNanoseconds: UInt64 = 0
    private var nextLook: UInt64 = 0
    private var lastWake: UInt64 = 0
    /// The last look's usage and time, for the rate of growth.
    private var previous: (usage: UInt64, time: UInt64)?
    /// When the buffers last read the maps ahead.
    private var preparedAt: UInt64 = 0
    private(set) var looks = 0
    /// Wakes that brought a notice, and snapshots taken at one.
    private(set) var noticed = 0
    private(set) var snapshots = 0
    private(set) var noticedSnapshots = 0
    /// Whether the first snapshot came from a notice (nil: none taken).
    private(set) var firstByNotice: Bool?
    /// How long the snapshots kept the process stopped, in all and at most.
    private(set) var stoppedNanoseconds: UInt64 = 0
    private(set) var longestStopNanoseconds: UInt64 = 0

    /// Usage from which snapshots are taken, and the growth (of the limit) that takes another.
    static let thresholdPercent: UInt64 = 80
    static let growthPercent: UInt64 = 2
    static let minimumGapNanoseconds: UInt64 = 10_000_000
    static let refreshNanoseconds: UInt64 = 1_000_000_000
    static let prepareGapNanoseconds: UInt64 = 100_000_000

    /// A sampler for `child` in `cgroup` with its `limit` (as read at the start), when there is
    /// one and crashport is charged to the cgroup; nil otherwise. Sets up the notices and
    /// prepares the buffers now.
    init?(child: ProcessID, cgroup: MemoryState.Cgroup?, limit: UInt64?) {
        guard let cgroup, let limit, limit > 0, let own = MemoryState.cgroup(of: ProcessID(getpid())),
            own.directory == cgroup.directory || own.directory.hasPrefix(cgroup.directory + "/")
        else { return nil }
        let file = cgroup.directory + (cgroup.v2 ? "/memory.current" : "/memory.usage_in_bytes")
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        guard let buffers = SnapshotBuffers(pid: child) else {
            close(fd)
            return nil
        }
        self.child = child
        self.limit = limit
        self.buffers = buffers
        usageFD = fd
        notices = MemoryNotices(cgroup: cgroup, limit: limit, usageFD: fd)
    }

    /// With CRASHPORT_TIMING_FD (tools/bench), what the sampling did over the run.
    deinit {
        close(usageFD)
        if ReportWriter.timingFD != nil {
            let sources = notices.sources.map(\.rawValue).joined(separator: ",")
            let line =
                "crashport-pressure looks=\(looks) notices=\(noticed) snapshots=\(snapshots) noticed_snapshots=\(noticedSnapshots)"
                + " first_by_notice=\(firstByNotice.map { $0 ? 1 : 0 } ?? 0) stopped_ns=\(stoppedNanoseconds)"
                + " longest_stop_ns=\(longestStopNanoseconds) prepared_bytes=\(buffers.preparedBytes)"
                + " prepare_ns=\(buffers.preparedNanoseconds) locked=\(buffers.locked ? 1 : 0) maps_reads=\(buffers.mapsReads)"
                + " notices_from=\(sources.isEmpty ? "none" : sources)"
            ReportWriter.timingLine(line)
        }
    }

    /// The latest snapshot, copied out of the buffers: for the capture at the death.
    var latest: PressureSnapshot? { buffers.snapshot(alive: aliveNanoseconds) }

    /// The notices' descriptors, for the serving loop's poll; their revents go back to `look`.
    var pollDescriptors: [pollfd] { notices.pollDescriptors }

    /// The cgroup's usage now, nil when it cannot be read. Read into the stack and parsed in
    /// place: nothing allocated, since it is read at the limit too.
    func usage() -> UInt64? {
        withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { buffer in
            let count = pread(usageFD, buffer.baseAddress, buffer.count, 0)
            guard count > 0 else { return nil }
            let digits = buffer.prefix(count).prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
            guard !digits.isEmpty, digits.count <= 19 else { return nil }
            return digits.reduce(0) { $0 * 10 + UInt64($1 - UInt8(ascii: "0")) }
        }
    }

    /// Called once an OOM-killed program's threads have left their exit stops: waits, at most a
    /// second and allocating nothing, until the cgroup's usage is back under the snapshot
    /// threshold, that is until the kill's memory is freed. Until then the program, all its
    /// threads past their exit, is no longer a task the OOM killer counts as its victim, and a
    /// page crashport faulted in for the report would make crashport the next one (seen once in
    /// about 90 runs of a burst to a 64 MiB limit: no report at all).
    func awaitFreed(timeoutNanoseconds: UInt64 = 1_000_000_000) {
        let deadline = monotonicNanoseconds() + timeoutNanoseconds
        while monotonicNanoseconds() < deadline {
            if let usage = usage(), usage < limit / 100 * Self.thresholdPercent { return }
            usleep(1000)
        }
    }

    /// How long the serving loop may sleep before the next look, in milliseconds.
    func timeout(now: UInt64) -> Int32 {
        nextLook <= now ? 0 : Int32(clamping: (nextLook - now + 999_999) / 1_000_000)
    }

    /// Called from the tracer's thread whenever the serving loop wakes, before it handles the
    /// tracer's events, with what poll said of `pollDescriptors`: when a notice came or a look
    /// is due, reads the usage and takes a snapshot if the limit is near. The previous wake is
    /// when the process was last seen alive (a death is handled at the wake after it).
    func look(tracer: ExitTracer, now: UInt64, polled: ArraySlice<pollfd> = []) {
        let taken = buffers.takenNanoseconds
        if taken > 0, lastWake > taken { aliveNanoseconds = lastWake }
        lastWake = now
        var notice: MemoryNotices.Notice?
        for (index, descriptor) in polled.enumerated() {
            if let said = notices.drain(index, revents: descriptor.revents) { notice = max(notice ?? said, said) }
        }
        if notice != nil { noticed += 1 }
        guard now >= nextLook || notice != nil else { return }
        looks += 1
        guard let usage = usage() else {
            nextLook = now + 1_000_000_000
            return
        }
        let growth = previous.map { (usage: usage, time: now, before: $0.usage, then: $0.time) }
        nextLook = now + Self.interval(usage: usage, limit: limit, growth: growth)
        previous = (usage, now)
        guard Self.isNear(usage: usage, limit: limit, growth: growth, notice: notice) else {
            // Far from the limit, read ahead what the snapshot needs of /proc (the maps that
            // place the stacks), when a new thread or an exec has moved them: at most every
            // 100 ms, however often threads come and go.
            if buffers.preparedFor != tracer.layoutChanges, usage < limit / 2,
                now >= preparedAt + Self.prepareGapNanoseconds
            {
                buffers.prepare(changes: tracer.layoutChanges)
                preparedAt = now
            }
            return
        }
        if taken > 0 {
            guard
                Self.isRefreshDue(
                    usage: usage, limit: limit, latest: buffers.usage, since: now > taken ? now - taken : 0, notice: notice)
            else { return }
        }
        let took = buffers.take(holder: tracer, usage: usage, cause: notice?.cause ?? "a look at the usage")
        stoppedNanoseconds += buffers.lastStoppedNanoseconds
        longestStopNanoseconds = max(longestStopNanoseconds, buffers.lastStoppedNanoseconds)
        guard took else { return }
        snapshots += 1
        if notice != nil { noticedSnapshots += 1 }
        if firstByNotice == nil { firstByNotice = notice != nil }
    }

    /// Whether a snapshot is due: at a notice, an OOM's, or any other with usage at half the
    /// limit or more (a threshold crossed downwards says nothing); else as a look judges it.
    static func isNear(
        usage: UInt64, limit: UInt64, growth: (usage: UInt64, time: UInt64, before: UInt64, then: UInt64)?,
        notice: MemoryNotices.Notice?
    ) -> Bool {
        if notice == .oom || (notice != nil && usage >= limit / 2) { return true }
        return isNear(usage: usage, limit: limit, growth: growth)
    }

    /// Whether another snapshot is due, with one taken `since` nanoseconds ago at usage
    /// `latest`: a second passed, or at least 10 ms and usage grew by another step (or an OOM
    /// notice came: the kill is next).
    static func isRefreshDue(
        usage: UInt64, limit: UInt64, latest: UInt64, since: UInt64, notice: MemoryNotices.Notice?
    ) -> Bool {
        if since >= refreshNanoseconds { return true }
        guard since >= minimumGapNanoseconds else { return false }
        return notice == .oom || usage - min(usage, latest) >= limit / 100 * growthPercent
    }

    /// Whether a snapshot is due: usage at the threshold, or past half the limit and growing
    /// fast enough to reach the limit within `soonNanoseconds` (a program touching fresh memory
    /// fills the last fifth of a 64 MiB limit between two looks: it gets a snapshot earlier).
    static func isNear(
        usage: UInt64, limit: UInt64, growth: (usage: UInt64, time: UInt64, before: UInt64, then: UInt64)?
    ) -> Bool {
        if usage >= limit / 100 * thresholdPercent { return true }
        guard usage >= limit / 2, usage < limit, let growth, growth.usage > growth.before else { return false }
        let eta = Double(limit - usage) / Double(growth.usage - growth.before) * Double(max(growth.time &- growth.then, 1))
        return eta < Double(soonNanoseconds)
    }

    static let soonNanoseconds: UInt64 = 100_000_000

    /// The time until the next look, from the rate usage grew at since the last one: below the
    /// threshold, a third of the time it would take to reach it (a program touching fresh memory
    /// fills a 64 MiB limit in about 25 ms), between 0.5 and 100 ms; above, a third of the time
    /// to grow by another step, between 1 and 20 ms; 10 ms before a rate is known.
    static func interval(
        usage: UInt64, limit: UInt64, growth: (usage: UInt64, time: UInt64, before: UInt64, then: UInt64)?
    ) -> UInt64 {
        let threshold = limit / 100 * thresholdPercent
        guard let growth else { return 10_000_000 }
        let grew = growth.usage > growth.before ? growth.usage - growth.before : 0
        let elapsed = max(growth.time &- growth.then, 1)
        if usage >= threshold {
            // Above it a snapshot is in hand: the next is due at another step of growth.
            guard grew > 0 else { return 20_000_000 }
            let eta = Double(limit / 100 * growthPercent) / Double(grew) * Double(elapsed)
            return UInt64(min(max(eta / 3, 1_000_000), 20_000_000))
        }
        guard grew > 0 else { return usage < limit / 2 ? 100_000_000 : 20_000_000 }
        // ETA = remaining / (grew / elapsed), in Double: the product may not fit in 64 bits.
        let eta = Double(threshold - usage) / Double(grew) * Double(elapsed)
        return UInt64(min(max(eta / 3, 500_000), 100_000_000))
    }
}
