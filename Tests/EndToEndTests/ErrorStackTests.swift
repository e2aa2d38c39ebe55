// End-to-end: handled errors with a stack of their own (crashport_report_error_stack,
// CrashPort.report(_:stack:)), from real programs under `crashport run`: three addresses saved
// by backtrace(3) are the report's crashed thread, symbolicated to the functions that saved
// them, while the reporting thread's own stack stays among the threads; an interpreter's text
// frames are shown as given, hostile bytes escaped and cut; an address in no module is an
// unknown frame; a million frames are cut to 512 and the report says so. In C
// (Tests/Fixtures/api/error_stack.c) and in Swift, built with plain `swift build`.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class ErrorStackTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("error-stack")

    func program() throws -> String {
        try TestSupport.compileLinkedToStub("api/error_stack.c", output: Self.directory + "/error_stack")
    }

    /// The error's own stack leads, marked; the reporting thread follows with its own stack.
    func ownAndReporting(
        _ event: Event, file: StaticString = #filePath, line: UInt = #line
    ) throws -> (
        own: ThreadRecord, reporting: ThreadRecord
    ) {
        let threads = try XCTUnwrap(event.threads, file: file, line: line)
        let own = try XCTUnwrap(threads.first, file: file, line: line)
        XCTAssertEqual(own.errorStack, true, file: file, line: line)
        XCTAssertEqual(own.crashed, true, file: file, line: line)
        XCTAssertEqual(own.tid, event.crashedThread, file: file, line: line)
        XCTAssertEqual(event.crashedThreadRecord, own, file: file, line: line)
        let reporting = try XCTUnwrap(threads.dropFirst().first { $0.tid == own.tid }, file: file, line: line)
        XCTAssertNotEqual(reporting.crashed, true, file: file, line: line)
        return (own, reporting)
    }

    func testAnErrorsOwnStackIsTheCrashedThread() throws {
        let run = try TestSupport.crashportRun([try program()])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .exited(0), run.result.stderr)
        let said = run.result.stdout
        // 1: CRASHPORT_TRUNCATED, a file was cut; -22: EINVAL.
        for line in ["addresses 0", "text 1", "invalid -22"] { XCTAssertTrue(said.contains(line + "\n"), said) }
        let deep = try XCTUnwrap(said.split(separator: "\n").first { $0.hasPrefix("deep ") }?.split(separator: " "))
        XCTAssertEqual(deep.count, 3)
        XCTAssertEqual(deep.dropFirst().first, "1", "CRASHPORT_TRUNCATED: \(said)")
        XCTAssertLessThan(Int(deep.last ?? "") ?? .max, 5000, "a million frames cost one capture, not a hang")
        guard run.reportIDs.count == 3 else { return XCTFail("\(run.reportIDs): \(run.result.stderr)") }
        let reports = try (0..<3).map { (try run.event($0), run.reportsDirectory + "/" + run.reportIDs[$0]) }
        func report(_ type: String) throws -> (event: Event, directory: String) {
            try XCTUnwrap(reports.first { $0.0.exception?.type == type }, type)
        }

        // Three addresses, symbolicated to the functions that saved them, innermost first.
        let addresses = try report("StackError").event
        let (own, reporting) = try ownAndReporting(addresses)
        XCTAssertEqual(own.frames?.map { $0.function ?? "?" }, ["stack_inner", "stack_middle", "stack_outer"])
        XCTAssertEqual(
            own.frames?.map { $0.file.map { ($0 as NSString).lastPathComponent } }, Array(repeating: "error_stack.c", count: 3))
        XCTAssertTrue(own.frames?.allSatisfy { $0.module == "error_stack" && $0.pc != nil } == true, "\(own.frames ?? [])")
        XCTAssertTrue(
            containsInOrder(reporting.frames?.map { $0.function ?? "?" } ?? [], ["report_saved", "main"]),
            "\(reporting.frames ?? [])")
        XCTAssertFalse(reporting.frames?.contains { $0.function == "stack_inner" } == true, "returned before the report")
        XCTAssertTrue(addresses.title?.hasPrefix("StackError: three addresses in stack_inner") == true, addresses.title ?? "")

        // An interpreter's frames, as given; hostile bytes kept in the event, escaped when shown.
        let text = try report("ScriptError")
        let script = try ownAndReporting(text.event).own
        let frames = try XCTUnwrap(script.frames)
        guard frames.count == 4 else { return XCTFail("\(frames)") }
        XCTAssertEqual(frames[0].function, "handle_request")
        XCTAssertEqual(frames[0].file, "app/views.py")
        XCTAssertEqual(frames[0].line, 42)
        XCTAssertEqual(frames[1].function, "evil\n\u{1b}[31mname")
        XCTAssertEqual(frames[1].file, String(repeating: "f", count: 255), "cut to 255 bytes")
        XCTAssertEqual(frames[2].pc, HexAddress(0x10))
        XCTAssertNil(frames[2].function, "an address in no module is an unknown frame")
        XCTAssertNil(frames[2].module)
        XCTAssertEqual(frames[3].function, "<module>")
        XCTAssertTrue(text.event.notes?.contains { $0.contains("cut to the stub's limit") } == true, "\(text.event.notes ?? [])")
        let shown = try TestSupport.run([TestSupport.crashport, "show", text.directory])
        XCTAssertEqual(shown.status, .exited(0), shown.stderr)
        XCTAssertTrue(shown.stdout.contains(" (the error's own stack)\n"), shown.stdout)
        XCTAssertTrue(shown.stdout.contains("handle_request (app/views.py:42)"), shown.stdout)
        XCTAssertTrue(shown.stdout.contains("evil\\n\\u{1b}[31mname"), shown.stdout)
        XCTAssertFalse(shown.stdout.contains("\u{1b}"), "no terminal escape reaches the terminal")

        // A million frames: the first 512 kept, the rest counted.
        let cut = try report("DeepError").event
        let deepOwn = try ownAndReporting(cut).own
        XCTAssertEqual(deepOwn.frames?.count, 512)
        XCTAssertTrue(
            cut.notes?.contains(
                "the handled error's own stack was cut: the first 512 frames are kept, 999488 more were left out (it keeps 512)")
                == true, "\(cut.notes ?? [])")
    }

    /// Through a sidecar: the error's own stack leads its report there too.
    func testAnErrorsOwnStackThroughTheSidecar() throws {
        let work = TestSupport.freshDirectory(in: Self.directory, "sidecar")
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let result = try TestSupport.run([try program()], environment: ["CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        let events = try sidecar.waitForReports(3)
        let addresses = try XCTUnwrap(events.first { $0.exception?.type == "StackError" }, "\(events.map(\.title))")
        let (own, reporting) = try ownAndReporting(addresses)
        XCTAssertEqual(own.frames?.map { $0.function ?? "?" }, ["stack_inner", "stack_middle", "stack_outer"])
        XCTAssertTrue(
            containsInOrder(reporting.frames?.map { $0.function ?? "?" } ?? [], ["report_saved", "main"]),
            "\(reporting.frames ?? [])")
    }

    /// The same from Swift (examples/swift-api's ScriptErrors, built with plain `swift build`):
    /// a stack saved with Thread.callStackReturnAddresses names the functions that saved it, an
    /// interpreter's traceback is shown as given, a million frames are cut to 512.
    func testSwiftErrorsWithTheirOwnStacks() throws {
        let run = try TestSupport.crashportRun(
            [try AppAPITests.swiftExample() + "/ScriptErrors"], environment: ["SWIFT_BACKTRACE": "enable=no"])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .exited(0), run.result.stderr)
        XCTAssertTrue(run.result.stdout.contains("saved success()\nscript success()\ndeep success()\n"), run.result.stdout)
        guard run.reportIDs.count == 3 else { return XCTFail("\(run.reportIDs): \(run.result.stderr)") }
        let events = try (0..<3).map { try run.event($0) }
        func event(_ message: String) throws -> Event { try XCTUnwrap(events.first { $0.exception?.message == message }) }

        let saved = try ownAndReporting(try event("a negative entry"))
        XCTAssertTrue(
            containsInOrder(saved.own.frames?.map { $0.function ?? "?" } ?? [], ["savedStack()", "checkEntry(_:)"]),
            "\(saved.own.frames ?? [])")
        XCTAssertEqual(saved.own.frames?.first { $0.function == "savedStack()" }?.line, 14)
        XCTAssertFalse(saved.reporting.frames?.contains { $0.function == "savedStack()" } == true)

        let script = try ownAndReporting(try event("NameError: name 'ledger' is not defined")).own
        XCTAssertEqual(script.frames?.map { $0.function ?? "?" }, ["close_books", "<module>"])
        XCTAssertEqual(script.frames?.map { $0.line ?? 0 }, [12, 30])

        let deep = try event("a million frames")
        XCTAssertEqual(try ownAndReporting(deep).own.frames?.count, 512)
        XCTAssertTrue(deep.notes?.contains { $0.contains("999488 more were left out") } == true, "\(deep.notes ?? [])")
    }
}
