// crashport: the command line. Thin: parses arguments, calls Watcher, turns errors into exit
// statuses and messages on stderr.

import ArgumentParser
import BoundedBytes
import FoundationEssentials
import Glibc
import LiveProcess
import ReportModel
import Reports
import Store
import Symbolication
import Upload
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
                     several), symbolicate's FILE or --debug-dir; doctor found a
                     problem; watch could not serve
              64     usage error: an unknown option, a missing or malformed argument
              125    run: crashport failed before the program started
              126    run: the program is not executable
              127    run: the program was not found
              other  run: the program's own exit status, or killed by its signal
            """,
        version: "crashport \(crashportVersion)",
        subcommands: [
            Run.self, Watch.self, List.self, Show.self, Stats.self, Symbolicate.self, Upload.self, Consent.self, Send.self,
            Discard.self, Doctor.self,
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
    /// doctor found a problem, watch could not serve.
    static let failure: Int32 = 1
    /// A bad option or argument: also ArgumentParser's own status for its errors (EX_USAGE).
    static let usage: Int32 = 64
    /// run: crashport failed before the program started.
    static let runFailure: Int32 = 125
}

/// A usage error found after parsing: message on stderr, exit 64 like ArgumentParser's own.
func usageError(_ message: String) -> Never { fail(message, status: ExitStatus.usage) }

/// `--debuginfod` asks the servers in DEBUGINFOD_URLS: a usage error where there are none.
func requireDebuginfodServers(command: String) {
    if (ProcessInfo.processInfo.environment["DEBUGINFOD_URLS"] ?? "").isEmpty {
        usageError("\(command): --debuginfod needs DEBUGINFOD_URLS (the servers to ask, space-separated)")
    }
}

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
        guard SidecarConfiguration.maxSizeMiBRange.contains(mib) else {
            usageError("--max-size must be in \(SidecarConfiguration.maxSizeMiBRange) (MiB)")
        }
        return mib
    }
}

/// How much capture takes: shared by run and watch.
struct CaptureFlags: ParsableArguments {
    @Flag(name: .long, help: "Do not ptrace: report the crashing thread from the stub's record only.")
    var noPtrace = false

    @Flag(name: .long, help: "Also keep the process environment in the minidump (it may hold secrets).")
    var captureEnvironment = false

    @Flag(
        name: .long,
        help:
            "After the verdict, ask the debuginfod servers in $DEBUGINFOD_URLS for the debug files not found here.")
    var debuginfod = false

    /// --debuginfod, checked: it needs servers to ask.
    func debuginfodWanted(command: String) -> Bool {
        if debuginfod { requireDebuginfodServers(command: command) }
        return debuginfod
    }

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Frames of modules matching PATTERN (fnmatch, path or file name) are the program's own (repeatable).",
            valueName: "PATTERN"))
    var inApp: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp("Frames of modules matching PATTERN are not the program's own (repeatable).", valueName: "PATTERN"))
    var notInApp: [String] = []

    var inAppRules: InAppRules { InAppRules(inApp: inApp, notInApp: notInApp) }
}

/// The deaths and hangs watched beyond crashes: shared by run and watch (whose clients may
/// also ask for them: CRASHPORT_TRACE_EXIT, CRASHPORT_HANG_MS, CRASHPORT_HANG_KILL).
struct DeathFlags: ParsableArguments {
    @Flag(
        name: .long,
        help: "Keep the program traced for its whole life: a SIGKILL or an OOM kill is reported with every thread's stack.")
    var traceExit = false

    @Flag(name: .long, help: "With --trace-exit: an exit() with a non-zero status is reported too.")
    var traceExitCodes = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Report a hang when crashport_heartbeat() has not been called for MS (default: $CRASHPORT_HANG_MS; off).",
            valueName: "MS"))
    var hangMs: UInt64?

    @Flag(name: .long, help: "With --hang-ms: after the hang report, end the program with SIGABRT (a watchdog's kill).")
    var hangKill = false

    /// The flags checked (a usage error, exit 64, otherwise), with CRASHPORT_HANG_MS.
    /// `clientsNameTheirs`: --hang-kill may come alone (watch: for the clients that name their
    /// own hang time).
    func validated(
        command: String, clientsNameTheirs: Bool = false
    ) -> (
        traceExit: Bool, traceExitCodes: Bool, hangMilliseconds: UInt64?, hangKill: Bool
    ) {
        if traceExitCodes && !traceExit { usageError("\(command): --trace-exit-codes needs --trace-exit") }
        var hang = hangMs
        if hang == nil, let text = ProcessInfo.processInfo.environment["CRASHPORT_HANG_MS"], !text.isEmpty {
            guard let value = UInt64(text) else {
                usageError("\(command): CRASHPORT_HANG_MS=\(text) is not a number of milliseconds")
            }
            hang = value
        }
        let range = SidecarConfiguration.hangMillisecondsRange
        if let hang, hang < range.lowerBound { usageError("\(command): --hang-ms must be at least \(range.lowerBound)") }
        if let hang, hang > range.upperBound {
            usageError("\(command): --hang-ms must be at most \(range.upperBound) (a day)")
        }
        if hangKill && hang == nil && !clientsNameTheirs {
            usageError("\(command): --hang-kill needs --hang-ms (or CRASHPORT_HANG_MS)")
        }
        return (traceExit, traceExitCodes, hang, hangKill)
    }
}

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
        launcher.options.debuginfod = captureFlags.debuginfodWanted(command: "run")
        if !forwardFirst.isEmpty {
            var names: [String] = []
            for text in forwardFirst {
                for part in text.split(separator: ",") {
                    guard let number = SignalNames.number(String(part)), [4, 5, 6, 7, 8, 11, 31].contains(number) else {
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

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
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
            capture-environment, trace-exit, trace-exit-codes, hang-ms, hang-kill: one `key = value`
            per line).
            --trace-exit, --hang-ms and --hang-kill apply to every client; a client can ask for them
            itself with CRASHPORT_TRACE_EXIT=1 (or codes), CRASHPORT_HANG_MS=MS and
            CRASHPORT_HANG_KILL=1 in its environment (--no-ptrace refuses tracing).
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

    @OptionGroup var quotaOption: QuotaOption

    @OptionGroup var captureFlags: CaptureFlags

    @OptionGroup var deathFlags: DeathFlags

    func run() throws {
        var configuration = SidecarConfiguration.defaults()
        if let socket { configuration.socketPath = socket }
        if let reports { configuration.reportsRoot = reports }
        if let spool { configuration.spoolDirectory = spool }
        configuration.logPath = log
        if let config {
            configuration.configPath = config
            do {
                try configuration.apply(configFile: SidecarConfiguration.read(file: config), file: config)
            } catch {
                fail("watch: \(error)", status: ExitStatus.failure)
            }
        }
        for text in allowUid {
            guard let uid = SidecarConfiguration.userID(text) else {
                fail("watch: --allow-uid \(text): no such user", status: ExitStatus.failure)
            }
            configuration.allowUIDs.insert(uid)
        }
        for text in allowGroup {
            guard let gid = SidecarConfiguration.groupID(text) else {
                fail("watch: --allow-group \(text): no such group", status: ExitStatus.failure)
            }
            configuration.allowGroups.insert(gid)
        }
        if let jobs {
            guard (1...64).contains(jobs) else { usageError("watch: --jobs must be 1...64") }
            configuration.jobs = jobs
        }
        if let maxReports = quotaOption.maxReports { configuration.maxReports = max(1, maxReports) }
        if let maxSize = quotaOption.maxSize { configuration.maxBytes = quotaOption.checkedMaxSize(maxSize) << 20 }
        configuration.inAppRules = captureFlags.inAppRules
        if captureFlags.noPtrace { configuration.capture.usePtrace = false }
        if captureFlags.captureEnvironment { configuration.capture.captureEnvironment = true }
        if captureFlags.debuginfodWanted(command: "watch") { configuration.capture.debuginfod = true }
        let deaths = deathFlags.validated(command: "watch", clientsNameTheirs: true)
        if deaths.traceExit { configuration.traceExit = true }
        if deaths.traceExitCodes { configuration.traceExitCodes = true }
        if let hang = deaths.hangMilliseconds { configuration.hangMilliseconds = hang }
        if deaths.hangKill { configuration.hangKill = true }
        do {
            let status = try Sidecar(configuration: configuration).run()
            throw ExitCode(status)
        } catch let error as SidecarError {
            fail("watch: \(error)", status: ExitStatus.failure)
        }
    }
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
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "One line per report, newest first.",
        discussion: """
            With no reports, says so on stderr (naming the directory) and exits 0. --format json
            prints an array, newest first, one object per report: id, path, timestamp, program,
            executable, signal or kind, title, culprit (the program's own frame that crashed),
            top_frame (the crashing thread's first frame).
            """)

    enum Format: String, ExpressibleByArgument { case text, json }

    /// One report in `list --format json`.
    struct Entry: Encodable {
        var id: String
        var path: String
        var timestamp: String?
        var program: String?
        var executable: String?
        var signal: String?
        var kind: String?
        var title: String?
        var culprit: String?
        var topFrame: String?
        /// Per destination: pending, sent (with the server's id), failed (upload.json).
        var upload: [String: String]?
    }

    @OptionGroup var reportsOption: ReportsOption

    @Option(name: .long, help: ArgumentHelp("Only this program's reports, after how its last run ended.", valueName: "PATH"))
    var program: String?

    @Option(name: .long, help: "text (one line per report) or json (an array of reports).")
    var format: Format = .text

    func run() throws {
        let store = reportsOption.store
        let only = program.map(RunHistory.realPath)
        // In JSON, stdout holds the array alone; what is said about it goes to stderr.
        func say(_ line: String) {
            if format == .json { StandardError.write("crashport: \(line)\n") } else { print(line) }
        }
        if let only {
            let runs = RunHistory(store: store).programs().filter { $0.executable == only }
            if runs.isEmpty { say("no run of \(only) on record in \(store.root)") }
            for record in runs {
                say("last run of \(only)\(record.buildID.map { " (build-id \($0))" } ?? ""): \(describeLastRun(record))")
            }
        }
        var entries: [Entry] = []
        let consent = (try? ConsentSettings.read(root: store.root)) ?? ConsentSettings()
        for id in store.ids() {
            do {
                let event = try store.event(id: id)
                if let only, event.process?.executable.map(RunHistory.realPath) != only { continue }
                entries.append(
                    Entry(
                        id: id, path: store.path(of: id), timestamp: event.timestamp,
                        program: event.process?.executable.map { $0.pathBaseName },
                        executable: event.process?.executable, signal: event.signal?.name, kind: event.kind?.rawValue,
                        title: event.title,
                        culprit: event.culprit.map {
                            CrashLog.describe(FrameRecord(module: $0.module, function: $0.function, file: $0.file, line: $0.line))
                        },
                        topFrame: event.crashedThreadRecord?.frames?.first.map { CrashLog.describe($0) },
                        upload: Self.uploadStates(
                            directory: store.path(of: id),
                            asked: consent.choice(for: event.process?.executable) == .ask)))
            } catch {
                StandardError.write("crashport: \(error)\n")
            }
        }
        if entries.isEmpty {
            var info = stat()
            let missing = stat(store.root, &info) != 0
            let what = only.map { "no reports of \($0)" } ?? "no reports"
            StandardError.write("crashport: \(what) in \(store.root)\(missing ? " (the directory does not exist)" : "")\n")
        }
        switch format {
        case .text:
            for entry in entries {
                print(
                    [
                        entry.id, entry.timestamp ?? "?", entry.program ?? "?", entry.signal ?? entry.kind ?? "?",
                        CrashLog.escaped(entry.culprit ?? entry.topFrame ?? "no frames"),
                    ].joined(separator: "  ")
                        + (entry.upload.map { states in
                            "  ["
                                + states.sorted { $0.key < $1.key }.map {
                                    "\($0.key.split(separator: " ").first ?? ""): \($0.value)"
                                }
                                .joined(separator: ", ") + "]"
                        } ?? ""))
            }
        case .json:
            let encoder = JSONEncoder()
            encoder.keyEncodingStrategy = .convertToSnakeCase
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(entries.isEmpty ? "[]" : String(decoding: try encoder.encode(entries), as: UTF8.self))
        }
    }
}

/// Where reports go and how: shared by upload and send.
struct UploadOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("A Crashpad/Breakpad collector (default: $CRASHPORT_UPLOAD_URL).", valueName: "URL"))
    var url: String?

    @Option(name: .long, help: ArgumentHelp("A Sentry project (default: $CRASHPORT_SENTRY_DSN).", valueName: "DSN"))
    var sentryDsn: String?

    @Option(name: .long, help: ArgumentHelp("Trust this CA file (a private CA) instead of the system's.", valueName: "FILE"))
    var caFile: String?

    @Option(name: .long, help: ArgumentHelp("Per request (default 30000).", valueName: "MS"))
    var timeoutMs: Int?

    @Flag(
        name: .long,
        help: "Also send the program's arguments and the user names in home-directory paths (left out by default).")
    var sendPii = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "An executable given each request's JSON on stdin: it prints it back, edited or not, or exits non-zero to drop the report (default: $CRASHPORT_BEFORE_SEND).",
            valueName: "PROGRAM"))
    var beforeSend: String?

    @Flag(name: .long, help: "Send to Sentry's minidump endpoint (Crashpad's multipart) instead of envelopes.")
    var sentryMinidump = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "crashport.toml to read (default: $CRASHPORT_CONFIG, else ~/.config/crashport/crashport.toml; /etc/crashport/crashport.toml as root).",
            valueName: "FILE"))
    var config: String?

    /// The uploader these options describe (flags, then the environment, then crashport.toml),
    /// nil when no destination is given (a usage error for anything else wrong).
    func uploader(store: ReportStore, command: String) -> Uploader? {
        let environment = ProcessInfo.processInfo.environment
        func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let named = config ?? variable("CRASHPORT_CONFIG")
        let file: UploadConfiguration
        do {
            file = try UploadConfiguration.load(
                path: named ?? UploadConfiguration.defaultPath(environment: environment, uid: getuid()), explicit: named != nil)
        } catch {
            fail("\(command): \(error)", status: ExitStatus.failure)
        }
        func given(_ option: String?, _ name: String, _ configured: String? = nil) -> String? {
            option ?? variable(name) ?? configured
        }
        var destinations: [UploadDestination] = []
        do {
            let dsns = (sentryDsn ?? variable("CRASHPORT_SENTRY_DSN")).map { [$0] } ?? file.sentryDSNs
            let urls = (url ?? variable("CRASHPORT_UPLOAD_URL")).map { [$0] } ?? file.urls
            let minidumpEndpoint = sentryMinidump || file.sentryMinidump == true
            destinations += try dsns.map { dsn in
                let destination = try UploadDestination.sentry(checking: dsn)
                guard minidumpEndpoint, case .sentry(let parsed) = destination else { return destination }
                return .sentryMinidump(parsed)
            }
            destinations += try urls.map { try UploadDestination.crashpad(checking: $0) }
        } catch {
            usageError("\(command): \(file.file.map { "\($0): " } ?? "")\(error)")
        }
        guard !destinations.isEmpty else { return nil }
        let caFile = caFile ?? file.caFile
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            fail("\(command): --ca-file \(caFile) cannot be read", status: ExitStatus.failure)
        }
        var uploader = Uploader(store: store, destinations: destinations, clientVersion: crashportVersion)
        uploader.caFile = caFile
        uploader.environment = given(nil, "CRASHPORT_ENVIRONMENT", file.environment)
        uploader.sendPII = sendPii || file.sendPII == true
        if let milliseconds = file.timeoutMilliseconds { uploader.timeoutMilliseconds = milliseconds }
        if let hook = given(beforeSend, "CRASHPORT_BEFORE_SEND", file.beforeSend) {
            guard FileManager.default.isExecutableFile(atPath: hook) else {
                usageError("\(command): --before-send \(hook) is not an executable file")
            }
            uploader.beforeSend = hook
        }
        if let timeoutMs {
            guard timeoutMs > 0 else { usageError("\(command): --timeout-ms must be positive") }
            uploader.timeoutMilliseconds = timeoutMs
        }
        return uploader
    }

    static func summary(_ outcome: Uploader.Outcome) -> String {
        var line =
            "crashport: upload: \(outcome.sent) sent, \(outcome.retrying) to retry, \(outcome.failed) failed, \(outcome.notDue) waiting, \(outcome.done) done before"
        if outcome.awaitingConsent > 0 { line += ", \(outcome.awaitingConsent) awaiting consent" }
        if outcome.keptLocally > 0 { line += ", \(outcome.keptLocally) kept here by consent" }
        return line + "\n"
    }
}

struct Upload: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Send reports to Sentry and to Crashpad or Breakpad collectors.",
        discussion: """
            Destinations: --sentry-dsn (or CRASHPORT_SENTRY_DSN): an envelope with the event in
            Sentry's shape and the minidump as event.minidump; --url (or CRASHPORT_UPLOAD_URL): a
            Crashpad/Breakpad collector, sent Crashpad's multipart (the minidump as
            upload_file_minidump; annotations, prod, ver, guid as fields). Both at once if both are
            given; nothing is sent unless one is. Bodies are gzipped. Every report not sent yet goes,
            oldest first, and keeps its state per destination in upload.json beside it (pending,
            sent with the server's id, failed), so nothing is sent twice. A transport failure, a
            429 or a 5xx is tried again after 15 min, doubling up to 8 h, at most 6 times; a
            server's Retry-After or X-Sentry-Rate-Limits is kept even by --now; a 413 or another
            4xx is not retried; reports older than 7 days are not sent. What crashport consent
            says holds: never sends nothing, ask sends only what crashport send decided. Runs by
            hand or from a timer (crashport-upload.timer).
            """)

    @OptionGroup var reportsOption: ReportsOption

    @OptionGroup var uploadOptions: UploadOptions

    @Flag(name: .long, help: "Do not wait for crashport's backoff (a server's Retry-After still holds).")
    var now = false

    @Flag(name: .long, help: "Print what would be sent where; send nothing.")
    var dryRun = false

    func run() throws {
        guard var uploader = uploadOptions.uploader(store: reportsOption.store, command: "upload") else {
            usageError(
                "upload: no destination: give --sentry-dsn or --url, set CRASHPORT_SENTRY_DSN or CRASHPORT_UPLOAD_URL, or write them in crashport.toml's [upload] table (nothing is sent without one)"
            )
        }
        uploader.now = now
        uploader.dryRun = dryRun
        let outcome = uploader.run()
        if !dryRun { StandardError.write(UploadOptions.summary(outcome)) }
    }
}

struct Consent: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consent",
        abstract: "Whether reports may leave this machine: ask, always or never.",
        discussion: """
            always (the default once a destination is configured): crashport upload sends them.
            never: they are kept here and never sent. ask: each waits until crashport send or
            crashport discard decides (App Center's "send / don't send / always send"). With
            --program, for that executable only. Kept in the reports directory (per user). With no
            choice, prints the settings.
            """)

    @OptionGroup var reportsOption: ReportsOption

    @Argument(help: "ask, always or never.")
    var choice: ConsentSettings.Choice?

    @Option(name: .long, help: ArgumentHelp("For this executable only.", valueName: "PATH"))
    var program: String?

    func run() throws {
        let store = reportsOption.store
        var settings: ConsentSettings
        do {
            settings = try ConsentSettings.read(root: store.root)
        } catch {
            guard choice != nil else { fail("consent: \(error)", status: ExitStatus.failure) }
            settings = ConsentSettings()  // a choice made now replaces what cannot be read
        }
        guard let choice else {
            print("every program: \(settings.choice.rawValue)")
            for (path, choice) in settings.programs.sorted(by: { $0.key < $1.key }) { print("\(path): \(choice.rawValue)") }
            return
        }
        do {
            try ConsentDecisions.set(choice, program: program.map(RunHistory.realPath), store: store)
        } catch {
            fail("consent: \(error)", status: ExitStatus.failure)
        }
        print("\(program.map(RunHistory.realPath) ?? "every program"): \(choice.rawValue)")
    }
}

extension ConsentSettings.Choice: ExpressibleByArgument {}

/// `crashport send` and `crashport discard`: the user's decision on reports held under `ask`,
/// from the command line's ids or --all.
extension ConsentDecisions {
    static func decide(
        _ decision: ReportConsent, ids: [String], all: Bool, store: ReportStore, command: String
    ) -> [String] {
        guard all || !ids.isEmpty else { usageError("\(command): give report ids, or --all") }
        guard !all || ids.isEmpty else { usageError("\(command): give report ids or --all, not both") }
        var chosen: [String] = all ? ConsentDecisions.awaiting(store: store) : []
        for reference in ids {
            do {
                chosen.append(try store.resolve(reference))
            } catch {
                fail("\(command): \(error)", status: ExitStatus.failure)
            }
        }
        do {
            try ConsentDecisions.decide(decision, ids: chosen, store: store)
        } catch {
            fail("\(command): \(error)", status: ExitStatus.failure)
        }
        return chosen
    }
}

struct Send: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Allow reports held by crashport consent ask to be sent, and send them now.",
        discussion: """
            Records the decision beside each report; with a destination (as for crashport upload),
            sends them at once, else the next crashport upload does.
            """)

    @OptionGroup var reportsOption: ReportsOption

    @OptionGroup var uploadOptions: UploadOptions

    @Argument(help: "Report ids (or unique prefixes).")
    var ids: [String] = []

    @Flag(name: .long, help: "Every report awaiting consent.")
    var all = false

    func run() throws {
        let store = reportsOption.store
        let chosen = ConsentDecisions.decide(.granted, ids: ids, all: all, store: store, command: "send")
        print("\(chosen.count) report(s) allowed to be sent\(chosen.isEmpty ? "" : ": " + chosen.joined(separator: ", "))")
        guard !chosen.isEmpty, var uploader = uploadOptions.uploader(store: store, command: "send") else { return }
        uploader.now = true
        let outcome = uploader.run()
        StandardError.write(UploadOptions.summary(outcome))
    }
}

struct Discard: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discard",
        abstract: "Never send reports held by crashport consent ask (they stay here).")

    @OptionGroup var reportsOption: ReportsOption

    @Argument(help: "Report ids (or unique prefixes).")
    var ids: [String] = []

    @Flag(name: .long, help: "Every report awaiting consent.")
    var all = false

    func run() throws {
        let chosen = ConsentDecisions.decide(.denied, ids: ids, all: all, store: reportsOption.store, command: "discard")
        print("\(chosen.count) report(s) will never be sent\(chosen.isEmpty ? "" : ": " + chosen.joined(separator: ", "))")
    }
}

extension List {
    /// A report's upload state per destination ("sent bp-…", "pending (2 attempts)", "failed:
    /// HTTP 413…"), and under `consent` the user's decision, or that it awaits one (`asked`:
    /// crashport consent ask applies to it); nil when there is nothing to say.
    static func uploadStates(directory: String, asked: Bool) -> [String: String]? {
        let state = (try? UploadState.read(directory: directory)) ?? UploadState()
        var states: [String: String] = [:]
        switch state.consent {
        case .granted?: states["consent"] = "granted"
        case .denied?: states["consent"] = "discarded"
        case nil where asked: states["consent"] = "awaiting"
        case nil: break
        }
        return states.merging(uploadedStates(state), uniquingKeysWith: { first, _ in first }).nilIfEmpty
    }

    static func uploadedStates(_ state: UploadState) -> [String: String] {
        state.destinations.mapValues { entry in
            switch entry.status {
            case .sent: return "sent" + (entry.serverID.map { " \($0)" } ?? "")
            case .pending: return "pending (\(entry.attempts) attempt\(entry.attempts == 1 ? "" : "s"))"
            case .failed: return "failed: " + (entry.lastError ?? "")
            }
        }
    }
}

extension Dictionary {
    var nilIfEmpty: Self? { isEmpty ? nil : self }
}

struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show one report.",
        discussion: """
            REPORT is an id (see crashport list), a prefix of exactly one id, latest (or last) for the
            newest, or a report directory's path as the crash summary prints it (also with a
            trailing slash, or /event.json). A miss names the directory searched and the nearest
            ids; a prefix of several ids lists them (exit 1).
            """)

    enum Format: String, ExpressibleByArgument { case text, json }

    @OptionGroup var reportsOption: ReportsOption

    @Option(name: .long, help: "text (a crash log) or json (the event).")
    var format: Format = .text

    @Option(name: .long, help: ArgumentHelp("How PATH's last run ended, and its crash if it crashed.", valueName: "PATH"))
    var last: String?

    @Argument(help: ArgumentHelp("An id, a unique prefix of one, latest, or a report directory.", valueName: "report"))
    var id: String?

    func validate() throws {
        if (id == nil) == (last == nil) {
            throw ValidationError("give a report (an id, a prefix, latest, a path), or --last PATH")
        }
        if id == "" { throw ValidationError("an empty report id names no report") }
    }

    func run() throws {
        var store = reportsOption.store
        var id = self.id ?? ""
        if let last {
            let path = RunHistory.realPath(last)
            guard let record = RunHistory(store: store).programs().last(where: { $0.executable == path }) else {
                fail("no run of \(path) on record in \(store.root)", status: ExitStatus.failure)
            }
            guard let report = record.lastReportID, format == .text || record.lastCrashed else {
                print("last run of \(path): \(describeLastRun(record))")
                return
            }
            if format == .text { print("last run of \(path): \(describeLastRun(record))\n") }
            id = report
        } else {
            let (located, name) = store.locating(id)
            let isPath = located.root != store.root || name != id
            store = located
            do {
                id = try store.resolve(name, prefixes: !isPath)
            } catch {
                fail("\(error)", status: ExitStatus.failure)
            }
        }
        do {
            let event = try store.event(id: id)
            // A newer crashport's event, or a hand-edited one: what is known is shown, the rest named.
            if let data = FileManager.default.contents(atPath: store.path(of: id) + "/event.json"),
                let object = JSONObject.parseObject(data)
            {
                let skipped = Set(object.keys).subtracting(Event.knownFields).sorted()
                if !skipped.isEmpty {
                    StandardError.write(
                        "crashport: \(id): skipped what this crashport does not know: \(skipped.map(CrashLog.escaped).joined(separator: ", "))\(event.schema.map { $0 == Event.schemaName ? "" : " (schema \(CrashLog.escaped($0)))" } ?? "")\n"
                    )
                }
            }
            switch format {
            case .text:
                print(
                    CrashLog.full(
                        event,
                        colour: CrashLog.colourWanted(
                            isTerminal: isatty(1) != 0, environment: ProcessInfo.processInfo.environment)))
            case .json: print(String(decoding: try event.jsonData(), as: UTF8.self))
            }
        } catch {
            fail("\(error)", status: ExitStatus.failure)
        }
    }
}

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Launches, crashes and crash-free sessions per program and release.")

    @OptionGroup var reportsOption: ReportsOption

    @Option(name: .long, help: ArgumentHelp("Only this program.", valueName: "PATH"))
    var program: String?

    func run() throws {
        let store = reportsOption.store
        let rows = RunStatistics.of(RunHistory(store: store), program: program.map(RunHistory.realPath))
        guard !rows.isEmpty else {
            // Like list: nothing on stdout, the directory named on stderr, exit 0.
            StandardError.write("crashport: no runs on record in \(store.root)\n")
            return
        }
        print("program  release  launches  crashes (during launch)  abnormal  with errors  crash-free  launch crashes in a row")
        for row in rows {
            let tenths = Int((row.crashFreePercent * 10).rounded())
            let crashFree = "\(tenths / 10).\(tenths % 10)%"
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
        commandName: "symbolicate",
        abstract: "Symbolicate a report offline, or addresses in one file (llvm-symbolizer's output format).",
        discussion: """
            crashport symbolicate FILE [--debug-dir DIR]... [--format text|json] [--verbose]
              FILE is an event.json or a minidump (crashport's, Breakpad's or Crashpad's), or a report
              directory (its minidump.dmp, else its event.json); modules are
              matched by build-id in --debug-dir (as DIR/.build-id/xx/rest.debug or any ELF file
              directly in DIR), /usr/lib/debug, and the module's own path.
            crashport symbolicate --obj FILE [--no-demangle] [ADDRESS...]
              ADDRESS is 0x-prefixed hex or decimal; without arguments, one per line on stdin.
            A --debug-dir that is not a directory, or a FILE that is missing, exits 1.
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

    @Flag(name: .long, help: "List, per module, the build-id looked for, where, and what was used (on stderr).")
    var verbose = false

    @Flag(
        name: .long,
        help:
            "Ask the debuginfod servers in $DEBUGINFOD_URLS for the debug files not found here (fetched into debuginfod's cache)."
    )
    var debuginfod = false

    @Argument(help: "FILE, or with --obj the addresses.")
    var inputs: [String] = []

    func run() throws {
        for directory in debugDir {
            var info = stat()
            guard stat(directory, &info) == 0 else {
                fail("symbolicate: --debug-dir \(directory): \(String(cString: strerror(errno)))", status: ExitStatus.failure)
            }
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                fail("symbolicate: --debug-dir \(directory): not a directory", status: ExitStatus.failure)
            }
        }
        if let obj {
            Self.symbolicateAddresses(in: obj, debugDirectories: debugDir, demangle: !noDemangle, addresses: inputs)
            return
        }
        guard inputs.count == 1, var file = inputs.first else {
            usageError(
                "symbolicate: give one FILE (an event.json, a minidump or a report directory), or --obj FILE with addresses")
        }
        var info = stat()
        if stat(file, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR {
            // A report directory: the minidump has every thread to unwind again; else the event.
            guard let inside = ["minidump.dmp", "event.json"].map({ file + "/" + $0 }).first(where: { access($0, F_OK) == 0 })
            else {
                fail("symbolicate: \(file) is a directory without a minidump.dmp or an event.json", status: ExitStatus.failure)
            }
            file = inside
        }
        do {
            var symbolicator = OfflineSymbolicator(debugDirectories: debugDir)
            symbolicator.locator.useDebuginfod = debuginfod
            if debuginfod { requireDebuginfodServers(command: "symbolicate") }
            let event = try symbolicator.symbolicate(path: file)
            if verbose {
                for line in symbolicator.searchLog(for: event) {
                    StandardError.write("crashport: symbolicate: \(CrashLog.escaped(line))\n")
                }
            }
            switch format {
            case .text:
                print(
                    CrashLog.full(
                        event,
                        colour: CrashLog.colourWanted(
                            isTerminal: isatty(1) != 0, environment: ProcessInfo.processInfo.environment)))
            case .json: print(String(decoding: try event.jsonData(), as: UTF8.self))
            }
        } catch {
            fail("symbolicate: \(error)", status: ExitStatus.failure)
        }
    }
}

extension Symbolicate {
    /// `--obj FILE`: ADDRESSes (stdin's lines when there are none) in llvm-symbolizer's format.
    static func symbolicateAddresses(in object: String, debugDirectories: [String], demangle: Bool, addresses: [String]) {
        do {
            let symbolicator = try AddressSymbolicator(
                object: object, debugDirectories: debugDirectories, demangle: demangle,
                batch: addresses.isEmpty || addresses.count > 64)
            for refusal in symbolicator.refusals {
                StandardError.write("crashport: symbolicate: \(refusal)\n")
            }
            symbolicator.run(addresses: addresses)
        } catch {
            fail("symbolicate: \(error)", status: ExitStatus.failure)
        }
    }

    /// The plainest `symbolicate --obj` command lines (Crashport.main): `symbolicate`, then
    /// `--obj FILE` or `--obj=FILE`, `--no-demangle` at most once, and addresses that do not
    /// start with '-'; nil for anything else.
    struct AddressRequest {
        var object: String
        var demangle = true
        var addresses: [String] = []

        init?(_ arguments: [String]) {
            guard arguments.first == "symbolicate" else { return nil }
            var object: String?
            var rest = arguments.dropFirst()
            while let argument = rest.popFirst() {
                if argument == "--obj", object == nil, let value = rest.popFirst(), !value.hasPrefix("-") {
                    object = value
                } else if argument.hasPrefix("--obj="), object == nil, argument.count > 6 {
                    object = String(argument.dropFirst(6))
                } else if argument == "--no-demangle", demangle {
                    demangle = false
                } else if !argument.hasPrefix("-"), !argument.isEmpty {
                    addresses.append(argument)
                } else {
                    return nil
                }
            }
            guard let object else { return nil }
            self.object = object
        }
    }
}

struct Doctor: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor", abstract: "Why capture would or would not work here.")

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
            let level = finding.level.rawValue
            print(level + String(repeating: " ", count: max(0, 8 - level.count)) + " " + finding.text)
        }
        if findings.contains(where: { $0.level == .problem }) { throw ExitCode(ExitStatus.failure) }
    }
}
