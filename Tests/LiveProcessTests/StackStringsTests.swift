// StackStrings from a record alone: the texts a SIGABRT's stack copy points at, and nothing (never
// a trap) when the record's stack pointer and stack copy are values no real crash gives.

import BoundedBytes
import LiveProcess
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class StackStringsTests: XCTestCase {
    /// A SIGABRT record whose stack copy at `start` holds, at sp, a (pointer, length) pair
    /// pointing at a text further up the copy.
    func record(start: UInt64, sp: UInt64, text: String = "panicked at src/main.rs:3:5: boom") -> CrashRecord {
        var record = CrashRecord(
            observation: .hang(milliseconds: 0), pid: ProcessID(4242), tid: ThreadID(4242), signal: SIGABRT, appArea: 0,
            timeNanoseconds: 0)
        record.observation = nil
        var bytes = [UInt8](repeating: 0, count: 512)
        let textOffset = 256
        bytes.replaceSubrange(textOffset..<textOffset + text.utf8.count, with: Array(text.utf8))
        if sp >= start, sp - start <= UInt64(bytes.count - 16) {
            let slot = Int(sp - start)
            bytes.put(u64: start &+ UInt64(textOffset), at: slot)
            bytes.put(u64: UInt64(text.utf8.count), at: slot + 8)
        }
        record.stack = MemoryRegion(start: start, bytes: bytes)
        record.registers["rsp"] = sp
        return record
    }

    func stackMapping(_ record: CrashRecord) -> [MemoryMapping] {
        MemoryMapping.parse(
            "\(String(record.stack.start, radix: 16))-\(String(record.stack.end, radix: 16)) rw-p 00000000 00:00 0 [stack]\n")
    }

    func testTheTextAPairOnTheStackPointsAtIsRead() {
        let record = record(start: 0x7FFF_0000_0000, sp: 0x7FFF_0000_0080)
        let found = StackStrings.read(record: record, mappings: stackMapping(record))
        XCTAssertEqual(found.map(\.text), ["panicked at src/main.rs:3:5: boom"])
        XCTAssertEqual(found.first?.slot, 0x7FFF_0000_0080)
    }

    /// A pointer and a length that only lie side by side (one printable byte, then bytes that
    /// are not text; or a single character) are no text: the optimised Rust panic's report was
    /// titled "panicked: H" or "panicked: (" in about a third of its runs.
    func testAPairThatIsNotAllTextIsNone() {
        for garbage in [[0x48, 0xE2, 0x28], [0x28, 0xFF], [0xD8, 0x8D], [0x41]] as [[UInt8]] {
            var record = record(start: 0x7FFF_0000_0000, sp: 0x7FFF_0000_0080, text: "")
            record.stack.bytes.replaceSubrange(256..<256 + garbage.count, with: garbage)
            record.stack.bytes.put(u64: 0x7FFF_0000_0100, at: 0x80)
            record.stack.bytes.put(u64: UInt64(max(garbage.count, 2)), at: 0x88)
            XCTAssertEqual(StackStrings.read(record: record, mappings: stackMapping(record)), [], "\(garbage)")
        }
    }

    /// Issue 30, attack 3 and its neighbours: sp at 2^64-1 over a stack at 0, sp below the
    /// stack, a stack at the top of the address space, a pair whose end wraps.
    func testWildValuesGiveNoTextAndNoTrap() {
        for (start, sp) in [
            (0, UInt64.max), (0, UInt64.max - 7), (0x1000, 0x10), (UInt64.max - 255, UInt64.max - 8),
            (UInt64.max - 511, UInt64.max - 511), (0, UInt64(Int.max)),
        ] as [(UInt64, UInt64)] {
            let wild = record(start: start, sp: sp)
            _ = StackStrings.read(record: wild, mappings: stackMapping(wild))
            _ = StackStrings.read(record: wild, mappings: MemoryMapping.parse("0-ffffffffffffffff r--p 0 00:00 0\n"))
        }
        XCTAssertEqual(StackStrings.read(record: record(start: 0, sp: .max), mappings: []), [])
        var wrapping = record(start: 0x7FFF_0000_0000, sp: 0x7FFF_0000_0080)
        wrapping.stack.bytes.put(u64: .max, at: 0x80)
        XCTAssertEqual(
            StackStrings.read(record: wrapping, mappings: MemoryMapping.parse("0-ffffffffffffffff r--p 0 00:00 0\n")), [])
    }
}
