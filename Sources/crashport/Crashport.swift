// crashport: the command line. Thin: parses arguments, calls Watcher, turns errors into exit
// statuses and messages on stderr. The root command and what every command shares (exit
// statuses, usage errors) are here; each subcommand is in its own file (Run.swift, Watch.swift,
// …), and the option groups several commands take in theirs (ReportsOption.swift, …).

import ArgumentParser
import BoundedBytes
import FoundationEssentials
import Glibc
import Reports
import Watcher

@main
struct Crashport: ParsableCommand {
    // Every command names itself: otherwise the argument parser derives each name with
    // String(describing:) of the type, a dynamic cast that scans every protocol conformance in
    // the binary, a fifth of crashport's start-up (and, cold, pages of it read from disk).
    static let configuration = CommandConfiguration(
        commandName: "crashport",
        abstract: "An out-of-process crash reporter for Linux.",
        discussion: """
            Exit status, the same for every command:
              0      success (list and stats with nothing to show included)
              1      not found or unreadable: show's report (no such id, a prefix of
                     several), symbolicate's FILE or --debug-dir; doctor found a problem;
                     watch could not serve; upload lost a report (failed for good)
              64     usage error: an unknown option, a missing or malformed argument
              125    run: crashport failed before the program started
              126    run: the program is not executable
              127    run: the program was not found
              other  run: the program's own exit status, or killed by its signal
            """,
        version: "crashport \(crashportVersion)",
        subcommands: [
            Run.self, Watch.self, List.self, Show.self, Stats.self, Symbolicate.self, Upload.self, Consent.self, Send.self,
            Discard.self, Doctor.self, Host.self, CoreHandler.self, TestCrash.self,
        ]
    )

    /// `crashport symbolicate --obj FILE [--no-demangle] [ADDRESS...]`, the addr2line-style batch,
    /// goes straight to its work: the argument parser's start (reflection over every command's
    /// properties, each a dynamic cast that scans the binary's protocol conformances) is most of
    /// what such a run costs before its first address. Any other command line, or anything more
    /// in this one (--help, --debug-dir, an unknown option), is the parser's.
    static func main() {
        if let request = Symbolicate.AddressRequest(Array(CommandLine.arguments.dropFirst())) {
            Symbolicate.symbolicateAddresses(
                in: request.object, debugDirectories: [], demangle: request.demangle, addresses: request.addresses)
            Glibc.exit(0)
        }
        main(nil)
    }
}

func fail(_ message: String, status: Int32) -> Never {
    StandardError.write("crashport: \(message)\n")
    exit(status)
}

/// crashport's version, as `crashport --version` prints it.
let crashportVersion = "0.13.0"

/// The exit statuses every command uses (docs/using.md "Exit status", and `crashport --help`).
enum ExitStatus {
    /// What was asked for was not found or could not be read (a report, a FILE, a --debug-dir),
    /// doctor found a problem, watch could not serve, upload lost a report.
    static let failure: Int32 = 1
    /// A bad option or argument: also ArgumentParser's own status for its errors (EX_USAGE).
    static let usage: Int32 = 64
    /// run: crashport failed before the program started.
    static let runFailure: Int32 = 125
}

/// A usage error found after parsing: message on stderr, exit 64 like ArgumentParser's own.
func usageError(_ message: String) -> Never { fail(message, status: ExitStatus.usage) }

/// `--format text|json` of show and symbolicate: one renderer prints both (Reports).
extension ReportFormat: ExpressibleByArgument {}

/// `--debuginfod` asks the servers in DEBUGINFOD_URLS: a usage error where there are none.
func requireDebuginfodServers(command: String) {
    if (ProcessInfo.processInfo.environment["DEBUGINFOD_URLS"] ?? "").isEmpty {
        usageError("\(command): --debuginfod needs DEBUGINFOD_URLS (the servers to ask, space-separated)")
    }
}
