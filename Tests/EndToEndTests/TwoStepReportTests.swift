// End-to-end: a sidecar writes a crash's report in two steps (ReportWriter.writeFirstStep). The
// first, at the crash: the minidump and a captured event (Event.stage "captured": the pc of
// each thread, no names), renamed into place; readers say what it is. The second: the full
// event and the minidump with the code the unwind read renamed over them, the stage gone. A
// watcher stopped between the steps leaves the first, which `show` and `list` name for what it
// is and whose minidump `crashport symbolicate` unwinds and names offline. The second step is
// held with CRASHPORT_TEST_HOLD_SECOND_STEP (a file: while it exists the second step waits) so
// that the state between the steps can be read. A report directory swapped for a symlink
// between the steps gets nothing through it: the second step refuses, the sidecar says why and
// serves on. An upload pass waits (a few seconds at most) for a
// report's second step, and leaves one still captured for the next pass.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class TwoStepReportTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("two-step")

    func fresh(_ name: String) -> String {
        TestSupport.freshDirectory(in: Self.directory, name)
    }

    var waiter: String {
        get throws {
            try Waiter.build(in: Self.directory)
        }
    }

    /// A sidecar whose second steps wait while `hold` exists, and one crash captured under it:
    /// the report's directory and its first event.
    func capturedCrash(_ work: String, hold: String) throws -> (SidecarProcess, String, Event) {
        FileManager.default.createFile(atPath: hold, contents: Data())
        let sidecar = try SidecarProcess(directory: work, environment: ["CRASHPORT_TEST_HOLD_SECOND_STEP": hold])
        let program = try Waiter(
            try waiter, environment: ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(try program.crash().status, .signaled(SIGSEGV))
        try waitUntil("the first step on disk; log:\n\(sidecar.log)", timeout: 60) { sidecar.capturedReportIDs().count == 1 }
        XCTAssertEqual(sidecar.reportIDs(), [], "not whole yet")
        let report = sidecar.reportsDirectory() + "/" + sidecar.capturedReportIDs()[0]
        let event = try Event.decode(try Data(contentsOf: URL(fileURLWithPath: report + "/event.json")))
        return (sidecar, report, event)
    }

    func crashport(_ arguments: [String]) throws -> RunResult { try TestSupport.run([TestSupport.crashport] + arguments) }

    func testTheCapturedReportIsReplacedByTheFullOne() throws {
        let work = fresh("replaced")
        let hold = work + "/hold"
        let (sidecar, report, first) = try capturedCrash(work, hold: hold)
        defer { _ = sidecar.stop() }
        XCTAssertEqual(first.stage, Event.capturedStage)
        XCTAssertEqual(first.signal?.name, "SIGSEGV")
        let crashed = try XCTUnwrap(first.crashedThreadRecord)
        XCTAssertNil(crashed.registers, "in the minidump")
        XCTAssertEqual(crashed.frames?.count, 1, "the pc it stopped at, not unwound")
        XCTAssertEqual(crashed.frames?.first?.module, "waiter")
        XCTAssertNil(crashed.frames?.first?.function, "not symbolicated")
        let dump = try Data(contentsOf: URL(fileURLWithPath: report + "/minidump.dmp"))
        XCTAssertEqual(Array(dump.prefix(4)), Array("MDMP".utf8), "a whole minidump from the first step")

        let id = (report as NSString).lastPathComponent
        let shown = try crashport(["show", id, "--reports", sidecar.reportsDirectory()])
        XCTAssertEqual(shown.status, .exited(0), shown.stderr)
        XCTAssertTrue(shown.stdout.contains("Stage:     captured, not yet unwound or symbolicated"), shown.stdout)
        let listed = try crashport(["list", "--reports", sidecar.reportsDirectory()])
        XCTAssertTrue(listed.stdout.contains("(captured: not yet symbolicated)"), listed.stdout)

        try FileManager.default.removeItem(atPath: hold)
        let whole = try XCTUnwrap(try sidecar.waitForReports(1).first)
        XCTAssertNil(whole.stage)
        XCTAssertEqual(whole.id, first.id)
        XCTAssertEqual(whole.crashedThreadRecord?.frames?.compactMap(\.function).first, "crash_after_input")
        let files = try FileManager.default.contentsOfDirectory(atPath: report).sorted()
        XCTAssertFalse(files.contains { $0.hasSuffix(".new") }, "nothing left of the replacing: \(files)")
        let replaced = try Data(contentsOf: URL(fileURLWithPath: report + "/minidump.dmp"))
        XCTAssertGreaterThan(replaced.count, dump.count, "the second minidump holds the code the unwind read too")
        let after = try crashport(["show", id, "--reports", sidecar.reportsDirectory()])
        XCTAssertFalse(after.stdout.contains("Stage:"), after.stdout)
    }

    /// `crashport upload --dry-run` to a URL nothing listens on (a dry run sends nothing).
    func dryUpload(_ reports: String) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestSupport.crashport)
        process.arguments = ["upload", "--reports", reports, "--url", "http://127.0.0.1:9/", "--dry-run"]
        process.standardOutput = Pipe()
        process.standardError = Pipe()
        return process
    }

    func output(_ process: Process) -> String {
        process.waitUntilExit()
        let out = (process.standardOutput as? Pipe)?.fileHandleForReading.readDataToEndOfFile() ?? Data()
        let err = (process.standardError as? Pipe)?.fileHandleForReading.readDataToEndOfFile() ?? Data()
        return String(decoding: out + err, as: UTF8.self)
    }

    func testAnUploadPassWaitsForTheSecondStep() throws {
        let work = fresh("upload")
        let hold = work + "/hold"
        let (sidecar, report, _) = try capturedCrash(work, hold: hold)
        defer { _ = sidecar.stop() }
        let id = (report as NSString).lastPathComponent
        let upload = dryUpload(sidecar.reportsDirectory())
        try upload.run()
        // The pass has begun (it holds the upload lock), so it meets the report captured.
        let lock = sidecar.reportsDirectory() + "/.crashport-upload.lock"
        try waitUntil("the upload pass holding its lock", timeout: 60) {
            let fd = open(lock, O_RDONLY | O_CLOEXEC)
            defer { if fd >= 0 { close(fd) } }
            return fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0
        }
        try FileManager.default.removeItem(atPath: hold)
        let said = output(upload)
        XCTAssertTrue(said.contains("\(id): would send to http://127.0.0.1:9/"), said)
        XCTAssertFalse(said.contains("still being symbolicated"), said)
    }

    func testAReportSwappedForASymlinkBetweenTheStepsIsLeftAlone() throws {
        let work = fresh("swapped")
        let hold = work + "/hold"
        let (sidecar, report, _) = try capturedCrash(work, hold: hold)
        defer { _ = sidecar.stop() }
        let elsewhere = work + "/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: report, toPath: work + "/moved")
        try FileManager.default.createSymbolicLink(atPath: report, withDestinationPath: elsewhere)
        try FileManager.default.removeItem(atPath: hold)
        try waitUntil("the second step refused; log:\n\(sidecar.log)", timeout: 60) {
            sidecar.log.contains("stays as captured")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: elsewhere), [], "nothing written through the link")
        // The sidecar serves on: the next crash is reported whole.
        let program = try Waiter(
            try waiter, environment: ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(try program.crash().status, .signaled(SIGSEGV))
        let swapped = (report as NSString).lastPathComponent
        try waitUntil("the next report whole; log:\n\(sidecar.log)", timeout: 60) {
            sidecar.reportIDs().filter { $0 != swapped }.count == 1
        }
    }

    func testAReportLeftCapturedByAStoppedWatcherIsStillWhole() throws {
        let work = fresh("left")
        let (sidecar, report, _) = try capturedCrash(work, hold: work + "/hold")
        _ = sidecar.stop(SIGKILL)
        let id = (report as NSString).lastPathComponent
        let shown = try crashport(["show", id, "--reports", sidecar.reportsDirectory()])
        XCTAssertEqual(shown.status, .exited(0), shown.stderr)
        XCTAssertTrue(shown.stdout.contains("crashport symbolicate REPORT/minidump.dmp"), shown.stdout)
        let upload = dryUpload(sidecar.reportsDirectory())
        try upload.run()
        let said = output(upload)
        XCTAssertTrue(said.contains("\(id): still being symbolicated; sent once it is"), said)
        XCTAssertFalse(said.contains("would send"), said)
        let offline = try crashport(["symbolicate", "--format", "json", report + "/minidump.dmp"])
        XCTAssertEqual(offline.status, .exited(0), offline.stderr)
        let event = try Event.decode(Data(offline.stdout.utf8))
        XCTAssertEqual(event.crashedThreadRecord?.frames?.compactMap(\.function).first, "crash_after_input")
    }
}
