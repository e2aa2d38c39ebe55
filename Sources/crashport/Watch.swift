// crashport watch: the sidecar, serving every process that connects.

import ArgumentParser
import Watcher

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Serve every process that connects (CRASHPORT_SOCKET): the sidecar, for production.",
        discussion: """
            Defaults as root: --socket /run/crashport/crashport.sock, --reports /var/lib/crashport/reports (one 0700 \
            directory per uid, owned by it), --spool /var/spool/crashport (mode 1733). As a user: \
            $XDG_RUNTIME_DIR/crashport/crashport.sock, ~/.local/state/crashport/reports, \
            ~/.local/state/crashport/spool (and only that user's processes are served). CRASHPORT_SOCKET, \
            CRASHPORT_REPORTS and CRASHPORT_SPOOL override the defaults.

            A socket passed by systemd (LISTEN_FDS) is used instead of --socket; READY=1 goes to $NOTIFY_SOCKET. \
            SIGTERM/SIGINT finish the reports in flight and exit 0; SIGHUP reopens --log and rereads --config \
            (allow-uid, allow-group, max-reports, max-size, jobs, no-ptrace, capture-environment, trace-exit, \
            trace-exit-codes, hang-ms, hang-kill: one `key = value` per line).

            --trace-exit, --hang-ms and --hang-kill apply to every client; a client can ask for them itself with \
            CRASHPORT_TRACE_EXIT=1 (or codes), CRASHPORT_HANG_MS=MS and CRASHPORT_HANG_KILL=1 in its environment \
            (--no-ptrace refuses tracing).

            --host (root) makes it the machine's core handler too while it runs: it installs itself in \
            /proc/sys/kernel/core_pattern (the coredump socket on Linux 6.16+, else a pipe helper, `crashport \
            core-handler`), reports every crash no stub reported (`source: host`), and puts back exactly the pattern \
            it found when it stops. `crashport host status` says what is installed.
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

    @Flag(
        name: .long,
        help: "Also be the machine's core handler while running (root): every crash on the machine, stub or not, is reported.")
    var host = false

    @Option(
        name: .long,
        help: ArgumentHelp("With --host: how the kernel hands cores over (default: the best it has).", valueName: "socket|pipe"))
    var hostMode: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "With --host: where its sockets and records live (default $CRASHPORT_HOST_DIRECTORY, else /run/crashport).",
            valueName: "DIR"))
    var hostDirectory: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "With --host: whether each core is also handed on to the pipe handler it replaces (systemd-coredump, apport), or replaced (default).",
            valueName: "chain|replace"))
    var hostPrevious: String?

    @Flag(
        name: .long,
        help: "With --host: keep each core too, compressed (core.zst beside its report, for coredumpctl; under the quota).")
    var keepCore = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Where the node's filesystem is, for the container runtimes' and the kubelet's files that name a crashed process's container and pod (default $CRASHPORT_NODE_ROOT, else /; in a DaemonSet, where the node's root is mounted).",
            valueName: "DIR"))
    var nodeRoot: String?

    @OptionGroup var quotaOption: QuotaOption

    @OptionGroup var captureFlags: CaptureFlags

    @OptionGroup var deathFlags: DeathFlags

    func run() throws {
        EagerBinding.ensure(arguments: CommandLine.unsafeArgv)
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
        if captureFlags.noJournal { configuration.capture.journal = false }
        if captureFlags.debuginfodWanted(command: "watch") { configuration.capture.debuginfod = true }
        let deaths = deathFlags.validated(command: "watch", clientsNameTheirs: true)
        if deaths.traceExit { configuration.traceExit = true }
        if deaths.traceExitCodes { configuration.traceExitCodes = true }
        if let hang = deaths.hangMilliseconds { configuration.hangMilliseconds = hang }
        if deaths.hangKill { configuration.hangKill = true }
        configuration.host = hostConfiguration()
        if let nodeRoot {
            guard nodeRoot.hasPrefix("/") else { usageError("watch: --node-root must be an absolute path") }
            configuration.nodeRoot = nodeRoot
        }
        do {
            let status = try Sidecar(configuration: configuration).run()
            throw ExitCode(status)
        } catch let error as SidecarError {
            fail("watch: \(error)", status: ExitStatus.failure)
        } catch let error as HostError {
            fail("watch --host: \(error)", status: ExitStatus.failure)
        }
    }

    func hostConfiguration() -> HostConfiguration? {
        guard host else {
            if hostMode != nil || hostDirectory != nil || keepCore || hostPrevious != nil {
                usageError("watch: --host-mode, --host-directory, --host-previous and --keep-core go with --host")
            }
            return nil
        }
        var host = HostConfiguration(executable: CoreHandler.executablePath())
        host.keepCore = keepCore
        switch hostPrevious {
        case nil, "replace": break
        case "chain": host.handOn = true
        default: usageError("watch: --host-previous is chain or replace")
        }
        if let hostDirectory {
            guard hostDirectory.hasPrefix("/") else { usageError("watch: --host-directory must be an absolute path") }
            host.paths = HostPaths(directory: hostDirectory)
        }
        switch hostMode {
        case nil: break
        case "pipe": host.mode = .pipe
        case "socket":
            let best = HostMode.best()
            guard best != .pipe else {
                fail(
                    "watch --host-mode socket: this kernel (\(HostMode.kernelRelease())) has no coredump socket (Linux 6.16)",
                    status: ExitStatus.failure)
            }
            host.mode = best
        default: usageError("watch: --host-mode is socket or pipe")
        }
        return host
    }
}
