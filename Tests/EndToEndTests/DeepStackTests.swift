// End-to-end: every frame of an overflowed stack (issue 17, point 1), equal to gdb's `bt`,
// online and in the minidump symbolicated offline. The fault is taken inside a stack probe: an
// unrolled inline probe and a probe loop (rustc -O, gcc -O2 -fstack-clash-protection), and a
// probe helper the prologue calls (__rust_probestack-style). The overflowed thread's stack is
// read past its guard page, down to the thread's start.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class DeepStackTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("deep-stack")

    func requireGDB() throws {
        guard TestSupport.which("gdb") != nil else { throw XCTSkip("gdb is not installed: no reference backtrace") }
    }

    func rustProgram() throws -> String {
        let home = ProcessInfo.processInfo.environment["HOME"] ?? "/root"
        guard let rustc = TestSupport.which("rustc", also: [home + "/.cargo/bin", "/root/.cargo/bin"]) else {
            throw XCTSkip("rustc not found (looked in PATH and ~/.cargo/bin): the Rust fixture cannot be built")
        }
        let output = Self.directory + "/deep"
        if !FileManager.default.fileExists(atPath: output) {
            let result = try TestSupport.run([rustc, "-O", "-g", "-o", output, TestSupport.fixture("rust/deep.rs")])
            guard result.status == .exited(0) else { throw TestFailure("rustc deep.rs failed:\n\(result.stderr)") }
        }
        return output
    }

    func cProgram() throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("corpus/overflow.c")], output: Self.directory + "/overflow",
            flags: ["-O2", "-g", "-pthread", "-fstack-clash-protection"])
    }

    /// The crashed thread's frames (inline ones too), in order, as names.
    func functions(_ event: Event) -> [String?] {
        (event.crashedThreadRecord?.frames ?? []).map(\.function)
    }

    /// crashport's frames of `command`'s crash, online and from its minidump, against gdb's.
    func checkEveryFrame(_ command: [String], recursing: String, file: StaticString = #filePath, line: UInt = #line) throws {
        try requireGDB()
        let reference = try TestSupport.gdbBacktrace(command)
        let watched = try TestSupport.crashportRun(command)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.reportIDs.count, 1, watched.result.stderr, file: file, line: line)
        let online = try watched.event()
        XCTAssertEqual(online.signal?.stackOverflow, true, file: file, line: line)
        let json = try TestSupport.run([TestSupport.crashport, "symbolicate", "--format", "json", watched.minidumpPath()])
        XCTAssertEqual(json.status, .exited(0), json.stderr, file: file, line: line)
        let offline = try Event.decode(Data(json.stdout.utf8))

        // Thousands of frames, each one a real call: more than the stub's stack copy holds. How
        // many depends on where the stack begins (the environment, ASLR: gdb runs the program
        // otherwise), so the recursion's count may differ by a few from gdb's on the main
        // thread; every other frame is compared one for one.
        let recursion = reference.filter { $0.function == recursing }.count
        XCTAssertGreaterThan(recursion, 30, "gdb: \(reference.prefix(5))", file: file, line: line)
        for (label, event) in [("online", online), ("offline", offline)] {
            let ours = functions(event)
            XCTAssertNil(event.crashedThreadRecord?.truncated, label, file: file, line: line)
            let ourRecursion = ours.filter { $0 == recursing }.count
            XCTAssertLessThanOrEqual(abs(ourRecursion - recursion), recursion / 50, label, file: file, line: line)
            let keptReference = reference.filter { $0.function != recursing }
            XCTAssertNil(
                GDBFrame.differences(keptReference, ours.filter { $0 != recursing }), label, file: file, line: line)
            XCTAssertTrue(
                ours.prefix(ourRecursion).allSatisfy { $0 == recursing }
                    || ours.dropFirst().prefix(ourRecursion).allSatisfy { $0 == recursing },
                "\(label): the recursion is one run from the top", file: file, line: line)
        }
        // The faulting frame where gdb puts it, inside a probe too (code of line 0: the line before).
        let gdbTop = reference.first?.location.map { ($0 as NSString).lastPathComponent }
        for (label, event) in [("online", online), ("offline", offline)] {
            let top = event.crashedThreadRecord?.frames?.first
            let ours = top?.file.map { "\(($0 as NSString).lastPathComponent):\(top?.line.map(String.init) ?? "?")" }
            XCTAssertEqual(ours, gdbTop, "\(label): the faulting frame's file:line", file: file, line: line)
        }
        XCTAssertEqual(functions(offline), functions(online), "offline as online", file: file, line: line)
    }

    func testRustThreadOfSmallFramesIsWholeDownToItsStart() throws {
        try checkEveryFrame([try rustProgram(), "thread-small"], recursing: "deep::small_frames")
    }

    func testRustThreadFaultingInItsProbeLoopIsWhole() throws {
        try checkEveryFrame([try rustProgram(), "thread-probe"], recursing: "deep::probed_frames")
    }

    func testRustMainThreadFaultingInAnUnrolledProbeIsWhole() throws {
        try checkEveryFrame([try rustProgram(), "main-probe"], recursing: "deep::unrolled_probes")
    }

    func testCThreadFaultingInItsStackClashProbeIsWhole() throws {
        try checkEveryFrame([try cProgram(), "probe"], recursing: "recurse_probed")
    }

    func testCThreadFaultingInAProbeHelperIsWhole() throws {
        try checkEveryFrame([try cProgram(), "probe-helper"], recursing: "recurse_helper")
    }
}
