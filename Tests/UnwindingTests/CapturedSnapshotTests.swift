// Unwinding a real captured snapshot through the public API: registers and stack a -O2 program
// took of itself, its modules opened from disk, frames named by the Symbolizer. Once with the
// ordinary .eh_frame_hdr, once linked without it so EHFrameIndex builds the FDE table.

import BoundedBytes
import ObjectFile
import TestSupport
import Unwinding
import XCTest

final class CapturedSnapshotTests: XCTestCase {
    func check(_ snapshot: CapturedSnapshot, file: StaticString = #filePath, line: UInt = #line) {
        let unwinder = Unwinder(memory: RegionMemory(regions: [snapshot.stack]), modules: snapshot.loadedModules())
        let stack = unwinder.unwind(registers: snapshot.registers)
        let names = snapshot.functionNames(of: stack)
        XCTAssertEqual(Array(names.prefix(4)), ["inner", "middle", "outer", "main"], "\(names)", file: file, line: line)
        XCTAssertEqual(stack.frames.first?.method, .context, file: file, line: line)
        for frame in stack.frames.dropFirst().prefix(3) {
            XCTAssertEqual(frame.method, .cfi, "\(names) \(stack.frames)", file: file, line: line)
            XCTAssertFalse(frame.isSignalFrame, file: file, line: line)
        }
    }

    func testUnwindsACapturedStackThroughEHFrameHdr() throws {
        check(try CapturedSnapshot.take(label: "unwind-hdr"))
    }

    func testUnwindsACapturedStackThroughEHFrameAlone() throws {
        let snapshot = try CapturedSnapshot.take(label: "unwind-nohdr", linkFlags: ["-Wl,--no-eh-frame-hdr"])
        XCTAssertNil(try ELFFile(path: snapshot.executable).ehFrameTable, "linked without .eh_frame_hdr")
        check(snapshot)
    }

    /// Taken in a SIGSEGV handler: the unwinder crosses the kernel's signal frame (libc's
    /// __restore_rt) back into the faulting function and its callers.
    func testUnwindsThroughASignalFrame() throws {
        let snapshot = try CapturedSnapshot.take(label: "unwind-signal", mode: ["signal"])
        let unwinder = Unwinder(memory: RegionMemory(regions: [snapshot.stack]), modules: snapshot.loadedModules())
        let stack = unwinder.unwind(registers: snapshot.registers)
        let names = snapshot.functionNames(of: stack)
        XCTAssertEqual(names.first, "segv_handler", "\(names)")
        let faulting = try XCTUnwrap(names.firstIndex(of: "crash_here"), "\(names)")
        XCTAssertGreaterThanOrEqual(faulting, 2, "the trampoline lies between handler and fault: \(names)")
        XCTAssertEqual(Array(names[faulting...].prefix(3)), ["crash_here", "crash_caller", "main"], "\(names)")
        XCTAssertTrue(stack.frames.contains { $0.isSignalFrame }, "\(stack.frames)")
    }

    /// `isSignalFrame` marks the frame a signal interrupted (crashport_shims.h): the faulting
    /// frame, whose pc ReportBuilder looks up as the exact instruction, not a return address.
    func testSignalFrameFlagMarksTheInterruptedFrame() throws {
        let snapshot = try CapturedSnapshot.take(label: "unwind-signal-flag", mode: ["signal"])
        let unwinder = Unwinder(memory: RegionMemory(regions: [snapshot.stack]), modules: snapshot.loadedModules())
        let stack = unwinder.unwind(registers: snapshot.registers)
        let names = snapshot.functionNames(of: stack)
        let faulting = try XCTUnwrap(names.firstIndex(of: "crash_here"), "\(names)")
        let flagged = stack.frames.indices.filter { stack.frames[$0].isSignalFrame }
        XCTAssertEqual(flagged, [faulting], "\(names) \(stack.frames)")
    }
}
