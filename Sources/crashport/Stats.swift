// crashport stats: launches, crashes and crash-free sessions per program and release.

import ArgumentParser
import BoundedBytes
import Store

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Launches, crashes and crash-free sessions per program and release.")

    @OptionGroup var reportsOption: ReportsOption

    @Option(name: .long, help: ArgumentHelp("Only this program.", valueName: "PATH"))
    var program: String?

    func run() throws {
        let store = reportsOption.store
        let rows = reportsOption.stores.flatMap {
            RunStatistics.of(RunHistory(store: $0), program: program.map(RunHistory.realPath))
        }
        guard !rows.isEmpty else {
            // Like list: nothing on stdout, the directory named on stderr, exit 0.
            StandardError.write("crashport: no runs on record in \(store.root)\n")
            if let hint = store.unreadableUsersHint() { StandardError.write("crashport: \(hint)\n") }
            return
        }
        print("program  release  launches  crashes (during launch)  abnormal  with errors  crash-free  launch crashes in a row")
        for row in rows {
            let tenths = Int((row.crashFreePercent * 10).rounded())
            let crashFree = "\(tenths / 10).\(tenths % 10)%"
            print(
                [
                    row.executable, row.release ?? "-", "\(row.launches)", "\(row.crashes) (\(row.launchCrashes))",
                    "\(row.abnormal)",
                    "\(row.errored)", crashFree, "\(row.consecutiveLaunchCrashes)",
                ].joined(separator: "  "))
        }
    }
}
