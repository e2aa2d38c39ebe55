// End-to-end: the crashes that break crash reporters: stack overflow on any thread, several
// threads faulting at once, abort() from inside malloc, and a watcher that is stopped or
// killed. The dying program must never be kept alive by crashport.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class StressTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("stress")

    func stress() throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("coexist/stress.c")], output: Self.directory + "/stress",
            flags: ["-O2", "-g", "-pthread"])
    }

    func testStackOverflowOnASecondaryThread() throws {
        let watched = try TestSupport.crashportRun([try stress(), "overflow-thread"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(11), watched.result.stderr)
        XCTAssertEqual(watched.reportIDs.count, 1)
        let event = try watched.event()
        XCTAssertNotEqual(event.crashedThread?.rawValue, event.process?.pid?.rawValue, "the overflow was on the secondary thread")
        XCTAssertEqual(event.threads?.count, 2)
        XCTAssertEqual(event.crashedFunctions.first, "recurse")
    }

    /// Deep stacks keep their first and last frames, with the number left out marked.
    func testStackOverflowOnTheMainThreadKeepsBothEnds() throws {
        let watched = try TestSupport.crashportRun([try stress(), "overflow-main"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(11), watched.result.stderr)
        XCTAssertEqual(watched.reportIDs.count, 1)
        let thread = try watched.event().crashedThreadRecord
        XCTAssertGreaterThan(thread?.truncated ?? 0, 1000)
        let functions = thread?.frames?.map { $0.function ?? "?" } ?? []
        XCTAssertEqual(functions.first, "recurse")
        XCTAssertTrue(functions.suffix(8).contains("main"), "the outermost frames are kept: \(functions.suffix(8))")
    }

    func testSeveralThreadsFaultingAtOnceGiveOneReport() throws {
        let watched = try TestSupport.crashportRun([try stress(), "together", "8"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(11), watched.result.stderr)
        XCTAssertEqual(watched.reportIDs.count, 1)
        XCTAssertEqual(try watched.event().crashedFunctions.first, "fault_now")
    }

    func testAbortFromInsideMalloc() throws {
        let watched = try TestSupport.crashportRun([try stress(), "doublefree"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(6), watched.result.stderr)
        XCTAssertEqual(watched.reportIDs.count, 1)
        let event = try watched.event()
        XCTAssertTrue(containsInOrder(event.crashedFrames, ["abort", "main"]), "\(event.crashedFunctions)")
    }

    /// Starts `crashport run -- stress slow`, returns the watcher process and the program's pid.
    func startSlowCrash(reports: String, timeoutMilliseconds: Int) throws -> (Process, Int32, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestSupport.crashport)
        process.arguments = [
            "run", "--reports", reports, "--timeout-ms", String(timeoutMilliseconds), "--", try stress(), "slow",
        ]
        process.environment = ProcessInfo.processInfo.environment.merging(["CRASHPORT_STUB": try TestSupport.stub()]) { $1 }
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        guard let pid = Int32(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw TestFailure("no pid from the program")
        }
        return (process, pid, errors)
    }

    /// Seconds until the process is dead (a zombie or gone), at most `limit`.
    func secondsUntilDead(_ pid: Int32, limit: TimeInterval) -> TimeInterval? {
        let start = Date()
        while Date().timeIntervalSince(start) < limit {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else {
                return Date().timeIntervalSince(start)
            }
            if let close = stat.lastIndex(of: ")"), stat[stat.index(after: close)...].dropFirst().first == "Z" {
                return Date().timeIntervalSince(start)
            }
            usleep(20_000)
        }
        return nil
    }

    /// A stopped watcher: the stub's wait is bounded, the program dies with its own signal, and
    /// the record is still reported once the watcher runs again.
    func testStoppedWatcherDoesNotKeepTheProgramAlive() throws {
        let reports = TestSupport.temporaryDirectory("stopped")
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let (watcher, pid, _) = try startSlowCrash(reports: reports, timeoutMilliseconds: 1000)
        kill(watcher.processIdentifier, SIGSTOP)
        // The program crashes about 1 s after printing its pid, then waits at most 1 s.
        let died = secondsUntilDead(pid, limit: 10)
        kill(watcher.processIdentifier, SIGCONT)
        watcher.waitUntilExit()
        XCTAssertNotNil(died, "the program must die although the watcher is stopped")
        XCTAssertLessThan(died ?? 99, 6)
        XCTAssertEqual(watcher.terminationReason, .uncaughtSignal)
        XCTAssertEqual(watcher.terminationStatus, SIGSEGV)
        let ids = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }
        XCTAssertEqual(ids.count, 1)
        if let id = ids.first {
            let event = try Event.decode(try Data(contentsOf: URL(fileURLWithPath: reports + "/" + id + "/event.json")))
            XCTAssertEqual(event.signal?.name, "SIGSEGV")
            XCTAssertTrue(event.notes?.contains { $0.contains("already exited") } ?? false, "\(event.notes ?? [])")
        }
    }

    /// A killed watcher: the program dies at once when it crashes, with its own signal.
    func testKilledWatcherDoesNotKeepTheProgramAlive() throws {
        let reports = TestSupport.temporaryDirectory("killed")
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let (watcher, pid, _) = try startSlowCrash(reports: reports, timeoutMilliseconds: 30_000)
        kill(watcher.processIdentifier, SIGKILL)
        watcher.waitUntilExit()
        // Orphaned, the program crashes about 1 s later; with its watcher gone it must not wait
        // the 30 s timeout.
        let died = secondsUntilDead(pid, limit: 10)
        XCTAssertNotNil(died)
        XCTAssertLessThan(died ?? 99, 5)
    }
}
