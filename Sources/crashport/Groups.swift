// The reports by bug: one group per fingerprint (Reports/Signature.swift), for `list --group`
// and `stats`. A report written before crashport signed reports is signed as it is read (its
// frames are marked again with the default in-app rules).

import FoundationEssentials
import ReportModel
import Reports
import Store

struct ReportGroup: Encodable {
    var fingerprint: String
    var signature: String
    var count = 0
    /// Crashes only counted (past the host level's rate limit) that repeat one of its reports.
    var counted = 0
    var firstSeen: String?
    var lastSeen: String?
    var programs: [String] = []
    /// The newest report's title and id.
    var title: String?
    var latest: String?
    var reports: [String] = []

    /// The groups of the reports in `stores` (of `executable` only, when given), the most
    /// reported first, then the most recent.
    static func of(_ stores: [ReportStore], executable: String? = nil, warn: (String) -> Void) -> [ReportGroup] {
        var groups: [String: ReportGroup] = [:]
        for store in stores {
            add(store, executable: executable, to: &groups, warn: warn)
        }
        return groups.values.sorted {
            ($0.count, $0.lastSeen ?? "", $0.fingerprint) > ($1.count, $1.lastSeen ?? "", $1.fingerprint)
        }
    }

    static func add(_ store: ReportStore, executable: String?, to groups: inout [String: ReportGroup], warn: (String) -> Void) {
        for id in store.ids() {
            guard var event = try? store.event(id: id) else {
                warn("\(id): not read (crashport show \(id) says why)")
                continue
            }
            if let executable, event.process?.executable.map(RunHistory.realPath) != executable { continue }
            if event.fingerprint == nil { Culprit.mark(&event) }
            guard let fingerprint = event.fingerprint else { continue }
            var group = groups[fingerprint] ?? ReportGroup(fingerprint: fingerprint, signature: event.signature ?? "")
            group.count += 1
            group.reports.append(id)
            if let time = event.timestamp {
                if group.firstSeen.map({ time < $0 }) ?? true { group.firstSeen = time }
                if group.lastSeen.map({ time >= $0 }) ?? true {
                    group.lastSeen = time
                    group.title = event.title
                    group.latest = id
                }
            }
            if let program = event.process?.executable?.pathBaseName, !group.programs.contains(program) {
                group.programs.append(program)
            }
            groups[fingerprint] = group
        }
        // The crashes the host level only counted, with the group of the report they repeat.
        var groupOf: [String: String] = [:]
        for (fingerprint, group) in groups {
            for id in group.reports { groupOf[id] = fingerprint }
        }
        for session in RunHistory(store: store).sessions() {
            guard let id = session.countedWith, let fingerprint = groupOf[id] else { continue }
            groups[fingerprint]?.counted += 1
        }
    }

    /// "12" or, with crashes only counted, "12 (+25 counted)".
    var countText: String { counted > 0 ? "\(count) (+\(counted) counted)" : "\(count)" }

    /// "3  8e1239788f24c726  bugs  SIGSEGV: segmentation fault at 0x0 in parse_records (bugs.c:28)
    /// [strlen | parse_records]  first 2026-11-26T19:28:21.957Z  last …"
    var line: String {
        [
            countText, fingerprint, programs.sorted().joined(separator: ","),
            CrashLog.escaped(title ?? "?") + (signature.isEmpty ? "" : "  [\(CrashLog.escaped(signature))]"),
            "first \(firstSeen ?? "?")", "last \(lastSeen ?? "?")",
        ].joined(separator: "  ")
    }
}
