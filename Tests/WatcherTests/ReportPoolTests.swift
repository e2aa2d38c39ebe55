// ReportPool's two queues: a report's first steps (submit) run in order on the pool's threads; a
// second step (deferJob) on the pool's thread of its own, at nice 10, once no first step waits
// or runs, so that it never holds a first step up;
// and past the budget of what deferred captures may hold, deferJob refuses (the caller runs the
// job at once): a storm of large captures waits a few at a time, never unbounded.

import Foundation
import Synchronization
import XCTest

@testable import Watcher

final class ReportPoolTests: XCTestCase {
    /// A job that holds its thread until released: `started` once it runs.
    struct Blocker {
        private let gate = DispatchSemaphore(value: 0), running = DispatchSemaphore(value: 0)
        var job: @Sendable () -> Void {
            { [gate, running] in
                running.signal()
                gate.wait()
            }
        }
        func started() { running.wait() }
        func release() { gate.signal() }
    }

    func testDeferredJobsWaitForFirstStepsAndRunOnTheirOwnThreadAtALowerPriority() {
        let pool = ReportPool(threads: 1)
        let order = Mutex<[String]>([])
        let gate = DispatchSemaphore(value: 0)
        // Hold the one worker while the queues fill.
        pool.submit { gate.wait() }
        let nice = Mutex<Int32>(-100)
        XCTAssertTrue(
            pool.deferJob(holding: 1) {
                nice.withLock { $0 = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0) }
                order.withLock { $0.append("second-a " + Self.threadName()) }
            })
        for name in ["first-a", "first-b"] { pool.submit { order.withLock { $0.append(name) } } }
        gate.signal()
        pool.drain()
        // Queued before the first steps, run after them: it waited while they waited and ran.
        XCTAssertEqual(order.withLock { $0 }, ["first-a", "first-b", "second-a report-later"])
        XCTAssertEqual(nice.withLock { $0 }, ReportPool.laterNice, "the deferred thread runs at nice 10")
    }

    /// The calling thread's name (/proc/thread-self/comm).
    static func threadName() -> String {
        ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func testTheDeferredBudgetRefusesPastIt() {
        let pool = ReportPool(threads: 1, deferredBudget: 100)
        let ran = Mutex(0)
        // The deferred thread held by its first job: what comes next waits, holding its bytes.
        let blocker = Blocker()
        XCTAssertTrue(pool.deferJob(holding: 10, blocker.job))
        blocker.started()  // taken off the queue: its bytes no longer wait
        XCTAssertTrue(pool.deferJob(holding: 60) { ran.withLock { $0 += 1 } })
        XCTAssertFalse(pool.deferJob(holding: 60) { ran.withLock { $0 += 1 } }, "60 + 60 waiting passes 100")
        XCTAssertTrue(pool.deferJob(holding: 40) { ran.withLock { $0 += 1 } })
        blocker.release()
        pool.drain()
        XCTAssertEqual(ran.withLock { $0 }, 2)
        XCTAssertEqual(pool.pending, 0)
    }

    /// A second step deferred now would wait (and so keeps its capture on disk meanwhile:
    /// CaptureSpill) behind a queued first step or a deferred job that holds a capture, queued or
    /// running; not behind a run record's write, which holds none.
    func testADeferredJobWouldWaitBehindAnotherReportOnly() {
        let pool = ReportPool(threads: 1)
        XCTAssertFalse(pool.deferredJobWouldWait, "an idle pool")
        let record = Blocker()
        XCTAssertTrue(pool.deferJob(holding: 0, record.job))
        record.started()
        XCTAssertFalse(pool.deferredJobWouldWait, "a run record's write running")
        XCTAssertTrue(pool.deferJob(holding: 0) {})
        XCTAssertFalse(pool.deferredJobWouldWait, "a run record's write queued")
        XCTAssertTrue(pool.deferJob(holding: 4096) {})
        XCTAssertTrue(pool.deferredJobWouldWait, "a report's second step queued")
        record.release()
        pool.drain()
        XCTAssertFalse(pool.deferredJobWouldWait)

        let second = Blocker()
        XCTAssertTrue(pool.deferJob(holding: 4096, second.job))
        second.started()
        XCTAssertTrue(pool.deferredJobWouldWait, "a report's second step running")
        second.release()
        pool.drain()
        let first = Blocker()
        pool.submit(first.job)
        first.started()
        pool.submit {}
        XCTAssertTrue(pool.deferredJobWouldWait, "a first step queued")
        first.release()
        pool.drain()
    }
}
