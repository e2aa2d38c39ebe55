// End-to-end: what a program tells crashport about itself (crashport_annotate,
// crashport_breadcrumb, crashport_attach_file) reaches its report: event.json, the crash log,
// attachments/ and the minidump, under `crashport run` and under a sidecar, from a program
// that links libcrashport (Tests/Fixtures/api/app.c). Bad input: over-long and escaped text,
// too many keys, FIFOs, missing and unreadable files, 50 threads writing while the crash is
// captured.

import Foundation
import ReportModel
import TestSupport
import Upload
import XCTest

final class AppAPITests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("app-api")

    /// The example package a user copies (examples/swift-api), built once per test run with
    /// `swift build` alone: the directory of its executables (Ledger, SafeMode).
    static func swiftExample() throws -> String {
        try swiftExampleBuild.get()
    }
    private static let swiftExampleBuild = Result<String, Error> {
        let scratch = directory + "/swift-api-build"
        let built = try TestSupport.run(
            ["swift", "build", "--package-path", TestSupport.repositoryRoot + "/examples/swift-api", "--scratch-path", scratch],
            timeout: 600)
        guard built.status == .exited(0) else {
            throw TestFailure("swift build of examples/swift-api: \(built.stderr + built.stdout)")
        }
        return scratch + "/debug"
    }

    /// The fixture linked with the stub the tests preload (one library, loaded once), or with
    /// the copy in `libraries`.
    func program(in directory: String = AppAPITests.directory, libraries: String? = nil) throws -> String {
        let libraries = try libraries ?? (TestSupport.stub() as NSString).deletingLastPathComponent
        return try TestSupport.compile(
            [TestSupport.fixture("api/app.c")], output: directory + "/app",
            flags: ["-O1", "-g", "-pthread", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
    }

    func fresh(_ name: String) -> String {
        TestSupport.freshDirectory(in: Self.directory, name)
    }

    /// What `tell` prints and stores, checked against its report.
    func assertTold(
        _ event: Event, reportDirectory: String, workDirectory: String, file: StaticString = #filePath, line: UInt = #line
    )
        throws
    {
        let annotations = try XCTUnwrap(event.annotations, file: file, line: line)
        XCTAssertEqual(annotations["user"], "bob", file: file, line: line)
        XCTAssertEqual(annotations["build"], "nightly\n\u{1b}[31mred", "stored as given", file: file, line: line)
        XCTAssertEqual(annotations["long"], String(repeating: "v", count: 1023), file: file, line: line)
        XCTAssertEqual(annotations[String(repeating: "k", count: 63)], "x", file: file, line: line)
        XCTAssertNil(annotations["gone"], file: file, line: line)
        XCTAssertEqual(annotations.count, 64, "the area holds 64 keys", file: file, line: line)
        XCTAssertEqual(
            Set(event.annotationsTruncated ?? []), ["long", String(repeating: "k", count: 63)], file: file, line: line)

        let crumbs = try XCTUnwrap(event.breadcrumbs, file: file, line: line)
        XCTAssertEqual(
            crumbs.map(\.message), (30..<130).map { "step \($0)" }, "the last 100, oldest first", file: file, line: line)
        XCTAssertTrue(crumbs.allSatisfy { $0.category == "loop" && $0.timestamp?.hasSuffix("Z") == true }, file: file, line: line)

        let attachments = try XCTUnwrap(event.attachments, file: file, line: line)
        let byPath = Dictionary(attachments.map { ($0.path ?? "", $0) }, uniquingKeysWith: { first, _ in first })
        let log = try XCTUnwrap(byPath[workDirectory + "/app.log"], "\(attachments)", file: file, line: line)
        XCTAssertEqual(log.file, "attachments/app.log", file: file, line: line)
        XCTAssertEqual(log.copied, 22, file: file, line: line)
        XCTAssertEqual(
            try String(contentsOfFile: reportDirectory + "/attachments/app.log", encoding: .utf8), "started\nconfig loaded\n",
            file: file, line: line)
        XCTAssertEqual(byPath[workDirectory + "/fifo"]?.error, "not a regular file", file: file, line: line)
        XCTAssertNil(byPath[workDirectory + "/fifo"]?.file, file: file, line: line)
        XCTAssertEqual(byPath["/nonexistent/file"]?.error, "No such file or directory", file: file, line: line)
        XCTAssertNil(byPath[workDirectory + "/detached"], "detached before the crash", file: file, line: line)
        XCTAssertEqual(attachments.count, byPath.count, "each file once", file: file, line: line)
    }

    func testAnnotationsBreadcrumbsAndAttachmentsUnderRun() throws {
        let work = fresh("run")
        let run = try TestSupport.crashportRun([try program(), "tell", work])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        // What each call answered.
        for expected in [
            "user 0", "escaped 0", "replaced 0", "long value 1", "long key 1", "removed 0 0", "empty key -22",
            "full at n60 -28", "attach log 0", "attach again 0", "attach fifo 0", "attach missing 0", "detach 0 0 -2",
        ] {
            XCTAssertTrue(run.result.stdout.contains(expected + "\n"), "\(expected):\n\(run.result.stdout)")
        }
        guard run.reportIDs.count == 1 else { return XCTFail("\(run.reportIDs.count) reports: \(run.result.stderr)") }
        let event = try run.event()
        XCTAssertEqual(event.crashedFunctions.first, "crash_after_telling")
        try assertTold(event, reportDirectory: run.reportsDirectory + "/" + run.reportIDs[0], workDirectory: work)

        // The crash log escapes the program's text.
        let shown = try TestSupport.run([TestSupport.crashport, "show", "--reports", run.reportsDirectory, run.reportIDs[0]])
        XCTAssertEqual(shown.status, .exited(0), shown.stderr)
        XCTAssertTrue(shown.stdout.contains("  build: nightly\\n\\u{1b}[31mred\n"), shown.stdout)
        XCTAssertFalse(shown.stdout.contains("\u{1b}"), "no terminal escape reaches the terminal")
        XCTAssertTrue(shown.stdout.contains("Breadcrumbs (last 10 of 100, oldest first):"), shown.stdout)
        XCTAssertTrue(shown.stdout.contains("[loop] step 129"), shown.stdout)

        // The minidump carries the annotations as Crashpad does, for rust-minidump and Sentry,
        // and offline symbolication keeps them.
        let dump = try TestSupport.stackwalkDump(run.minidumpPath())
        XCTAssertTrue(dump.contains("simple_annotations[\"user\"] = bob"), String(dump.suffix(3000)))
        let offline = try TestSupport.run([TestSupport.crashport, "symbolicate", "--format", "json", run.minidumpPath()])
        XCTAssertEqual(offline.status, .exited(0), offline.stderr)
        let symbolicated = try Event.decode(Data(offline.stdout.utf8))
        XCTAssertEqual(symbolicated.annotations, event.annotations)
    }

    func testTheSameThroughTheSidecar() throws {
        let work = fresh("sidecar")
        let program = try program()
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let result = try TestSupport.run(
            [program, "tell", work], environment: ["CRASHPORT_SOCKET": sidecar.socket, "SWIFT_BACKTRACE": "enable=no"])
        XCTAssertEqual(result.status, .signaled(SIGSEGV), result.stderr)
        let events = try sidecar.waitForReports(1)
        try assertTold(
            events[0], reportDirectory: sidecar.reportsDirectory() + "/" + sidecar.reportIDs()[0], workDirectory: work)
    }

    /// 50 threads replacing their annotation and adding breadcrumbs as fast as they can while the
    /// main thread crashes: every annotation in the report is one a thread wrote whole, and the
    /// breadcrumbs are the newest 100 at most, in order.
    func testFiftyThreadsWritingDuringTheCapture() throws {
        let run = try TestSupport.crashportRun([try program(), "busy"])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        let event = try run.event()
        let annotations = try XCTUnwrap(event.annotations)
        // Slots a thread was writing when the process stopped are left out, and the notes say so.
        XCTAssertFalse(run.result.stdout.contains("annotate failed"), run.result.stdout)
        if annotations.count < 50 {
            XCTAssertTrue(
                event.notes?.contains { $0.contains("were being written when the process stopped") } == true,
                "\(event.notes ?? [])")
        }
        for (key, value) in annotations {
            XCTAssertTrue(key.hasPrefix("t") && value.hasPrefix(key + ":"), "\(key) = \(value)")
            XCTAssertNotNil(UInt(value.dropFirst(key.count + 1)), "\(key) = \(value)")
        }
        let crumbs = try XCTUnwrap(event.breadcrumbs)
        XCTAssertLessThanOrEqual(crumbs.count, 100)
        XCTAssertGreaterThan(crumbs.count, 50)
        for crumb in crumbs {
            let category = try XCTUnwrap(crumb.category)
            XCTAssertTrue(crumb.message?.hasPrefix(category + ":") == true, "\(crumb)")
        }
        XCTAssertEqual(crumbs.map { $0.timestamp ?? "" }, crumbs.map { $0.timestamp ?? "" }.sorted(), "oldest first")

        // LLDB, on the minidump, sees each thread start in the program's own routine: crashport's
        // thread trampoline leaves no frame.
        let backtraces = try TestSupport.lldb(run.minidumpPath(), commands: ["bt all"])
        XCTAssertTrue(backtraces.contains("keep_telling"), String(backtraces.prefix(3000)))
        XCTAssertFalse(backtraces.contains("cp_thread_start"), String(backtraces.prefix(3000)))
    }

    /// Why a program aborted, in its runtime's words: an uncaught C++ exception by type and
    /// what() (on a thread, and a thrown int), a failed assert, glibc's double free check.
    func testTheReasonAProgramAborted() throws {
        let cxx = try TestSupport.compile(
            [TestSupport.fixture("api/terminate.cpp")], output: Self.directory + "/terminate", compiler: "g++",
            flags: ["-O1", "-g", "-pthread"])
        let cases: [(command: [String], exception: ExceptionRecord?, reason: String)] = [
            (
                [cxx, "thread"], ExceptionRecord(type: "config_error", message: "the config file is missing"),
                "uncaught exception config_error: the config file is missing"
            ),
            ([cxx, "int"], ExceptionRecord(type: "int"), "uncaught exception int"),
            ([cxx, "assert"], nil, "terminate.cpp:22: int main(int, char**): Assertion `answer == 42' failed."),
            ([try program(), "doublefree"], nil, "free(): double free detected in tcache 2"),
        ]
        let swift = Self.directory + "/fatal"
        let compiled = try TestSupport.run(
            ["swiftc", "-Onone", "-g", TestSupport.fixture("api/Fatal.swift"), "-o", swift], timeout: 300)
        XCTAssertEqual(compiled.status, .exited(0), compiled.stderr)
        for (command, exception, reason) in cases + [([swift], nil, "Fatal error: the ledger is unbalanced by 3")] {
            let run = try TestSupport.crashportRun(command, environment: ["SWIFT_BACKTRACE": "enable=no"])
            defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
            let signal: Int32 = command == [swift] ? SIGILL : SIGABRT
            XCTAssertEqual(run.result.status, .signaled(signal), "\(command): \(run.result.stderr)")
            guard run.reportIDs.count == 1 else {
                XCTFail("\(command): \(run.reportIDs.count) reports: \(run.result.stderr)")
                continue
            }
            let event = try run.event()
            XCTAssertEqual(event.exception, exception, "\(command)")
            XCTAssertTrue(event.reason?.hasSuffix(reason) == true, "\(command): \(event.reason ?? "no reason")")
            XCTAssertTrue(run.result.stderr.contains("reason: "), run.result.stderr)
        }
    }

    /// The stub finds libstdc++ with dlsym: a C program never loads it.
    func testACProgramDoesNotLoadTheCxxRuntime() throws {
        let run = try TestSupport.crashportRun([try program(), "doublefree"])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        let modules = try run.event().modules?.compactMap(\.path) ?? []
        XCTAssertFalse(modules.contains { $0.contains("libstdc++") }, "\(modules)")
        XCTAssertTrue(modules.contains { $0.contains("libcrashport") }, "\(modules)")
    }

    /// A handled error: reports of kind "error" naming the calling function and thread, the
    /// process running on to exit 0; 50 threads at once go one by one until the rate limit, and
    /// a signal handler's report is refused by it, never deadlocked.
    func testHandledErrorsLeaveTheProcessRunning() throws {
        let run = try TestSupport.crashportRun([try program(), "error"])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .exited(0), run.result.stderr)
        XCTAssertTrue(run.result.stdout.contains("parse_config 0\n"), run.result.stdout)
        XCTAssertTrue(run.result.stdout.contains("threads reported 9 limited 41 other 0\n"), run.result.stdout)
        XCTAssertTrue(run.result.stdout.contains("handler -11\n"), "rate-limited, not deadlocked: \(run.result.stdout)")
        XCTAssertEqual(run.reportIDs.count, 10, run.result.stderr)
        let events = try (0..<run.reportIDs.count).map { try run.event($0) }
        let first = try XCTUnwrap(events.first { $0.exception?.type == "ParseError" })
        XCTAssertEqual(first.kind, .error)
        XCTAssertNil(first.signal)
        XCTAssertEqual(first.exception, ExceptionRecord(type: "ParseError", message: "line 3: unexpected '}'", handled: true))
        XCTAssertTrue(containsInOrder(first.crashedFunctions, ["parse_config", "main"]), "\(first.crashedFunctions)")
        XCTAssertEqual(first.crashedThread?.rawValue, first.process?.pid?.rawValue, "the main thread reported it")
        let threaded = events.filter { $0.exception?.type == "ThreadError" }
        XCTAssertEqual(threaded.count, 9)
        for event in threaded {
            XCTAssertTrue(event.crashedFunctions.contains("report_once"), "\(event.crashedFunctions)")
            // crashport's thread trampoline leaves no frame: the program's routine is called by start_thread.
            XCTAssertTrue(containsInOrder(event.crashedFunctions, ["report_once", "start_thread"]), "\(event.crashedFunctions)")
            XCTAssertFalse(event.crashedFunctions.contains("cp_thread_start"), "\(event.crashedFunctions)")
            // Its own message: the reports did not mix while they went one by one.
            let reporter = try XCTUnwrap(event.crashedThread)
            XCTAssertNotEqual(reporter.rawValue, event.process?.pid?.rawValue)
            XCTAssertTrue(event.exception?.message?.hasPrefix("from thread ") == true)
        }
        XCTAssertEqual(Set(threaded.compactMap { $0.exception?.message }).count, 9)
        XCTAssertTrue(
            run.result.stderr.contains("reported an error: ParseError: line 3: unexpected '}' in parse_config"), run.result.stderr
        )
    }

    /// One `app run HOW` under `crashport run`: what crashport_last_run said, and the run.
    func launch(
        _ how: String, reports: String, program: String, environment: [String: String] = [:]
    ) throws -> (
        said: String, run: CrashportRun
    ) {
        let run = try TestSupport.crashportRun([program, "run", how], reports: reports, environment: environment)
        let said = run.result.stdout.split(separator: "\n").first { $0.hasPrefix("last_run ") }.map(String.init) ?? ""
        return (said, run)
    }

    /// Bugsnag's semantics, known at install: three launch crashes in a row are read on the
    /// fourth start; a crash after crashport_launch_completed keeps the count; a clean run resets
    /// it; disabled, a crash writes no report and ends the same way; `crashport stats`, `list
    /// --program` and `show --last` say the same.
    func testLastRunAndLaunchCrashLoops() throws {
        let program = try program(in: fresh("last-run"))
        let reports = fresh("last-run-reports")
        let release = ["CRASHPORT_RELEASE": "app@1.0"]
        var (said, run) = try launch("crash", reports: reports, program: program, environment: release)
        XCTAssertEqual(said, "last_run -2 crashed 0 during_launch 0 consecutive 0 report - enabled 1", "nothing on record yet")
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV))
        let first = try run.event()
        XCTAssertEqual(first.launch?.crashedDuringLaunch, true)
        XCTAssertEqual(first.release, "app@1.0")
        // The report names its session, and the session its report.
        let sessions = try String(contentsOfFile: reports + "/.crashport-sessions.jsonl", encoding: .utf8)
        let line = try XCTUnwrap(sessions.split(separator: "\n").first { $0.contains(run.reportIDs[0]) })
        let session = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        XCTAssertEqual(session["sid"] as? String, try XCTUnwrap(first.session))
        XCTAssertEqual(session["status"] as? String, "crashed")
        XCTAssertEqual(session["release"] as? String, "app@1.0")
        var previous = run.reportIDs[0]
        for count in 1...2 {
            (said, run) = try launch("crash", reports: reports, program: program, environment: release)
            XCTAssertEqual(said, "last_run 0 crashed 1 during_launch 1 consecutive \(count) report \(previous) enabled 1")
            previous = try XCTUnwrap(run.reportIDs.first { !(said.contains($0)) && $0 > previous })
        }
        (said, run) = try launch("late", reports: reports, program: program, environment: release)
        XCTAssertEqual(
            said, "last_run 0 crashed 1 during_launch 1 consecutive 3 report \(previous) enabled 1", "the fourth start")
        let late = try XCTUnwrap(run.reportIDs.max())
        XCTAssertEqual(try run.event(run.reportIDs.firstIndex(of: late)!).launch?.crashedDuringLaunch, false)
        (said, _) = try launch("clean", reports: reports, program: program, environment: release)
        XCTAssertEqual(
            said, "last_run 0 crashed 1 during_launch 0 consecutive 3 report \(late) enabled 1", "kept by a late crash")
        (said, _) = try launch("clean", reports: reports, program: program, environment: release)
        XCTAssertEqual(said, "last_run 0 crashed 0 during_launch 0 consecutive 0 report - enabled 1", "reset by a clean run")

        // Disabled: no report, the same death; and it stays off for the next run until enabled.
        let before = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }.count
        (said, run) = try launch("disable", reports: reports, program: program)
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV))
        XCTAssertTrue(run.result.stdout.contains("disabled 0\n"), run.result.stdout)
        (said, run) = try launch("crash", reports: reports, program: program)
        XCTAssertTrue(said.hasSuffix("enabled 0"), said)
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV))
        XCTAssertEqual(run.reportIDs.count, before, "\(run.result.stderr)")
        (said, run) = try launch("enable", reports: reports, program: program)
        XCTAssertTrue(run.result.stdout.contains("enabled 0\n"), run.result.stdout)
        (said, run) = try launch("crash", reports: reports, program: program)
        XCTAssertTrue(said.hasSuffix("enabled 1"), said)
        XCTAssertEqual(run.reportIDs.count, before + 1)

        let stats = try TestSupport.run([TestSupport.crashport, "stats", "--reports", reports, "--program", program])
        XCTAssertEqual(stats.status, .exited(0), stats.stderr)
        // 6 runs of app@1.0: 4 crashes (3 during launch), 2 clean; then 4 without a release, 3 of
        // them crashes during launch: the two with reporting off crashed too (SIGSEGV, no
        // record), which the run history counts though no report is written.
        XCTAssertTrue(stats.stdout.contains("\(program)  app@1.0  6  4 (3)  0  0  33.3%  1\n"), stats.stdout)
        XCTAssertTrue(stats.stdout.contains("\(program)  -  4  3 (3)  0  0  25.0%  1\n"), stats.stdout)
        let listed = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports, "--program", program])
        XCTAssertTrue(listed.stdout.hasPrefix("last run of \(program)"), listed.stdout)
        XCTAssertTrue(listed.stdout.contains("crashed during launch (1 launch crash in a row)"), listed.stdout)
        let shown = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, "--last", program])
        XCTAssertEqual(shown.status, .exited(0), shown.stderr)
        XCTAssertTrue(shown.stdout.contains("crashed: SIGSEGV"), shown.stdout)
    }

    /// Handled errors and crashport_set_enabled through a sidecar, as under `crashport run`.
    func testErrorsAndDisablingThroughTheSidecar() throws {
        let work = fresh("sidecar-errors")
        let program = try program(in: work)
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let environment = ["CRASHPORT_SOCKET": sidecar.socket]
        let errors = try TestSupport.run([program, "error"], environment: environment)
        XCTAssertEqual(errors.status, .exited(0), errors.stderr)
        XCTAssertTrue(errors.stdout.contains("threads reported 9 limited 41 other 0\n"), errors.stdout)
        let events = try sidecar.waitForReports(10)
        XCTAssertEqual(events.filter { $0.kind == .error }.count, 10)
        XCTAssertEqual(events.filter { $0.exception?.type == "ParseError" }.count, 1)

        let disabled = try TestSupport.run([program, "run", "disable"], environment: environment)
        XCTAssertEqual(disabled.status, .signaled(SIGSEGV))
        let next = try TestSupport.run([program, "run", "crash"], environment: environment)
        XCTAssertTrue(next.stdout.contains(" enabled 0\n"), "kept by the sidecar: \(next.stdout)")
        XCTAssertEqual(next.status, .signaled(SIGSEGV))
        // Give a report the time it would take to appear, then check none did.
        _ = try TestSupport.run([program, "run", "clean"], environment: environment)
        XCTAssertEqual(sidecar.reportIDs().count, 10, sidecar.log)
        let enabled = try TestSupport.run([program, "run", "enable"], environment: environment)
        XCTAssertTrue(enabled.stdout.contains("enabled 0\n"), enabled.stdout)
        _ = try TestSupport.run([program, "run", "crash"], environment: environment)
        XCTAssertEqual(try sidecar.waitForReports(11).count, 11)
    }

    /// A run history that is corrupt, from another version, or a symlink is not trusted: the
    /// program starts as if nothing were on record, and the next run's history replaces it.
    func testCorruptRunHistoryIsNotTrusted() throws {
        let program = try program(in: fresh("corrupt-history"))
        for (name, content) in [
            ("garbage", "{\"programs\": [{\"executable\": 7"), ("another version", "{\"version\": 2, \"programs\": []}"),
        ] {
            let reports = fresh("corrupt-history-reports")
            try content.write(toFile: reports + "/.crashport-runs.json", atomically: true, encoding: .utf8)
            try String(repeating: "not json\n", count: 3).write(
                toFile: reports + "/.crashport-sessions.jsonl", atomically: true, encoding: .utf8)
            var (said, run) = try launch("clean", reports: reports, program: program)
            XCTAssertEqual(run.result.status, .exited(0), "\(name): \(run.result.stderr)")
            XCTAssertTrue(said.hasPrefix("last_run -2 "), "\(name): \(said)")
            (said, run) = try launch("clean", reports: reports, program: program)
            XCTAssertTrue(said.hasPrefix("last_run 0 crashed 0 "), "\(name): rewritten whole: \(said)")
            let stats = try TestSupport.run([TestSupport.crashport, "stats", "--reports", reports])
            XCTAssertTrue(stats.stdout.contains("\(program)  -  2  0 (0)  0  0  100.0%  0\n"), "\(name): \(stats.stdout)")
        }
        // A symlink in its place is never followed (the sidecar may write as root).
        let reports = fresh("symlinked-history")
        let elsewhere = fresh("elsewhere") + "/target"
        try "{}".write(toFile: elsewhere, atomically: true, encoding: .utf8)
        XCTAssertEqual(symlink(elsewhere, reports + "/.crashport-sessions.jsonl"), 0)
        _ = try launch("clean", reports: reports, program: program)
        XCTAssertEqual(try String(contentsOfFile: elsewhere, encoding: .utf8), "{}", "the link's target is untouched")
    }

    /// Through a sidecar the last run comes in its HELLO reply, and its sessions end when the
    /// connection does (a crash: as it is captured, before its report is written).
    func testLastRunThroughTheSidecar() throws {
        let work = fresh("sidecar-last-run")
        let program = try program(in: work)
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let environment = ["CRASHPORT_SOCKET": sidecar.socket]
        func start(_ how: String) throws -> String {
            let result = try TestSupport.run([program, "run", how], environment: environment)
            return result.stdout.split(separator: "\n").first { $0.hasPrefix("last_run ") }.map(String.init) ?? result.stderr
        }
        XCTAssertEqual(try start("crash"), "last_run -2 crashed 0 during_launch 0 consecutive 0 report - enabled 1")
        let events = try sidecar.waitForReports(1)
        let id = sidecar.reportIDs()[0]
        XCTAssertEqual(events[0].launch?.crashedDuringLaunch, true)
        XCTAssertNotNil(events[0].session, "the sidecar's report names its session")
        // The session is written on a report thread: wait for the history file to say so.
        try waitUntil("the crashed session is on record", timeout: 30) {
            let listed = try TestSupport.run(
                [TestSupport.crashport, "list", "--reports", sidecar.reportsDirectory(), "--program", program])
            return listed.stdout.contains("crashed during launch")
        }
        XCTAssertEqual(try start("clean"), "last_run 0 crashed 1 during_launch 1 consecutive 1 report \(id) enabled 1")
        try waitUntil("the clean session is on record", timeout: 30) {
            let listed = try TestSupport.run(
                [TestSupport.crashport, "list", "--reports", sidecar.reportsDirectory(), "--program", program])
            return listed.stdout.contains("ended without a crash")
        }
        XCTAssertEqual(try start("clean"), "last_run 0 crashed 0 during_launch 0 consecutive 0 report - enabled 1")
    }

    /// The consent API, App Center style, under crashport run and under a sidecar: with consent
    /// ask, a program's next start learns how many of its reports wait (crashport_pending_reports)
    /// and answers with the user's choice (send or discard), which the watcher keeps beside each
    /// report; crashport_set_consent keeps the program's own choice.
    func testConsentFromTheProgram() throws {
        let work = fresh("consent")
        let program = try program(in: work)
        try FileManager.default.createDirectory(atPath: work + "/sidecar", withIntermediateDirectories: true)
        let sidecar = try SidecarProcess(directory: work + "/sidecar")
        defer { sidecar.stop() }
        for viaSidecar in [false, true] {
            let reports = viaSidecar ? sidecar.reportsDirectory() : work + "/reports"
            func run(_ answer: String) throws -> RunResult {
                viaSidecar
                    ? try TestSupport.run([program, "consent", answer], environment: ["CRASHPORT_SOCKET": sidecar.socket])
                    : try TestSupport.crashportRun([program, "consent", answer], reports: reports).result
            }
            func consentStates() throws -> [String] {
                try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }.sorted().map {
                    let path = reports + "/" + $0 + "/upload.json"
                    let data = FileManager.default.contents(atPath: path) ?? Data("{}".utf8)
                    return (try JSONSerialization.jsonObject(with: data) as? [String: Any])?["consent"] as? String ?? "-"
                }
            }
            try FileManager.default.createDirectory(atPath: reports, withIntermediateDirectories: true)
            XCTAssertEqual(
                try TestSupport.run([TestSupport.crashport, "consent", "ask", "--reports", reports]).status, .exited(0))
            for _ in 0..<2 { _ = try run("crash") }
            if viaSidecar { _ = try sidecar.waitForReports(2) }

            let sent = try run("send")
            XCTAssertTrue(sent.stdout.contains("pending 2\nanswer send 0 pending 0"), "sidecar \(viaSidecar): \(sent.stdout)")
            try waitUntil("both are allowed to be sent", timeout: 30) { try consentStates() == ["granted", "granted"] }

            _ = try run("crash")
            if viaSidecar { _ = try sidecar.waitForReports(3) }
            let discarded = try run("discard")
            XCTAssertTrue(discarded.stdout.contains("pending 1\nanswer discard 0 pending 0"), discarded.stdout)
            try waitUntil("the third is never to be sent", timeout: 30) {
                try consentStates() == ["granted", "granted", "denied"]
            }
            XCTAssertTrue(try run("bogus").stdout.contains("answer bogus -22"), "EINVAL")

            XCTAssertTrue(try run("never").stdout.contains("answer never 0"))
            try waitUntil("the program's own choice is kept", timeout: 30) {
                try TestSupport.run([TestSupport.crashport, "consent", "--reports", reports]).stdout.contains(": never")
            }
        }
    }

    /// A consent dialog that shows the reports (crashport_pending_list) and decides for each
    /// (crashport_send_report, crashport_discard_report), under crashport run and under a
    /// sidecar: two crashes with consent ask are listed with their ids, kinds, times and titles,
    /// newest first; one is allowed to be sent and the other never, and the list is then empty.
    /// Another program's report (a copy of the program elsewhere) is neither listed nor decided
    /// for, though the program names its id.
    func testConsentDialogListsAndDecidesPerReport() throws {
        let work = fresh("dialog")
        let program = try program(in: work)
        try FileManager.default.createDirectory(atPath: work + "/other", withIntermediateDirectories: true)
        let other = work + "/other/app"
        try FileManager.default.copyItem(atPath: program, toPath: other)
        try FileManager.default.createDirectory(atPath: work + "/sidecar", withIntermediateDirectories: true)
        let sidecar = try SidecarProcess(directory: work + "/sidecar")
        defer { sidecar.stop() }
        for viaSidecar in [false, true] {
            let reports = viaSidecar ? sidecar.reportsDirectory() : work + "/reports"
            func run(_ arguments: [String], as executable: String = program) throws -> RunResult {
                viaSidecar
                    ? try TestSupport.run([executable] + arguments, environment: ["CRASHPORT_SOCKET": sidecar.socket])
                    : try TestSupport.crashportRun([executable] + arguments, reports: reports).result
            }
            func consent(_ id: String) -> String {
                let data = FileManager.default.contents(atPath: reports + "/" + id + "/upload.json") ?? Data("{}".utf8)
                return ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any])?["consent"] as? String ?? "-"
            }
            func ids() throws -> [String] {
                try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }.sorted()
            }
            try FileManager.default.createDirectory(atPath: reports, withIntermediateDirectories: true)
            XCTAssertEqual(
                try TestSupport.run([TestSupport.crashport, "consent", "ask", "--reports", reports]).status, .exited(0))
            let before = Date()
            _ = try run(["consent", "crash"], as: other)
            if viaSidecar { _ = try sidecar.waitForReports(1) }
            let otherID = try XCTUnwrap(try ids().first)
            for count in 2...3 {
                _ = try run(["consent", "crash"])
                if viaSidecar { _ = try sidecar.waitForReports(count) }
            }
            let own = try ids().filter { $0 != otherID }.sorted(by: >)
            XCTAssertEqual(own.count, 2)

            let listed = try run(["dialog"]).stdout
            let lines = listed.split(separator: "\n").filter { $0.hasPrefix("report ") }.map {
                $0.dropFirst("report ".count).split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            }
            XCTAssertTrue(listed.hasPrefix("pending 2\nlisted 2\n"), "sidecar \(viaSidecar): \(listed)")
            XCTAssertEqual(lines.map { $0[0] }, own, "newest first, only this program's: \(listed)")
            for line in lines {
                XCTAssertEqual(line.count, 4, listed)
                XCTAssertEqual(line[1], "crash", listed)
                let time = Double(line[2]).map { Date(timeIntervalSince1970: $0 / 1000) }
                XCTAssertTrue(time.map { $0 >= before.addingTimeInterval(-1) && $0 <= Date() } ?? false, listed)
                let event = try Event.decode(
                    try XCTUnwrap(FileManager.default.contents(atPath: reports + "/" + line[0] + "/event.json")))
                XCTAssertEqual(line[3], event.title, listed)
                XCTAssertTrue(line[3].contains("SIGSEGV"), listed)
            }

            let decided = try run(["dialog", "send", own[0], "discard", own[1], "send", otherID]).stdout
            XCTAssertTrue(
                decided.contains(
                    "send \(own[0]) 0 pending 1\ndiscard \(own[1]) 0 pending 0\nsend \(otherID) 0 pending 0\n"),
                decided)
            XCTAssertTrue(decided.contains("empty id -22, long id -22, NULL list -22\nafter 0\n"), decided)
            XCTAssertEqual([consent(own[0]), consent(own[1]), consent(otherID)], ["granted", "denied", "-"])
            let log = viaSidecar ? sidecar.log : try run(["dialog", "send", otherID]).stderr
            XCTAssertTrue(log.contains("\(otherID) is not a report of"), log)
            XCTAssertTrue(try run(["dialog"], as: other).stdout.contains("listed 1\nreport \(otherID)\t"))
        }
    }

    /// Hostile consent-dialog messages on a raw connection to the sidecar: a query without a
    /// reply descriptor, with a pipe, too short, with reserved bytes set or with two descriptors,
    /// and a report's consent whose id is a path or not NUL-terminated, are each rejected with a
    /// log line naming why; a query with a reply socket gets no answer (the watcher closes it, so
    /// the client sees the end at once), and a valid query after them is answered.
    func testMalformedPendingQueriesAreRejected() throws {
        let work = fresh("pending-hostile")
        let client = try TestSupport.compile(
            [TestSupport.fixture("api/pending-hostile.c")], output: work + "/pending-hostile",
            flags: ["-O1", "-g", "-I", TestSupport.repositoryRoot + "/CSupport/protocol/include"])
        try FileManager.default.createDirectory(atPath: work + "/sidecar", withIntermediateDirectories: true)
        let sidecar = try SidecarProcess(directory: work + "/sidecar")
        defer { sidecar.stop() }
        let ran = try TestSupport.run([client, sidecar.socket])
        XCTAssertEqual(ran.status, .exited(0), ran.stderr)
        XCTAssertEqual(
            ran.stdout, "short: eof\nreserved: eof\ntwo descriptors: eof\nvalid: answer 0\n", ran.stderr)
        let pid = try XCTUnwrap(
            sidecar.log.components(separatedBy: "rejected a pending-reports query from pid ").dropFirst().first?
                .prefix { $0.isNumber })
        let query = "rejected a pending-reports query from pid \(pid): "
        let decision = "rejected a report's consent from pid \(pid): "
        for reason in [
            query + "it carried 0 descriptors, expected 1",
            query + "its reply descriptor is not a socket",
            query + "a pending-reports query of 20 bytes (expected 24)",
            query + "a pending-reports query whose flags or reserved bytes are unknown",
            query + "it carried 2 descriptors, expected 1",
            decision + "a report's consent whose id is empty, not NUL-terminated or not a report id",
        ] {
            try waitUntil("the log says \(reason):\n\(sidecar.log)", timeout: 30) { sidecar.log.contains(reason) }
        }
    }

    /// The CrashPort Swift module, from the example package a user copies (examples/swift-api),
    /// built against this tree's stub: its annotations, breadcrumbs and handled error are in its
    /// reports, its next start knows the last run crashed, and CrashPort.testCrash() is reported
    /// as a test crash.
    func testSwiftExamplePackage() throws {
        let ledger = try Self.swiftExample() + "/Ledger"
        let reports = fresh("swift-api-reports")
        let environment = ["SWIFT_BACKTRACE": "enable=no"]
        let first = try TestSupport.crashportRun([ledger], reports: reports, environment: environment)
        XCTAssertEqual(first.result.status, .signaled(SIGILL), first.result.stderr)
        XCTAssertTrue(first.result.stdout.contains("annotation ledger = 2026-Q4"), first.result.stdout)
        guard first.reportIDs.count == 2 else { return XCTFail("\(first.reportIDs): \(first.result.stderr)") }
        let events = try [first.event(0), first.event(1)]
        let error = try XCTUnwrap(events.first { $0.kind == .error })
        XCTAssertEqual(
            error.exception,
            ExceptionRecord(
                type: "Ledger.LedgerError", message: "the ledger is unbalanced by 2", handled: true,
                properties: ["entries": "2", "total": "2"]))
        XCTAssertTrue(
            first.result.stderr.contains("reported an error: Ledger.LedgerError: the ledger is unbalanced by 2 in Ledger_main"),
            first.result.stderr)
        let crash = try XCTUnwrap(events.first { $0.kind == .crash })
        XCTAssertEqual(crash.annotations, ["user": "alice", "ledger": "2026-Q4"])
        XCTAssertEqual(crash.breadcrumbs?.map(\.message), ["opened the ledger", "reported the imbalance"])
        XCTAssertEqual(crash.launch?.crashedDuringLaunch, false)
        XCTAssertTrue(crash.reason?.hasSuffix("Fatal error: Index out of range") == true, crash.reason ?? "no reason")
        // Its attachments from memory: the state dump, and the log ring's last 4 KiB, oldest first.
        let memory = (crash.attachments ?? []).filter { $0.scope == AttachmentRecord.memoryScope }
        XCTAssertEqual(memory.map(\.name), ["ledger-state.txt", "ledger.log"], "\(crash.attachments ?? [])")
        let directory = reports + "/" + (crash.id ?? "")
        XCTAssertEqual(
            try String(contentsOfFile: directory + "/attachments/ledger-state.txt", encoding: .utf8),
            "ledger 2026-Q4, 2 entries\n")
        let log = (1...500).map { "entry \($0) checked\n" }.joined()
        XCTAssertEqual(
            try String(contentsOfFile: directory + "/attachments/ledger.log", encoding: .utf8), String(log.utf8.suffix(4096))!)

        // Its reports uploaded to a Sentry collector on 127.0.0.1: the next start reads "sent".
        let sentry = try Collector(answers: [["status": 200, "body": "{\"id\":\"$EVENT_ID\"}"]], directory: Self.directory)
        let uploaded = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", reports, "--sentry-dsn", "http://key@127.0.0.1:\(sentry.port)/42"])
        XCTAssertEqual(uploaded.status, .exited(0), uploaded.stderr)
        let second = try TestSupport.crashportRun([ledger, "report-states"], reports: reports, environment: environment)
        XCTAssertTrue(
            second.result.stdout.contains("last run: crashed true, during launch false, 0 launch crash(es) in a row"),
            second.result.stdout)
        let sentID = SentryEvent.eventID(reportID: try XCTUnwrap(crash.id))
        XCTAssertTrue(second.result.stdout.contains("last report: sent (id \(sentID))"), second.result.stdout)
        XCTAssertTrue(second.result.stdout.contains("report \(crash.id ?? ""): sent"), second.result.stdout)
        XCTAssertTrue(second.result.stdout.contains("report \(error.id ?? ""): sent"), second.result.stdout)

        // CrashPort.testCrash(): SIGSEGV, reported as a test crash.
        let test = try TestSupport.crashportRun(
            [ledger, "test-crash"], reports: fresh("swift-api-test-crash"), environment: environment)
        XCTAssertEqual(test.result.status, .signaled(SIGSEGV), test.result.stderr)
        XCTAssertEqual(test.reportIDs.count, 1, test.result.stderr)
        let tested = try test.event()
        XCTAssertEqual(tested.test, true)
        XCTAssertTrue(tested.title?.hasPrefix("test crash: SIGSEGV") == true, tested.title ?? "no title")
        XCTAssertTrue(tested.crashedFunctions.contains("crashport_test_crash"), "\(tested.crashedFunctions)")
    }

    /// The Swift consent dialog (examples/swift-api's ConsentDialog) under crashport run: two
    /// crashes with consent ask are listed newest first with their kinds, times and titles; the
    /// newest is allowed to be sent and the other never, and then none awaits.
    func testSwiftConsentDialog() throws {
        let dialog = try Self.swiftExample() + "/ConsentDialog"
        let reports = fresh("swift-consent-reports")
        XCTAssertEqual(
            try TestSupport.run([TestSupport.crashport, "consent", "ask", "--reports", reports]).status, .exited(0))
        let environment = ["SWIFT_BACKTRACE": "enable=no"]
        for _ in 0..<2 {
            let crashed = try TestSupport.crashportRun([dialog, "crash"], reports: reports, environment: environment)
            XCTAssertEqual(crashed.result.status, .signaled(SIGILL), crashed.result.stderr)
        }
        let ids = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }
            .sorted(by: >)
        XCTAssertEqual(ids.count, 2)
        let asked = try TestSupport.crashportRun([dialog], reports: reports, environment: environment).result
        XCTAssertEqual(asked.status, .exited(0), asked.stderr)
        let lines = asked.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "2 report(s) await consent", asked.stdout)
        XCTAssertEqual(lines.filter { $0.hasPrefix("report ") }.map { $0.split(separator: " ")[1] }, ids.map { Substring($0) })
        XCTAssertTrue(lines.filter { $0.hasPrefix("report ") }.allSatisfy { $0.contains(" crash ") && $0.contains("SIGILL") })
        XCTAssertEqual(
            lines.filter { $0.hasPrefix("sent ") || $0.hasPrefix("discarded ") || $0.hasPrefix("now ") },
            ["sent \(ids[0])", "discarded \(ids[1])", "now 0 await consent"])
        for (id, state) in zip(ids, ["granted", "denied"]) {
            let data = try XCTUnwrap(FileManager.default.contents(atPath: reports + "/" + id + "/upload.json"))
            XCTAssertEqual((try JSONSerialization.jsonObject(with: data) as? [String: Any])?["consent"] as? String, state)
        }
    }

    /// Without crashport installed every call is harmless: the program runs as it would.
    func testEveryCallIsHarmlessWithoutCrashport() throws {
        let result = try TestSupport.run([try program(), "plain"])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        XCTAssertEqual(result.stdout, "plain 0\n")
    }

    /// A root sidecar copies attachments as the crashed process's user: a link that user made to
    /// a file only root may read is not followed into the report.
    func testAttachmentsAreReadAsTheProcesssUser() throws {
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let work = fresh("user")
        chmod(work, 0o777)
        let secret = work + "/secret"
        try "root only\n".write(toFile: secret, atomically: true, encoding: .utf8)
        chmod(secret, 0o600)
        XCTAssertEqual(symlink(secret, work + "/link"), 0)
        // The user must reach the program and the library: copies in the open directory.
        try FileManager.default.copyItem(atPath: try TestSupport.stub(), toPath: work + "/libcrashport.so")
        chmod(work + "/libcrashport.so", 0o755)
        let program = try program(in: work, libraries: work)
        chmod(program, 0o755)
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        chmod(sidecar.reports, 0o711)
        let result = try TestSupport.run(
            ["/usr/sbin/runuser", "-u", user.name, "--", "env", "CRASHPORT_SOCKET=" + sidecar.socket, program, "tell", work])
        XCTAssertTrue(result.stdout.contains("attach link 0"), "\(result.stdout)\n\(result.stderr)")
        let events = try sidecar.waitForReports(1, uid: user.uid)
        let link = events[0].attachments?.first { $0.path == work + "/link" }
        XCTAssertEqual(link?.error, "Permission denied", "\(events[0].attachments ?? [])")
        XCTAssertNil(link?.file)
        let copied = sidecar.reportsDirectory(uid: user.uid) + "/" + sidecar.reportIDs(uid: user.uid)[0] + "/attachments"
        XCTAssertFalse(FileManager.default.fileExists(atPath: copied + "/link"))
        XCTAssertTrue(FileManager.default.fileExists(atPath: copied + "/app.log"), "the user's own file is copied")
    }
}
