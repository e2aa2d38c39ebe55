// --reports: where reports are, for every command that reads or writes them.

import ArgumentParser
import Store

/// Where reports are: every command that reads or writes them takes it, and means the same.
struct ReportsOption: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Reports directory (default: $CRASHPORT_REPORTS, $XDG_STATE_HOME/crashport/reports, ~/.local/state/crashport/reports).",
            valueName: "DIR"))
    var reports: String?

    var store: ReportStore { ReportStore(root: reports ?? ReportStore.defaultRoot()) }

    /// The directory and, where it is a root sidecar's (one directory per uid), each user's in
    /// it that the caller may read, as coredumpctl lists every core the caller may read.
    var stores: [ReportStore] { store.readableStores() }
}
