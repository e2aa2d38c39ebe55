// ReportWriter: a capture in, report files out. The one writer every mode calls (the launcher,
// the sidecar, the host level, the spool): unwinding, symbolication, the event and the minidump
// committed into a Store, in one step or two, then announced (summary or log line, hooks,
// timing) and the store pruned. A report that cannot be written is said, and spooled when the
// mode's hooks keep it.
//
// Nothing here touches a live process: a capture is a value (ReportModel's Capture), so the
// writer runs on any thread, a report pool's or the caller's.

import BoundedBytes
import FoundationEssentials
import LiveProcess
import ReportModel
import Reports
import Store
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public struct WrittenReport: Sendable {
    public var id: String
    public var path: String
    public var event: Event
    public var captureNanoseconds: UInt64
}

/// What the writer is given: a capture and how it came to be, so that one call says it all.
public struct ReportRequest: Sendable {
    public var capture: Capture
    /// The report's id (ReportStore.newID), chosen when the crash was captured.
    public var id: String
    public var store: ReportStore
    /// When the crash reached the watcher (CLOCK_MONOTONIC), and how long its capture held the
    /// process: the report's timing.
    public var started: UInt64
    public var captureNanoseconds: UInt64
    /// The crash record as it was received (a stub's or the host level's), for the spool when
    /// the report cannot be written; empty for what the watcher observed itself.
    public var recordBytes: [UInt8] = []
    /// The level that saw the crash (`host`); nil: from the record (`stub` or `launcher`).
    public var source: String? = nil
    /// Where the capture came from when not from the live process (`spool`).
    public var capturedFrom: String? = nil
    /// Whether an unwritable report goes to the mode's hooks (the spool) or is only said.
    public var spoolOnFailure = true
    /// In two steps (a first step at once, the full report later on the pool), reading its
    /// files as this access; nil: in one.
    public var twoStepsAs: ProcessAccess? = nil
    /// --keep-core keeps this report's core beside it (the journal entry names it).
    public var keptCore = false
    /// Last words on the event, in both steps.
    public var amend: @Sendable (inout Event) -> Void = { _ in }

    public init(capture: Capture, id: String, store: ReportStore, started: UInt64, captureNanoseconds: UInt64) {
        self.capture = capture
        self.id = id
        self.store = store
        self.started = started
        self.captureNanoseconds = captureNanoseconds
    }
}

/// How a mode wants its reports said: the crash summary on stderr (`crashport run`), one log line
/// per report (the sidecar's journal), or nothing.
public enum ReportAnnouncement: Sendable {
    case summary
    case logLine
}

public final class ReportWriter: Sendable {
    /// Where the writer's own lines go.
    let log: @Sendable (String) -> Void
    let announcement: ReportAnnouncement
    /// Which frames are the program's own (`crashport run --in-app/--not-in-app`).
    let inAppRules: InAppRules
    /// What the mode adds to each report (writing thread).
    let hooks: ReportHooks?
    /// Where second steps and report jobs run; nil: inline, on the caller's thread.
    let pool: ReportPool?
    /// Where the captures of second steps that wait are kept meanwhile (CaptureSpill): made
    /// with the pool, in the default store's root, with the watcher's own credentials.
    let spill: CaptureSpill?
    /// Whether `reports` and `unwritten` keep what was written (the launcher reads them at the
    /// end; a sidecar that runs for months does not keep them).
    let keepsReports: Bool
    /// The environment in minidumps, debuginfod: what a sidecar's SIGHUP may change.
    private let settings: Mutex<CaptureOptions>
    /// journald's native socket (CRASHPORT_JOURNAL_SOCKET names another).
    let journalSocket = getenv("CRASHPORT_JOURNAL_SOCKET").map { String(cString: $0) } ?? JournalEntry.defaultSocket

    init(
        options: CaptureOptions, log: @escaping @Sendable (String) -> Void, announcement: ReportAnnouncement,
        inAppRules: InAppRules = InAppRules(), hooks: ReportHooks? = nil, pool: ReportPool? = nil,
        spillDirectory: String? = nil, keepsReports: Bool = true
    ) {
        settings = Mutex(options)
        self.log = log
        self.announcement = announcement
        self.inAppRules = inAppRules
        self.hooks = hooks
        self.pool = pool
        self.keepsReports = keepsReports
        spill = pool != nil ? spillDirectory.flatMap { CaptureSpill(directory: $0) } : nil
        pool?.whenDrained = { [weak self] in
            guard let self else { return }
            pruneWritten()
            if let spilled = spill?.takeSpilled(), spilled > 0 {
                log("\(spilled) report(s) waited for their second step with their capture on disk, not in memory")
            }
        }
    }

    public var options: CaptureOptions {
        get { settings.withLock { $0 } }
        set { settings.withLock { $0 = newValue } }
    }

    // MARK: - What was written

    /// Crashes reported since start, by pid, tid and the record's time: a spooled copy of one
    /// of them (the stub spools when the verdict is late) is not reported twice.
    private let reported = Mutex<Set<String>>([])
    private let written = Mutex<(reports: [WrittenReport], unwritten: [ProcessID: String])>(([], [:]))
    public var reports: [WrittenReport] { written.withLock { $0.reports } }
    /// Crashes whose report could not be written, by pid, with why.
    public var unwritten: [ProcessID: String] { written.withLock { $0.unwritten } }

    static func key(_ record: CrashRecord) -> String { "\(record.pid)-\(record.tid)-\(record.timeNanoseconds)" }

    public func wasReported(_ record: CrashRecord) -> Bool { reported.withLock { $0.contains(Self.key(record)) } }

    // MARK: - Jobs

    /// Runs `job` on the pool (inline without one).
    public func submit(_ job: @escaping @Sendable () -> Void) {
        if let pool { pool.submit(job) } else { job() }
    }

    /// A report built and written on the pool with the credentials of the process's user (the
    /// module and debug files it opens, the attachments it copies), never with root's: `request`
    /// makes the capture into a request there (nil: nothing to write). A thread that cannot take
    /// the credentials on writes nothing, and says so.
    public func submit(as access: ProcessAccess, pid: ProcessID, _ request: @escaping @Sendable () -> ReportRequest?) {
        submit { [self] in
            asClient(access, pid: pid) {
                if let request = request() { write(request) }
            }
        }
    }

    /// Runs `body` with the access's credentials (see `submit(as:pid:_:)`).
    public func asClient(_ access: ProcessAccess, pid: ProcessID, _ body: () -> Void) {
        do {
            try access.perform(body)
        } catch {
            log("could not write the report of pid \(pid): \(error)")
        }
    }

    // MARK: - Writing

    /// Unwinds, symbolicates and writes a report (on the calling thread: nothing here touches
    /// the live process any more); with `twoStepsAs` and a pool, in two steps (`writeFirstStep`).
    /// Whether it was written (a two-step report: its first step).
    @discardableResult
    public func write(_ request: ReportRequest) -> Bool {
        reported.withLock { set in
            if set.count > 4096 { set.removeAll() }
            set.insert(Self.key(request.capture.record))
        }
        if let access = request.twoStepsAs, let pool { return writeFirstStep(request, access: access, pool: pool) }
        var (event, fileBytes, built) = fullEvent(request)
        let capture = request.capture
        let systemLog = SystemLogAttachment.collect(for: capture, event: event, store: request.store, seen: request.started)
        do {
            var encoded: UInt64 = 0, dumped: UInt64 = 0
            let path = try request.store.commit(id: request.id) { directory in
                // First, so that the event says what the copies hold (read as the owner: commit's ids).
                let attached = Self.attach(capture, into: directory) + SystemLogAttachment.write(systemLog, into: directory)
                if !attached.isEmpty { event.attachments = attached }
                let json: [UInt8]
                (json, encoded) = try Self.timed { Array(try event.jsonData()) }
                try ReportStore.writeFile(directory + "/event.json", json)
                // With the code and CFI the unwind read, after the process's own memory.
                ((), dumped) = try Self.timed {
                    try MinidumpWriter(includeEnvironment: options.captureEnvironment)
                        .write(snapshot(capture, adding: fileBytes), to: directory + "/minidump.dmp")
                }
            }
            wrote(event, path: path, request, phases: Self.phases(built: built, encoded: encoded, dumped: dumped))
            return true
        } catch {
            return unwritable(request, error: error, event: event)
        }
    }

    /// The report's attachments, in `directory`: the program's files (within what its
    /// attachments from memory leave of the 20 MiB: those come first, they die with the
    /// process), its attachments from memory, and the runtimes' crash logs.
    static func attach(_ capture: Capture, into directory: String) -> [AttachmentRecord] {
        let memory = capture.app?.memoryAttachments ?? []
        return Attachments.copy(
            errorFiles: capture.errorDetails?.files ?? [], programFiles: capture.app?.attachments ?? [],
            reserved: Attachments.bytesHeld(by: memory), into: directory)
            + Attachments.writeMemoryAttachments(memory, into: directory)
            + Attachments.writeRuntimeLogs(capture.runtime.crashLogs, into: directory)
    }

    /// A report in two steps. First, at once: the minidump (every thread's registers and stack,
    /// the modules) and the captured event (ReportBuilder.capturedEvent, Event.stage
    /// `captured`), renamed into place unsynced: on disk at the pace of a minidump writer, a
    /// storm's reports all there before the first is symbolicated. Then, as a deferred job of
    /// `pool` (after every first step waiting), with the client's credentials again: the second
    /// step (`writeSecondStep`). A storm's deferred captures past the pool's budget are finished
    /// at once instead. A first step that fails goes the single step's way (spool, log).
    func writeFirstStep(_ request: ReportRequest, access: ProcessAccess, pool: ReportPool) -> Bool {
        let capture = request.capture
        var first = ReportBuilder.capturedEvent(for: capture, id: request.id, timestamp: Event.timestamp())
        first.source = Self.source(request.source, of: capture.record)
        request.amend(&first)
        first.session = hooks?.sessionID(of: capture.record.pid)
        var attached: [AttachmentRecord] = []
        do {
            _ = try request.store.commit(id: request.id, durable: false) { directory in
                attached = Self.attach(capture, into: directory)
                if !attached.isEmpty { first.attachments = attached }
                try ReportStore.writeFile(directory + "/event.json", Array(try first.jsonData()), sync: false)
                try ReportStore.writeFile(directory + "/minidump.dmp", minidump(capture), sync: false)
            }
        } catch {
            return unwritable(request, error: error, event: first)
        }
        Self.capturedTiming(started: request.started, id: request.id)
        // A second step that waits behind another keeps its capture's bytes on disk meanwhile,
        // and not the record as received (only a first step that fails spools it).
        var waiting = request
        waiting.recordBytes = []
        let place = pool.deferredJobWouldWait ? spill?.spill(&waiting.capture) : nil
        let second: @Sendable () -> Void = { [self, attached, waiting] in
            Self.holdSecondStep()
            var request = waiting
            if let place, let spill, !spill.restore(&request.capture, from: place) {
                log(
                    "pid \(request.capture.record.pid): report \(request.id) stays as captured (its minidump is whole; not unwound or symbolicated): its capture could not be read back"
                )
                return
            }
            asClient(access, pid: request.capture.record.pid) { writeSecondStep(request, attached: attached) }
        }
        if !pool.deferJob(holding: capture.heldBytes, second) { second() }
        return true
    }

    /// The second step of a report: every thread unwound and symbolicated, the full event and the
    /// minidump with the code the unwind read renamed over the first ones, the report fsynced;
    /// only then is it announced (summary, hooks, timing, prune).
    func writeSecondStep(_ request: ReportRequest, attached: [AttachmentRecord]) {
        var (event, fileBytes, built) = fullEvent(request)
        if !attached.isEmpty { event.attachments = attached }
        // In the second step: a fault line is printed as the released process dies of it.
        let systemLog = SystemLogAttachment.collect(
            for: request.capture, event: event, store: request.store, seen: request.started)
        do {
            var encoded: UInt64 = 0, dumped: UInt64 = 0
            let path = try request.store.amend(id: request.id) { directory in
                let logged = SystemLogAttachment.write(systemLog, into: directory)
                if !logged.isEmpty { event.attachments = attached + logged }
                let json: [UInt8]
                (json, encoded) = try Self.timed { Array(try event.jsonData()) }
                ((), dumped) = try Self.timed {
                    try ReportStore.replaceFile(directory + "/minidump.dmp", minidump(request.capture, adding: fileBytes))
                }
                try ReportStore.replaceFile(directory + "/event.json", json)
            }
            wrote(event, path: path, request, phases: Self.phases(built: built, encoded: encoded, dumped: dumped))
        } catch {
            log(
                "pid \(request.capture.record.pid): report \(request.id) stays as captured (its minidump is whole; not unwound or symbolicated): \(error)"
            )
        }
    }

    /// The snapshot a capture's minidump holds: with what the unwind read of the modules' files
    /// after the process's own memory.
    func snapshot(_ capture: Capture, adding fileBytes: UnwindFileBytes? = nil) -> ProcessSnapshot {
        var snapshot = capture.snapshot
        if let fileBytes { snapshot.extraMemory += fileBytes.regions }
        return snapshot
    }

    func minidump(_ capture: Capture, adding fileBytes: UnwindFileBytes? = nil) -> [UInt8] {
        MinidumpWriter(includeEnvironment: options.captureEnvironment).bytes(for: snapshot(capture, adding: fileBytes))
    }

    /// The full event of a capture (every thread unwound and symbolicated), what the unwind
    /// read of the modules' files, and how long that took.
    func fullEvent(_ request: ReportRequest) -> (Event, UnwindFileBytes, UInt64) {
        let record = request.capture.record
        let buildStarted = monotonicNanoseconds()
        let fileBytes = UnwindFileBytes()
        let options = options
        var event = ReportBuilder.event(
            for: request.capture, id: request.id, timestamp: Event.timestamp(), rules: inAppRules, fileBytes: fileBytes,
            debuginfod: options.debuginfod, dpkg: .shared)
        event.capturedFrom = request.capturedFrom
        event.source = Self.source(request.source, of: record)
        request.amend(&event)
        event.session = hooks?.sessionID(of: record.pid)
        hooks?.amend(&event, record: record)
        let built = monotonicNanoseconds() - buildStarted
        if record.otherCrashes > 0 {
            event.notes =
                (event.notes ?? []) + ["\(record.otherCrashes) other thread(s) crashed while this crash was being reported"]
        }
        return (event, fileBytes, built)
    }

    /// The level that saw a report's crash, for its event: the one given, else a stub's record,
    /// or a death, hang or exit this watcher observed.
    static func source(_ given: String?, of record: CrashRecord) -> String {
        given ?? (record.observation == nil ? "stub" : "launcher")
    }

    /// A termination report for a process seen from outside (the sidecar's client that ended
    /// without a crash record or a goodbye; `crashport run`'s untraced child that died with
    /// none), into `store`: announced, the store pruned, and the hooks told. The report, or nil
    /// (said why) when it could not be written.
    @discardableResult
    public func writeTermination(_ end: AbnormalEnd, store: ReportStore, id chosen: String? = nil) -> WrittenReport? {
        let id = chosen ?? ReportStore.newID(pid: end.pid.rawValue)
        var event = TerminationReport.event(for: end, id: id, timestamp: Event.timestamp())
        event.source = "launcher"
        let systemLog = SystemLogAttachment.collect(for: end, event: event, store: store)
        do {
            let path = try store.commit(id: id) { directory in
                let logged = SystemLogAttachment.write(systemLog, into: directory)
                if !logged.isEmpty { event.attachments = logged }
                try ReportStore.writeFile(directory + "/event.json", Array(try event.jsonData()))
            }
            let report = WrittenReport(id: id, path: path, event: event, captureNanoseconds: 0)
            if keepsReports { written.withLock { $0.reports.append(report) } }
            journal(event, path: path, store: store, keptCore: false)
            hooks?.wrote(report, into: store)
            prune(store, keeping: id)
            switch announcement {
            case .summary:
                let notes = (event.notes ?? []).dropFirst()
                let unwritten = if case .parent(_?) = end.witness { true } else { false }
                log(
                    "\(CrashLog.oneLine(event))\(unwritten ? "; a short report was written instead" : " with no crash record")\n  \((notes + ["report: \(path)"]).joined(separator: "\n  "))"
                )
            case .logLine: log("report: \(CrashLog.oneLine(event)) -> \(path)")
            }
            return report
        } catch {
            log("could not write the termination report of pid \(end.pid): \(error)")
            return nil
        }
    }

    // MARK: - After writing

    /// A report written whole: kept (launcher), the hooks told, the store pruned, timed, said.
    private func wrote(_ event: Event, path: String, _ request: ReportRequest, phases: String) {
        let capture = request.capture
        let report = WrittenReport(id: request.id, path: path, event: event, captureNanoseconds: request.captureNanoseconds)
        if keepsReports { written.withLock { $0.reports.append(report) } }
        journal(event, path: path, store: request.store, keptCore: request.keptCore)
        hooks?.wrote(report, into: request.store)
        // The quota: at once inline, else when the pool runs out of work (`pruneWritten`: a
        // prune lists the whole store, so one per report would make a storm's cost grow as its
        // square, and it runs as the store's owner, not as the client this thread reads for).
        if pool == nil {
            prune(request.store, keeping: request.id)
        } else {
            unpruned.withLock { $0[request.store.root] = (request.store, request.id) }
        }
        Self.timing(
            suspended: capture.suspendedNanoseconds, held: capture.heldNanoseconds, verdict: request.captureNanoseconds,
            total: monotonicNanoseconds() - request.started, phases: phases)
        switch announcement {
        case .summary: log(String(CrashLog.summary(event, reportPath: path, colour: Self.colour).dropFirst("crashport: ".count)))
        case .logLine: log("report: \(CrashLog.oneLine(event)) -> \(path)")
        }
    }

    /// The report as a journal entry (JournalEntry), unless --no-journal: whose crash it was
    /// is the store's owner (this watcher's own user for a store of its own); with `keptCore`,
    /// COREDUMP_FILENAME names the core --keep-core keeps beside it.
    private func journal(_ event: Event, path: String, store: ReportStore, keptCore: Bool) {
        guard options.journal else { return }
        let owner =
            store.owner.map { JournalEntry.Owner(uid: $0.uid, gid: $0.gid) } ?? JournalEntry.Owner(uid: getuid(), gid: getgid())
        let entry = JournalEntry(
            event, reportPath: path, owner: owner, hostname: Self.hostname,
            core: keptCore ? path + "/" + CoreKeeper.fileName : nil)
        // After a timeout, the next 10 s of reports skip the journal: a storm's report threads
        // do not each wait on a journald that anyone on the machine can flood.
        let now = monotonicNanoseconds()
        if journalQuietUntil.withLock({ $0 > now }) { return }
        switch entry.send(to: journalSocket) {
        case .sent: return
        case .failed(let problem): log("journal: \(problem)")
        case .timedOut(let problem):
            journalQuietUntil.withLock { $0 = now + 10_000_000_000 }
            log("journal: \(problem); no entries for the next 10 s")
        }
    }

    /// Until when (CLOCK_MONOTONIC) reports skip the journal, after a send timed out.
    private let journalQuietUntil = Mutex<UInt64>(0)

    /// The machine's name, for the journal entry.
    static var hostname: String? {
        var name = [UInt8](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return nil }
        return String(decoding: name.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// A report that could not be written: said, and spooled when the hooks keep it.
    private func unwritable(_ request: ReportRequest, error: Error, event: Event) -> Bool {
        let record = request.capture.record
        if keepsReports { written.withLock { $0.unwritten[record.pid] = "\(error)" } }
        log("could not write the report of pid \(record.pid) (\(SignalNames.name(record.signal))): \(error)")
        let kept =
            request.spoolOnFailure && !record.isError
            && (hooks?.unwritable(request.capture, recordBytes: request.recordBytes, error: error, store: request.store)
                ?? false)
        if !kept && announcement == .summary {
            log(String(CrashLog.summary(event, reportPath: "(not written)").dropFirst("crashport: ".count)))
        }
        return false
    }

    /// The stores written to since their last prune (by root), with the newest report each,
    /// pruned when the pool runs out of work.
    private let unpruned = Mutex<[String: (store: ReportStore, newest: String)]>([:])

    /// Prunes the stores written to since the last time (the pool's `whenDrained`).
    func pruneWritten() {
        let due = unpruned.withLock { stores -> [(store: ReportStore, newest: String)] in
            let all = Array(stores.values)
            stores.removeAll()
            return all
        }
        for entry in due { prune(entry.store, keeping: entry.newest) }
    }

    func prune(_ store: ReportStore, keeping id: String) {
        let pruned = store.prune(keeping: id)
        if !pruned.isEmpty { log("quota: removed \(pruned.count) oldest report(s) (\(pruned.joined(separator: ", ")))") }
    }

    // MARK: - Timing and tests

    /// Whether the summary on stderr is coloured: a terminal, NO_COLOR unset, TERM not dumb.
    static let colour = CrashLog.colourWanted(isTerminal: isatty(2) != 0, environment: ProcessInfo.processInfo.environment)

    /// `body`'s result, and how long it took (CLOCK_MONOTONIC ns).
    static func timed<T>(_ body: () throws -> T) rethrows -> (T, UInt64) {
        let started = monotonicNanoseconds()
        let result = try body()
        return (result, monotonicNanoseconds() - started)
    }

    /// The phases of a report's timing line: unwinding and symbolication, the event's JSON, the minidump.
    static func phases(built: UInt64, encoded: UInt64, dumped: UInt64) -> String {
        "unwind_symbolicate_ns=\(built) json_ns=\(encoded) minidump_ns=\(dumped)"
    }

    /// For tools/bench: the descriptor CRASHPORT_TIMING_FD names, when it is one.
    static let timingFD: Int32? = {
        guard let text = ProcessInfo.processInfo.environment["CRASHPORT_TIMING_FD"], let fd = Int32(text), fd > 2 else {
            return nil
        }
        return fd
    }()

    /// For tools/bench: one line on the timing descriptor, when there is one.
    static func timingLine(_ line: String) {
        guard let fd = timingFD else { return }
        _ = writeAll(fd, Array((line + "\n").utf8))
    }

    /// One line per report (`at_ns`: CLOCK_MONOTONIC when it was written whole).
    static func timing(suspended: UInt64, held: UInt64, verdict: UInt64, total: UInt64, phases: String) {
        timingLine(
            "crashport-watcher suspended_ns=\(suspended) held_ns=\(held) verdict_ns=\(verdict) report_written_ns=\(total) \(phases) at_ns=\(monotonicNanoseconds())"
        )
    }

    /// A two-step report's first step on disk (from the record's arrival).
    static func capturedTiming(started: UInt64, id: String) {
        timingLine("crashport-captured id=\(id) on_disk_ns=\(monotonicNanoseconds() - started) arrived_at_ns=\(started)")
    }

    /// For the tests (TwoStepReportTests): while the file CRASHPORT_TEST_HOLD_SECOND_STEP names
    /// exists, a second step waits (60 s at most), so that a report between its steps can be
    /// read, and its watcher stopped there. Unset, nothing waits.
    static let secondStepHold = ProcessInfo.processInfo.environment["CRASHPORT_TEST_HOLD_SECOND_STEP"]

    static func holdSecondStep() {
        guard let path = secondStepHold, !path.isEmpty else { return }
        var info = stat()
        for _ in 0..<6000 where lstat(path, &info) == 0 { usleep(10_000) }
    }
}
