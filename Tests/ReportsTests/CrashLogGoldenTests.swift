// The text crash log of a fixed report (JSON in, text out), compared with a golden file, so its
// format changes only on purpose. The report is a real one (an uncaught C++ exception on a
// thread), with paths made neutral and a thread name and an annotation that hold a terminal
// escape and a newline (printed escaped). To accept a change on purpose:
//   CRASHPORT_UPDATE_GOLDEN=1 swift test --filter CrashLogGoldenTests   (then review the diff)

import Foundation
import ReportModel
import Reports
import TestSupport
import XCTest

final class CrashLogGoldenTests: XCTestCase {
    func check(_ text: String, golden name: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let path = TestSupport.fixture("golden/" + name)
        if ProcessInfo.processInfo.environment["CRASHPORT_UPDATE_GOLDEN"] == "1" {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return
        }
        let expected = try String(contentsOfFile: path, encoding: .utf8)
        guard text != expected else { return }
        let ours = text.split(separator: "\n", omittingEmptySubsequences: false)
        let theirs = expected.split(separator: "\n", omittingEmptySubsequences: false)
        let first = zip(ours, theirs).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(ours.count, theirs.count)
        XCTFail(
            "\(name) differs from line \(first + 1):\n  golden: \(first < theirs.count ? String(theirs[first]) : "(end)")\n  now:    \(first < ours.count ? String(ours[first]) : "(end)")\n(CRASHPORT_UPDATE_GOLDEN=1 to accept a change on purpose)",
            file: file, line: line)
    }

    func event() throws -> Event {
        try Event.decode(Data(contentsOf: URL(fileURLWithPath: TestSupport.fixture("golden/cxx-uncaught-exception.json"))))
    }

    func testFullCrashLog() throws {
        let text = CrashLog.full(try event())
        XCTAssertFalse(text.contains("\u{1b}"), "no terminal escape reaches the terminal")
        try check(text + "\n", golden: "cxx-uncaught-exception.txt")
    }

    /// show and symbolicate print through ReportFormat: the same golden text, coloured only on a
    /// terminal that wants it, and the event's own JSON.
    func testReportFormatRendersTheCrashLogAndTheEvent() throws {
        let event = try event()
        let text = try ReportFormat.text.render(event, isTerminal: false, environment: [:])
        try check(text + "\n", golden: "cxx-uncaught-exception.txt")
        XCTAssertEqual(try ReportFormat.text.render(event, isTerminal: true, environment: ["NO_COLOR": "1"]), text)
        XCTAssertEqual(
            try ReportFormat.text.render(event, isTerminal: true, environment: ["TERM": "xterm"]),
            CrashLog.full(event, colour: true))
        XCTAssertEqual(
            try ReportFormat.json.render(event, isTerminal: true, environment: ["TERM": "xterm"]),
            String(decoding: try event.jsonData(), as: UTF8.self))
    }

    func testSummary() throws {
        let text = CrashLog.summary(try event(), reportPath: "/var/lib/crashport/reports/20261123T231023.529Z-4543-e5a6")
        XCTAssertFalse(text.contains("\u{1b}"))
        try check(text + "\n", golden: "cxx-uncaught-exception.summary.txt")
    }
}

/// The in-app rule on names and paths.
final class InAppRulesTests: XCTestCase {
    func testTheRule() {
        let rules = InAppRules()
        XCTAssertTrue(rules.isInApp(modulePath: "/srv/app/bin/ledger", function: "balance"))
        XCTAssertTrue(rules.isInApp(modulePath: "/srv/app/bin/ledger", function: "clone_record"), "a prefix is not a name")
        XCTAssertTrue(rules.isInApp(modulePath: "/srv/app/lib/libplugin.so", function: "read_setting"))
        XCTAssertFalse(rules.isInApp(modulePath: "/usr/lib/x86_64-linux-gnu/libc.so.6", function: "abort"))
        XCTAssertFalse(rules.isInApp(modulePath: "/srv/app/lib/libstdc++.so.6", function: "x"), "a runtime by its name")
        XCTAssertFalse(rules.isInApp(modulePath: "/srv/app/bin/ledger", function: "clone"))
        XCTAssertFalse(rules.isInApp(modulePath: "/srv/app/bin/ledger", function: "core::panicking::panic_fmt"))
        XCTAssertFalse(rules.isInApp(modulePath: "/srv/app/bin/ledger", function: "f", file: "/usr/include/c++/12/bits/invoke.h"))
        let adjusted = InAppRules(inApp: ["libc.so*"], notInApp: ["ledger"])
        XCTAssertTrue(adjusted.isInApp(modulePath: "/usr/lib/x86_64-linux-gnu/libc.so.6", function: "abort"))
        XCTAssertFalse(adjusted.isInApp(modulePath: "/srv/app/bin/ledger", function: "balance"))
    }
}

/// Colour only for a terminal, never with NO_COLOR or TERM=dumb; the program's frames plain, the
/// rest dimmed, the title bold; without colour, no escape at all (the golden files).
final class CrashLogColourTests: XCTestCase {
    func testWhenToColour() {
        XCTAssertTrue(CrashLog.colourWanted(isTerminal: true, environment: ["TERM": "xterm-256color"]))
        XCTAssertFalse(CrashLog.colourWanted(isTerminal: false, environment: ["TERM": "xterm-256color"]))
        XCTAssertFalse(CrashLog.colourWanted(isTerminal: true, environment: ["NO_COLOR": "1"]))
        XCTAssertTrue(CrashLog.colourWanted(isTerminal: true, environment: ["NO_COLOR": ""]), "no-color.org: only when not empty")
        XCTAssertFalse(CrashLog.colourWanted(isTerminal: true, environment: ["TERM": "dumb"]))
    }

    func testColouredSummary() throws {
        let event = try Event.decode(
            Data(contentsOf: URL(fileURLWithPath: TestSupport.fixture("golden/cxx-uncaught-exception.json"))))
        let text = CrashLog.summary(event, reportPath: "/r/x", colour: true)
        let lines = text.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines[0].contains("\u{1b}[1m"), lines[0])
        XCTAssertTrue(lines.contains { $0.hasPrefix("\u{1b}[2m    … ") }, text)
        XCTAssertTrue(lines.contains("    #8  operator() (terminate.cpp:8)"), "the program's frame stays plain: \(text)")
        XCTAssertFalse(CrashLog.summary(event, reportPath: "/r/x").contains("\u{1b}"))
        XCTAssertTrue(CrashLog.full(event, colour: true).contains("\u{1b}[2m"))
    }
}
