// End-to-end: a crash record's values are the client's word, and a word no real crash would
// give must not stop the sidecar (issue 30, attack 3). A real `crashport watch` and a real
// client (Tests/Fixtures/sidecar/wild-record.py) that sends a record about its own live
// process, so every check of who may send what passes and the capture runs on it; then a real
// crash of a normal preloaded program must still be reported.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class RecordTrustTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("record-trust")

    func fresh(_ name: String) -> String {
        TestSupport.freshDirectory(in: Self.directory, name)
    }

    /// SIGABRT, rsp = 2^64-1 and a stack copy starting at 0, about the client's own live
    /// process: the sidecar answers it (a verdict, and a report of what could be made of it),
    /// stays up, and reports the next real crash.
    func testWildStackRecordDoesNotStopTheSidecar() throws {
        let sidecar = try SidecarProcess(directory: fresh("wild-stack"))
        let client = try TestSupport.run(
            ["/usr/bin/python3", TestSupport.fixture("sidecar/wild-record.py"), sidecar.socket], timeout: 90)
        XCTAssertEqual(client.status, .exited(0), client.stderr)
        // "closed": the reply socket ended unanswered, the sidecar died capturing the record.
        let answer = client.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        guard answer == "verdict" else {
            return XCTFail("the sidecar did not answer the record (\(answer)):\n\(sidecar.log.suffix(3000))")
        }
        // The record's own report: SIGABRT, made of what the record holds, written in full.
        let wild = try sidecar.waitForReports(1)
        XCTAssertEqual(wild.first?.signal?.name, "SIGABRT")
        XCTAssertTrue(sidecar.isRunning, "the sidecar died on the record:\n\(sidecar.log.suffix(3000))")

        let waiter = try Waiter.build(in: Self.directory)
        let program = try Waiter(
            waiter, environment: ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        let ended = try program.crash()
        XCTAssertEqual(ended.status, .signaled(SIGSEGV), ended.stderr)
        let events = try sidecar.waitForReports(2)
        let real = events.first { $0.process?.pid?.rawValue == program.pid }
        XCTAssertEqual(real?.signal?.name, "SIGSEGV", "the real crash is reported after the record:\n\(sidecar.log)")
        XCTAssertEqual(real?.crashedThreadRecord?.frames?.compactMap(\.function).first, "crash_after_input")
        XCTAssertEqual(sidecar.stop(), 0, "the sidecar survived")
    }
}
