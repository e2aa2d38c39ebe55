// Sidecar: `crashport watch`, one long-running watcher serving every process on the machine
// that connects to its socket (CRASHPORT_SOCKET), as Crashpad's handler and systemd-coredump do.
//
// One pipeline with `crashport run`: each connection's messages go through the WireServer, which
// verifies them against the kernel's credentials; a crash is captured by the CrashCapturer
// (serially, on this thread, the process released before anything slow), which hands
// unwinding, symbolication and writing to the ReportWriter's bounded pool. What is added here is serving many: the listening socket (bound, or passed by
// systemd socket activation), clients and their limits, per-user report directories written
// with the user's filesystem ids, the spool of crashes no watcher answered, and the daemon's
// signals (SIGTERM/SIGINT: finish the reports in flight, exit 0; SIGHUP: reopen the log,
// reread the configuration), and the ends no crash record describes (SidecarEnds.swift): a
// client whose connection closes without GOODBYE is followed through its pidfd to its exit
// status, and reported with its cgroup's OOM counter and the breadcrumbs read while it ran.
// Clients can be kept traced until they exit, and their heartbeat watched (SidecarTracing.swift):
// this thread is their tracer too.

import BoundedBytes
import CCrashPortProtocol
import FoundationEssentials
import LiveProcess
import ObjectFile
import Processes
import ReportModel
import Reports
import Store
import Synchronization
import Upload
#if canImport(Glibc)
import Glibc
#endif

public enum SidecarError: Error, CustomStringConvertible {
    case socket(String)
    case directory(String)

    public var description: String {
        switch self {
        case .socket(let why), .directory(let why): return why
        }
    }
}

public final class Sidecar {
    public private(set) var configuration: SidecarConfiguration
    let log: WatcherLog
    let isRoot = getuid() == 0
    /// The crash socket's messages, checked (made in startServing, with self its delegate).
    var wire: WireServer!
    /// What captures the clients' crashes and writes every report (made in startServing).
    var capturer: CrashCapturer!
    /// Made in run(), after the signals are blocked: its threads must not take SIGTERM.
    var pool: ReportPool!
    var listener: Int32 = -1
    /// The path we bound (and remove at exit); nil for abstract names and activated sockets.
    var boundPath: String?
    var clients: [Int32: Client] = [:]
    var spool: SpoolIngest?
    /// `--host`: the machine's core handler too (SidecarHost.swift).
    var hostLevel: SidecarHostLevel?
    /// Per-uid stores already prepared (root).
    var stores: [UInt32: ReportStore] = [:]
    /// The clients kept traced until they exit (SidecarTracing.swift): this thread traces them.
    let traced = TraceGroup()
    /// The hang reports written, for the kill that may follow.
    let hangReports = HangReports()
    /// The uploads it starts (UploadChildren.swift).
    let uploadProcesses = Children()

    /// A connected client: a bucket of `clients`, with its run and watch boxed (Boxed.swift).
    struct Client {
        var peer: Sender
        var refusal: String?
        var messages = 0
        /// The run this connection is, from its HELLO (RunHistory: last run, sessions).
        @Boxed var session: ClientSession? = nil
        /// What an abnormal end would need, from its HELLO on (SidecarEnds.swift).
        @Boxed var watch: ClientWatch? = nil
        /// The exit status its own process said GOODBYE with: it is exiting normally.
        var goodbye: Int32?
    }

    /// Clients whose connection closed without GOODBYE or crash record, until their end is
    /// known (SidecarEnds.swift).
    var endings: [PendingEnd] = []
    /// Bytes the clients' monitored breadcrumbs and annotations hold, and this second's read
    /// allowance (SidecarEnds.swift).
    var appAreaBytes = 0
    var appAreaBudget = (second: UInt64(0), left: 0)
    /// Termination reports per user and per program (a fork bomb of SIGKILLed clients writes a
    /// few, not thousands).
    let terminationsPerUser = RateLimit<UInt32>(perMinute: 30)
    let terminationsPerProgram = RateLimit<String>(perMinute: 10)

    struct ClientSession: Sendable {
        var sid = SessionRecord.newID()
        var executable: String
        var buildID: String?
        var release: String?
        var pid: ProcessID
        var started: Date
        var errors = 0
        var store: ReportStore
        /// The first crash of a process it forked (sharing its connection, running its program):
        /// the run crashed, whatever way its own process ends (Launcher.sessionRecords).
        var forkedCrash: (id: String, duringLaunch: Bool?, release: String?)?
        /// It ran its launch protection (crashport_launch).
        var launchProtected = false
        /// Its asynchronous protect work timed out (crashport_launch_with).
        var protectTimedOut = false
        /// Hangs reported while it ran.
        var hangs = 0
        /// The status it said GOODBYE with.
        var exitCode: Int32?
        /// What its run did to its memory (from HELLO; its peak read at its checks).
        var memory: SidecarMemory?

        /// `memory` false: without the run's memory, which reads its cgroup's files (a crash's
        /// end: `endRun` reads it on a report thread, off the serving thread's path through a
        /// storm of crashes).
        func record(
            status: SessionRecord.Status, crashedDuringLaunch: Bool? = nil, reportID: String? = nil, release: String? = nil,
            signal: Int32? = nil, oomKilled: Bool = false, memory withMemory: Bool = true
        )
            -> SessionRecord
        {
            if status != .crashed, let crash = forkedCrash {
                return record(
                    status: .crashed, crashedDuringLaunch: crash.duringLaunch, reportID: crash.id, release: crash.release,
                    memory: withMemory)
            }
            var record = SessionRecord(
                sid: sid, executable: executable, buildID: buildID, release: release ?? self.release, pid: pid.rawValue,
                started: started, ended: Date(), status: status, errors: errors, crashedDuringLaunch: crashedDuringLaunch,
                reportID: reportID)
            record.signal = signal
            record.exitCode = status == .exited ? exitCode : nil
            record.launchProtected = launchProtected ? true : nil
            record.protectTimedOut = protectTimedOut ? true : nil
            record.hangs = hangs
            record.memory = withMemory ? memory?.session(oomKilled: oomKilled) : nil
            return record
        }

        /// Whether an end at `ended` (ns since the epoch) came in its launch window (LaunchWindow,
        /// from HELLO, with its app area as the monitor last read it).
        func endedDuringLaunch(app: AppArea?, ended: UInt64 = realtimeNanoseconds()) -> Bool {
            LaunchWindow.contains(ended: ended, started: Launcher.nanoseconds(started), app: app)
        }
    }

    /// Every connected client's session id, for its reports (read on the writing threads); a
    /// crashed client's until its report is written.
    let crashedSessions = PendingSessions()

    final class PendingSessions: Sendable {
        private let ids = Mutex<[ProcessID: String]>([:])

        func started(_ session: ClientSession) { name(session.pid, session: session.sid) }
        func name(_ pid: ProcessID, session sid: String) {
            ids.withLock { $0[pid] = sid }
        }
        func ended(_ pid: ProcessID) { ids.withLock { _ = $0.removeValue(forKey: pid) } }
        func id(of pid: ProcessID) -> String? { ids.withLock { $0[pid] } }
    }

    /// The runs ended on this thread whose history a report thread has not written yet.
    let runsInFlight = RunsInFlight()

    /// Ends a run: its program's record moves on at once for the next HELLO (runsInFlight), and
    /// the session is written (and fsynced) on a report thread, after `first` (its report), and
    /// after the reports' first steps waiting (a deferred job: a storm's reports go first).
    /// `memory`: the run's memory, read here on the report thread (a crash's end; until then the
    /// record the next HELLO reads has none).
    func endRun(
        _ record: SessionRecord, store: ReportStore, memory: SidecarMemory? = nil, after first: (@Sendable () -> Void)? = nil
    ) {
        let key = runsInFlight.ended(record, store: store)
        let runs = runsInFlight
        let job: @Sendable () -> Void = {
            first?()
            var record = record
            if let memory { record.memory = memory.session(oomKilled: false) }
            RunHistory(store: store).ended(record)
            runs.written(key)
        }
        if !pool.deferJob(holding: 0, job) { pool.submit(job) }
    }

    public init(configuration: SidecarConfiguration) {
        // The section cache's directory, found with the sidecar's own credentials (a report
        // thread reading as a client could not make or reach it).
        _ = SectionCache.directory
        self.configuration = configuration
        log = WatcherLog(path: configuration.logPath)
    }

    /// Serves until SIGTERM or SIGINT; the exit status.
    public func run() throws -> Int32 {
        raiseDescriptorLimit()
        if let nodeRoot = configuration.nodeRoot { NodeRoot.choose(nodeRoot) }
        signal(SIGPIPE, SIG_IGN)
        var original = sigset_t()
        // SIGCHLD: the traced clients' ptrace events (this thread is their tracer).
        let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGCHLD]
        let signals: SignalDescriptor
        do {
            signals = try SignalDescriptor.blocking(handled, previousMask: &original)
        } catch {
            throw SidecarError.socket("signalfd: \(error.reason)")
        }
        defer { signals.close() }
        pool = ReportPool(threads: configuration.jobs)

        listener = try openListener()
        defer { closeListener() }
        try startServing()
        defer { hostLevel?.stop() }
        var pages = IdlePages()
        var watchdog = ServiceWatchdog()
        var lastScan = monotonicNanoseconds()
        var stopping = false
        while !stopping {
            let order = Array(clients.keys)
            var fds = pollSet(signals: signals, clients: order)
            // Ends being settled are looked at every 100 ms (a zombie's parent may reap it);
            // heartbeats when they are due.
            var timeout: Int32 = !endings.isEmpty ? 100 : pages.timeout
            if let due = heartbeatTimeout(now: monotonicNanoseconds()) { timeout = min(timeout, due) }
            if let due = watchdog.timeout(now: monotonicNanoseconds()) { timeout = min(timeout, due) }
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 && errno != EINTR { throw SidecarError.socket("poll: \(String(cString: strerror(errno)))") }
            if PtraceSession.hasLeftovers { PtraceSession.reapLeftovers() }
            if fds[1].revents != 0 { stopping = takeSignals(signals) }
            if fds[0].revents != 0 && !stopping { acceptClients() }
            if fds[fds.count - 1].revents != 0 && !stopping { hostLevel?.accept() }
            for (index, fd) in order.enumerated() where fds[3 + index].revents != 0 {
                serve(fd)
            }
            let now = lookAround()
            if watchdog.due(now: now) { notify("WATCHDOG=1") }
            if fds[2].revents != 0 || now &- lastScan > 30_000_000_000 {
                spool?.consumeChanges()
                ingestSpool()
                lastScan = now
            }
            pages.look(now: now, busy: ready > 0 || pool.pending > 0, captures: capturer.captures)
        }
        stopServing()
        return 0
    }

    /// What the serving loop polls: the listener, the signals, the spool's changes, then one
    /// per client (in `clients`' order), one per ending client (its pidfd says when it has
    /// died), and last the cores the kernel hands the host level.
    func pollSet(signals: SignalDescriptor, clients order: [Int32]) -> [pollfd] {
        var fds = [
            pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
            pollfd(fd: signals.fd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: spool?.changes ?? -1, events: Int16(POLLIN), revents: 0),
        ]
        fds += order.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        fds += endings.map { pollfd(fd: $0.died == nil ? $0.watch.handle?.fd ?? -1 : -1, events: Int16(POLLIN), revents: 0) }
        fds.append(pollfd(fd: hostLevel?.pollDescriptor ?? -1, events: Int16(POLLIN), revents: 0))
        return fds
    }

    /// Each turn of the loop, after what was ready was served: the traced clients' events, the
    /// uploads, the heartbeats, the host level's deadlines, the ends being settled, the app
    /// areas. The time it looked (CLOCK_MONOTONIC).
    func lookAround() -> UInt64 {
        handleTraceEvents()
        reapUploads()
        let now = monotonicNanoseconds()
        checkHeartbeats(now: now)
        hostLevel?.check(now: now)
        settleEndings(now: now)
        checkAppAreas(now: now)
        return now
    }

    /// Everything between the listening socket and the first poll: the reports directory, the
    /// spool, the crash server, systemd told we are ready, the spool's crashes taken in.
    func startServing() throws {
        try prepareReports()
        spool = try SpoolIngest(directory: configuration.spoolDirectory, shared: isRoot, log: log)
        configureServer()
        try startHostLevel()

        let who = isRoot ? "every user" : "uid \(getuid()) only"
        log.say(
            "watching \(configuration.socketPath) (serving \(who)); reports in \(configuration.reportsRoot); spool \(configuration.spoolDirectory)"
        )
        notify("READY=1\nSTATUS=serving \(configuration.socketPath)")
        ingestSpool()
        // Serving from here on: the pages start-up touched need not stay mapped
        // (ResidentMemory.swift); nor do those of clients and reports, once quiet for 200 ms and
        // a minute after the last capture (IdlePages).
        ResidentMemory.releaseCleanFilePages()
    }

    /// The daemon's signals, read from the signalfd: SIGHUP reloads, SIGTERM or SIGINT stops
    /// (true), SIGCHLD is left to handleTraceEvents.
    func takeSignals(_ signals: SignalDescriptor) -> Bool {
        var stopping = false
        while let number = signals.next()?.signal {
            if number == SIGHUP {
                reload()
            } else if number == SIGCHLD {
                continue  // handled below, with the statuses it announced
            } else {
                log.say("\(SignalNames.name(number)): finishing \(pool.pending) report(s) in flight, then exiting")
                stopping = true
            }
        }
        return stopping
    }

    /// After SIGTERM or SIGINT: the traced clients let go, the connections closed, the ends
    /// being settled reported as they stand, and the reports in flight finished.
    func stopServing() {
        notify("STOPPING=1")
        // The traced clients run on untraced (a tracer that exits would detach them anyway).
        for pid in traced.processes { traced.tracer(of: pid)?.detachEverything() }
        for fd in clients.keys { close(fd) }
        clients = [:]
        settleEndings(now: monotonicNanoseconds(), stopping: true)
        // The pattern put back, and the dumps in flight read, before their reports are drained.
        hostLevel?.stop()
        hostLevel = nil
        pool.drain()
        log.say("stopped")
    }

    /// When the serving loop gives back the pages it touched (ResidentMemory.swift): once quiet
    /// for 200 ms, except for a minute after a capture (a machine that has just crashed may crash
    /// again: the capture path stays mapped meanwhile).
    struct IdlePages {
        /// When the loop last had something to do, until the pages are given back.
        var lastBusy: UInt64?
        var lastCapture: UInt64?
        var capturesSeen = 0
        var warm = false

        /// How long the loop may sleep: 100 ms while the pages wait to be given back.
        var timeout: Int32 { lastBusy == nil || warm ? 1000 : 100 }

        /// One turn of the loop (`busy`: it had something to do); gives the pages back when due.
        mutating func look(now: UInt64, busy: Bool, captures: Int) {
            if busy { lastBusy = now }
            if captures != capturesSeen {
                capturesSeen = captures
                lastCapture = now
            }
            warm = lastCapture.map { now &- $0 < 60_000_000_000 } ?? false
            if !warm, let busy = lastBusy, now &- busy > 200_000_000 {
                ResidentMemory.releaseCleanFilePages()
                lastBusy = nil
            }
        }
    }

    // MARK: - The socket

    /// The listening socket: the one systemd passed (LISTEN_FDS), else bound at the path.
    func openListener() throws -> Int32 {
        if let activated = try SocketActivation.take() {
            log.say("using the socket passed by systemd (fd \(activated))")
            return activated
        }
        let path = configuration.socketPath
        if !path.hasPrefix("@") {
            try makeDirectories(parentOf: path, mode: isRoot ? 0o755 : 0o700)
            var info = stat()
            if lstat(path, &info) == 0 {
                guard (info.st_mode & S_IFMT) == S_IFSOCK else {
                    throw SidecarError.socket("\(path) exists and is not a socket; not replacing it")
                }
                try refuseIfServed(path)
                unlink(path)  // stale: nothing listens on it
            }
        }
        let socket: UnixSocket
        do {
            socket = try UnixSocket.listen(on: path, backlog: 4096)
        } catch {
            if error.errno == EADDRINUSE { try refuseIfServed(path) }
            throw SidecarError.socket("cannot listen on \(path): \(error.reason)")
        }
        if !path.hasPrefix("@") {
            boundPath = path
            // Root serves everyone, who must be able to connect; the kernel's credentials, not
            // the file mode, say who each client is. A user's socket is the user's.
            chmod(path, isRoot ? 0o666 : 0o600)
        }
        return socket.fd
    }

    /// Throws when another watcher answers on `path`.
    func refuseIfServed(_ path: String) throws {
        guard let probe = try? UnixSocket.connect(to: path) else { return }
        defer { close(probe.fd) }
        let peer = try? probe.peer()
        throw SidecarError.socket(
            "another crashport watch (pid \(peer?.pid ?? 0), uid \(peer?.uid ?? 0)) is already listening on \(path); stop it first or choose another --socket"
        )
    }

    func closeListener() {
        if listener >= 0 { close(listener) }
        listener = -1
        if let boundPath { unlink(boundPath) }
        boundPath = nil
    }

    func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else {
            return
        }
        limit.rlim_cur = min(limit.rlim_max, 1 << 16)
        setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    }

    func notify(_ text: String) {
        guard let socket = ProcessInfo.processInfo.environment["NOTIFY_SOCKET"], !socket.isEmpty else { return }
        do {
            try UnixSocket.notify(socket, text)
        } catch {
            log.say("cannot notify systemd at \(socket): \(error.reason)")
        }
    }

    // MARK: - Clients

    func acceptClients() {
        for _ in 0..<64 {
            let client: UnixSocket
            do {
                client = try UnixSocket(fd: listener).accept()
            } catch {
                if error.errno == EMFILE || error.errno == ENFILE {
                    log.say("cannot accept a client: \(error.reason) (\(clients.count) connected)")
                }
                return
            }
            let fd = client.fd
            guard let peer = try? client.peer() else {
                close(fd)
                continue
            }
            let (pid, uid) = (peer.pid, peer.uid)
            let sameUser = clients.values.lazy.filter { $0.peer.uid == uid }.count
            if clients.count >= configuration.maxClients || sameUser >= configuration.maxClientsPerUID {
                log.say(
                    "refused a connection from pid \(pid) (uid \(uid)): \(clients.count) clients connected, \(sameUser) of them uid \(uid) (limits \(configuration.maxClients), \(configuration.maxClientsPerUID) per user)",
                    uid: uid
                )
                close(fd)
                continue
            }
            clients[fd] = Client(peer: peer, refusal: refusal(for: peer))
        }
    }

    /// Why this sidecar does not serve a peer, or nil when it does.
    func refusal(for peer: Sender) -> String? { Self.refusal(for: peer, configuration: configuration) }

    static func refusal(for peer: Sender, configuration: SidecarConfiguration) -> String? {
        if getuid() != 0 && peer.uid != getuid() {
            return "this crashport watch runs as uid \(getuid()) and serves only that user's processes"
        }
        if !configuration.allowUIDs.isEmpty && !configuration.allowUIDs.contains(peer.uid) {
            return "uid \(peer.uid) is not in this sidecar's --allow-uid list"
        }
        if !configuration.allowGroups.isEmpty {
            let groups = Set([peer.gid] + (ProcFiles.credentials(of: peer.pid)?.gids ?? []))
            if groups.isDisjoint(with: configuration.allowGroups) {
                return "none of the groups of pid \(peer.pid) is in this sidecar's --allow-group list"
            }
        }
        return nil
    }

    /// Handles a few messages of one client (a flooding client cannot starve the others); a
    /// client that sends something invalid, or hangs up, is closed.
    func serve(_ fd: Int32) {
        for _ in 0..<8 {
            guard let client = clients[fd] else { return }
            switch wire.receive(from: fd) {
            case .empty: return
            case .closed:
                drop(fd, closedByPeer: true)
                return
            case .rejected(let why, let sender):
                log.say("rejected a message from pid \(sender.pid): \(why); closing its connection", uid: sender.uid)
                drop(fd)
                return
            case .message(let bytes, let sender, let replyFDs):
                clients[fd]?.messages += 1
                if let refusal = client.refusal, sender.pid == client.peer.pid {
                    replyFDs.forEach { close($0) }
                    refuse(fd, client: client, why: refusal)
                    return
                }
                currentClient = fd
                let rejection = wire.handle(bytes, sender: sender, replyFDs: replyFDs)
                currentClient = -1
                if rejection != nil {
                    drop(fd)
                    return
                }
                // The connection's own process reported an error: its session says so (a crash
                // ended it in captured(_:id:app:from:)).
                if sender.pid == client.peer.pid, var session = clients[fd]?.session,
                    (try? WireHeader(bytes: bytes))?.type == CP_MSG_ERROR.rawValue
                {
                    session.errors += 1
                    clients[fd]?.session = session
                }
            }
        }
    }

    /// The connection a message being handled came on (for the HELLO reply).
    var currentClient: Int32 = -1

    func refuse(_ fd: Int32, client: Client, why: String) {
        log.say("refused pid \(client.peer.pid) (uid \(client.peer.uid)): \(why)", uid: client.peer.uid)
        let reply = HelloReplyMessage.encode(accepted: false, spool: "", message: why)
        _ = reply.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        drop(fd)
    }

    /// Closes a client's connection and ends its session: exited when it said GOODBYE, or
    /// when the sidecar is the one closing (a client that sent something invalid); a connection
    /// its process closed without either is followed to the process's end (SidecarEnds.swift).
    func drop(_ fd: Int32, closedByPeer: Bool = false) {
        let held = clients[fd]?.watch?.monitor?.retainedBytes ?? 0
        if let client = clients[fd], let session = client.session {
            crashedSessions.ended(session.pid)
            if closedByPeer, client.goodbye == nil, let watch = client.watch {
                // What its monitor holds is released when the end is settled.
                endings.append(PendingEnd(session: session, watch: watch, uid: client.peer.uid, closed: monotonicNanoseconds()))
            } else {
                appAreaBytes = max(0, appAreaBytes - held)
                capturer.settleHeldFault(of: session.pid, exit: nil)
                endRun(session.record(status: .exited), store: session.store)
            }
        } else {
            appAreaBytes = max(0, appAreaBytes - held)
        }
        clients[fd] = nil
        close(fd)
    }

    /// CRASHPORT_RELEASE in a client's environment (nothing else of it is kept).
    static func release(of access: ProcessAccess) -> String? {
        guard let environment = access.read("environ") else { return nil }
        let prefix = Array("CRASHPORT_RELEASE=".utf8)
        for entry in environment.split(separator: 0) where entry.starts(with: prefix) {
            let value = String(decoding: entry.dropFirst(prefix.count).prefix(128), as: UTF8.self)
            return value.isEmpty ? nil : value
        }
        return nil
    }

    /// The wire server (this sidecar its delegate) and the capturer and writer behind it: one
    /// line per report, nothing kept in memory, the pool's threads, the hooks of SidecarReportHooks.
    func configureServer() {
        let log = log
        // With a destination configured, an upload after a report, as the report's owner.
        let writer = ReportWriter(
            options: configuration.capture, log: { log.say($0) }, announcement: .logLine,
            inAppRules: configuration.inAppRules,
            hooks: SidecarReportHooks(
                sessions: crashedSessions, hangReports: hangReports, log: log,
                uploads: UploadSpawner.isConfigured() ? uploadProcesses : nil, spool: spool),
            pool: pool, spillDirectory: configuration.reportsRoot, keepsReports: false)
        capturer = CrashCapturer(writer: writer, options: configuration.capture)
        wire = WireServer(delegate: self, log: { log.say($0) }, logAbout: { text, uid in log.say(text, uid: uid) })
    }

    // MARK: - Reports

    func prepareReports() throws {
        if isRoot {
            // Users may reach their own directory but not list the others.
            if let failure = ReportStore.makeDirectories(configuration.reportsRoot, mode: 0o711) {
                throw SidecarError.directory("cannot create \(configuration.reportsRoot): \(failure)")
            }
        } else {
            try configuredStore(root: configuration.reportsRoot, owner: nil).prepare()
        }
    }

    func configuredStore(root: String, owner: ReportStore.Owner?) -> ReportStore {
        configuration.store(root: root, owner: owner)
    }

    /// The store for a sender's reports: as root, ROOT/<uid> (0700, owned by the uid, created
    /// here by root and never followed if it is a symlink), written with the user's filesystem
    /// ids; as a user, the reports directory itself. Nil when the sender is not served.
    func store(for sender: Sender) -> ReportStore? {
        if isRoot, refusal(for: sender) == nil, let store = stores[sender.uid] { return store }
        let store = Self.store(for: sender, configuration: configuration, log: log)
        if isRoot, let store { stores[sender.uid] = store }
        return store
    }

    /// The store for a sender's reports, made anew (any thread: the host level's dump threads).
    static func store(for sender: Sender, configuration: SidecarConfiguration, log: WatcherLog) -> ReportStore? {
        if let refusal = refusal(for: sender, configuration: configuration) {
            log.say("not reporting pid \(sender.pid): \(refusal)", uid: sender.uid)
            return nil
        }
        guard getuid() == 0 else { return configuration.store(root: configuration.reportsRoot, owner: nil) }
        let path = configuration.reportsRoot + "/\(sender.uid)"
        var made = mkdir(path, 0o700) == 0
        if !made && errno == ENOENT {
            // The reports root itself is gone (an administrator cleared space): made again as
            // at start, so that this report and the next are not lost.
            if let failure = ReportStore.makeDirectories(configuration.reportsRoot, mode: 0o711) {
                log.say("cannot create \(configuration.reportsRoot) again: \(failure)", uid: sender.uid)
                return nil
            }
            log.say("\(configuration.reportsRoot) was removed; made again", uid: sender.uid)
            made = mkdir(path, 0o700) == 0
        }
        if made {
            chown(path, sender.uid, sender.gid)
        } else if errno != EEXIST {
            log.say("cannot create \(path): \(String(cString: strerror(errno)))", uid: sender.uid)
            return nil
        }
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == sender.uid else {
            log.say("\(path) is not a directory owned by uid \(sender.uid); not writing reports there", uid: sender.uid)
            return nil
        }
        if info.st_mode & 0o077 != 0 { chmod(path, 0o700) }
        return configuration.store(root: path, owner: sender.credentials)
    }

    func reload() {
        log.reopen()
        guard let path = configuration.configPath else {
            log.say("SIGHUP: log reopened (no --config to reread)")
            return
        }
        do {
            var updated = configuration
            try updated.apply(configFile: SidecarConfiguration.read(file: path), file: path)
            configuration = updated
            capturer.options = updated.capture
            stores = [:]
            for (fd, client) in clients { clients[fd]?.refusal = refusal(for: client.peer) }
            log.say("SIGHUP: log reopened, \(path) reread")
        } catch {
            log.say("SIGHUP: \(error); keeping the configuration in effect")
        }
    }

    /// Reaps the uploads that ended, stops those past their deadline, starts those asked for.
    func reapUploads() {
        uploadProcesses.reap(now: monotonicNanoseconds(), log: { [log] in log.say($0, uid: $1) })
    }

    func ingestSpool() {
        guard let spool else { return }
        spool.ingest(
            writer: capturer.writer,
            storeFor: { [unowned self] owner in
                store(for: Sender(pid: ProcessID(0), uid: owner.uid, gid: owner.gid))
            })
    }
}

/// mkdir -p of a path's parent, each new directory with `mode`.
func makeDirectories(parentOf path: String, mode: mode_t) throws {
    guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
    if let failure = ReportStore.makeDirectories(String(path[..<slash]), mode: mode) {
        throw SidecarError.directory("cannot create the parent of \(path): \(failure)")
    }
}

/// systemd socket activation (sd_listen_fds(3)): the first passed descriptor, when LISTEN_PID
/// is this process; the variables are removed so children do not take them.
enum SocketActivation {
    static func take() throws -> Int32? {
        let environment = ProcessInfo.processInfo.environment
        guard let count = environment["LISTEN_FDS"].flatMap({ Int32($0) }), count > 0 else { return nil }
        defer {
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDNAMES")
        }
        guard environment["LISTEN_PID"].flatMap({ Int32($0) }) == getpid() else { return nil }
        let fd: Int32 = 3
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        for extra in 1..<max(count, 1) { _ = fcntl(fd + extra, F_SETFD, FD_CLOEXEC) }
        guard UnixSocket(fd: fd).isListeningSeqpacket else {
            throw SidecarError.socket(
                "the socket systemd passed (fd 3) is not a listening AF_UNIX SOCK_SEQPACKET socket: use ListenSequentialPacket= in the .socket unit"
            )
        }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size))
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        return fd
    }
}

/// The sidecar as its wire server's delegate, on the serving thread: a store per user, HELLO
/// answered on the client's connection with its last run, and the settings, consents and
/// goodbyes of each client.
extension Sidecar: ConsentRequests {
    func hello(_ hello: HelloMessage, from sender: Sender) {
        log.say(
            "client pid \(sender.pid) (uid \(sender.uid)) connected\(BuildID(hello.buildID).map { ", build-id \($0.hex)" } ?? "")",
            uid: sender.uid
        )
        guard currentClient >= 0 else { return }
        var lastRun = LastRunInfo()
        if let client = clients[currentClient], client.peer.pid == sender.pid, let store = store(for: sender),
            let executable = ProcFiles.executable(of: sender.pid)
        {
            let buildID = BuildID(hello.buildID)?.hex
            // Every end this sidecar has received counts, written yet or not.
            lastRun = RunHistory.lastRun(
                of: runsInFlight.record(store: store, executable: executable, buildID: buildID)
                    ?? RunHistory(store: store).program(executable: executable, buildID: buildID),
                reportsRoot: store.root
            ).namingItsSignal()
            lastRun.pendingReports = UInt32(
                ConsentDecisions.awaiting(
                    store: store, program: executable, log: { [log] in log.say("pid \(sender.pid): \($0)", uid: sender.uid) }
                ).count)
            lastRun.send = SendStates.state(of: lastRun.reportID, executable: executable, store: store)
            let access = sender.access(sender.pid)
            let session = ClientSession(
                executable: executable, buildID: buildID, release: Self.release(of: access), pid: sender.pid,
                started: Date(), store: store)
            clients[currentClient]?.session = session
            var watch = ClientWatch(
                connection: currentClient, access: access, appArea: hello.appArea, disabled: lastRun.disabled)
            var memory = SidecarMemory(counterFile: watch.oom.first?.file)
            if memory.watchesPeak, let peak = SidecarMemory.peak(of: sender.pid) { memory.keep(peak) }
            clients[currentClient]?.session?.memory = memory
            hangReports.forget(sender.pid)
            startWatching(&watch, hello: hello, access: access)
            clients[currentClient]?.watch = watch
            crashedSessions.started(session)
        }
        let reply = HelloReplyMessage.encode(
            accepted: true, spool: configuration.spoolDirectory, message: "", lastRun: lastRun, detail: hello.wantsRunDetail,
            sendState: hello.wantsSendState)
        _ = reply.withUnsafeBytes { send(currentClient, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    }

    func setting(enabled: Bool, from sender: Sender) {
        guard let store = store(for: sender) else { return }
        let session = clients.values.first { $0.peer.pid == sender.pid }?.session
        let key = session.map { ($0.executable, $0.buildID) } ?? RunHistory.programKey(pid: sender.pid)
        runsInFlight.setEnabled(enabled, store: store, executable: key.0, buildID: key.1)
        do {
            try RunHistory(store: store).setEnabled(enabled, executable: key.0, buildID: key.1)
        } catch {
            log.say("pid \(sender.pid): its setting could not be kept: \(error)", uid: sender.uid)
        }
        for (fd, client) in clients where client.peer.pid == sender.pid { clients[fd]?.watch?.disabled = !enabled }
    }

    /// The program a consent message speaks for: its connection's session's, else its own.
    func consentProgram(of sender: Sender) -> String {
        clients.values.first { $0.peer.pid == sender.pid }?.session?.executable
            ?? RunHistory.programKey(pid: sender.pid).executable
    }

    func consentStore(for sender: Sender) -> ReportStore? { store(for: sender) }
    func say(_ text: String, about sender: Sender) { log.say(text, uid: sender.uid) }
    func startUpload(of store: ReportStore) {
        uploadProcesses.request(store)
        reapUploads()
    }

    /// A client's crash record: captured into its user's store, its run ended as crashed once
    /// the process is let go (`captured`).
    func crash(_ crash: AcceptedCrash) -> String? {
        guard let store = store(for: crash.sender) else { return "uid \(crash.sender.uid) is not served here" }
        capturer.crash(crash, store: store, holder: traced.tracer(of: crash.record.pid)) { id, app in
            captured(crash.record, id: id, app: app, from: crash.sender)
        }
        return nil
    }

    func goodbye(_ goodbye: GoodbyeMessage, from sender: Sender) {
        // Only the connection's own process: a forked child shares it, and says nothing.
        guard currentClient >= 0, clients[currentClient]?.peer.pid == sender.pid else { return }
        clients[currentClient]?.goodbye = goodbye.exitStatus
        clients[currentClient]?.session?.exitCode = goodbye.exitStatus & 0xFF
    }

    func launch(_ message: LaunchMessage, from sender: Sender) {
        guard currentClient >= 0, clients[currentClient]?.peer.pid == sender.pid, message.protected else { return }
        clients[currentClient]?.session?.launchProtected = true
        if message.protectTimedOut { clients[currentClient]?.session?.protectTimedOut = true }
    }

    /// A crash record captured: the connection's own process ends its run as crashed now, before
    /// its report is written, so a HELLO that follows (the program restarted at once) already
    /// counts it. Another process on the connection is one it forked, running its program (the
    /// connection is close-on-exec: a program it execs says HELLO on its own): its crash marks
    /// the run crashed, which the run says when it ends.
    func captured(_ record: CrashRecord, id: String, app: AppArea?, from sender: Sender) {
        guard currentClient >= 0, let client = clients[currentClient], var session = client.session else { return }
        let duringLaunch = app?.crashedDuringLaunch(at: record.timeNanoseconds)
        let release = ReportBuilder.release(of: app)
        if sender.pid == client.peer.pid {
            clients[currentClient]?.session = nil
            // A test crash (crashport_test_crash) ends its run as one: not crashed, not at launch.
            endRun(
                session.record(
                    status: record.isTest ? .testCrash : .crashed, crashedDuringLaunch: record.isTest ? nil : duringLaunch,
                    reportID: id, release: release, signal: record.signal, memory: false),
                store: session.store, memory: session.memory)
        } else if !record.isTest {
            // Its report names the run's session too (until it is written).
            crashedSessions.name(sender.pid, session: session.sid)
            guard session.forkedCrash == nil else { return }
            session.forkedCrash = (id, duringLaunch, release)
            clients[currentClient]?.session = session
        }
    }
}

/// What the sidecar adds to each report, on the thread that writes it: the client's session id
/// (the session itself ended as crashed when the crash was captured), the link from a SIGABRT
/// to the hang report before it, an upload after a report (UploadChildren.swift: one at a time
/// per user, so a storm of crashes starts one pass), and the spool for a crash whose report
/// cannot be written.
struct SidecarReportHooks: ReportHooks {
    let sessions: Sidecar.PendingSessions
    let hangReports: HangReports
    let log: WatcherLog
    let uploads: Sidecar.Children?
    let spool: SpoolIngest?

    func sessionID(of pid: ProcessID) -> String? { sessions.id(of: pid) }

    func amend(_ event: inout Event, record: CrashRecord) { hangReports.amend(&event, record) }

    func wrote(_ report: WrittenReport, into store: ReportStore) {
        // Asked for here, started by the sidecar's thread (this one reads as the client).
        uploads?.request(store)
        // Its session ended when the crash was captured (Sidecar.captured); its id was kept for
        // this report.
        if let pid = report.event.process?.pid, report.event.kind == .crash { sessions.ended(pid) }
        // The run ended when the crash was captured: its history takes the report's words now.
        if report.event.kind == .crash { RunHistory(store: store).described(reportID: report.id, by: report.event) }
    }

    func unwritable(_ capture: Capture, recordBytes: [UInt8], error: Error, store: ReportStore) -> Bool {
        guard let spool else { return false }
        spool.keep(capture: capture, recordBytes: recordBytes, owner: store.owner, because: "\(error)")
        return true
    }
}

/// The runs the serving thread has ended whose history a report thread has not written yet,
/// per program: its record as it will read once they are written. A HELLO reads it before the
/// file, so it answers with every end this sidecar has received, with no window while the
/// report is built. Only the serving thread adds; report threads take their writes off.
final class RunsInFlight: Sendable {
    struct Entry: Sendable {
        var record: ProgramRuns
        /// Writes still to come.
        var pending: Int
    }

    private let entries = Mutex<[String: Entry]>([:])

    static func key(root: String, executable: String, buildID: String?) -> String {
        root + "\u{0}" + executable + "\u{0}" + (buildID ?? "")
    }

    /// The program's record with `session` applied, kept until it is written; its key.
    func ended(_ session: SessionRecord, store: ReportStore) -> String {
        let key = Self.key(root: store.root, executable: session.executable, buildID: session.buildID)
        // Nothing in flight for it: the file is up to date (only this thread adds).
        var record =
            entries.withLock { $0[key]?.record }
            ?? RunHistory(store: store).program(executable: session.executable, buildID: session.buildID)
            ?? ProgramRuns(executable: session.executable, buildID: session.buildID)
        RunHistory.apply(session, to: &record)
        entries.withLock { all in
            all[key] = Entry(record: record, pending: (all[key]?.pending ?? 0) + 1)
        }
        return key
    }

    /// One write of `key` is on disk; once none is left, the file answers again.
    func written(_ key: String) {
        entries.withLock { all in
            guard var entry = all[key] else { return }
            entry.pending -= 1
            all[key] = entry.pending > 0 ? entry : nil
        }
    }

    func record(store: ReportStore, executable: String, buildID: String?) -> ProgramRuns? {
        entries.withLock { $0[Self.key(root: store.root, executable: executable, buildID: buildID)]?.record }
    }

    /// crashport_set_enabled, for a record still in flight.
    func setEnabled(_ enabled: Bool, store: ReportStore, executable: String, buildID: String?) {
        entries.withLock { all in
            all[Self.key(root: store.root, executable: executable, buildID: buildID)]?.record.disabled = !enabled
        }
    }
}
