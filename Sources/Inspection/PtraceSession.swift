// PtraceSession: suspends every thread of a process and reads their registers.
//
// PTRACE_SEIZE + PTRACE_INTERRUPT each thread listed in /proc/PID/task, re-listing until no
// new thread appears (a thread being created during capture is caught on the next pass). Waits
// are bounded: a thread that does not stop in time (for example in uninterruptible sleep) is
// reported as such, never waited on forever. ptrace is per tracer *thread*: all calls on a
// session must come from the thread that created it.

import CShims
#if canImport(Glibc)
import Glibc
#endif

public final class PtraceSession {
    public let pid: Int32
    /// Threads seized and stopped, in the order they were stopped.
    public private(set) var stopped: [Int32] = []
    /// Threads that could not be suspended, with why.
    public private(set) var failures: [(tid: Int32, reason: String)] = []
    /// Signals that arrived at a thread while we held it, re-delivered on detach.
    private var pendingSignals: [Int32: Int32] = [:]
    private var seized = Set<Int32>()

    static let PTRACE_SEIZE: Int32 = 0x4206
    static let PTRACE_INTERRUPT: Int32 = 0x4207
    static let PTRACE_GETREGSET: Int32 = 0x4204
    static let PTRACE_DETACH: Int32 = 17
    static let NT_PRSTATUS: UInt = 1
    static let NT_PRFPREG: UInt = 2
    static let PTRACE_EVENT_STOP: Int32 = 128

    public init(pid: Int32) {
        self.pid = pid
    }

    deinit { detachAll() }

    /// Suspends every thread; returns the stopped thread ids. Throws only when not even the
    /// first thread could be seized (ptrace denied), with the errno.
    public func suspendAll(timeoutMilliseconds: Int = 2000) throws -> [Int32] {
        let deadline = Self.now() + UInt64(timeoutMilliseconds) * 1_000_000
        var passes = 0
        while passes < 64 {
            passes += 1
            let tids = ProcFiles.threads(of: pid).filter { !seized.contains($0) && !failures.map(\.tid).contains($0) }
            if tids.isEmpty { break }
            for tid in tids {
                if cp_ptrace(Self.PTRACE_SEIZE, tid, 0, 0) != 0 {
                    let error = errno
                    if error == ESRCH { continue }  // exited meanwhile
                    if seized.isEmpty && tid == tids.first && stopped.isEmpty && (error == EPERM || error == EACCES) {
                        throw InspectionError.system(call: "ptrace(PTRACE_SEIZE, \(tid))", errno: error)
                    }
                    failures.append((tid, "PTRACE_SEIZE: \(String(cString: strerror(error)))"))
                    continue
                }
                seized.insert(tid)
                if cp_ptrace(Self.PTRACE_INTERRUPT, tid, 0, 0) != 0 {
                    failures.append((tid, "PTRACE_INTERRUPT: \(String(cString: strerror(errno)))"))
                }
            }
            for tid in tids where seized.contains(tid) && !stopped.contains(tid) {
                waitForStop(tid, deadline: deadline)
            }
        }
        return stopped
    }

    private func waitForStop(_ tid: Int32, deadline: UInt64) {
        while true {
            var status: Int32 = 0
            let result = waitpid(tid, &status, __WALL | WNOHANG)
            if result == tid {
                if Self.stopped(status) {
                    let signal = (status >> 8) & 0x7F
                    let event = status >> 16
                    if event != Self.PTRACE_EVENT_STOP && signal != SIGTRAP && signal != SIGSTOP {
                        pendingSignals[tid] = signal  // a signal-delivery-stop: give it back on detach
                    }
                    stopped.append(tid)
                } else {
                    seized.remove(tid)  // exited
                }
                return
            }
            if result < 0 && errno != EINTR {
                failures.append((tid, "waitpid: \(String(cString: strerror(errno)))"))
                seized.remove(tid)
                return
            }
            if Self.now() > deadline {
                failures.append((tid, "did not stop within the capture deadline"))
                return
            }
            usleep(100)
        }
    }

    static func stopped(_ status: Int32) -> Bool { (status & 0xFF) == 0x7F }

    /// General registers (struct user_regs_struct, 27 × u64) and the FXSAVE image of a stopped thread.
    public func registers(of tid: Int32) throws -> (gpr: [UInt64], fxsave: [UInt8]) {
        var gpr = [UInt64](repeating: 0, count: 27)
        guard gpr.withUnsafeMutableBytes({ getRegSet(tid, Self.NT_PRSTATUS, $0) }) else {
            throw InspectionError.system(call: "PTRACE_GETREGSET(NT_PRSTATUS, \(tid))", errno: errno)
        }
        var fxsave = [UInt8](repeating: 0, count: 512)
        let fpOK = fxsave.withUnsafeMutableBytes { getRegSet(tid, Self.NT_PRFPREG, $0) }
        return (gpr, fpOK ? fxsave : [])
    }

    private func getRegSet(_ tid: Int32, _ type: UInt, _ bytes: UnsafeMutableRawBufferPointer) -> Bool {
        var vector = iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
        return withUnsafeMutablePointer(to: &vector) {
            cp_ptrace(Self.PTRACE_GETREGSET, tid, type, UInt(bitPattern: $0)) == 0
        }
    }

    /// Releases every thread; signals that arrived meanwhile are re-delivered.
    public func detachAll() {
        for tid in seized {
            _ = cp_ptrace(Self.PTRACE_DETACH, tid, 0, UInt(pendingSignals[tid] ?? 0))
        }
        seized.removeAll()
        stopped.removeAll()
    }

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
