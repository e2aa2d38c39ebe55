// Fuzz: hostile .eh_frame and .debug_frame, for a bounded number of rounds. A real -O2
// executable linked without .eh_frame_hdr (so EHFrameIndex parses .eh_frame itself), or built
// without unwind tables (so its CFI is .debug_frame's, which DebugFrame rewrites), has that
// section's bytes mutated, and the registers and stack it captured of itself are unwound over the
// mutated file: whatever the frames, the unwinder must return, never trap or run away.

import Foundation
import TestSupport
import BoundedBytes
@testable import ObjectFile
import Unwinding
import XCTest

final class EHFrameFuzzTests: XCTestCase {
    func testMutatedEHFrameNeverTraps() throws {
        let snapshot = try CapturedSnapshot.take(label: "unwind-fuzz", linkFlags: ["-Wl,--no-eh-frame-hdr"])
        XCTAssertNil(try ELFFile(path: snapshot.executable).ehFrameTable)
        try fuzz(".eh_frame", of: snapshot)
    }

    func testMutatedDebugFrameNeverTraps() throws {
        // (-fno-asynchronous-unwind-tables goes to the one cc that compiles and links.)
        let snapshot = try CapturedSnapshot.take(label: "unwind-fuzz-debug-frame", linkFlags: ["-fno-asynchronous-unwind-tables"])
        let clean = try ELFFile(path: snapshot.executable)
        let code = clean.executableRanges
        XCTAssertNotNil(clean.debugFrame(code: code), "built with -g and no unwind tables: its CFI is .debug_frame's")
        try fuzz(".debug_frame", of: snapshot)
    }

    func fuzz(_ name: String, of snapshot: CapturedSnapshot) throws {
        let original = try Array(Data(contentsOf: URL(fileURLWithPath: snapshot.executable)))
        let clean = try ELFFile(path: snapshot.executable)
        let section = try XCTUnwrap(clean.section(named: name))
        let start = Int(section.offset), count = Int(section.size)
        XCTAssertGreaterThan(count, 16)
        XCTAssertLessThanOrEqual(start + count, original.count)
        let memory = RegionMemory(regions: [snapshot.stack])
        // Unmutated, the bytes-backed copy unwinds to main like the file does: the rounds below
        // start from a table that works.
        let copy = try ELFFile(file: MappedFile(bytes: original, name: "copy"))
        let baseline = Unwinder(memory: memory, modules: snapshot.loadedModules(replacing: snapshot.executable, with: copy))
        XCTAssertGreaterThanOrEqual(baseline.unwind(registers: snapshot.registers).frames.count, 4)
        var rng = SplitMix64(seed: 0xE4F)
        var unwound = 0
        for round in 0..<3000 {
            var bytes = original
            switch round % 4 {
            case 0:  // a few bytes anywhere in the section
                for _ in 0..<Int.random(in: 1...8, using: &rng) {
                    bytes[start + rng.below(count)] = UInt8.random(in: 0...255, using: &rng)
                }
            case 1:  // length fields and CIE pointers: the words at record starts are the likeliest
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    let at = start + (rng.below(count) & ~3)
                    let word = UInt32.random(in: 0...UInt32.max, using: &rng)
                    bytes.put(UInt64(word), at: at, size: min(4, start + count - at))
                }
            case 2:  // augmentation strings, encodings and instructions: small values
                for _ in 0..<Int.random(in: 1...16, using: &rng) {
                    bytes[start + rng.below(count)] = [0x00, 0x01, 0x0B, 0x1B, 0x3B, 0x7F, 0x80, 0xFF][rng.below(8)]
                }
            default:  // a run of noise
                let at = start + rng.below(count)
                for k in at..<min(at + 1 + rng.below(64), start + count) { bytes[k] = UInt8.random(in: 0...255, using: &rng) }
            }
            guard let elf = try? ELFFile(file: MappedFile(bytes: bytes, name: "fuzz")) else { continue }
            let unwinder = Unwinder(memory: memory, modules: snapshot.loadedModules(replacing: snapshot.executable, with: elf))
            unwinder.maxFrames = 64
            unwinder.headFrames = 32
            unwinder.frameLimit = 10_000
            let stack = unwinder.unwind(registers: snapshot.registers)
            XCTAssertLessThanOrEqual(stack.frames.count, 64)
            unwound += 1
        }
        XCTAssertGreaterThan(unwound, 0)
    }
}
