// End-to-end: every report counts in the sessions and launch-crash history of the program it is
// about (issue 33), with real processes under the real watcher: a prefork server whose worker
// crashes under `crashport run` has a crashed run (`stats` and `list --program` agree with the
// report); crashes before the stub installed and a SIGKILL during launch are launch crashes
// (crashport_last_run says so on the next start); and under the sidecar a program restarted the
// moment it crashed already reads that crash in its HELLO reply.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class RunCountsTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("run-counts")

    func fresh(_ name: String) -> String {
        TestSupport.freshDirectory(in: Self.directory, name)
    }

    /// Tests/Fixtures/api/app.c linked with the stub the tests preload.
    func app(in directory: String) throws -> String {
        let libraries = (try TestSupport.stub() as NSString).deletingLastPathComponent
        return try TestSupport.compile(
            [TestSupport.fixture("api/app.c")], output: directory + "/app",
            flags: ["-O1", "-g", "-pthread", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
    }

    /// The line crashport_last_run printed.
    func lastRun(_ result: RunResult) -> String {
        result.stdout.split(separator: "\n").first { $0.hasPrefix("last_run ") }.map(String.init) ?? result.stderr
    }

    func crashport(_ arguments: [String]) throws -> RunResult {
        let result = try TestSupport.run([TestSupport.crashport] + arguments)
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        return result
    }

    /// A prefork server under `crashport run`: its worker's crash is the run's, so the run is
    /// crashed (during launch), and `stats`, `list --program` and the session agree with the
    /// report.
    func testAForkedWorkersCrashIsTheRunsCrash() throws {
        let work = fresh("prefork")
        let server = try TestSupport.compile(
            [TestSupport.fixture("counts/prefork.c")], output: work + "/prefork-server", flags: ["-O2", "-g"])
        let reports = fresh("prefork-reports")
        let run = try TestSupport.crashportRun([server], reports: reports)
        XCTAssertEqual(run.result.status, .exited(0), run.result.stderr)
        XCTAssertTrue(run.result.stdout.contains("worker 1 signal \(SIGSEGV)"), run.result.stdout)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let event = try run.event()
        XCTAssertEqual(event.signal?.name, "SIGSEGV")
        XCTAssertEqual(event.launch?.crashedDuringLaunch, true)
        let sid = try XCTUnwrap(event.session, "the worker's report names the run's session")

        let sessions = try String(contentsOfFile: reports + "/.crashport-sessions.jsonl", encoding: .utf8)
            .split(separator: "\n").compactMap {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        XCTAssertEqual(sessions.count, 1, "one run, one session: \(sessions)")
        XCTAssertEqual(sessions.first?["sid"] as? String, sid)
        XCTAssertEqual(sessions.first?["status"] as? String, "crashed")
        XCTAssertEqual(sessions.first?["report_id"] as? String, run.reportIDs[0])

        let stats = try crashport(["stats", "--reports", reports, "--program", server])
        XCTAssertTrue(stats.stdout.contains("\(server)  -  1  1 (1)  0  0  0.0%  1\n"), stats.stdout)
        let listed = try crashport(["list", "--reports", reports, "--program", server])
        XCTAssertTrue(listed.stdout.hasPrefix("last run of \(server)"), listed.stdout)
        XCTAssertTrue(
            listed.stdout.contains("crashed during launch (1 launch crash in a row), report \(run.reportIDs[0])"),
            listed.stdout)
        XCTAssertFalse(listed.stdout.contains("ended without a crash"), listed.stdout)
        XCTAssertTrue(listed.stdout.contains("\(run.reportIDs[0])  "), "the report is listed: \(listed.stdout)")

        // Under the sidecar the worker's crash comes on its parent's connection: the parent's
        // run ends crashed, though the parent itself said GOODBYE.
        let sidecar = try SidecarProcess(directory: fresh("prefork-sidecar"))
        defer { sidecar.stop() }
        let served = try TestSupport.run(
            [server], environment: ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(served.status, .exited(0), served.stderr)
        let reported = try sidecar.waitForReports(1)
        XCTAssertEqual(reported.first?.signal?.name, "SIGSEGV")
        var runs: [[String: Any]] = []
        try waitUntil("the server's run is on record:\n\(sidecar.log)", timeout: 60) {
            runs = sidecar.sessions().filter { $0["executable"] as? String == server }
            return !runs.isEmpty
        }
        XCTAssertEqual(runs.count, 1, "\(runs)")
        XCTAssertEqual(runs.first?["status"] as? String, "crashed", "\(runs)")
        XCTAssertEqual(runs.first?["report_id"] as? String, sidecar.reportIDs().first)
        XCTAssertEqual(runs.first?["sid"] as? String, reported.first?.session)
    }

    /// Two runs whose library constructor crashes before the stub's constructor installed it
    /// (no crash record: only crashport's waitpid sees them), then a run that starts: its
    /// crashport_last_run counts both as launch crashes.
    func testCrashesBeforeTheStubInstalledAreLaunchCrashes() throws {
        let work = fresh("ctor")
        let program = try app(in: work)
        let library = try TestSupport.compile(
            [TestSupport.fixture("counts/ctor-crash.c")], output: work + "/libctorcrash.so",
            flags: ["-O1", "-g", "-shared", "-fPIC"])
        let reports = fresh("ctor-reports")
        var ids: [String] = []
        for attempt in 1...2 {
            let run = try TestSupport.crashportRun(
                [program, "run", "clean"], reports: reports,
                environment: ["LD_PRELOAD": library, "APP_CTOR_CRASH": "app"])
            XCTAssertEqual(run.result.status, .signaled(SIGSEGV), "attempt \(attempt): \(run.result.stderr)")
            XCTAssertFalse(run.result.stdout.contains("last_run"), "it died before main: \(run.result.stdout)")
            ids = run.reportIDs
            guard ids.count == attempt else { return XCTFail("attempt \(attempt): \(ids)\n\(run.result.stderr)") }
            XCTAssertEqual(try run.event(attempt - 1).kind, .termination, "no record: the parent's view")
        }
        let run = try TestSupport.crashportRun(
            [program, "run", "clean"], reports: reports, environment: ["LD_PRELOAD": library])
        XCTAssertEqual(run.result.status, .exited(0), run.result.stderr)
        XCTAssertEqual(
            lastRun(run.result), "last_run 0 crashed 1 during_launch 1 consecutive 2 report \(ids.last!) enabled 1")
        let stats = try crashport(["stats", "--reports", reports, "--program", program])
        XCTAssertTrue(stats.stdout.contains("\(program)  -  3  2 (2)  0  0  33.3%  0\n"), stats.stdout)
    }

    /// A run SIGKILLed during its launch is a launch crash for the next start (its session stays
    /// abnormal, as Sentry's does); a clean run resets the count.
    func testASIGKILLDuringLaunchIsALaunchCrash() throws {
        let work = fresh("sigkill")
        let program = try app(in: work)
        let reports = fresh("sigkill-reports")
        let killed = try TestSupport.crashportRun([program, "run", "sigkill"], reports: reports)
        XCTAssertEqual(killed.result.status, .signaled(SIGKILL), killed.result.stderr)
        XCTAssertEqual(killed.reportIDs.count, 1, killed.result.stderr)
        XCTAssertEqual(try killed.event().kind, .termination)
        let listed = try crashport(["list", "--reports", reports, "--program", program])
        XCTAssertTrue(
            listed.stdout.contains(
                "ended abnormally during launch (1 launch crash in a row), report \(killed.reportIDs[0])"),
            listed.stdout)
        let next = try TestSupport.crashportRun([program, "run", "clean"], reports: reports)
        XCTAssertEqual(
            lastRun(next.result),
            "last_run 0 crashed 1 during_launch 1 consecutive 1 report \(killed.reportIDs[0]) enabled 1")
        let stats = try crashport(["stats", "--reports", reports, "--program", program])
        XCTAssertTrue(stats.stdout.contains("\(program)  -  2  0 (0)  1  0  100.0%  0\n"), stats.stdout)
        let again = try TestSupport.crashportRun([program, "run", "clean"], reports: reports)
        XCTAssertEqual(lastRun(again.result), "last_run 0 crashed 0 during_launch 0 consecutive 0 report - enabled 1")
    }

    /// Under the sidecar, each start right after a crash (no wait for the report) reads that
    /// crash: the sidecar ends the crashed run as it captures the crash, before the report is
    /// built, and answers a HELLO with every end it has received. The ids it hands out are
    /// those the reports are written under.
    func testTheSidecarCountsACrashAtOnce() throws {
        let work = fresh("sidecar")
        let program = try app(in: work)
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let environment = ["CRASHPORT_SOCKET": sidecar.socket]
        var said: [String] = []
        for _ in 0..<3 {
            let result = try TestSupport.run([program, "run", "crash"], environment: environment)
            XCTAssertEqual(result.status, .signaled(SIGSEGV), result.stderr)
            said.append(lastRun(result))
        }
        let clean = try TestSupport.run([program, "run", "clean"], environment: environment)
        said.append(lastRun(clean))
        _ = try sidecar.waitForReports(3)
        let ids = sidecar.reportIDs()
        XCTAssertEqual(said[0], "last_run -2 crashed 0 during_launch 0 consecutive 0 report - enabled 1")
        for count in 1...3 {
            let reported = try XCTUnwrap(
                said[count].split(separator: " ").dropFirst(9).first.map(String.init), said[count])
            XCTAssertTrue(ids.contains(reported), "\(reported) is one of \(ids)")
            XCTAssertEqual(
                said[count], "last_run 0 crashed 1 during_launch 1 consecutive \(count) report \(reported) enabled 1",
                sidecar.log)
        }
        XCTAssertEqual(Set(said[1...3].map { $0.split(separator: " ")[9] }).count, 3, "three reports: \(said)")
    }
}
