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
    /// What an unwind read of the modules' files (Unwinder.fileBytesRead: the minidump carries
    /// it) unwinds the same stack again where the files are not: with no file at all, or with
    /// only the program's debug file, whose code and CFI sections are NOBITS.
    func testUnwindsAgainFromTheFileBytesItReadWhereTheFilesAreNot() throws {
        let snapshot = try CapturedSnapshot.take(label: "unwind-again")
        let online = Unwinder(memory: RegionMemory(regions: [snapshot.stack]), modules: snapshot.loadedModules())
        let stack = online.unwind(registers: snapshot.registers)
        let read = online.fileBytesRead()
        XCTAssertFalse(read.isEmpty)
        XCTAssertLessThan(read.reduce(0) { $0 + $1.bytes.count }, 64 << 10, "only what the unwind read")
        let kept = RegionMemory(regions: [snapshot.stack] + read)

        let nowhere = snapshot.loadedModules().map { module in
            var module = module
            module.object = nil
            return module
        }
        let bare = Unwinder(memory: kept, modules: nowhere).unwind(registers: snapshot.registers)
        XCTAssertEqual(bare.frames.map(\.pc), stack.frames.map(\.pc), "no file at all")
        XCTAssertEqual(bare.frames.map(\.method), stack.frames.map(\.method), "no file at all")

        let debug = snapshot.executable + ".debug"
        let copied = try TestSupport.run(["objcopy", "--only-keep-debug", snapshot.executable, debug])
        XCTAssertEqual(copied.status, .exited(0), copied.stderr)
        let debugOnly = snapshot.loadedModules(replacing: snapshot.executable, with: try ELFFile(path: debug))
        let fromDebug = Unwinder(memory: kept, modules: debugOnly).unwind(registers: snapshot.registers)
        XCTAssertEqual(fromDebug.frames.map(\.pc), stack.frames.map(\.pc), "only the debug file")
        XCTAssertEqual(snapshot.functionNames(of: fromDebug).prefix(4), ["inner", "middle", "outer", "main"])

        // Without those bytes (a minidump another writer made) and without files, the walk falls
        // back to frame pointers and scanning: a caller found so returns into a module's code,
        // never into the stack or nowhere.
        let blind = Unwinder(memory: RegionMemory(regions: [snapshot.stack]), modules: nowhere)
            .unwind(registers: snapshot.registers)
        // rbp, which -O2 code uses for anything, is made to point into the stack at a "frame"
        // whose return address is a stack address.
        var registers = snapshot.registers
        var stackBytes = snapshot.stack.bytes
        let slot = 256
        registers[4] = snapshot.stack.start + UInt64(slot)  // rbp (user_regs_struct)
        stackBytes.put(u64: snapshot.stack.start + 512, at: slot + 8)
        let forged = Unwinder(
            memory: RegionMemory(regions: [MemoryRegion(start: snapshot.stack.start, bytes: stackBytes)]), modules: nowhere)
        for stack in [blind, forged.unwind(registers: registers)] {
            for frame in stack.frames.dropFirst() {
                XCTAssertTrue(
                    snapshot.modules.contains { frame.pc >= $0.base && frame.pc - $0.base < $0.size },
                    "0x\(String(frame.pc, radix: 16)) (\(frame.method)) lies in no module: \(stack.frames)")
            }
        }
    }
}
