// End-to-end: the send outcome in the app. examples/c/last-report.c crashes under `crashport
// run` and a sidecar; `crashport upload` sends its report to a collector on 127.0.0.1 started
// here (Sentry's envelope endpoint); at its next start crashport_last_run_detail says the report
// was sent, with the collector's id, or, after a 401, that it failed and why; and
// crashport_report_states lists its recent reports with their states at any time.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class SendOutcomeTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("send-outcome")

    func program(in directory: String) throws -> String {
        let libraries = (try TestSupport.stub() as NSString).deletingLastPathComponent
        return try TestSupport.compile(
            [TestSupport.repositoryRoot + "/examples/c/last-report.c"], output: directory + "/last-report",
            flags: ["-O1", "-g", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
    }

    /// Uploads every report in `reports` to a Sentry collector answering `status`; the ids it
    /// answered with (Sentry's: the envelope's event id).
    func upload(_ reports: String, status: Int, in work: String) throws -> RunResult {
        let sentry = try Collector(
            answers: [["status": status, "body": status == 200 ? "{\"id\":\"$EVENT_ID\"}" : "{\"detail\":\"bad key\"}"]],
            directory: work)
        return try TestSupport.run(
            [
                TestSupport.crashport, "upload", "--reports", reports, "--sentry-dsn",
                "http://publickey@127.0.0.1:\(sentry.port)/42",
            ])
    }

    /// The server id upload.json keeps for report `id`.
    func serverID(_ reports: String, _ id: String) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: reports + "/" + id + "/upload.json"))
        let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let destinations = json?["destinations"] as? [String: [String: Any]] ?? [:]
        return try XCTUnwrap(destinations.values.compactMap { $0["server_id"] as? String }.first, "\(destinations)")
    }

    func testSentAndFailedUnderRun() throws {
        let work = TestSupport.freshDirectory(in: Self.directory, "run")
        let program = try program(in: work)
        let reports = work + "/reports"
        func crash() throws -> String {
            let crashed = try TestSupport.crashportRun([program, "crash"], reports: reports)
            XCTAssertEqual(crashed.result.status, .signaled(SIGSEGV), crashed.result.stderr)
            return try XCTUnwrap(crashed.reportIDs.last)
        }
        func start() throws -> String { try TestSupport.crashportRun([program, "states"], reports: reports).result.stdout }

        // Sent: the next start says so, with the collector's id.
        let first = try crash()
        XCTAssertEqual(try upload(reports, status: 200, in: work).status, .exited(0))
        let id = try serverID(reports, first)
        var said = try start()
        XCTAssertTrue(said.contains("your last crash report was sent (id \(id))\n"), said)
        XCTAssertTrue(said.contains("report \(first) crash: sent \(id) \n"), said)

        // Not sent yet, and no destination configured for the watcher: the app says so.
        let second = try crash()
        said = try start()
        XCTAssertTrue(said.contains("your last crash report is not sent: no upload destination is configured"), said)

        // A third crash; both unsent reports' uploads get a 401: failed for good, and why.
        let third = try crash()
        XCTAssertEqual(try upload(reports, status: 401, in: work).status, .exited(1))
        said = try start()
        XCTAssertTrue(said.contains("your last crash report could not be sent: HTTP 401"), said)
        // Newest first.
        let lines = said.split(separator: "\n").filter { $0.hasPrefix("report ") }
        XCTAssertEqual(lines.count, 3, "\(lines)")
        XCTAssertTrue(lines[0].hasPrefix("report \(third) crash: failed - HTTP 401"), "\(lines)")
        XCTAssertTrue(lines[1].hasPrefix("report \(second) crash: failed - HTTP 401"), "\(lines)")
        XCTAssertTrue(lines[2].hasPrefix("report \(first) crash: sent \(id)"), "\(lines)")
    }

    func testAwaitingConsentAndSentThroughTheSidecar() throws {
        let work = TestSupport.freshDirectory(in: Self.directory, "sidecar")
        let program = try program(in: work)
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let environment = ["CRASHPORT_SOCKET": sidecar.socket]
        let reports = sidecar.reportsDirectory()
        XCTAssertEqual(try TestSupport.run([TestSupport.crashport, "consent", "ask", "--reports", reports]).status, .exited(0))
        var crashes = 0
        func crash() throws -> String {
            let crashed = try TestSupport.run([program, "crash"], environment: environment)
            XCTAssertEqual(crashed.status, .signaled(SIGSEGV), crashed.stderr)
            crashes += 1
            _ = try sidecar.waitForReports(crashes)
            let id = try XCTUnwrap(sidecar.reportIDs().sorted().last)
            try waitUntil("the run history names the report", timeout: 30) {
                ((try? String(contentsOfFile: reports + "/.crashport-runs.json", encoding: .utf8)) ?? "").contains(id)
            }
            return id
        }
        let first = try crash()
        var said = try TestSupport.run([program, "states"], environment: environment).stdout
        XCTAssertTrue(said.contains("your last crash report waits for your consent"), said)
        XCTAssertTrue(said.contains("report \(first) crash: awaiting consent"), said)

        let second = try crash()
        XCTAssertEqual(try TestSupport.run([TestSupport.crashport, "send", "--reports", reports, second]).status, .exited(0))
        XCTAssertEqual(try upload(reports, status: 200, in: work).status, .exited(0))
        let server = try serverID(reports, second)
        said = try TestSupport.run([program, "states"], environment: environment).stdout
        XCTAssertTrue(said.contains("your last crash report was sent (id \(server))"), said)
        XCTAssertTrue(said.contains("report \(second) crash: sent \(server)"), said)
        XCTAssertTrue(said.contains("report \(first) crash: awaiting consent"), said)
    }
}
