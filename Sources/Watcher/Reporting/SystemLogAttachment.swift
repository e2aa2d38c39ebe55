// SystemLogAttachment: the system's own log around a crash or a death (SystemLog: the
// kernel's records about the process, the journal's last lines of its unit), written beside the
// report as attachments/system.log, with its record (scope `system`) in the event's
// `attachments`. For crashes, exits captured under --trace-exit and terminations; not for hangs
// (the process lives on) or handled errors.
//
// Whose it is decides what is read: the report's store's owner (a sidecar's client's user, the
// host level's crashed process's user; none: the watcher's own user). Collected on the writing
// thread, before the report's files are committed; only the open of /dev/kmsg is the watcher's
// own (SystemLog's WatcherIdentity), and journalctl runs as the owner.

import BoundedBytes
import Processes
import ReportModel
import Reports
import Store
import SystemLog

#if canImport(Glibc)
import Glibc
#endif

enum SystemLogAttachment {
    /// The system log of a captured crash or exit, as the store's owner may read it; nil for
    /// hangs and handled errors, or when the log says nothing of the process.
    static func collect(for capture: Capture, event: Event, store: ReportStore, seen: UInt64) -> SystemLog? {
        let record = capture.record
        if record.isError { return nil }
        var oomKill = false
        switch record.observation {
        case .hang?: return nil
        case .exit(_, let cause)?: oomKill = cause == "oom-kill"
        case nil: break
        }
        let threads = capture.snapshot.threads.map { $0.tid.rawValue } + [record.tid.rawValue]
        let names = capture.snapshot.threads.map(\.name) + [(capture.executable ?? event.process?.executable ?? "").pathBaseName]
        return collect(
            KernelLogSubject(pid: record.pid.rawValue, threads: threads, names: names), unit: event.process?.unit,
            started: capture.snapshot.processStartTime.map(UInt64.init), until: record.timeNanoseconds, store: store,
            seen: seen, oomKill: oomKill)
    }

    /// The system log of a death seen from outside (a termination report).
    static func collect(for end: AbnormalEnd, event: Event, store: ReportStore) -> SystemLog? {
        collect(
            KernelLogSubject(pid: end.pid.rawValue, names: [end.executable.pathBaseName]), unit: event.process?.unit,
            until: realtimeNanoseconds(), store: store, seen: monotonicNanoseconds(), oomKill: end.cause == "oom-kill")
    }

    /// `started`: when the process started (seconds since the epoch), where known, so that the
    /// journal's lines of an earlier process of the same pid are left out.
    static func collect(
        _ subject: KernelLogSubject, unit: String?, started: UInt64? = nil, until: UInt64, store: ReportStore,
        seen: UInt64, oomKill: Bool
    ) -> SystemLog? {
        let uid = store.owner?.uid ?? geteuid()
        let journal = JournalLog.Query(
            unit: unit.flatMap { $0.hasSuffix(".service") ? $0 : nil }, pid: subject.pid, started: started,
            until: until / 1_000_000_000, user: uid == 0 ? nil : store.owner)
        return SystemLog.collect(
            SystemLog.Request(
                subject: subject, viewer: uid == 0 ? .root : .user(uid: uid), seen: seen, oomKill: oomKill,
                journal: journal))
    }

    /// Writes `log` into `directory`/attachments/system.log; its record, or none without a log.
    static func write(_ log: SystemLog?, into directory: String) -> [AttachmentRecord] {
        guard let log else { return [] }
        let file = RuntimeCrashLog(kind: "system", path: "system.log", contents: log.contents, truncated: log.truncated)
        return Attachments.writeRuntimeLogs([file], into: directory, scope: AttachmentRecord.systemScope)
    }
}
