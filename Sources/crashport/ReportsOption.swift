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
}
