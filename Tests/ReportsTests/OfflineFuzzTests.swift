// Fuzz: the offline pipeline (minidump reader, unwinder, symbolizer) on mutated minidumps, for
// a bounded time. Hostile registers and stack contents reach libunwind here; nothing may trap
// or hang.

import Foundation
import BoundedBytes
import ObjectFile
import ReportModel
@testable import Reports
import XCTest

final class OfflineFuzzTests: XCTestCase {
    func testMutatedMinidumpsNeverTrapTheOfflinePipeline() throws {
        // A small but real-looking process: two threads whose stacks hold pointers into a
        // module mapped from /bin/true.
        var state: UInt64 = 0xDEC0DE
        func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state
        }
        let base: UInt64 = 0x5555_5555_0000
        func registers(_ seed: UInt64) -> X86_64Registers {
            var gpr = [UInt64](repeating: 0, count: 27)
            gpr[16] = base + 0x1040 + seed % 0x200  // rip
            gpr[19] = 0x7fff_0000_1000  // rsp
            gpr[4] = 0x7fff_0000_1100  // rbp
            return X86_64Registers(gpr: gpr)
        }
        func stack() -> MemoryRegion {
            MemoryRegion(
                start: 0x7fff_0000_1000,
                bytes: (0..<4096).map { index in
                    index % 16 == 0
                        ? UInt8(truncatingIfNeeded: (base + 0x1100) >> (8 * UInt64(index % 8)))
                        : UInt8(truncatingIfNeeded: next())
                })
        }
        let snapshot = ProcessSnapshot(
            pid: 42, crashedThreadID: 42, exception: ExceptionInfo(signal: 11, code: 1, faultAddress: 0),
            threads: [
                ThreadSnapshot(tid: 42, name: "main", registers: registers(1), stack: stack()),
                ThreadSnapshot(tid: 43, name: "worker", registers: registers(2), stack: stack()),
            ],
            modules: [LoadedModule(path: "/bin/true", base: base, size: 0x8000, buildID: nil)], captureTime: 0)
        let valid = MinidumpWriter().bytes(for: snapshot)
        let symbolicator = OfflineSymbolicator(debugDirectories: [])
        XCTAssertNoThrow(try symbolicator.symbolicate(minidump: Minidump(bytes: valid), name: "valid"))
        let deadline = Date().addingTimeInterval(8)
        var rounds = 0
        while Date() < deadline && rounds < 1500 {
            rounds += 1
            var bytes = valid
            for _ in 0..<Int(1 + next() % 12) {
                bytes[Int(next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: next())
            }
            if let dump = try? Minidump(bytes: bytes) {
                _ = try? symbolicator.symbolicate(minidump: dump, name: "fuzz")
            }
        }
        XCTAssertGreaterThan(rounds, 50)
    }
}
