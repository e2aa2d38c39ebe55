// PtraceSession: suspends every thread of a process and reads their registers.
//
// PTRACE_SEIZE + PTRACE_INTERRUPT each thread listed in /proc/PID/task, re-listing until no
// new thread appears (a thread being created during capture is caught on the next pass). Waits
// are bounded: a thread that does not stop in time (for example in uninterruptible sleep) is
// reported as such, never waited on forever. ptrace is per tracer *thread*: all calls on a
// session must come from the thread that created it.
//
// Every thread seized is given back: detached when it is in a ptrace-stop, reaped when it died
// meanwhile (a traced thread that exits stays a zombie until its tracer reaps it, and while it
// does, the process never finishes dying: its parent's waitpid and pidfd never fire). The leader
// of a process whose parent we are is the one exception: its exit status belongs to our own
// waitpid, so it is only looked at (WNOWAIT), never reaped here. A thread that neither stops nor
// exits within the bound is kept in `PtraceSession.leftovers` for `reapLeftovers()`.
//
// Its waitpid calls are ptrace waits, not a child's end: the stops and deaths of the threads it
// traces (__WALL, raw stop statuses), whoever their parent is. A child's end is waited for by
// Processes' ChildProcess (the reason the leader of our own child is spared here).

import BoundedBytes
import Processes
import ReportModel
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public final class PtraceSession {
    public let processID: ProcessID
    /// Threads seized and stopped, in the order they were stopped.
    public var stopped: [ThreadID] { stoppedThreads.map { ThreadID($0) } }
    /// Threads that could not be suspended, with why.
    public var failures: [(tid: ThreadID, reason: String)] { failedThreads.map { (ThreadID($0.tid), $0.reason) } }
    /// Monotonic nanoseconds of the first PTRACE_SEIZE and of the end of the last detach: the
    /// window during which the process was held (0 until then).
    public private(set) var firstSeizeNanoseconds: UInt64 = 0
    public private(set) var releasedNanoseconds: UInt64 = 0
    /// Signals that arrived at a thread while we held it, re-delivered on detach.
    private var pendingSignals: [Int32: Int32] = [:]
    private var seized = Set<Int32>()
    // Below, thread and process ids are the kernel's pid_t, as ptrace(2) and waitpid(2) take them.
    private let pid: Int32
    private var stoppedThreads: [Int32] = []
    private var failedThreads: [(tid: Int32, reason: String)] = []
    /// Whether the watcher is the process's parent (crashport run): then the leader's exit is
    /// the parent's to reap, not the tracer's.
    private let isParent: Bool

    public init(pid: ProcessID) {
        processID = pid
        self.pid = pid.rawValue
        isParent = ProcFiles.parentPID(of: pid) == ProcessID(getpid())
    }

    deinit { detachAll() }

    /// Suspends every thread; returns the stopped thread ids. Throws only when not even the
    /// first thread could be seized (ptrace denied), with the errno.
    public func suspendAll(timeoutMilliseconds: Int = 2000) throws -> [ThreadID] {
        let deadline = monotonicNanoseconds() + UInt64(timeoutMilliseconds) * 1_000_000
        var passes = 0
        while passes < 64 {
            passes += 1
            let failed = Set(failedThreads.map(\.tid))
            let tids = ProcFiles.threads(of: processID).map(\.rawValue).filter { !seized.contains($0) && !failed.contains($0) }
            if tids.isEmpty { break }
            for tid in tids {
                if firstSeizeNanoseconds == 0 { firstSeizeNanoseconds = monotonicNanoseconds() }
                if Ptrace.call(.PTRACE_SEIZE, tid) != 0 {
                    let error = errno
                    if error == ESRCH { continue }  // exited meanwhile
                    if seized.isEmpty && tid == tids.first && stoppedThreads.isEmpty && (error == EPERM || error == EACCES) {
                        throw InspectionError.system(call: "ptrace(PTRACE_SEIZE, \(tid))", errno: error)
                    }
                    failedThreads.append((tid, "PTRACE_SEIZE: \(String(cString: strerror(error)))"))
                    continue
                }
                seized.insert(tid)
                if Ptrace.call(.PTRACE_INTERRUPT, tid) != 0 {
                    failedThreads.append((tid, "PTRACE_INTERRUPT: \(String(cString: strerror(errno)))"))
                }
            }
            for tid in tids where seized.contains(tid) && !stoppedThreads.contains(tid) {
                waitForStop(tid, deadline: deadline)
            }
            // The process died under us: nothing more will appear, and nothing more can stop.
            if monotonicNanoseconds() > deadline { break }
        }
        return stopped
    }

    /// What happened to a seized thread, consumed unless it is our child's leader exiting.
    private enum Outcome {
        case stopped(signal: Int32)
        case exited
        case nothing
        case gone
    }

    private func poll(_ tid: Int32) -> Outcome { Self.poll(tid, sparing: isParent ? pid : 0) }

    /// What happened to a traced thread, consumed with waitpid, except the exit of `spared`
    /// (the leader of our own child, whose status is the parent's waitpid's).
    private static func poll(_ tid: Int32, sparing spared: Int32) -> Outcome {
        switch Ptrace.peekWait(tid) {
        case .nothing?:
            return .nothing
        case .exited?:
            if tid != spared {
                var status: Int32 = 0
                _ = waitpid(tid, &status, __WALL | WNOHANG)
            }
            return .exited
        case .stopped?:
            var status: Int32 = 0
            guard waitpid(tid, &status, __WALL | WNOHANG) == tid else { return .nothing }
            if !Self.stopped(status) { return .exited }
            let signal = Ptrace.stopSignal(status)
            // A signal-delivery-stop: the signal is given back on detach.
            return .stopped(
                signal: Ptrace.event(ofStop: status) != .PTRACE_EVENT_STOP && signal != SIGTRAP && signal != SIGSTOP
                    ? signal : 0)
        case nil:
            return errno == EINTR ? .nothing : .gone
        }
    }

    private func waitForStop(_ tid: Int32, deadline: UInt64) {
        while true {
            switch poll(tid) {
            case .stopped(let signal):
                if signal != 0 { pendingSignals[tid] = signal }
                stoppedThreads.append(tid)
                return
            case .exited, .gone:
                seized.remove(tid)
                return
            case .nothing:
                if monotonicNanoseconds() > deadline {
                    failedThreads.append((tid, "did not stop within the capture deadline"))
                    return
                }
                usleep(100)
            }
        }
    }

    static func stopped(_ status: Int32) -> Bool { Ptrace.isStop(status) }

    /// General registers (struct user_regs_struct, 27 × u64) and the FXSAVE image of a stopped thread.
    public func registers(of thread: ThreadID) throws -> (gpr: [UInt64], fxsave: [UInt8]) {
        try Self.readRegisters(thread.rawValue)
    }

    /// The registers of a thread in a ptrace-stop of this thread's tracee.
    static func readRegisters(_ tid: Int32) throws -> (gpr: [UInt64], fxsave: [UInt8]) {
        var gpr = [UInt64](repeating: 0, count: X86_64Registers.gprCount)
        var fxsave = [UInt8](repeating: 0, count: fxsaveSize)
        let read = gpr.withUnsafeMutableBytes { gpr in
            fxsave.withUnsafeMutableBytes { readRegisters(tid, gpr: gpr, fxsave: $0) }
        }
        guard read.gpr else {
            throw InspectionError.system(call: "PTRACE_GETREGSET(NT_PRSTATUS, \(tid))", errno: errno)
        }
        return (gpr, read.fxsave ? fxsave : [])
    }

    /// The FXSAVE image's size (NT_PRFPREG).
    static let fxsaveSize = 512

    /// The same, into memory the caller owns (user_regs_struct's bytes, `fxsaveSize` bytes), with
    /// nothing allocated: what a pressure snapshot reads into its prepared buffers. Whether each
    /// set was read; errno says why not.
    static func readRegisters(
        _ tid: Int32, gpr: UnsafeMutableRawBufferPointer, fxsave: UnsafeMutableRawBufferPointer
    ) -> (gpr: Bool, fxsave: Bool) {
        guard getRegSet(tid, .NT_PRSTATUS, gpr) else { return (false, false) }
        return (true, getRegSet(tid, .NT_PRFPREG, fxsave))
    }

    private static func getRegSet(_ tid: Int32, _ set: Ptrace.RegisterSet, _ bytes: UnsafeMutableRawBufferPointer) -> Bool {
        var vector = iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
        return withUnsafeMutablePointer(to: &vector) {
            Ptrace.call(.PTRACE_GETREGSET, tid, address: set.rawValue, data: UInt(bitPattern: $0)) == 0
        }
    }

    /// Releases every thread; signals that arrived meanwhile are re-delivered. A thread that is
    /// not in a ptrace-stop cannot be detached: it is reaped if it died, or interrupted and
    /// detached once it stops, within `timeoutMilliseconds`; what is left after that goes to
    /// `leftovers`.
    public func detachAll(timeoutMilliseconds: Int = 1000) {
        var remaining: [Int32] = []
        for tid in seized where Ptrace.call(.PTRACE_DETACH, tid, data: UInt(pendingSignals[tid] ?? 0)) != 0 {
            remaining.append(tid)
        }
        let deadline = monotonicNanoseconds() + UInt64(timeoutMilliseconds) * 1_000_000
        var interrupted = Set<Int32>()
        while !remaining.isEmpty {
            remaining = remaining.filter { tid in
                switch poll(tid) {
                case .exited, .gone:
                    return false
                case .stopped(let signal):
                    let pending = signal != 0 ? signal : (pendingSignals[tid] ?? 0)
                    return Ptrace.call(.PTRACE_DETACH, tid, data: UInt(pending)) != 0 && errno != ESRCH
                case .nothing:
                    if !interrupted.contains(tid) {
                        interrupted.insert(tid)
                        _ = Ptrace.call(.PTRACE_INTERRUPT, tid)
                    }
                    return true
                }
            }
            if remaining.isEmpty || monotonicNanoseconds() > deadline { break }
            usleep(200)
        }
        if !remaining.isEmpty {
            let spared = isParent ? pid : 0
            Self.leftoverThreads.withLock { threads in
                for tid in remaining { threads[tid] = spared }
            }
        }
        seized.removeAll()
        stoppedThreads.removeAll()
        if firstSeizeNanoseconds != 0 && releasedNanoseconds == 0 { releasedNanoseconds = monotonicNanoseconds() }
    }

    /// Threads still traced after their session ended (tid → the leader not to reap, or 0).
    private static let leftoverThreads = Mutex<[Int32: Int32]>([:])

    /// Whether some thread is still traced by this process after its session ended.
    public static var hasLeftovers: Bool { leftoverThreads.withLock { !$0.isEmpty } }

    /// Detaches or reaps leftover threads that have since stopped or died; call it now and then
    /// (the launcher does, while any are left). Never blocks.
    public static func reapLeftovers() {
        leftoverThreads.withLock { threads in
            for (tid, spared) in threads {
                switch poll(tid, sparing: spared) {
                case .exited, .gone: threads[tid] = nil
                case .stopped(let signal):
                    if Ptrace.call(.PTRACE_DETACH, tid, data: UInt(signal)) == 0 || errno == ESRCH { threads[tid] = nil }
                case .nothing: break
                }
            }
        }
    }
}
