// End-to-end: how `crashport run` splits its own options from the program's command line,
// with the real executable. Help and unknown options before the program are crashport's;
// everything from the program on (or after `--`) is the program's, `--help` included.

import Foundation
import TestSupport
import XCTest

final class CommandLineTests: XCTestCase {
    /// `crashport run ARGS...` with the stub from this tree and a fresh reports directory.
    func crashportRun(_ arguments: [String]) throws -> RunResult {
        let reports = TestSupport.temporaryDirectory("cli")
        defer { try? FileManager.default.removeItem(atPath: reports) }
        return try TestSupport.run(
            [TestSupport.crashport, "run", "--reports", reports] + arguments,
            environment: ["CRASHPORT_STUB": try TestSupport.stub()])
    }

    /// A program that prints each of its arguments in brackets.
    let echoArguments = ["/bin/sh", "-c", "printf '[%s]' \"$@\"", "sh"]

    func testHelpBeforeTheProgramPrintsRunsHelp() throws {
        for flag in ["--help", "-h"] {
            for arguments in [[flag], [flag, "--", "/bin/true"], ["--no-ptrace", flag]] {
                let result = try crashportRun(arguments)
                XCTAssertEqual(result.status, .exited(0), "\(arguments): \(result.stderr)")
                XCTAssertTrue(result.stdout.contains("USAGE: crashport run"), "\(arguments): \(result.stdout)")
                XCTAssertTrue(result.stdout.contains("--max-reports"), result.stdout)
                XCTAssertFalse(result.stderr.contains("command not found"), result.stderr)
            }
        }
    }

    func testHelpAfterTheProgramIsTheProgramsArgument() throws {
        let afterTerminator = try crashportRun(["--"] + echoArguments + ["--help", "-h"])
        XCTAssertEqual(afterTerminator.status, .exited(0), afterTerminator.stderr)
        XCTAssertEqual(afterTerminator.stdout, "[--help][-h]")

        let withoutTerminator = try crashportRun(echoArguments + ["--help"])
        XCTAssertEqual(withoutTerminator.status, .exited(0), withoutTerminator.stderr)
        XCTAssertEqual(withoutTerminator.stdout, "[--help]")

        let options = try crashportRun(["--no-ptrace", "--"] + echoArguments + ["--bogus", "--reports", "x"])
        XCTAssertEqual(options.status, .exited(0), options.stderr)
        XCTAssertEqual(options.stdout, "[--bogus][--reports][x]")
    }

    func testUnknownOptionBeforeTheProgramIsAUsageError() throws {
        let marker = TestSupport.temporaryDirectory("cli-marker") + "/ran"
        defer { try? FileManager.default.removeItem(atPath: (marker as NSString).deletingLastPathComponent) }
        let program = ["/bin/sh", "-c", "touch '\(marker)'"]
        for option in ["--bogus", "-x"] {
            let result = try crashportRun([option, "--"] + program)
            XCTAssertEqual(result.status, .exited(64), "\(option): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("unknown option '\(option)'"), result.stderr)
            XCTAssertFalse(result.stderr.contains("command not found"), result.stderr)
            XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "\(option): the program must not run")
        }
        // The same words after `--` or after the program are passed on.
        let passed = try crashportRun(["--"] + program + ["--bogus"])
        XCTAssertEqual(passed.status, .exited(0), passed.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: marker))
    }
}
