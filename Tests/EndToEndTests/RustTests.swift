// End-to-end: a Rust program overflowing its stack (Tests/Fixtures/rust/overflow.rs) under
// crashport. Rust installs its own SIGSEGV handler, which recognises the guard page, prints
// "thread '…' has overflowed its stack" and "fatal runtime error: stack overflow" and aborts;
// with crashport the program must still do all of that and die of SIGABRT, and the one report
// must name the original fault (a SIGSEGV stack overflow in the recursing function) and the
// SIGABRT Rust's handler raised on it. Skipped, with the reason, where rustc is missing.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class RustTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("rust")

    /// rustc from PATH, else rustup's default place.
    func rustc() throws -> String {
        let home = ProcessInfo.processInfo.environment["HOME"] ?? "/root"
        guard let found = TestSupport.which("rustc", also: [home + "/.cargo/bin", "/root/.cargo/bin"]) else {
            throw XCTSkip("rustc not found (looked in PATH and ~/.cargo/bin): the Rust fixtures cannot be built")
        }
        return found
    }

    /// overflow.rs built with debug info and no optimisation, so the recursion keeps a frame
    /// per call (no loop, no tail call) and the frames have names and lines.
    func overflowProgram() throws -> String {
        let output = Self.directory + "/overflow"
        let result = try TestSupport.run(
            [try rustc(), "-g", "-C", "opt-level=0", "-o", output, TestSupport.fixture("rust/overflow.rs")])
        guard result.status == .exited(0) else { throw TestFailure("rustc overflow.rs failed:\n\(result.stderr)") }
        return output
    }

    /// `threadName` is the name Rust gives the thread in its message.
    func checkOverflow(_ mode: String, threadName: String) throws {
        let program = try overflowProgram()
        let plain = try TestSupport.run([program, mode])
        let watched = try TestSupport.crashportRun([program, mode])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }

        // Rust's own handler ran, as it does without crashport.
        XCTAssertEqual(plain.status, .signaled(SIGABRT), plain.stderr)
        XCTAssertEqual(watched.result.status, plain.status, "the exit status is the one without crashport")
        for (run, stderr) in [("plain", plain.stderr), ("under crashport", watched.result.stderr)] {
            XCTAssertTrue(
                stderr.contains("thread '\(threadName)'") && stderr.contains("has overflowed its stack"),
                "\(run): Rust's message: \(stderr)")
            XCTAssertTrue(stderr.contains("fatal runtime error: stack overflow"), "\(run): \(stderr)")
        }

        // One report, of the original fault and of who re-raised it.
        XCTAssertEqual(watched.reportIDs.count, 1, watched.result.stderr)
        guard watched.reportIDs.count == 1 else { return }
        let event = try watched.event()
        XCTAssertEqual(event.signal?.name, "SIGSEGV")
        XCTAssertEqual(event.signal?.stackOverflow, true)
        XCTAssertEqual(event.signal?.reraisedBy?.signal, "SIGABRT", "\(event.signal.map { "\($0)" } ?? "no signal")")
        XCTAssertEqual(event.signal?.reraisedBy?.how, .raised)
        let thread = event.crashedThreadRecord
        if threadName == "main" {
            // Rust's "main" is its own name; the kernel's is the program's.
            XCTAssertEqual(thread?.tid?.rawValue, event.process?.pid?.rawValue, "the main thread crashed")
        } else {
            XCTAssertEqual(thread?.name, threadName)
            XCTAssertNotEqual(thread?.tid?.rawValue, event.process?.pid?.rawValue, "the spawned thread crashed")
        }
        let functions = event.crashedFunctions
        XCTAssertTrue(functions.contains("overflow::recurse"), "the recursing function: \(functions.prefix(12))")
        // Named in the title, the recursion folded into one counted line.
        XCTAssertTrue(event.title?.hasPrefix("SIGSEGV: stack overflow in thread '") == true, event.title ?? "no title")
        XCTAssertEqual(event.culprit?.function, "overflow::recurse")
        let folded = watched.result.stderr.split(separator: "\n").first {
            $0.contains("overflow::recurse (overflow.rs:") && $0.contains(" × ")
        }
        XCTAssertNotNil(folded, watched.result.stderr)
    }

    func testStackOverflowOnTheMainThread() throws {
        try checkOverflow("main", threadName: "main")
    }

    func testStackOverflowOnASpawnedThread() throws {
        try checkOverflow("thread", threadName: "worker")
    }
}
