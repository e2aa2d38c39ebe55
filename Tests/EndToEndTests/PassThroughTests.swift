// End-to-end: what `crashport run` must not change about a program that does not crash, and
// what it says about bad input.

import ReportModel
import TestSupport
import XCTest

final class PassThroughTests: XCTestCase {
    var program: String { get throws { try TestSupport.corpus()[0].path } }

    func testExitCodeIsPassedThroughAndNoReportIsWritten() throws {
        for code in ["0", "7", "255"] {
            let watched = try TestSupport.crashportRun([try program, "exit", code])
            defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
            XCTAssertEqual(watched.result.status, .exited(Int32(code)!))
            XCTAssertEqual(watched.reportIDs, [])
            XCTAssertEqual(watched.result.stderr, "", "crashport must say nothing when nothing crashed")
        }
    }

    func testStdinStdoutArgumentsAndEnvironmentAreUntouched() throws {
        let input = "line one\nline two\n" + String(repeating: "x", count: 100_000) + "\n"
        let watched = try TestSupport.crashportRun(
            [try program, "echo", "a b", "--flag", ""], environment: ["CORPUS_VALUE": "kept"], input: input)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .exited(0))
        XCTAssertEqual(watched.result.stdout, input, "crashport must not write to the program's stdout")
        XCTAssertEqual(watched.result.stderr, "arg:a b\narg:--flag\narg:\nenv:kept\n")
    }

    func testProgramNotFound() throws {
        let watched = try TestSupport.crashportRun(["no-such-program-\(getpid())"])
        XCTAssertEqual(watched.result.status, .exited(127))
        XCTAssertTrue(watched.result.stderr.contains("command not found"), watched.result.stderr)
    }

    func testProgramNotExecutable() throws {
        let directory = TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/not-executable"
        _ = FileManager.default.createFile(
            atPath: path, contents: Data("#!/bin/sh\n".utf8), attributes: [.posixPermissions: 0o644])
        let watched = try TestSupport.crashportRun([path])
        XCTAssertEqual(watched.result.status, .exited(126))
        XCTAssertTrue(watched.result.stderr.contains("permission denied"), watched.result.stderr)
        let directoryRun = try TestSupport.crashportRun([directory])
        XCTAssertEqual(directoryRun.result.status, .exited(126))
        XCTAssertTrue(directoryRun.result.stderr.contains("is a directory"), directoryRun.result.stderr)
    }

    func testUnwritableReportsDirectoryFailsBeforeTheProgramStarts() throws {
        let directory = TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A path under a regular file can never be created, even by root.
        _ = FileManager.default.createFile(atPath: directory + "/file", contents: Data())
        let marker = directory + "/started"
        let watched = try TestSupport.crashportRun([try program, "marker", marker], reports: directory + "/file/reports")
        XCTAssertEqual(watched.result.status, .exited(125))
        XCTAssertTrue(watched.result.stderr.contains("reports directory"), watched.result.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "the program must not start")
    }

    /// Hostile messages on the socket are rejected with a reason; the watcher neither crashes
    /// nor hangs, and the real crash that follows is still reported.
    func testMalformedMessagesAreRejectedAndTheCrashIsStillReported() throws {
        let watched = try TestSupport.crashportRun([try program, "garbage"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(11))
        XCTAssertEqual(watched.reportIDs.count, 1)
        let stderr = watched.result.stderr
        XCTAssertTrue(stderr.contains("bad magic"), stderr)
        XCTAssertTrue(stderr.contains("unsupported protocol version 99"), stderr)
        XCTAssertTrue(stderr.contains("declared size 9999"), stderr)
        XCTAssertTrue(stderr.contains("carried 0 descriptors") || stderr.contains("crash record of"), stderr)
    }
}
