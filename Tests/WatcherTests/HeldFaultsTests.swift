// The Go held-fault policy as a type of its own (HeldFaults): which end of the process writes a
// fault a handler turned into a call, with which re-raise and note; how many are captured whole;
// and one user's processes that fault and never end cannot hold the sidecar's memory or push out
// another user's. GoTests runs it end to end with real Go programs.

import LiveProcess
import ReportModel
import XCTest

@testable import Watcher

#if canImport(Glibc)
import Glibc
#endif

final class HeldFaultsTests: XCTestCase {
    struct Held: Equatable {
        var pid: Int32
        var uid: UInt32?
    }

    func hold(_ new: Held, in list: inout [Held]) {
        HeldFaults.hold(new, in: &list, pid: { ProcessID(rawValue: $0.pid) }, uid: \.uid)
    }

    func testOneUserCannotHoldMoreThanItsShareNorPushOutAnother() {
        var held: [Held] = []
        hold(Held(pid: 1, uid: 1000), in: &held)
        for pid in Int32(100)..<Int32(100 + 10 * HeldFaults.perUser) { hold(Held(pid: pid, uid: 2000), in: &held) }
        XCTAssertEqual(held.filter { $0.uid == 2000 }.count, HeldFaults.perUser)
        XCTAssertTrue(held.contains(Held(pid: 1, uid: 1000)), "another user's held fault stays")
        XCTAssertEqual(held.last?.pid, Int32(100 + 10 * HeldFaults.perUser - 1), "the newest is kept")
        // One per process: a second fault of the same process replaces its first.
        hold(Held(pid: 1, uid: 1000), in: &held)
        XCTAssertEqual(held.filter { $0.pid == 1 }.count, 1)
        // Many users: never more than the limit in all.
        for uid in UInt32(3000)..<UInt32(3000 + HeldFaults.limit) { hold(Held(pid: Int32(uid), uid: uid), in: &held) }
        XCTAssertEqual(held.count, HeldFaults.limit)
    }

    func testOnlyGosFatalExitWritesAHeldFault() {
        let called = WireReraise(how: .called, signal: SIGSEGV, handler: 0x4000)
        let fatal = HeldFaults.settled(called, exit: .exited(HeldFaults.goFatalExitStatus))
        XCTAssertEqual(fatal?.reraise?.how, .called, "still the handler that made it a call")
        XCTAssertEqual(fatal?.reraise?.code, HeldFaults.goFatalExitStatus, "the exit status in its code")
        XCTAssertTrue(fatal?.note.contains("exited with status 2") == true)
        // A recovered panic: the process went on and ended some other way.
        for end: ProcessExit? in [.exited(0), .exited(1), .signaled(SIGKILL), .signaled(SIGSEGV), nil] {
            XCTAssertNil(HeldFaults.settled(called, exit: end), "\(String(describing: end)) drops it")
        }
    }

    func testASecondCrashOfTheThreadBecomesTheHeldFaultsReraise() {
        let called = WireReraise(how: .called, signal: SIGSEGV, handler: 0x4000)
        var abort = CrashRecord(
            observation: .hang(milliseconds: 0), pid: ProcessID(10), tid: ThreadID(10), signal: SIGABRT, appArea: 0,
            timeNanoseconds: 1)
        abort.reraise = WireReraise(how: .raised, signal: SIGABRT, pc: 0x1234)
        let raised = HeldFaults.crashedAgain(called, with: abort)
        XCTAssertEqual(raised.reraise?.how, .raised, "a raise (code 0), not a fault")
        XCTAssertEqual(raised.reraise?.signal, SIGABRT)
        XCTAssertEqual(raised.reraise?.pc, 0x1234)
        XCTAssertEqual(raised.reraise?.handler, 0x4000, "the handler stays the one that made the fault a call")
        XCTAssertTrue(raised.note.contains("SIGABRT"), raised.note)
        abort.code = 1  // SEGV_MAPERR: it faulted again
        XCTAssertEqual(HeldFaults.crashedAgain(called, with: abort).reraise?.how, .faulted)
    }

    func testOnlyTheFirstFewCalledFaultsOfAProcessAreCapturedWhole() {
        let faults = HeldFaults()
        let thin = (0..<10).map { _ in faults.countCalledFault(of: ProcessID(77)) }
        XCTAssertEqual(
            thin,
            Array(repeating: false, count: HeldFaults.fullCaptures) + Array(repeating: true, count: 10 - HeldFaults.fullCaptures))
        XCTAssertFalse(faults.countCalledFault(of: ProcessID(78)), "counted per process")
        XCTAssertFalse(faults.holds(ProcessID(77)), "counting holds nothing")
        XCTAssertNil(faults.take(of: ProcessID(77)))
    }
}
