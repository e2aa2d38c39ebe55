// ConsentDecisions: the user's say over what `crashport upload` sends, from the command line
// (crashport consent, send, discard) or from the program itself (crashport_set_consent,
// crashport_send_pending, crashport_discard_pending, and one report at a time through
// crashport_pending_list, crashport_send_report and crashport_discard_report). Settings and decisions
// live in the reports directory (Upload.swift: ConsentSettings, UploadState.consent); a
// sidecar running as root writes them with the user's filesystem ids, as it writes reports.

import FoundationEssentials
import ReportModel
import Store
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

public enum ConsentDecisions {
    /// The reports awaiting a decision: consent `ask` applies to their program and none was
    /// made. Only `program`'s (an executable's real path) when given. A sidecar asks at every
    /// HELLO, so the scan (every report's event) is kept per reports directory until the
    /// directory changes: a report written or removed, the consent settings replaced, or a
    /// decision made (`decide` touches the directory). Everything is read with the store's
    /// owner's filesystem ids, through UserFile (bounded, no symlink followed); a consent file
    /// that is refused counts as none, and `log` is told why.
    public static func awaiting(store: ReportStore, program: String? = nil, log: ((String) -> Void)? = nil) -> [String] {
        let byProgram = (try? store.asOwner { awaitingByProgram(store: store, log: log) }) ?? [:]
        guard let program else { return byProgram.values.flatMap { $0.map(\.id) }.sorted() }
        return byProgram[program]?.map(\.id) ?? []
    }

    /// The scan keeps what a consent dialog shows of each report (PendingEntry), read with its
    /// event, so that listing them (`pending`) reads nothing more.
    static let scans = Mutex<[String: (stamp: Int, byProgram: [String: [PendingEntry]])]>([:])

    /// The directory's modification time in nanoseconds (0 when it cannot be read).
    static func stamp(_ path: String) -> Int {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0 }
        return info.st_mtim.tv_sec * 1_000_000_000 + info.st_mtim.tv_nsec
    }

    /// The scan itself; the caller has set the owner's filesystem ids.
    static func awaitingByProgram(store: ReportStore, log: ((String) -> Void)?) -> [String: [PendingEntry]] {
        let settings: ConsentSettings
        do {
            settings = try ConsentSettings.read(root: store.root)
        } catch {
            log?("consent settings not read: \(error)")
            settings = ConsentSettings()
        }
        guard settings.choice == .ask || settings.programs.values.contains(.ask) else { return [:] }
        let now = stamp(store.root)
        if let scan = scans.withLock({ $0[store.root] }), scan.stamp == now, now != 0 { return scan.byProgram }
        var byProgram: [String: [PendingEntry]] = [:]
        // The newest reports the quota keeps at most: a user's directory full of made-up
        // reports costs the serving thread no more than a full quota's.
        for id in store.ids().prefix(max(store.maxReports, 1)) {
            guard let event = try? store.event(id: id),
                let executable = event.process?.executable.map(RunHistory.realPath),
                settings.choice(for: executable) == .ask,
                ((try? UploadState.read(directory: store.path(of: id))) ?? UploadState()).consent == nil
            else { continue }
            let time = event.timestamp.flatMap(Uploader.iso8601).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
            byProgram[executable, default: []].append(
                PendingEntry(id: id, title: event.title ?? "", kind: event.kind?.rawValue ?? "", timeMilliseconds: time ?? 0))
        }
        scans.withLock { scans in
            if scans.count > 4096 { scans.removeAll() }
            scans[store.root] = (now, byProgram)
        }
        return byProgram
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
            // What awaits a decision has changed: so has the directory, for every scan kept.
            _ = utimensat(AT_FDCWD, store.root, nil, 0)
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

    /// `program`'s reports awaiting consent for its consent dialog (crashport_pending_list):
    /// the newest PendingList.capacity with their titles, kinds and times, and how many in all.
    /// From `awaiting`'s scan, kept until the reports directory changes: no event is read again.
    public static func pending(store: ReportStore, program: String, log: ((String) -> Void)? = nil) -> PendingList {
        let byProgram = (try? store.asOwner { awaitingByProgram(store: store, log: log) }) ?? [:]
        let entries = byProgram[program] ?? []
        return PendingList(entries: Array(entries.prefix(PendingList.capacity)), total: entries.count)
    }

    /// A program's decision for one of its reports (crashport_send_report,
    /// crashport_discard_report): kept only when `id` is one of `program`'s reports in `store`
    /// awaiting consent, so that a program never decides for another program's or another
    /// user's report; else ConsentError.notAwaiting. What it did, for the log.
    public static func apply(_ message: ConsentReportMessage, program: String, store: ReportStore) throws -> String {
        guard awaiting(store: store, program: program).contains(message.id) else {
            throw ConsentError.notAwaiting(id: message.id, program: program)
        }
        try decide(message.send ? .granted : .denied, ids: [message.id], store: store)
        return "report \(message.id) of \(program) \(message.send ? "allowed to be sent" : "never to be sent")"
    }
}

/// Why a program's decision for one report was refused.
public enum ConsentError: Error, CustomStringConvertible, Equatable {
    case notAwaiting(id: String, program: String)

    public var description: String {
        switch self {
        case .notAwaiting(let id, let program):
            return "\(id) is not a report of \(program) awaiting consent here; refused"
        }
    }
}
