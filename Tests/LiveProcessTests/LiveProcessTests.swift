// Inspection against a real child process: /proc threads and names, its maps, its memory (a
// known pattern and a short read at an unmapped edge), a ptrace session that stops every
// thread, reads plausible registers and leaves the process untraced and running, and pressure
// snapshots taken into buffers prepared beforehand.

import Foundation
import Processes
import ReportModel
import TestSupport
import XCTest

@testable import LiveProcess

final class LiveProcessTests: XCTestCase {
    /// The running fixture: its pid, the address of its 64-byte pattern, and of its last 16
    /// readable bytes before an unmapped page.
    struct Child {
        var process: Process
        var executable: String
        var pid: ProcessID
        var pattern: UInt64
        var edge: UInt64
    }

    static let expectedPattern = (0..<64).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }

    func startChild() throws -> Child {
        let directory = TestSupport.temporaryDirectory("inspection")
        let executable = try TestSupport.compile(
            [TestSupport.fixture("liveprocess/threads.c")], output: directory + "/threads", flags: ["-O0", "-g"],
            linkFlags: ["-pthread"])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let fields = String(decoding: line, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard fields.count == 3, let pid = Int32(fields[0]), let pattern = UInt64(fields[1], radix: 16),
            let edge = UInt64(fields[2], radix: 16)
        else {
            process.terminate()
            throw TestFailure("fixture printed \(String(decoding: line, as: UTF8.self))")
        }
        return Child(process: process, executable: executable, pid: ProcessID(pid), pattern: pattern, edge: edge)
    }

    func stop(_ child: Child) {
        kill(child.pid.rawValue, SIGKILL)
        child.process.waitUntilExit()
    }

    func testThreadsAndTheirNames() throws {
        let child = try startChild()
        defer { stop(child) }
        let threads = ProcFiles.threads(of: child.pid)
        XCTAssertEqual(threads.count, 4, "main and three workers: \(threads)")
        XCTAssertTrue(threads.contains(ThreadID(child.pid.rawValue)), "the main thread's id is the process's")
        let names = Set(threads.map { ProcFiles.threadName(pid: child.pid, tid: $0) })
        XCTAssertTrue(names.isSuperset(of: ["cp-alpha", "cp-beta", "cp-gamma"]), "\(names)")
    }

    func testMapsListTheExecutableAsCode() throws {
        let child = try startChild()
        defer { stop(child) }
        let text = try XCTUnwrap(ProcFiles.readText("/proc/\(child.pid)/maps"))
        let mappings = MemoryMapping.parse(text)
        XCTAssertFalse(mappings.isEmpty)
        let executable = URL(fileURLWithPath: child.executable).resolvingSymlinksInPath().path
        XCTAssertTrue(
            mappings.contains { $0.path == executable && $0.readable && $0.executable && !$0.writable },
            "no r-x mapping of \(executable) in:\n\(text)")
        XCTAssertTrue(mappings.contains { $0.contains(child.pattern) && $0.readable && $0.writable })
    }

    func testMemoryReadsThePatternAndStopsAtAnUnmappedPage() throws {
        let child = try startChild()
        defer { stop(child) }
        let memory = ProcessMemory(pid: child.pid)
        XCTAssertEqual(memory.bytes(at: child.pattern, count: 64), Self.expectedPattern)
        let edge = memory.bytes(at: child.edge, count: 64)
        XCTAssertEqual(edge, [UInt8](repeating: 0xAB, count: 16), "a short read up to the unmapped page")
        XCTAssertEqual(memory.bytes(at: child.edge + 16, count: 8), [])
    }

    func testPtraceStopsEveryThreadAndDetachesCleanly() throws {
        let child = try startChild()
        defer { stop(child) }
        let session = PtraceSession(pid: child.pid)
        let stopped: [ThreadID]
        do {
            stopped = try session.suspendAll()
        } catch let error as InspectionError where error.errno == EPERM {
            throw XCTSkip("ptrace is denied here: \(error)")
        }
        XCTAssertEqual(Set(stopped), Set(ProcFiles.threads(of: child.pid)))
        XCTAssertTrue(session.failures.isEmpty, "\(session.failures)")
        let text = try XCTUnwrap(ProcFiles.readText("/proc/\(child.pid)/maps"))
        let mappings = MemoryMapping.parse(text)
        for tid in stopped {
            let gpr = try session.registers(of: tid).gpr
            let rip = gpr[16]
            let rsp = gpr[19]
            XCTAssertTrue(mappings.contains { $0.contains(rip) && $0.executable }, "thread \(tid) rip \(rip)")
            XCTAssertTrue(mappings.contains { $0.contains(rsp) && $0.writable }, "thread \(tid) rsp \(rsp)")
        }
        session.detachAll()
        for tid in ProcFiles.threads(of: child.pid) {
            let status = try XCTUnwrap(ProcFiles.readText("/proc/\(child.pid)/task/\(tid)/status"))
            let tracer = status.split(separator: "\n").first { $0.hasPrefix("TracerPid:") }
            XCTAssertEqual(tracer?.split(separator: "\t").last.map(String.init), "0", "thread \(tid)")
        }
        XCTAssertTrue(child.process.isRunning)
        XCTAssertEqual(kill(child.pid.rawValue, 0), 0)
        let state = ProcFiles.statFields(of: child.pid)
        XCTAssertNotEqual(state?.first.map(String.init), "Z")
    }

    /// A pressure snapshot into buffers prepared beforehand (SnapshotBuffers): every thread, the
    /// leader first, with its registers and its stack from the stack pointer up as the process
    /// holds it (every thread waits in pause(): nothing moves); the maps read ahead place every
    /// stack, so the stop reads none; a second snapshot replaces the first, and the process runs
    /// on untraced.
    func testAPressureSnapshotFillsThePreparedBuffers() throws {
        let child = try startChild()
        defer { stop(child) }
        let buffers = try XCTUnwrap(SnapshotBuffers(pid: child.pid))
        XCTAssertGreaterThanOrEqual(buffers.preparedBytes, PressureSnapshot.totalStackLimit)
        XCTAssertNil(buffers.snapshot(alive: 0), "none taken yet")
        buffers.prepare(changes: 0)
        XCTAssertEqual(buffers.preparedFor, 0)
        do {
            let probe = PtraceSession(pid: child.pid)
            _ = try probe.suspendAll()
            probe.detachAll()
        } catch let error as InspectionError where error.errno == EPERM {
            throw XCTSkip("ptrace is denied here: \(error)")
        }
        XCTAssertTrue(buffers.take(holder: PtraceSession(pid: child.pid), usage: 1 << 20, cause: "a test"))
        XCTAssertEqual(buffers.mapsReads, 1, "the maps read ahead placed every stack")
        let first = try XCTUnwrap(buffers.snapshot(alive: 0))
        XCTAssertEqual(first.threads.first?.tid, child.pid.mainThread)
        XCTAssertEqual(Set(first.threads.map(\.tid)), Set(ProcFiles.threads(of: child.pid)))
        XCTAssertEqual(first.usage, 1 << 20)
        XCTAssertEqual(first.cause, "a test")
        XCTAssertEqual(first.aliveNanoseconds, first.takenNanoseconds, "not seen alive since")
        XCTAssertEqual(first.commandLine.map { String(decoding: $0, as: UTF8.self) }, child.executable + "\0")
        let memory = ProcessMemory(pid: child.pid)
        for thread in first.threads {
            let stack = try XCTUnwrap(thread.stack, "thread \(thread.tid)")
            XCTAssertLessThanOrEqual(stack.start, thread.registers.rsp, "thread \(thread.tid)")
            XCTAssertGreaterThan(stack.end, thread.registers.rsp, "thread \(thread.tid)")
            XCTAssertLessThanOrEqual(stack.bytes.count, PressureSnapshot.threadStackLimit)
            // The frames below pause(); above them, at the top of a thread's mapping, glibc's
            // thread descriptor may still change.
            let frames = min(stack.bytes.count, 512)
            XCTAssertTrue(memory.bytes(at: stack.start, count: frames) == Array(stack.bytes[..<frames]), "thread \(thread.tid)")
            XCTAssertEqual(thread.registers.fxsave.count, 512)
        }

        XCTAssertTrue(buffers.take(holder: PtraceSession(pid: child.pid), usage: 2 << 20, cause: "again"))
        let second = try XCTUnwrap(buffers.snapshot(alive: first.takenNanoseconds))
        XCTAssertEqual(second.usage, 2 << 20)
        XCTAssertGreaterThan(second.takenNanoseconds, first.takenNanoseconds)
        XCTAssertEqual(second.threads.map(\.tid), first.threads.map(\.tid))
        XCTAssertEqual(second.threads.map(\.stack?.start), first.threads.map(\.stack?.start), "pause() moved nothing")
        XCTAssertEqual(second.threads.map(\.stack?.bytes.count), first.threads.map(\.stack?.bytes.count))
        XCTAssertEqual(second.threads.map(\.registers.rip), first.threads.map(\.registers.rip))
        XCTAssertEqual(buffers.mapsReads, 1)
        XCTAssertTrue(child.process.isRunning)
        let status = try XCTUnwrap(ProcFiles.readText("/proc/\(child.pid)/status"))
        XCTAssertTrue(status.contains("TracerPid:\t0\n"), status)
    }

    /// A new snapshot's stacks go to the larger stretch the latest leaves free, so the latest
    /// stays whole until the new one replaces it.
    func testANewSnapshotLeavesTheLatestWhole() {
        let capacity = PressureSnapshot.totalStackLimit
        XCTAssertEqual(SnapshotBuffers.freeStretch(besides: nil, capacity: capacity), 0..<capacity)
        XCTAssertEqual(SnapshotBuffers.freeStretch(besides: 0..<0, capacity: capacity), 0..<capacity)
        XCTAssertEqual(SnapshotBuffers.freeStretch(besides: 0..<4096, capacity: capacity), 4096..<capacity)
        XCTAssertEqual(
            SnapshotBuffers.freeStretch(besides: capacity - 4096..<capacity, capacity: capacity), 0..<capacity - 4096)
        XCTAssertEqual(SnapshotBuffers.freeStretch(besides: 100..<200, capacity: 1000), 200..<1000)
        XCTAssertEqual(SnapshotBuffers.freeStretch(besides: 700..<900, capacity: 1000), 0..<700)
        // Less than a thread's stack free: the whole buffer (the latest is overwritten).
        XCTAssertEqual(SnapshotBuffers.freeStretch(besides: 0..<1000, capacity: 1000), 0..<1000)
        XCTAssertEqual(SnapshotBuffers.freeStretch(besides: 4096..<capacity, capacity: capacity), 0..<capacity)
    }
}
