// RuntimeCrashLogs: the JVM's hs_err file and Node's report parsed from real files (made here:
// Tests/Fixtures/runtimes, trimmed) and from garbage; where each runtime writes its log.

import Foundation
import ReportModel
import TestSupport
import XCTest

@testable import Runtimes

final class RuntimeCrashLogsTests: XCTestCase {
    func fixture(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: TestSupport.fixture("runtimes/" + name))))
    }

    func testHsErrOfCompiledJavaGivesItsProblematicFrameAndTheJavaPartOfItsNativeFrames() throws {
        // OpenJDK 17: sun.misc.Unsafe.putLong(0, …) from a method C2 compiled; no "Java frames:".
        let parsed = RuntimeCrashLogs.hsErr(try fixture("hs_err-compiled-java.log"))
        XCTAssertEqual(parsed.problematicFrame, "J 9 c2 UnsafeCrash.writeThrough(JI)V")
        XCTAssertEqual(
            parsed.frames,
            [
                "J 9 c2 UnsafeCrash.writeThrough(JI)V", "J 10% c1 UnsafeCrash.crash(I)V",
                "j UnsafeCrash.main([Ljava/lang/String;)V+40", "v ~StubRoutines::call_stub",
            ])
    }

    func testHsErrOfAJNICrashGivesItsJavaFramesSection() throws {
        let parsed = RuntimeCrashLogs.hsErr(try fixture("hs_err-jni.log"))
        XCTAssertEqual(parsed.problematicFrame, "C [libcrashport-jni.so+0x1110] crashport_jni_write_null+0x7")
        XCTAssertEqual(
            parsed.frames, ["j Crash.crash()V+0", "j Crash.main([Ljava/lang/String;)V+83", "v ~StubRoutines::call_stub"])
    }

    func testHsErrGarbageGivesNothingAndLongInputStaysBounded() {
        XCTAssertNil(RuntimeCrashLogs.hsErr([]).problematicFrame)
        XCTAssertNil(RuntimeCrashLogs.hsErr(Array("# Problematic frame:".utf8)).problematicFrame)
        XCTAssertEqual(RuntimeCrashLogs.hsErr([0xff, 0, 10, 0xfe]).frames, [])
        // A Java frames section of 1,000 lines of 10,000 bytes: 64 frames of 512 bytes kept.
        let line = "j " + String(repeating: "A", count: 10_000)
        let text = "Java frames: (J=compiled Java code)\n" + Array(repeating: line, count: 1_000).joined(separator: "\n")
        let parsed = RuntimeCrashLogs.hsErr(Array(text.utf8))
        XCTAssertEqual(parsed.frames.count, RuntimeCrashLogs.maximumFrames)
        XCTAssertEqual(parsed.frames[0].utf8.count, RuntimeCrashLogs.maximumLineBytes + "…".utf8.count)
        // Cut in the middle of the problematic frame's line (the read limit): what is there.
        XCTAssertEqual(
            RuntimeCrashLogs.hsErr(Array("# Problematic frame:\n# J 9 c2 Crash.cr".utf8)).problematicFrame, "J 9 c2 Crash.cr")
    }

    func testNodeReportGivesItsMessageAndJavaScriptStack() throws {
        // Node 20's report of napi_fatal_error("crashport_addon", "fatal on purpose").
        let parsed = try XCTUnwrap(RuntimeCrashLogs.nodeReport(try fixture("node-report-fatalerror.json")))
        XCTAssertEqual(parsed.problematicFrame, "fatal on purpose", "the message only names the trigger: the event says more")
        XCTAssertEqual(parsed.frames.first, "at crashInNative (/tmp/jitexp/app.js:2:106)")
        XCTAssertEqual(parsed.frames.count, 10)
        let thrown = Array(
            #"{"javascriptStack":{"message":"TypeError: x is not a function\nmore","stack":["at f (a.js:1:1)"]}}"#.utf8)
        XCTAssertEqual(RuntimeCrashLogs.nodeReport(thrown)?.problematicFrame, "TypeError: x is not a function")
    }

    func testNodeReportGarbageIsNotAReport() throws {
        XCTAssertNil(RuntimeCrashLogs.nodeReport([]))
        XCTAssertNil(RuntimeCrashLogs.nodeReport(Array("{}".utf8)))
        XCTAssertNil(RuntimeCrashLogs.nodeReport(Array(#"{"javascriptStack": 3}"#.utf8)))
        XCTAssertNil(RuntimeCrashLogs.nodeReport(Array(String(repeating: "[", count: 100_000).utf8)))
        // Cut at the read limit: not JSON any more.
        let whole = try fixture("node-report-fatalerror.json")
        XCTAssertNil(RuntimeCrashLogs.nodeReport(Array(whole.prefix(whole.count / 2))))
        let log = RuntimeCrashLogs.log(kind: RuntimeCrashLogs.nodeReportKind, path: "r.json", contents: [1, 2], truncated: true)
        XCTAssertNil(log.problematicFrame)
        XCTAssertEqual(log.frames, [])
    }

    func testWhereTheJVMWritesItsLog() {
        XCTAssertEqual(
            RuntimeCrashLogs.hsErrPaths(arguments: ["java", "Main"], pid: 42), ["hs_err_pid42.log", "/tmp/hs_err_pid42.log"])
        XCTAssertEqual(
            RuntimeCrashLogs.hsErrPaths(
                arguments: ["java", "-XX:ErrorFile=/var/log/a.log", "-XX:ErrorFile=logs/%p-%%p.log", "Main"], pid: 42),
            ["logs/42-%p.log", "/tmp/hs_err_pid42.log"])
    }

    func testWhereNodeWritesItsReport() {
        let place = RuntimeCrashLogs.nodeReportPlace(arguments: [
            "node", "--report-on-fatalerror", "--report-directory", "/srv/reports", "--report-filename=x.json", "app.js",
            "--report-directory=/not/node's",
        ])
        XCTAssertEqual(place.directory, "/srv/reports")
        XCTAssertEqual(place.filename, "x.json")
        XCTAssertNil(RuntimeCrashLogs.nodeReportPlace(arguments: ["node", "app.js"]).directory)
        XCTAssertTrue(RuntimeCrashLogs.isNodeReportName("report.20261129.135732.15296.0.001.json", pid: 15296))
        XCTAssertFalse(RuntimeCrashLogs.isNodeReportName("report.20261129.135732.15297.0.001.json", pid: 15296))
        XCTAssertFalse(RuntimeCrashLogs.isNodeReportName("report.2026x129.135732.15296.0.001.json", pid: 15296))
        XCTAssertFalse(RuntimeCrashLogs.isNodeReportName("report.15296.json", pid: 15296))
    }
}
