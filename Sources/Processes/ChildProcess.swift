// ChildProcess: every process crashport starts, and the one wait for a child's end.
//
// Every child is started by one fork (CShims' spawn.c, cp_spawn), with what its caller asks for
// and nothing else: the program `crashport run` watches (held before its exec under
// --trace-exit, so its tracer has it from its first instruction), the host level's previous
// core handler, test-crash's runs of crashport itself, doctor's ptrace test child, Upload's
// hooks and the background uploads a sidecar starts as a report's owner. (The host level's
// guard, C that never execs, is hostguard.c's own fork; it is waited for here.) Whatever a child
// does not ask for it inherits, as from posix_spawn: descriptors without close-on-exec, ignored
// signals, the process group, the calling thread's signal mask. A failure before or at the exec
// is thrown, with the child reaped, as posix_spawn returns one.
//
// A child's end is waited for here alone (`wait`, `poll`, `wait(until:)`: waitpid, retried on
// EINTR), and its status decoded by ProcessExit. The waits of the ptrace layer (LiveProcess's
// PtraceSession and ExitTracer) are its own: they wait for the stops of the threads a tracer
// holds (__WALL, stop statuses), not for a child's end; a tracer's waitpid(-1) also collects the
// end of the child it traces (ExitTracer's TraceGroup says so), which it hands on as a raw
// status that WaitResult(status:) decodes the same way.

import BoundedBytes
import CShims
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

/// A child of this process: its pid and the parent's ends of the pipes it was given. A value:
/// the pipes are the caller's to close; the child is the caller's to reap, once.
public struct ChildProcess: Sendable {
    public let pid: ProcessID
    /// The write end of the child's stdin when it was given `.pipe`, close-on-exec.
    public let input: Int32?
    /// The read end of the child's stdout when it was given `.pipe`, close-on-exec.
    public let output: Int32?

    /// A child started elsewhere (forked by a C helper, or kept by its pid), to wait for here.
    public init(_ pid: ProcessID) {
        self.init(pid: pid, input: nil, output: nil)
    }

    init(pid: ProcessID, input: Int32?, output: Int32?) {
        self.pid = pid
        self.input = input
        self.output = output
    }

    /// What a child gets besides its program and arguments. The defaults are posix_spawn's with
    /// no attributes: everything inherited.
    public struct Options: Sendable {
        /// Its stdin.
        public enum Input: Sendable {
            case inherit
            /// /dev/null, read-only.
            case null
            /// A pipe: the parent writes `ChildProcess.input`.
            case pipe
            /// A descriptor of the parent's, duplicated onto 0 (the caller closes its own).
            case descriptor(Int32)
        }

        /// Its stdout or stderr.
        public enum Output: Sendable {
            case inherit
            /// /dev/null, write-only.
            case null
            /// A pipe (stdout only): the parent reads `ChildProcess.output`.
            case pipe
            /// A descriptor of the parent's, duplicated there (the caller closes its own).
            case descriptor(Int32)
            /// This file, created 0600 if needed and appended to, opened by the child once it has
            /// its user's ids (so it is the user's); never through a symlink, never blocking on a
            /// FIFO.
            case appending(String)
            /// stderr only: wherever stdout went.
            case standardOutput
        }

        /// Its process group.
        public enum Group: Sendable {
            /// Ours.
            case inherit
            /// A group of its own (setpgid(0, 0)), so that a kill of the group reaches what it
            /// starts too.
            case own
            /// A session of its own (setsid), away from our terminal and its signals.
            case session
        }

        /// Its environment ("NAME=value"); nil: this process's own.
        public var environment: [String]?
        /// Its working directory; nil: ours.
        public var directory: String?
        public var standardInput = Input.inherit
        public var standardOutput = Output.inherit
        public var standardError = Output.inherit
        public var group = Group.inherit
        /// The user it runs as, for good (its uid, gid and exactly these groups), when they are
        /// not ours: a root sidecar starting a user's upload.
        public var user: Credentials?
        /// Whether its OOM score adjustment goes back to 0 (a sidecar protected from the OOM
        /// killer starts a user's process, which must not be).
        public var resetOOMScore = false
        /// The signal mask its program starts with; nil: the calling thread's.
        public var signalMask: sigset_t?
        /// Signals at their default action in the child even when this process ignores them.
        public var defaultSignals: [Int32] = []
        /// Whether `spawn` returns only once the exec happened, throwing why it did not (as
        /// posix_spawn does). Without, it returns after the fork, and a child that could not
        /// start ends with 125 (its descriptors), 126 (its user's ids) or 127 (the exec).
        public var waitsForExec = true

        public init() {}
    }

    /// Starts `path` with `arguments` (argv[0] first) as `options` say. Throws a failed fork, or
    /// (with `waitsForExec`) the step of the child that failed, with its errno ("execve",
    /// "chdir", "setpgid", "setuid", "dup2"); the child is reaped then.
    public static func spawn(
        _ path: String, arguments: [String], _ options: Options = Options()
    ) throws(SystemCallError) -> ChildProcess {
        let started = try start(path, arguments: arguments, options, held: false)
        if options.waitsForExec { try started.child.finishStart(release: -1, report: started.report) }
        return started.child
    }

    /// Starts `path` like `spawn`, but held before anything else: the child, a fork of this
    /// process running only spawn.c's code, with crashport's handlers reset and every signal
    /// blocked, waits on a pipe until `release()`, so a tracer can seize it before the program's
    /// first instruction. It exits (125) if this process dies or gives it up first.
    public static func spawnHeld(
        _ path: String, arguments: [String], _ options: Options = Options()
    ) throws(SystemCallError) -> Held {
        var options = options
        options.waitsForExec = true
        let started = try start(path, arguments: arguments, options, held: true)
        return Held(child: started.child, releaseFD: started.release, reportFD: started.report)
    }

    /// A child started held, before its exec.
    public struct Held: Sendable {
        public let child: ChildProcess
        private let releaseFD: Int32
        private let reportFD: Int32

        fileprivate init(child: ChildProcess, releaseFD: Int32, reportFD: Int32) {
            self.child = child
            self.releaseFD = releaseFD
            self.reportFD = reportFD
        }

        /// Lets the child go on to its exec (once), and returns once it happened; throws why it
        /// did not, the child then reaped (let go of its exit stop first if the calling thread
        /// traces it).
        public func release() throws(SystemCallError) {
            try child.finishStart(release: releaseFD, report: reportFD)
        }

        /// Gives the child up instead (once): killed, reaped, its pipes closed.
        public func cancel() {
            child.signal(SIGKILL)
            close(releaseFD)
            close(reportFD)
            _ = child.wait()
        }
    }

    /// Why the kernel would give `executable` privileges at its exec that a traced exec would
    /// not get ("set-user-ID (uid 0)"), so that a held child seized before its exec would run
    /// without them; nil when it gains none, or this process is root (whose CAP_SYS_PTRACE lets
    /// a traced exec keep them).
    public static func privilegeOnExec(_ executable: String) -> String? {
        guard geteuid() != 0 else { return nil }
        var info = stat()
        guard stat(executable, &info) == 0 else { return nil }
        if info.st_mode & S_ISUID != 0 && info.st_uid != geteuid() { return "set-user-ID (uid \(info.st_uid))" }
        if info.st_mode & S_ISGID != 0 && info.st_gid != getegid() { return "set-group-ID (gid \(info.st_gid))" }
        if getxattr(executable, "security.capability", nil, 0) >= 0 { return "given file capabilities" }
        return nil
    }

    /// What a wait found.
    public enum WaitResult: Equatable, Sendable {
        /// It has not ended (a poll, or a deadline that passed first).
        case running
        /// It ended, and is reaped: how, and whether the kernel dumped its core (WCOREDUMP).
        case ended(ProcessExit, coreDumped: Bool)
        /// It stopped, which a wait reports only to its tracer (a child that made us its tracer
        /// with PTRACE_TRACEME): the raw wait status, for the ptrace layer to read.
        case stopped(status: Int32)
        /// It is not our child, or was reaped already (ECHILD).
        case notAChild

        /// A wait status as waitpid(2) fills it: an end (ProcessExit decodes it) or a stop.
        public init(status: Int32) {
            if let exit = ProcessExit(waitStatus: status) {
                self = .ended(exit, coreDumped: ProcessExit.coreDumped(waitStatus: status))
            } else {
                self = .stopped(status: status)
            }
        }

        /// How it ended, once it has.
        public var exit: ProcessExit? {
            if case .ended(let exit, _) = self { return exit }
            return nil
        }
    }

    /// Waits until the child ends (or stops, for its tracer).
    @discardableResult
    public func wait() -> WaitResult { waitpid(0) }

    /// Whether the child has ended, without waiting (reaping it if so).
    public func poll() -> WaitResult { waitpid(WNOHANG) }

    /// Waits until the child ends or `deadline` (CLOCK_MONOTONIC, nanoseconds) passes, looking
    /// every 5 ms; `.running` at the deadline (the child is still the caller's to end and reap).
    public func wait(until deadline: UInt64) -> WaitResult {
        while true {
            let result = poll()
            guard result == .running, monotonicNanoseconds() < deadline else { return result }
            usleep(5_000)
        }
    }

    /// kill(2) of the child with `signal`; with `group`, of its process group (its pid: a child
    /// started with a group or session of its own). False, with errno, when it could not be sent.
    @discardableResult
    public func signal(_ signal: Int32, group: Bool = false) -> Bool {
        kill(group ? -pid.rawValue : pid.rawValue, signal) == 0
    }

    /// waitpid(2) of this child with `flags`, again when a signal interrupted it: the one call
    /// that reaps a child.
    private func waitpid(_ flags: Int32) -> WaitResult {
        var status: Int32 = 0
        while true {
            let result = Glibc.waitpid(pid.rawValue, &status, flags)
            if result == pid.rawValue { return WaitResult(status: status) }
            if result == 0 { return .running }
            if errno == EINTR { continue }
            return .notAChild
        }
    }

    /// Releases the child (`release` >= 0) and waits for its exec; when a step failed, reaps it
    /// and throws the step and its errno.
    fileprivate func finishStart(release: Int32, report: Int32) throws(SystemCallError) {
        var step: Int32 = 0
        let failure = cp_spawn_outcome(release, report, &step)
        guard failure != 0 else { return }
        // Exiting now. A tracer on this thread (a held child seized under --trace-exit) holds
        // it at its exit event: let go until it has ended (__WALL, so the stop is seen).
        while case .stopped = waitpid(__WALL) {
            _ = cp_ptrace(Self.PTRACE_CONT, pid.rawValue, 0, 0)
        }
        throw SystemCallError(Self.stepName(step), errno: failure)
    }

    /// <sys/ptrace.h>'s request (the ptrace layer's Ptrace.Request is above this one).
    static let PTRACE_CONT: Int32 = 7

    /// The C call of a failed step (cp_spawn_step).
    static func stepName(_ step: Int32) -> String {
        switch UInt32(bitPattern: step) {
        case CP_SPAWN_STEP_CHDIR.rawValue: return "chdir"
        case CP_SPAWN_STEP_SETPGID.rawValue: return "setpgid"
        case CP_SPAWN_STEP_IDS.rawValue: return "setuid"
        case CP_SPAWN_STEP_STANDARD.rawValue: return "dup2"
        default: return "execve"
        }
    }

    /// Forks the child (cp_spawn); it, and the parent's ends of its hold and report pipes (-1
    /// when not asked for).
    private static func start(
        _ path: String, arguments: [String], _ options: Options, held: Bool
    ) throws(SystemCallError) -> (child: ChildProcess, release: Int32, report: Int32) {
        // The pipes asked for; the child's ends are closed here once it has its own.
        var pipes = Pipes()
        defer { pipes.closeChildEnds() }
        let standard: [(cp_spawn_standard, Int32)]
        do {
            standard = try options.standardDescriptors(opening: &pipes)
        } catch {
            pipes.closeParentEnds()
            throw error
        }
        let request = SpawnRequest(path, arguments: arguments, options, held: held, standard: standard)
        var releaseFD: Int32 = -1
        var reportFD: Int32 = -1
        let pid = cp_spawn(&request.value, &releaseFD, &reportFD)
        guard pid > 0 else {
            let error = errno
            pipes.closeParentEnds()
            throw SystemCallError("fork", errno: error)
        }
        return (ChildProcess(pid: ProcessID(pid), input: pipes.input, output: pipes.output), releaseFD, reportFD)
    }

    /// A cp_spawn_request and the C memory it points to, freed with it.
    private final class SpawnRequest {
        var value = cp_spawn_request()
        private var strings: [UnsafeMutablePointer<CChar>] = []
        private var arrays: [UnsafeMutableRawPointer] = []

        init(_ path: String, arguments: [String], _ options: Options, held: Bool, standard: [(cp_spawn_standard, Int32)]) {
            value.path = UnsafePointer(copy(path))
            value.argv = UnsafePointer(list(arguments))
            value.envp = options.environment.map { UnsafePointer(list($0)) } ?? UnsafePointer(environ)
            value.directory = options.directory.map { UnsafePointer(copy($0)) }
            value.standard = (Int32(standard[0].0.rawValue), Int32(standard[1].0.rawValue), Int32(standard[2].0.rawValue))
            value.descriptor = (standard[0].1, standard[1].1, standard[2].1)
            for case .appending(let file) in [options.standardOutput, options.standardError] {
                value.append_path = UnsafePointer(copy(file))
            }
            value.group = Int32(options.group.spawnGroup.rawValue)
            if let user = options.user {
                value.drop_ids = 1
                value.uid = user.uid
                value.gid = user.gid
                value.groups = UnsafePointer(array(user.groups))
                value.group_count = Int32(user.groups.count)
            }
            value.reset_oom_score = options.resetOOMScore ? 1 : 0
            value.signal_mask = options.signalMask.map { UnsafeRawPointer(array([$0])) }
            value.default_signals = UnsafePointer(array(options.defaultSignals))
            value.default_count = Int32(options.defaultSignals.count)
            value.held = held ? 1 : 0
            value.report = options.waitsForExec ? 1 : 0
        }

        deinit {
            strings.forEach { free($0) }
            arrays.forEach { $0.deallocate() }
        }

        private func copy(_ text: String) -> UnsafeMutablePointer<CChar> {
            let copied = strdup(text)!
            strings.append(copied)
            return copied
        }

        /// A NULL-terminated array of C strings (argv, envp).
        private func list(_ texts: [String]) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> {
            array(texts.map { copy($0) } + [nil])
        }

        /// `elements` copied to memory of their own (trivial types only).
        private func array<T>(_ elements: [T]) -> UnsafeMutablePointer<T> {
            let copied = UnsafeMutablePointer<T>.allocate(capacity: max(elements.count, 1))
            copied.initialize(from: elements, count: elements.count)
            arrays.append(UnsafeMutableRawPointer(copied))
            return copied
        }
    }

    /// The pipes of one start: the parent's ends it hands back, the child's ends it closes.
    fileprivate struct Pipes {
        var input: Int32?
        var output: Int32?
        var childEnds: [Int32] = []

        /// cp_pipe (pipe2 with O_CLOEXEC): its read end and its write end.
        static func make() throws(SystemCallError) -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            guard cp_pipe(&fds) == 0 else { throw SystemCallError("pipe2", errno: errno) }
            return (fds[0], fds[1])
        }

        mutating func closeChildEnds() {
            childEnds.forEach { close($0) }
            childEnds = []
        }

        mutating func closeParentEnds() {
            [input, output].compactMap { $0 }.forEach { close($0) }
            input = nil
            output = nil
        }
    }
}

extension ChildProcess.Options {
    /// What cp_spawn does with descriptors 0, 1 and 2, the pipes asked for made in `pipes`.
    fileprivate func standardDescriptors(
        opening pipes: inout ChildProcess.Pipes
    ) throws(SystemCallError) -> [(cp_spawn_standard, Int32)] {
        var standard: [(cp_spawn_standard, Int32)] = []
        switch standardInput {
        case .inherit: standard.append((CP_SPAWN_INHERIT, -1))
        case .null: standard.append((CP_SPAWN_NULL, -1))
        case .descriptor(let fd): standard.append((CP_SPAWN_DESCRIPTOR, fd))
        case .pipe:
            let ends = try ChildProcess.Pipes.make()
            pipes.input = ends.write
            pipes.childEnds.append(ends.read)
            standard.append((CP_SPAWN_DESCRIPTOR, ends.read))
        }
        for (target, output) in [(1, standardOutput), (2, standardError)] {
            switch output {
            case .inherit: standard.append((CP_SPAWN_INHERIT, -1))
            case .null: standard.append((CP_SPAWN_NULL, -1))
            case .descriptor(let fd): standard.append((CP_SPAWN_DESCRIPTOR, fd))
            case .appending: standard.append((CP_SPAWN_APPEND, -1))
            case .standardOutput:
                precondition(target == 2, "only stderr can go where stdout went")
                standard.append((CP_SPAWN_DESCRIPTOR, 1))  // the child's 1, set up just before
            case .pipe:
                precondition(target == 1, "only stdout can be a pipe")
                let ends = try ChildProcess.Pipes.make()
                pipes.output = ends.read
                pipes.childEnds.append(ends.write)
                standard.append((CP_SPAWN_DESCRIPTOR, ends.write))
            }
        }
        return standard
    }
}

extension ChildProcess.Options.Group {
    /// cp_spawn's word for it.
    fileprivate var spawnGroup: cp_spawn_group {
        switch self {
        case .inherit: return CP_SPAWN_SAME_GROUP
        case .own: return CP_SPAWN_OWN_GROUP
        case .session: return CP_SPAWN_OWN_SESSION
        }
    }
}
