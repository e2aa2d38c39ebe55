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

    func testQuotaRemovesTheOldestReports() throws {
        let program = try TestSupport.corpus()[0].path
        let reports = TestSupport.temporaryDirectory("quota")
        defer { try? FileManager.default.removeItem(atPath: reports) }
        var written: [String] = []
        for mode in ["null", "fpe", "ill", "bus"] {
            let watched = try TestSupport.crashportRun([program, mode], options: ["--max-reports", "2"], reports: reports)
            written += watched.reportIDs.filter { !written.contains($0) }
            if mode == "bus" { XCTAssertTrue(watched.result.stderr.contains("quota: removed"), watched.result.stderr) }
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }.sorted()
        XCTAssertEqual(left.count, 2)
        XCTAssertEqual(left, Array(written.suffix(2)).sorted(), "the newest two are kept")
    }

    /// The reports directory removed while the program runs: it is made again.
    func testReportsDirectoryRemovedWhileRunning() throws {
        let program = try TestSupport.compile(
            [TestSupport.fixture("coexist/stress.c")], output: TestSupport.temporaryDirectory("gone") + "/stress",
            flags: ["-O2", "-g", "-pthread"])
        let parent = TestSupport.temporaryDirectory("gone-reports")
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let reports = parent + "/reports"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestSupport.crashport)
        process.arguments = ["run", "--reports", reports, "--", program, "slow"]
        process.environment = ProcessInfo.processInfo.environment.merging(["CRASHPORT_STUB": try TestSupport.stub()]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = Pipe()
        try process.run()
        _ = output.fileHandleForReading.availableData  // the program is running
        try FileManager.default.removeItem(atPath: reports)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, SIGSEGV)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }.count, 1)
    }

    /// A full disk: a clear log line, and the process still dies correctly.
    func testDiskFull() throws {
        let mountPoint = TestSupport.temporaryDirectory("full")
        defer { try? FileManager.default.removeItem(atPath: mountPoint) }
        let mount = try TestSupport.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", mountPoint])
        guard mount.status == .exited(0) else {
            throw XCTSkip("needs to mount a small tmpfs (root in a machine that allows mounts): \(mount.stderr)")
        }
        defer { _ = try? TestSupport.run(["umount", mountPoint]) }
        let program = try TestSupport.corpus()[0].path
        let watched = try TestSupport.crashportRun([program, "null"], reports: mountPoint + "/reports")
        XCTAssertEqual(watched.result.status, .signaled(11))
        XCTAssertTrue(watched.result.stderr.contains("could not write the report"), watched.result.stderr)
        XCTAssertTrue(watched.result.stderr.contains("No space left on device"), watched.result.stderr)
        // No half-written report is left behind; what fits is a short termination report that
        // says the full one could not be written.
        XCTAssertLessThanOrEqual(watched.reportIDs.count, 1)
        if watched.reportIDs.count == 1 {
            let event = try watched.event()
            XCTAssertEqual(event.kind, "termination")
            XCTAssertTrue(event.notes?.first?.contains("could not be written") ?? false, "\(event.notes ?? [])")
            XCTAssertFalse(FileManager.default.fileExists(atPath: watched.minidumpPath()))
        }
    }
}
