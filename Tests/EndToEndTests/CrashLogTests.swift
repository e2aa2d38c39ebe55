// End-to-end: the crash log a person reads in ten seconds. For an abort in a C++ thread, a Rust
// panic, a failed assert, a Swift fatal error and a segfault in a dlopened library, the first
// line names what happened and the program's own frame (the event's title and culprit), runtime
// frames are folded and recursion counted rather than cut, and names from the program are
// escaped.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class CrashLogTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("crash-log")

    /// The first line of the stderr summary.
    func firstLine(_ run: CrashportRun) -> String {
        run.result.stderr.split(separator: "\n").first { $0.hasPrefix("crashport: ") }.map(String.init) ?? run.result.stderr
    }

    func crash(_ command: [String], file: StaticString = #filePath, line: UInt = #line) throws -> (CrashportRun, Event) {
        let run = try TestSupport.crashportRun(command, environment: ["SWIFT_BACKTRACE": "enable=no"])
        addTeardownBlock { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        guard run.reportIDs.count == 1 else {
            throw TestFailure("\(command): \(run.reportIDs.count) reports: \(run.result.stderr)")
        }
        return (run, try run.event())
    }

    func testAbortInACxxThread() throws {
        let program = try TestSupport.compile(
            [TestSupport.fixture("api/terminate.cpp")], output: Self.directory + "/terminate", compiler: "g++",
            flags: ["-O1", "-g", "-pthread"])
        let (run, event) = try crash([program, "thread"])
        XCTAssertEqual(event.culprit?.file.map { ($0 as NSString).lastPathComponent }, "terminate.cpp")
        XCTAssertEqual(event.culprit?.line, 16)
        XCTAssertEqual(
            event.title, "SIGABRT: uncaught exception config_error: the config file is missing in operator() (terminate.cpp:16)")
        XCTAssertTrue(firstLine(run).hasSuffix("crashed: " + (event.title ?? "?")), firstLine(run))
        // libc's and libstdc++'s frames are folded, not listed, in the summary.
        XCTAssertTrue(run.result.stderr.contains(" frames in libc.so.6"), run.result.stderr)
        XCTAssertEqual(event.crashedThreadRecord?.frames?.first?.inApp, false, "pthread_kill is not the program's")
    }

    func testFailedAssert() throws {
        let program = try TestSupport.compile(
            [TestSupport.fixture("api/terminate.cpp")], output: Self.directory + "/terminate-assert", compiler: "g++",
            flags: ["-O0", "-g", "-pthread"])
        let (run, event) = try crash([program, "assert"])
        XCTAssertEqual(event.culprit?.function, "main")
        XCTAssertTrue(event.title?.hasPrefix("SIGABRT: ") == true, event.title ?? "no title")
        XCTAssertTrue(
            event.title?.contains("Assertion `answer == 42' failed. in main (terminate.cpp:22)") == true, event.title ?? "")
        XCTAssertTrue(firstLine(run).contains("in main (terminate.cpp:22)"), firstLine(run))
    }

    /// rustc from PATH, else rustup's default place; skips without it.
    func rustc() throws -> String {
        let home = ProcessInfo.processInfo.environment["HOME"] ?? "/root"
        guard let rustc = TestSupport.which("rustc", also: [home + "/.cargo/bin", "/root/.cargo/bin"]) else {
            throw XCTSkip("rustc not found: the Rust fixtures cannot be built")
        }
        return rustc
    }

    func testRustPanicOnAThread() throws {
        let rustc = try rustc()
        let program = Self.directory + "/panic"
        let built = try TestSupport.run(
            [rustc, "-g", "-C", "opt-level=0", "-C", "panic=abort", TestSupport.fixture("rust/panic.rs"), "-o", program],
            timeout: 300)
        XCTAssertEqual(built.status, .exited(0), built.stderr)
        let (run, event) = try crash([program])
        XCTAssertEqual(event.culprit?.function, "panic::Ledger<T>::balance", "demangled, generic and all")
        XCTAssertEqual(event.crashedThreadRecord?.name, "auditor")
        // The panic's message, read from the held process, is the reason.
        XCTAssertEqual(
            event.title, "SIGABRT: panicked: the ledger is unbalanced: [3, -1] in panic::Ledger<T>::balance (panic.rs:10)")
        XCTAssertEqual(event.exception?.type, "panic")
        XCTAssertEqual(event.exception?.message, "the ledger is unbalanced: [3, -1]")
        XCTAssertTrue(run.result.stderr.contains("crashed: " + (event.title ?? "-")), run.result.stderr)
        // The recursion is counted on one line, and the closure that started it follows.
        XCTAssertTrue(run.result.stderr.contains("panic::Ledger<T>::balance (panic.rs:12) × 5"), run.result.stderr)
        XCTAssertTrue(run.result.stderr.contains("panic::main::{{closure}} (panic.rs:24)"), run.result.stderr)

        // Optimised, a literal message from the standard library, on the main thread.
        let optimised = Self.directory + "/panic-O"
        let builtO = try TestSupport.run(
            [rustc, "-g", "-C", "opt-level=3", "-C", "panic=abort", TestSupport.fixture("rust/panic.rs"), "-o", optimised],
            timeout: 300)
        XCTAssertEqual(builtO.status, .exited(0), builtO.stderr)
        let (_, unwrapped) = try crash([optimised, "unwrap"])
        XCTAssertEqual(unwrapped.reason, "panicked: called `Option::unwrap()` on a `None` value")
        XCTAssertEqual(unwrapped.culprit?.function, "panic::main")
    }

    /// A Rust worker thread that faults without panicking: the panic machinery that every
    /// std::thread runs its closure under (catch_unwind) is below the fault, so it is a
    /// segfault, or a plain abort, and not a panic.
    func testRustThreadFaultIsNoPanic() throws {
        let rustc = try rustc()
        let program = Self.directory + "/worker_fault"
        let built = try TestSupport.run(
            [rustc, "-g", "-C", "opt-level=0", TestSupport.fixture("rust/worker_fault.rs"), "-o", program], timeout: 300)
        XCTAssertEqual(built.status, .exited(0), built.stderr)
        let (_, event) = try crash([program])
        XCTAssertEqual(event.crashedThreadRecord?.name, "updater")
        XCTAssertTrue(
            event.crashedFunctions.contains { $0.hasPrefix("std::panicking::") },
            "catch_unwind's frames are on the stack: \(event.crashedFunctions)")
        XCTAssertEqual(
            event.title, "SIGSEGV: segmentation fault at 0x10 in worker_fault::apply_update (worker_fault.rs:13)")
        XCTAssertNil(event.exception, "no panic: \(String(describing: event.exception))")
        XCTAssertNil(event.reason)
        XCTAssertFalse(event.signature?.contains("panic") == true, event.signature ?? "")

        let (_, aborted) = try crash([program, "abort"])
        XCTAssertEqual(aborted.signal?.name, "SIGABRT")
        XCTAssertNil(aborted.exception, "std::process::abort() is no panic")
        XCTAssertEqual(aborted.culprit?.function, "worker_fault::apply_update")
        XCTAssertTrue(aborted.title?.hasPrefix("SIGABRT: aborted in worker_fault::apply_update") == true, aborted.title ?? "")
    }

    func testSwiftFatalError() throws {
        let program = Self.directory + "/fatal"
        let built = try TestSupport.run(
            ["swiftc", "-Onone", "-g", TestSupport.fixture("api/Fatal.swift"), "-o", program], timeout: 300)
        XCTAssertEqual(built.status, .exited(0), built.stderr)
        let (run, event) = try crash([program])
        XCTAssertEqual(event.culprit?.function, "balance(_:)")
        XCTAssertTrue(event.title?.hasPrefix("SIGILL: ") == true, event.title ?? "no title")
        XCTAssertTrue(
            event.title?.hasSuffix("Fatal.swift:6: Fatal error: the ledger is unbalanced by 3 in balance(_:) (Fatal.swift:6)")
                == true,
            event.title ?? "no title")
        XCTAssertTrue(firstLine(run).contains("in balance(_:) (Fatal.swift:6)"), firstLine(run))
    }

    func testSegfaultInADlopenedLibrary() throws {
        let plugin = try TestSupport.compile(
            [TestSupport.fixture("crashlog/plugin.c")], output: Self.directory + "/libplugin.so",
            flags: ["-O1", "-g", "-shared", "-fPIC"])
        let host = try TestSupport.compile(
            [TestSupport.fixture("crashlog/host.c")], output: Self.directory + "/host", flags: ["-O1", "-g", "-pthread"],
            linkFlags: ["-ldl"])
        let (run, event) = try crash([host, "plugin", plugin])
        XCTAssertEqual(event.culprit?.function, "read_setting")
        XCTAssertEqual(event.culprit?.module, "libplugin.so", "the program's own library is in-app")
        XCTAssertEqual(event.title, "SIGSEGV: segmentation fault at 0xc in read_setting (plugin.c:4)")
        XCTAssertTrue(
            firstLine(run).hasSuffix("crashed: SIGSEGV: segmentation fault at 0xc in read_setting (plugin.c:4)"), firstLine(run))
    }

    /// An event from a newer crashport (or edited by hand), and a report without its minidump:
    /// show prints what it knows and names what it skipped.
    func testShowReadsWhatItKnows() throws {
        let host = try TestSupport.compile(
            [TestSupport.fixture("crashlog/host.c")], output: Self.directory + "/host-newer", flags: ["-O1", "-g", "-pthread"],
            linkFlags: ["-ldl"])
        let (run, _) = try crash([host, "name"])
        let directory = run.reportsDirectory + "/" + run.reportIDs[0]
        let path = directory + "/event.json"
        var object = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        object["schema"] = "crashport.event.v2"
        object["gpu_state"] = ["driver": "x"]
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
        try FileManager.default.removeItem(atPath: directory + "/minidump.dmp")
        let shown = try TestSupport.run([TestSupport.crashport, "show", "--reports", run.reportsDirectory, "latest"])
        XCTAssertEqual(shown.status, .exited(0), shown.stderr)
        XCTAssertTrue(shown.stdout.contains("crashed: SIGSEGV"), shown.stdout)
        XCTAssertTrue(
            shown.stderr.contains("skipped what this crashport does not know: gpu_state (schema crashport.event.v2)"),
            shown.stderr)
    }

    /// A thread name with a terminal escape and a newline is printed escaped, on stderr and by show.
    func testAThreadNameIsPrintedEscaped() throws {
        let host = try TestSupport.compile(
            [TestSupport.fixture("crashlog/host.c")], output: Self.directory + "/host-name", flags: ["-O1", "-g", "-pthread"],
            linkFlags: ["-ldl"])
        let (run, event) = try crash([host, "name"])
        XCTAssertEqual(event.crashedThreadRecord?.name, "ev\u{1b}[2Jil\n", "kept as it was in the event")
        XCTAssertFalse(run.result.stderr.contains("\u{1b}"), run.result.stderr)
        XCTAssertTrue(run.result.stderr.contains("\"ev\\u{1b}[2Jil\\n\" crashed:"), run.result.stderr)
        let shown = try TestSupport.run([TestSupport.crashport, "show", "--reports", run.reportsDirectory, "latest"])
        XCTAssertEqual(shown.status, .exited(0), shown.stderr)
        XCTAssertFalse(shown.stdout.contains("\u{1b}"))
        XCTAssertTrue(
            shown.stdout.contains("Thread \(event.crashedThread?.rawValue ?? 0) \"ev\\u{1b}[2Jil\\n\" (crashed)"), shown.stdout)
    }
}
