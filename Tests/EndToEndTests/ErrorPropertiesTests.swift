// End-to-end: handled errors with properties and files of their own
// (crashport_report_error_with, CrashPort.report(_:properties:attachments:)), from a real program
// (Tests/Fixtures/api/error_properties.c) under `crashport run`: two threads reporting at the
// same moment each get their own key/values and never the other's; an error's own file is
// copied into its report and marked as the error's; the limits leave out what they say and
// the report says so; the next error carries nothing of the one before; bad arguments are
// refused before anything is sent.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class ErrorPropertiesTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("error-properties")

    func program() throws -> String {
        try TestSupport.compileLinkedToStub(
            "api/error_properties.c", output: Self.directory + "/error_properties", flags: ["-O1", "-g", "-pthread"])
    }

    /// Two threads, released together by a barrier each round, report three errors each: every
    /// report carries its own thread's and round's properties, none of the other's, and the
    /// program's global annotation beside them.
    func testTwoThreadsAtOnceEachCarryTheirOwnProperties() throws {
        let run = try TestSupport.crashportRun([try program(), "threads"])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .exited(0), run.result.stderr)
        for name in ["A", "B"] {
            for round in 0..<3 {
                XCTAssertTrue(run.result.stdout.contains("thread \(name) round \(round) 0\n"), run.result.stdout)
            }
        }
        guard run.reportIDs.count == 6 else { return XCTFail("\(run.reportIDs): \(run.result.stderr)") }
        try assertEachCarriesItsOwn(try (0..<6).map { try run.event($0) })
    }

    /// The same through a sidecar (`crashport watch`), which captures each error as the
    /// launcher does.
    func testTheSameThroughTheSidecar() throws {
        let work = Self.directory + "/sidecar-" + UUID().uuidString.prefix(6)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let result = try TestSupport.run([try program(), "threads"], environment: ["CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        try assertEachCarriesItsOwn(try sidecar.waitForReports(6))
    }

    /// Each of the six reports (threads A and B, rounds 0 to 2) has its own thread's and
    /// round's properties and none of the other thread's.
    func assertEachCarriesItsOwn(_ events: [Event], file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(events.count, 6, file: file, line: line)
        var seen = Set<String>()
        for event in events {
            XCTAssertEqual(event.kind, .error, file: file, line: line)
            let message = try XCTUnwrap(event.exception?.message, file: file, line: line)
            let words = message.split(separator: " ")
            guard words.count == 4 else { return XCTFail(message, file: file, line: line) }
            let (name, round) = (String(words[1]), String(words[3]))
            let other = name == "A" ? "B" : "A"
            XCTAssertEqual(
                event.exception?.properties,
                ["thread": name, "round": round, "request": "req-\(name)-\(round)", name: "only mine"], message,
                file: file, line: line)
            XCTAssertNil(event.exception?.properties?[other], message, file: file, line: line)
            XCTAssertNil(event.exception?.propertiesTruncated, file: file, line: line)
            XCTAssertEqual(event.annotations, ["app": "fixture"], "the properties are not annotations", file: file, line: line)
            XCTAssertNotEqual(
                event.crashedThread?.rawValue, event.process?.pid?.rawValue, "a thread reported it", file: file, line: line)
            seen.insert(message)
        }
        XCTAssertEqual(seen.count, 6, file: file, line: line)
    }

    /// An error's own file is copied into its report and marked as the error's, beside the
    /// program's attachment; past the limits the report keeps 16 properties and 4 files and says
    /// what it left out; the next (plain) error has none of them; bad arguments send nothing.
    func testAnErrorsOwnFilesAndTheLimits() throws {
        let work = Self.directory + "/files-" + UUID().uuidString.prefix(6)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let run = try TestSupport.crashportRun([try program(), "files", work])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .exited(0), run.result.stderr)
        let said = run.result.stdout
        XCTAssertTrue(said.contains("own 0\n"), said)
        XCTAssertTrue(said.contains("limits 1\n"), "CRASHPORT_TRUNCATED: \(said)")
        XCTAssertTrue(said.contains("plain 0\n"), said)
        XCTAssertTrue(said.contains("invalid -22 -22 -22 -22\n"), said)
        guard run.reportIDs.count == 3 else { return XCTFail("\(run.reportIDs): \(run.result.stderr)") }
        let reports = try (0..<3).map { (try run.event($0), run.reportsDirectory + "/" + run.reportIDs[$0]) }
        func report(_ type: String) throws -> (event: Event, directory: String) {
            try XCTUnwrap(reports.first { $0.0.exception?.type == type }, type)
        }

        let own = try report("OrderError")
        XCTAssertEqual(own.event.exception?.properties, ["order": "1234", "user": "bob", "note": "multi\nline"])
        XCTAssertEqual(own.event.annotations, ["user": "alice"], "the annotation keeps its own value")
        let attachments = try XCTUnwrap(own.event.attachments)
        XCTAssertEqual(attachments.map(\.path), [work + "/error.log", work + "/app.log"], "the error's first")
        guard attachments.count == 2 else { return }
        XCTAssertEqual(attachments[0].scope, "error")
        XCTAssertEqual(attachments[0].file, "attachments/error.log")
        XCTAssertNil(attachments[1].scope)
        XCTAssertEqual(
            try String(contentsOfFile: own.directory + "/attachments/error.log", encoding: .utf8), "the request that failed\n")
        let shown = try TestSupport.run([TestSupport.crashport, "show", own.directory])
        XCTAssertEqual(shown.status, .exited(0), shown.stderr)
        XCTAssertTrue(
            shown.stdout.contains("Error properties:\n  note: multi\\nline\n  order: 1234\n  user: bob\n"), shown.stdout)
        XCTAssertTrue(
            shown.stdout.contains("  \(work)/error.log: attachments/error.log, 24 bytes [the error's own]\n"), shown.stdout)

        let limits = try report("LimitError")
        let properties = try XCTUnwrap(limits.event.exception?.properties)
        let cutKey = String(repeating: "k", count: 63)
        XCTAssertEqual(
            Set(properties.keys), Set([cutKey] + (0..<16).filter { $0 != 1 }.map { String(format: "key%02d", $0) }))
        XCTAssertEqual(properties["key02"], String(repeating: "x", count: 1023))
        XCTAssertEqual(Set(limits.event.exception?.propertiesTruncated ?? []), [cutKey, "key02"])
        XCTAssertTrue(
            limits.event.notes?.contains(
                "the handled error's report leaves out 4 of its properties (it keeps 16) and 2 of its files (it keeps 4, with paths of up to 1023 bytes)"
            ) == true, "\(limits.event.notes ?? [])")
        let limited = try XCTUnwrap(limits.event.attachments)
        XCTAssertEqual(
            limited.map(\.path), [work + "/error.log", work + "/app.log", "/nonexistent/a", "/nonexistent/b"],
            "four of its own, the program's app.log once, as the error's")
        XCTAssertTrue(limited.allSatisfy { $0.scope == "error" })
        XCTAssertEqual(limited.last?.error, "No such file or directory")

        let plain = try report("PlainError")
        XCTAssertNil(plain.event.exception?.properties, "nothing of the errors before")
        XCTAssertEqual(plain.event.attachments?.map(\.path), [work + "/app.log"])
        XCTAssertNil(plain.event.attachments?.first?.scope)
        XCTAssertNil(plain.event.notes?.first { $0.contains("leaves out") })
    }
}
