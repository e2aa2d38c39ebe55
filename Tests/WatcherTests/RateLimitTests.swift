// RateLimit, the one per-key limit of the serving side (errors, settings and consent queries per
// process; termination reports per user and per program): a minute that slides, keys apart, and
// a bounded table whatever a flood of keys does.

import XCTest

@testable import Watcher

final class RateLimitTests: XCTestCase {
    func testAMinuteSlides() {
        let limit = RateLimit<Int>(perMinute: 3)
        let minute: UInt64 = 60_000_000_000
        XCTAssertEqual((0..<5).map { limit.allows(1, now: minute + UInt64($0)) }, [true, true, true, false, false])
        XCTAssertFalse(limit.allows(1, now: 2 * minute - 1), "still within a minute of the first three")
        XCTAssertTrue(limit.allows(1, now: 2 * minute), "a minute after the first")
        XCTAssertTrue(limit.allows(1, now: 2 * minute + 2), "the first three have left the minute")
        XCTAssertTrue(limit.allows(1, now: 2 * minute + 3))
        XCTAssertFalse(limit.allows(1, now: 2 * minute + 4), "three in the minute before it")
    }

    func testKeysAreCountedApart() {
        let limit = RateLimit<String>(perMinute: 1)
        XCTAssertTrue(limit.allows("a", now: 1))
        XCTAssertTrue(limit.allows("b", now: 1))
        XCTAssertFalse(limit.allows("a", now: 2))
    }

    func testAFloodOfKeysIsForgottenNotKept() {
        let limit = RateLimit<Int>(perMinute: 1)
        XCTAssertTrue(limit.allows(-1, now: 1))
        XCTAssertFalse(limit.allows(-1, now: 2))
        for key in 0..<5000 { _ = limit.allows(key, now: 3) }
        // Past 4,096 keys the table starts over: the limit errs towards letting events through,
        // never towards growing without bound.
        XCTAssertTrue(limit.allows(-1, now: 4))
    }
}
