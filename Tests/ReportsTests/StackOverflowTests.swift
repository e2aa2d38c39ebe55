// The stack-overflow rule on parsed /proc/PID/maps text: a thread stack with its guard page,
// the main thread's grows-down [stack], wild pointers that are not overflows, and input that
// supports no verdict.

import ReportModel
import Reports
import TestSupport
import XCTest

final class StackOverflowTests: XCTestCase {
    /// A process with a 1 MiB thread stack (guard page directly below it) and the main [stack].
    static let maps = """
        55d4c8a00000-55d4c8a01000 r--p 00000000 08:01 1234                       /tmp/stress
        55d4c8a01000-55d4c8a02000 r-xp 00001000 08:01 1234                       /tmp/stress
        55d4c9e3e000-55d4c9e5f000 rw-p 00000000 00:00 0                          [heap]
        7f0e5c000000-7f0e5c021000 rw-p 00000000 00:00 0 
        7f0e637ff000-7f0e63800000 ---p 00000000 00:00 0 
        7f0e63800000-7f0e63900000 rw-p 00000000 00:00 0 
        7f0e63a00000-7f0e63a28000 r--p 00000000 08:01 2                          /usr/lib/x86_64-linux-gnu/libc.so.6
        7f0e63a28000-7f0e63b9d000 r-xp 00028000 08:01 2                          /usr/lib/x86_64-linux-gnu/libc.so.6
        7ffd1c9a0000-7ffd1c9c1000 rw-p 00000000 00:00 0                          [stack]
        7ffd1c9f0000-7ffd1c9f4000 r--p 00000000 00:00 0                          [vvar]
        7ffd1c9f4000-7ffd1c9f6000 r-xp 00000000 00:00 0                          [vdso]
        """
    static let mappings = MemoryMapping.parse(maps)
    static let guardStart: UInt64 = 0x7f0e_637f_f000
    static let threadStack: UInt64 = 0x7f0e_6380_0000
    static let mainStack: UInt64 = 0x7ffd_1c9a_0000

    func verdict(fault: UInt64, sp: UInt64, _ mappings: [MemoryMapping] = mappings) -> Bool? {
        StackOverflow.verdict(faultAddress: fault, stackPointer: sp, mappings: mappings)
    }

    func testTheMapsParse() {
        XCTAssertEqual(Self.mappings.count, 11)
        XCTAssertEqual(Self.mappings[4].start, Self.guardStart)
        XCTAssertFalse(Self.mappings[4].readable || Self.mappings[4].writable || Self.mappings[4].executable)
        XCTAssertEqual(Self.mappings[8].path, "[stack]")
    }

    func testAFaultInTheGuardBelowAThreadStackIsAnOverflow() {
        // A call at the very bottom of the stack pushes into the guard.
        XCTAssertEqual(verdict(fault: Self.threadStack - 8, sp: Self.threadStack), true)
        // A large frame touched far below the stack pointer, still in the guard.
        XCTAssertEqual(verdict(fault: Self.guardStart + 0x100, sp: Self.threadStack + 0x3000), true)
        // The stack pointer already moved into the guard (sub rsp, then a probe).
        XCTAssertEqual(verdict(fault: Self.guardStart + 0x800, sp: Self.guardStart + 0x800), true)
        // ... or past it, into unmapped memory, within a page.
        XCTAssertEqual(verdict(fault: Self.guardStart - 0x20, sp: Self.guardStart + 0x10), true)
    }

    func testAFaultBelowTheGrowsDownMainStackNearTheStackPointerIsAnOverflow() {
        XCTAssertEqual(verdict(fault: Self.mainStack - 8, sp: Self.mainStack), true)
        XCTAssertEqual(verdict(fault: Self.mainStack - 0x200, sp: Self.mainStack + 0x100), true)
        // The stack pointer is already below the mapping, in the stack guard gap.
        XCTAssertEqual(verdict(fault: Self.mainStack - 0x5000, sp: Self.mainStack - 0x5000), true)
        XCTAssertEqual(verdict(fault: Self.mainStack - 0x5008, sp: Self.mainStack - 0x5000), true)
    }

    func testWildPointersAreNotOverflows() {
        for sp in [Self.threadStack + 0x8000, Self.mainStack + 0x8000, Self.mainStack + 8] {
            XCTAssertEqual(verdict(fault: 0, sp: sp), false, "NULL")
            XCTAssertEqual(verdict(fault: 0x10, sp: sp), false, "a field of NULL")
            XCTAssertEqual(verdict(fault: 0x55d4_c9e7_0000, sp: sp), false, "unmapped, past the heap")
            XCTAssertEqual(verdict(fault: 0x55d4_c9e4_0000, sp: sp), false, "inside the heap")
            XCTAssertEqual(verdict(fault: 0x7f0e_63a0_0010, sp: sp), false, "a write to read-only libc")
            XCTAssertEqual(verdict(fault: 0xdead_beef_0000_0000, sp: sp), false, "non-canonical")
        }
        // Below the main stack, but far from the stack pointer: a wild pointer that lands there.
        XCTAssertEqual(verdict(fault: Self.mainStack - 0x10000, sp: Self.mainStack + 0x8000), false)
        // Another thread's guard page is not this thread's overflow.
        XCTAssertEqual(verdict(fault: Self.guardStart + 8, sp: Self.mainStack + 0x8000), false)
        // A fault above the stack pointer inside its own stack is not one either.
        XCTAssertEqual(verdict(fault: Self.threadStack + 0x10, sp: Self.threadStack + 0x8), false)
    }

    func testInputThatCannotSupportAVerdictGivesNone() {
        XCTAssertNil(verdict(fault: Self.threadStack - 8, sp: 0), "sp 0")
        XCTAssertNil(verdict(fault: Self.threadStack - 8, sp: Self.threadStack, []), "no maps")
        XCTAssertNil(verdict(fault: 8, sp: 16, MemoryMapping.parse("garbage\n\u{0}\u{1}-\nzz-yy rw-p x y z\n")))
        XCTAssertNil(verdict(fault: Self.threadStack - 8, sp: 0x7f0e_63a0_0010), "sp in read-only code")
        XCTAssertNil(verdict(fault: 0x1000, sp: 0x1008), "sp in no stack")
        let overlapping = MemoryMapping.parse(Self.maps + "\n7f0e63800000-7f0e63900000 rw-p 00000000 00:00 0\n")
        XCTAssertNil(verdict(fault: Self.threadStack - 8, sp: Self.threadStack, overlapping), "overlapping lines")
        // A guard with nothing writable directly above it is no thread stack.
        let lonelyGuard = MemoryMapping.parse("7f0e637ff000-7f0e63800000 ---p 00000000 00:00 0\n")
        XCTAssertNil(verdict(fault: Self.guardStart, sp: Self.guardStart + 8, lonelyGuard))
    }

    func testRandomMapsAndAddressesNeverTrap() {
        var random = SplitMix64(seed: 11)
        let interesting: [UInt64] = [0, 1, 4095, 4096, UInt64.max, UInt64.max - 4095, Self.guardStart, Self.mainStack]
        for _ in 0..<2000 {
            var lines: [String] = []
            for _ in 0..<random.below(6) {
                let start = random.below(2) == 0 ? interesting[random.below(interesting.count)] : random.next()
                let end = random.below(3) == 0 ? UInt64.max : start &+ UInt64(random.below(0x10000))
                let perms = ["---p", "rw-p", "r-xp", "r--p"][random.below(4)]
                let path = ["", "[stack]", "/lib/x.so"][random.below(3)]
                lines.append("\(String(start, radix: 16))-\(String(end, radix: 16)) \(perms) 00000000 00:00 0 \(path)")
            }
            let mappings = MemoryMapping.parse(lines.joined(separator: "\n"))
            let pick = { (random: inout SplitMix64) -> UInt64 in
                random.below(2) == 0 ? interesting[random.below(interesting.count)] &+ UInt64(random.below(9)) : random.next()
            }
            _ = StackOverflow.verdict(faultAddress: pick(&random), stackPointer: pick(&random), mappings: mappings)
        }
    }

    func snapshot(signal: Int32 = 11, code: Int32 = 2, fault: UInt64, sp: UInt64, maps: String?) -> ProcessSnapshot {
        var registers = X86_64Registers(gpr: [UInt64](repeating: 0, count: X86_64Registers.gprCount))
        registers["rsp"] = sp
        var files = LinuxFiles()
        files.maps = maps.map { Array($0.utf8) }
        return ProcessSnapshot(
            pid: 42, crashedThreadID: 43, exception: ExceptionInfo(signal: signal, code: code, faultAddress: fault),
            threads: [ThreadSnapshot(tid: 43, name: "worker", registers: registers, stack: nil)], modules: [],
            linuxFiles: files, captureTime: 0)
    }

    func testTheSnapshotVerdictNeedsAKernelFaultMapsAndTheCrashedThread() {
        let fault = Self.threadStack - 8
        XCTAssertEqual(StackOverflow.verdict(snapshot(fault: fault, sp: Self.threadStack, maps: Self.maps)), true)
        XCTAssertEqual(StackOverflow.verdict(snapshot(fault: 0, sp: Self.threadStack, maps: Self.maps)), false)
        XCTAssertNil(StackOverflow.verdict(snapshot(fault: fault, sp: Self.threadStack, maps: nil)), "no maps")
        XCTAssertNil(StackOverflow.verdict(snapshot(signal: 6, code: -6, fault: 0, sp: Self.threadStack, maps: Self.maps)))
        XCTAssertNil(
            StackOverflow.verdict(snapshot(code: 0, fault: fault, sp: Self.threadStack, maps: Self.maps)), "kill -SEGV")
        var orphan = snapshot(fault: fault, sp: Self.threadStack, maps: Self.maps)
        orphan.crashedThreadID = 99
        XCTAssertNil(StackOverflow.verdict(orphan), "the crashed thread was not captured")
    }

    func testTheCrashLogNamesTheOverflowFirst() {
        var event = Event()
        event.process = ProcessInfoRecord(pid: 42, executable: "/tmp/stress", arguments: [], buildID: nil)
        event.signal = SignalRecord(
            number: 11, name: "SIGSEGV", code: 2, codeName: "SEGV_ACCERR", faultAddress: HexAddress(Self.threadStack - 8),
            description: "invalid permissions for mapped object (SEGV_ACCERR)", stackOverflow: true)
        let first = CrashLog.full(event).split(separator: "\n").first.map(String.init)
        XCTAssertEqual(
            first,
            "/tmp/stress (pid 42) crashed: SIGSEGV, stack overflow: invalid permissions for mapped object (SEGV_ACCERR) at 0x7f0e637ffff8"
        )
        event.signal?.stackOverflow = false
        XCTAssertFalse(CrashLog.full(event).contains("stack overflow"))
    }
}
