// crashport run: runs a program watched and ends the way it ended.

import ArgumentParser
import BoundedBytes
import FoundationEssentials
import ReportModel
import Reports
import Upload
import Watcher

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run PROGRAM watched; end the way it ended (its exit code, or killed by the same signal).")

    @OptionGroup var reportsOption: ReportsOption

    @OptionGroup var quotaOption: QuotaOption

    @OptionGroup var captureFlags: CaptureFlags

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Let the program's own handler for SIG try first; report only if the fault comes back unhandled. Repeatable (SIGSEGV, segv, 11).",
            valueName: "SIG"))
    var forwardFirst: [String] = []

    @Option(
        name: .long, help: ArgumentHelp("How long a crashing process waits for the watcher (default 10000).", valueName: "MS"))
    var timeoutMs: UInt32?

    @OptionGroup var deathFlags: DeathFlags

    @Argument(
        parsing: .captureForPassthrough,
        help: ArgumentHelp("PROGRAM [ARGS...]: everything from the program on is passed to it.", valueName: "program"))
    var command: [String] = []

    /// `.captureForPassthrough` captures everything from the first input the parser does not
    /// recognise, `--help` and misspelt options included (swift-argument-parser 1.8 does not
    /// stop there for help). A dash-prefixed first word before the program is therefore
    /// crashport's: help, or a usage error (exit 64), never a program named `--bogus`. After the
    /// program (`run prog --help`) or after `--`, every word is the program's.
    func validate() throws {
        guard let first = command.first, first != "--", first.count > 1, first.hasPrefix("-") else { return }
        if first == "--help" || first == "-h" { throw CleanExit.helpRequest(self) }
        throw ValidationError(
            "unknown option '\(first)' for crashport run; to pass it to the program, put it after the program: crashport run [OPTIONS] -- PROGRAM \(first) (a program whose name starts with '-' goes after '--' too)"
        )
    }

    func run() throws {
        var command = command
        if command.first == "--" { command.removeFirst() }
        guard let program = command.first else {
            usageError("run: no PROGRAM given (usage: crashport run [OPTIONS] [--] PROGRAM [ARGS...])")
        }
        let store = quotaOption.applied(to: reportsOption.store)
        let others = store.foreignEntries()
        if !others.isEmpty {
            let shown = others.prefix(3).joined(separator: ", ") + (others.count > 3 ? ", …" : "")
            StandardError.write(
                "crashport: \(store.root) also holds \(others.count) \(others.count == 1 ? "entry" : "entries") that are not crashport reports (\(shown)); crashport will share it, and only lists, counts and removes its own reports\n"
            )
        }
        var launcher = Launcher(program: program, arguments: Array(command.dropFirst()), store: store)
        launcher.inAppRules = captureFlags.inAppRules
        launcher.options.usePtrace = !captureFlags.noPtrace
        launcher.options.captureEnvironment = captureFlags.captureEnvironment
        launcher.options.journal = !captureFlags.noJournal
        launcher.options.debuginfod = captureFlags.debuginfodWanted(command: "run")
        if !forwardFirst.isEmpty {
            var names: [String] = []
            for text in forwardFirst {
                for part in text.split(separator: ",") {
                    guard let number = SignalNames.number(String(part)), WireProtocol.defaultSignals.contains(number) else {
                        usageError(
                            "run: --forward-first \(part): not a signal crashport handles (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS)"
                        )
                    }
                    names.append(SignalNames.name(number))
                }
            }
            if let inherited = ProcessInfo.processInfo.environment["CRASHPORT_FORWARD_FIRST"], !inherited.isEmpty {
                names.insert(inherited, at: 0)
            }
            launcher.extraEnvironment["CRASHPORT_FORWARD_FIRST"] = names.joined(separator: ",")
        }
        let deaths = deathFlags.validated(command: "run")
        launcher.traceExit = deaths.traceExit
        launcher.traceFailedExits = deaths.traceExitCodes
        launcher.hangMilliseconds = deaths.hangMilliseconds
        launcher.hangKill = deaths.hangKill
        if let timeoutMs {
            guard timeoutMs > 0 else { usageError("run: --timeout-ms must be positive") }
            launcher.extraEnvironment["CRASHPORT_TIMEOUT_MS"] = String(timeoutMs)
        }
        do {
            let result = try launcher.run()
            // With a destination in the environment, the reports go now, in the background.
            if !result.reports.isEmpty, UploadSpawner.isConfigured(),
                UploadSpawner.spawn(reports: store.root, log: { StandardError.write("crashport: \($0)\n") })
                    != nil
            {
                StandardError.write("crashport: uploading in the background (log: \(store.root)/\(Uploader.logName))\n")
            }
            Launcher.exit(like: result.termination)
        } catch let error as LaunchError {
            fail("\(error)", status: error.exitStatus)
        } catch {
            fail("\(error)", status: ExitStatus.runFailure)
        }
    }
}
