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

    /// The kernel's notice takes a snapshot at once from half the limit on, however slowly the
    /// last looks saw usage grow; an OOM's at any usage. A threshold crossed downwards says
    /// nothing.
    func testANoticeTakesASnapshotFromHalfTheLimit() {
        // 3 MiB at the look before, 100 ms earlier: the limit over 100 ms away at that rate.
        let sinceIdle = (UInt64(33 << 20), 1_100 * ms, UInt64(3 << 20), 1_000 * ms)
        XCTAssertTrue(PressureSampler.isNear(usage: 33 << 20, limit: limit, growth: sinceIdle, notice: .threshold))
        XCTAssertFalse(
            PressureSampler.isNear(usage: 33 << 20, limit: limit, growth: sinceIdle, notice: nil), "a look alone: not yet")
        XCTAssertFalse(
            PressureSampler.isNear(usage: 31 << 20, limit: limit, growth: nil, notice: .threshold), "crossed downwards")
        XCTAssertFalse(PressureSampler.isNear(usage: 10 << 20, limit: limit, growth: nil, notice: .pressure))
        XCTAssertTrue(PressureSampler.isNear(usage: 40 << 20, limit: limit, growth: nil, notice: .limit))
        XCTAssertTrue(PressureSampler.isNear(usage: 1 << 20, limit: limit, growth: nil, notice: .oom))
        XCTAssertTrue(PressureSampler.isNear(usage: 60 << 20, limit: limit, growth: nil, notice: nil), "past 80 %")
    }

    /// Another snapshot: a second later, or 10 ms later and another 2 % of the limit higher, or
    /// 10 ms later at the OOM's notice; never sooner than 10 ms.
    func testARefreshWaitsForGrowthTimeOrTheOOM() {
        func due(_ usage: UInt64, since: UInt64, notice: MemoryNotices.Notice? = nil) -> Bool {
            PressureSampler.isRefreshDue(usage: usage, limit: limit, latest: 40 << 20, since: since, notice: notice)
        }
        XCTAssertFalse(due(41 << 20, since: 50 * ms), "grew less than 2 %")
        XCTAssertTrue(due(42 << 20, since: 50 * ms), "grew 2 % or more")
        XCTAssertFalse(due(60 << 20, since: 5 * ms), "too soon, however much it grew")
        XCTAssertTrue(due(40 << 20, since: 1_000 * ms), "a second")
        XCTAssertTrue(due(40 << 20, since: 10 * ms, notice: .oom))
        XCTAssertFalse(due(40 << 20, since: 9 * ms, notice: .oom))
        XCTAssertFalse(due(40 << 20, since: 50 * ms, notice: .threshold), "a threshold's notice without growth")
        XCTAssertFalse(due(30 << 20, since: 50 * ms), "it shrank")
    }

    func testNothingOverflowsOrDividesByZero() {
        XCTAssertEqual(
            PressureSampler.interval(usage: .max / 2, limit: .max, growth: (.max / 2, 5, 0, 5)), ms / 2, "no time passed")
        XCTAssertEqual(PressureSampler.interval(usage: 10, limit: limit, growth: (10, 0, 20, 10)), 100 * ms, "it shrank")
        XCTAssertTrue(PressureSampler.isNear(usage: .max - 1, limit: .max, growth: (.max - 1, 5, 0, 5)))
        XCTAssertTrue(PressureSampler.isNear(usage: 70, limit: 64, growth: nil), "over the limit (v1 counts a little over)")
    }
}
