// Ledger: balances a ledger, telling crashport what it is doing, and crashes on a bad one.
import CrashPort

#if canImport(Glibc)
import Glibc
#endif

enum LedgerError: Error, CustomStringConvertible {
    case unbalanced(by: Int)

    var description: String {
        switch self {
        case .unbalanced(let amount): return "the ledger is unbalanced by \(amount)"
        }
    }
}

do {
    try CrashPort.start()
} catch {
    print("crash reporting is off: \(error)")
}
// Known from the first line: enter a safe mode after repeated launch crashes.
if let last = CrashPort.lastRun {
    print(
        "last run: crashed \(last.crashed), during launch \(last.crashedDuringLaunch), \(last.consecutiveLaunchCrashes) launch crash(es) in a row"
    )
}
// What became of the last run's report: "your last crash report was sent".
if let send = CrashPort.lastRun?.send {
    print("last report: \(send.kind)\(send.serverID.map { " (id \($0))" } ?? "")\(send.reason.map { ": \($0)" } ?? "")")
}
if CommandLine.arguments.dropFirst().first == "report-states" {
    for state in (try? CrashPort.reportStates()) ?? [] {
        print("report \(state.report.id): \(state.send.map { "\($0.kind)" } ?? "none")")
    }
}
// `Ledger test-crash`: crash on purpose once, to see a report (and an upload) arrive.
if CommandLine.arguments.dropFirst().first == "test-crash" { CrashPort.testCrash() }
CrashPort.annotate("user", "alice")
CrashPort[annotation: "ledger"] = "2026-Q4"
CrashPort.breadcrumb("opened the ledger", category: "io")
// Attachments from memory: a state dump, and the last 4 KiB of a log kept in memory.
try? CrashPort.attach("ledger-state.txt", text: "ledger 2026-Q4, 2 entries\n")
try? CrashPort.attachRing("ledger.log", capacity: 4096)
for line in 1...500 { try? CrashPort.append("entry \(line) checked\n", to: "ledger.log") }

let entries = [3, -1] + CommandLine.arguments.dropFirst().compactMap { Int($0) }
let total = entries.reduce(0, +)
if total != 0 {
    // The error's own key/values: in this report only, not in the annotations.
    CrashPort.report(LedgerError.unbalanced(by: total), properties: ["entries": "\(entries.count)", "total": "\(total)"])
    CrashPort.breadcrumb("reported the imbalance", category: "ledger")
}
CrashPort.launchCompleted()
print("balanced \(entries.count) entries; annotation ledger = \(CrashPort[annotation: "ledger"] ?? "-")")
fflush(nil)  // every stream: what was printed survives the crash
let closing = entries[entries.count + total]  // out of range: the crash crashport reports
print(closing)
