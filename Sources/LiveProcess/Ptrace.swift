// Ptrace: the one way crashport calls ptrace(2). The requests, options and events carry the
// kernel's names (<linux/ptrace.h>, <elf.h>) so they can be grepped against ptrace(2); the call
// itself is CShims' cp_ptrace, ptrace being variadic in C. ptrace is per tracer thread: every
// request about a thread must come from the thread that seized it.

import CShims

#if canImport(Glibc)
import Glibc
#endif

public enum Ptrace {
    /// The requests crashport makes.
    public enum Request: Int32 {
        case PTRACE_CONT = 7
        case PTRACE_DETACH = 17
        case PTRACE_GETEVENTMSG = 0x4201
        case PTRACE_GETSIGINFO = 0x4202
        case PTRACE_GETREGSET = 0x4204
        case PTRACE_SEIZE = 0x4206
        case PTRACE_INTERRUPT = 0x4207
        case PTRACE_LISTEN = 0x4208
    }

    /// PTRACE_SEIZE's options.
    public struct Options: OptionSet, Sendable {
        public let rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        public static let PTRACE_O_TRACECLONE = Options(rawValue: 0x08)
        public static let PTRACE_O_TRACEEXEC = Options(rawValue: 0x10)
        public static let PTRACE_O_TRACEEXIT = Options(rawValue: 0x40)
    }

    /// The event of a stop (a wait status's bits 16 to 31).
    public enum Event: Int32 {
        case PTRACE_EVENT_CLONE = 3
        case PTRACE_EVENT_EXEC = 4
        case PTRACE_EVENT_EXIT = 6
        case PTRACE_EVENT_STOP = 128
    }

    /// PTRACE_GETREGSET's register sets.
    public enum RegisterSet: UInt {
        case NT_PRSTATUS = 1
        case NT_PRFPREG = 2
    }

    /// ptrace(request, tid, address, data): 0 (or the request's result), or -1 with errno.
    @discardableResult
    public static func call(_ request: Request, _ tid: Int32, address: UInt = 0, data: UInt = 0) -> Int {
        cp_ptrace(request.rawValue, tid, address, data)
    }

    /// What waitpid(tid, __WALL) would report for a traced thread, seen without consuming it.
    public enum WaitState: Sendable {
        case nothing, stopped, exited
    }

    /// cp_wait_peek (waitid with WNOWAIT): what a thread we trace has to report, left for the
    /// waitpid that consumes it (the leader of our own child's exit is its parent's to reap);
    /// nil with errno set (ECHILD: not traced by us, or already reaped).
    public static func peekWait(_ tid: Int32) -> WaitState? {
        switch cp_wait_peek(tid) {
        case Int32(CP_WAIT_NOTHING.rawValue): return .nothing
        case Int32(CP_WAIT_STOPPED.rawValue): return .stopped
        case Int32(CP_WAIT_EXITED.rawValue): return .exited
        default: return nil
        }
    }

    /// Whether a wait status is a stop (WIFSTOPPED), not an end (ProcessExit decodes those).
    public static func isStop(_ status: Int32) -> Bool { (status & 0xFF) == 0x7F }

    /// The signal of a stop's wait status (WSTOPSIG): the signal delivered, or SIGTRAP for an
    /// event stop.
    public static func stopSignal(_ status: Int32) -> Int32 { (status >> 8) & 0x7F }

    /// The event of a wait status that is a ptrace stop, nil when it has none (a
    /// signal-delivery-stop) or one crashport does not ask for.
    public static func event(ofStop status: Int32) -> Event? {
        let raw = (status >> 16) & 0xFFFF
        return raw == 0 ? nil : Event(rawValue: raw)
    }
}
