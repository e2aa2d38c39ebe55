// End-to-end: a program whose CFI is only .debug_frame (built -O2 -g -fno-asynchronous-unwind-
// tables, as kernels, embedded code and some services are), unwound with it as gdb does: from
// the program's own .debug_frame, and, stripped, from its debug file's (compressed, as Debian's
// are), online and in the minidump symbolicated offline with the program moved away. The
// report says which CFI was used. Without it the -O2 frames were found by scanning the stack,
// and past main the scan found stale return addresses.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class DebugFrameTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("debug-frame")

    func program(_ name: String) throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/" + name,
            flags: ["-O2", "-g", "-fno-asynchronous-unwind-tables"])
    }

    func names(_ event: Event) -> [String?] { (event.crashedThreadRecord?.frames ?? []).map(\.function) }

    func offline(_ path: String, debugDirectory: String? = nil) throws -> Event {
        let result = try TestSupport.run(
            [TestSupport.crashport, "symbolicate", "--format", "json"] + (debugDirectory.map { ["--debug-dir", $0] } ?? [])
                + [path])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        return try Event.decode(Data(result.stdout.utf8))
    }

    func testOwnDebugFrameUnwindsAsGDBDoes() throws {
        guard TestSupport.which("gdb") != nil else { throw XCTSkip("gdb is not installed: no reference backtrace") }
        let program = try program("own")
        let sections = try TestSupport.run(["readelf", "-SW", program]).stdout
        XCTAssertTrue(sections.contains(".debug_frame"), sections)
        let reference = try TestSupport.gdbBacktrace([program, "null"])
        let watched = try TestSupport.crashportRun([program, "null"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let online = try watched.event()
        let dump = try offline(watched.minidumpPath())
        for (label, event) in [("online", online), ("offline", dump)] {
            XCTAssertNil(GDBFrame.differences(reference, names(event)), label)
            XCTAssertEqual(Array(names(event).prefix(4)), ["crash_null", "level_two", "level_one", "main"], label)
            let trust = (event.crashedThreadRecord?.frames ?? []).dropFirst().map { $0.trust?.rawValue ?? "" }
            XCTAssertEqual(Set(trust), ["cfi"], "\(label): every caller from CFI, none scanned: \(trust)")
        }
        XCTAssertTrue(
            (online.notes ?? []).contains("frames in own were unwound with its own .debug_frame: no .eh_frame covers them"),
            "\(online.notes ?? [])")
    }

    func testStrippedProgramIsUnwoundWithItsDebugFilesDebugFrameOnlineAndOffline() throws {
        let program = try program("stripped")
        let debug = program + ".debug"
        for command in [
            ["objcopy", "--only-keep-debug", "--compress-debug-sections=zlib", program, debug],
            ["strip", "--strip-all", program], ["objcopy", "--add-gnu-debuglink=\(debug)", program],
        ] {
            let result = try TestSupport.run(command)
            XCTAssertEqual(result.status, .exited(0), command.joined(separator: " ") + ": " + result.stderr)
        }
        XCTAssertFalse(try TestSupport.run(["readelf", "-SW", program]).stdout.contains(".debug_frame"))
        let watched = try TestSupport.crashportRun([program, "null"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let online = try watched.event()
        XCTAssertEqual(Array(names(online).prefix(4)), ["crash_null", "level_two", "level_one", "main"])
        XCTAssertEqual(online.crashedThreadRecord?.frames?[1].trust, .cfi)
        XCTAssertTrue(
            (online.notes ?? []).contains {
                $0.hasPrefix("frames in stripped were unwound with .debug_frame of its debug file ") && $0.contains(debug)
            }, "\(online.notes ?? [])")

        // Elsewhere: the program gone, its debug file found by build-id.
        let buildID = try XCTUnwrap(online.modules?.first?.buildID)
        let debugDirectory = Self.directory + "/debug"
        try TestSupport.placeDebugFile(debug, buildID: buildID, in: debugDirectory)
        try FileManager.default.removeItem(atPath: program)
        try FileManager.default.removeItem(atPath: debug)
        let dump = try offline(watched.minidumpPath(), debugDirectory: debugDirectory)
        XCTAssertEqual(names(dump), names(online))
        XCTAssertEqual(
            (dump.crashedThreadRecord?.frames ?? []).map(\.trust), (online.crashedThreadRecord?.frames ?? []).map(\.trust))
    }
}
