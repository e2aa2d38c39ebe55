// CrashServerDelegate and ReportHooks: what a server mode (the launcher, the sidecar) decides
// for the crash server, as Crashpad's ExceptionHandlerServer takes one Delegate. The crash server
// owns the socket and every message's checks; the mode says where a sender's reports go, what a
// HELLO, a setting, a consent or a GOODBYE means to it, and what already holds its processes.
//
// Two protocols because two threads call them: the delegate on the serving thread (it may keep
// unsynchronized state there), the hooks on the thread that writes a report (a report pool's),
// so they are Sendable and the compiler checks what they touch.

import LiveProcess
import ReportModel
import Store

/// Called on the serving thread.
protocol CrashServerDelegate: AnyObject {
    /// Where a sender's reports go; nil refuses them (the sidecar keeps one store per user).
    func store(for sender: Sender) -> ReportStore?
    /// A valid HELLO (the sidecar answers it on the client's connection).
    func hello(_ hello: HelloMessage, from sender: Sender)
    /// crashport_set_enabled: whether the sender's program wants its crashes reported from now on.
    func setting(enabled: Bool, from sender: Sender)
    /// crashport_set_consent, crashport_send_pending or crashport_discard_pending: for the
    /// sender's program's reports.
    func consent(_ message: ConsentMessage, from sender: Sender)
    /// crashport_pending_list: the sender's program's reports awaiting consent in its user's
    /// reports; nil refuses the query (it gets no answer).
    func pendingReports(from sender: Sender) -> PendingList?
    /// crashport_send_report or crashport_discard_report: for one of the sender's program's
    /// reports awaiting consent (ConsentDecisions refuses any other).
    func consentReport(_ message: ConsentReportMessage, from sender: Sender)
    /// A valid GOODBYE: the sender exits normally (a connection that closes without one ended
    /// abnormally).
    func goodbye(_ goodbye: GoodbyeMessage, from sender: Sender)
    /// crashport_launch: the sender ran its launch protection, or launched without it (the
    /// sender's session keeps which).
    func launch(_ message: LaunchMessage, from sender: Sender)
    /// What already holds a process the watcher traces (--trace-exit): its crashes are captured
    /// through it, since a second PTRACE_SEIZE would fail.
    func holder(of pid: ProcessID) -> ThreadHold?
    /// A crash record was captured and its process released; its report, to be written under
    /// `id`, is not yet. `app`: the app area as read then (its launch window, its release).
    /// The sidecar ends the client's session here, so that the next HELLO already counts it.
    func captured(_ record: CrashRecord, id: String, app: AppArea?, from sender: Sender)
}

extension CrashServerDelegate {
    func hello(_ hello: HelloMessage, from sender: Sender) {}
    func setting(enabled: Bool, from sender: Sender) {}
    func consent(_ message: ConsentMessage, from sender: Sender) {}
    func pendingReports(from sender: Sender) -> PendingList? { nil }
    func consentReport(_ message: ConsentReportMessage, from sender: Sender) {}
    func goodbye(_ goodbye: GoodbyeMessage, from sender: Sender) {}
    func launch(_ message: LaunchMessage, from sender: Sender) {}
    func holder(of pid: ProcessID) -> ThreadHold? { nil }
    func captured(_ record: CrashRecord, id: String, app: AppArea?, from sender: Sender) {}
}

/// Called on the thread that writes a report.
protocol ReportHooks: Sendable {
    /// The session a process's reports belong to, nil if none.
    func sessionID(of pid: ProcessID) -> String?
    /// Last words on an event before it is written (the launcher's watchdog and hang links).
    func amend(_ event: inout Event, record: CrashRecord)
    /// After a report is written, with its store.
    func wrote(_ report: WrittenReport, into store: ReportStore)
    /// A captured crash whose report cannot be written, with the record as received: the
    /// sidecar spools it rather than lose it. Not called, the failure is only logged.
    func unwritable(_ capture: Capture, recordBytes: [UInt8], error: Error, store: ReportStore) -> Bool
}

extension ReportHooks {
    func sessionID(of pid: ProcessID) -> String? { nil }
    func amend(_ event: inout Event, record: CrashRecord) {}
    func wrote(_ report: WrittenReport, into store: ReportStore) {}
    func unwritable(_ capture: Capture, recordBytes: [UInt8], error: Error, store: ReportStore) -> Bool { false }
}
