// RunHistory: what a reports directory remembers of each program's runs, for the stub's
// crashport_last_run (the previous run, and launch-crash loops) and for `crashport stats`
// (sessions, in Sentry's session model: started, duration, status, errors, release).
//
// A program is its executable's path and build-id. Two files beside the reports, written with
// the reports' owner's filesystem ids (as ReportStore writes reports):
//   .crashport-runs.json       every program's last run, launch-crash count and enabled state,
//                              rewritten whole (temporary file, fsync, rename) under
//   .crashport-runs.lock       an flock, so two watchers sharing the directory never lose an
//                              update; taken without blocking, retried for at most
//                              `lockWait` (the user may hold it: a root sidecar's serving
//                              thread must never wait on them), else the update is not made;
//   .crashport-sessions.jsonl  one line per ended run, appended; past 10,000 lines the newest
//                              5,000 are kept.
// Both are read as hostile (a user may write their own directory): through UserFile (no
// symlink followed, no FIFO opened blocking, the size checked before a byte is read), and a file
// that does not decode is set aside as if empty, with a note, never trusted and never a crash.
//
// Semantics as Bugsnag's lastRunInfo: a crash during launch adds one to the count; a crash
// after launch keeps it; a run that ends without a crash sets it to 0. Every way a run can die
// counts, not only a crash the stub reported: a crash before the stub installed (a library's
// constructor) or in a program without it, and an abnormal end (SIGKILL, the OOM killer, an end
// --trace-exit captured) are crashes here too, during launch when they came within the launch
// window (LaunchWindow), so a program killed in its first seconds, run after run, sees its loop.
// (Until issue 33 a run killed without a crash report kept the count and read as not crashed:
// the launch-crash counter missed the very loops it exists for.) A run's session stays
// `abnormal` rather than `crashed` for such a kill, as Sentry's sessions tell them apart. A test
// crash (crashport_test_crash) is a session of its own status, `test-crash`: it says the last run
// crashed, but neither counts as a launch crash nor resets the count, and `stats` counts it apart.

import BoundedBytes
import FoundationEssentials
import ObjectFile
import Processes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public struct ProgramRuns: Codable, Sendable, Equatable {
    public var executable: String
    public var buildID: String?
    public var consecutiveLaunchCrashes: Int = 0
    public var lastCrashed: Bool = false
    public var lastCrashedDuringLaunch: Bool = false
    /// The last run was killed (SIGKILL, the OOM killer...) rather than crashed: `lastCrashed`
    /// counts it as a crash, this says which (nil: not, or a record from before it was kept).
    public var lastEndedAbnormally: Bool?
    /// The last run's memory was under pressure (SessionMemory), or the OOM killer ended it:
    /// App Center's "memory warning in the last session". Nil when not known.
    public var lastMemoryPressure: Bool?
    public var lastOOMKilled: Bool?
    /// The last run crashed on purpose (crashport_test_crash): nil otherwise.
    public var lastTestCrash: Bool?
    public var lastReportID: String?
    public var lastEnded: String?
    /// The last run in full (crashport_last_run_detail); nil in a record from before it was kept.
    public var last: RunSummary?
    public var disabled: Bool = false

    /// A program with none of its runs on record yet.
    public init(executable: String, buildID: String?) {
        self.executable = executable
        self.buildID = buildID
    }

    enum CodingKeys: String, CodingKey {
        case executable
        case buildID = "build_id"
        case consecutiveLaunchCrashes = "consecutive_launch_crashes"
        case lastCrashed = "last_crashed"
        case lastCrashedDuringLaunch = "last_crashed_during_launch"
        case lastEndedAbnormally = "last_ended_abnormally"
        case lastMemoryPressure = "last_memory_pressure"
        case lastOOMKilled = "last_oom_killed"
        case lastTestCrash = "last_test_crash"
        case lastReportID = "last_report_id"
        case lastEnded = "last_ended"
        case last
        case disabled
    }
}

/// How a program's last run went, as crashport_last_run_detail tells the program: what ended it
/// (its session's status, its report's signal, title and reason), when it started and how long
/// it ran, its handled errors and hangs, and whether it ran its launch protection.
public struct RunSummary: Codable, Sendable, Equatable {
    /// "clean", "crash", "termination", "hang" or "errors" (RunDetail.Kind), the first that
    /// applies: a crash (a test crash too) or a kill, else a hang reported, else handled errors.
    public var kind: String
    public var signal: Int32?
    public var signalName: String?
    public var exitCode: Int32?
    public var reason: String?
    public var title: String?
    /// When it started, in milliseconds since the epoch.
    public var started: UInt64?
    /// Seconds.
    public var duration: Double?
    public var errors: Int?
    public var hangs: Int?
    public var launchProtected: Bool?
    public var protectTimedOut: Bool?

    enum CodingKeys: String, CodingKey {
        case kind, signal
        case signalName = "signal_name"
        case exitCode = "exit_code"
        case reason, title, started, duration, errors, hangs
        case launchProtected = "launch_protected"
        case protectTimedOut = "protect_timed_out"
    }

    /// The summary of a run that ended as `session` says, with its report's event (nil: none, or
    /// not written yet: the signal is the session's, title and reason unknown).
    public init(_ session: SessionRecord, event: Event?) {
        switch session.status {
        case .crashed, .testCrash: kind = "crash"
        case .abnormal: kind = "termination"
        case .exited: kind = (session.hangs ?? 0) > 0 ? "hang" : session.errors > 0 ? "errors" : "clean"
        }
        signal = session.signal
        exitCode = session.exitCode
        started = UTCTime.unixMilliseconds(session.started)
        duration = session.duration
        errors = session.errors
        hangs = session.hangs
        launchProtected = session.launchProtected
        protectTimedOut = session.protectTimedOut
        if let event { take(event) }
    }

    /// What the run's report says: its signal, title and reason (and its exit code when the
    /// session knew none).
    mutating func take(_ event: Event) {
        signal = event.signal?.number ?? signal
        signalName = event.signal?.name ?? signalName
        exitCode = exitCode ?? event.exitCode
        reason = Self.reason(of: event)
        title = event.title
    }

    /// Why a report's run ended: the runtime's words, else its exception, else its signal's
    /// meaning.
    static func reason(of event: Event) -> String? {
        event.reason ?? event.exception.map { [$0.type, $0.message].compactMap { $0 }.joined(separator: ": ") }
            ?? event.signal?.description
    }
}

/// One run, as Sentry models a session.
public struct SessionRecord: Codable, Sendable, Equatable {
    public enum Status: String, Codable, Sendable {
        /// Ended without a crash (whatever its exit code).
        case exited
        case crashed
        /// Killed without a crash report: SIGKILL, the OOM killer.
        case abnormal
        /// Crashed on purpose (crashport_test_crash(), `crashport test-crash`): reported as any
        /// crash, but not a crashed session (crash-free statistics, Sentry's sessions) nor a
        /// launch crash. A crashport from before it skips such a line, which leaves it out too.
        case testCrash = "test-crash"
    }

    public var sid: String
    public var executable: String
    public var buildID: String?
    public var release: String?
    public var pid: Int32?
    public var started: String
    /// Seconds.
    public var duration: Double
    public var status: Status
    /// Handled errors reported during the run.
    public var errors: Int
    public var crashedDuringLaunch: Bool?
    public var reportID: String?
    /// Its memory over the run, where the watcher could tell (`crashport run`, the sidecar).
    public var memory: SessionMemory?
    /// The signal that crashed or killed it, where known without its report.
    public var signal: Int32?
    /// Its exit status, when it exited and the watcher knows it.
    public var exitCode: Int32?
    /// Hangs reported during the run.
    public var hangs: Int?
    /// It ran its launch protection's protect work (crashport_launch): a session attribute.
    public var launchProtected: Bool?
    /// Its asynchronous protect work did not finish within its timeout (crashport_launch_with):
    /// the launch went on without it.
    public var protectTimedOut: Bool?
    /// A crash past its program's rate limit at the host level: counted, not reported; the id
    /// of the program's last full report, which it repeats ("" when none is known).
    public var countedWith: String?

    /// A new session id.
    public static func newID() -> String { UUID().uuidString.lowercased() }

    public init(
        sid: String = SessionRecord.newID(), executable: String, buildID: String?, release: String?, pid: Int32?,
        started: Date, ended: Date, status: Status, errors: Int, crashedDuringLaunch: Bool?, reportID: String?
    ) {
        self.sid = sid
        self.executable = executable
        self.buildID = buildID
        self.release = release
        self.pid = pid
        self.started = Event.timestamp(started)
        duration = max(0, ended.timeIntervalSince(started))
        self.status = status
        self.errors = errors
        self.crashedDuringLaunch = crashedDuringLaunch
        self.reportID = reportID
    }

    enum CodingKeys: String, CodingKey {
        case sid, executable
        case buildID = "build_id"
        case release, pid, started, duration, status, errors
        case crashedDuringLaunch = "crashed_during_launch"
        case reportID = "report_id"
        case memory, signal
        case exitCode = "exit_code"
        case hangs
        case launchProtected = "launch_protected"
        case protectTimedOut = "protect_timed_out"
        case countedWith = "counted_with"
    }
}

/// A run's memory: its cgroup's limit, the program's peak resident set (the largest child's
/// ru_maxrss), what the cgroup's counters did during the run, and the verdict.
public struct SessionMemory: Codable, Sendable, Equatable {
    public var limit: UInt64?
    public var peakRSS: UInt64?
    /// The cgroup's OOM kills and limit hits (v1 failcnt, v2 max events) during the run.
    public var oomKills: UInt64?
    public var limitHits: UInt64?
    public var oomKilled: Bool?
    /// The OOM killer or the limit acted during the run, or the program's peak, or its cgroup's
    /// if it rose during the run, came within 15 % of the limit (MemoryRecord's rule).
    public var underPressure: Bool

    public init(
        limit: UInt64?, peakRSS: UInt64?, oomKills: UInt64?, limitHits: UInt64?, oomKilled: Bool?, underPressure: Bool
    ) {
        self.limit = limit
        self.peakRSS = peakRSS
        self.oomKills = oomKills
        self.limitHits = limitHits
        self.oomKilled = oomKilled
        self.underPressure = underPressure
    }

    enum CodingKeys: String, CodingKey {
        case limit
        case peakRSS = "peak_rss"
        case oomKills = "oom_kills"
        case limitHits = "limit_hits"
        case oomKilled = "oom_killed"
        case underPressure = "under_pressure"
    }

    /// From the cgroup's record at the run's start and end (MemoryState), the peak RSS, and
    /// whether the OOM killer ended it.
    public static func over(start: MemoryRecord?, end: MemoryRecord?, peakRSS: UInt64?, oomKilled: Bool) -> SessionMemory {
        func delta(_ names: [String]) -> UInt64? {
            guard let after = end?.events else { return nil }
            return names.compactMap { name in
                after[name].map { $0 &- min($0, start?.events?[name] ?? $0) }
            }.reduce(0, +)
        }
        let oomKills = delta(["oom_kill"])
        let limitHits = delta(["failcnt", "max", "oom"])
        let limit = end?.limit ?? start?.limit
        var under = oomKilled || (oomKills ?? 0) > 0 || (limitHits ?? 0) > 0
        if let limit, limit > 0 {
            let near = limit - limit / 100 * 15
            // The program's own peak, or the cgroup's when it rose during the run (the cgroup's
            // usage is what its limit holds to: a watcher inside the same cgroup counts too).
            let cgroupPeak = end?.peak.flatMap { $0 > (start?.peak ?? 0) ? $0 : nil }
            if (peakRSS ?? 0) >= near || (cgroupPeak ?? 0) >= near { under = true }
        }
        return SessionMemory(
            limit: limit, peakRSS: peakRSS, oomKills: oomKills, limitHits: limitHits, oomKilled: oomKilled ? true : nil,
            underPressure: under)
    }
}

public struct RunHistory: Sendable {
    public let store: ReportStore
    static let runsName = ".crashport-runs.json"
    static let lockName = ".crashport-runs.lock"
    static let sessionsName = ".crashport-sessions.jsonl"
    /// The names this keeps in a reports directory (ReportStore does not count them as foreign).
    public static let fileNames: Set<String> = [runsName, lockName, sessionsName, runsName + ".tmp"]
    static let sessionCap = 10_000
    /// The largest .crashport-runs.json read: a program's record is about 300 bytes, so 4 MiB
    /// holds over 10,000 programs (every rebuild of each is one), and reading it on the serving
    /// thread at a HELLO stays a few milliseconds.
    static let maximumRunsSize = 4 << 20
    /// The largest .crashport-sessions.jsonl read: at most `sessionCap` lines of about 400 bytes
    /// (4 MB), four times over. Read off the serving thread (a run's end, `crashport stats`).
    static let maximumSessionsSize = 16 << 20
    /// How long an update waits for the lock at most (LOCK_NB, retried every 10 ms): a user who
    /// holds it in their own directory costs the sidecar this much per message, no more.
    static let lockWait: UInt64 = 150_000_000

    public init(store: ReportStore) {
        self.store = store
    }

    struct State: Codable {
        var version = 1
        var programs: [ProgramRuns] = []
    }

    /// A program's path as the history keys it: its real path (one that no longer exists is
    /// taken as given).
    public static func realPath(_ path: String) -> String {
        var resolved = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard realpath(path, &resolved) != nil else { return path }
        return resolved.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// A running process's program: /proc/PID/exe's target and build-id.
    public static func programKey(pid: ProcessID) -> (executable: String, buildID: String?) {
        let executable = ProcFiles.executable(of: pid) ?? "/proc/\(pid)/exe"
        return (executable, (try? ELFFile(path: "/proc/\(pid)/exe"))?.buildID?.hex)
    }

    /// The program's record, nil when none of its runs is on record.
    public func program(executable: String, buildID: String?) -> ProgramRuns? {
        (try? store.asOwner { Self.read(root: store.root) })?.programs.first {
            $0.executable == executable && $0.buildID == buildID
        }
    }

    /// What the stub's crashport_last_run answers.
    public func lastRun(executable: String, buildID: String?) -> LastRunInfo {
        Self.lastRun(of: program(executable: executable, buildID: buildID))
    }

    /// What the stub's crashport_last_run answers for a program's record (nil: none on record),
    /// its report's path under `reportsRoot`.
    public static func lastRun(of known: ProgramRuns?, reportsRoot: String? = nil) -> LastRunInfo {
        var info = LastRunInfo()
        guard let known else { return info }
        info.known = true
        info.crashed = known.lastCrashed
        info.crashedDuringLaunch = known.lastCrashedDuringLaunch
        info.consecutiveLaunchCrashes = UInt32(clamping: known.consecutiveLaunchCrashes)
        info.disabled = known.disabled
        info.reportID = known.lastReportID.flatMap { ReportStore.isReportIDShape($0) ? $0 : nil }
        var detail = RunDetail()
        detail.duringLaunch = known.lastCrashedDuringLaunch
        detail.abnormal = known.lastCrashed && known.lastTestCrash != true
        detail.memoryPressure = known.lastMemoryPressure == true
        detail.oomKilled = known.lastOOMKilled == true
        detail.test = known.lastTestCrash == true
        if let id = info.reportID, let reportsRoot { detail.reportPath = reportsRoot + "/" + id }
        if let last = known.last {
            detail.kind = RunDetail.Kind(summary: last.kind)
            detail.protected = last.launchProtected == true
            detail.protectTimedOut = last.protectTimedOut == true
            detail.signal = last.signal ?? 0
            detail.signalName = last.signalName ?? ""
            detail.exitStatus = last.exitCode ?? -1
            detail.startedMilliseconds = last.started ?? 0
            detail.durationMilliseconds = UInt64(max(0, min(last.duration ?? 0, 1e12)) * 1000)
            detail.errors = UInt32(clamping: max(0, last.errors ?? 0))
            detail.hangs = UInt32(clamping: max(0, last.hangs ?? 0))
            detail.reason = last.reason ?? ""
            detail.title = last.title ?? ""
        }
        info.detail = detail
        return info
    }

    /// A run ended: the program's record moves on, and the session is kept. `event`: its
    /// report's, when the caller has it; else the report written before the session ended is
    /// read (the signal, title and reason it gives).
    public func ended(_ session: SessionRecord, event given: Event? = nil) {
        let event = given ?? session.reportID.flatMap { try? store.event(id: $0) }
        _ = try? store.asOwner {
            try store.prepare()
            try Self.locked(root: store.root) {
                var state = Self.read(root: store.root)
                var record =
                    state.programs.first { $0.executable == session.executable && $0.buildID == session.buildID }
                    ?? ProgramRuns(executable: session.executable, buildID: session.buildID)
                Self.apply(session, to: &record, event: event)
                state.programs.removeAll { $0.executable == session.executable && $0.buildID == session.buildID }
                state.programs.append(record)
                try Self.write(state, root: store.root)
                try Self.append(session, root: store.root)
            }
        }
    }

    /// A report was written after its run's end was kept (a sidecar ends a crashed run when the
    /// crash is captured, before its report exists): the program whose last run it names takes
    /// its title, reason and signal from it.
    public func described(reportID: String, by event: Event) {
        _ = try? store.asOwner {
            try Self.locked(root: store.root) {
                var state = Self.read(root: store.root)
                guard let index = state.programs.firstIndex(where: { $0.lastReportID == reportID }),
                    state.programs[index].last?.title == nil
                else { return }
                state.programs[index].last?.take(event)
                try Self.write(state, root: store.root)
            }
        }
    }

    /// How a run's end moves its program's record on (the header's semantics): a crash or an
    /// abnormal end during launch adds one to the launch-crash count, after launch keeps it; an
    /// end without either resets it.
    public static func apply(_ session: SessionRecord, to record: inout ProgramRuns, event: Event? = nil) {
        switch session.status {
        case .crashed, .abnormal:
            let duringLaunch = session.crashedDuringLaunch == true
            if duringLaunch { record.consecutiveLaunchCrashes += 1 }
            record.lastCrashed = true
            record.lastCrashedDuringLaunch = duringLaunch
            record.lastEndedAbnormally = session.status == .abnormal ? true : nil
            record.lastReportID = session.reportID
        case .exited:
            record.consecutiveLaunchCrashes = 0
            record.lastCrashed = false
            record.lastCrashedDuringLaunch = false
            record.lastEndedAbnormally = nil
            record.lastReportID = nil
        case .testCrash:
            // The program's next start sees that it crashed, and the report (the path a developer
            // tries out); the launch-crash count is left as it was: no loop to protect from.
            record.lastCrashed = true
            record.lastCrashedDuringLaunch = false
            record.lastEndedAbnormally = nil
            record.lastReportID = session.reportID
        }
        record.lastTestCrash = session.status == .testCrash ? true : nil
        record.lastMemoryPressure = session.memory?.underPressure
        record.lastOOMKilled = session.memory.map { $0.oomKilled == true }
        record.lastEnded = Event.timestamp()
        record.last = RunSummary(session, event: event)
    }

    /// crashport_set_enabled, kept for the program's next runs. Throws when it could not be
    /// kept (the lock held past `lockWait`, a file refused or unwritable), for the caller's log.
    public func setEnabled(_ enabled: Bool, executable: String, buildID: String?) throws {
        try store.asOwner {
            try store.prepare()
            try Self.locked(root: store.root) {
                var state = Self.read(root: store.root)
                var record =
                    state.programs.first { $0.executable == executable && $0.buildID == buildID }
                    ?? ProgramRuns(executable: executable, buildID: buildID)
                record.disabled = !enabled
                state.programs.removeAll { $0.executable == executable && $0.buildID == buildID }
                state.programs.append(record)
                try Self.write(state, root: store.root)
            }
        }
    }

    /// Every kept session, oldest first (lines that do not decode are skipped).
    public func sessions() -> [SessionRecord] {
        (try? store.asOwner { Self.readSessions(root: store.root) }) ?? []
    }

    public func programs() -> [ProgramRuns] {
        (try? store.asOwner { Self.read(root: store.root) })?.programs ?? []
    }

    // MARK: - Files

    /// The file's bytes through UserFile (nil when it is missing or refused: as if empty).
    static func contents(_ path: String, limit: Int) -> Data? {
        (try? UserFile.read(path, limit: limit)).flatMap { $0.map { Data($0) } }
    }

    static func read(root: String) -> State {
        guard let data = contents(root + "/" + runsName, limit: maximumRunsSize),
            let state = try? JSONDecoder().decode(State.self, from: data),
            state.version == 1
        else { return State() }
        return state
    }

    static func readSessions(root: String) -> [SessionRecord] {
        guard let data = contents(root + "/" + sessionsName, limit: maximumSessionsSize) else { return [] }
        let decoder = JSONDecoder()
        return data.split(separator: UInt8(ascii: "\n")).compactMap { try? decoder.decode(SessionRecord.self, from: Data($0)) }
    }

    static func write(_ state: State, root: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let temporary = root + "/" + runsName + ".tmp"
        try ReportStore.writeNew(temporary, Array(try encoder.encode(state)))
        guard rename(temporary, root + "/" + runsName) == 0 else {
            throw StoreError.system(call: "rename", path: root + "/" + runsName, errno: errno)
        }
    }

    static func append(_ session: SessionRecord, root: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let line = Array(try encoder.encode(session)) + [UInt8(ascii: "\n")]
        let path = root + "/" + sessionsName
        var kept = readSessions(root: root)
        if kept.count >= sessionCap {
            kept = Array(kept.suffix(sessionCap / 2))
            let all = try kept.flatMap { Array(try encoder.encode($0)) + [UInt8(ascii: "\n")] } + line
            let temporary = path + ".tmp"
            try ReportStore.writeNew(temporary, all)
            guard rename(temporary, path) == 0 else { throw StoreError.system(call: "rename", path: path, errno: errno) }
            return
        }
        // O_NONBLOCK: a FIFO put there by the user fails to open (ENXIO) rather than block.
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.system(call: "open", path: path, errno: errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw StoreError.notWritable(path: path, reason: "not a regular file")
        }
        let written = line.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == line.count else { throw StoreError.system(call: "write", path: path, errno: errno) }
    }

    /// The lock was held by someone else for all of `lockWait`.
    struct LockBusy: Error, CustomStringConvertible {
        var path: String
        var description: String {
            "\(path) is held by another process for more than \(RunHistory.lockWait / 1_000_000) ms; not waiting for it"
        }
    }

    /// Runs `body` holding the directory's lock (flock, released when the descriptor closes),
    /// taken with LOCK_NB and retried every 10 ms for at most `lockWait`; throws LockBusy past
    /// it. The lock file is opened without following a symlink or blocking (a FIFO put there),
    /// and must be a regular file.
    static func locked<T>(root: String, _ body: () throws -> T) throws -> T {
        let path = root + "/" + lockName
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.system(call: "open", path: path, errno: errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw StoreError.notWritable(path: path, reason: "not a regular file")
        }
        let deadline = monotonicNanoseconds().checkedAdding(lockWait) ?? .max
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EINTR || errno == EWOULDBLOCK else {
                throw StoreError.system(call: "flock", path: path, errno: errno)
            }
            guard monotonicNanoseconds() < deadline else { throw LockBusy(path: path) }
            usleep(10_000)
        }
        return try body()
    }
}

/// `crashport stats`: sessions per program and release.
public struct RunStatistics: Sendable, Equatable {
    public var executable: String
    public var release: String?
    public var launches = 0
    public var crashes = 0
    public var launchCrashes = 0
    public var abnormal = 0
    /// Sessions that reported at least one handled error.
    public var errored = 0
    /// Launch crashes in a row now (the program's record, whatever the release).
    public var consecutiveLaunchCrashes = 0
    /// Runs that crashed on purpose (crashport_test_crash): not launches, so not in
    /// crashFreePercent.
    public var testCrashes = 0
    /// Launches that ran their protect work first (crashport_launch).
    public var protectedLaunches = 0
    /// Crashes only counted, not reported (past the host level's rate limit): in `crashes` too.
    public var countedOnly = 0

    /// Sessions that ended without a crash, in percent (Sentry's crash-free sessions); test
    /// crashes are not sessions here.
    public var crashFreePercent: Double {
        launches == 0 ? 100 : Double(launches - crashes) * 100 / Double(launches)
    }

    /// One row per program and release, programs in path order, releases in order of first
    /// appearance; `program` (a real path) keeps only that program.
    public static func of(_ history: RunHistory, program: String? = nil) -> [RunStatistics] {
        let programs = history.programs()
        var rows: [RunStatistics] = []
        for session in history.sessions() where program == nil || session.executable == program {
            var index = rows.firstIndex { $0.executable == session.executable && $0.release == session.release }
            if index == nil {
                var row = RunStatistics(executable: session.executable, release: session.release)
                row.consecutiveLaunchCrashes =
                    programs.filter { $0.executable == session.executable }.map(\.consecutiveLaunchCrashes).max() ?? 0
                rows.append(row)
                index = rows.count - 1
            }
            if session.status == .testCrash {
                rows[index!].testCrashes += 1
                continue
            }
            rows[index!].launches += 1
            switch session.status {
            case .crashed:
                rows[index!].crashes += 1
                if session.countedWith != nil { rows[index!].countedOnly += 1 }
                if session.crashedDuringLaunch == true { rows[index!].launchCrashes += 1 }
            case .abnormal: rows[index!].abnormal += 1
            case .exited, .testCrash: break
            }
            if session.errors > 0 { rows[index!].errored += 1 }
            if session.launchProtected == true { rows[index!].protectedLaunches += 1 }
        }
        return rows.enumerated().sorted { ($0.element.executable, $0.offset) < ($1.element.executable, $1.offset) }.map(\.element)
    }
}
