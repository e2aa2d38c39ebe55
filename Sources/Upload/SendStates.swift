// SendStates: what became of a report's upload, for the program that made it
// (crashport_run_detail's send_state at its next start, crashport_report_states at any time):
// awaiting consent, to be sent, sent (the server's id), failed for good (why), or never to be
// sent. Read from what `crashport upload` and the consent decisions keep beside each report
// (UploadState, ConsentSettings), with the store's owner's filesystem ids, bounded like
// ConsentDecisions' scan.

import FoundationEssentials
import ReportModel
import Store

public enum SendStates {
    /// The state of report `id` of `executable` in `store` (the caller has the owner's ids, or
    /// is the owner): the first that applies of sent, never to be sent, awaiting consent, to be
    /// sent, failed, and (no attempt yet) to be sent or, with no destination configured, not sent.
    public static func state(
        of id: String, executable: String?, store: ReportStore, settings: ConsentSettings, configured: Bool
    ) -> SendState {
        let upload: UploadState
        do {
            upload = try UploadState.read(directory: store.path(of: id))
        } catch {
            return SendState(.pending, reason: "its upload state could not be read: \(error)")
        }
        let entries = upload.destinations.values
        if let sent = entries.filter({ $0.status == .sent }).min(by: { ($0.sentAt ?? 0) < ($1.sentAt ?? 0) }) {
            return SendState(
                .sent, sentMilliseconds: Int64(((sent.sentAt ?? 0) * 1000).rounded()), serverID: sent.serverID ?? "")
        }
        if upload.consent == .denied { return SendState(.notSent, reason: "the user chose not to send it") }
        switch settings.choice(for: executable) {
        case .never: return SendState(.notSent, reason: "consent is never for this program")
        case .ask where upload.consent == nil: return SendState(.awaitingConsent, reason: "it awaits the user's consent")
        default: break
        }
        if let waiting = entries.first(where: { $0.status == .pending }) {
            return SendState(.pending, reason: waiting.lastError.map { "to be tried again: \($0)" } ?? "to be sent")
        }
        if !entries.isEmpty {
            let why = entries.compactMap(\.lastError).sorted().joined(separator: "; ")
            return SendState(.failed, reason: why.isEmpty ? "it failed" : why)
        }
        return configured
            ? SendState(.pending, reason: "not sent yet") : SendState(.notSent, reason: "no upload destination is configured")
    }

    /// The last run's report's state (nil id: none).
    public static func state(of id: String?, executable: String, store: ReportStore) -> SendState {
        guard let id else { return SendState() }
        return
            (try? store.asOwner {
                state(
                    of: id, executable: executable, store: store,
                    settings: (try? ConsentSettings.read(root: store.root)) ?? ConsentSettings(),
                    configured: UploadSpawner.isConfigured())
            }) ?? SendState()
    }

    /// `program`'s most recent reports in `store`, newest first (at most ReportStateList.capacity,
    /// looked for among the newest the quota keeps), each with its state.
    public static func recent(store: ReportStore, program: String) -> ReportStateList {
        let list = try? store.asOwner { () -> ReportStateList in
            let settings = (try? ConsentSettings.read(root: store.root)) ?? ConsentSettings()
            let configured = UploadSpawner.isConfigured()
            var entries: [(report: PendingEntry, send: SendState)] = []
            var total = 0
            for id in store.ids().prefix(max(store.maxReports, 1)) {
                guard let event = try? store.event(id: id), event.process?.executable.map(RunHistory.realPath) == program
                else { continue }
                total += 1
                guard entries.count < ReportStateList.capacity else { continue }
                let time = event.timestamp.flatMap(Uploader.iso8601).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
                entries.append(
                    (
                        PendingEntry(
                            id: id, title: event.title ?? "", kind: event.kind?.rawValue ?? "", timeMilliseconds: time ?? 0),
                        state(of: id, executable: program, store: store, settings: settings, configured: configured)
                    ))
            }
            return ReportStateList(entries: entries, total: total)
        }
        return list ?? ReportStateList(entries: [], total: 0)
    }
}
