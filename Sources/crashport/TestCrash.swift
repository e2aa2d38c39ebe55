// crashport test-crash: crashes a tiny program on purpose under `crashport run`, so that the
// whole path (the stub's handler, the watcher's capture, the report, the upload) is seen working
// once (App Center's generateTestCrash). The tiny program is crashport itself, run again with
// the stub preloaded: it calls crashport_test_crash(), found in the preloaded stub. Through a
// sidecar (--socket, CRASHPORT_SOCKET) the report is the sidecar's to write; a second start
// hears its id in the sidecar's HELLO reply (crashport_last_run), as a program's next start would.

import ArgumentParser
import BoundedBytes
import FoundationEssentials
import Glibc
import Processes
import ReportModel
import Reports
import Upload
import Watcher

struct TestCrash: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test-crash",
        abstract: "Crash a tiny program on purpose and report it, to see capture, report and upload work once.",
        discussion: """
            Runs crashport itself as the program, as crashport run would, and has it call crashport_test_crash(): \
            a real SIGSEGV, captured and reported into the reports directory like any crash, titled \
            "test crash: ..." and marked "test": true in event.json. With an upload destination configured \
            (CRASHPORT_SENTRY_DSN, CRASHPORT_UPLOAD_URL, OTEL_EXPORTER_OTLP_ENDPOINT or crashport.toml) it is uploaded \
            in the background as crashport run uploads (a Sentry tag crashport.test=true). Test crashes are kept \
            out of crash-free statistics and the launch-crash count; stats counts them apart. Prints the report's \
            id and directory; \
            exits 0 when the report was written, 1 when it was not.

            With --socket PATH, or with CRASHPORT_SOCKET set and no --reports, the crash goes to that sidecar \
            (crashport watch) instead, as a linked program's would: its report is in the sidecar's reports \
            directory and uploaded as the sidecar uploads; crashport then runs once more, as a program's next \
            start would, to learn the report's id from the sidecar (crashport_last_run).
            """)

    @OptionGroup var reportsOption: ReportsOption

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Crash through the sidecar listening at PATH (default: $CRASHPORT_SOCKET when --reports is not given).",
            valueName: "PATH"))
    var socket: String?

    /// The tiny program's side: crash now, through the preloaded stub.
    @Flag(name: .customLong("crash-in-this-process"), help: .private)
    var crashInThisProcess = false

    /// The tiny program's next start: print the last run's report id, as the stub heard it.
    @Flag(name: .customLong("print-last-run"), help: .private)
    var printLastRun = false

    func run() throws {
        if crashInThisProcess { Self.crashThroughTheStub() }
        if printLastRun { Self.printLastRunReport() }
        var path = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        guard length > 0 else {
            fail("test-crash: cannot find crashport's own executable (/proc/self/exe)", status: ExitStatus.failure)
        }
        let executable = String(decoding: path.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let inherited = ProcessInfo.processInfo.environment["CRASHPORT_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        if let sidecar = socket ?? (reportsOption.reports == nil ? inherited : nil) {
            throughSidecar(sidecar, executable: executable)
        }
        let store = reportsOption.store
        var launcher = Launcher(
            program: executable, arguments: ["test-crash", "--crash-in-this-process"], store: store)
        // crashport's report is the one to see: not the Swift runtime's own backtrace as well.
        launcher.extraEnvironment["SWIFT_BACKTRACE"] = "enable=no"
        let result: (termination: ProcessExit, reports: [WrittenReport])
        do {
            result = try launcher.run()
        } catch let error as LaunchError {
            fail("\(error)", status: ExitStatus.failure)
        }
        guard let report = result.reports.first(where: { $0.event.test == true }) else {
            fail(
                "test-crash: the test program ended (\(TerminationReport.describe(result.termination))) without a test crash report in \(store.root)",
                status: ExitStatus.failure)
        }
        print("test crash reported: \(report.id)")
        print("  \(report.event.title ?? "")")
        print("  report: \(report.path)")
        if UploadSpawner.isConfigured(),
            UploadSpawner.spawn(reports: store.root, log: { StandardError.write("crashport: \($0)\n") }) != nil
        {
            print("  uploading in the background (log: \(store.root)/\(Uploader.logName))")
        } else {
            print(
                "  no upload destination configured (docs/operating.md, \"Sending reports to a collector\"): it stays on this machine"
            )
        }
    }

    /// Crashes crashport, with the stub preloaded, through the sidecar at `socket`, then starts it
    /// once more to hear the report's id in the sidecar's answer to its HELLO.
    func throughSidecar(_ socket: String, executable: String) -> Never {
        let stub: String
        do {
            stub = try Launcher.locateStub()
        } catch {
            fail("\(error)", status: ExitStatus.failure)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["CRASHPORT_SOCKET"] = socket
        environment["LD_PRELOAD"] = stub
        environment["SWIFT_BACKTRACE"] = "enable=no"
        environment["CRASHPORT_FD"] = nil
        let crashed = Self.spawnAndWait(executable, ["test-crash", "--crash-in-this-process"], environment: environment)
        guard crashed == .signaled(SIGSEGV) else {
            let how = crashed.map(TerminationReport.describe) ?? "could not be started"
            fail("test-crash: the test program \(how), not SIGSEGV", status: ExitStatus.failure)
        }
        var output = [UInt8]()
        _ = Self.spawnAndWait(executable, ["test-crash", "--print-last-run"], environment: environment, output: &output)
        let id = String(decoding: output.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        guard !id.isEmpty else {
            fail(
                "test-crash: the sidecar at \(socket) named no report for the test crash (the lines above say where it went)",
                status: ExitStatus.failure)
        }
        print("test crash reported to the sidecar at \(socket): \(id)")
        print("  crashport show \(id), with the sidecar's --reports; it uploads as the sidecar is configured to")
        Glibc.exit(0)
    }

    /// Runs `executable` with `arguments` and `environment`, stdout into `output`; how it ended,
    /// nil when it could not be started.
    static func spawnAndWait(
        _ executable: String, _ arguments: [String], environment: [String: String], output: UnsafeMutablePointer<[UInt8]>? = nil
    ) -> ProcessExit? {
        var options = ChildProcess.Options()
        options.environment = environment.map { "\($0.key)=\($0.value)" }
        if output != nil { options.standardOutput = .pipe }
        guard let child = try? ChildProcess.spawn(executable, arguments: [executable] + arguments, options) else { return nil }
        if let output, let fd = child.output {
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(fd, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                output.pointee += buffer.prefix(count)
            }
        }
        return child.wait().exit
    }

    /// Prints crashport_last_run's report id (nothing when there is none), from the preloaded stub.
    static func printLastRunReport() -> Never {
        typealias LastRunFunction = @convention(c) (UnsafeMutableRawPointer) -> Int32
        // crashport_last_run_info: three ints, then char report_id[64].
        var info = [UInt8](repeating: 0, count: 3 * 4 + 64)
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "crashport_last_run"),
            info.withUnsafeMutableBytes({ unsafeBitCast(symbol, to: LastRunFunction.self)($0.baseAddress!) }) == 0
        {
            print(String(decoding: info[12...].prefix { $0 != 0 }, as: UTF8.self))
        }
        Glibc.exit(0)
    }

    /// Calls crashport_test_crash() of the stub `crashport run` preloaded into this process.
    static func crashThroughTheStub() -> Never {
        typealias TestCrashFunction = @convention(c) () -> Void
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "crashport_test_crash") else {
            fail("test-crash: libcrashport is not loaded in this process; run crashport test-crash", status: ExitStatus.failure)
        }
        unsafeBitCast(symbol, to: TestCrashFunction.self)()
        fail("test-crash: crashport_test_crash() returned", status: ExitStatus.failure)
    }
}
