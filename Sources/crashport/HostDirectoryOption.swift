// --host-directory: where the machine's host level is, for the commands that look at it.

import ArgumentParser
import Watcher

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
