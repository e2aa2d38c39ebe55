// crashport host status: whether the host level (crashport watch --host) is the machine's core
// handler, in which mode, since when, and what it replaced.

import ArgumentParser
import Watcher

struct Host: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "host", abstract: "The host level: the machine's core handler.", subcommands: [Status.self])

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Which core handler mode is installed, since when, and what it replaced (exit 1 when not installed).")

        @Option(name: .long, help: ArgumentHelp("The host level's directory (default /run/crashport).", valueName: "DIR"))
        var hostDirectory: String?

        func run() throws {
            let pattern = HostPattern(paths: HostPaths(directory: hostDirectory ?? "/run/crashport"))
            let status = pattern.status()
            print(status.text)
            if !status.installed { throw ExitCode(ExitStatus.failure) }
        }
    }
}
