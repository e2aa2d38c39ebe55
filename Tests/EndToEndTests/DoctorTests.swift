// End-to-end: `crashport doctor` on this machine. Needs ptrace of a child (allowed here).

import TestSupport
import XCTest

final class DoctorTests: XCTestCase {
    func testDoctorTracesATestChildAndFindsTheStub() throws {
        let reports = TestSupport.temporaryDirectory("doctor")
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let result = try TestSupport.run(
            [TestSupport.crashport, "doctor", "--reports", reports],
            environment: ["CRASHPORT_STUB": try TestSupport.stub()])
        XCTAssertEqual(result.status, .exited(0), result.stdout + result.stderr)
        XCTAssertTrue(result.stdout.contains("ptrace: a test child was suspended"), result.stdout)
        XCTAssertTrue(result.stdout.contains("stub: "), result.stdout)
        XCTAssertTrue(result.stdout.contains("(writable)"), result.stdout)
        // What GOTRACEBACK=crash adds for Go programs, whether it is set or not.
        XCTAssertTrue(result.stdout.contains("GOTRACEBACK=crash makes every one abort with SIGABRT"), result.stdout)
        let crash = try TestSupport.run(
            [TestSupport.crashport, "doctor", "--reports", reports],
            environment: ["CRASHPORT_STUB": try TestSupport.stub(), "GOTRACEBACK": "crash"])
        XCTAssertTrue(crash.stdout.contains("Go: GOTRACEBACK=crash: a Go program's fatal error"), crash.stdout)

        // A reports directory that does not exist yet is checked, not made: doctor leaves nothing.
        let later = reports + "/not-yet/reports"
        let fresh = try TestSupport.run(
            [TestSupport.crashport, "doctor", "--reports", later], environment: ["CRASHPORT_STUB": try TestSupport.stub()])
        XCTAssertTrue(fresh.stdout.contains("reports: \(later) (made at the first report: \(reports) is writable)"), fresh.stdout)
        XCTAssertFalse(FileManager.default.fileExists(atPath: reports + "/not-yet"))

        let broken = try TestSupport.run(
            [TestSupport.crashport, "doctor", "--reports", "/proc/version/reports"],
            environment: ["CRASHPORT_STUB": try TestSupport.stub()])
        XCTAssertEqual(broken.status, .exited(1))
        XCTAssertTrue(broken.stdout.contains("problem"), broken.stdout)
    }
}
