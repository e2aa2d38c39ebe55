// The uploads a sidecar starts (UploadChildren.swift): one user's that lasts never holds back
// another's; a pass asked for while its user's runs is owed and started when that one ends; one
// past its deadline is killed. Real processes (sleep) stand in for the uploads.

import BoundedBytes
import Foundation
import LiveProcess
import Processes
import Store
import Synchronization
import XCTest

@testable import Watcher

final class UploadChildrenTests: XCTestCase {
    let directory = "/tmp/upload-children-\(getpid())"

    /// A user's upload that lasts (a slow destination of their own, a file that is not one)
    /// holds back only that user's next: another user's starts, up to a few at once in all.
    func testOneUsersUploadNeverHoldsBackAnothers() {
        XCTAssertTrue(Sidecar.Children.mayStart(for: 1001, runningFor: []))
        XCTAssertFalse(Sidecar.Children.mayStart(for: 1001, runningFor: [1001]), "one at a time for a user")
        XCTAssertTrue(Sidecar.Children.mayStart(for: 1002, runningFor: [1001]), "another user's is not held back")
        let full = (0..<UInt32(Sidecar.Children.maximumRunning)).map { 1001 + $0 }
        XCTAssertFalse(Sidecar.Children.mayStart(for: 2000, runningFor: full), "a few at once in all")
    }

    /// With real processes standing in for uploads (sleep): a second pass for a user whose upload
    /// runs is owed and starts once it ends; one past its deadline is killed and reaped.
    func testAnOwedPassStartsWhenItsUsersEndsAndALastingOneIsKilled() throws {
        let started = Mutex<[String]>([])
        let children = Sidecar.Children(deadline: 300_000_000) { root, _, _ in
            started.withLock { $0.append(root) }
            return Self.sleeper()
        }
        var logged: [String] = []
        var a = ReportStore(root: directory + "/a"), b = ReportStore(root: directory + "/b")
        a.owner = Credentials(uid: 1001, gid: 1001)
        b.owner = Credentials(uid: 1002, gid: 1002)
        let log: (String, UInt32) -> Void = { text, _ in logged.append(text) }
        children.request(a)
        XCTAssertEqual(started.withLock { $0 }, [], "asked for: started by the sidecar's own thread")
        children.reap(now: monotonicNanoseconds(), log: log)
        children.request(a)
        children.request(b)
        children.reap(now: monotonicNanoseconds(), log: log)
        XCTAssertEqual(started.withLock { $0 }, [a.root, b.root], "a's second is owed, b's starts beside it")
        let first = try XCTUnwrap(children.running.first { $0.value == 1001 }?.key)
        XCTAssertEqual(kill(first, SIGKILL), 0)
        XCTAssertTrue(
            until {
                children.reap(now: monotonicNanoseconds(), log: { text, _ in logged.append(text) })
                return started.withLock { $0.count } == 3
            }, "a's first is reaped and its owed pass started")
        XCTAssertEqual(started.withLock { $0 }.last, a.root)
        usleep(400_000)
        XCTAssertTrue(
            until {
                children.reap(now: monotonicNanoseconds(), log: { text, _ in logged.append(text) })
                return children.running.isEmpty
            }, "both, past the deadline, are killed and reaped: \(children.running)")
        XCTAssertEqual(logged.filter { $0.contains("killed") }.count, 2, "\(logged)")
    }

    /// Whether `condition` holds within ten seconds (looked at every 10 ms).
    func until(_ condition: () -> Bool) -> Bool {
        for _ in 0..<1000 {
            if condition() { return true }
            usleep(10_000)
        }
        return false
    }

    /// Places for four owners: a fifth's pass is owed, not dropped, and starts once one frees; an
    /// upload that started after the clock was read is not taken for one past its deadline.
    func testAFifthUsersPassWaitsForAPlace() throws {
        let started = Mutex<[String]>([])
        let children = Sidecar.Children(deadline: 60_000_000_000) { root, _, _ in
            started.withLock { $0.append(root) }
            return Self.sleeper()
        }
        let before = monotonicNanoseconds()
        var stores: [ReportStore] = []
        for uid in UInt32(2001)...UInt32(2005) {
            var store = ReportStore(root: directory + "/\(uid)")
            store.owner = Credentials(uid: uid, gid: uid)
            stores.append(store)
            children.request(store)
        }
        children.reap(now: before, log: { _, _ in XCTFail("nothing is past its deadline") })
        XCTAssertEqual(started.withLock { $0 }, stores.prefix(4).map(\.root), "four places, by uid")
        children.reap(now: before, log: { _, _ in XCTFail("nothing is past its deadline") })
        XCTAssertEqual(children.running.count, 4)
        let first = try XCTUnwrap(children.running.first { $0.value == 2001 }?.key)
        XCTAssertEqual(kill(first, SIGKILL), 0)
        XCTAssertTrue(
            until {
                children.reap(now: monotonicNanoseconds(), log: { _, _ in })
                return started.withLock { $0.count } == 5
            }, "the fifth starts once a place frees")
        XCTAssertEqual(started.withLock { $0 }.last, stores[4].root)
        for child in children.running.keys { kill(child, SIGKILL) }
        XCTAssertTrue(
            until {
                children.reap(now: monotonicNanoseconds(), log: { _, _ in })
                return children.running.isEmpty
            })
    }

    /// /bin/sleep 30, standing in for an upload; its pid.
    static func sleeper() -> pid_t? {
        var pid: pid_t = 0
        let arguments: [UnsafeMutablePointer<CChar>?] = [strdup("sleep"), strdup("30"), nil]
        defer { arguments.forEach { free($0) } }
        return posix_spawn(&pid, "/bin/sleep", nil, nil, arguments, environ) == 0 ? pid : nil
    }
}
