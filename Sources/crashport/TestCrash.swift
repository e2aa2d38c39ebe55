// crashport test-crash: crashes a tiny program on purpose under `crashport run`, so that the
// whole path (the stub's handler, the watcher's capture, the report, the upload) is seen working
// once (App Center's generateTestCrash). The tiny program is crashport itself, run again with
// the stub preloaded: it calls crashport_test_crash(), found in the preloaded stub.

import ArgumentParser
import BoundedBytes
import FoundationEssentials
import Glibc
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
            (CRASHPORT_SENTRY_DSN, CRASHPORT_UPLOAD_URL or crashport.toml) it is uploaded in the background as \
            crashport run uploads (a Sentry tag crashport.test=true). Test crashes are kept out of crash-free \
            statistics and the launch-crash count; stats counts them apart. Prints the report's id and directory; \
            exits 0 when the report was written, 1 when it was not.
            """)

    @OptionGroup var reportsOption: ReportsOption

    /// The tiny program's side: crash now, through the preloaded stub.
    @Flag(name: .customLong("crash-in-this-process"), help: .private)
    var crashInThisProcess = false

    func run() throws {
        if crashInThisProcess { Self.crashThroughTheStub() }
        let store = reportsOption.store
        var path = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        guard length > 0 else {
            fail("test-crash: cannot find crashport's own executable (/proc/self/exe)", status: ExitStatus.failure)
        }
        let executable = String(decoding: path.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
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
