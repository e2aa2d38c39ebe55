// The wire server's side of a program's consent dialog: crashport_pending_list's query, answered
// once on the reply fd it carries, and crashport_send_report / crashport_discard_report. The
// checks are here (the message, its descriptor, the rate); what the sender's program and reports
// are is the delegate's (the launcher's child, a sidecar's client), as for a consent message.

import CCrashPortProtocol
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

extension WireServer {
    /// A query with exactly one descriptor, a socket: answered with the sender's program's
    /// reports awaiting consent (or, asked with CP_QUERY_SEND_STATES, its recent reports and what
    /// became of each), sent without blocking (a client that does not read, or whose
    /// socket is full, loses the answer; the serving thread never waits on it). A malformed or
    /// refused query gets no answer: the descriptor is closed, so the stub sees the end at once.
    func handlePendingQuery(_ bytes: [UInt8], sender: Sender, replyFDs: [Int32]) -> String? {
        let what = "a pending-reports query from pid \(sender.pid)"
        guard let reply = replyFDs.first, replyFDs.count == 1 else {
            return reject(sender.uid, "\(what): it carried \(replyFDs.count) descriptors, expected 1")
        }
        var kind = stat()
        guard fstat(reply, &kind) == 0, (kind.st_mode & S_IFMT) == S_IFSOCK else {
            return reject(sender.uid, "\(what): its reply descriptor is not a socket")
        }
        let sendStates: Bool
        do {
            sendStates = try PendingQuery.check(bytes)
        } catch {
            return reject(sender.uid, "\(what): \(error)")
        }
        // Past the limit it is ignored, not rejected, as a setting is: no answer, the connection stays.
        guard pendingTimes.allows(sender.pid) else {
            log(about: sender.uid, "ignored \(what): more than \(Self.pendingPerMinute) in a minute")
            return nil
        }
        let answer: [UInt8]
        if sendStates, let states = delegate?.reportStates(from: sender) {
            answer = states.encode()
        } else if !sendStates, let list = delegate?.pendingReports(from: sender) {
            answer = list.encode()
        } else {
            return reject(sender.uid, "\(what): its reports are not served here")
        }
        let sent = answer.withUnsafeBytes { send(reply, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        if sent != answer.count {
            log(about: sender.uid, "\(what): the answer was not taken (\(sent < 0 ? String(cString: strerror(errno)) : "cut"))")
        }
        return nil
    }

    /// One report's consent, for the delegate to check against the sender's program's reports.
    func handleConsentReport(_ bytes: [UInt8], sender: Sender) -> String? {
        let message: ConsentReportMessage
        do {
            message = try ConsentReportMessage(bytes: bytes)
        } catch {
            return reject(sender.uid, "a report's consent from pid \(sender.pid): \(error)")
        }
        guard pendingTimes.allows(sender.pid) else {
            log(
                about: sender.uid,
                "ignored a report's consent from pid \(sender.pid): more than \(Self.pendingPerMinute) in a minute")
            return nil
        }
        delegate?.consentReport(message, from: sender)
        return nil
    }
}
