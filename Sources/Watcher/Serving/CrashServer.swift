// CrashServer: the watcher's side of the socket. Receives HELLO, CRASH, ERROR, SETTING and
// GOODBYE messages, verifies them, captures the crashed process, answers with a verdict and
// writes the report.
//
// Trust: the sender's pid and uid come from SCM_CREDENTIALS (the kernel's word), never from the
// message. A CRASH record is accepted only when its pid equals that pid and its tid is a thread
// of that process, so a peer can only ever make the watcher inspect its own process (docs/security.md).

import BoundedBytes
import CCrashPortProtocol
import FoundationEssentials
import LiveProcess
import Processes
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

/// Who sent a message: the kernel's word (SCM_CREDENTIALS), never the message's.
public struct Sender: Sendable, Equatable {
    public var pid: ProcessID
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: ProcessID, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    /// Whose credentials apply to whatever is read for this sender: its user's, never root's.
    public var credentials: Credentials { Credentials(uid: uid, gid: gid) }

    /// A process of this sender's (its own, or a thread's pid mapped from its namespace), read
    /// as the sender's user may read it.
    public func access(_ process: ProcessID) -> ProcessAccess { ProcessAccess(pid: process, as: credentials) }
}

/// One receive on a crashport socket.
public enum Received {
    case message([UInt8], Sender, replyFDs: [Int32])
    /// Nothing waiting (non-blocking).
    case empty
    /// The peer closed its end.
    case closed
    /// A message that can never be valid (larger than any crashport message, or with more
    /// descriptors than fit); its descriptors are already closed.
    case rejected(String, Sender)
}

/// Unchecked: its settings (options, log, delegate, hooks, pool) are made before it serves and
/// read on the serving thread; what report threads share with it is behind a Mutex.
public final class CrashServer: @unchecked Sendable {
    public let socket: Int32
    public let store: ReportStore
    public var options: CaptureOptions
    /// Where the watcher's own messages go (stderr); tests may redirect.
    public var log: (String) -> Void = { StandardError.write(("crashport: " + $0 + "\n")) }
    /// Where a line about one client goes, with the client's uid (the sidecar limits floods per
    /// user); nil: `log`.
    public var logAbout: ((String, UInt32) -> Void)?
    public var printSummary = true
    /// One log line per report (the sidecar's journal) instead of the summary.
    public var reportLine = false
    /// The server mode: where a sender's reports go, what its messages mean, what holds its
    /// processes (serving thread). Nil: every report into `store`, the messages only checked.
    weak var delegate: CrashServerDelegate?
    /// What the mode adds to each report (writing thread).
    var hooks: ReportHooks?
    /// Where the part of a report after the process is released runs (unwinding,
    /// symbolication, writing): nil inline; the sidecar's pool.
    var pool: ReportPool? {
        didSet {
            pool?.whenDrained = { [weak self] in
                guard let self else { return }
                pruneWritten()
                if let spilled = spill?.takeSpilled(), spilled > 0 {
                    log("\(spilled) report(s) waited for their second step with their capture on disk, not in memory")
                }
            }
            if pool != nil && spill == nil { spill = CaptureSpill(directory: store.root) }
        }
    }
    /// Where the captures of second steps that wait are kept meanwhile (CaptureSpill): made
    /// with the pool, in the report root, with the watcher's own credentials.
    private(set) var spill: CaptureSpill?
    /// Which frames are the program's own (`crashport run --in-app/--not-in-app`).
    public var inAppRules = InAppRules()
    /// Crashes reported since start, by pid, tid and the record's time: a spooled copy of one
    /// of them (the stub spools when the verdict is late) is not reported twice.
    let reported = Mutex<Set<String>>([])
    /// Whether `reports` and `unwritten` keep what was written (the launcher reads them at the
    /// end; a sidecar that runs for months does not keep them).
    public var keepReports = true

    static func key(_ record: CrashRecord) -> String { "\(record.pid)-\(record.tid)-\(record.timeNanoseconds)" }

    func wasReported(_ record: CrashRecord) -> Bool { reported.withLock { $0.contains(Self.key(record)) } }
    /// The stub records taken, by pid, with the record's time (realtime ns): the host level does
    /// not report again the core that follows a stub's report. Kept before the verdict is sent,
    /// since the core comes as soon as the stub lets the signal go on.
    let stubCrashes = Mutex<[ProcessID: UInt64]>([:])
    /// `crashport run` with the host level installed: where to leave a mark for each crash its
    /// stub reported (HostPaths.reportedMarks), so that the host level does not report it again.
    public var reportedMarks: String?

    /// Whether a stub record of `pid`'s, made at or after `since` (realtime ns), was taken here.
    public func reportedStubCrash(of pid: ProcessID, since: UInt64) -> Bool {
        stubCrashes.withLock { $0[pid].map { $0 >= since } ?? false }
    }

    /// Notes a stub's crash record before its verdict: for the host level in this process, and
    /// as a mark the host level of a root sidecar can see (ReportedMark: never blocks, whatever
    /// a user put at its name).
    func noteStubCrash(_ record: CrashRecord) {
        stubCrashes.withLock { crashes in
            if crashes.count > 4096 { crashes.removeAll() }
            crashes[record.pid] = record.timeNanoseconds
        }
        guard let reportedMarks, let start = CaptureSession.startTime(of: record.pid) else { return }
        // Created, never opened: the directory is any user's to write (ReportedMark).
        if let problem = ReportedMark.leave("\(record.pid)-\(start)", in: reportedMarks) {
            log("no mark for the host level (it may report this crash too): \(problem)")
        }
    }
    private let written = Mutex<(reports: [WrittenReport], unwritten: [ProcessID: String])>(([], [:]))
    public var reports: [WrittenReport] { written.withLock { $0.reports } }
    /// Crashes whose report could not be written, by pid, with why.
    public var unwritten: [ProcessID: String] { written.withLock { $0.unwritten } }
    let cache = ELFCache()
    /// Crashes captured so far (read on the serving thread).
    public private(set) var captures = 0
    private var buffer = [UInt8](repeating: 0, count: CrashRecord.maximumSize + 1)

    public init(socket: Int32, store: ReportStore, options: CaptureOptions) {
        self.socket = socket
        self.store = store
        self.options = options
        CaptureSession.prepareSharedVDSO()
    }

    func store(for sender: Sender) -> ReportStore? { delegate.map { $0.store(for: sender) } ?? store }

    func submit(_ job: @escaping @Sendable () -> Void) {
        if let pool { pool.submit(job) } else { job() }
    }

    /// Receives one message from `fd` without blocking. Descriptors beyond the one a CRASH
    /// carries are closed by cp_receive_message (and the kernel), never leaked.
    public func receive(from fd: Int32) -> Received {
        let received: UnixSocket.Message?
        do {
            received = try UnixSocket(fd: fd).receive(into: &buffer, maxDescriptors: 4)
        } catch {
            return error.errno == EAGAIN || error.errno == EWOULDBLOCK ? .empty : .closed
        }
        guard let received else { return .closed }
        guard !received.truncated else {
            received.descriptors.forEach { close($0) }
            return .rejected("larger than any crashport message, or carrying more than 4 descriptors", received.sender)
        }
        return .message(Array(buffer.prefix(received.count)), received.sender, replyFDs: received.descriptors)
    }

    /// Handles every message waiting on the socket without blocking; returns false at EOF.
    @discardableResult
    public func drain() -> Bool {
        while true {
            switch receive(from: socket) {
            case .empty: return true
            case .closed: return false
            case .rejected(let why, let sender): log(about: sender.uid, "rejected a message from pid \(sender.pid): \(why)")
            case .message(let bytes, let sender, let fds):
                _ = handle(bytes, sender: sender, replyFDs: fds)
            }
        }
    }

    /// Handles one message; closes the descriptors it carried. Returns why it was rejected, or
    /// nil when it was valid.
    @discardableResult
    public func handle(_ bytes: [UInt8], sender: Sender, replyFDs: [Int32]) -> String? {
        defer { replyFDs.forEach { close($0) } }
        let senderPID = sender.pid
        let header: WireHeader
        do {
            header = try WireHeader(bytes: bytes)
        } catch {
            return reject(sender.uid, "\(Self.messageName(bytes)) from pid \(senderPID): \(error)")
        }
        switch header.type {
        case CP_MSG_HELLO.rawValue: return handleHello(bytes, sender: sender)
        case CP_MSG_CRASH.rawValue, CP_MSG_ERROR.rawValue: return handleCrashRecord(bytes, sender: sender, replyFDs: replyFDs)
        case CP_MSG_SETTING.rawValue: return handleSetting(bytes, sender: sender)
        case CP_MSG_CONSENT.rawValue: return handleConsent(bytes, sender: sender)
        case CP_MSG_GOODBYE.rawValue: return handleGoodbye(bytes, sender: sender)
        case CP_MSG_LAUNCH.rawValue: return handleLaunch(bytes, sender: sender)
        case CP_MSG_PENDING_QUERY.rawValue: return handlePendingQuery(bytes, sender: sender, replyFDs: replyFDs)
        case CP_MSG_CONSENT_REPORT.rawValue: return handleConsentReport(bytes, sender: sender)
        default: return reject(sender.uid, "a message from pid \(sender.pid): unexpected type \(header.type)")
        }
    }

    // MARK: - One function per message type: each returns why it rejected the message, or nil.

    func handleHello(_ bytes: [UInt8], sender: Sender) -> String? {
        let senderPID = sender.pid
        do {
            let hello = try HelloMessage(bytes: bytes)
            if hello.pid != senderPID && ProcFiles.namespaceIDs(of: senderPID)?.last != hello.pid.rawValue {
                log(about: sender.uid, "HELLO from pid \(senderPID) claims pid \(hello.pid); ignored")
            }
            delegate?.hello(hello, from: sender)
        } catch {
            return reject(sender.uid, "a HELLO from pid \(senderPID): \(error)")
        }
        return nil
    }

    /// A CRASH or ERROR record: checked against the kernel's word for its sender (pid, thread,
    /// owner), then captured, answered and reported.
    func handleCrashRecord(_ bytes: [UInt8], sender: Sender, replyFDs: [Int32]) -> String? {
        let senderPID = sender.pid
        guard let reply = replyFDs.first, replyFDs.count == 1 else {
            return reject(
                sender.uid,
                "a crash record from pid \(senderPID): it carried \(replyFDs.count) descriptors, expected 1")
        }
        var kind = stat()
        guard fstat(reply, &kind) == 0, (kind.st_mode & S_IFMT) == S_IFSOCK else {
            return reject(sender.uid, "a crash record from pid \(senderPID): its reply descriptor is not a socket")
        }
        var record: CrashRecord
        do {
            record = try CrashRecord(bytes: bytes)
        } catch {
            sendVerdict(reply, nanoseconds: 0)
            return reject(sender.uid, "a crash record from pid \(senderPID): \(error)")
        }
        if record.pid != senderPID, let mapped = Self.fromOwnPidNamespace(record, sender: senderPID) { record = mapped }
        guard record.pid == senderPID else {
            sendVerdict(reply, nanoseconds: 0)
            return reject(sender.uid, "a crash record from pid \(senderPID): it names pid \(record.pid)")
        }
        // A process that already died (its stub stopped waiting) is still reported from the
        // record: the kernel vouched for the pid when the record was sent.
        let threads = ProcFiles.threads(of: record.pid)
        let alive = !threads.isEmpty
        guard !alive || threads.contains(record.tid) else {
            sendVerdict(reply, nanoseconds: 0)
            return reject(sender.uid, "a crash record from pid \(senderPID): thread \(record.tid) is not one of its threads")
        }
        // The pid may have been reused since the record was sent: the process there now
        // must still belong to the sender's user, or it is not read at all.
        let status = alive ? ProcFiles.read("/proc/\(record.pid)/status") : nil
        if let owner = status.flatMap({ ProcFiles.credentials(status: $0)?.uid }), owner != sender.uid {
            sendVerdict(reply, nanoseconds: 0)
            return reject(
                sender.uid,
                "a crash record from pid \(senderPID) (uid \(sender.uid)): pid \(record.pid) now belongs to uid \(owner)")
        }
        guard let store = store(for: sender) else {
            sendVerdict(reply, nanoseconds: 0)
            return reject(sender.uid, "a crash record from pid \(senderPID): uid \(sender.uid) is not served here")
        }
        if record.isError, !errorTimes.allows(record.pid) {
            sendVerdict(reply, nanoseconds: 0)
            return reject(
                sender.uid,
                "an error report from pid \(senderPID): more than \(Self.errorsPerMinute) in a minute from this process")
        }
        handleCrash(
            record, access: sender.access(record.pid), threads: threads, status: status, bytes: bytes, reply: reply,
            store: store, sender: sender)
        return nil
    }

    func handleSetting(_ bytes: [UInt8], sender: Sender) -> String? {
        let senderPID = sender.pid
        guard bytes.count == MemoryLayout<cp_setting>.size else {
            return reject(sender.uid, "a setting from pid \(senderPID): \(bytes.count) bytes")
        }
        let enabled = bytes[Int(MemoryLayout<cp_setting>.offset(of: \cp_setting.enabled)!)]
        guard enabled <= 1 else { return reject(sender.uid, "a setting from pid \(senderPID): enabled = \(enabled)") }
        // Past the limit it is ignored, not rejected: the connection (and the crash it may
        // carry later) stays.
        guard settingTimes.allows(senderPID) else {
            log(about: sender.uid, "ignored a setting from pid \(senderPID): more than \(Self.settingsPerMinute) in a minute")
            return nil
        }
        log(about: sender.uid, "pid \(senderPID) turned crash reporting \(enabled == 1 ? "on" : "off") for its program")
        delegate?.setting(enabled: enabled == 1, from: sender)
        return nil
    }

    func handleConsent(_ bytes: [UInt8], sender: Sender) -> String? {
        let senderPID = sender.pid
        let message: ConsentMessage
        do {
            message = try ConsentMessage(bytes: bytes)
        } catch {
            return reject(sender.uid, "a consent message from pid \(senderPID): \(error)")
        }
        // Past the limit it is ignored, not rejected, as a setting is.
        guard settingTimes.allows(senderPID) else {
            log(
                about: sender.uid,
                "ignored a consent message from pid \(senderPID): more than \(Self.settingsPerMinute) in a minute")
            return nil
        }
        delegate?.consent(message, from: sender)
        return nil
    }

    func handleGoodbye(_ bytes: [UInt8], sender: Sender) -> String? {
        do {
            delegate?.goodbye(try GoodbyeMessage(bytes: bytes), from: sender)
        } catch {
            return reject(sender.uid, "a GOODBYE from pid \(sender.pid): \(error)")
        }
        return nil
    }

    func handleLaunch(_ bytes: [UInt8], sender: Sender) -> String? {
        let message: LaunchMessage
        do {
            message = try LaunchMessage(bytes: bytes)
        } catch {
            return reject(sender.uid, "a launch message from pid \(sender.pid): \(error)")
        }
        // Once per run is what the stub sends; past the settings' limit it is ignored (not logged).
        guard settingTimes.allows(sender.pid) else { return nil }
        if message.protected {
            log(
                about: sender.uid,
                "pid \(sender.pid) ran its launch protection (\(message.consecutiveLaunchCrashes) launch crashes in a row, threshold \(message.threshold))"
            )
        }
        delegate?.launch(message, from: sender)
        return nil
    }

    /// A process in a pid namespace of its own (a container) names itself and its thread in the
    /// record as it sees them; the kernel's credentials give its pid here. The record is the
    /// sender's when /proc/PID/status NSpid says the sender is, inside, the pid the record
    /// names; its thread is the sender's thread whose NSpid ends in the record's tid. Nil when
    /// they do not match (the record stays rejected).
    static func fromOwnPidNamespace(_ record: CrashRecord, sender: ProcessID) -> CrashRecord? {
        guard let ids = ProcFiles.namespaceIDs(of: sender), ids.count > 1, ids.last == record.pid.rawValue,
            let thread = ProcFiles.thread(of: sender, innerID: record.tid.rawValue)
        else { return nil }
        var mapped = record
        mapped.pid = sender
        mapped.tid = thread
        return mapped
    }

    /// What a message whose header is not valid says it is, by its type field when it has one
    /// ("a GOODBYE"): for the log line that rejects it.
    static func messageName(_ bytes: [UInt8]) -> String {
        guard bytes.count >= WireHeader.byteCount else { return "a message" }
        let type = UInt32(bytes[12]) | UInt32(bytes[13]) << 8 | UInt32(bytes[14]) << 16 | UInt32(bytes[15]) << 24
        switch type {
        case CP_MSG_HELLO.rawValue: return "a HELLO"
        case CP_MSG_CRASH.rawValue: return "a crash record"
        case CP_MSG_ERROR.rawValue: return "an error record"
        case CP_MSG_SETTING.rawValue: return "a setting"
        case CP_MSG_GOODBYE.rawValue: return "a GOODBYE"
        case CP_MSG_CONSENT.rawValue: return "a consent message"
        case CP_MSG_LAUNCH.rawValue: return "a launch message"
        case CP_MSG_PENDING_QUERY.rawValue: return "a pending-reports query"
        case CP_MSG_CONSENT_REPORT.rawValue: return "a report's consent"
        default: return "a message"
        }
    }

    /// Handled errors one process may have captured per minute (the stub allows 10 in a row, then
    /// one every 6 s: a stub that does not keep to it is cut off here).
    static let errorsPerMinute = 20
    /// crashport_set_enabled calls one process may have kept per minute (each writes a file).
    static let settingsPerMinute = 10
    private let errorTimes = PerProcessLimit(perMinute: errorsPerMinute)
    private let settingTimes = PerProcessLimit(perMinute: settingsPerMinute)
    /// A consent dialog's queries and per-report decisions one process may make per minute
    /// (each reads or writes the user's reports): a dialog deciding for every listed report fits.
    static let pendingPerMinute = 2 * Int(CP_PENDING_MAX) + 16
    let pendingTimes = PerProcessLimit(perMinute: pendingPerMinute)

    /// At most `perMinute` events per key (a process, a user, a program) in any minute;
    /// forgets everything past 4,096 keys.
    final class PerKeyLimit<Key: Hashable & Sendable>: Sendable {
        let perMinute: Int
        private let times = Mutex<[Key: [UInt64]]>([:])

        init(perMinute: Int) { self.perMinute = perMinute }

        func allows(_ key: Key) -> Bool {
            let now = monotonicNanoseconds()
            return times.withLock { times in
                if times.count > 4096 { times.removeAll() }
                let recent = (times[key] ?? []).filter { now &- $0 < 60_000_000_000 }
                guard recent.count < perMinute else {
                    times[key] = recent
                    return false
                }
                times[key] = recent + [now]
                return true
            }
        }
    }

    typealias PerProcessLimit = PerKeyLimit<ProcessID>

    func reject(_ uid: UInt32, _ what: String) -> String {
        log(about: uid, "rejected \(what)")
        return what
    }

    /// A line about a client of `uid`, through `logAbout` (the sidecar's per-user flood
    /// limit), else `log`.
    func log(about uid: UInt32, _ text: String) {
        if let logAbout { logAbout(text, uid) } else { log(text) }
    }

    /// Never blocks: the reply descriptor is the client's choice, and a socket whose peer never
    /// reads must not stall the watcher.
    func sendVerdict(_ fd: Int32, nanoseconds: UInt64) {
        let verdict = VerdictMessage.encode(captureNanoseconds: nanoseconds)
        _ = verdict.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    }

    /// A termination report for a process seen from outside (the sidecar's client that ended
    /// without a crash record or a goodbye; `crashport run`'s untraced child that died with
    /// none), into `store`: the summary or one log line, the store pruned, and the hooks told.
    /// The report, or nil (said why) when it could not be written.
    @discardableResult
    public func writeTermination(_ end: AbnormalEnd, store: ReportStore, id chosen: String? = nil) -> WrittenReport? {
        let id = chosen ?? ReportStore.newID(pid: end.pid.rawValue)
        var event = TerminationReport.event(for: end, id: id, timestamp: Event.timestamp())
        event.source = "launcher"
        do {
            let path = try store.commit(id: id) { directory in
                try ReportStore.writeFile(directory + "/event.json", Array(try event.jsonData()))
            }
            let report = WrittenReport(id: id, path: path, event: event, captureNanoseconds: 0)
            if keepReports { written.withLock { $0.reports.append(report) } }
            hooks?.wrote(report, into: store)
            prune(store, keeping: id)
            if printSummary {
                let notes = (event.notes ?? []).dropFirst()
                let unwritten = if case .parent(_?) = end.witness { true } else { false }
                log(
                    "\(CrashLog.oneLine(event))\(unwritten ? "; a short report was written instead" : " with no crash record")\n  \((notes + ["report: \(path)"]).joined(separator: "\n  "))"
                )
            }
            if reportLine { log("report: \(CrashLog.oneLine(event)) -> \(path)") }
            return report
        } catch {
            log("could not write the termination report of pid \(end.pid): \(error)")
            return nil
        }
    }

    /// For tools/bench: when CRASHPORT_TIMING_FD names an open descriptor, one line per report
    /// (`at_ns`: CLOCK_MONOTONIC when it was written whole).
    func reportTiming(suspended: UInt64, held: UInt64, verdict: UInt64, total: UInt64, phases: String) {
        guard let fd = Self.timingFD else { return }
        let line =
            "crashport-watcher suspended_ns=\(suspended) held_ns=\(held) verdict_ns=\(verdict) report_written_ns=\(total) \(phases) at_ns=\(monotonicNanoseconds())\n"
        _ = line.withCString { write(fd, $0, strlen($0)) }
    }

    /// For tools/bench: a two-step report's first step on disk (from the record's arrival).
    func reportCapturedTiming(started: UInt64, id: String) {
        guard let fd = Self.timingFD else { return }
        let line = "crashport-captured id=\(id) on_disk_ns=\(monotonicNanoseconds() - started) arrived_at_ns=\(started)\n"
        _ = line.withCString { write(fd, $0, strlen($0)) }
    }

    /// Whether the summary on stderr is coloured: a terminal, NO_COLOR unset, TERM not dumb.
    static let colour = CrashLog.colourWanted(isTerminal: isatty(2) != 0, environment: ProcessInfo.processInfo.environment)

    static let timingFD: Int32? = {
        guard let text = ProcessInfo.processInfo.environment["CRASHPORT_TIMING_FD"], let fd = Int32(text), fd > 2 else {
            return nil
        }
        return fd
    }()

    func handleCrash(
        _ record: CrashRecord, access: ProcessAccess, threads: [ThreadID], status: [UInt8]?, bytes: [UInt8], reply: Int32,
        store: ReportStore, sender: Sender? = nil
    ) {
        let started = monotonicNanoseconds()
        // A process with many threads takes longer to capture: say so before starting, so the
        // stub's bounded wait does not run out mid-capture (it caps the total at 6x its timeout).
        if threads.count > 256 {
            let heartbeat = HeartbeatMessage.encode(extendMilliseconds: 10_000)
            _ = heartbeat.withUnsafeBytes { send(reply, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        }
        // The thread whose fault a handler turned into a call crashed again on its way out (Go
        // with GOTRACEBACK=crash aborts): the held capture, taken at the fault, is the report.
        if !record.isError, record.reraise?.how != .called, let fault = takeHeldFault(of: record.pid) {
            if fault.record.tid == record.tid {
                sendVerdict(reply, nanoseconds: 0)
                writeHeldFault(fault, then: record)
                return
            }
        }
        captures += 1
        noteStubCrash(record)
        // Past the first few faults a handler turned into calls (recovered panics, most likely),
        // only the faulting thread, from the record: a full capture stops every thread.
        var options = self.options
        var thin = false
        if record.reraise?.how == .called {
            if calledFaults.count >= Self.heldFaultLimit { calledFaults.removeAll() }
            calledFaults[record.pid, default: 0] += 1
            thin = calledFaults[record.pid, default: 0] > Self.fullCapturesOfCalledFaults
            if thin { options.usePtrace = false }
        }
        var capture = CaptureSession.hold(
            record: record, access: access, threads: threads, status: status, options: options, cache: cache,
            holder: delegate?.holder(of: record.pid))
        // The process is released; let it continue down its handler chain now. Opening modules,
        // unwinding, symbolication and writing happen while it dies.
        let elapsed = monotonicNanoseconds() - started
        sendVerdict(reply, nanoseconds: elapsed)
        capture.decodeAppArea()
        let held = capture
        if record.reraise?.how == .called {
            let fault = HeldFault(
                record: record, held: held, recordBytes: bytes, store: store, access: access, started: started,
                elapsed: elapsed, thin: thin)
            heldFaults.withLock { Self.hold(fault, in: &$0) }
            return
        }
        let id = ReportStore.newID(pid: record.pid.rawValue)
        if let sender, !record.isError { delegate?.captured(record, id: id, app: held.app, from: sender) }
        submit { [self, cache] in
            asClient(access, pid: record.pid) {
                writeReport(
                    held.finish(cache: cache), recordBytes: bytes, store: store, started: started, captureNanoseconds: elapsed,
                    id: id, twoStepAs: record.isError ? nil : access)
            }
        }
    }

    // MARK: - Faults a handler turned into a call

    /// A fault a program's handler turned into a call (CP_RERAISE_CALLED: Go's runtime making
    /// it a panic, runtime.sigpanic), captured at the fault and held until the process's end
    /// says whether it was the crash: an exit with status 2 (Go's fatal error after a fault in C
    /// code, an unrecovered panic) writes it; a later crash record of the same thread (Go with
    /// GOTRACEBACK=crash aborts) writes it with that signal as its re-raise; any other end, or a
    /// later such fault of the process, drops it (the panic was recovered). Never spooled.
    struct HeldFault: Sendable {
        var record: CrashRecord
        var held: HeldCapture
        var recordBytes: [UInt8]
        var store: ReportStore
        var access: ProcessAccess
        var started: UInt64
        var elapsed: UInt64
        /// Captured from the record only (past fullCapturesOfCalledFaults of its process).
        var thin: Bool
    }

    /// Faults turned into calls by pid (serving thread): how many were captured whole.
    var calledFaults: [ProcessID: Int] = [:]
    /// How many faults turned into calls of one process are captured whole (every thread
    /// stopped, a few ms each); the rest only from the record (the faulting thread's registers
    /// and stack copy, and the modules), a fraction of that. A Go program that recovers
    /// thousands of nil dereferences pays the full capture a few times, not each time.
    static let fullCapturesOfCalledFaults = 4

    /// By pid, one per process (the latest), oldest first. Each holds a capture (every thread's
    /// stack) until its process ends, and a user can fault and then never end: so at most
    /// `heldFaultsPerUser` per user (past it, that user's oldest is let go) and
    /// `heldFaultLimit` in all (past it, the oldest), never a storm of one user's processes
    /// holding the sidecar's memory or pushing out another user's.
    let heldFaults = Mutex<[HeldFault]>([])
    static let heldFaultLimit = 256
    static let heldFaultsPerUser = 16

    static func hold(_ fault: HeldFault, in faults: inout [HeldFault]) {
        hold(fault, in: &faults, pid: \.record.pid, uid: { $0.access.credentials?.uid })
    }

    /// The eviction rule of `hold`, for any held thing of a pid and a user.
    static func hold<Held>(
        _ new: Held, in held: inout [Held], pid: (Held) -> ProcessID, uid: (Held) -> UInt32?
    ) {
        held.removeAll { pid($0) == pid(new) }
        let user = uid(new)
        if held.count(where: { uid($0) == user }) >= heldFaultsPerUser, let oldest = held.firstIndex(where: { uid($0) == user }) {
            held.remove(at: oldest)
        }
        if held.count >= heldFaultLimit { held.removeFirst() }
        held.append(new)
    }
    /// The exit status Go's runtime ends a process with after a fatal error or an unrecovered
    /// panic (runtime.exit(2) in fatalthrow and fatalpanic).
    public static let goFatalExitStatus: Int32 = 2

    func takeHeldFault(of pid: ProcessID) -> HeldFault? {
        heldFaults.withLock { faults in faults.firstIndex { $0.record.pid == pid }.map { faults.remove(at: $0) } }
    }

    /// Whether a fault of `pid`'s is held, waiting for its end.
    public func holdsFault(of pid: ProcessID) -> Bool { heldFaults.withLock { $0.contains { $0.record.pid == pid } } }

    /// `pid` ended (`exit`, nil when unknown, or when it lives on after an exec): a held fault
    /// of its is written as its crash when it exited with Go's fatal status, else dropped.
    /// Returns the id the report is written under (through `submit`), or nil.
    @discardableResult
    public func settleHeldFault(of pid: ProcessID, exit: ProcessExit?) -> String? {
        guard let fault = takeHeldFault(of: pid), exit == .exited(Self.goFatalExitStatus) else { return nil }
        var reraise = fault.record.reraise
        reraise?.code = Self.goFatalExitStatus
        let note =
            "captured at the fault, written when the process exited with status \(Self.goFatalExitStatus), Go's fatal exit (Go printed \"fatal error\" or \"panic\" and its goroutines on stderr); GOTRACEBACK=crash makes Go abort with SIGABRT instead (crashport doctor)"
        return writeHeldFault(fault, reraise: reraise, note: note)
    }

    /// Writes a held fault whose thread crashed again with `second` (its re-raise).
    func writeHeldFault(_ fault: HeldFault, then second: CrashRecord) {
        // The handler stays the one that turned the fault into a call.
        var reraise = fault.record.reraise
        reraise?.how = second.code > 0 ? .faulted : .raised
        reraise?.signal = second.signal
        reraise?.code = second.code
        reraise?.pc = second.reraise?.pc ?? 0
        let note =
            "captured at the fault, before the thread ended the process with \(SignalNames.name(second.signal)) (Go with GOTRACEBACK=crash aborts after printing)"
        writeHeldFault(fault, reraise: reraise, note: note)
    }

    @discardableResult
    func writeHeldFault(_ fault: HeldFault, reraise: WireReraise?, note: String) -> String {
        let id = ReportStore.newID(pid: fault.record.pid.rawValue)
        submit { [self, cache] in
            asClient(fault.access, pid: fault.record.pid) {
                var capture = fault.held.finish(cache: cache)
                capture.record.reraise = reraise
                capture.notes.append(note)
                if fault.thin {
                    capture.notes.removeAll { $0.hasPrefix("ptrace not used (--no-ptrace)") }
                    capture.notes.append(
                        "only the faulting thread, from the stub's record: more than \(Self.fullCapturesOfCalledFaults) faults of this process were turned into calls (recovered panics, most likely), and only the first \(Self.fullCapturesOfCalledFaults) stop every thread"
                    )
                }
                writeReport(
                    capture, recordBytes: fault.recordBytes, store: fault.store, started: fault.started,
                    captureNanoseconds: fault.elapsed, id: id, spoolOnFailure: false)
            }
        }
        return id
    }

    /// Runs a report's building and writing with the credentials of the process's user (the
    /// module and debug files it opens, the attachments it copies): on a report thread, never
    /// with root's. A thread that cannot take them on writes nothing, and says so.
    func asClient(_ access: ProcessAccess, pid: ProcessID, _ body: () -> Void) {
        do {
            try access.perform(body)
        } catch {
            log("could not write the report of pid \(pid): \(error)")
        }
    }

    /// A death or hang the watcher observed itself (no stub record): the process captured
    /// (through `holder` when the watcher already traces it) and released, then reported like a
    /// crash, into `store` (the server's by default), through `submit`. `released` runs once
    /// the process is let go, before the report is built: what else holds it goes too. Returns
    /// the id the report is written under (a failure to write it is logged).
    @discardableResult
    public func captureObserved(
        _ record: CrashRecord, access given: ProcessAccess? = nil, holder: ThreadHold?, store: ReportStore? = nil,
        notes: [String] = [], earlier: PressureSnapshot? = nil, released: () -> Void = {}
    ) -> String {
        let started = monotonicNanoseconds()
        captures += 1
        let id = ReportStore.newID(pid: record.pid.rawValue)
        let access = given ?? .own(record.pid)
        let held = CaptureSession.hold(
            record: record, access: access, options: options, cache: cache, holder: holder, earlier: earlier)
        let elapsed = monotonicNanoseconds() - started
        released()
        let store = store ?? self.store
        submit { [self, cache] in
            asClient(access, pid: record.pid) {
                var capture = held.finish(cache: cache)
                capture.notes += notes
                writeReport(
                    capture, recordBytes: [], store: store, started: started, captureNanoseconds: elapsed, id: id,
                    spoolOnFailure: false)
            }
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
        access: ProcessAccess? = nil, holder: ThreadHold?, store: ReportStore? = nil
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
        access: ProcessAccess? = nil, store: ReportStore? = nil, earlier: PressureSnapshot? = nil,
        released: () -> Void = {}
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

    /// Unwinds, symbolicates and writes the report of a capture (on the submitting thread or a
    /// pool's: nothing here touches the live process any more). With `twoStepAs` (the access the
    /// capture was read with) and a pool, in two steps: `writeCaptured`.
    @discardableResult
    public func writeReport(
        _ capture: Capture, recordBytes: [UInt8], store: ReportStore, started: UInt64, captureNanoseconds elapsed: UInt64,
        capturedFrom: String? = nil, id chosen: String? = nil, spoolOnFailure: Bool = true, source: String? = nil,
        twoStepAs access: ProcessAccess? = nil, amend: @escaping @Sendable (inout Event) -> Void = { _ in }
    ) -> Bool {
        let record = capture.record
        reported.withLock { set in
            if set.count > 4096 { set.removeAll() }
            set.insert(Self.key(record))
        }
        let id = chosen ?? ReportStore.newID(pid: record.pid.rawValue)
        if let access, let pool {
            return writeCaptured(
                capture, recordBytes: recordBytes, store: store, started: started, captureNanoseconds: elapsed, id: id,
                source: source, access: access, pool: pool, amend: amend)
        }
        var (event, fileBytes, built) = fullEvent(
            capture, id: id, capturedFrom: capturedFrom, source: source, amend: amend)
        do {
            var encoded: UInt64 = 0, dumped: UInt64 = 0
            let path = try store.commit(id: id) { directory in
                // First, so that the event says what the copies hold (read as the owner: commit's ids).
                let attached = Attachments.copy(
                    errorFiles: capture.errorDetails?.files ?? [], programFiles: capture.app?.attachments ?? [],
                    into: directory)
                if !attached.isEmpty { event.attachments = attached }
                var started = monotonicNanoseconds()
                let json = Array(try event.jsonData())
                encoded = monotonicNanoseconds() - started
                try ReportStore.writeFile(directory + "/event.json", json)
                started = monotonicNanoseconds()
                // With the code and CFI the unwind read, after the process's own memory.
                var snapshot = capture.snapshot
                snapshot.extraMemory += fileBytes.regions
                try MinidumpWriter(includeEnvironment: options.captureEnvironment)
                    .write(snapshot, to: directory + "/minidump.dmp")
                dumped = monotonicNanoseconds() - started
            }
            wrote(
                event, id: id, path: path, store: store, capture: capture, started: started, captureNanoseconds: elapsed,
                phases: "unwind_symbolicate_ns=\(built) json_ns=\(encoded) minidump_ns=\(dumped)")
            return true
        } catch {
            return unwritable(
                capture, recordBytes: recordBytes, store: store, error: error, spoolOnFailure: spoolOnFailure, event: event)
        }
    }

    /// The stores written to since their last prune (by root), with the newest report each,
    /// pruned when the pool runs out of work.
    let unpruned = Mutex<[String: (store: ReportStore, newest: String)]>([:])

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

    /// A report in two steps. First, at once: the minidump (every thread's registers and stack,
    /// the modules) and the captured event (ReportBuilder.capturedEvent, Event.stage
    /// `captured`), renamed into place unsynced: on disk at the pace of a minidump writer, a
    /// storm's reports all there before the first is symbolicated. Then, as a deferred job of
    /// `pool` (after every first step waiting), with the client's credentials again: every
    /// thread unwound and symbolicated, the full event and the minidump with the code the unwind
    /// read renamed over the first ones, the report fsynced; only then is it announced (summary,
    /// hooks, timing, prune). A storm's deferred captures past the pool's budget are finished at
    /// once instead. A first step that fails goes the single step's way (spool, log).
    func writeCaptured(
        _ capture: Capture, recordBytes: [UInt8], store: ReportStore, started: UInt64, captureNanoseconds elapsed: UInt64,
        id: String, source: String?, access: ProcessAccess, pool: ReportPool,
        amend: @escaping @Sendable (inout Event) -> Void = { _ in }
    ) -> Bool {
        var first = ReportBuilder.capturedEvent(for: capture, id: id, timestamp: Event.timestamp())
        first.source = Self.source(source, of: capture.record)
        amend(&first)
        first.session = hooks?.sessionID(of: capture.record.pid)
        var attached: [AttachmentRecord] = []
        do {
            _ = try store.commit(id: id, durable: false) { directory in
                attached = Attachments.copy(
                    errorFiles: capture.errorDetails?.files ?? [], programFiles: capture.app?.attachments ?? [],
                    into: directory)
                if !attached.isEmpty { first.attachments = attached }
                try ReportStore.writeFile(directory + "/event.json", Array(try first.jsonData()), sync: false)
                let dump = MinidumpWriter(includeEnvironment: options.captureEnvironment).bytes(for: capture.snapshot)
                try ReportStore.writeFile(directory + "/minidump.dmp", dump, sync: false)
            }
        } catch {
            return unwritable(capture, recordBytes: recordBytes, store: store, error: error, spoolOnFailure: true, event: first)
        }
        reportCapturedTiming(started: started, id: id)
        // A second step that waits behind another keeps its capture's bytes on disk meanwhile.
        var waiting = capture
        let place = pool.deferredJobWouldWait ? spill?.spill(&waiting) : nil
        let second: @Sendable () -> Void = { [self, attached, waiting] in
            Self.holdSecondStep()
            var capture = waiting
            if let place, let spill, !spill.restore(&capture, from: place) {
                log(
                    "pid \(capture.record.pid): report \(id) stays as captured (its minidump is whole; not unwound or symbolicated): its capture could not be read back"
                )
                return
            }
            asClient(access, pid: capture.record.pid) {
                var (event, fileBytes, built) = fullEvent(capture, id: id, capturedFrom: nil, source: source, amend: amend)
                if !attached.isEmpty { event.attachments = attached }
                do {
                    var encoded: UInt64 = 0, dumped: UInt64 = 0
                    let path = try store.amend(id: id) { directory in
                        var started = monotonicNanoseconds()
                        let json = Array(try event.jsonData())
                        encoded = monotonicNanoseconds() - started
                        started = monotonicNanoseconds()
                        var snapshot = capture.snapshot
                        snapshot.extraMemory += fileBytes.regions
                        try ReportStore.replaceFile(
                            directory + "/minidump.dmp",
                            MinidumpWriter(includeEnvironment: options.captureEnvironment).bytes(for: snapshot))
                        dumped = monotonicNanoseconds() - started
                        try ReportStore.replaceFile(directory + "/event.json", json)
                    }
                    wrote(
                        event, id: id, path: path, store: store, capture: capture, started: started,
                        captureNanoseconds: elapsed,
                        phases: "unwind_symbolicate_ns=\(built) json_ns=\(encoded) minidump_ns=\(dumped)")
                } catch {
                    log(
                        "pid \(capture.record.pid): report \(id) stays as captured (its minidump is whole; not unwound or symbolicated): \(error)"
                    )
                }
            }
        }
        if !pool.deferJob(holding: capture.heldBytes, second) { second() }
        return true
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

    /// The level that saw a report's crash, for its event: the one given, else a stub's record,
    /// or a death, hang or exit this watcher observed.
    static func source(_ given: String?, of record: CrashRecord) -> String {
        given ?? (record.observation == nil ? "stub" : "launcher")
    }

    /// The full event of a capture (every thread unwound and symbolicated), what the unwind
    /// read of the modules' files, and how long that took.
    func fullEvent(
        _ capture: Capture, id: String, capturedFrom: String?, source: String?, amend: (inout Event) -> Void
    ) -> (Event, UnwindFileBytes, UInt64) {
        let record = capture.record
        let buildStarted = monotonicNanoseconds()
        let fileBytes = UnwindFileBytes()
        var event = ReportBuilder.event(
            for: capture, id: id, timestamp: Event.timestamp(), rules: inAppRules, fileBytes: fileBytes,
            debuginfod: options.debuginfod)
        event.capturedFrom = capturedFrom
        event.source = Self.source(source, of: record)
        amend(&event)
        event.session = hooks?.sessionID(of: record.pid)
        hooks?.amend(&event, record: record)
        let built = monotonicNanoseconds() - buildStarted
        if record.otherCrashes > 0 {
            event.notes =
                (event.notes ?? []) + ["\(record.otherCrashes) other thread(s) crashed while this crash was being reported"]
        }
        return (event, fileBytes, built)
    }

    /// A report written whole: kept (launcher), the hooks told, the store pruned, timed, said.
    private func wrote(
        _ event: Event, id: String, path: String, store: ReportStore, capture: Capture, started: UInt64,
        captureNanoseconds elapsed: UInt64, phases: String
    ) {
        let report = WrittenReport(id: id, path: path, event: event, captureNanoseconds: elapsed)
        if keepReports { written.withLock { $0.reports.append(report) } }
        hooks?.wrote(report, into: store)
        // The quota: at once inline, else when the pool runs out of work (`pruneWritten`: a
        // prune lists the whole store, so one per report would make a storm's cost grow as its
        // square, and it runs as the store's owner, not as the client this thread reads for).
        if pool == nil {
            prune(store, keeping: id)
        } else {
            unpruned.withLock { $0[store.root] = (store, id) }
        }
        reportTiming(
            suspended: capture.suspendedNanoseconds, held: capture.heldNanoseconds, verdict: elapsed,
            total: monotonicNanoseconds() - started, phases: phases)
        if printSummary {
            log(String(CrashLog.summary(event, reportPath: path, colour: Self.colour).dropFirst("crashport: ".count)))
        }
        if reportLine { log("report: \(CrashLog.oneLine(event)) -> \(path)") }
    }

    /// A report that could not be written: said, and spooled when the hooks keep it.
    private func unwritable(
        _ capture: Capture, recordBytes: [UInt8], store: ReportStore, error: Error, spoolOnFailure: Bool, event: Event
    ) -> Bool {
        let record = capture.record
        if keepReports { written.withLock { $0.unwritten[record.pid] = "\(error)" } }
        log("could not write the report of pid \(record.pid) (\(SignalNames.name(record.signal))): \(error)")
        let kept =
            spoolOnFailure && !record.isError
            && (hooks?.unwritable(capture, recordBytes: recordBytes, error: error, store: store) ?? false)
        if !kept && printSummary {
            log(String(CrashLog.summary(event, reportPath: "(not written)").dropFirst("crashport: ".count)))
        }
        return false
    }
}
