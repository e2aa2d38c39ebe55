// A Swift package that depends on crashport, as a new user writes one: built with plain
// `swift build` (no -Xlinker, no library path), run under the launcher and the sidecar, and
// crashed for real. And the signal set: CRASHPORT_SIGNALS and the Swift options.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class SwiftPackageTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("swift-package")
    static let lock = NSLock()
    nonisolated(unsafe) static var built: [String: String] = [:]

    /// The package's program: installs with the options its arguments name, annotates, leaves
    /// a breadcrumb and traps (index out of range: SIGILL).
    static let main = """
        import CrashPort
        #if canImport(Glibc)
        import Glibc
        #endif

        func say(_ line: String) {
            print(line)
            fflush(nil)
        }

        let arguments = Array(CommandLine.arguments.dropFirst())
        var options = CrashPort.Options()
        if arguments.contains("no-traps") {
            options.signals = CrashPort.Signal.defaults.subtracting([.illegalInstruction])
        }
        if arguments.contains("kill") { options.signals = [CrashPort.Signal(SIGKILL)] }
        do {
            try CrashPort.start(options)
            say("started")
        } catch {
            say("start failed: \\(error)")
        }
        CrashPort.annotate("user", "alice")
        CrashPort.breadcrumb("opened the ledger", category: "ledger")
        let entries = [1, 2, 3]
        print(entries[entries.count + arguments.count])

        """

    /// The package, written fresh in a temporary directory and built with `swift build` alone
    /// (the scratch path only says where): the program's path. Once per configuration.
    func program(configuration: String = "debug") throws -> String {
        Self.lock.lock()
        defer { Self.lock.unlock() }
        if let path = Self.built[configuration] { return path }
        let package = Self.directory + "/Ledger-" + configuration
        try FileManager.default.createDirectory(atPath: package + "/Sources/Ledger", withIntermediateDirectories: true)
        let manifest = """
            // swift-tools-version: 6.0
            import PackageDescription

            let package = Package(
                name: "Ledger",
                dependencies: [.package(name: "crashport", path: "\(TestSupport.repositoryRoot)")],
                targets: [
                    .executableTarget(name: "Ledger", dependencies: [.product(name: "CrashPort", package: "crashport")])
                ]
            )

            """
        try manifest.write(toFile: package + "/Package.swift", atomically: true, encoding: .utf8)
        try Self.main.write(toFile: package + "/Sources/Ledger/main.swift", atomically: true, encoding: .utf8)
        let built = try TestSupport.run(
            [
                "swift", "build", "--package-path", package, "--scratch-path", package + "/.build", "--configuration",
                configuration,
            ], timeout: 900)
        guard built.status == .exited(0) else { throw TestFailure("swift build: \(built.stderr)\(built.stdout)") }
        // Only the stub, the wire header's checks and the CrashPort module are compiled, none of
        // the watcher's layers (SwiftPM makes a directory for every target, but no object).
        let compiled = try FileManager.default.subpathsOfDirectory(atPath: package + "/.build/" + configuration + "/.")
            .filter { $0.hasSuffix(".o") && !$0.hasPrefix("Modules/") }
            .map { String($0.prefix { $0 != "/" }) }
        XCTAssertEqual(Set(compiled), ["CCrashPort.build", "CCrashPortProtocol.build", "CrashPort.build", "Ledger.build"])
        let path = package + "/.build/" + configuration + "/Ledger"
        Self.built[configuration] = path
        return path
    }

    /// The objects SwiftPM compiled for the stub (CCrashPort) in that configuration.
    func stubObjects(configuration: String) throws -> String {
        (try program(configuration: configuration) as NSString).deletingLastPathComponent + "/CCrashPort.build"
    }

    let environment = ["SWIFT_BACKTRACE": "enable=no"]

    /// Built with `swift build` alone, crashed under `crashport run`: one report, the stub's
    /// (a crash record, with the program's annotations and breadcrumbs), though the launcher
    /// preloads its own libcrashport.so too (which stands down before the program's copy).
    func testFreshPackageBuildsWithSwiftBuildAloneAndItsCrashIsReported() throws {
        let program = try program()
        let run = try TestSupport.crashportRun([program], environment: environment)
        XCTAssertEqual(run.result.status, .signaled(SIGILL), run.result.stderr)
        XCTAssertTrue(run.result.stdout.hasPrefix("started"), run.result.stdout)
        XCTAssertEqual(run.reportIDs.count, 1, "one stub installed, one report: \(run.result.stderr)")
        let event = try run.event()
        XCTAssertEqual(event.kind, .crash)
        XCTAssertEqual(event.signal?.name, "SIGILL")
        XCTAssertEqual(event.annotations, ["user": "alice"])
        XCTAssertEqual(event.breadcrumbs?.map(\.message), ["opened the ledger"])
        XCTAssertTrue(event.reason?.hasSuffix("Fatal error: Index out of range") == true, event.reason ?? "no reason")
    }

    /// Linked, not preloaded: under a sidecar the program needs only CRASHPORT_SOCKET.
    func testTheLinkedStubReportsToASidecarWithoutPreload() throws {
        let program = try program()
        let work = Self.directory + "/sidecar-" + UUID().uuidString.prefix(6)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = nil
        environment["CRASHPORT_SOCKET"] = sidecar.socket
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let result = try TestSupport.run([program], environment: environment)
        XCTAssertEqual(result.status, .signaled(SIGILL), result.stderr)
        let events = try sidecar.waitForReports(1)
        XCTAssertEqual(events[0].kind, .crash)
        XCTAssertEqual(events[0].annotations, ["user": "alice"])
    }

    /// The crash path SwiftPM compiles (no flags of tools/build-stub) passes the same
    /// allowlist, in a debug and in a release build (where clang would otherwise have called
    /// libc's strlen).
    func testTheCrashPathSwiftPMBuildsPassesTheAllowlist() throws {
        for configuration in ["debug", "release"] {
            let objects = try stubObjects(configuration: configuration)
            let crashPath = objects + "/crash-path.o"
            let linked = try TestSupport.run(
                ["ld", "-r", "-o", crashPath] + ["entry", "forward", "report"].map { objects + "/" + $0 + ".c.o" })
            XCTAssertEqual(linked.status, .exited(0), linked.stderr)
            let checked = try TestSupport.run([TestSupport.repositoryRoot + "/tools/check-stub-safety", crashPath])
            XCTAssertEqual(checked.status, .exited(0), "\(configuration): \(checked.stderr)")
            let threads = try TestSupport.run(
                [TestSupport.repositoryRoot + "/tools/check-stub-safety", objects + "/threads.c.o", "pthread_setspecific"])
            XCTAssertEqual(threads.status, .exited(0), "\(configuration): \(threads.stderr)")
        }
    }

    /// CRASHPORT_SIGNALS leaves SIGILL out (the default edited, or a set named): the stub does
    /// not report it, the program dies by the default action, and the report is the launcher's
    /// termination report (no crash record).
    func testSignalsLeftOutByTheEnvironmentAreNotReportedByTheStub() throws {
        let program = try program()
        for signals in ["-ILL", "SIGSEGV,bus,abrt"] {
            var environment = environment
            environment["CRASHPORT_SIGNALS"] = signals
            let run = try TestSupport.crashportRun([program], environment: environment)
            XCTAssertEqual(run.result.status, .signaled(SIGILL), run.result.stderr)
            XCTAssertTrue(run.result.stderr.contains("killed by SIGILL with no crash record"), "\(signals): \(run.result.stderr)")
            guard run.reportIDs.count == 1 else { return XCTFail("\(signals): \(run.reportIDs) \(run.result.stderr)") }
            XCTAssertEqual(try run.event().kind, .termination, signals)
        }
    }

    /// A value the stub cannot use is said once on stderr and the default set kept: the trap
    /// is reported by the stub.
    func testABadSignalsValueIsSaidOnceAndIgnored() throws {
        let program = try program()
        let cases = [
            "SEGV,NOPE": "names an unknown signal or one that cannot be handled (\"NOPE\")",
            "KILL": "names an unknown signal or one that cannot be handled (\"KILL\")",
            "SEGV,-ILL": "names signals and edits the default at once (use \"SEGV,BUS\" or \"-ILL,+7\")",
            "-SEGV,-BUS,-ILL,-FPE,-ABRT,-TRAP,-SYS": "leaves no signal",
        ]
        for (signals, problem) in cases {
            var environment = environment
            environment["CRASHPORT_SIGNALS"] = signals
            let run = try TestSupport.crashportRun([program], environment: environment)
            let said = "crashport: CRASHPORT_SIGNALS=\(signals) \(problem); using the default signals"
            XCTAssertEqual(run.result.stderr.components(separatedBy: said).count - 1, 1, run.result.stderr)
            XCTAssertEqual(run.result.status, .signaled(SIGILL), run.result.stderr)
            XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
            XCTAssertEqual(try run.event().kind, .crash, signals)
        }
    }

    /// The Swift options choose the set when `start` makes the install
    /// (CRASHPORT_INSTALL=manual: the constructor leaves it to the program); a set the stub
    /// cannot handle throws EINVAL.
    func testSignalsFromTheSwiftOptions() throws {
        let program = try program()
        var environment = environment
        environment["CRASHPORT_INSTALL"] = "manual"
        let run = try TestSupport.crashportRun([program, "no-traps"], environment: environment)
        XCTAssertTrue(run.result.stdout.hasPrefix("started"), run.result.stdout)
        XCTAssertEqual(run.result.status, .signaled(SIGILL), run.result.stderr)
        XCTAssertTrue(run.result.stderr.contains("killed by SIGILL with no crash record"), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        XCTAssertEqual(try run.event().kind, .termination)

        let refused = try TestSupport.crashportRun([program, "kill"], environment: environment)
        XCTAssertTrue(refused.result.stdout.hasPrefix("start failed: Invalid argument"), refused.result.stdout)
        XCTAssertTrue(refused.result.stderr.contains("SIGKILL or SIGSTOP, which cannot be handled"), refused.result.stderr)
    }
}
