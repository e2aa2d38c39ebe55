// ConsentRequests: a program's consent messages (crashport_set_consent, crashport_send_pending,
// crashport_discard_pending, crashport_pending_list, crashport_send_report,
// crashport_discard_report), handled once for every mode that serves them. The mode says which
// store and which program a sender speaks for, where its lines go, and how an upload starts;
// ConsentDecisions keeps the decisions.

import LiveProcess
import ReportModel
import Store
import Upload

protocol ConsentRequests: WireServerDelegate {
    /// The store a sender's decisions are kept in; nil: not served.
    func consentStore(for sender: Sender) -> ReportStore?
    /// The program a sender's consent speaks for (its run's, else its own).
    func consentProgram(of sender: Sender) -> String
    /// A line about a sender's consent.
    func say(_ text: String, about sender: Sender)
    /// Starts an upload of `store` (after a decision that lets reports go, when a destination
    /// is configured).
    func startUpload(of store: ReportStore)
}

extension ConsentRequests {
    func consent(_ message: ConsentMessage, from sender: Sender) {
        decide(for: sender, sends: message == .sendPending, failure: "its consent could not be kept") { store, program in
            try ConsentDecisions.apply(message, program: program, store: store)
        }
    }

    func pendingReports(from sender: Sender) -> PendingList? {
        guard let store = consentStore(for: sender) else { return nil }
        return ConsentDecisions.pending(store: store, program: consentProgram(of: sender)) { self.say($0, about: sender) }
    }

    func reportStates(from sender: Sender) -> ReportStateList? {
        guard let store = consentStore(for: sender) else { return nil }
        return SendStates.recent(store: store, program: consentProgram(of: sender))
    }

    func consentReport(_ message: ConsentReportMessage, from sender: Sender) {
        decide(for: sender, sends: message.send, failure: "its consent for report \(message.id) could not be kept") {
            store, program in
            try ConsentDecisions.apply(message, program: program, store: store)
        }
    }

    /// A program's consent decision, kept in the sender's store (`apply` says what it did, for
    /// the log); an upload starts after one that lets reports go.
    private func decide(
        for sender: Sender, sends: Bool, failure: String, _ apply: (ReportStore, String) throws -> String
    ) {
        guard let store = consentStore(for: sender) else { return }
        do {
            say("pid \(sender.pid): " + (try apply(store, consentProgram(of: sender))), about: sender)
            if sends, UploadSpawner.isConfigured() { startUpload(of: store) }
        } catch {
            say("pid \(sender.pid): \(failure): \(error)", about: sender)
        }
    }
}
