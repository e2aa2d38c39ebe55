// HeldFaults: the policy for faults a program's handler turned into a call (CP_RERAISE_CALLED:
// Go's runtime making a nil dereference a panic, runtime.sigpanic). Such a fault may be the
// crash or may be recovered, and only the process's end says which: so it is captured at the
// fault and held. An exit with Go's fatal status (2: a fatal error after a fault in C code, an
// unrecovered panic) writes it; a later crash record of the same thread (Go with
// GOTRACEBACK=crash aborts) writes it with that signal as its re-raise; any other end, or a
// later such fault of the process, drops it (the panic was recovered). Never spooled.
//
// A value type's rules and a Mutex: the capture path holds and takes, the serving thread settles.

import LiveProcess
import ReportModel
import Reports
import Store
import Synchronization

/// One fault held until its process's end.
struct HeldFault: Sendable {
    var record: CrashRecord
    var held: HeldCapture
    var recordBytes: [UInt8]
    var store: ReportStore
    var access: ProcessAccess
    var started: UInt64
    var elapsed: UInt64
    /// Captured from the record only (past fullCaptures of its process).
    var thin: Bool
}

final class HeldFaults: Sendable {
    /// How many faults turned into calls of one process are captured whole (every thread
    /// stopped, a few ms each); the rest only from the record (the faulting thread's registers
    /// and stack copy, and the modules), a fraction of that. A Go program that recovers
    /// thousands of nil dereferences pays the full capture a few times, not each time.
    static let fullCaptures = 4
    /// Each held fault holds a capture (every thread's stack) until its process ends, and a user
    /// can fault and then never end: so at most `perUser` per user (past it, that user's oldest
    /// is let go) and `limit` in all (past it, the oldest), never a storm of one user's
    /// processes holding the watcher's memory or pushing out another user's.
    static let limit = 256
    static let perUser = 16
    /// The exit status Go's runtime ends a process with after a fatal error or an unrecovered
    /// panic (runtime.exit(2) in fatalthrow and fatalpanic).
    static let goFatalExitStatus: Int32 = 2

    /// By pid, one per process (the latest), oldest first; and how many faults turned into calls
    /// each process has had.
    private let state = Mutex<(held: [HeldFault], called: [ProcessID: Int])>(([], [:]))

    /// Counts a fault of `pid` turned into a call; whether it is captured thin (from the record
    /// only: past the first `fullCaptures` of its process).
    func countCalledFault(of pid: ProcessID) -> Bool {
        state.withLock { state in
            if state.called.count >= Self.limit { state.called.removeAll() }
            state.called[pid, default: 0] += 1
            return state.called[pid, default: 0] > Self.fullCaptures
        }
    }

    func hold(_ fault: HeldFault) {
        state.withLock { Self.hold(fault, in: &$0.held, pid: \.record.pid, uid: { $0.access.credentials?.uid }) }
    }

    /// The eviction rule of `hold`, for any held thing of a pid and a user.
    static func hold<Held>(_ new: Held, in held: inout [Held], pid: (Held) -> ProcessID, uid: (Held) -> UInt32?) {
        held.removeAll { pid($0) == pid(new) }
        let user = uid(new)
        if held.count(where: { uid($0) == user }) >= perUser, let oldest = held.firstIndex(where: { uid($0) == user }) {
            held.remove(at: oldest)
        }
        if held.count >= limit { held.removeFirst() }
        held.append(new)
    }

    func take(of pid: ProcessID) -> HeldFault? {
        state.withLock { state in state.held.firstIndex { $0.record.pid == pid }.map { state.held.remove(at: $0) } }
    }

    /// Whether a fault of `pid`'s is held, waiting for its end.
    func holds(_ pid: ProcessID) -> Bool { state.withLock { $0.held.contains { $0.record.pid == pid } } }

    /// What the report of a held fault (its record's re-raise: `held`) says when its process
    /// ended with `exit`: its re-raise and note, or nil when that end drops it (anything but Go's
    /// fatal exit: the panic was recovered).
    static func settled(_ held: WireReraise?, exit: ProcessExit?) -> (reraise: WireReraise?, note: String)? {
        guard exit == .exited(goFatalExitStatus) else { return nil }
        var reraise = held
        reraise?.code = goFatalExitStatus
        return (
            reraise,
            "captured at the fault, written when the process exited with status \(goFatalExitStatus), Go's fatal exit (Go printed \"fatal error\" or \"panic\" and its goroutines on stderr); GOTRACEBACK=crash makes Go abort with SIGABRT instead (crashport doctor)"
        )
    }

    /// What the report of a held fault (its record's re-raise: `held`) says when its thread
    /// crashed again with `second` (Go with GOTRACEBACK=crash aborts): the handler stays the one
    /// that turned the fault into a call.
    static func crashedAgain(_ held: WireReraise?, with second: CrashRecord) -> (reraise: WireReraise?, note: String) {
        var reraise = held
        reraise?.how = second.code > 0 ? .faulted : .raised
        reraise?.signal = second.signal
        reraise?.code = second.code
        reraise?.pc = second.reraise?.pc ?? 0
        return (
            reraise,
            "captured at the fault, before the thread ended the process with \(SignalNames.name(second.signal)) (Go with GOTRACEBACK=crash aborts after printing)"
        )
    }

    /// The notes of a thin capture's report.
    static func thinNote() -> String {
        "only the faulting thread, from the stub's record: more than \(fullCaptures) faults of this process were turned into calls (recovered panics, most likely), and only the first \(fullCaptures) stop every thread"
    }
}
