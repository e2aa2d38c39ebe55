// ExitTracer: `crashport run --trace-exit`. The watcher keeps every thread of its child seized
// for the child's whole life (PTRACE_SEIZE with PTRACE_O_TRACEEXIT, TRACECLONE and TRACEEXEC,
// from before the program's exec: the launcher starts the child held until `attach` returns, and
// the exec is then this tracer's first event), so that a death no handler sees (SIGKILL, the
// OOM killer) stops each thread at its exit event with its registers and memory intact: the
// watcher captures the process there as for a crash.
//
// Everything else the program does goes on as without tracing:
//  - a signal-delivery-stop is resumed at once with the same signal (the program's handlers,
//    crashport's stub among them, run as before);
//  - a group-stop (SIGSTOP, SIGTSTP from the shell) is left stopped with PTRACE_LISTEN, so the
//    program stays stopped until SIGCONT, as untraced;
//  - new threads are followed (TRACECLONE); forked children are not traced at all (no
//    TRACEFORK): a child process, and whatever it execs, runs untraced (except one made by
//    clone() without CLONE_THREAD and with an exit signal other than SIGCHLD, which the kernel
//    counts as a clone: it is followed, and the launcher lets its exit go unreported);
//  - an exec is followed (the process keeps its pid); the threads exec kills exit with status 0.
// A thread's exit stop is held only when the caller asks (a death worth a report), and every
// thread is continued within a bound: a dying program is never kept alive.
//
// The tracer also stops the process for crash and hang captures (it already holds every
// thread, so a second PTRACE_SEIZE would fail): `suspendAll` interrupts every thread and
// collects the stops, keeping any signal that arrived meanwhile for `detachAll` to deliver. A
// thread that reaches its exit event during such a stop (a SIGKILL while a hang or a pressure
// snapshot was being taken) stays held, and its event comes out of the next `pump`: the
// capture that stopped it does not swallow the death.
//
// ptrace is per tracer thread: every call on a tracer must come from the thread that attached
// (the launcher's serving loop, or the sidecar's, which traces many processes). The kernel
// reports every tracee's stops to that thread's waitpid, so the tracers of one thread form a
// TraceGroup: one waitpid(-1) collects for all of them, and each status goes to the tracer of
// its thread, to be handled when that tracer pumps.
//
// These waitpid calls are ptrace waits (__WALL, raw stop statuses), the tracer's own, not
// Processes' ChildProcess wait: a tracer must see its tracees' stops, and a waitpid(-1) cannot
// leave one pid's status for another caller. So when the process traced is our own child (the
// launcher's, under --trace-exit), its end is reaped here too, and handed on raw (`.ended`) for
// ChildProcess.WaitResult to decode, as a child's wait would.

import BoundedBytes
import Processes
import ReportModel
#if canImport(Glibc)
import Glibc
#endif

/// What `suspendAll` stopped and `detachAll` releases: a PtraceSession, or the ExitTracer that
/// already holds the process.
public protocol ThreadHold: AnyObject {
    func suspendAll(timeoutMilliseconds: Int) throws -> [ThreadID]
    var stopped: [ThreadID] { get }
    var failures: [(tid: ThreadID, reason: String)] { get }
    func registers(of thread: ThreadID) throws -> (gpr: [UInt64], fxsave: [UInt8])
    func detachAll(timeoutMilliseconds: Int)
    var firstSeizeNanoseconds: UInt64 { get }
    var releasedNanoseconds: UInt64 { get }
}

extension PtraceSession: ThreadHold {}

extension ThreadHold {
    /// The registers of a thread this holder has stopped, read into memory the caller owns
    /// (user_regs_struct's bytes and 512 for FXSAVE) with nothing allocated. Every holder is the
    /// thread's ptrace tracer, so the read is the same for all.
    public func registers(
        of thread: ThreadID, gpr: UnsafeMutableRawBufferPointer, fxsave: UnsafeMutableRawBufferPointer
    ) -> (gpr: Bool, fxsave: Bool) {
        PtraceSession.readRegisters(thread.rawValue, gpr: gpr, fxsave: fxsave)
    }
}

public final class ExitTracer: ThreadHold {
    /// What the caller is told about.
    public enum Event: Equatable {
        /// A thread stopped at its exit event, held; `status` is the wait status it exits with.
        case exiting(tid: ThreadID, status: Int32)
        /// The leader was reaped: the process is gone; its wait status.
        case ended(status: Int32)
        /// It exec'd a program its user may not read (setuid, setgid, file capabilities): the
        /// tracer let it go at the exec's stop, before the new program ran; why, in words.
        case leftAtExec(String)
    }

    enum State: Equatable {
        case running
        /// In a group-stop, left there with PTRACE_LISTEN.
        case listening
        /// Held at its exit event (PTRACE_EVENT_EXIT), exiting with this wait status.
        case exiting(status: Int32)
        /// Stopped for a capture; `signal` arrived meanwhile, `groupStop` it was in one.
        case held(signal: Int32, groupStop: Bool)
    }

    public let processID: ProcessID
    fileprivate let pid: Int32
    private var threads: [Int32: State] = [:]
    /// The tracers of this thread, which collect wait statuses for each other.
    public let group: TraceGroup
    /// Wait statuses collected for this tracer's threads, not handled yet.
    fileprivate var inbox: [(tid: Int32, status: Int32)] = []
    /// Whether an exit() with a non-zero status is held for a capture too (a death by a fatal
    /// signal always is).
    public var holdFailedExits = false
    /// Whose credentials decide, at each exec, whether the process may still be traced (a
    /// sidecar's client: its user's); nil, the watcher's own (crashport run's child).
    public var access: ProcessAccess?
    public private(set) var firstSeizeNanoseconds: UInt64 = 0
    public private(set) var releasedNanoseconds: UInt64 = 0
    /// Counts the new threads and execs seen: what moves the stacks (a new thread's, a new
    /// program's), so a copy of /proc/PID/maps kept for them is stale once it changed.
    public private(set) var layoutChanges = 0
    private var failedThreads: [(tid: ThreadID, reason: String)] = []
    private var captureStopped: [Int32] = []
    /// Exit events that came while a capture had the process stopped: held, and told by the
    /// next `pump`.
    private var exitsWhileSuspended: [Event] = []
    private var deferred: [Event] = []

    static let options: Ptrace.Options = [.PTRACE_O_TRACEEXIT, .PTRACE_O_TRACECLONE, .PTRACE_O_TRACEEXEC]

    /// A tracer for `pid`, on the calling thread, which traces the other processes of `group`
    /// too (a launcher's tracer is alone in its group).
    public init(pid: ProcessID, group: TraceGroup = TraceGroup()) {
        processID = pid
        self.pid = pid.rawValue
        self.group = group
    }

    fileprivate func owns(_ tid: Int32) -> Bool { threads[tid] != nil }

    /// Seizes every thread of the process (re-listing until no new one appears: threads made by
    /// a seized thread are followed by the kernel; a child held before its exec has one).
    /// Throws when the process itself cannot be seized (ptrace denied: Yama, no
    /// CAP_SYS_PTRACE, already traced), with the errno.
    public func attach() throws {
        firstSeizeNanoseconds = monotonicNanoseconds()
        for pass in 0..<64 {
            let listed = ProcFiles.threads(of: processID).map(\.rawValue).filter { threads[$0] == nil }
            if listed.isEmpty && pass > 0 { break }
            for tid in (pass == 0 ? [pid] + listed.filter { $0 != pid } : listed) where threads[tid] == nil {
                if Ptrace.call(.PTRACE_SEIZE, tid, data: Self.options.rawValue) == 0 {
                    threads[tid] = .running
                    if tid == pid { group.members[pid] = self }
                } else if tid == pid {
                    throw InspectionError.system(call: "ptrace(PTRACE_SEIZE, \(tid))", errno: errno)
                }
            }
        }
    }

    /// Whether any thread is still traced.
    public var isTracing: Bool { !threads.isEmpty }

    /// Handles every wait status pending for this process, without blocking; the events the
    /// caller must act on. (Statuses of the group's other processes wait in their inboxes.)
    public func pump() -> [Event] {
        var events = deferred
        deferred = []
        group.collect()
        while !inbox.isEmpty {
            let next = inbox.removeFirst()
            if let event = handle(next.tid, next.status) { events.append(event) }
        }
        return events
    }

    /// One wait status. Resumes what should run; returns what the caller must know.
    private func handle(_ tid: Int32, _ status: Int32) -> Event? {
        guard Self.isStopped(status) else {
            // Exited or killed: gone (the leader last, once every other thread is).
            threads[tid] = nil
            captureStopped.removeAll { $0 == tid }
            guard tid == pid else { return nil }
            group.members[pid] = nil
            return .ended(status: status)
        }
        let signal = Ptrace.stopSignal(status)
        switch Ptrace.event(ofStop: status) {
        case .PTRACE_EVENT_EXIT?:
            let exitStatus = eventMessage(tid)
            let failed = ProcessExit(waitStatus: exitStatus).map { $0.signal == nil && $0 != .exited(0) } ?? false
            if Self.isFatal(exitStatus) || (holdFailedExits && failed) {
                threads[tid] = .exiting(status: exitStatus)
                return .exiting(tid: ThreadID(tid), status: exitStatus)
            }
            resume(tid, signal: 0)
        case .PTRACE_EVENT_CLONE?:
            let child = eventMessage(tid)
            // Its first stop (PTRACE_EVENT_STOP) may come before or after this one.
            if child > 0 && threads[child] == nil { threads[child] = .running }
            layoutChanges += 1
            continueOrHold(tid, signal: 0)
        case .PTRACE_EVENT_EXEC?:
            // Every other thread is gone; the execing one now has the leader's id.
            let old = eventMessage(tid)
            if old != tid { threads[old] = nil }
            layoutChanges += 1
            // Traced by root, a setuid exec kept its privileges. The new program has not run
            // yet: when the kernel says its user may no longer read it, it is let go now, and
            // runs as it would untraced. Nothing of it was read.
            if let access, access.mayReadMemory() == false {
                let program = ProcFiles.executable(of: processID) ?? "a program"
                detachEverything()
                return .leftAtExec(
                    "it exec'd \(program), which its user may not read (setuid, setgid, file capabilities): it runs untraced, with its privileges, and its end is reported without stacks"
                )
            }
            continueOrHold(tid, signal: 0)
        case .PTRACE_EVENT_STOP?:
            if [SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU].contains(signal) {
                if suspending {
                    threads[tid] = .held(signal: 0, groupStop: true)
                    captureStopped.append(tid)
                } else {
                    threads[tid] = .listening
                    _ = Ptrace.call(.PTRACE_LISTEN, tid)
                }
            } else {
                // PTRACE_INTERRUPT's stop, a new thread's first stop, or the end of a group-stop.
                continueOrHold(tid, signal: 0)
            }
        default:
            // A signal-delivery-stop: the signal goes on to the program (now, or after a capture).
            continueOrHold(tid, signal: signal)
        }
        return nil
    }

    /// Whether a capture is stopping the process (then stops are held, not resumed).
    private var suspending = false

    private func continueOrHold(_ tid: Int32, signal: Int32) {
        if suspending {
            if case .held(let pending, let group)? = threads[tid] {
                threads[tid] = .held(signal: signal != 0 ? signal : pending, groupStop: group)
            } else {
                threads[tid] = .held(signal: signal, groupStop: false)
                captureStopped.append(tid)
            }
        } else {
            resume(tid, signal: signal)
        }
    }

    /// Resumes a stopped thread (one killed meanwhile fails with ESRCH: its exit status comes
    /// through waitpid).
    private func resume(_ tid: Int32, signal: Int32) {
        threads[tid] = .running
        _ = Ptrace.call(.PTRACE_CONT, tid, data: UInt(signal))
    }

    /// PTRACE_GETEVENTMSG of a thread in an event stop: an exit's wait status, a new thread's
    /// id, an exec's former thread id.
    private func eventMessage(_ tid: Int32) -> Int32 {
        var message: UInt = 0
        _ = withUnsafeMutablePointer(to: &message) { Ptrace.call(.PTRACE_GETEVENTMSG, tid, data: UInt(bitPattern: $0)) }
        return Int32(truncatingIfNeeded: message)
    }

    /// Lets a thread held at its exit finish exiting.
    public func release(exitOf thread: ThreadID) {
        if case .exiting? = threads[thread.rawValue] { resume(thread.rawValue, signal: 0) }
    }

    /// The threads held at their exit event.
    public var exiting: [ThreadID] {
        threads.compactMap { if case .exiting = $0.value { return $0.key } else { return nil } }.sorted().map(ThreadID.init)
    }

    /// Waits (bounded) for every traced thread to stop at its exit event, handling any other
    /// event meanwhile. A dying process's threads all get there within a scheduling quantum.
    public func waitForExits(timeoutMilliseconds: Int) -> [Event] {
        let deadline = monotonicNanoseconds() + UInt64(timeoutMilliseconds) * 1_000_000
        var events: [Event] = []
        while true {
            events += pump()
            let waiting = threads.values.contains { if case .exiting = $0 { return false } else { return true } }
            if !waiting || monotonicNanoseconds() > deadline
                || events.contains(where: { if case .ended = $0 { true } else { false } })
            {
                return events
            }
            usleep(200)
        }
    }

    // MARK: ThreadHold

    public var stopped: [ThreadID] { captureStopped.map { ThreadID($0) } }
    public var failures: [(tid: ThreadID, reason: String)] { failedThreads }

    /// Stops every thread for a capture: the ones held at their exit are stopped already; every
    /// other one is interrupted and its stop collected (bounded).
    public func suspendAll(timeoutMilliseconds: Int) throws -> [ThreadID] {
        failedThreads = []
        captureStopped = exiting.map(\.rawValue)
        exitsWhileSuspended = []
        suspending = true
        for (tid, state) in threads {
            switch state {
            case .running, .listening: _ = Ptrace.call(.PTRACE_INTERRUPT, tid)
            case .exiting, .held: break
            }
        }
        let deadline = monotonicNanoseconds() + UInt64(timeoutMilliseconds) * 1_000_000
        while true {
            for event in pump() {
                if case .exiting(let tid, _) = event, !captureStopped.contains(tid.rawValue) {
                    captureStopped.append(tid.rawValue)
                }
                if case .exiting = event { exitsWhileSuspended.append(event) }
                if case .ended = event { deferred.append(event) }
            }
            let moving = threads.filter { tid, state in
                switch state {
                case .running, .listening: return true
                case .exiting, .held: return !captureStopped.contains(tid)
                }
            }
            if moving.isEmpty { break }
            if monotonicNanoseconds() > deadline {
                failedThreads = moving.keys.sorted().map { (ThreadID($0), "did not stop within the capture deadline") }
                break
            }
            usleep(100)
        }
        return stopped
    }

    public func registers(of thread: ThreadID) throws -> (gpr: [UInt64], fxsave: [UInt8]) {
        try PtraceSession.readRegisters(thread.rawValue)
    }

    /// Ends a capture: every thread stopped for it goes on, with any signal that arrived
    /// meanwhile; a group-stop is listened to again; the ones held at their exit before it
    /// began finish it, the ones that got there during it stay held for the caller (`pump`
    /// tells it).
    public func detachAll(timeoutMilliseconds: Int) {
        suspending = false
        let arrived = Set(exitsWhileSuspended.compactMap { if case .exiting(let tid, _) = $0 { tid.rawValue } else { nil } })
        deferred += exitsWhileSuspended
        exitsWhileSuspended = []
        for tid in captureStopped where !arrived.contains(tid) {
            switch threads[tid] {
            case .held(let signal, let groupStop)?:
                if groupStop {
                    threads[tid] = .listening
                    _ = Ptrace.call(.PTRACE_LISTEN, tid)
                } else {
                    resume(tid, signal: signal)
                }
            case .exiting?: resume(tid, signal: 0)
            default: break
            }
        }
        captureStopped = []
        releasedNanoseconds = monotonicNanoseconds()
    }

    /// Lets every thread go: detached (crashport is leaving before the program, or no longer
    /// needs to trace it), each with the signal it was stopped for, if any. A thread can be
    /// detached only while stopped: every running or listening one is interrupted first, and
    /// ESRCH means "not stopped yet" until waitpid says it is gone.
    public func detachEverything() {
        for (tid, state) in threads {
            switch state {
            case .running, .listening: _ = Ptrace.call(.PTRACE_INTERRUPT, tid)
            case .exiting, .held: break
            }
        }
        // Signals a stop was for, to be delivered at detach: from statuses collected but not
        // handled, and from stops of a capture.
        var pending: [Int32: Int32] = [:]
        for (tid, state) in threads {
            if case .held(let signal, _) = state { pending[tid] = signal } else { pending[tid] = 0 }
        }
        let collected = inbox
        inbox = []
        for (tid, status) in collected where pending[tid] != nil {
            if !Self.isStopped(status) {
                pending[tid] = nil
            } else if let signal = Self.deliveredSignal(status) {
                pending[tid] = signal
            }
        }
        let deadline = monotonicNanoseconds() + 500_000_000
        while !pending.isEmpty && monotonicNanoseconds() < deadline {
            for (tid, signal) in pending {
                if Ptrace.call(.PTRACE_DETACH, tid, data: UInt(signal)) == 0 {
                    pending[tid] = nil
                    continue
                }
                // Only this process's threads: the group's others go on being traced.
                var status: Int32 = 0
                let waited = waitpid(tid, &status, __WALL | WNOHANG)
                if waited == tid {
                    if !Self.isStopped(status) {
                        pending[tid] = nil
                    } else if let delivered = Self.deliveredSignal(status) {
                        pending[tid] = delivered
                    }
                } else if waited < 0 && errno == ECHILD {
                    pending[tid] = nil  // gone, or no longer ours
                }
            }
            if !pending.isEmpty { usleep(200) }
        }
        threads = [:]
        group.members[pid] = nil
    }

    /// The signal of a signal-delivery-stop (to be passed on), nil for an event or group stop.
    static func deliveredSignal(_ status: Int32) -> Int32? {
        let signal = Ptrace.stopSignal(status)
        return (status >> 16) & 0xFFFF == 0 && signal != SIGTRAP ? signal : nil
    }

    /// Whether a wait status is a stop (WIFSTOPPED), not an end.
    public static func isStopped(_ status: Int32) -> Bool { Ptrace.isStop(status) }

    /// An exit worth a report: killed by a signal that ends a program abnormally (SIGKILL, or a
    /// core-dumping signal no handler reported).
    public static func isFatal(_ status: Int32) -> Bool {
        ProcessExit(waitStatus: status)?.signal.map(fatalSignals.contains) ?? false
    }

    public static let fatalSignals: Set<Int32> = [
        SIGKILL, SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGXCPU, SIGXFSZ, SIGSYS,
    ]
}

/// The tracers of one tracer thread. ptrace reports the stops and exits of every thread a
/// thread traces to that thread's waitpid, whichever process they belong to: the group waits
/// for all of them at once (waitpid(-1)) and hands each status to its process's tracer.
public final class TraceGroup {
    /// The tracers, by the pid of the process each traces.
    fileprivate var members: [Int32: ExitTracer] = [:]
    public init() {}

    /// The processes traced.
    public var processes: [ProcessID] { members.keys.sorted().map { ProcessID($0) } }

    public func tracer(of pid: ProcessID) -> ExitTracer? { members[pid.rawValue] }

    /// Whether the group traces anything.
    public var isEmpty: Bool { members.isEmpty }

    /// Collects every wait status pending, without blocking, into the inbox of its tracer.
    fileprivate func collect() {
        while true {
            var status: Int32 = 0
            let tid = waitpid(-1, &status, __WALL | WNOHANG)
            if tid <= 0 { return }
            route(tid, status)
        }
    }

    private func route(_ tid: Int32, _ status: Int32) {
        if let tracer = owner(of: tid) {
            tracer.inbox.append((tid, status))
        } else if ExitTracer.isStopped(status),
            let tracer = members.values.first(where: { access("/proc/\($0.pid)/task/\(tid)", F_OK) == 0 })
        {
            // A new thread's first stop can come before its creator's clone event: its
            // process's tracer adopts it. (One access(2) per process traced: a thread is made
            // often, and reading its /proc status would double what tracing adds to it.)
            tracer.inbox.append((tid, status))
        } else if ExitTracer.isStopped(status) {
            // Not one of ours (a thread an earlier capture's PtraceSession could not detach in
            // time): let it go, with the signal it stopped for.
            let signal = Ptrace.stopSignal(status)
            let deliver = (status >> 16) & 0xFFFF == 0 && signal != SIGTRAP && signal != SIGSTOP ? signal : 0
            _ = Ptrace.call(.PTRACE_DETACH, tid, data: UInt(deliver))
        }
    }

    private func owner(of tid: Int32) -> ExitTracer? {
        if let tracer = members[tid] { return tracer }
        return members.values.first { $0.owns(tid) }
    }

    /// Handles every wait status pending for every process of the group; each process's events.
    public func pump() -> [(tracer: ExitTracer, event: ExitTracer.Event)] {
        var events: [(ExitTracer, ExitTracer.Event)] = []
        collect()
        for tracer in Array(members.values) {
            events += tracer.pump().map { (tracer, $0) }
        }
        return events
    }
}
