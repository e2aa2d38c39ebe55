// ReportPool: the sidecar's bounded pool for everything after a process is released
// (unwinding, symbolication, writing the report). Capture stays serial on the sidecar's main
// thread, so a crashing process waits only for its own capture and the captures queued before
// it; `capacity` bounds the captures held in memory, and a full queue makes the main thread
// write one report itself before taking the next crash (back-pressure, not growth).
//
// Two queues: `submit`'s jobs (a report's first step: its minidump and captured event on disk)
// run on the pool's threads; `defer`'s (the second step: unwinding, symbolication, the full
// event; the run history's writes) on one more thread of its own, at a lower CPU priority (nice
// 10), and only while no first step waits or runs, so that in a storm of crashes every report is
// on disk before the first is symbolicated, and a symbolication in progress takes CPU from
// neither capture nor first steps (nor do its fsyncs stall their file creations). On an idle
// machine the niceness costs nothing. Deferred jobs hold their captures (every thread's stack)
// until they run, in memory or, when they would wait behind another report, on disk
// (CaptureSpill): at most `deferredBudget` bytes of them wait; past it, `defer` refuses and the
// caller runs the job at once. One runs at a time: one symbolication's memory at a time.

import CShims
import Glibc

/// Unchecked: its queues are guarded by the pthread mutex and condition variable it holds.
public final class ReportPool: @unchecked Sendable {
    private let condition = Condition()
    private var queue: [@Sendable () -> Void] = []
    private var later: [(bytes: Int, job: @Sendable () -> Void)] = []
    private var laterBytes = 0
    private var running = 0
    /// First steps running now (the deferred thread waits for none).
    private var runningFirst = 0
    private var stopping = false
    /// Whether a first step ran since the deferred thread last trimmed the heap.
    private var firstStepsSinceTrim = false
    /// Deferred jobs queued that hold a capture (bytes > 0), and whether the running one does.
    private var laterHolding = 0
    private var runningLaterHolds = false
    private let capacity: Int
    private let deferredBudget: Int

    /// The most the captures of deferred jobs may hold while they wait (64 MiB: a storm of
    /// 500-thread captures waits a few at a time, a storm of small ones all at once).
    public static let defaultDeferredBudget = 64 << 20

    public init(threads count: Int, capacity: Int = 32, deferredBudget: Int = ReportPool.defaultDeferredBudget) {
        self.capacity = max(1, capacity)
        self.deferredBudget = max(0, deferredBudget)
        for index in 0..<max(1, count) {
            startThread(name: "report-\(index)") { [self] in work() }
        }
        startThread(name: "report-later") { [self] in
            // Who 0: on Linux, the calling thread only (its nice value is per thread).
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, Self.laterNice)
            workLater()
        }
    }

    /// Queues a job; runs it on the calling thread when the queue is full.
    public func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        if queue.count >= capacity {
            condition.unlock()
            job()
            return
        }
        queue.append(job)
        condition.broadcast()
        condition.unlock()
    }

    /// Queues a job to run once no `submit`ted job waits. `bytes`: what it holds while it waits.
    /// Returns false, queuing nothing, when that would pass the budget (the caller runs it now).
    public func deferJob(holding bytes: Int, _ job: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let bytes = max(0, bytes)
        guard !stopping, laterBytes + bytes <= deferredBudget else {
            return false
        }
        later.append((bytes, job))
        laterBytes += bytes
        if bytes > 0 { laterHolding += 1 }
        condition.broadcast()
        return true
    }

    /// Whether a job deferred now would wait behind another report: a first step queued (the
    /// caller's own, running, is not counted), or a deferred job that holds a capture, queued or
    /// running (not the short writes of run records, which hold none).
    public var deferredJobWouldWait: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !queue.isEmpty || laterHolding > 0 || runningLaterHolds
    }

    /// Waits until every queued job (deferred ones too) has run.
    public func drain() {
        condition.lock()
        while !queue.isEmpty || !later.isEmpty || running > 0 { condition.wait() }
        condition.unlock()
    }

    /// Jobs queued or running now.
    public var pending: Int {
        condition.lock()
        defer { condition.unlock() }
        return queue.count + later.count + running
    }

    /// The deferred thread's nice value.
    static let laterNice: Int32 = 10

    private func workLater() {
        while true {
            condition.lock()
            // Not while a first step waits or runs: a second step's fsyncs make the file system
            // commit its journal, and every create of a first step waits for that commit.
            while later.isEmpty || !queue.isEmpty || runningFirst > 0 { condition.wait() }
            let next = later.removeFirst()
            laterBytes -= next.bytes
            if next.bytes > 0 { laterHolding -= 1 }
            runningLaterHolds = next.bytes > 0
            running += 1
            // The first second step after first steps, with more reports waiting (a storm): the
            // heap the captures and first steps freed, scattered among what the waiting steps
            // hold, goes back before the second steps' own work comes on top of it (100 crashes:
            // 0.4 MB of the peak).
            let trim = firstStepsSinceTrim && next.bytes > 0 && laterHolding > 0
            if trim { firstStepsSinceTrim = false }
            condition.unlock()
            if trim { _ = malloc_trim(0) }
            next.job()
            condition.lock()
            runningLaterHolds = false
            running -= 1
            finished()
        }
    }

    /// Called on a pool thread, with no client's credentials, each time the pool runs out of
    /// work (a storm's last report written): the sidecar prunes its stores then. Set before
    /// the first job.
    public var whenDrained: (@Sendable () -> Void)?

    /// After a job, under the lock (which this releases): when none is left, the heap freed by
    /// the captures and reports goes back to the system (glibc keeps it otherwise; the caches
    /// stay), and `whenDrained` runs.
    private func finished() {
        let drained = later.isEmpty && queue.isEmpty && running == 0
        condition.broadcast()
        condition.unlock()
        guard drained else { return }
        whenDrained?()
        _ = malloc_trim(0)
    }

    private func work() {
        while true {
            condition.lock()
            while queue.isEmpty && !stopping { condition.wait() }
            if queue.isEmpty && stopping {
                condition.unlock()
                return
            }
            let job = queue.removeFirst()
            running += 1
            runningFirst += 1
            firstStepsSinceTrim = true
            condition.unlock()
            job()
            condition.lock()
            running -= 1
            runningFirst -= 1
            finished()
        }
    }
}
