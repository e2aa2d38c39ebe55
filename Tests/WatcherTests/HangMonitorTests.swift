// HangMonitor judges a heartbeat that lives in the program's own memory, which the program may
// overwrite with anything: its verdicts over sequences of headers, real and scribbled.

import CCrashPortProtocol
import TestSupport
import XCTest

@testable import Watcher

final class HangMonitorTests: XCTestCase {
    /// A 64-byte app-area header in use, with this beat count and thread.
    func header(count: UInt64, thread: Int32 = 7, magic: UInt32 = CP_APP_MAGIC) -> [UInt8] {
        WireBytes.appAreaHeader(magic: magic, heartbeatCount: count, heartbeatThread: thread)
    }

    let ms: UInt64 = 1_000_000

    /// Beats, a stall past the limit (one report, naming the thread that beat last), the stall
    /// going on (no second report), the beat resuming (said once), and a program that never beat
    /// (never judged).
    func testOneReportPerStall() {
        var monitor = HangMonitor(milliseconds: 100)
        XCTAssertEqual(monitor.interval, 25)
        XCTAssertEqual(monitor.look(header: header(count: 1), now: 0), .fine)
        XCTAssertEqual(monitor.look(header: header(count: 2), now: 50 * ms), .fine)
        XCTAssertEqual(monitor.look(header: header(count: 2), now: 140 * ms), .fine)
        XCTAssertEqual(
            monitor.look(header: header(count: 2, thread: 9), now: 151 * ms), .hung(milliseconds: 101, thread: 9, ordinal: 1))
        XCTAssertEqual(monitor.look(header: header(count: 2), now: 900 * ms), .fine, "one report per stall")
        XCTAssertEqual(monitor.look(header: header(count: 3), now: 950 * ms), .resumed)
        XCTAssertEqual(monitor.look(header: header(count: 4), now: 960 * ms), .fine)

        var silent = HangMonitor(milliseconds: 100)
        for step in 0..<10 {
            XCTAssertEqual(silent.look(header: header(count: 0), now: UInt64(step) * 1000 * ms), .fine)
            XCTAssertEqual(silent.look(header: nil, now: UInt64(step) * 1000 * ms + 1), .fine)
            XCTAssertEqual(silent.look(header: header(count: 5, magic: 0xdead), now: UInt64(step) * 1000 * ms + 2), .fine)
        }
    }

    /// A limit no clock reaches (--hang-ms or a configuration's hang-ms of 2^64-1) is no limit,
    /// not an overflow trap.
    func testALimitPastTheClockNeverFires() {
        var monitor = HangMonitor(milliseconds: .max)
        XCTAssertEqual(monitor.look(header: header(count: 1), now: 0), .fine)
        XCTAssertEqual(monitor.look(header: header(count: 1), now: .max - 1), .fine)
    }

    /// A program that scribbles on its heartbeat: values that change at every look are beats
    /// (it is alive), and a scribble that freezes, thaws and freezes again is a hang each time,
    /// but at most five are reported in ten minutes (numbered, so the report can say so); the
    /// rest are suppressed, and the window moving on allows reports again.
    func testScribbledHeartbeatCannotCauseAStorm() {
        var monitor = HangMonitor(milliseconds: 10)
        var now: UInt64 = 0
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<1000 {
            now += 10 * ms
            XCTAssertEqual(
                monitor.look(header: header(count: generator.next() | 1, thread: .random(in: 1...99)), now: now), .fine)
        }
        var verdicts: [HangMonitor.Verdict] = []
        for round in 0..<50 {
            now += 10 * ms
            _ = monitor.look(header: header(count: UInt64(round + 1)), now: now)
            now += 20 * ms
            verdicts.append(monitor.look(header: header(count: UInt64(round + 1)), now: now))
        }
        let hung = verdicts.compactMap { verdict -> Int? in
            if case .hung(_, _, let ordinal) = verdict { return ordinal } else { return nil }
        }
        XCTAssertEqual(hung, [1, 2, 3, 4, 5])
        XCTAssertEqual(verdicts.filter { $0 == .suppressed }.count, 45)
        now += HangMonitor.window
        _ = monitor.look(header: header(count: 1000), now: now)
        if case .hung(_, _, let ordinal) = monitor.look(header: header(count: 1000), now: now + 20 * ms) {
            XCTAssertEqual(ordinal, 1)
        } else {
            XCTFail("a stall after the window is reported again")
        }
    }
}
