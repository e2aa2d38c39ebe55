// End-to-end: a C++ program that sets its own std::terminate handler after crashport installed
// (Tests/Fixtures/api/terminate_handler.cpp) still gets a report with the uncaught exception's
// type and what(), and its handler still runs: libcrashport.so interposes std::set_terminate
// and std::get_terminate, so the program's handler becomes the next in crashport's chain, as a
// signal handler does. Preloaded by `crashport run`, linked with -lcrashport (through a sidecar,
// nothing preloaded), and a handler set before install.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class TerminateHandlerTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("terminate-handler")

    static let exception = ExceptionRecord(type: "config_error", message: "the config file is missing")

    /// The fixture, built plainly (`linked` false: the stub only preloaded) or with -lcrashport,
    /// which the compiler driver puts before libstdc++.
    func program(linked: Bool) throws -> String {
        let libraries = (try TestSupport.stub() as NSString).deletingLastPathComponent
        return try TestSupport.compile(
            [TestSupport.fixture("api/terminate_handler.cpp")],
            output: Self.directory + (linked ? "/terminate-linked" : "/terminate-plain"), compiler: "g++",
            flags: ["-O1", "-g"],
            linkFlags: linked ? ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"] : [])
    }

    /// What the program prints when it sees its own handlers, and crashport's nowhere.
    static let ownHandlers = [
        "first is the default 1", "null gives the default 1", "previous is the default 1", "get gives the program's 1",
        "program handler ran",
    ]

    func assertReported(_ event: Event, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(event.exception, Self.exception, file: file, line: line)
        XCTAssertEqual(
            event.reason, "uncaught exception config_error: the config file is missing", file: file, line: line)
        XCTAssertTrue(event.title?.contains("uncaught exception config_error") == true, event.title ?? "", file: file, line: line)
    }

    /// Under `crashport run`, preloaded and linked alike: the report has the exception, the
    /// program sees only its own handlers, its handler runs and libstdc++'s after it.
    func testAHandlerSetAfterInstallIsChainedUnderRun() throws {
        for linked in [false, true] {
            let run = try TestSupport.crashportRun([try program(linked: linked), "after"])
            defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
            XCTAssertEqual(run.result.status, .signaled(SIGABRT), "linked \(linked): \(run.result.stderr)")
            for said in Self.ownHandlers {
                XCTAssertTrue(run.result.stdout.contains(said + "\n"), "linked \(linked): \(run.result.stdout)")
            }
            XCTAssertTrue(
                run.result.stderr.contains("terminate called after throwing an instance of 'config_error'"),
                run.result.stderr)
            guard run.reportIDs.count == 1 else {
                XCTFail("linked \(linked): \(run.reportIDs.count) reports: \(run.result.stderr)")
                continue
            }
            assertReported(try run.event())
        }
    }

    /// Linked with -lcrashport and reporting to a sidecar: nothing is preloaded, the link order
    /// alone puts crashport's std::set_terminate first.
    func testAHandlerSetAfterInstallIsChainedWhenLinked() throws {
        let work = Self.directory + "/sidecar-" + UUID().uuidString.prefix(6)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let result = try TestSupport.run(
            [try program(linked: true), "after"], environment: ["CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(result.status, .signaled(SIGABRT), result.stderr)
        for said in Self.ownHandlers { XCTAssertTrue(result.stdout.contains(said + "\n"), result.stdout) }
        let events = try sidecar.waitForReports(1)
        guard let event = events.first else { return XCTFail("no report") }
        assertReported(event)
    }

    /// A handler set before install is kept as it was: crashport's runs first, then it.
    func testAHandlerSetBeforeInstallIsKept() throws {
        let run = try TestSupport.crashportRun(
            [try program(linked: false), "before"], environment: ["CRASHPORT_INSTALL": "manual"])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .signaled(SIGABRT), run.result.stderr)
        XCTAssertTrue(run.result.stdout.contains("get gives the program's 1\nprogram handler ran\n"), run.result.stdout)
        guard run.reportIDs.count == 1 else { return XCTFail("\(run.reportIDs.count) reports: \(run.result.stderr)") }
        assertReported(try run.event())
    }
}
