// Fuzz: the ELF reader on mutated real files, for a bounded time. Every accessor a report or
// the unwinder uses must return something or nothing, never trap, hang or allocate without
// bound.

import Foundation
import FuzzTargets
import TestSupport
import XCTest

final class ELFFuzzTests: XCTestCase {
    func testMutatedELFFilesNeverTrap() throws {
        let original = try Array(Data(contentsOf: URL(fileURLWithPath: "/bin/true")))
        var rng = SplitMix64(seed: 0xE1F)
        let deadline = Date().addingTimeInterval(8)
        var rounds = 0
        while Date() < deadline && rounds < 3000 {
            rounds += 1
            var bytes = original
            switch rounds % 4 {
            case 0:  // the headers: ELF header, program headers
                for _ in 0..<Int.random(in: 1...6, using: &rng) {
                    bytes[Int.random(in: 0..<min(1024, bytes.count), using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            case 1:  // anywhere
                for _ in 0..<Int.random(in: 1...32, using: &rng) {
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            case 2:  // truncated
                bytes.removeLast(Int.random(in: 1..<bytes.count, using: &rng))
            default:  // the section header table at the end
                for _ in 0..<Int.random(in: 1...16, using: &rng) {
                    let at = bytes.count - 1 - Int.random(in: 0..<min(2048, bytes.count), using: &rng)
                    bytes[at] = UInt8.random(in: 0...255, using: &rng)
                }
            }
            // Every accessor a report, the unwinder or the locator uses: the libFuzzer target's.
            FuzzTarget.elf.run(bytes)
        }
        XCTAssertGreaterThan(rounds, 100)
    }
}
