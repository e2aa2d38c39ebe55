// ConsentDecisions: the user's say over what `crashport upload` sends, from the command line
// (crashport consent, send, discard) or from the program itself (crashport_set_consent,
// crashport_send_pending, crashport_discard_pending through its watcher). Settings and decisions
// live in the reports directory (Upload.swift: ConsentSettings, UploadState.consent); a
// sidecar running as root writes them with the user's filesystem ids, as it writes reports.

import Foundation
import ReportModel

public enum ConsentDecisions {
    /// The reports awaiting a decision: consent `ask` applies to their program and none was
    /// made. Only `program`'s (an executable's real path) when given.
    public static func awaiting(store: ReportStore, program: String? = nil) -> [String] {
        let settings = (try? ConsentSettings.read(root: store.root)) ?? ConsentSettings()
        guard settings.choice == .ask || settings.programs.values.contains(.ask) else { return [] }
        return store.ids().filter { id in
            guard let executable = (try? store.event(id: id))?.process?.executable,
                program.map({ RunHistory.realPath(executable) == $0 }) ?? true,
                settings.choice(for: RunHistory.realPath(executable)) == .ask
            else { return false }
            return ((try? UploadState.read(directory: store.path(of: id))) ?? UploadState()).consent == nil
        }
    }

    /// Records `decision` beside each report.
    public static func decide(_ decision: ReportConsent, ids: [String], store: ReportStore) throws {
        try store.asOwner {
            for id in ids {
                let directory = store.path(of: id)
                var state = try UploadState.read(directory: directory)
                state.consent = decision
                try state.write(directory: directory)
            }
        }
    }

    /// Sets the choice for every program, or for one (an executable's real path).
    public static func set(_ choice: ConsentSettings.Choice, program: String?, store: ReportStore) throws {
        try store.asOwner {
            try store.prepare()
            var settings = (try? ConsentSettings.read(root: store.root)) ?? ConsentSettings()
            if let program { settings.programs[program] = choice } else { settings.choice = choice }
            try settings.write(root: store.root)
        }
    }

    /// A program's message (ConsentMessage) applied to its own reports; what it did, for the log.
    public static func apply(_ message: ConsentMessage, program: String, store: ReportStore) throws -> String {
        switch message {
        case .set(let value):
            let choice: ConsentSettings.Choice = value == 0 ? .ask : value == 1 ? .always : .never
            try set(choice, program: program, store: store)
            return "consent \(choice.rawValue) for \(program)"
        case .sendPending, .discardPending:
            let ids = awaiting(store: store, program: program)
            let granted = message == .sendPending
            try decide(granted ? .granted : .denied, ids: ids, store: store)
            return "\(ids.count) report(s) of \(program) \(granted ? "allowed to be sent" : "never to be sent")"
        }
    }
}
