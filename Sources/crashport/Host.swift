// crashport host status: whether the host level (crashport watch --host) is the machine's core
// handler, in which mode, since when, and what it replaced; crashport host restore: put back
// what a sidecar that no longer runs left in core_pattern (the package's removal runs it).

import ArgumentParser
import Watcher

struct Host: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "host", abstract: "The host level: the machine's core handler.", subcommands: [Status.self, Restore.self])

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Which core handler mode is installed, since when, and what it replaced (exit 1 when not installed).")

        @OptionGroup var host: HostDirectoryOption

        func run() throws {
            let pattern = HostPattern(paths: host.paths)
            let status = pattern.status()
            print(status.text)
            if !status.installed { throw ExitCode(ExitStatus.failure) }
        }
    }

    struct Restore: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "restore",
            abstract: "Put back the core_pattern a sidecar that no longer runs left in place (as root).",
            discussion: """
                A sidecar puts back the pattern it replaced when it stops; one that was killed leaves its own \
                in place, which this puts back from its record (a pattern of crashport's with no record \
                becomes the kernel's default, core). A pattern another tool set is left as it is, and one a \
                running sidecar holds is refused (exit 1: stop the sidecar instead). Removing the Debian \
                package runs it.
                """)

        @OptionGroup var host: HostDirectoryOption

        func run() throws {
            let result = HostPattern(paths: host.paths).restoreLeftBehind()
            print(result.text)
            if !result.done { throw ExitCode(ExitStatus.failure) }
        }
    }
}
