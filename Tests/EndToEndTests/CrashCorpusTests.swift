// End-to-end: real programs from the crash corpus crash under the real `crashport run`; the
// test reads the real report. Needs ptrace of a child process (allowed on these machines: no
// Yama, or Yama mode ≤ 1, where the watcher is the crasher's ancestor).

import ReportModel
import TestSupport
import XCTest

final class CrashCorpusTests: XCTestCase {
    struct Case {
        var mode: String
        var signal: String
        var code: String
        /// Functions expected in the crashed thread's frames, in this order.
        var frames: [String]
        /// Whether frames[0] must be the first frame of the report.
        var topIsFirst = true
    }

    static let cases = [
        Case(mode: "null", signal: "SIGSEGV", code: "SEGV_MAPERR", frames: ["crash_null", "level_two", "level_one", "main"]),
        Case(
            mode: "abort", signal: "SIGABRT", code: "SI_TKILL",
            frames: ["abort", "crash_abort", "level_two", "level_one", "main"], topIsFirst: false),
        Case(mode: "fpe", signal: "SIGFPE", code: "FPE_INTDIV", frames: ["crash_fpe", "level_two", "level_one", "main"]),
        Case(mode: "ill", signal: "SIGILL", code: "ILL_ILLOPN", frames: ["crash_ill", "level_two", "level_one", "main"]),
        Case(mode: "bus", signal: "SIGBUS", code: "BUS_ADRERR", frames: ["crash_bus", "level_two", "level_one", "main"]),
        Case(mode: "kill", signal: "SIGSEGV", code: "SI_USER", frames: ["level_two", "level_one", "main"], topIsFirst: false),
    ]

    func check(_ testCase: Case, options: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws {
        for (variant, program) in try TestSupport.corpus() {
            let label = "\(testCase.mode) \(variant)"
            let plain = try TestSupport.run([program, testCase.mode])
            let watched = try TestSupport.crashportRun([program, testCase.mode], options: options)
            defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
            XCTAssertEqual(
                watched.result.status, plain.status,
                "\(label): exit status differs from the uninstrumented run; stderr:\n\(watched.result.stderr)", file: file,
                line: line)
            XCTAssertEqual(
                watched.reportIDs.count, 1, "\(label): expected exactly one report; stderr:\n\(watched.result.stderr)",
                file: file, line: line)
            guard watched.reportIDs.count == 1 else { continue }
            let event = try watched.event()
            XCTAssertEqual(event.schema, "crashport.event.v1")
            XCTAssertEqual(event.kind?.rawValue, "crash")
            XCTAssertEqual(event.signal?.name, testCase.signal, label, file: file, line: line)
            XCTAssertEqual(event.signal?.codeName, testCase.code, label, file: file, line: line)
            let functions = event.crashedFunctions
            XCTAssertTrue(
                containsInOrder(event.crashedFrames, testCase.frames),
                "\(label): frames \(functions) lack \(testCase.frames) in order",
                file: file, line: line)
            if testCase.topIsFirst {
                XCTAssertEqual(
                    functions.first, testCase.frames.first, "\(label): wrong top frame in \(functions)", file: file, line: line)
            }
            let frames = event.crashedThreadRecord?.frames ?? []
            XCTAssertEqual(frames.first?.trust?.rawValue, "context", label, file: file, line: line)
            XCTAssertTrue(
                frames.dropFirst().allSatisfy { ["cfi", "frame_pointer", "scan"].contains($0.trust?.rawValue ?? "") }, label,
                file: file,
                line: line)
            XCTAssertEqual(
                frames.first { $0.function == "main" }?.module, (program as NSString).lastPathComponent, label, file: file,
                line: line)
            // The main executable comes first among the modules, with its build-id.
            XCTAssertEqual(event.modules?.first?.path, program, label, file: file, line: line)
            XCTAssertEqual(event.modules?.first?.buildID?.count, 40, label, file: file, line: line)
            XCTAssertNotNil(event.handlerChain?.first, label, file: file, line: line)
            XCTAssertEqual(event.handlerChain?.first?.action?.rawValue, "default-action", label, file: file, line: line)
            // The summary on stderr names the signal, the top frame and the report path.
            XCTAssertTrue(watched.result.stderr.contains(testCase.signal), label, file: file, line: line)
            XCTAssertTrue(
                watched.result.stderr.contains("report: \(watched.reportsDirectory)/\(watched.reportIDs[0])"), label, file: file,
                line: line)
            XCTAssertTrue(FileManager.default.fileExists(atPath: watched.minidumpPath()), label, file: file, line: line)
        }
    }

    func testNullWrite() throws { try check(Self.cases[0]) }
    func testAbort() throws { try check(Self.cases[1]) }
    func testDivideByZero() throws { try check(Self.cases[2]) }
    func testIllegalInstruction() throws { try check(Self.cases[3]) }
    func testBusErrorFromTruncatedMapping() throws { try check(Self.cases[4]) }
    func testSignalSentByKill() throws { try check(Self.cases[5]) }

    /// --no-ptrace: the crashing thread is still fully unwound from the record's stack copy,
    /// and the report says what was not captured.
    func testNoPtraceStillUnwindsTheCrashingThread() throws {
        try check(Self.cases[0], options: ["--no-ptrace"])
        let program = try TestSupport.corpus()[1].path
        let watched = try TestSupport.crashportRun([program, "null"], options: ["--no-ptrace"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let event = try watched.event()
        XCTAssertTrue(event.notes?.contains { $0.contains("ptrace not used") } ?? false, "\(event.notes ?? [])")
    }
}
