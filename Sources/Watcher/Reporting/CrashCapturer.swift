// CrashCapturer: a live process's crash, captured and handed to the report writer. What the
// launcher and the sidecar do with a crash record the wire server accepted, and with the deaths,
// hangs and exits they observe themselves: the process held only while it is read
// (CaptureSession), let go, and its report written afterwards on the writer's pool with its
// user's credentials. Faults a handler turned into calls are held until their process ends
// (HeldFaults).

import BoundedBytes
import LiveProcess
import Processes
import ReportModel
import Reports
import Store
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public final class CrashCapturer: Sendable {
    public let writer: ReportWriter
    /// The modules opened for captures, shared by every capture and report thread.
    public let cache = ELFCache()
    /// `crashport run` with the host level installed: where to leave a mark for each crash its
    /// stub reported (HostPaths.reportedMarks), so that the host level does not report it again.
    let reportedMarks: String?
    let heldFaults = HeldFaults()
    private let settings: Mutex<CaptureOptions>
    /// The stub records taken, by pid, with the record's time (realtime ns): the host level does
    /// not report again the core that follows a stub's report. Kept before the verdict is sent,
    /// since the core comes as soon as the stub lets the signal go on.
    private let stubCrashes = Mutex<[ProcessID: UInt64]>([:])
    private let captured = Atomic<Int>(0)

    public init(writer: ReportWriter, options: CaptureOptions, reportedMarks: String? = nil) {
        self.writer = writer
        self.reportedMarks = reportedMarks
        settings = Mutex(options)
        CaptureSession.prepareSharedVDSO()
    }

    /// How processes are captured (a sidecar's SIGHUP may change them); the writer's follow.
    public var options: CaptureOptions {
        get { settings.withLock { $0 } }
        set {
            settings.withLock { $0 = newValue }
            writer.options = newValue
        }
    }

    /// Crashes captured so far.
    public var captures: Int { captured.load(ordering: .relaxed) }

    // MARK: - A stub's record

    /// A crash or error record the wire server accepted, captured into `store`: the process held
    /// (through `holder` when the watcher already traces it), answered, let go, and its report
    /// written on the writer's pool. `captured` runs once the process is let go, with the
    /// report's id and the app area as read then (not for errors, nor for held faults).
    public func crash(
        _ crash: AcceptedCrash, store: ReportStore, holder: ThreadHold?, captured: (String, AppArea?) -> Void = { _, _ in }
    ) {
        let started = monotonicNanoseconds()
        let record = crash.record
        // A process with many threads takes longer to capture: say so before starting, so the
        // stub's bounded wait does not run out mid-capture (it caps the total at 6x its timeout).
        if crash.threads.count > 256 { crash.extendWait(milliseconds: 10_000) }
        // The thread whose fault a handler turned into a call crashed again on its way out (Go
        // with GOTRACEBACK=crash aborts): the held capture, taken at the fault, is the report.
        if !record.isError, record.reraise?.how != .called, let fault = heldFaults.take(of: record.pid) {
            if fault.record.tid == record.tid {
                crash.answer(captureNanoseconds: 0)
                let (reraise, note) = HeldFaults.crashedAgain(fault.record.reraise, with: record)
                writeHeldFault(fault, reraise: reraise, note: note)
                return
            }
        }
        self.captured.add(1, ordering: .relaxed)
        noteStubCrash(record)
        let access = crash.sender.access(record.pid)
        // Past the first few faults a handler turned into calls (recovered panics, most likely),
        // only the faulting thread, from the record: a full capture stops every thread.
        var options = options
        let thin = record.reraise?.how == .called && heldFaults.countCalledFault(of: record.pid)
        if thin { options.usePtrace = false }
        var capture = CaptureSession.hold(
            record: record, access: access, threads: crash.threads, status: crash.status, options: options, cache: cache,
            holder: holder)
        // The process is released; let it continue down its handler chain now. Opening modules,
        // unwinding, symbolication and writing happen while it dies.
        let elapsed = monotonicNanoseconds() - started
        crash.answer(captureNanoseconds: elapsed)
        capture.decodeAppArea()
        let held = capture
        if record.reraise?.how == .called {
            heldFaults.hold(
                HeldFault(
                    record: record, held: held, recordBytes: crash.bytes, store: store, access: access, started: started,
                    elapsed: elapsed, thin: thin))
            return
        }
        let id = ReportStore.newID(pid: record.pid.rawValue)
        if !record.isError { captured(id, held.app) }
        let bytes = crash.bytes
        writer.submit(as: access, pid: record.pid) { [cache] in
            var request = ReportRequest(
                capture: held.finish(cache: cache), id: id, store: store, started: started, captureNanoseconds: elapsed)
            request.recordBytes = bytes
            request.twoStepsAs = record.isError ? nil : access
            return request
        }
    }

    /// Notes a stub's crash record before its verdict: for the host level in this process, and
    /// as a mark the host level of a root sidecar can see (ReportedMark: never blocks, whatever
    /// a user put at its name).
    private func noteStubCrash(_ record: CrashRecord) {
        stubCrashes.withLock { crashes in
            if crashes.count > 4096 { crashes.removeAll() }
            crashes[record.pid] = record.timeNanoseconds
        }
        guard let reportedMarks, let start = CaptureSession.startTime(of: record.pid) else { return }
        // Created, never opened: the directory is any user's to write (ReportedMark).
        if let problem = ReportedMark.leave("\(record.pid)-\(start)", in: reportedMarks) {
            writer.log("no mark for the host level (it may report this crash too): \(problem)")
        }
    }

    /// Whether a stub record of `pid`'s, made at or after `since` (realtime ns), was taken here.
    public func reportedStubCrash(of pid: ProcessID, since: UInt64) -> Bool {
        stubCrashes.withLock { $0[pid].map { $0 >= since } ?? false }
    }

    // MARK: - Faults a handler turned into a call

    /// Whether a fault of `pid`'s is held, waiting for its end.
    public func holdsFault(of pid: ProcessID) -> Bool { heldFaults.holds(pid) }

    /// `pid` ended (`exit`, nil when unknown, or when it lives on after an exec): a held fault
    /// of its is written as its crash when it exited with Go's fatal status, else dropped.
    /// Returns the id the report is written under (on the pool), or nil.
    @discardableResult
    public func settleHeldFault(of pid: ProcessID, exit: ProcessExit?) -> String? {
        guard let fault = heldFaults.take(of: pid), let (reraise, note) = HeldFaults.settled(fault.record.reraise, exit: exit)
        else {
            return nil
        }
        return writeHeldFault(fault, reraise: reraise, note: note)
    }

    @discardableResult
    private func writeHeldFault(_ fault: HeldFault, reraise: WireReraise?, note: String) -> String {
        let id = ReportStore.newID(pid: fault.record.pid.rawValue)
        writer.submit(as: fault.access, pid: fault.record.pid) { [cache] in
            var capture = fault.held.finish(cache: cache)
            capture.record.reraise = reraise
            capture.notes.append(note)
            if fault.thin {
                capture.notes.removeAll { $0.hasPrefix("ptrace not used (--no-ptrace)") }
                capture.notes.append(HeldFaults.thinNote())
            }
            var request = ReportRequest(
                capture: capture, id: id, store: fault.store, started: fault.started, captureNanoseconds: fault.elapsed)
            request.recordBytes = fault.recordBytes
            request.spoolOnFailure = false
            return request
        }
        return id
    }

    // MARK: - What the watcher observed itself

    /// A death or hang the watcher observed itself (no stub record): the process captured
    /// (through `holder` when the watcher already traces it) and released, then reported like a
    /// crash into `store`, on the writer's pool. `released` runs once the process is let go,
    /// before the report is built: what else holds it goes too. Returns the id the report is
    /// written under (a failure to write it is logged).
    @discardableResult
    public func captureObserved(
        _ record: CrashRecord, access given: ProcessAccess? = nil, holder: ThreadHold?, store: ReportStore,
        notes: [String] = [], earlier: PressureSnapshot? = nil, released: () -> Void = {}
    ) -> String {
        let started = monotonicNanoseconds()
        captured.add(1, ordering: .relaxed)
        let id = ReportStore.newID(pid: record.pid.rawValue)
        let access = given ?? .own(record.pid)
        let held = CaptureSession.hold(
            record: record, access: access, options: options, cache: cache, holder: holder, earlier: earlier)
        let elapsed = monotonicNanoseconds() - started
        released()
        writer.submit(as: access, pid: record.pid) { [cache] in
            var capture = held.finish(cache: cache)
            capture.notes += notes
            var request = ReportRequest(capture: capture, id: id, store: store, started: started, captureNanoseconds: elapsed)
            request.spoolOnFailure = false
            return request
        }
        return id
    }

    /// A hang the heartbeat showed (HangMonitor's `.hung`): every thread captured, the process
    /// left running. The thread that beat last leads when it is one of the process's; the area
    /// is the program's to scribble on, so one it names that is not is said, and the main thread
    /// leads. A report after the first in HangMonitor's window says which it is. Returns the
    /// report's id.
    @discardableResult
    public func captureHang(
        of pid: ProcessID, milliseconds: UInt64, beatLast thread: ThreadID, ordinal: Int, appArea: UInt64,
        access: ProcessAccess? = nil, holder: ThreadHold?, store: ReportStore
    ) -> String {
        var notes: [String] = []
        var lead = thread
        if ProcFiles.namespaceIDs(of: pid).map({ $0.count > 1 }) == true,
            let inContainer = ProcFiles.thread(of: pid, innerID: thread.rawValue)
        {
            lead = inContainer  // the program names its threads as its own pid namespace does
        } else if !ProcFiles.threads(of: pid).contains(thread) {
            lead = pid.mainThread
            notes.append(
                "the heartbeat names thread \(thread) as the last to beat, which is not one of the process's threads (it ended, or the heartbeat was overwritten): the main thread leads"
            )
        }
        if ordinal > 1 {
            notes.append(
                "hang report \(ordinal) of this process in \(HangMonitor.window / 60_000_000_000) minutes (at most \(HangMonitor.perWindow) are written; the rest are only logged)"
            )
        }
        let record = CrashRecord(
            observation: .hang(milliseconds: milliseconds), pid: pid, tid: lead, signal: 0, appArea: appArea,
            timeNanoseconds: realtimeNanoseconds())
        return captureObserved(record, access: access, holder: holder, store: store, notes: notes)
    }

    /// A traced process one of whose threads (`first`) stopped at its exit, with wait status
    /// `status`, no handler having reported it: waits (bounded) for its other threads to stop
    /// there too, captures it as a `termination` (cause SIGKILL, oom-kill, signal or exit) and
    /// lets it finish dying. `earlier`: a snapshot taken under memory pressure, for stacks the
    /// OOM reaper freed before they could be read. `released` runs once its threads are let go,
    /// before the report is built. Returns the report's id.
    @discardableResult
    public func captureExit(
        of tracer: ExitTracer, status: Int32, first: ThreadID, appArea: UInt64, oomKilled: Bool,
        access: ProcessAccess? = nil, store: ReportStore, earlier: PressureSnapshot? = nil, released: () -> Void = {}
    ) -> String {
        // The others get there within a scheduling quantum; one that does not is captured as is.
        _ = tracer.waitForExits(timeoutMilliseconds: 500)
        let pid = tracer.processID
        let signal = ProcessExit(waitStatus: status)?.signal ?? 0
        let cause = signal == 0 ? "exit" : signal == SIGKILL ? (oomKilled ? "oom-kill" : "SIGKILL") : "signal"
        let record = CrashRecord(
            observation: .exit(status: status, cause: cause), pid: pid,
            tid: tracer.exiting.contains(pid.mainThread) ? pid.mainThread : first, signal: signal, appArea: appArea,
            timeNanoseconds: realtimeNanoseconds())
        // Its threads leave their exit stops once captured, not once the report is written.
        return captureObserved(record, access: access, holder: tracer, store: store, earlier: earlier) {
            for tid in tracer.exiting { tracer.release(exitOf: tid) }
            released()
        }
    }
}
