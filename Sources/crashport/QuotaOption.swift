// --max-reports and --max-size: how many reports run and watch keep.

import ArgumentParser
import Store

/// How many reports to keep: only for the commands that write reports (run, watch).
struct QuotaOption: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp("Keep at most N reports (watch: per user), removing the oldest (default 200).", valueName: "N"))
    var maxReports: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Keep at most this many MiB of reports (watch: per user), removing the oldest (default 256).", valueName: "MIB"))
    var maxSize: UInt64?

    func applied(to store: ReportStore) -> ReportStore {
        var store = store
        if let maxReports { store.maxReports = max(1, maxReports) }
        if let maxSize { store.maxBytes = checkedMaxSize(maxSize) << 20 }
        return store
    }

    /// --max-size in range (a usage error otherwise: its bytes would wrap).
    func checkedMaxSize(_ mib: UInt64) -> UInt64 {
        guard ReportStore.maxSizeMiBRange.contains(mib) else {
            usageError("--max-size must be in \(ReportStore.maxSizeMiBRange) (MiB)")
        }
        return mib
    }
}
