// WireServerDelegate: what a server mode (the launcher, the sidecar) makes of the messages the
// wire server accepted, as Crashpad's ExceptionHandlerServer takes one Delegate. The wire server
// owns the socket and every message's checks; the mode says what a HELLO, a crash, a setting, a
// consent or a GOODBYE means to it. Called on the serving thread: a mode may keep unsynchronized
// state there.

import LiveProcess
import ReportModel

protocol WireServerDelegate: AnyObject {
    /// A valid HELLO (the sidecar answers it on the client's connection).
    func hello(_ hello: HelloMessage, from sender: Sender)
    /// A crash or error record, checked against the kernel's word for its sender: captured and
    /// answered (AcceptedCrash.answer) before this returns. Returns why the mode refuses it
    /// (its user is not served here): the wire server then answers, rejects and logs it.
    func crash(_ crash: AcceptedCrash) -> String?
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
    /// crashport_launch: the sender ran its launch protection, or launched without it.
    func launch(_ message: LaunchMessage, from sender: Sender)
    /// crashport_report_states: the sender's program's recent reports and what became of each;
    /// nil when not served.
    func reportStates(from sender: Sender) -> ReportStateList?
}

extension WireServerDelegate {
    func hello(_ hello: HelloMessage, from sender: Sender) {}
    func setting(enabled: Bool, from sender: Sender) {}
    func consent(_ message: ConsentMessage, from sender: Sender) {}
    func pendingReports(from sender: Sender) -> PendingList? { nil }
    func consentReport(_ message: ConsentReportMessage, from sender: Sender) {}
    func goodbye(_ goodbye: GoodbyeMessage, from sender: Sender) {}
    func launch(_ message: LaunchMessage, from sender: Sender) {}
    func reportStates(from sender: Sender) -> ReportStateList? { nil }
}
