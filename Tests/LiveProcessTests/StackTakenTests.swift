// A death seen at its exit: whether its stacks were read there, came from a pressure snapshot
// (when the OOM reaper had freed them), or are lost; on synthetic threads and snapshots.

import BoundedBytes
import ReportModel
import XCTest

@testable import LiveProcess

final class StackTakenTests: XCTestCase {
    func thread(_ tid: Int32, rip: UInt64, stack: [UInt8]?) -> ThreadSnapshot {
        var gpr = [UInt64](repeating: 0, count: X86_64Registers.gprCount)
        gpr[X86_64Registers.ripIndex] = rip
        return ThreadSnapshot(
            tid: ThreadID(tid), name: "", registers: X86_64Registers(gpr: gpr),
            stack: stack.map { MemoryRegion(start: 0x7000, bytes: $0) })
    }

    func snapshot(_ threads: [ThreadSnapshot], taken: UInt64, alive: UInt64) -> PressureSnapshot {
        PressureSnapshot(
            threads: threads, commandLine: Array("grow\0".utf8), takenNanoseconds: taken, usage: 60 << 20,
            stoppedNanoseconds: 100_000, aliveNanoseconds: alive)
    }

    func testALiveStackIsTakenAtTheDeath() {
        var threads = [thread(10, rip: 0x1000, stack: [1, 2, 3])]
        var commandLine: [UInt8]?, notes: [String] = []
        let earlier = snapshot([thread(10, rip: 0x2000, stack: [4])], taken: 0, alive: 5_000_000)
        let taken = CaptureSession.takenAtDeath(threads: &threads, earlier: earlier, commandLine: &commandLine, notes: &notes)
        XCTAssertEqual(taken, StackTaken(when: StackTaken.atDeath))
        XCTAssertEqual(threads[0].registers.rip, 0x1000, "the live registers stay")
        XCTAssertNil(commandLine)
        XCTAssertEqual(notes, [])
    }

    /// Zeros or nothing: the reaper's work. Every thread whose stack is gone gets the snapshot's
    /// registers and stack together; a thread the snapshot does not have keeps its own.
    func testAGoneStackComesFromTheSnapshot() {
        var threads = [
            thread(10, rip: 0x1000, stack: [0, 0, 0, 0]), thread(11, rip: 0x1100, stack: nil),
            thread(12, rip: 0x1200, stack: []),
        ]
        var commandLine: [UInt8]?, notes: [String] = []
        let earlier = snapshot(
            [thread(10, rip: 0x2000, stack: [9, 9]), thread(11, rip: 0x2100, stack: [8])], taken: 1_000_000,
            alive: 4_500_000)
        let taken = CaptureSession.takenAtDeath(threads: &threads, earlier: earlier, commandLine: &commandLine, notes: &notes)
        XCTAssertEqual(taken, StackTaken(when: StackTaken.beforeDeath, millisecondsBefore: 3, usage: 60 << 20))
        XCTAssertEqual(threads.map(\.registers.rip), [0x2000, 0x2100, 0x1200])
        XCTAssertEqual(threads[0].stack?.bytes, [9, 9])
        XCTAssertEqual(commandLine, Array("grow\0".utf8), "the arguments, which the reaper takes too")
        XCTAssertTrue(notes.first?.contains("2 thread(s) are from a snapshot taken 3 ms before") == true, "\(notes)")
    }

    func testAGoneStackWithoutASnapshotIsLost() {
        var threads = [thread(10, rip: 0x1000, stack: [0, 0])]
        var commandLine: [UInt8]?, notes: [String] = []
        XCTAssertEqual(
            CaptureSession.takenAtDeath(threads: &threads, earlier: nil, commandLine: &commandLine, notes: &notes),
            StackTaken(when: StackTaken.lost))
        // A snapshot of other threads only (the lead thread was made after it) is none.
        let other = snapshot([thread(11, rip: 0x2000, stack: [1])], taken: 0, alive: 0)
        XCTAssertEqual(
            CaptureSession.takenAtDeath(threads: &threads, earlier: other, commandLine: &commandLine, notes: &notes),
            StackTaken(when: StackTaken.lost))
        XCTAssertEqual(threads[0].registers.rip, 0x1000)
        XCTAssertTrue(notes.allSatisfy { $0.contains("no snapshot was taken") }, "\(notes)")
    }

    func testTheFieldIsWrittenAsDocumented() throws {
        var event = Event()
        event.stackTaken = StackTaken(when: StackTaken.beforeDeath, millisecondsBefore: 3, usage: 7)
        let json = String(decoding: try event.jsonData(), as: UTF8.self)
        XCTAssertTrue(json.contains("\"stack_taken\" : {"), json)
        XCTAssertTrue(json.contains("\"ms_before_death\" : 3"), json)
        XCTAssertTrue(json.contains("\"when\" : \"before_death\""), json)
        XCTAssertEqual(try Event.decode(try event.jsonData()).stackTaken, event.stackTaken)
    }
}
