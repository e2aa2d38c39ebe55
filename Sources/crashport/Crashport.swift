// crashport: the command line. Thin: parses arguments, calls Watcher, turns errors into exit
// statuses and messages on stderr.

import ArgumentParser
import Foundation
import ReportModel
import Reports
import Watcher

@main
struct Crashport: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "An out-of-process crash reporter for Linux.",
        subcommands: [Run.self, Watch.self, List.self, Show.self, Stats.self, Symbolicate.self, Doctor.self]
    )
}

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("crashport: \(message)\n".utf8))
    exit(status)
}

struct ReportsOption: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Reports directory (default: $CRASHPORT_REPORTS, $XDG_STATE_HOME/crashport/reports, ~/.local/state/crashport/reports).",
            valueName: "DIR"))
    var reports: String?

    @Option(name: .long, help: ArgumentHelp("Keep at most N reports, removing the oldest (default 200).", valueName: "N"))
    var maxReports: Int?

    @Option(
        name: .long,
        help: ArgumentHelp("Keep at most this many MiB of reports, removing the oldest (default 256).", valueName: "MIB"))
    var maxSize: UInt64?

    var store: ReportStore {
        var store = ReportStore(root: reports ?? ReportStore.defaultRoot())
        if let maxReports { store.maxReports = max(1, maxReports) }
        if let maxSize { store.maxBytes = maxSize << 20 }
        return store
    }
}

/// How much capture takes: shared by run and watch.
struct CaptureFlags: ParsableArguments {
    @Flag(name: .long, help: "Do not ptrace: report the crashing thread from the stub's record only.")
    var noPtrace = false

    @Flag(name: .long, help: "Also keep the process environment in the minidump (it may hold secrets).")
    var captureEnvironment = false
}

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run PROGRAM watched; end the way it ended (its exit code, or killed by the same signal).")

    @OptionGroup var reportsOption: ReportsOption

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

    @Argument(parsing: .captureForPassthrough, help: "PROGRAM [ARGS...]")
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
            "unknown option '\(first)' (usage: crashport run [OPTIONS] [--] PROGRAM [ARGS...]; a program whose name starts with '-' goes after '--')"
        )
    }

    func run() throws {
        var command = command
        if command.first == "--" { command.removeFirst() }
        guard let program = command.first else {
            fail("run: no PROGRAM given (usage: crashport run [--reports DIR] -- PROGRAM [ARGS...])", status: 125)
        }
        let store = reportsOption.store
        let others = store.foreignEntries()
        if !others.isEmpty {
            let shown = others.prefix(3).joined(separator: ", ") + (others.count > 3 ? ", …" : "")
            FileHandle.standardError.write(
                Data(
                    "crashport: \(store.root) also holds \(others.count) \(others.count == 1 ? "entry" : "entries") that are not crashport reports (\(shown)); crashport will share it, and only lists, counts and removes its own reports\n"
                        .utf8))
        }
        var launcher = Launcher(program: program, arguments: Array(command.dropFirst()), store: store)
        launcher.options.usePtrace = !captureFlags.noPtrace
        launcher.options.captureEnvironment = captureFlags.captureEnvironment
        if !forwardFirst.isEmpty {
            var names: [String] = []
            for text in forwardFirst {
                for part in text.split(separator: ",") {
                    guard let number = SignalNames.number(String(part)), [4, 5, 6, 7, 8, 11, 31].contains(number) else {
                        fail(
                            "run: --forward-first \(part): not a signal crashport handles (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS)",
                            status: 125)
                    }
                    names.append(SignalNames.name(number))
                }
            }
            if let inherited = ProcessInfo.processInfo.environment["CRASHPORT_FORWARD_FIRST"], !inherited.isEmpty {
                names.insert(inherited, at: 0)
            }
            launcher.extraEnvironment["CRASHPORT_FORWARD_FIRST"] = names.joined(separator: ",")
        }
        if let timeoutMs {
            guard timeoutMs > 0 else { fail("run: --timeout-ms must be positive", status: 125) }
            launcher.extraEnvironment["CRASHPORT_TIMEOUT_MS"] = String(timeoutMs)
        }
        do {
            let result = try launcher.run()
            Launcher.exit(like: result.termination)
        } catch let error as LaunchError {
            fail("\(error)", status: error.exitStatus)
        } catch {
            fail("\(error)", status: 125)
        }
    }
}

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve every process that connects (CRASHPORT_SOCKET): the sidecar, for production.",
        discussion: """
            Defaults as root: --socket /run/crashport/crashport.sock, --reports /var/lib/crashport/reports
            (one 0700 directory per uid, owned by it), --spool /var/spool/crashport (mode 1733).
            As a user: $XDG_RUNTIME_DIR/crashport/crashport.sock, ~/.local/state/crashport/reports,
            ~/.local/state/crashport/spool (and only that user's processes are served).
            CRASHPORT_SOCKET, CRASHPORT_REPORTS and CRASHPORT_SPOOL override the defaults.
            A socket passed by systemd (LISTEN_FDS) is used instead of --socket; READY=1 goes to
            $NOTIFY_SOCKET. SIGTERM/SIGINT finish the reports in flight and exit 0; SIGHUP reopens
            --log and rereads --config (allow-uid, allow-group, max-reports, max-size, jobs, no-ptrace,
            capture-environment: one `key = value` per line).
            """)

    @Option(name: .long, help: ArgumentHelp("The socket to listen on ('@name': abstract namespace).", valueName: "PATH"))
    var socket: String?

    @Option(name: .long, help: ArgumentHelp("Reports directory.", valueName: "DIR"))
    var reports: String?

    @Option(name: .long, help: ArgumentHelp("Where crashes no watcher answered wait to be reported.", valueName: "DIR"))
    var spool: String?

    @Option(name: .long, help: ArgumentHelp("Serve only these users (repeatable; name or uid).", valueName: "UID"))
    var allowUid: [String] = []

    @Option(name: .long, help: ArgumentHelp("Serve only processes in these groups (repeatable).", valueName: "GROUP"))
    var allowGroup: [String] = []

    @Option(name: .long, help: ArgumentHelp("Log to FILE instead of stderr (reopened on SIGHUP).", valueName: "FILE"))
    var log: String?

    @Option(name: .long, help: ArgumentHelp("Settings reread on SIGHUP.", valueName: "FILE"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("Threads writing reports (default 2).", valueName: "N"))
    var jobs: Int?

    @Option(name: .long, help: ArgumentHelp("Keep at most N reports per user (default 200).", valueName: "N"))
    var maxReports: Int?

    @Option(name: .long, help: ArgumentHelp("Keep at most this many MiB of reports per user (default 256).", valueName: "MIB"))
    var maxSize: UInt64?

    @OptionGroup var captureFlags: CaptureFlags

    func run() throws {
        var configuration = SidecarConfiguration.defaults()
        if let socket { configuration.socketPath = socket }
        if let reports { configuration.reportsRoot = reports }
        if let spool { configuration.spoolDirectory = spool }
        configuration.logPath = log
        if let config {
            configuration.configPath = config
            do {
                try configuration.apply(configFile: String(contentsOfFile: config, encoding: .utf8), file: config)
            } catch {
                fail("watch: \(error)", status: 1)
            }
        }
        for text in allowUid {
            guard let uid = SidecarConfiguration.userID(text) else { fail("watch: --allow-uid \(text): no such user", status: 1) }
            configuration.allowUIDs.insert(uid)
        }
        for text in allowGroup {
            guard let gid = SidecarConfiguration.groupID(text) else {
                fail("watch: --allow-group \(text): no such group", status: 1)
            }
            configuration.allowGroups.insert(gid)
        }
        if let jobs {
            guard (1...64).contains(jobs) else { fail("watch: --jobs must be 1...64", status: 1) }
            configuration.jobs = jobs
        }
        if let maxReports { configuration.maxReports = max(1, maxReports) }
        if let maxSize { configuration.maxBytes = maxSize << 20 }
        if captureFlags.noPtrace { configuration.capture.usePtrace = false }
        if captureFlags.captureEnvironment { configuration.capture.captureEnvironment = true }
        do {
            let status = try Sidecar(configuration: configuration).run()
            throw ExitCode(status)
        } catch let error as SidecarError {
            fail("watch: \(error)", status: 1)
        }
    }
}

/// A program's path as run history keys it: its real path (a program that does not exist any
/// more is taken as given).
func programPath(_ path: String) -> String {
    var resolved = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    return realpath(path, &resolved) != nil ? String(cString: resolved) : path
}

/// "crashed during launch (3 launch crashes in a row), report ID" and the like.
func describeLastRun(_ runs: ProgramRuns) -> String {
    var text = runs.lastCrashed ? (runs.lastCrashedDuringLaunch ? "crashed during launch" : "crashed") : "ended without a crash"
    if runs.consecutiveLaunchCrashes > 0 {
        text += " (\(runs.consecutiveLaunchCrashes) launch crash\(runs.consecutiveLaunchCrashes == 1 ? "" : "es") in a row)"
    }
    if let id = runs.lastReportID { text += ", report \(id)" }
    if runs.disabled { text += "; crash reporting is disabled for it (crashport_set_enabled)" }
    return text
}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "One line per report, newest first.")

    @OptionGroup var reportsOption: ReportsOption

    @Option(name: .long, help: ArgumentHelp("Only this program's reports, after how its last run ended.", valueName: "PATH"))
    var program: String?

    func run() throws {
        let store = reportsOption.store
        let only = program.map(programPath)
        if let only {
            let runs = RunHistory(store: store).programs().filter { $0.executable == only }
            if runs.isEmpty { print("no run of \(only) on record in \(store.root)") }
            for record in runs {
                print("last run of \(only)\(record.buildID.map { " (build-id \($0))" } ?? ""): \(describeLastRun(record))")
            }
        }
        for id in store.ids() {
            do {
                let event = try store.event(id: id)
                if let only, event.process?.executable.map(programPath) != only { continue }
                let program = event.process?.executable.map { ($0 as NSString).lastPathComponent } ?? "?"
                let signal = event.signal?.name ?? event.kind?.rawValue ?? "?"
                let top = event.crashedThreadRecord?.frames?.first.map(CrashLog.describe) ?? "no frames"
                print([id, event.timestamp ?? "?", program, signal, top].joined(separator: "  "))
            } catch {
                FileHandle.standardError.write(Data("crashport: \(error)\n".utf8))
            }
        }
    }
}

struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show one report.")

    enum Format: String, ExpressibleByArgument { case text, json }

    @OptionGroup var reportsOption: ReportsOption

    @Option(name: .long, help: "text (a crash log) or json (the event).")
    var format: Format = .text

    @Option(name: .long, help: ArgumentHelp("How PATH's last run ended, and its crash if it crashed.", valueName: "PATH"))
    var last: String?

    @Argument(help: "The report id (see crashport list).")
    var id: String?

    func validate() throws {
        if (id == nil) == (last == nil) { throw ValidationError("give a report id, or --last PATH") }
    }

    func run() throws {
        let store = reportsOption.store
        var id = self.id ?? ""
        if let last {
            let path = programPath(last)
            guard let record = RunHistory(store: store).programs().last(where: { $0.executable == path }) else {
                fail("no run of \(path) on record in \(store.root)", status: 1)
            }
            guard let report = record.lastReportID, format == .text || record.lastCrashed else {
                print("last run of \(path): \(describeLastRun(record))")
                return
            }
            if format == .text { print("last run of \(path): \(describeLastRun(record))\n") }
            id = report
        }
        do {
            let event = try store.event(id: id)
            switch format {
            case .text: print(CrashLog.full(event))
            case .json: print(String(decoding: try event.jsonData(), as: UTF8.self))
            }
        } catch {
            fail("\(error)", status: 1)
        }
    }
}

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Launches, crashes and crash-free sessions per program and release.")

    @OptionGroup var reportsOption: ReportsOption

    @Option(name: .long, help: ArgumentHelp("Only this program.", valueName: "PATH"))
    var program: String?

    func run() throws {
        let store = reportsOption.store
        let rows = RunStatistics.of(RunHistory(store: store), program: program.map(programPath))
        guard !rows.isEmpty else {
            print("no runs on record in \(store.root)")
            return
        }
        print("program  release  launches  crashes (during launch)  abnormal  with errors  crash-free  launch crashes in a row")
        for row in rows {
            let crashFree = String(format: "%.1f%%", row.crashFreePercent)
            print(
                [
                    row.executable, row.release ?? "-", "\(row.launches)", "\(row.crashes) (\(row.launchCrashes))",
                    "\(row.abnormal)",
                    "\(row.errored)", crashFree, "\(row.consecutiveLaunchCrashes)",
                ].joined(separator: "  "))
        }
    }
}

struct Symbolicate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Symbolicate a report offline, or addresses in one file (llvm-symbolizer's output format).",
        discussion: """
            crashport symbolicate FILE [--debug-dir DIR]... [--format text|json]
              FILE is an event.json or a minidump (crashport's, Breakpad's or Crashpad's); modules are
              matched by build-id in --debug-dir (as DIR/.build-id/xx/rest.debug or any ELF file
              directly in DIR), /usr/lib/debug, and the module's own path.
            crashport symbolicate --obj FILE [--no-demangle] [ADDRESS...]
              ADDRESS is 0x-prefixed hex or decimal; without arguments, one per line on stdin.
            """)

    enum Format: String, ExpressibleByArgument { case text, json }

    @Option(name: .long, help: ArgumentHelp("Where to look for binaries and debug files (repeatable).", valueName: "DIR"))
    var debugDir: [String] = []

    @Option(name: .long, help: "text (a crash log) or json (the event, frames filled in).")
    var format: Format = .text

    @Option(name: .long, help: ArgumentHelp("Symbolicate ADDRESSes in this ELF file instead of a report.", valueName: "FILE"))
    var obj: String?

    @Flag(name: .long, help: "With --obj: print names as they are in the file.")
    var noDemangle = false

    @Argument(help: "FILE, or with --obj the addresses.")
    var inputs: [String] = []

    func run() throws {
        if let obj {
            do {
                let symbolicator = try AddressSymbolicator(object: obj, debugDirectories: debugDir, demangle: !noDemangle)
                for refusal in symbolicator.refusals {
                    FileHandle.standardError.write(Data("crashport: symbolicate: \(refusal)\n".utf8))
                }
                symbolicator.run(addresses: inputs)
            } catch {
                fail("symbolicate: \(error)", status: 1)
            }
            return
        }
        guard inputs.count == 1, let file = inputs.first else {
            fail("symbolicate: give one FILE (an event.json or a minidump), or --obj FILE with addresses", status: 2)
        }
        do {
            let event = try OfflineSymbolicator(debugDirectories: debugDir).symbolicate(path: file)
            switch format {
            case .text: print(CrashLog.full(event))
            case .json: print(String(decoding: try event.jsonData(), as: UTF8.self))
            }
        } catch {
            fail("symbolicate: \(error)", status: 1)
        }
    }
}

struct Doctor: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Why capture would or would not work here.")

    @OptionGroup var reportsOption: ReportsOption

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The sidecar's socket to check (default: $CRASHPORT_SOCKET, else crashport watch's default).", valueName: "PATH"))
    var socket: String?

    func run() throws {
        let doctor = Watcher.Doctor()
        let findings =
            doctor.findings(store: reportsOption.store)
            + doctor.sidecarFindings(socket: socket ?? SidecarConfiguration.defaults().socketPath)
        for finding in findings {
            print("\(finding.level.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(finding.text)")
        }
        if findings.contains(where: { $0.level == .problem }) { throw ExitCode(1) }
    }
}
