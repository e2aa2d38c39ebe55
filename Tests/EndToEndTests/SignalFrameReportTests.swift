// End-to-end: signal frames are frames (issue 11). Real programs (Tests/Fixtures/sigframe/
// rawhandler.c) whose interesting stack lies beyond a kernel signal frame, on another stack
// than the handler's: the live report and `crashport symbolicate` of its minidump both show
// `<signal handler called>` and go on to the interrupted code; forged signal frames give a
// bounded report.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class SignalFrameReportTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("sigframe")
    static let signalHandlerCalled = "<signal handler called>"

    func program() throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("sigframe/rawhandler.c")], output: Self.directory + "/rawhandler",
            flags: ["-O2", "-g", "-pthread"])
    }

    /// Runs `mode` plainly and under crashport; the exit status must not change and exactly one
    /// report must be written.
    func crash(_ mode: String) throws -> CrashportRun {
        let program = try program()
        let plain = try TestSupport.run([program, mode])
        let watched = try TestSupport.crashportRun([program, mode])
        XCTAssertEqual(plain.status, .signaled(SIGSEGV), "\(mode): \(plain.stderr)")
        XCTAssertEqual(watched.result.status, plain.status, "\(mode): \(watched.result.stderr)")
        XCTAssertEqual(watched.reportIDs.count, 1, "\(mode): \(watched.result.stderr)")
        return watched
    }

    /// `crashport symbolicate --format json` of the report's minidump.
    func offline(_ run: CrashportRun) throws -> Event {
        let result = try TestSupport.run([TestSupport.crashport, "symbolicate", "--format", "json", run.minidumpPath()])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        return try Event.decode(Data(result.stdout.utf8))
    }

    func functions(_ thread: ThreadRecord?) -> [String] { thread?.frames?.map { $0.function ?? "?" } ?? [] }

    func testAReRaiseFromAHandlerOnItsOwnAltstackReportsTheFaultBeyondTheSignalFrame() throws {
        let run = try crash("reraise")
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertTrue(run.result.stderr.contains("rawhandler: SIGSEGV in the raw handler"), run.result.stderr)
        let event = try run.event()
        let names = event.crashedFunctions
        let expected = ["raw_handler", Self.signalHandlerCalled, "fault_here", "level_two", "level_one", "main"]
        XCTAssertTrue(containsInOrder(names, expected), "\(names)")
        let frames = event.crashedThreadRecord?.frames ?? []
        let index = try XCTUnwrap(names.firstIndex(of: Self.signalHandlerCalled), "\(names)")
        XCTAssertEqual(names.filter { $0 == Self.signalHandlerCalled }.count, 1, "\(names)")
        // Adjacent: the handler returns into the trampoline, which interrupted fault_here.
        XCTAssertEqual(names[index - 1], "raw_handler", "\(names)")
        XCTAssertEqual(names[index + 1], "fault_here", "\(names)")
        XCTAssertEqual(frames[index].trust, .signalFrame)
        // The program's own restorer, not libc's __restore_rt.
        XCTAssertEqual(frames[index].module.map { ($0 as NSString).lastPathComponent }, "rawhandler")
        XCTAssertEqual(frames[index + 1].file.map { ($0 as NSString).lastPathComponent }, "rawhandler.c")

        // The raw handler bypassed the stub, yet the report names the fault its signal frame
        // holds, not the raise() that followed.
        XCTAssertEqual(event.signal?.name, "SIGSEGV")
        XCTAssertEqual(event.signal?.codeName, "SEGV_MAPERR")
        XCTAssertEqual(event.signal?.reraisedBy?.function, "raw_handler")
        XCTAssertEqual(event.signal?.reraisedBy?.originalFrame, index + 1)
        XCTAssertEqual(frames[index].delivered?.number, SIGSEGV)

        // The interrupted stack is in the minidump: offline gives the same frames and fault.
        let offlineEvent = try offline(run)
        XCTAssertEqual(functions(offlineEvent.crashedThreadRecord), names)
        XCTAssertEqual(offlineEvent.signal?.codeName, "SEGV_MAPERR")
        let text = try TestSupport.run([TestSupport.crashport, "symbolicate", run.minidumpPath()])
        let line = text.stdout.split(separator: "\n").first { $0.contains(Self.signalHandlerCalled) }
        XCTAssertNotNil(line, text.stdout)
        XCTAssertFalse(line?.contains("[") ?? true, "printed as gdb does, no trust label: \(line ?? "")")
    }

    func testAThreadParkedInAHandlerOnItsAltstackIsUnwoundDownToItsThreadFunction() throws {
        let run = try crash("parked")
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        let event = try run.event()
        XCTAssertTrue(containsInOrder(event.crashedFunctions, ["fault_here", "level_two", "level_one", "main"]))
        let parked = try XCTUnwrap(
            event.threads?.first { $0.crashed != true && functions($0).contains("parked_handler") }, "\(event.threads ?? [])")
        let names = functions(parked)
        let expected = ["parked_handler", Self.signalHandlerCalled, "spin_here", "worker_loop", "worker"]
        XCTAssertTrue(containsInOrder(names, expected), "\(names)")
        let index = try XCTUnwrap(names.firstIndex(of: Self.signalHandlerCalled))
        XCTAssertEqual(parked.frames?[index].trust, .signalFrame)
        XCTAssertEqual(names[index + 1], "spin_here", "\(names)")

        let offlineThreads = try offline(run).threads ?? []
        for thread in event.threads ?? [] {
            let offlineThread = offlineThreads.first { $0.tid == thread.tid }
            XCTAssertEqual(functions(offlineThread), functions(thread), "thread \(thread.tid ?? 0)")
        }
    }

    func testNestedSignalFramesAreEachAFrame() throws {
        let run = try crash("nested")
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        let event = try run.event()
        let parked = try XCTUnwrap(
            event.threads?.first { $0.crashed != true && functions($0).contains("parked_handler") }, "\(event.threads ?? [])")
        let names = functions(parked)
        let expected = [
            "parked_handler", Self.signalHandlerCalled, "nesting_handler", Self.signalHandlerCalled, "spin_here",
            "worker_loop", "worker",
        ]
        XCTAssertTrue(containsInOrder(names, expected), "\(names)")
        XCTAssertEqual(names.filter { $0 == Self.signalHandlerCalled }.count, 2, "\(names)")
        let offlineThread = try offline(run).threads?.first { $0.tid == parked.tid }
        XCTAssertEqual(functions(offlineThread), names)
    }

    func testForgedSignalFramesGiveABoundedReport() throws {
        for mode in ["forged", "garbage"] {
            let run = try crash(mode)
            defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
            let event = try run.event()
            let names = event.crashedFunctions
            XCTAssertEqual(names.first, "forged_fault", "\(mode): \(names)")
            // At most 16 signal frames are followed (the 17th is shown, not followed).
            let signalFrames = names.filter { $0 == Self.signalHandlerCalled }.count
            XCTAssertGreaterThanOrEqual(signalFrames, 1, "\(mode): \(names)")
            XCTAssertLessThanOrEqual(signalFrames, 17, "\(mode): \(names)")
            XCTAssertLessThanOrEqual(names.count, 40, "\(mode): \(names)")
            if mode == "garbage" {
                // The garbage registers are shown once, as a scan-trust guess, and the walk ends.
                let frames = event.crashedThreadRecord?.frames ?? []
                XCTAssertEqual(frames.count, 3, "\(names)")
                XCTAssertEqual(frames.last?.trust, .scan)
                XCTAssertEqual(frames.last?.pc, HexAddress(0x4141))
            }
            XCTAssertEqual(functions(try offline(run).crashedThreadRecord), names, mode)
        }
    }
}
