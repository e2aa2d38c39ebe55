// LaunchServing: `crashport run`'s side of its child's socket and reports. The launcher's
// WireServerDelegate (one child and whatever of its descendants speak on the inherited socket,
// one store, one program's run history), its ReportHooks (the run's session, the notes of a
// death seen at its exit, the hang links), and ChildWatch, what the serving loop learns about
// its child while it runs, read by the report writer.

import FoundationEssentials
import LiveProcess
import ReportModel
import Reports
import Store
import Synchronization
import Upload
#if canImport(Glibc)
import Glibc
#endif

/// The launcher as its wire server's delegate: one child (and whatever of its descendants
/// speak on the inherited socket), one store, one program's run history.
final class LaunchServing: ConsentRequests {
    let child: ProcessID
    let tracer: ExitTracer?
    let runKey: (executable: String, buildID: String?)
    let store: ReportStore
    let history: RunHistory
    /// crashport_set_enabled(0), kept from an earlier run or said during this one: no report.
    let disabled: Mutex<Bool>
    let watch: ChildWatch
    let log: (String) -> Void

    init(
        child: ProcessID, tracer: ExitTracer?, runKey: (executable: String, buildID: String?), store: ReportStore,
        history: RunHistory, disabled: Bool, watch: ChildWatch, log: @escaping (String) -> Void
    ) {
        self.child = child
        self.tracer = tracer
        self.runKey = runKey
        self.store = store
        self.history = history
        self.disabled = Mutex(disabled)
        self.watch = watch
        self.log = log
    }

    func store(for sender: Sender) -> ReportStore? { store }

    func hello(_ hello: HelloMessage, from sender: Sender) {
        if sender.pid == child { watch.appArea = hello.appArea } else { greeted.withLock { _ = $0.insert(sender.pid) } }
    }

    /// The descendants that said HELLO on the run's socket.
    let greeted = Mutex<Set<ProcessID>>([])

    /// Descendants with the stub that outlive the run (a daemon that forked away, which still
    /// holds the run's socket: no hang-up on `socket`): nobody serves them once crashport run
    /// has exited, so it says so rather than leave their crashes unsaid.
    func sayWhoOutlivesTheRun(socket: Int32, open: Bool) {
        var poll = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        guard open, Glibc.poll(&poll, 1, 0) >= 0, poll.revents & Int16(POLLHUP) == 0 else { return }
        let alive = greeted.withLock({ $0 }).filter { kill($0.rawValue, 0) == 0 }.map { "\($0)" }.sorted()
        let who = alive.isEmpty ? "a descendant of the program" : "pid " + alive.joined(separator: ", pid ")
        log(
            "\(who) still runs with the stub after the program ended (a daemon?); its crashes are not reported once crashport run exits: serve daemons with crashport watch (docs/operating.md)"
        )
    }

    /// What captures and writes the crashes the wire server accepts (set once, before serving).
    var capturer: CrashCapturer?

    func crash(_ crash: AcceptedCrash) -> String? {
        capturer?.crash(crash, store: store, holder: crash.record.pid == child ? tracer : nil)
        return nil
    }

    /// The child ran its launch protection (crashport_launch): its session says so.
    let protected = Mutex(false)
    /// Its asynchronous protect work timed out (crashport_launch_with).
    let protectTimedOut = Mutex(false)

    func launch(_ message: LaunchMessage, from sender: Sender) {
        guard sender.pid == child, message.protected else { return }
        protected.withLock { $0 = true }
        if message.protectTimedOut { protectTimedOut.withLock { $0 = true } }
    }

    /// The program a message speaks for: the run's, for the child; else the sender's own.
    func programKey(of sender: Sender) -> (executable: String, buildID: String?) {
        sender.pid == child ? runKey : RunHistory.programKey(pid: sender.pid)
    }

    func consentStore(for sender: Sender) -> ReportStore? { store }
    func consentProgram(of sender: Sender) -> String { programKey(of: sender).executable }
    func say(_ text: String, about sender: Sender) { log(text) }
    func startUpload(of store: ReportStore) { UploadSpawner.spawn(reports: store.root, log: log) }

    func setting(enabled: Bool, from sender: Sender) {
        let key = programKey(of: sender)
        if sender.pid == child { disabled.withLock { $0 = !enabled } }
        do {
            try history.setEnabled(enabled, executable: key.executable, buildID: key.buildID)
        } catch {
            log("pid \(sender.pid): its setting could not be kept: \(error)")
        }
    }
}

/// What the launcher adds to its child's reports: its session, the notes of a death seen at its
/// exit, and the link from a watchdog's SIGABRT to the hang report before it.
struct LaunchReportHooks: ReportHooks {
    let child: ProcessID
    let runKey: (executable: String, buildID: String?)
    let session: String
    let watch: ChildWatch

    func sessionID(of pid: ProcessID) -> String? { pid == child ? session : nil }

    func amend(_ event: inout Event, record: CrashRecord) {
        // A descendant's report: the run's session when it runs the run's program (a forked
        // worker), else a session of its own (Launcher.sessionRecords).
        if event.session == nil, let process = event.process {
            let program = process.executable.map(RunHistory.realPath)
            event.session =
                program == runKey.executable && process.buildID == runKey.buildID
                ? session : watch.session(of: record.pid)
        }
        if case .exit? = record.observation, record.pid == child {
            event.notes = (event.notes ?? []) + watch.exitNotes
        }
        // The SIGABRT of --hang-kill, or of a watchdog: linked to the hang report before it.
        watch.hangs.amend(&event, record)
    }
}

final class ChildWatch: Sendable {
    private let state = Mutex<(appArea: UInt64, exitNotes: [String])>((0, []))
    /// The sessions of descendants that run another program, by pid.
    private let sessions = Mutex<[ProcessID: String]>([:])
    /// Its hang reports, for the SIGABRT that may follow (--hang-kill's, or a watchdog's).
    let hangs = HangReports()

    /// The app area's address, from the stub's HELLO (the heartbeat is there).
    var appArea: UInt64 {
        get { state.withLock { $0.appArea } }
        set { state.withLock { $0.appArea = newValue } }
    }

    /// What the report of a death seen at its exit adds (which OOM count was read).
    var exitNotes: [String] {
        get { state.withLock { $0.exitNotes } }
        set { state.withLock { $0.exitNotes = newValue } }
    }

    /// The session of a descendant that runs another program, made at its first report.
    func session(of pid: ProcessID) -> String {
        sessions.withLock { known in
            if let sid = known[pid] { return sid }
            let sid = SessionRecord.newID()
            known[pid] = sid
            return sid
        }
    }

}
