// End-to-end: a stack overflow is named as one (issue 11, point 5), on the main thread's
// grows-down [stack] and on a pthread's guard page, in the event, in the summary crashport
// prints and in the minidump symbolicated offline; a NULL write is not; and the program dies
// as it does without crashport.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class StackOverflowReportTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("stack-overflow")

    func program() throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("corpus/overflow.c")], output: Self.directory + "/overflow",
            flags: ["-O2", "-g", "-pthread"])
    }

    /// Runs `overflow MODE` plainly and under crashport; checks they end alike, with one report.
    func crash(_ mode: String) throws -> (plain: RunResult, watched: CrashportRun, event: Event) {
        let program = try program()
        let plain = try TestSupport.run([program, mode])
        let watched = try TestSupport.crashportRun([program, mode])
        XCTAssertEqual(plain.status, .signaled(SIGSEGV), plain.stderr)
        XCTAssertEqual(watched.result.status, plain.status, "the exit status is the one without crashport")
        XCTAssertEqual(watched.reportIDs.count, 1, watched.result.stderr)
        return (plain, watched, try watched.event())
    }

    /// The minidump alone, symbolicated offline, as an event and as a crash log.
    func offline(_ watched: CrashportRun) throws -> (event: Event, text: String) {
        let json = try TestSupport.run([TestSupport.crashport, "symbolicate", "--format", "json", watched.minidumpPath()])
        XCTAssertEqual(json.status, .exited(0), json.stderr)
        let text = try TestSupport.run([TestSupport.crashport, "symbolicate", watched.minidumpPath()])
        XCTAssertEqual(text.status, .exited(0), text.stderr)
        return (try Event.decode(Data(json.stdout.utf8)), text.stdout)
    }

    func checkNamedOverflow(_ mode: String, onMainThread: Bool) throws {
        let (plain, watched, event) = try crash(mode)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        if mode.hasSuffix("-handler") {
            XCTAssertTrue(plain.stderr.contains("overflow.c: handler ran"), plain.stderr)
            XCTAssertTrue(watched.result.stderr.contains("overflow.c: handler ran"), "the program's handler still runs")
        }
        XCTAssertEqual(event.signal?.name, "SIGSEGV")
        XCTAssertEqual(event.signal?.stackOverflow, true, "\(event.signal.map { "\($0)" } ?? "no signal")")
        // The title names it and the thread; the signal line gives the details.
        let threadName = onMainThread ? "overflow" : "worker"
        XCTAssertTrue(
            watched.result.stderr.contains("crashed: SIGSEGV: stack overflow in thread '\(threadName)' in recurse (overflow.c:"),
            "the summary line: \(watched.result.stderr)")
        XCTAssertTrue(watched.result.stderr.contains("signal: SIGSEGV, stack overflow: "), watched.result.stderr)
        let thread = try XCTUnwrap(event.crashedThreadRecord)
        XCTAssertEqual(thread.tid?.rawValue == event.process?.pid?.rawValue, onMainThread, "the thread that overflowed")
        if !onMainThread { XCTAssertEqual(thread.name, "worker") }
        XCTAssertEqual(event.crashedFunctions.first, "recurse")
        XCTAssertEqual(Array(event.crashedFunctions.prefix(4)), Array(repeating: "recurse", count: 4))

        let (dump, text) = try offline(watched)
        XCTAssertEqual(dump.signal?.stackOverflow, true, "offline, from the minidump's LinuxMaps stream")
        XCTAssertEqual(dump.crashedFunctions.first, "recurse")
        XCTAssertTrue(
            text.split(separator: "\n").first?.contains("crashed: SIGSEGV: stack overflow in thread '\(threadName)'") ?? false,
            "the offline crash log's first line: \(text.prefix(400))")
    }

    func testMainThreadOverflowIsNamed() throws {
        try checkNamedOverflow("main", onMainThread: true)
    }

    func testThreadOverflowIsNamed() throws {
        try checkNamedOverflow("thread", onMainThread: false)
    }

    /// A language runtime's handler installed after crashport (its own alternate stack, reset
    /// to SIG_DFL and return): the report still names the overflow.
    func testMainThreadOverflowUnderTheProgramsOwnHandlerIsNamed() throws {
        try checkNamedOverflow("main-handler", onMainThread: true)
    }

    func testThreadOverflowUnderTheProgramsOwnHandlerIsNamed() throws {
        try checkNamedOverflow("thread-handler", onMainThread: false)
    }

    func testNullWriteIsNotAnOverflow() throws {
        let (_, watched, event) = try crash("null")
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(event.signal?.faultAddress?.value, 0x10)
        XCTAssertEqual(event.signal?.stackOverflow, false)
        XCTAssertFalse(watched.result.stderr.contains("stack overflow"), watched.result.stderr)
        XCTAssertEqual(event.crashedFunctions.first, "write_null")
        let (dump, text) = try offline(watched)
        XCTAssertEqual(dump.signal?.stackOverflow, false)
        XCTAssertFalse(text.contains("stack overflow"))
    }
}
