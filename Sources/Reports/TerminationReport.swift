// TerminationReport: the event for a process that ended with no crash record and without
// saying goodbye, seen from outside: by the sidecar (its connection closed) or by
// `crashport run`, its parent, when it was not traced (a traced death is captured at its exit
// instead, with every stack). How it ended (the kernel's exit status, or that it would not say),
// whether the OOM killer was at work in its cgroup (or, failing a cgroup counter, on the
// machine), and what the program last said about itself (breadcrumbs and annotations read while
// it ran). There are no stacks: its memory was gone before anyone could read it.

import ReportModel

#if canImport(Glibc)
import Glibc
#endif

/// What is known of a process that ended abnormally.
public struct AbnormalEnd: Sendable {
    /// Who saw the end, which says what "no crash record" means.
    public enum Witness: Sendable, Equatable {
        /// The sidecar: the client's connection closed without a goodbye or a crash record.
        case sidecar
        /// `crashport run`, the process's parent: it sees every death, and this one came with
        /// no crash record, or with one whose full report could not be written (why).
        case parent(unwritten: String?)
    }

    public var witness = Witness.sidecar
    public var pid: ProcessID
    public var executable: String
    public var arguments: [String] = []
    public var buildID: String?
    public var release: String?
    /// The session (run) it ends.
    public var session: String?
    /// How it ended; nil when the kernel would not say (`exitUnknown` says why).
    public var exit: ProcessExit?
    /// Where the exit status came from ("the kernel's pidfd (PIDFD_INFO_EXIT)").
    public var exitSource: String?
    public var exitUnknown: String?
    /// The OOM-kill counter of its memory cgroup (or the machine's) when it started and when it
    /// ended.
    public var oomKills: OOMCount?
    /// The breadcrumbs and annotations read while it ran, and how many seconds before its end
    /// they were last checked.
    public var app: AppArea?
    public var appCheckedBeforeEnd: Double?
    /// Why they are missing, when they are (never used, unreadable, not kept).
    public var appProblem: String?
    /// Its cgroup and the container that is, read while it ran.
    public var container: ContainerIdentity?
    public var notes: [String] = []

    public struct OOMCount: Sendable, Equatable {
        /// The cgroup's directory; for the machine-wide count, "/proc/vmstat".
        public var cgroup: String
        public var before: UInt64
        public var after: UInt64
        /// Counted machine-wide (/proc/vmstat), for want of a counter of the process's cgroup:
        /// any OOM kill on the machine moves it.
        public var machineWide = false

        public init(cgroup: String, before: UInt64, after: UInt64) {
            self.cgroup = cgroup
            self.before = before
            self.after = after
        }

        /// The machine's count (/proc/vmstat oom_kill).
        public static func machineWide(before: UInt64, after: UInt64) -> OOMCount {
            var count = OOMCount(cgroup: "/proc/vmstat", before: before, after: after)
            count.machineWide = true
            return count
        }

        public var moved: Bool { after > before }

        /// What the count says, for the report's notes.
        public var note: String {
            let moves = moved ? "killed \(after - before) process(es)" : "killed nothing"
            return machineWide
                ? "the kernel's OOM killer \(moves) on this machine while it ran (/proc/vmstat oom_kill \(before) -> \(after)); no counter of its own memory cgroup was available, so an OOM kill elsewhere reads the same"
                : "the kernel's OOM killer \(moves) in its memory cgroup \(cgroup) while it ran (oom_kill \(before) -> \(after))"
        }
    }

    public init(pid: ProcessID, executable: String) {
        self.pid = pid
        self.executable = executable
    }

    /// Whether the OOM killer may have ended it: killed by SIGKILL, or how it ended is unknown.
    public var mayBeOOMKill: Bool {
        switch exit {
        case .signaled(let signal)?: return signal == SIGKILL
        case .exited?: return false
        case nil: return true
        }
    }

    /// The event's cause: `oom-kill` when it was killed by SIGKILL (or how is unknown) while
    /// its cgroup's OOM-kill counter moved, `SIGKILL`, `signal` (another fatal signal), `exit`;
    /// nil when nothing is known.
    public var cause: String? {
        let oom = oomKills?.moved == true
        switch exit {
        case .signaled(let signal)?: return signal == SIGKILL ? (oom ? "oom-kill" : "SIGKILL") : "signal"
        case .exited?: return "exit"
        case nil: return oom ? "oom-kill" : nil
        }
    }
}

public enum TerminationReport {
    /// The termination event of an abnormal end (titled by Culprit).
    public static func event(for end: AbnormalEnd, id: String, timestamp: String) -> Event {
        var event = Event()
        event.id = id
        event.kind = .termination
        event.timestamp = timestamp
        event.process = ProcessInfoRecord(
            pid: end.pid, executable: end.executable, arguments: end.arguments, buildID: end.buildID)
        if let container = end.container { container.describe(&event.process) }
        if let signal = end.exit?.signal {
            event.signal = SignalRecord(number: signal, name: SignalNames.name(signal), description: SignalNames.meaning(signal))
        }
        if case .exited(let code)? = end.exit {
            event.exitCode = code
            event.reason = "exited with status \(code)" + (end.witness == .sidecar ? " without saying goodbye" : "")
        }
        event.cause = end.cause
        event.release = ReportBuilder.release(of: end.app) ?? end.release
        event.session = end.session

        var notes: [String]
        switch end.witness {
        case .sidecar:
            notes = [
                "no crash record and no goodbye: the process was killed from outside (SIGKILL, the OOM killer) or ended where crashport's handler could not run; its connection to the sidecar closed, and this is what could still be learned"
            ]
        case .parent(let unwritten?):
            notes = ["the crash was captured but its full report could not be written (\(unwritten)); this is what remains"]
        case .parent(nil):
            notes = [
                "no crash record: the process was killed from outside, or died where crashport's handler could not run (it was removed, replaced without chaining, or the stub was not loaded)"
            ]
        }
        if let exit = end.exit {
            notes.append("\(describe(exit)), as \(end.exitSource ?? "the kernel") says")
        } else {
            notes.append("exit status unknown: \(end.exitUnknown ?? "the kernel would not say")")
        }
        // The OOM killer kills with SIGKILL: its counter says something only about such an end
        // (or one whose signal is unknown); a SIGSEGV or an exit gets no OOM note.
        if end.mayBeOOMKill {
            if let oom = end.oomKills {
                notes.append(oom.note)
            } else {
                notes.append(
                    "its memory cgroup's OOM-kill counter could not be read: an OOM kill cannot be told from another SIGKILL")
            }
        }
        if let app = end.app {
            event.record(annotations: app.annotations, breadcrumbs: app.breadcrumbs)
            let when = end.appCheckedBeforeEnd.map { seconds($0) } ?? "some time"
            notes.append(
                "breadcrumbs and annotations as read from the process's memory while it ran, last checked \(when) before it ended (read at most once a second, again only when they change): anything it added after that is not here"
            )
        } else if let problem = end.appProblem {
            notes.append("no breadcrumbs or annotations: \(problem)")
        }
        event.notes = notes + end.notes
        Watchdog.mark(&event)
        event.title = Culprit.title(event)
        return event
    }

    /// "1.2 s": seconds to a tenth.
    static func seconds(_ value: Double) -> String {
        let tenths = Int((max(0, value) * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) s"
    }

    /// "killed by SIGKILL", "killed by SIGSEGV (segmentation fault)", "exited with code 3".
    public static func describe(_ exit: ProcessExit) -> String {
        switch exit {
        case .exited(let code): return "exited with code \(code)"
        case .signaled(SIGKILL): return "killed by SIGKILL"
        case .signaled(let signal): return "killed by \(SignalNames.name(signal)) (\(SignalNames.meaning(signal)))"
        }
    }
}
