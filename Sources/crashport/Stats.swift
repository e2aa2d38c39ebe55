// crashport stats: launches, crashes and crash-free sessions per program and release.

import ArgumentParser
import BoundedBytes
import Reports
import Store

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Launches, crashes and crash-free sessions per program and release, and reports per bug.",
        discussion: """
            Test crashes (crashport test-crash, crashport_test_crash) are not launches: a line after the \
            first table counts them, and they change no crash-free rate. The second table counts the \
            reports by bug, as list --group does: the count, the fingerprint, the programs and the signature.
            """)

    @OptionGroup var reportsOption: ReportsOption

    @Option(name: .long, help: ArgumentHelp("Only this program.", valueName: "PATH"))
    var program: String?

    func run() throws {
        let store = reportsOption.store
        let only = program.map(RunHistory.realPath)
        let rows = reportsOption.stores.flatMap { RunStatistics.of(RunHistory(store: $0), program: only) }
        let groups = ReportGroup.of(reportsOption.stores, executable: only) { StandardError.write("crashport: \($0)\n") }
        guard !rows.isEmpty || !groups.isEmpty else {
            // Like list: nothing on stdout, the directory named on stderr, exit 0.
            StandardError.write("crashport: no runs on record in \(store.root)\n")
            if let hint = store.unreadableUsersHint() { StandardError.write("crashport: \(hint)\n") }
            return
        }
        if !rows.isEmpty { printRuns(rows) }
        if !groups.isEmpty {
            if !rows.isEmpty { print("") }
            print("reports  fingerprint  programs  signature")
            for group in groups {
                print(
                    [
                        group.countText, group.fingerprint, group.programs.sorted().joined(separator: ","),
                        group.signature.isEmpty ? "(no frames)" : CrashLog.escaped(group.signature),
                    ].joined(separator: "  "))
            }
        }
    }

    func printRuns(_ rows: [RunStatistics]) {
        let launched = rows.filter { $0.launches > 0 }
        if !launched.isEmpty {
            print(
                "program  release  launches  crashes (during launch)  abnormal  with errors  crash-free  launch crashes in a row")
        }
        for row in launched {
            let tenths = Int((row.crashFreePercent * 10).rounded())
            let crashFree = "\(tenths / 10).\(tenths % 10)%"
            print(
                [
                    row.executable, row.release ?? "-", "\(row.launches)", "\(row.crashes) (\(row.launchCrashes))",
                    "\(row.abnormal)",
                    "\(row.errored)", crashFree, "\(row.consecutiveLaunchCrashes)",
                ].joined(separator: "  "))
        }
        // Launches that ran their protect work first (crashport_launch), one line per program.
        for row in rows where row.protectedLaunches > 0 {
            print(
                "launch protection: \(row.protectedLaunches) protected launch\(row.protectedLaunches == 1 ? "" : "es") of \(row.executable)"
                    + (row.release.map { " (release \($0))" } ?? ""))
        }
        // Crashes the host level only counted (a crash loop past its rate limit): in the crashes above.
        for row in rows where row.countedOnly > 0 {
            print(
                "only counted (past the host level's rate limit; in the crashes above): \(row.countedOnly) of \(row.executable)"
                    + (row.release.map { " (release \($0))" } ?? ""))
        }
        // Test crashes (crashport_test_crash) are no launches: counted apart, never in crash-free.
        for row in rows where row.testCrashes > 0 {
            print(
                "test crashes (not launches, not in crash-free): \(row.testCrashes) of \(row.executable)"
                    + (row.release.map { " (release \($0))" } ?? ""))
        }
    }
}
