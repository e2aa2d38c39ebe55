// Signal frames: the kernel's rt_sigframe crossed as a frame of its own (`<signal handler
// called>`) in a real captured stack, and forged ones (a ucontext that leads back to itself, one
// of garbage) that must end the walk, bounded, without reading outside the given memory.

import BoundedBytes
import TestSupport
import XCTest

@testable import Unwinding

final class SignalFrameTests: XCTestCase {
    /// The real snapshot taken in a SIGSEGV handler (Tests/Fixtures/unwinding/snapshot.c), its
    /// unwinder and its walk.
    func signalSnapshot() throws -> (snapshot: CapturedSnapshot, unwinder: Unwinder, stack: UnwoundStack) {
        let snapshot = try CapturedSnapshot.take(label: "unwind-sigframe", mode: ["signal"])
        let unwinder = Unwinder(memory: RegionMemory(regions: [snapshot.stack]), modules: snapshot.loadedModules())
        return (snapshot, unwinder, unwinder.unwind(registers: snapshot.registers))
    }

    func testTheTrampolineIsAFrameWithItsUcontextAndSiginfo() throws {
        let (snapshot, _, stack) = try signalSnapshot()
        let names = snapshot.functionNames(of: stack)
        let trampolines = stack.frames.indices.filter { stack.frames[$0].isSignalTrampoline }
        XCTAssertEqual(trampolines.count, 1, "\(names) \(stack.frames)")
        let index = try XCTUnwrap(trampolines.first)
        XCTAssertEqual(names[index - 1], "segv_handler", "\(names)")
        XCTAssertEqual(names[index + 1], "crash_here", "\(names)")
        let frame = stack.frames[index]
        // The handler returns into the trampoline with sp at the ucontext.
        XCTAssertEqual(frame.ucontext, frame.sp)
        XCTAssertFalse(frame.isSignalFrame)
        XCTAssertTrue(stack.frames[index + 1].isSignalFrame)
        // `*target = y` with target NULL: SIGSEGV, SEGV_MAPERR, at address 0.
        XCTAssertEqual(frame.signalInfo, SignalInfo(signal: 11, code: 1, address: 0))
    }

    /// A forged signal frame in memory of our own making: the trampoline's address (taken from
    /// the real walk), then a ucontext whose saved registers are `rip` and `rsp`.
    func forged(trampoline: UInt64, rip: (UInt64) -> UInt64, rsp: (UInt64) -> UInt64) -> (MemoryRegion, [UInt64]) {
        let base: UInt64 = 0x7700_0000_0000
        let ucontext = base + 8
        var words = [UInt64](repeating: 0x4141_4141_4141_4141, count: 64)
        words[0] = trampoline
        words[1 + 15 + 5] = rsp(ucontext)  // uc_flags, uc_link, uc_stack (5 words), then gregs
        words[1 + 16 + 5] = rip(ucontext)
        let bytes = words.flatMap { [UInt8](littleEndian: $0) }
        var registers = [UInt64](repeating: 0, count: UserRegisters.count)
        registers[UserRegisters.rip] = trampoline
        registers[UserRegisters.rsp] = ucontext
        return (MemoryRegion(start: base, bytes: bytes), registers)
    }

    func testAForgedFrameLeadingBackToItselfIsFollowedAtMostMaxSignalFramesTimes() throws {
        let (snapshot, real, stack) = try signalSnapshot()
        let trampoline = try XCTUnwrap(stack.frames.first { $0.isSignalTrampoline }?.pc)
        XCTAssertTrue(real.isSignalTrampoline(trampoline))
        let (region, registers) = forged(trampoline: trampoline, rip: { _ in trampoline }, rsp: { $0 })
        let unwinder = Unwinder(memory: RegionMemory(regions: [region]), modules: snapshot.loadedModules())
        let looped = unwinder.unwind(registers: registers)
        // maxSignalFrames followed; the one after them is shown, not followed.
        XCTAssertEqual(looped.frames.count, unwinder.maxSignalFrames + 1, "\(looped.frames)")
        XCTAssertTrue(looped.frames.allSatisfy { $0.isSignalTrampoline && $0.pc == trampoline })
    }

    func testAForgedFrameOfGarbageEndsTheWalkAtAScanFrame() throws {
        let (snapshot, _, stack) = try signalSnapshot()
        let trampoline = try XCTUnwrap(stack.frames.first { $0.isSignalTrampoline }?.pc)
        let (region, registers) = forged(trampoline: trampoline, rip: { _ in 0xDEAD }, rsp: { _ in 0xFFFF_FFFF_FFFF_FFF8 })
        let unwinder = Unwinder(memory: RegionMemory(regions: [region]), modules: snapshot.loadedModules())
        let frames = unwinder.unwind(registers: registers).frames
        XCTAssertEqual(frames.count, 2, "\(frames)")
        XCTAssertEqual(frames.last, UnwoundFrame(pc: 0xDEAD, sp: 0xFFFF_FFFF_FFFF_FFF8, method: .scan, isSignalFrame: true))
    }

    func testTrampolinesAreKnownByTheirCode() {
        XCTAssertTrue(SignalFrame.isTrampoline([0x48, 0xC7, 0xC0, 0x0F, 0, 0, 0, 0x0F, 0x05, 0x90]))
        XCTAssertTrue(SignalFrame.isTrampoline([0xB8, 0x0F, 0, 0, 0, 0x0F, 0x05]))
        XCTAssertFalse(SignalFrame.isTrampoline([0xB8, 0x0F, 0, 0, 0, 0x0F]))
        XCTAssertFalse(SignalFrame.isTrampoline([0xB8, 0x3C, 0, 0, 0, 0x0F, 0x05]))  // exit, not rt_sigreturn
        XCTAssertFalse(SignalFrame.isTrampoline([]))
    }
}
