// A crash record's registers and stack copy are its sender's word. Captured against a real live
// process (alone, read without ptrace, as a single-threaded client of a sidecar is), records
// whose stack pointer, stack copy, pc and app-area address lie at 0, at the top of the address
// space or just across its edges are captured and finished (what the sidecar does before and
// after its verdict), never a trap.

import BoundedBytes
import Foundation
import LiveProcess
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class WildRecordCaptureTests: XCTestCase {
    func testWildRecordsAboutALiveProcessAreCaptured() throws {
        let sleeper = try Sleeper.start()
        defer { sleeper.stop() }
        let (pid, maps) = (sleeper.pid, sleeper.maps)
        let stack = try XCTUnwrap(maps.first { $0.path == "[stack]" })
        let code = try XCTUnwrap(maps.first { $0.executable && $0.readable })
        let edges: [UInt64] = [0, 1, 127, 128, UInt64.max - 127, UInt64.max - 8, UInt64.max, stack.end &- 64]
        let cache = ELFCache()
        var captured = 0
        for signal in [SIGABRT, SIGSEGV] {
            for sp in edges {
                for start in [0, UInt64.max - 255, stack.end &- 256, sp &- 128] {
                    for pc in [0, UInt64.max, code.start, code.end &- 1] {
                        var record = CrashRecord(
                            observation: .hang(milliseconds: 0), pid: pid, tid: ThreadID(pid.rawValue), signal: signal,
                            appArea: sp, timeNanoseconds: 0)
                        record.observation = nil
                        record.code = signal == SIGABRT ? -6 : 1
                        record.faultAddress = sp &- 8
                        record.registers["rsp"] = sp
                        record.registers["rip"] = pc
                        record.registers["rbp"] = sp &+ 16
                        // (pointer, length) pairs into the stack and code, and words that wrap.
                        let words: [UInt64] = [stack.end &- 32, 16, code.start, 4096, UInt64.max, UInt64.max, sp, 8]
                        let bytes = words.flatMap { [UInt8](littleEndian: $0) }
                        record.stack = MemoryRegion(start: start, bytes: bytes)
                        let held = CaptureSession.hold(record: record, options: CaptureOptions(), cache: cache)
                        let capture = held.finish(cache: cache)
                        XCTAssertEqual(capture.snapshot.threads.first?.registers.rsp, sp)
                        captured += 1
                    }
                }
            }
        }
        XCTAssertEqual(captured, 2 * edges.count * 4 * 4)
    }
}
