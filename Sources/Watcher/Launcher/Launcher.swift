// Launcher: `crashport run -- PROGRAM [ARGS...]`.
//
// Spawns PROGRAM with the stub preloaded and one end of a socketpair as CRASHPORT_FD, serves
// its crash records (and those of its descendants, which inherit the socket), and ends the way
// PROGRAM ended: its exit code, or killed by the same signal. stdin/stdout/stderr, arguments
// and the rest of the environment are passed through untouched; crashport writes only to stderr.
//
// With --trace-exit the program is started held before its exec (ChildProcess.spawnHeld) and
// seized there, so ExitTracer has it from its first instruction; without, as posix_spawn would
// start it (ChildProcess.spawn). A death no record explains is reported either way: captured at
// its exit with every stack when traced, else as an AbnormalEnd through TerminationReport (the
// sidecar's writer too). Whether a SIGKILL was the OOM killer's comes from the child's memory
// cgroup counter (ChildOOMWatch).
// A child that makes crashport its tracer itself (PTRACE_TRACEME) is let go at its first stop.

import BoundedBytes
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

public enum LaunchError: Error, CustomStringConvertible {
    case notFound(String)
    case notExecutable(String, reason: String)
    case stubMissing(searched: [String])
    case system(call: String, errno: Int32)

    public var description: String {
        switch self {
        case .notFound(let program): return "\(program): command not found"
        case .notExecutable(let program, let reason): return "\(program): \(reason)"
        case .stubMissing(let searched):
            return
                "cannot find libcrashport.so (looked in \(searched.joined(separator: ", "))); build it with tools/build-stub or set CRASHPORT_STUB"
        case .system(let call, let errno): return "\(call): \(String(cString: strerror(errno)))"
        }
    }

    /// Exit status, as a shell would use: 127 not found, 126 not executable, 125 our own failure.
    public var exitStatus: Int32 {
        switch self {
        case .notFound: return 127
        case .notExecutable: return 126
        default: return 125
        }
    }
}

public struct Launcher {
    public var program: String
    public var arguments: [String]
    public var store: ReportStore
    public var options = CaptureOptions()
    public var stubPath: String?
    public var extraEnvironment: [String: String] = [:]
    /// Which frames are the program's own (--in-app / --not-in-app).
    public var inAppRules = InAppRules()
    /// --trace-exit: keep the program seized for its whole life, so that a death no handler
    /// sees (SIGKILL, the OOM killer) is reported with every thread's stack (ExitTracer).
    public var traceExit = false
    /// --trace-exit-codes: with traceExit, an exit() with a non-zero status is reported too.
    public var traceFailedExits = false
    /// --hang-ms: a hang report when crashport_heartbeat has not moved for this long.
    public var hangMilliseconds: UInt64?
    /// --hang-kill: after a hang report, end the program with SIGABRT, as a watchdog does.
    public var hangKill = false

    public init(program: String, arguments: [String], store: ReportStore) {
        self.program = program
        self.arguments = arguments
        self.store = store
    }

    /// PROGRAM resolved as execvp would: a path with a slash as is, otherwise searched in PATH.
    public static func resolve(_ program: String, path: String? = ProcessInfo.processInfo.environment["PATH"]) throws -> String {
        func check(_ candidate: String) throws -> String? {
            var info = stat()
            guard stat(candidate, &info) == 0 else { return nil }
            if (info.st_mode & S_IFMT) == S_IFDIR { throw LaunchError.notExecutable(program, reason: "is a directory") }
            guard access(candidate, X_OK) == 0 else { throw LaunchError.notExecutable(program, reason: "permission denied") }
            return candidate
        }
        if program.contains("/") {
            guard let found = try check(program) else { throw LaunchError.notFound(program) }
            return found
        }
        var denied: LaunchError?
        for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + program
            do {
                if let found = try check(candidate) { return found }
            } catch {
                denied = denied ?? (error as? LaunchError)
            }
        }
        throw denied ?? LaunchError.notFound(program)
    }

    /// Where the stub is: $CRASHPORT_STUB, else next to this executable, else ../lib/crashport/.
    public static func locateStub() throws -> String {
        var candidates: [String] = []
        if let explicit = ProcessInfo.processInfo.environment["CRASHPORT_STUB"], !explicit.isEmpty { candidates.append(explicit) }
        // Plain path arithmetic: NSString's path methods would wake much more of Foundation
        // than a waiting watcher needs (its idle memory counts).
        if let executable = ProcFiles.executable(of: ProcessID(getpid())), let slash = executable.lastIndex(of: "/") {
            let directory = String(executable[..<slash])
            candidates.append(directory + "/libcrashport.so")
            candidates.append(directory + "/stub/libcrashport.so")
            if let parentSlash = directory.lastIndex(of: "/") {
                candidates.append(String(directory[..<parentSlash]) + "/lib/crashport/libcrashport.so")
            }
        }
        for candidate in candidates where access(candidate, R_OK) == 0 { return candidate }
        throw LaunchError.stubMissing(searched: candidates)
    }

    /// Runs PROGRAM to completion; returns how it ended and the reports written meanwhile.
    public func run(
        log: @escaping @Sendable (String) -> Void = { StandardError.write(("crashport: " + $0 + "\n")) }
    )
        throws -> (termination: ProcessExit, reports: [WrittenReport])
    {
        let target = try inspect(log: log)
        _ = SectionCache.directory  // found now, before any report's work (SectionCache)
        let (ours, theirs) = try Self.crashSocketPair()
        defer { close(ours) }

        // Signals for the child are read through a signalfd; the child gets the original mask.
        // Job-control stops are read there too, so that a stop is taken between captures, never
        // in the middle of one (a stopped tracer keeps every thread it holds stopped).
        var original = sigset_t()
        let signals = try? SignalDescriptor.blocking(Self.relayedSignals, previousMask: &original)
        defer {
            signals?.close()
            pthread_sigmask(SIG_SETMASK, &original, nil)
        }

        // The program's previous run, for crashport_last_run (by its real path and build-id).
        let history = RunHistory(store: store)
        let runKey = (executable: RunHistory.realPath(target.executable), buildID: target.elf?.buildID?.hex)
        let lastRun = lastRun(of: runKey, in: history)
        var environment = preloadEnvironment(stub: target.stub, sanitizers: target.sanitizers, socket: theirs)
        environment["CRASHPORT_LAST_RUN"] = lastRun.environmentText
        environment["CRASHPORT_LAST_RUN_DETAIL"] = lastRun.detailEnvironmentText
        // The child's ptrace stops are read through a signalfd for SIGCHLD, blocked before the
        // child exists so that the SIGCHLD of its first stop (its exec) cannot be lost: the
        // tracer's under --trace-exit, and without it the stops of a child that made crashport
        // its tracer (PTRACE_TRACEME), which must be let go.
        var unblocked = sigset_t()
        let childEvents = try? SignalDescriptor.blocking([SIGCHLD], previousMask: &unblocked)
        defer { childEvents?.close() }
        let started = Date()
        let session = SessionRecord.newID()
        let launch = try start(target.executable, environment: environment, signalMask: original, log: log)
        close(theirs)

        let watch = ChildWatch()
        let serving = LaunchServing(
            child: launch.child, tracer: launch.tracer, runKey: runKey, store: store, history: history,
            disabled: lastRun.disabled, watch: watch, log: log)
        let (wire, capturer) = crashServer(socket: ours, serving: serving, session: session, log: log)
        let (end, socketOpen) = serve(
            launch.child, socket: ours, signals: signals, childEvents: childEvents, wire: wire, capturer: capturer,
            tracer: launch.tracer,
            watch: watch, disabled: { serving.disabled.withLock { $0 } }, oom: launch.oom, log: log)
        // A descendant's record may still be queued; serve it before leaving.
        if socketOpen { wire.drain() }
        finish(
            end, of: launch, target: target, serving: serving, capturer: capturer, session: session, started: started,
            environment: environment, log: log)
        serving.sayWhoOutlivesTheRun(socket: ours, open: socketOpen)
        return (end.exit, capturer.writer.reports)
    }

    /// The run's end, once its child has ended: a held Go fault written or dropped, a death no
    /// report explains reported as its parent saw it, and the run's sessions in its program's
    /// history.
    func finish(
        _ end: (exit: ProcessExit, coreDumped: Bool), of launch: Launch, target: Target, serving: LaunchServing,
        capturer: CrashCapturer,
        session: String, started: Date, environment: [String: String], log: (String) -> Void
    ) {
        let termination = end.exit
        let disabled = serving.disabled.withLock { $0 }
        // A fault Go's runtime turned into a panic is the crash when it ended the run (exit 2).
        capturer.settleHeldFault(of: launch.child, exit: disabled ? nil : termination)
        if !disabled {
            reportUnexplainedDeath(
                termination, of: launch, target: target, release: environment["CRASHPORT_RELEASE"], session: session,
                capturer: capturer, coreDumped: end.coreDumped, log: log)
        }
        let reports = capturer.writer.reports
        let window = LaunchWindow.milliseconds(environment: environment)
        var records = sessionRecords(
            session, of: launch.child, runKey: serving.runKey, started: started, termination: termination,
            release: environment["CRASHPORT_RELEASE"], launchMilliseconds: window, reports: reports)
        if !records.isEmpty {
            let oomKilled = reports.contains { $0.event.process?.pid == launch.child && $0.event.cause == "oom-kill" }
            records[0].memory = launch.oom.sessionMemory(oomKilled: oomKilled)
            records[0].exitCode = termination.signal == nil ? termination.exitCode : nil
            records[0].signal = records[0].signal ?? termination.signal
            records[0].hangs = reports.filter { $0.event.kind == .hang && $0.event.process?.pid == launch.child }.count
            records[0].launchProtected = serving.protected.withLock { $0 } ? true : nil
            records[0].protectTimedOut = serving.protectTimedOut.withLock { $0 } ? true : nil
        }
        for record in records {
            serving.history.ended(record, event: reports.first { $0.id == record.reportID }?.event)
        }
    }

    /// What is known of PROGRAM before it starts: its path, the stub to preload, its ELF file
    /// (nil when unreadable) and the sanitizer runtimes it links.
    struct Target {
        var executable: String
        var stub: String
        var elf: ELFFile?
        var sanitizers: [String]
    }

    /// Finds PROGRAM and the stub and prepares the store; says so when the stub cannot be
    /// preloaded (a static executable).
    func inspect(log: (String) -> Void) throws -> Target {
        let executable = try Self.resolve(program)
        let stub = try stubPath ?? Self.locateStub()
        try store.prepare()
        let elf = try? ELFFile(path: executable)
        if let elf, !elf.isDynamicallyLinked, !elf.definesSymbol(named: "crashport_install") {
            if HostPattern.installedOnThisMachine() != nil {
                log(
                    "\(program) is statically linked, so the stub cannot be preloaded into it; the host level (crashport watch --host) reports its crashes"
                )
            } else {
                log(
                    "\(program) is statically linked, so the stub cannot be preloaded into it; crashes will not be reported. Link libcrashport.a into it (see README), or run crashport watch --host."
                )
            }
        }
        // Sanitizer runtimes insist on coming first in the library list ("ASan runtime does not
        // come first in initial library list"): preload the one the program links, then the stub.
        let sanitizers = (elf?.neededLibraries ?? []).filter { name in
            ["libasan.so", "libtsan.so", "libhwasan.so", "liblsan.so", "libclang_rt.asan"].contains { name.hasPrefix($0) }
        }
        return Target(executable: executable, stub: stub, elf: elf, sanitizers: sanitizers)
    }

    /// The crash socket: our end (close-on-exec, with SO_PASSCRED) and the child's.
    static func crashSocketPair() throws -> (ours: Int32, theirs: Int32) {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &pair) == 0 else {
            throw LaunchError.system(call: "socketpair", errno: errno)
        }
        _ = fcntl(pair[0], F_SETFD, FD_CLOEXEC)
        var on: Int32 = 1
        setsockopt(pair[0], SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size))
        return (pair[0], pair[1])
    }

    /// The signals crashport passes on to its child. SIGABRT too: systemd's watchdog sends it
    /// to the service's main process, crashport.
    static let relayedSignals: [Int32] = [SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU, SIGABRT]

    /// The program's last run as crashport_last_run gives it, with its reports awaiting consent
    /// and what became of its report's upload.
    func lastRun(of runKey: (executable: String, buildID: String?), in history: RunHistory) -> LastRunInfo {
        var lastRun = RunHistory.lastRun(
            of: history.program(executable: runKey.executable, buildID: runKey.buildID), reportsRoot: store.root
        ).namingItsSignal()
        lastRun.pendingReports = UInt32(ConsentDecisions.awaiting(store: store, program: runKey.executable).count)
        lastRun.send = SendStates.state(of: lastRun.reportID, executable: runKey.executable, store: store)
        return lastRun
    }

    /// The wire server on our end of the socket, the launcher its delegate, and what captures
    /// and writes its child's crashes.
    func crashServer(
        socket ours: Int32, serving: LaunchServing, session: String, log: @escaping @Sendable (String) -> Void
    ) -> (WireServer, CrashCapturer) {
        let writer = ReportWriter(
            options: options, log: log, announcement: .summary, inAppRules: inAppRules,
            hooks: LaunchReportHooks(child: serving.child, runKey: serving.runKey, session: session, watch: serving.watch))
        // Under a host level (crashport watch --host), a mark for each crash the stub reports here.
        let capturer = CrashCapturer(writer: writer, options: options, reportedMarks: HostPaths.systemReportedMarks())
        serving.capturer = capturer
        return (WireServer(socket: ours, delegate: serving, log: log), capturer)
    }

    /// A death by one of the unexplainedDeaths no report of the child's explains, reported as
    /// its parent saw it (an AbnormalEnd, with the OOM count read now).
    func reportUnexplainedDeath(
        _ termination: ProcessExit, of launch: Launch, target: Target, release: String?, session: String,
        capturer: CrashCapturer, coreDumped: Bool, log: (String) -> Void
    ) {
        let child = launch.child
        guard case .signaled(let signal) = termination, Self.unexplainedDeaths.contains(signal),
            !capturer.writer.reports.contains(where: { $0.event.process?.pid == child })
        else { return }
        // Its core went to the host level (crashport watch --host), which reported it with every
        // stack: a stackless report here would be the same crash twice.
        if coreDumped, let host = HostPattern.installedOnThisMachine() {
            log(
                "\(program) (pid \(child)) was reported by the host level (crashport watch --host, \(host.mode.rawValue) mode), in the sidecar's reports"
            )
            return
        }
        var end = AbnormalEnd(pid: child, executable: target.executable)
        end.witness = .parent(unwritten: capturer.writer.unwritten[child])
        end.arguments = [program] + arguments
        end.buildID = target.elf?.buildID?.hex
        end.release = release
        end.session = session
        end.exit = .signaled(signal)
        end.exitSource = "waitpid (crashport is its parent)"
        let count = launch.oom.atDeath()
        end.oomKills = count.count
        end.notes = end.mayBeOOMKill ? count.fallback.map { ["machine-wide OOM count used: \($0)"] } ?? [] : []
        if let why = launch.untraced {
            end.notes.append("not traced (\(why)): no stacks; only its parent's view of its end")
        }
        capturer.writer.writeTermination(end, store: store)
    }

    /// The run as its program's history keeps it, and a session of their own for the
    /// descendants that ran another program and crashed. A run is one session, as Sentry's
    /// release health counts an application run: it is `crashed` when any process of it running
    /// its program crashed (the child, or a worker it forked: a prefork server whose worker
    /// crashed had a crashed run), or when the child died of a crash signal no record explained
    /// (it crashed before the stub installed, or has none); `abnormal` when the child was killed
    /// otherwise (SIGKILL, the OOM killer, an end --trace-exit captured); else `exited`. A crash
    /// or abnormal end is a launch crash when it came in the launch window (the report's word,
    /// else LaunchWindow from the run's start). Handled errors of all its processes count. A run
    /// whose only crash is a test (crashport_test_crash) is `testCrash`; a descendant's test
    /// crash makes no session.
    func sessionRecords(
        _ session: String, of child: ProcessID, runKey: (executable: String, buildID: String?), started: Date,
        termination: ProcessExit, release: String?, launchMilliseconds: UInt32?, reports: [WrittenReport]
    ) -> [SessionRecord] {
        let ended = Date()
        let endedDuringLaunch = LaunchWindow.contains(
            ended: Self.nanoseconds(ended), started: Self.nanoseconds(started), milliseconds: launchMilliseconds)
        var mine: [WrittenReport] = []
        var others: [ProcessID: [WrittenReport]] = [:]
        for report in reports {
            guard let process = report.event.process, let pid = process.pid else { continue }
            let program = process.executable.map(RunHistory.realPath)
            if pid == child || (program == runKey.executable && process.buildID == runKey.buildID) {
                mine.append(report)
            } else if report.event.kind == .crash, report.event.test != true {
                others[pid, default: []].append(report)
            }
        }
        let crashes = mine.filter { $0.event.kind == .crash && $0.event.test != true }
        let test = mine.first { $0.event.kind == .crash && $0.event.test == true }
        let end = mine.first { $0.event.kind == .termination && $0.event.process?.pid == child }
        let signal = termination.signal
        let status: SessionRecord.Status
        var crash = crashes.first { $0.event.launch?.crashedDuringLaunch == true } ?? crashes.first
        var duringLaunch = crash?.event.launch?.crashedDuringLaunch
        if crash != nil {
            status = .crashed
        } else if let test {
            // Crashed on purpose (crashport_test_crash): its death by the signal is the test's.
            status = .testCrash
            crash = test
            duringLaunch = nil
        } else if let signal, Self.crashSignals.contains(signal) {
            // No record: it crashed before the stub installed, or has no stub.
            status = .crashed
            crash = end
            duringLaunch = end?.event.launch?.crashedDuringLaunch ?? endedDuringLaunch
        } else if end != nil || (signal.map(Self.unexplainedDeaths.contains) ?? false) {
            status = .abnormal
            crash = end
            duringLaunch = end?.event.launch?.crashedDuringLaunch ?? endedDuringLaunch
        } else {
            status = .exited
        }
        var records = [
            SessionRecord(
                sid: session, executable: runKey.executable, buildID: runKey.buildID,
                release: crash?.event.release ?? release, pid: child.rawValue, started: started, ended: ended,
                status: status, errors: mine.filter { $0.event.kind == .error }.count,
                crashedDuringLaunch: status == .exited ? nil : duringLaunch, reportID: crash?.id)
        ]
        for (pid, crashed) in others.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            guard let first = crashed.first, let executable = first.event.process?.executable else { continue }
            let decisive = crashed.first { $0.event.launch?.crashedDuringLaunch == true } ?? first
            records.append(
                SessionRecord(
                    sid: first.event.session ?? SessionRecord.newID(), executable: RunHistory.realPath(executable),
                    buildID: first.event.process?.buildID, release: first.event.release, pid: pid.rawValue,
                    started: started, ended: ended, status: .crashed, errors: 0,
                    crashedDuringLaunch: decisive.event.launch?.crashedDuringLaunch, reportID: decisive.id))
        }
        return records
    }

    static func nanoseconds(_ date: Date) -> UInt64 { UInt64(max(0, date.timeIntervalSince1970 * 1e9)) }

    /// The signals the stub reports (its default set): a death by one of them with no record is
    /// a crash the stub did not see, not a kill.
    static let crashSignals: Set<Int32> = [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS]

    /// Deaths that deserve a report even without a crash record: the core-dumping signals and
    /// SIGKILL (SIGTERM, SIGINT and the like are ordinary ways to stop a program); the same set
    /// --trace-exit holds an exit for.
    static let unexplainedDeaths = ExitTracer.fatalSignals

    /// The program's environment: ours, the extra variables, the reply socket's number, and the
    /// stub preloaded (after the sanitizer runtime the program links, which must come first).
    func preloadEnvironment(stub: String, sanitizers: [String], socket: Int32) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in extraEnvironment { environment[key] = value }
        environment["CRASHPORT_FD"] = String(socket)
        let preload = (sanitizers + [stub]).joined(separator: ":")
        if let existing = environment["LD_PRELOAD"], !existing.isEmpty {
            environment["LD_PRELOAD"] = preload + ":" + existing
        } else {
            environment["LD_PRELOAD"] = preload
        }

        return environment
    }

    /// The started program: its pid, the tracer that holds it (nil when untraced: `untraced`
    /// says why, if tracing was asked for) and the OOM counters read while it lives.
    struct Launch {
        var child: ProcessID
        var tracer: ExitTracer?
        var untraced: String?
        var oom: ChildOOMWatch
    }

    /// Starts the program. With --trace-exit it is seized before its exec (ChildProcess.spawnHeld:
    /// held on a pipe until the tracer has it), so not one of its instructions runs untraced: a
    /// program that dies in its first microseconds is still caught at its exit. When it cannot
    /// be seized (ptrace denied, crashport itself traced by a tracer that follows forks), it
    /// runs untraced and crashport says why. A set-user-ID, set-group-ID or file-capability
    /// program is the exception: the kernel does not raise the privileges of a traced exec, so
    /// it is started as without --trace-exit and seized after its exec, if ptrace allows it.
    func start(
        _ executable: String, environment: [String: String], signalMask original: sigset_t,
        log: (String) -> Void
    ) throws -> Launch {
        guard traceExit else {
            let child = try spawn(executable, environment: environment, signalMask: original).get()
            return Launch(child: child, tracer: nil, untraced: nil, oom: ChildOOMWatch(pid: child))
        }
        if let privilege = ChildProcess.privilegeOnExec(executable) {
            let child = try spawn(executable, environment: environment, signalMask: original).get()
            let oom = ChildOOMWatch(pid: child)
            let (tracer, untraced) = trace(child, log: log, late: "it is \(privilege)")
            return Launch(child: child, tracer: tracer, untraced: untraced, oom: oom)
        }
        let held: ChildProcess.Held
        do {
            held = try ChildProcess.spawnHeld(
                executable, arguments: [program] + arguments, childOptions(environment: environment, signalMask: original))
        } catch {
            throw Self.spawnError(error.errno, program: program)
        }
        let child = held.child.pid
        let oom = ChildOOMWatch(pid: child)
        let (tracer, untraced) = trace(child, log: log, late: nil)
        do {
            try held.release()
        } catch {
            throw Self.spawnError(error.errno, program: program)
        }
        return Launch(child: child, tracer: tracer, untraced: untraced, oom: oom)
    }

    /// Seizes the child for --trace-exit; the tracer, or nil and why (said on stderr). `late`:
    /// why the program was started before being seized.
    func trace(_ child: ProcessID, log: (String) -> Void, late: String?) -> (ExitTracer?, String?) {
        let tracer = ExitTracer(pid: child)
        tracer.holdFailedExits = traceFailedExits
        do {
            try tracer.attach()
            if let late {
                log("--trace-exit: \(program) \(late), so it was traced only once it had started")
            }
            return (tracer, nil)
        } catch  where late != nil && Self.hasDied(child) {
            // Already gone (a zombie cannot be seized): its exit status is all there is.
            return (nil, "it ended before tracing could start")
        } catch {
            var why = late.map { "\($0): \(error)" } ?? "\(error)"
            if let other = Self.tracer(of: child) { why += "; it is already traced by pid \(other)" }
            log(
                "--trace-exit: \(program) cannot be traced (\(why)); it runs untraced, and a SIGKILL or OOM kill is reported without stacks (crashport doctor says why)"
            )
            return (nil, why)
        }
    }

    /// The process that traces `pid` ("812 (strace)"), from /proc/PID/status's TracerPid; nil
    /// when none does.
    static func tracer(of pid: ProcessID) -> String? {
        guard let status = ProcFiles.readText("/proc/\(pid)/status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("TracerPid:") }),
            let tracer = Int32(line.dropFirst("TracerPid:".count).trimmed), tracer > 0
        else { return nil }
        let name = ProcFiles.readText("/proc/\(tracer)/comm")?.trimmed
        return "\(tracer)" + (name.map { " (\($0))" } ?? "")
    }

    /// The LaunchError for a failed exec, as posix_spawn's errors have always been reported.
    static func spawnError(_ error: Int32, program: String) -> LaunchError {
        if error == ENOEXEC || error == EACCES {
            return LaunchError.notExecutable(program, reason: String(cString: strerror(error)))
        }
        return LaunchError.system(call: "posix_spawn \(program)", errno: error)
    }

    /// Starts the program with the signal mask crashport had before blocking the relayed
    /// signals.
    func spawn(
        _ executable: String, environment: [String: String], signalMask original: sigset_t
    ) -> Result<ProcessID, LaunchError> {
        do {
            let options = childOptions(environment: environment, signalMask: original)
            return .success(try ChildProcess.spawn(executable, arguments: [program] + arguments, options).pid)
        } catch {
            return .failure(Self.spawnError(error.errno, program: program))
        }
    }

    /// What the program gets: `environment`, the signal mask crashport had before blocking the
    /// relayed signals, and everything else crashport's (its descriptors, the crash socket's
    /// end among them; its process group, so the terminal's signals reach it).
    func childOptions(environment: [String: String], signalMask original: sigset_t) -> ChildProcess.Options {
        var options = ChildProcess.Options()
        options.environment = environment.map { "\($0.key)=\($0.value)" }
        options.signalMask = original
        return options
    }

    /// Serves the crash socket and relays signals until the child exits; how it ended (and
    /// whether its core was dumped), and whether the socket is still open. With a tracer, ptrace
    /// events (SIGCHLD, read through a signalfd) are handled here too: this is the tracer's
    /// thread. With --hang-ms, the heartbeat is looked at between events.
    func serve(
        _ child: ProcessID, socket ours: Int32, signals: SignalDescriptor?, childEvents: SignalDescriptor?, wire: WireServer,
        capturer: CrashCapturer, tracer: ExitTracer?,
        watch: ChildWatch, disabled: () -> Bool, oom: ChildOOMWatch, log: (String) -> Void
    )
        -> (end: (exit: ProcessExit, coreDumped: Bool), socketOpen: Bool)
    {
        // Traced, the child's stops and exit come through SIGCHLD (`childEvents`, a signalfd)
        // and waitpid, not a pidfd.
        let exited = tracer == nil ? ProcessHandle(child: child) : nil
        let oom = tracer == nil ? oom : sampling(oom, of: child, log: log)
        var hang = hangMilliseconds.map(HangMonitor.init(milliseconds:))
        var socketOpen = true
        var end: (exit: ProcessExit, coreDumped: Bool) = (.exited(0), false)
        var endRequests = 0
        var exitHandled = false
        var toldTraceMe = false
        while true {
            // The socket, the child (its pidfd, or its ptrace events), the relayed signals, the
            // SIGCHLD of a child that made crashport its tracer, then the kernel's notices that
            // the memory cgroup's limit nears (PressureSampler).
            var fds = [socketOpen ? ours : -1, (tracer != nil ? childEvents?.fd : exited?.fd) ?? -1, signals?.fd ?? -1]
                .map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            fds.append(pollfd(fd: tracer == nil ? childEvents?.fd ?? -1 : -1, events: Int16(POLLIN), revents: 0))
            let notices = fds.count
            fds += oom.pressure?.pollDescriptors ?? []
            let leftovers = PtraceSession.hasLeftovers
            let timeout = pollTimeout(waitsForEvents: (exited != nil || tracer != nil) && !leftovers, hang: hang, oom: oom)
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 && errno != EINTR { break }
            if leftovers { PtraceSession.reapLeftovers() }
            if fds[0].revents != 0 { socketOpen = wire.drain() }
            if fds[2].revents != 0, let signals,
                let ending = relaySignals(signals, to: child, requests: &endRequests, watch: watch)
            {
                log("\(SignalNames.name(ending)) again, or after \(program) ended: crashport stops now")
                tracer?.detachEverything()
                Self.exit(like: .signaled(ending))
            }
            if let monitor = hang, !disabled() {
                hang = watchHeartbeat(monitor, child: child, capturer: capturer, tracer: tracer, watch: watch, log: log)
            }
            if let tracer {
                oom.pressure?.look(tracer: tracer, now: monotonicNanoseconds(), polled: fds[notices...])
                childEvents?.discardPending()
                let ended = handleTraceEvents(
                    of: child, tracer: tracer, exitHandled: &exitHandled, capturer: capturer, watch: watch, disabled: disabled,
                    oom: oom)
                if let ended {
                    // The leader reaped by the tracer's wait (ExitTracer): an end, never a stop.
                    if case .ended(let exit, let coreDumped) = ChildProcess.WaitResult(status: ended) {
                        end = (exit, coreDumped)
                    }
                    break
                }
                continue
            }
            if exited == nil || fds[1].revents != 0 || fds[3].revents != 0 {
                childEvents?.discardPending()
                let blocking = exited != nil && fds[1].revents != 0
                if reap(child, blocking: blocking, end: &end, toldTraceMe: &toldTraceMe, log: log) { break }
            }
        }
        return (end, socketOpen)
    }

    /// --trace-exit: the child's memory cgroup sampled, and snapshots taken as its limit nears,
    /// woken by the kernel's notices where they can be set up (said where they cannot).
    func sampling(_ oom: ChildOOMWatch, of child: ProcessID, log: (String) -> Void) -> ChildOOMWatch {
        var oom = oom
        oom.pressure = PressureSampler(child: child, cgroup: oom.memoryCgroup, limit: oom.memoryStart?.limit)
        if let notices = oom.pressure?.notices, notices.descriptors.isEmpty {
            log(
                "--trace-exit: the kernel's notices of \(program)'s memory cgroup nearing its limit could not be set up (\(notices.missing.joined(separator: "; "))): crashport looks at its usage instead, and a burst to the limit between two looks may lose its stacks to an OOM kill"
            )
        }
        return oom
    }

    /// How long the serving loop may sleep: until an event, when every event wakes it; else 50 ms
    /// (without pidfds, very old kernels, waitpid is polled; while threads of an earlier capture
    /// are still traced, neither stopped nor dead in time, they are looked at now and then: the
    /// program cannot finish dying until they are reaped). Shorter when a heartbeat or a
    /// pressure look is due.
    func pollTimeout(waitsForEvents: Bool, hang: HangMonitor?, oom: ChildOOMWatch) -> Int32 {
        var timeout: Int32 = waitsForEvents ? -1 : 50
        if let hang { timeout = timeout < 0 ? hang.interval : min(timeout, hang.interval) }
        if let next = oom.pressure?.timeout(now: monotonicNanoseconds()) { timeout = timeout < 0 ? next : min(timeout, next) }
        return timeout
    }

    /// The traced child's pending ptrace events: the first exit stop of the program's own
    /// threads is reported (unless a crash report or the program's setting says not to), every
    /// other one let go. The wait status once the child is gone, else nil.
    func handleTraceEvents(
        of child: ProcessID, tracer: ExitTracer, exitHandled: inout Bool, capturer: CrashCapturer, watch: ChildWatch,
        disabled: () -> Bool, oom: ChildOOMWatch
    ) -> Int32? {
        var ended: Int32?
        for event in tracer.pump() {
            switch event {
            case .ended(let final): ended = final
            case .exiting(let tid, let exitStatus):
                // TRACECLONE also follows a process the program clone()s without
                // CLONE_THREAD and without SIGCHLD as its exit signal: its end is its
                // own, not the program's (a thread at its exit stop is still listed).
                if tid != child.mainThread && access("/proc/\(child)/task/\(tid)", F_OK) != 0 {
                    tracer.release(exitOf: tid)
                    continue
                }
                if exitHandled {
                    tracer.release(exitOf: tid)
                    continue
                }
                exitHandled = true
                // A fault Go's runtime turned into a panic, now ending the process (exit 2): that
                // capture is the report (written now, inline), not this exit.
                if capturer.holdsFault(of: child), let exit = ProcessExit(waitStatus: exitStatus), !disabled() {
                    capturer.settleHeldFault(of: child, exit: exit)
                }
                // A crash the stub reported, or reporting turned off: let it die.
                let reported = capturer.writer.reports.contains {
                    $0.event.process?.pid == child && $0.event.kind == .crash
                }
                if reported || disabled() {
                    for held in tracer.exiting { tracer.release(exitOf: held) }
                    continue
                }
                reportExit(
                    child: child, status: exitStatus, first: tid, tracer: tracer, capturer: capturer, watch: watch,
                    oom: oom)
            case .leftAtExec:
                break  // only a tracer with another user's credentials (the sidecar's) lets go
            }
        }
        return ended
    }

    /// Waits for the untraced child (`blocking` once its pidfd says it exited): true when it
    /// has ended, how in `end` (exit code 0 when crashport lost track of it). A stop, of a child
    /// that made crashport its tracer, is let go.
    func reap(
        _ child: ProcessID, blocking: Bool, end: inout (exit: ProcessExit, coreDumped: Bool), toldTraceMe: inout Bool,
        log: (String) -> Void
    ) -> Bool {
        switch blocking ? ChildProcess(child).wait() : ChildProcess(child).poll() {
        case .running:
            return false
        case .stopped(let status):
            // A stop is reported only to a tracer (no WUNTRACED): the child made crashport
            // its tracer with PTRACE_TRACEME.
            letGo(child, stopped: status, told: &toldTraceMe, log: log)
            return false
        case .ended(let exit, let coreDumped):
            end = (exit, coreDumped)
            return true
        case .notAChild:
            log("lost track of \(program) (pid \(child)): its exit status is unknown")
            end = (.exited(0), false)
            return true
        }
    }

    /// A child that made crashport its tracer (PTRACE_TRACEME, as programs that check for a
    /// debugger do) and stopped: detached with the signal it stopped for, so it runs on untraced,
    /// as it would under a parent that is no debugger. The SIGTRAP the kernel sends a
    /// PTRACE_TRACEME process at its exec (si_code SI_USER from itself) is what a debugger
    /// swallows, and so is it here.
    func letGo(_ child: ProcessID, stopped status: Int32, told: inout Bool, log: (String) -> Void) {
        var signal = Ptrace.stopSignal(status)
        if signal == SIGTRAP {
            // siginfo_t as int32s: si_signo, si_errno, si_code, padding, si_pid.
            var info = [Int32](repeating: 0, count: 32)
            let read = info.withUnsafeMutableBytes {
                Ptrace.call(.PTRACE_GETSIGINFO, child.rawValue, data: UInt(bitPattern: $0.baseAddress))
            }
            if read == 0 && info[2] == SI_USER && info[4] == child.rawValue { signal = 0 }
        }
        if !told {
            told = true
            log(
                "\(program) (pid \(child)) made crashport its tracer (PTRACE_TRACEME); crashport detaches and it runs on untraced"
            )
        }
        _ = Ptrace.call(.PTRACE_DETACH, child.rawValue, data: UInt(signal))
    }

    /// Every thread held at its exit: the process captured there and reported as a
    /// termination (cause SIGKILL, oom-kill, signal or exit); then it finishes dying.
    func reportExit(
        child: ProcessID, status: Int32, first: ThreadID, tracer: ExitTracer, capturer: CrashCapturer, watch: ChildWatch,
        oom: ChildOOMWatch
    ) {
        // Read while the process is held at its exit: it is still in its cgroup.
        let count = oom.atDeath()
        if ProcessExit(waitStatus: status)?.signal == SIGKILL {
            watch.exitNotes =
                (count.count.map { [$0.note] } ?? [
                    "no OOM-kill counter could be read: an OOM kill cannot be told from another SIGKILL"
                ]) + (count.fallback.map { ["machine-wide OOM count used: \($0)"] } ?? [])
        }
        let oomKilled = count.count?.moved == true
        capturer.captureExit(
            of: tracer, status: status, first: first, appArea: watch.appArea, oomKilled: oomKilled, store: store,
            earlier: oom.pressure?.latest
        ) {
            // In the program's cgroup, the report waits for the memory the kill frees.
            if oomKilled { oom.pressure?.awaitFreed() }
        }
    }

    /// One look at the heartbeat; a hang report (and with --hang-kill, SIGABRT) when it stalled.
    func watchHeartbeat(
        _ monitor: HangMonitor, child: ProcessID, capturer: CrashCapturer, tracer: ExitTracer?, watch: ChildWatch,
        log: (String) -> Void
    ) -> HangMonitor {
        var monitor = monitor
        let header = CaptureSession.readAppAreaHeader(at: watch.appArea, memory: ProcessMemory(pid: child))
        switch monitor.look(header: header, now: monotonicNanoseconds()) {
        case .fine:
            break
        case .resumed:
            log("\(program) (pid \(child)): the heartbeat resumed")
        case .suppressed:
            log(
                "\(program) (pid \(child)): another hang, not reported (more than \(HangMonitor.perWindow) in \(HangMonitor.window / 60_000_000_000) minutes)"
            )
        case .hung(let milliseconds, let thread, let ordinal):
            let report = capturer.captureHang(
                of: child, milliseconds: milliseconds, beatLast: thread, ordinal: ordinal,
                appArea: watch.appArea, holder: tracer, store: store)
            watch.hangs.hung(child, report: report, killing: hangKill)
            if hangKill {
                log("\(program) (pid \(child)): --hang-kill: ending it with SIGABRT")
                kill(child.rawValue, SIGABRT)
            }
        }
        return monitor
    }

    /// Passes on signals sent to crashport by another process. Signals from the terminal
    /// (si_code SI_KERNEL) already reached the child, which shares our process group. A
    /// job-control stop stops crashport too, now that no capture is in progress. Returns the
    /// signal that should end crashport itself at once: a second SIGINT or SIGTERM, or one that
    /// arrives after the program has died (so that crashport can always be stopped).
    func relaySignals(_ signals: SignalDescriptor, to child: ProcessID, requests: inout Int, watch: ChildWatch) -> Int32? {
        while let (signal, code, sender) = signals.next().map({ ($0.signal, $0.code, $0.sender) }) {
            let fromTerminal = code == Int32(SI_KERNEL)
            let childAlive = !Self.hasDied(child)
            switch signal {
            case SIGINT, SIGTERM:
                requests += 1
                if requests > 1 || !childAlive { return signal }
                if !fromTerminal { kill(child.rawValue, signal) }
            case SIGTSTP, SIGTTIN, SIGTTOU:
                if !fromTerminal && childAlive { kill(child.rawValue, signal) }
                Self.stopSelf(with: signal)
            case SIGABRT:
                // From pid 1 (SI_USER): systemd's watchdog, as the program's report will say.
                if sender == 1 && code == 0 { watch.hangs.relayedWatchdog(to: child) }
                if childAlive { kill(child.rawValue, signal) }
            default:
                if !fromTerminal && childAlive { kill(child.rawValue, signal) }
            }
        }
        return nil
    }

    /// Whether every thread of the process has exited (gone, or zombies waiting to be reaped).
    static func hasDied(_ pid: ProcessID) -> Bool {
        if Ptrace.peekWait(pid.rawValue) == .exited { return true }
        return ProcFiles.threads(of: pid).allSatisfy { tid in
            // /proc/TID/stat: a thread's own status, under the same path scheme as a process's.
            guard let state = ProcFiles.statFields(of: ProcessID(tid.rawValue))?.first else { return true }
            return state == "Z" || state == "X"
        }
    }

    /// Takes a job-control stop that was held while a capture ran: the signal's default action,
    /// let through for a moment. Returns once crashport is continued.
    static func stopSelf(with signal: Int32) {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        raise(signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Ends this process the way the child ended: the same exit code, or the same signal (with
    /// our own core dump disabled, so only the child's core is written).
    public static func exit(like termination: ProcessExit) -> Never {
        switch termination {
        case .exited(let code):
            Glibc.exit(code)
        case .signaled(let signal):
            // No core of crashport itself: the program's crash was reported already, and a host
            // level (core_pattern's pipe or socket, which RLIMIT_CORE 0 does not stop) would
            // report this death again as crashport's. A limit of 1 is the kernel's "never pipe
            // this one" (the pipe helper's own guard); non-dumpable stops the socket too.
            var limit = rlimit(rlim_cur: 1, rlim_max: 1)
            setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
            try? HostProcessSettings.notDumpable()
            Glibc.signal(signal, SIG_DFL)
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, signal)
            sigprocmask(SIG_UNBLOCK, &set, nil)
            kill(getpid(), signal)
            Glibc.exit(128 + signal)  // for signals whose default is not to terminate
        }
    }
}
