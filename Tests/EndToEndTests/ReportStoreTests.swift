// End-to-end: `crashport list` and `crashport show` over real reports, and over broken ones.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class ReportStoreTests: XCTestCase {
    func testListAndShowSurviveBrokenReports() throws {
        let program = try TestSupport.corpus()[0].path
        let reports = TestSupport.temporaryDirectory("store")
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let first = try TestSupport.crashportRun([program, "null"], reports: reports)
        let second = try TestSupport.crashportRun([program, "fpe"], reports: reports)
        XCTAssertEqual(second.reportIDs.count, 2)
        let (older, newer) = (first.reportIDs[0], second.reportIDs.first { $0 != first.reportIDs[0] }!)

        let list = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports])
        XCTAssertEqual(list.status, .exited(0))
        let lines = list.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 2)
        XCTAssertTrue(lines[0].hasPrefix(newer) && lines[0].contains("SIGFPE") && lines[0].contains("crash_fpe"), list.stdout)
        XCTAssertTrue(lines[1].hasPrefix(older) && lines[1].contains("SIGSEGV") && lines[1].contains("crash_null"), list.stdout)

        let text = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, older])
        XCTAssertEqual(text.status, .exited(0))
        XCTAssertTrue(text.stdout.hasPrefix("\(program) (pid"), text.stdout)
        XCTAssertTrue(text.stdout.contains("(crashed)"))
        XCTAssertTrue(text.stdout.contains("crash_null"))
        XCTAssertTrue(text.stdout.contains("Modules:"))
        let json = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, "--format", "json", older])
        XCTAssertEqual(try Event.decode(Data(json.stdout.utf8)).id, older)

        // A truncated event.json and a half-written report directory.
        let olderEvent = reports + "/" + older + "/event.json"
        let bytes = try Data(contentsOf: URL(fileURLWithPath: olderEvent))
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: olderEvent))
        try FileManager.default.createDirectory(atPath: reports + "/20991231T000000Z-1-half", withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: reports + "/.tmp-in-progress", withIntermediateDirectories: false)

        let broken = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, older])
        XCTAssertEqual(broken.status, .exited(1))
        XCTAssertTrue(broken.stderr.contains("event.json is not valid"), broken.stderr)
        let half = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, "20991231T000000Z-1-half"])
        XCTAssertEqual(half.status, .exited(1))
        XCTAssertTrue(half.stderr.contains("event.json is missing"), half.stderr)
        let missing = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, "nope"])
        XCTAssertTrue(missing.stderr.contains("no report named nope"), missing.stderr)

        let listAgain = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports])
        XCTAssertEqual(listAgain.status, .exited(0))
        XCTAssertTrue(listAgain.stdout.contains(newer), "the good report is still listed")
        XCTAssertFalse(listAgain.stdout.contains("in-progress"))
        XCTAssertTrue(listAgain.stderr.contains(older) && listAgain.stderr.contains("20991231T000000Z-1-half"), listAgain.stderr)
    }
}
