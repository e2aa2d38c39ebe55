// End-to-end: whole-process capture. Every thread is suspended, captured and unwound; the
// minidump is read back by tools nobody here wrote (minidump-stackwalk, LLDB 14).

import Foundation
import ReportModel
import TestSupport
import XCTest

final class WholeProcessTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("whole-process")

    func build(_ source: String, _ name: String, compiler: String = "cc", flags: [String] = []) throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("corpus/" + source)], output: Self.directory + "/" + name,
            compiler: compiler, flags: ["-O2", "-g", "-pthread"] + flags)
    }

    func testSixtyFourParkedThreadsAreAllCapturedAndUnwound() throws {
        let program = try build("threads.c", "threads")
        let watched = try TestSupport.crashportRun([program, "64"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(11), watched.result.stderr)
        XCTAssertEqual(watched.reportIDs.count, 1)
        let event = try watched.event()
        let threads = event.threads ?? []
        XCTAssertEqual(threads.count, 65)
        XCTAssertEqual(threads.first?.crashed, true, "the crashing thread comes first")
        XCTAssertEqual(Array(event.crashedFunctions.prefix(2)), ["crash_main", "main"])
        for thread in threads where thread.crashed != true {
            let functions = thread.frames?.map { $0.function ?? "?" } ?? []
            XCTAssertTrue(
                containsInOrder(functions, ["park_here", "use_stack", "thread_main"]),
                "thread \(thread.tid ?? 0) \(thread.name ?? ""): \(functions)")
            XCTAssertTrue(thread.name?.hasPrefix("parked-") ?? false)
        }

        // Our own reader agrees.
        let dump = try Minidump(path: watched.minidumpPath())
        XCTAssertEqual(dump.threads.count, 65)
        XCTAssertEqual(dump.exception?.threadID, UInt32(event.crashedThread?.rawValue ?? 0))

        // rust-minidump: thread count, crash reason, top frames of the crashing thread by name.
        let json = try TestSupport.stackwalk(watched.minidumpPath())
        XCTAssertEqual(json["status"] as? String, "OK")
        XCTAssertEqual(json["thread_count"] as? Int, 65)
        let crashInfo = json["crash_info"] as? [String: Any]
        XCTAssertEqual(crashInfo?["type"] as? String, "SIGSEGV / SEGV_MAPERR")
        let crashing = json["crashing_thread"] as? [String: Any]
        let frames = (crashing?["frames"] as? [[String: Any]]) ?? []
        XCTAssertEqual(frames.prefix(2).compactMap { $0["function"] as? String }, ["crash_main", "main"])
        let parked = ((json["threads"] as? [[String: Any]]) ?? []).dropFirst()
        for thread in parked {
            let names = ((thread["frames"] as? [[String: Any]]) ?? []).compactMap { $0["function"] as? String }
            XCTAssertTrue(names.contains("park_here"), "minidump-stackwalk: \(names)")
        }

        // LLDB 14: stop reason, top frames, thread count.
        let output = try TestSupport.lldb(watched.minidumpPath(), commands: ["thread list", "bt"])
        XCTAssertTrue(output.contains("stop reason = signal SIGSEGV"), output)
        XCTAssertTrue(output.contains("crash_main"), output)
        XCTAssertTrue(output.contains("`main"), output)
        XCTAssertEqual(output.components(separatedBy: "tid = ").count - 1, 65, output)
    }

    func testUncaughtCxxExceptionOnASecondaryThread() throws {
        let program = try build("throw.cpp", "throw", compiler: "c++")
        let watched = try TestSupport.crashportRun([program])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(6), watched.result.stderr)
        XCTAssertEqual(watched.reportIDs.count, 1)
        let event = try watched.event()
        let mainThread = event.process?.pid.map { ThreadID($0.rawValue) }  // the main thread's id is the pid
        XCTAssertNotEqual(event.crashedThread, mainThread, "the worker thread crashed, not main")
        XCTAssertEqual(event.threads?.count, 2)
        let functions = event.crashedFunctions
        XCTAssertTrue(
            containsInOrder(event.crashedFrames, ["abort", "std::terminate()", "__cxa_throw", "worker(int)"]), "\(functions)")
        XCTAssertTrue(functions.contains { $0.hasPrefix("parse_config(int)") }, "\(functions)")
        let main = event.threads?.first { $0.tid == mainThread }
        XCTAssertTrue(main?.frames?.contains { $0.function == "main" } ?? false)

        let json = try TestSupport.stackwalk(watched.minidumpPath())
        XCTAssertEqual((json["crash_info"] as? [String: Any])?["type"] as? String, "SIGABRT / SI_TKILL")
        XCTAssertEqual(json["thread_count"] as? Int, 2)
    }

    /// A static executable cannot take LD_PRELOAD; it links libcrashport.a, whose constructor
    /// installs from CRASHPORT_FD. It still gets its one module and a full unwind (no
    /// .eh_frame_hdr in static glibc binaries: the index is built from .eh_frame).
    func testStaticExecutable() throws {
        let archive = (try TestSupport.stub() as NSString).deletingLastPathComponent + "/libcrashport.a"
        let program = try build(
            "crash.c", "crash-static",
            flags: [
                "-static", "-Wl,--whole-archive", archive, "-Wl,--no-whole-archive",
            ])
        let watched = try TestSupport.crashportRun([program, "null"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(11), watched.result.stderr)
        XCTAssertEqual(watched.reportIDs.count, 1)
        let event = try watched.event()
        XCTAssertEqual(event.modules?.filter { $0.path != "[vdso]" }.map(\.path), [program])
        XCTAssertEqual(Array(event.crashedFunctions.prefix(4)), ["crash_null", "level_two", "level_one", "main"])

        // Without the archive, crashport says why nothing can be reported.
        let plain = try build("crash.c", "crash-static-plain", flags: ["-static"])
        let unwatched = try TestSupport.crashportRun([plain, "exit", "4"])
        defer { try? FileManager.default.removeItem(atPath: unwatched.reportsDirectory) }
        XCTAssertEqual(unwatched.result.status, .exited(4))
        XCTAssertTrue(unwatched.result.stderr.contains("statically linked"), unwatched.result.stderr)
    }
}
