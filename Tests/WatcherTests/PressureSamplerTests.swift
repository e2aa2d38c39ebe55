// When the pressure sampler looks next: from the rate usage grows at, sooner as the threshold
// nears, and every millisecond or so above it while usage climbs.

import XCTest

@testable import Watcher

final class PressureSamplerTests: XCTestCase {
    let limit: UInt64 = 64 << 20
    let ms: UInt64 = 1_000_000

    func next(_ usage: UInt64, after before: UInt64, in elapsed: UInt64) -> UInt64 {
        PressureSampler.interval(usage: usage, limit: limit, growth: (usage, 1_000 * ms + elapsed, before, 1_000 * ms))
    }

    func testTheIntervalFollowsTheGrowth() {
        XCTAssertEqual(PressureSampler.interval(usage: 3 << 20, limit: limit, growth: nil), 10 * ms, "no rate yet")
        XCTAssertEqual(next(3 << 20, after: 3 << 20, in: 10 * ms), 100 * ms, "still, far below")
        XCTAssertEqual(next(40 << 20, after: 40 << 20, in: 10 * ms), 20 * ms, "still, past half")
        // 2.7 GB/s (a program touching fresh memory, measured): 20 MiB in 7.5 ms.
        let fast = next(24 << 20, after: 4 << 20, in: 7_500_000)
        XCTAssertGreaterThanOrEqual(fast, ms / 2)
        XCTAssertLessThan(fast, 5 * ms, "a third of the time to the threshold at that rate")
        XCTAssertEqual(next(50 << 20, after: 49 << 20, in: 1_000 * ms), 100 * ms, "slow growth: at most 100 ms")
        // Above the threshold: the next step of growth.
        XCTAssertEqual(next(60 << 20, after: 60 << 20, in: 10 * ms), 20 * ms, "above, steady")
        XCTAssertEqual(next(60 << 20, after: 50 << 20, in: 3 * ms), ms, "above, climbing fast")
    }

    func testASnapshotIsDueAtTheThresholdOrWhenTheLimitIsCloseInTime() {
        func near(_ usage: UInt64, after before: UInt64, in elapsed: UInt64) -> Bool {
            PressureSampler.isNear(usage: usage, limit: limit, growth: (usage, 1_000 * ms + elapsed, before, 1_000 * ms))
        }
        XCTAssertTrue(PressureSampler.isNear(usage: 52 << 20, limit: limit, growth: nil), "past 80 %")
        XCTAssertFalse(PressureSampler.isNear(usage: 40 << 20, limit: limit, growth: nil), "no rate yet")
        XCTAssertFalse(near(40 << 20, after: 40 << 20, in: 10 * ms), "steady at 62 %")
        XCTAssertTrue(near(40 << 20, after: 30 << 20, in: 4 * ms), "the limit 10 ms away")
        XCTAssertFalse(near(40 << 20, after: 39 << 20, in: 100 * ms), "the limit seconds away")
        XCTAssertFalse(near(20 << 20, after: 4 << 20, in: 4 * ms), "below half: not yet, however fast")
    }

    func testNothingOverflowsOrDividesByZero() {
        XCTAssertEqual(
            PressureSampler.interval(usage: .max / 2, limit: .max, growth: (.max / 2, 5, 0, 5)), ms / 2, "no time passed")
        XCTAssertEqual(PressureSampler.interval(usage: 10, limit: limit, growth: (10, 0, 20, 10)), 100 * ms, "it shrank")
        XCTAssertTrue(PressureSampler.isNear(usage: .max - 1, limit: .max, growth: (.max - 1, 5, 0, 5)))
        XCTAssertTrue(PressureSampler.isNear(usage: 70, limit: 64, growth: nil), "over the limit (v1 counts a little over)")
    }
}
