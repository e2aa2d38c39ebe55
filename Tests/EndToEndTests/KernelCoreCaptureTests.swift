// A real kernel core, end to end: a C program with three threads crashes without any stub,
// the kernel hands its core to a pipe helper (core_pattern, set for the test and put back), the
// helper keeps the core and holds the dying process until the test is done with its /proc. The
// core is streamed through CoreDumpReader a few hundred bytes at a time, and checked against what
// the program knows; CaptureSession.core then makes the Capture of it, once with the held
// process's /proc and once as if it were gone, and ReportBuilder the report: its frames name the
// program's functions, as gdb does on the same core. End to end: it sets the machine's
// core_pattern (root) and crashes a real program. (A dump with no thread is LiveProcessTests'
// CoreCaptureTests.)

import CoreDump
import BoundedBytes
import Foundation
import LiveProcess
import ObjectFile
import Processes
import ReportModel
import Reports
import TestSupport
import XCTest

final class KernelCoreCaptureTests: XCTestCase {
    static let faultAddress: UInt64 = 0xDEAD_0000

    func functions(_ thread: ThreadRecord?) -> [String] { thread?.frames?.map { $0.function ?? "?" } ?? [] }

    func testARealKernelCoreIsReadAndReportedWithTheProgramsFrames() throws {
        if let reason = CorePattern.unavailable {
            print("KernelCoreCaptureTests skipped: \(reason)")
            throw XCTSkip(reason)
        }
        let directory = TestSupport.temporaryDirectory("core-capture")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let executable = try TestSupport.compile(
            [TestSupport.fixture("core/threads-segv.c")], output: directory + "/threads-segv", flags: ["-O0", "-g"],
            linkFlags: ["-pthread"])
        // The helper keeps the core, says so, and waits (at most 30 s) for the test to release
        // it: while it runs, the kernel holds the dying process (core_pipe_limit > 0).
        let helper = directory + "/helper.sh"
        try """
        cat > \(directory)/core.$1 && touch \(directory)/written.$1
        i=0; while [ ! -e \(directory)/release ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
        """.write(toFile: helper, atomically: true, encoding: .utf8)

        let captured: (dump: CoreDump, held: Capture, gone: Capture, pid: ProcessID) = try CorePattern.with(
            "|/bin/sh \(helper) %P", pipeLimit: 4
        ) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            try process.run()
            let pid = ProcessID(process.processIdentifier)
            defer {
                _ = FileManager.default.createFile(atPath: directory + "/release", contents: nil)
                process.waitUntilExit()
            }
            let written = directory + "/written.\(pid)"
            for _ in 0..<3000 where !FileManager.default.fileExists(atPath: written) { usleep(10_000) }
            guard FileManager.default.fileExists(atPath: written) else { throw TestFailure("no core from pid \(pid)") }
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory + "/core.\(pid)")))
            // As from a pipe: at most 509 bytes a read.
            let source = ChunkedSource(bytes, chunk: 509)
            let dump = try CoreDumpReader.read(from: { source.read(into: $0) })
            XCTAssertEqual(dump.bytesRead, UInt64(bytes.count))
            // The kernel still holds the process: its /proc is there.
            XCTAssertNotNil(ProcFiles.read("/proc/\(pid)/maps").flatMap { $0.isEmpty ? nil : $0 }, "the process is held")
            let cache = ELFCache()
            let held = try XCTUnwrap(CaptureSession.core(dump, access: .own(pid), cache: cache))
            let gone = try XCTUnwrap(CaptureSession.core(dump, access: nil, cache: ELFCache()))
            return (dump, held, gone, pid)
        }
        let (dump, held, gone, pid) = captured

        // The notes: three threads, the main (crashing) one first, its SIGSEGV at the address
        // the program wrote to, the program's name and its file mappings.
        XCTAssertTrue(dump.complete, "\(dump.notes)")
        XCTAssertEqual(dump.threads.count, 3)
        XCTAssertEqual(dump.threads.first?.tid.rawValue, pid.rawValue, "the main thread crashed")
        XCTAssertEqual(dump.threads.first?.signal, SIGSEGV)
        XCTAssertEqual(dump.signalInfo?.signal, SIGSEGV)
        XCTAssertEqual(dump.signalInfo?.code, 1, "SEGV_MAPERR")
        XCTAssertEqual(dump.signalInfo?.faultAddress, Self.faultAddress)
        XCTAssertEqual(dump.processInfo?.command, "threads-segv")
        XCTAssertEqual(dump.processInfo?.pid.rawValue, pid.rawValue)
        XCTAssertTrue(dump.files.contains { $0.path == executable && $0.offset == 0 }, "\(dump.files.map(\.path))")
        XCTAssertNotNil(dump.auxiliaryValue(9), "AT_ENTRY")
        XCTAssertEqual(dump.threads.first?.registers.fxsave.count, 512)
        // Every thread's stack was kept, from its sp less the red zone.
        for thread in dump.threads {
            let stack = try XCTUnwrap(thread.stack, "thread \(thread.tid)")
            XCTAssertEqual(stack.start, thread.registers.rsp - 128)
        }
        XCTAssertFalse(dump.imageMemory.isEmpty)

        for (label, capture) in [("held", held), ("gone", gone)] {
            XCTAssertEqual(capture.executable, executable, label)
            XCTAssertEqual(capture.snapshot.exception.faultAddress, Self.faultAddress, label)
            XCTAssertEqual(capture.snapshot.threads.count, 3, label)
            let main = try XCTUnwrap(capture.snapshot.modules.first, label)
            XCTAssertEqual(main.path, executable, label)
            XCTAssertEqual(
                main.buildID, ELFFile.buildID(ofImageAt: main.base, in: RegionMemory(regions: dump.imageMemory)),
                "\(label): the build-id, from the core's copy of its first page")
            XCTAssertNotNil(main.buildID, label)
            XCTAssertNotNil(main.object, "\(label): \(capture.notes)")
            let event = ReportBuilder.event(for: capture, id: "core-\(label)", timestamp: "2026-01-01T00:00:00.000Z")
            let crashed = functions(event.crashedThreadRecord)
            XCTAssertEqual(Array(crashed.prefix(3)), ["crash_here", "crash_caller", "main"], "\(label): \(crashed)")
            for thread in (event.threads ?? []).filter({ $0.crashed != true }) {
                XCTAssertTrue(functions(thread).contains("worker_wait"), "\(label): \(functions(thread))")
            }
        }
        XCTAssertEqual(held.snapshot.threads.first?.name, "threads-segv", "from /proc while held")
        XCTAssertFalse(held.notes.contains { $0.contains("maps unreadable") }, "\(held.notes)")
        XCTAssertNotNil(held.snapshot.linuxFiles.procStatus, "/proc/PID/status while held")
        XCTAssertNil(gone.snapshot.linuxFiles.procStatus)
        XCTAssertTrue(gone.snapshot.linuxFiles.maps.map { String(decoding: $0, as: UTF8.self) }?.contains("[stack]") ?? false)

        // gdb on the same core names the same functions, innermost first.
        if let gdb = TestSupport.which("gdb") {
            let core = directory + "/core.\(pid)"
            let result = try TestSupport.run([gdb, "-q", "-batch", "-nx", "-ex", "bt", executable, core], timeout: 120)
            // gdb shows frame #0 when it loads the core, then the backtrace: from the last #0.
            let lines = result.stdout.split(separator: "\n")
            let names = lines[(lines.lastIndex { $0.hasPrefix("#0 ") } ?? 0)...].filter { $0.hasPrefix("#") }.compactMap { line in
                line.split(separator: " ").first { $0.hasPrefix("crash_") || $0 == "main" }.map(String.init)
            }
            let event = ReportBuilder.event(for: held, id: "core-gdb", timestamp: "2026-01-01T00:00:00.000Z")
            XCTAssertEqual(Array(functions(event.crashedThreadRecord).prefix(names.count)), names, result.stdout)
        } else {
            print("KernelCoreCaptureTests: gdb is not installed; its backtrace was not compared")
        }
    }
}
