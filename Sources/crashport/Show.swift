// crashport show: one report, as a crash log or its event.

import ArgumentParser
import BoundedBytes
import FoundationEssentials
import Glibc
import ReportModel
import Reports
import Store

struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show one report.",
        discussion: """
            REPORT is an id (see crashport list), a prefix of exactly one id, latest (or last) for the newest, or a \
            report directory's path as the crash summary prints it (also with a trailing slash, or /event.json). A \
            miss names the directory searched and the nearest ids; a prefix of several ids lists them (exit 1). An \
            id is also looked for in the per-user directories of a root sidecar's reports directory that the caller \
            may read.
            """)

    @OptionGroup var reportsOption: ReportsOption

    @Option(name: .long, help: "text (a crash log) or json (the event).")
    var format: ReportFormat = .text

    @Option(name: .long, help: ArgumentHelp("How PATH's last run ended, and its crash if it crashed.", valueName: "PATH"))
    var last: String?

    @Argument(help: ArgumentHelp("An id, a unique prefix of one, latest, or a report directory.", valueName: "report"))
    var id: String?

    func validate() throws {
        if (id == nil) == (last == nil) {
            throw ValidationError("give a report (an id, a prefix, latest, a path), or --last PATH")
        }
        if id == "" { throw ValidationError("an empty report id names no report") }
    }

    func run() throws {
        var store = reportsOption.store
        var id = self.id ?? ""
        if let last {
            let path = RunHistory.realPath(last)
            let found = reportsOption.stores.lazy.compactMap { store in
                RunHistory(store: store).programs().last(where: { $0.executable == path }).map { (store, $0) }
            }.first
            guard let (owner, record) = found else {
                fail("no run of \(path) on record in \(store.root)", status: ExitStatus.failure)
            }
            store = owner
            guard let report = record.lastReportID, format == .text || record.lastCrashed else {
                print("last run of \(path): \(describeLastRun(record))")
                return
            }
            if format == .text { print("last run of \(path): \(describeLastRun(record))\n") }
            id = report
        } else {
            let (located, name) = store.locating(id)
            let isPath = located.root != store.root || name != id
            store = located
            do {
                // An id is looked for in the users' directories of a root sidecar's too.
                (store, id) = isPath ? (store, try store.resolve(name, prefixes: false)) : try store.resolveAmongUsers(name)
            } catch {
                let hint = isPath ? nil : store.unreadableUsersHint()
                fail("\(error)\(hint.map { "; \($0)" } ?? "")", status: ExitStatus.failure)
            }
        }
        do {
            let event = try store.event(id: id)
            // A newer crashport's event, or a hand-edited one: what is known is shown, the rest named.
            if let data = FileManager.default.contents(atPath: store.path(of: id) + "/event.json"),
                let object = JSONObject.parseObject(data)
            {
                let skipped = Set(object.keys).subtracting(Event.knownFields).sorted()
                if !skipped.isEmpty {
                    StandardError.write(
                        "crashport: \(id): skipped what this crashport does not know: \(skipped.map(CrashLog.escaped).joined(separator: ", "))\(event.schema.map { $0 == Event.schemaName ? "" : " (schema \(CrashLog.escaped($0)))" } ?? "")\n"
                    )
                }
            }
            print(try format.render(event, isTerminal: isatty(1) != 0, environment: ProcessInfo.processInfo.environment))
        } catch {
            fail("\(error)", status: ExitStatus.failure)
        }
    }
}
