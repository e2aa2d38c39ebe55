// --reports: where reports are, for every command that reads or writes them; --host-directory:
// where the machine's host level is, for the commands that look at it.

import ArgumentParser
import Store
import Watcher

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

/// The host level's directory, for the commands that look at this machine's (host status and
/// restore, doctor).
struct HostDirectoryOption: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The host level's directory (default $CRASHPORT_HOST_DIRECTORY, else /run/crashport).", valueName: "DIR"))
    var hostDirectory: String?

    var paths: HostPaths { HostPaths(directory: hostDirectory ?? HostPaths.systemDirectory()) }
}
