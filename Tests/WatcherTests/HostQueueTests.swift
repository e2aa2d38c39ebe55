// HostSchedule: the host level's order of reading cores (HostQueue.swift): places in all and per
// user, turns user by user, late starts near a deadline, and the expired let go.

import XCTest

@testable import Watcher

final class HostQueueTests: XCTestCase {
    typealias Schedule = HostSchedule<String>

    func schedule(places: Int = 4, perUser: Int = 2, late: Int = 1) -> Schedule {
        Schedule(places: places, perUser: perUser, latePlaces: late, lateMargin: 5)
    }

    /// Starts everything that may start at `now`; the items, late ones marked.
    func drain(_ schedule: inout Schedule, now: UInt64 = 0) -> [String] {
        var started: [String] = []
        while let (entry, late) = schedule.next(now: now) { started.append(late ? "late:" + entry.item : entry.item) }
        return started
    }

    func testOneUsersCoresTakeItsPlacesOnlyAndAnotherUserStartsAtOnce() {
        var queue = schedule()
        for index in 0..<4 { queue.enqueue("a\(index)", uid: 1000, deadline: 100) }
        XCTAssertEqual(drain(&queue), ["a0", "a1"], "two places per user")
        queue.enqueue("b0", uid: 1001, deadline: 100)
        XCTAssertEqual(drain(&queue), ["b0"], "another user's core takes a free place at once")
        XCTAssertEqual(queue.queuedCount, 2)
        queue.finished(uid: 1000, late: false)
        XCTAssertEqual(drain(&queue), ["a2"])
    }

    func testUsersTakeTurns() {
        var queue = schedule(places: 1, perUser: 1, late: 0)
        for index in 0..<3 { queue.enqueue("a\(index)", uid: 1, deadline: 100) }
        for index in 0..<3 { queue.enqueue("b\(index)", uid: 2, deadline: 100) }
        var order: [String] = []
        while let (entry, _) = queue.next(now: 0) {
            order.append(entry.item)
            queue.finished(uid: entry.uid, late: false)
        }
        XCTAssertEqual(order, ["a0", "b0", "a1", "b1", "a2", "b2"])
    }

    func testAllPlacesTakenThenACoreNearItsDeadlineStartsLate() {
        var queue = schedule(places: 2, perUser: 2, late: 1)
        for index in 0..<4 { queue.enqueue("a\(index)", uid: 1, deadline: 20) }
        XCTAssertEqual(drain(&queue, now: 0), ["a0", "a1"])
        XCTAssertEqual(drain(&queue, now: 14), [], "not near its deadline yet")
        XCTAssertEqual(drain(&queue, now: 15), ["late:a2"], "five before its deadline, in the one late place")
        XCTAssertEqual(drain(&queue, now: 16), [], "the late places are taken")
        queue.finished(uid: 1, late: true)
        XCTAssertEqual(drain(&queue, now: 16), ["late:a3"])
        XCTAssertEqual(queue.lateCount, 1)
        XCTAssertEqual(queue.runningCount, 2)
    }

    func testExpiredCoresAreTakenOutAndTheRestKeepTheirTurns() {
        var queue = schedule(places: 1, perUser: 1, late: 0)
        queue.enqueue("a0", uid: 1, deadline: 100)
        queue.enqueue("a1", uid: 1, deadline: 10)
        queue.enqueue("b0", uid: 2, deadline: 10)
        queue.enqueue("b1", uid: 2, deadline: 100)
        XCTAssertEqual(drain(&queue, now: 0), ["a0"])
        XCTAssertEqual(queue.expired(now: 10).map(\.item).sorted(), ["a1", "b0"])
        XCTAssertEqual(queue.queuedCount, 1)
        queue.finished(uid: 1, late: false)
        XCTAssertEqual(drain(&queue, now: 11), ["b1"])
        XCTAssertEqual(queue.expired(now: 1000).count, 0)
    }

    /// A user's queue holds so many; past it that user's next is refused (let go at once), and
    /// another user's is still taken.
    func testAUsersFloodIsRefusedPastItsQueueAndAnotherUserIsNot() {
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let queue = HostQueue<Int>(
            places: 1, perUser: 1, latePlaces: 0, lateMargin: 0, perUserQueue: 2, name: { "q-\($0)" },
            run: { _, _ in
                started.signal()
                release.wait()
            }, letGo: { _ in })
        XCTAssertTrue(queue.add(0, uid: 1, deadline: .max))
        started.wait()
        XCTAssertTrue(queue.add(1, uid: 1, deadline: .max))
        XCTAssertTrue(queue.add(2, uid: 1, deadline: .max))
        XCTAssertFalse(queue.add(3, uid: 1, deadline: .max), "two of uid 1's wait already")
        XCTAssertTrue(queue.add(4, uid: 2, deadline: .max), "another user's queue is its own")
        for _ in 0..<4 { release.signal() }
        for _ in 0..<3 {
            started.wait()
            release.signal()
        }
    }

    /// The queue with threads: every item runs once, never more than the places at once.
    func testHostQueueRunsEveryItemWithinItsPlaces() {
        let running = RunningCount()
        let done = expectation(description: "every item ran")
        done.expectedFulfillmentCount = 40
        let queue = HostQueue<Int>(
            places: 3, perUser: 2, latePlaces: 0, lateMargin: 0, name: { "q-\($0)" },
            run: { _, _ in
                running.enter()
                usleep(2000)
                running.leave()
                done.fulfill()
            }, letGo: { _ in XCTFail("nothing expires") })
        for index in 0..<40 { queue.add(index, uid: UInt32(index % 4), deadline: .max) }
        wait(for: [done], timeout: 60)
        XCTAssertLessThanOrEqual(running.most, 3)
        XCTAssertGreaterThan(running.most, 1, "more than one user's cores at once")
    }
}

/// How many run at once, and the most seen.
final class RunningCount: @unchecked Sendable {
    private let lock = NSLock()
    private var now = 0
    private(set) var most = 0
    func enter() {
        lock.lock()
        now += 1
        most = max(most, now)
        lock.unlock()
    }
    func leave() {
        lock.lock()
        now -= 1
        lock.unlock()
    }
}
