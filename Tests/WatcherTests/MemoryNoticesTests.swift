// The kernel's notices of a memory cgroup nearing its limit (MemoryNotices): which v1 usage
// thresholds are registered, the lines cgroup.event_control takes, memory.events' counters as
// hostile text, and what a change of them says.

import XCTest

@testable import Watcher

final class MemoryNoticesTests: XCTestCase {
    func testThresholdsAreHalfTheLimitTheSamplersAndStepsAbove() {
        let limit: UInt64 = 64 << 20
        XCTAssertEqual(
            MemoryNotices.thresholds(limit: limit),
            [limit / 100 * 50, limit / 100 * 80, limit / 100 * 85, limit / 100 * 90, limit / 100 * 95])
        XCTAssertTrue(MemoryNotices.thresholdPercents.contains(PressureSampler.thresholdPercent))
        XCTAssertEqual(MemoryNotices.thresholds(limit: 1000), [500, 800, 850, 900, 950])
        // Too small a limit for whole percents: nothing at 0, nothing twice, nothing at the limit.
        XCTAssertEqual(MemoryNotices.thresholds(limit: 99), [])
        XCTAssertEqual(MemoryNotices.thresholds(limit: 100), [50, 80, 85, 90, 95])
        XCTAssertEqual(MemoryNotices.thresholds(limit: 0), [])
        XCTAssertEqual(MemoryNotices.thresholds(limit: .max).count, 5, "no overflow")
    }

    func testTheEventControlLines() {
        XCTAssertEqual(MemoryNotices.eventControlLine(eventFD: 7, controlFD: 5, threshold: 33_554_432), "7 5 33554432")
        XCTAssertEqual(MemoryNotices.eventControlLine(eventFD: 8, controlFD: 9), "8 9", "the OOM notice takes no argument")
        XCTAssertEqual(MemoryNotices.pressureTriggers.first, "some 10000 500000")
        XCTAssertTrue(MemoryNotices.pressureTriggers.dropFirst().allSatisfy { $0.hasSuffix(" 2000000") }, "unprivileged: 2 s")
    }

    func counts(_ text: String) -> MemoryNotices.EventCounts { MemoryNotices.EventCounts(text: Array(text.utf8)[...]) }

    func testMemoryEventsAreParsedAsHostileText() {
        XCTAssertEqual(
            counts("low 0\nhigh 3\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\nsock_throttled 0\n"),
            MemoryNotices.EventCounts(high: 3, max: 12, oom: 1, oomKill: 1))
        XCTAssertEqual(counts(""), MemoryNotices.EventCounts())
        XCTAssertEqual(counts("max 5"), MemoryNotices.EventCounts(max: 5), "no final newline")
        XCTAssertEqual(counts("max -1\nhigh 2x\noom\noom_kill 99999999999999999999999\n"), MemoryNotices.EventCounts())
        XCTAssertEqual(counts("max 18446744073709551615\n"), MemoryNotices.EventCounts(max: .max))
        XCTAssertEqual(counts("max  7\nhigh 4\n"), MemoryNotices.EventCounts(high: 4), "two spaces: not a number")
        XCTAssertEqual(counts("\0\u{ff}max 3\nmax 4\n"), MemoryNotices.EventCounts(max: 4))
    }

    func testAChangeOfTheCountersSaysWhatCame() {
        let before = MemoryNotices.EventCounts(high: 1, max: 2, oom: 0, oomKill: 0)
        XCTAssertNil(MemoryNotices.notice(before: before, after: before), "low or sock_throttled moved")
        XCTAssertEqual(MemoryNotices.notice(before: before, after: .init(high: 1, max: 3)), .limit)
        XCTAssertEqual(MemoryNotices.notice(before: before, after: .init(high: 2, max: 2)), .limit)
        XCTAssertEqual(MemoryNotices.notice(before: before, after: .init(high: 1, max: 3, oom: 1)), .oom)
        XCTAssertEqual(MemoryNotices.notice(before: before, after: .init(high: 1, max: 2, oomKill: 1)), .oom)
        XCTAssertGreaterThan(MemoryNotices.Notice.oom, .limit, "one wake with two: the OOM's counts")
        XCTAssertGreaterThan(MemoryNotices.Notice.limit, .threshold)
    }
}
