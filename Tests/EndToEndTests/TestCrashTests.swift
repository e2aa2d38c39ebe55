// End-to-end: the test crash (crashport_test_crash, `crashport test-crash`; issue 34). A C
// program (Tests/Fixtures/api/test_crash.c) crashing on purpose under `crashport run` dies by
// SIGSEGV as it would without crashport and gets one real report titled as a test, which
// leaves crash-free statistics and the launch-crash count alone, under run and the sidecar;
// `crashport test-crash` writes such a report into --reports, or has a sidecar write it; and
// with a Sentry DSN configured the test crash reaches a collector on 127.0.0.1 (UploadTests'
// Collector) tagged crashport.test, with no session.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class TestCrashTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("test-crash")

    func fresh(_ name: String) -> String {
        TestSupport.freshDirectory(in: Self.directory, name)
    }

    /// No upload destination from the environment or a crashport.toml of the user running tests.
    static let noUpload = ["CRASHPORT_SENTRY_DSN": "", "CRASHPORT_UPLOAD_URL": "", "CRASHPORT_CONFIG": ""]

    func program(in directory: String) throws -> String {
        let libraries = (try TestSupport.stub() as NSString).deletingLastPathComponent
        return try TestSupport.compile(
            [TestSupport.fixture("api/test_crash.c")], output: directory + "/test-crash-app",
            flags: ["-O0", "-g", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-Wl,--no-as-needed", "-lcrashport"])
    }

    func crashport(_ arguments: [String], environment: [String: String] = noUpload) throws -> RunResult {
        try TestSupport.run([TestSupport.crashport] + arguments, environment: environment)
    }

    func lastRun(_ result: RunResult) -> String {
        result.stdout.split(separator: "\n").first { $0.hasPrefix("last_run ") }.map(String.init) ?? result.stderr
    }

    /// Under `crashport run`: SIGSEGV as without crashport, one report titled as a test, its
    /// session `test-crash`, crash-free still 100 %, and the next start sees the crash (with its
    /// report) but no launch crash.
    func testACProgramsTestCrashUnderRun() throws {
        let work = fresh("run")
        let app = try program(in: work)
        let bare = try TestSupport.run([app, "crash"])
        XCTAssertEqual(bare.status, .signaled(SIGSEGV), "without crashport: \(bare.stderr)")

        let reports = fresh("run-reports")
        let clean = try TestSupport.crashportRun([app, "clean"], reports: reports, environment: Self.noUpload)
        XCTAssertEqual(clean.result.status, .exited(0), clean.result.stderr)
        let run = try TestSupport.crashportRun([app, "crash"], reports: reports, environment: Self.noUpload)
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let event = try run.event()
        XCTAssertEqual(event.kind, .crash)
        XCTAssertEqual(event.test, true)
        XCTAssertEqual(event.signal?.name, "SIGSEGV")
        XCTAssertTrue(event.title?.hasPrefix("test crash: SIGSEGV") == true, event.title ?? "no title")
        XCTAssertEqual(event.culprit?.function, "check_crash_reporting", "\(event.crashedFunctions)")
        XCTAssertTrue(containsInOrder(event.crashedFunctions, ["crashport_test_crash", "check_crash_reporting", "main"]))
        XCTAssertTrue(
            event.breadcrumbs?.contains { $0.category == "crashport" && $0.message == "crashport_test_crash()" } == true,
            "\(event.breadcrumbs ?? [])")

        let sessions = try String(contentsOfFile: reports + "/.crashport-sessions.jsonl", encoding: .utf8)
            .split(separator: "\n").compactMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(sessions.map { $0["status"] as? String }, ["exited", "test-crash"])
        XCTAssertEqual(sessions.last?["report_id"] as? String, run.reportIDs[0])

        let stats = try crashport(["stats", "--reports", reports, "--program", app])
        XCTAssertEqual(stats.status, .exited(0), stats.stderr)
        XCTAssertTrue(stats.stdout.contains("\(app)  -  1  0 (0)  0  0  100.0%  0\n"), stats.stdout)
        XCTAssertTrue(stats.stdout.contains("test crashes (not launches, not in crash-free): 1 of \(app)\n"), stats.stdout)
        let listed = try crashport(["list", "--reports", reports, "--program", app])
        XCTAssertTrue(listed.stdout.contains("crashed on purpose (a test crash)"), listed.stdout)

        let next = try TestSupport.crashportRun([app, "clean"], reports: reports, environment: Self.noUpload)
        XCTAssertEqual(lastRun(next.result), "last_run 0 crashed 1 during_launch 0 consecutive 0 report \(run.reportIDs[0])")
    }

    /// Under the sidecar: the test crash's report is in its directory, titled as a test, and the
    /// run ends as a test crash (not crashed), which the program's next start hears of.
    func testACProgramsTestCrashUnderTheSidecar() throws {
        let work = fresh("sidecar")
        let app = try program(in: work)
        let sidecar = try SidecarProcess(directory: fresh("sidecar-watch"), environment: Self.noUpload)
        defer { sidecar.stop() }
        let environment = ["CRASHPORT_SOCKET": sidecar.socket]
        let crashed = try TestSupport.run([app, "crash"], environment: environment)
        XCTAssertEqual(crashed.status, .signaled(SIGSEGV), crashed.stderr)
        let events = try sidecar.waitForReports(1)
        XCTAssertEqual(events.first?.test, true)
        XCTAssertTrue(events.first?.title?.hasPrefix("test crash: SIGSEGV") == true, events.first?.title ?? "no title")
        var runs: [[String: Any]] = []
        try waitUntil("the run is on record:\n\(sidecar.log)", timeout: 60) {
            runs = sidecar.sessions().filter { $0["executable"] as? String == app }
            return !runs.isEmpty
        }
        XCTAssertEqual(runs.map { $0["status"] as? String }, ["test-crash"], "\(runs)")
        let next = try TestSupport.run([app, "clean"], environment: environment)
        XCTAssertEqual(
            lastRun(next), "last_run 0 crashed 1 during_launch 0 consecutive 0 report \(sidecar.reportIDs().first ?? "?")")
    }

    /// `crashport test-crash --reports DIR`: one test report in DIR, its id and path printed.
    func testTestCrashCommandWritesAReport() throws {
        let reports = fresh("command")
        var environment = Self.noUpload
        environment["CRASHPORT_STUB"] = try TestSupport.stub()
        let result = try crashport(["test-crash", "--reports", reports], environment: environment)
        XCTAssertEqual(result.status, .exited(0), result.stderr + result.stdout)
        let ids = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }
        guard ids.count == 1 else { return XCTFail("\(ids): \(result.stderr)") }
        XCTAssertTrue(result.stdout.hasPrefix("test crash reported: \(ids[0])\n"), result.stdout)
        XCTAssertTrue(result.stdout.contains("  report: \(reports)/\(ids[0])\n"), result.stdout)
        XCTAssertTrue(result.stdout.contains("no upload destination configured"), result.stdout)
        let event = try Event.decode(try Data(contentsOf: URL(fileURLWithPath: reports + "/" + ids[0] + "/event.json")))
        XCTAssertEqual(event.test, true)
        XCTAssertEqual(event.signal?.name, "SIGSEGV")
        XCTAssertTrue(event.title?.hasPrefix("test crash: SIGSEGV") == true, event.title ?? "no title")
        XCTAssertTrue(result.stdout.contains("  \(event.title ?? "?")\n"), result.stdout)
        let stats = try crashport(["stats", "--reports", reports])
        XCTAssertTrue(stats.stdout.contains("test crashes (not launches, not in crash-free): 1 of "), stats.stdout)
        XCTAssertFalse(stats.stdout.contains("launches  crashes"), "no launch to count: \(stats.stdout)")
    }

    /// `crashport test-crash --socket PATH`: the crash goes to that sidecar, and the id it prints
    /// (heard from the sidecar at the next start) names the test report in the sidecar's directory.
    func testTestCrashCommandThroughTheSidecar() throws {
        let sidecar = try SidecarProcess(directory: fresh("command-sidecar"), environment: Self.noUpload)
        defer { sidecar.stop() }
        var environment = Self.noUpload
        environment["CRASHPORT_STUB"] = try TestSupport.stub()
        let result = try crashport(["test-crash", "--socket", sidecar.socket], environment: environment)
        XCTAssertEqual(result.status, .exited(0), result.stderr + result.stdout)
        let prefix = "test crash reported to the sidecar at \(sidecar.socket): "
        XCTAssertTrue(result.stdout.hasPrefix(prefix), result.stdout)
        let id = String(result.stdout.dropFirst(prefix.count).prefix { $0 != "\n" })
        let events = try sidecar.waitForReports(1)
        XCTAssertEqual(sidecar.reportIDs(), [id], result.stdout)
        XCTAssertEqual(events.first?.test, true)
        XCTAssertTrue(events.first?.title?.hasPrefix("test crash: SIGSEGV") == true, events.first?.title ?? "no title")

        // CRASHPORT_SOCKET does the same when no --reports is given.
        environment["CRASHPORT_SOCKET"] = sidecar.socket
        let inherited = try crashport(["test-crash"], environment: environment)
        XCTAssertEqual(inherited.status, .exited(0), inherited.stderr + inherited.stdout)
        XCTAssertTrue(inherited.stdout.hasPrefix(prefix), inherited.stdout)
        XCTAssertEqual(try sidecar.waitForReports(2).filter { $0.test == true }.count, 2)
    }

    /// With a Sentry DSN in the environment, the test crash is uploaded as any crash: its event
    /// tagged crashport.test=true and titled as a test, and no session (it is no run to count).
    func testTestCrashReachesACollector() throws {
        let sentry = try Collector(
            answers: [["status": 200, "body": "{\"id\":\"$EVENT_ID\"}"]], directory: fresh("collector"))
        let reports = fresh("upload")
        var environment = Self.noUpload
        environment["CRASHPORT_STUB"] = try TestSupport.stub()
        environment["CRASHPORT_SENTRY_DSN"] = "http://publickey@127.0.0.1:\(sentry.port)/42"
        environment["CRASHPORT_RELEASE"] = "ledger@2.1"
        let result = try crashport(["test-crash", "--reports", reports], environment: environment)
        XCTAssertEqual(result.status, .exited(0), result.stderr + result.stdout)
        XCTAssertTrue(result.stdout.contains("  uploading in the background (log: \(reports)/"), result.stdout)
        try waitUntil("the test crash reaches the collector", timeout: 60) { sentry.requests.count == 1 }
        let items = sentry.requests.first?["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(items.map { $0["type"] as? String }, ["event", "attachment"], "no session: \(items)")
        let saved = try XCTUnwrap(items.first?["saved"] as? String)
        let payload = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: saved))) as? [String: Any])
        let tags = payload["tags"] as? [String: String] ?? [:]
        XCTAssertEqual(tags["crashport.test"], "true", "\(tags)")
        XCTAssertEqual(payload["release"] as? String, "ledger@2.1")
    }
}
