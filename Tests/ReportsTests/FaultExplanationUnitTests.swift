// The fault explanation on synthetic crashes: capstone's decoding of the instructions that
// fault, each diagnosis rule on registers, memory and maps made to fit it, and bytes that decode
// to nothing. The end-to-end tests (FaultExplanationTests) crash real programs and compare with
// gdb.

import BoundedBytes
import ReportModel
import XCTest

@testable import Reports

final class FaultExplanationUnitTests: XCTestCase {
    // MARK: decoding

    func testDecodesAReadThroughARegister() throws {
        let mov = try XCTUnwrap(MachineInstruction.decode([0x8b, 0x40, 0x08, 0x90], at: 0x1000))
        XCTAssertEqual(mov.text, "mov eax, dword ptr [rax + 8]")
        XCTAssertEqual(mov.length, 3)
        XCTAssertEqual(mov.memoryOperands.count, 1)
        let operand = try XCTUnwrap(mov.memoryOperands.first)
        XCTAssertEqual(operand.base, "rax")
        XCTAssertEqual(operand.displacement, 8)
        XCTAssertEqual(operand.size, 4)
        XCTAssertTrue(operand.reads)
        XCTAssertFalse(operand.writes)
        XCTAssertEqual(operand.expression, "[rax + 8]")
    }

    func testDecodesWritesCallsTrapsAndDivisions() throws {
        let store = try XCTUnwrap(MachineInstruction.decode([0xc6, 0x00, 0x48], at: 0))
        XCTAssertEqual(store.memoryOperands.first?.writes, true)
        XCTAssertEqual(store.memoryOperands.first?.size, 1)
        XCTAssertEqual(MachineInstruction.decode([0xff, 0xd0], at: 0)?.kind, .call)
        XCTAssertEqual(MachineInstruction.decode([0xff, 0xe0], at: 0)?.kind, .jump)
        XCTAssertEqual(MachineInstruction.decode([0x0f, 0x0b], at: 0)?.kind, .trap)
        XCTAssertEqual(MachineInstruction.decode([0xcc], at: 0)?.kind, .trap)
        XCTAssertEqual(MachineInstruction.decode([0xf7, 0xf9], at: 0)?.kind, .divide)
        // movaps xmm0, xmmword ptr [rdi]: needs 16-byte alignment; movups does not.
        XCTAssertEqual(MachineInstruction.decode([0x0f, 0x28, 0x07], at: 0)?.needsAlignment, true)
        XCTAssertEqual(MachineInstruction.decode([0x0f, 0x10, 0x07], at: 0)?.needsAlignment, false)
        // An index with a scale and a negative displacement.
        let indexed = try XCTUnwrap(MachineInstruction.decode([0x8b, 0x44, 0x88, 0xf0], at: 0))
        XCTAssertEqual(indexed.memoryOperands.first?.expression, "[rax + rcx*4 - 0x10]")
    }

    func testBytesThatAreNoInstructionDecodeToNothing() {
        XCTAssertNil(MachineInstruction.decode([], at: 0))
        XCTAssertNil(MachineInstruction.decode([0x06], at: 0))  // push es: not in 64-bit mode
        XCTAssertNil(MachineInstruction.decode([0x0f], at: 0))  // cut short
        // Longer than an instruction: only the first 15 bytes are given.
        XCTAssertEqual(MachineInstruction.decode([UInt8](repeating: 0x66, count: 100) + [0x90], at: 0), nil)
    }

    func testRegisterNamesOfEveryWidth() {
        var gpr = [UInt64](repeating: 0, count: X86_64Registers.gprCount)
        gpr[X86_64Registers.names.firstIndex(of: "rax")!] = 0x1122_3344_5566_7788
        gpr[X86_64Registers.names.firstIndex(of: "r9")!] = 0xffff_ffff_0000_0001
        XCTAssertEqual(RegisterFile.value("eax", gpr: gpr, nextPC: 0), 0x5566_7788)
        XCTAssertEqual(RegisterFile.value("ax", gpr: gpr, nextPC: 0), 0x7788)
        XCTAssertEqual(RegisterFile.value("al", gpr: gpr, nextPC: 0), 0x88)
        XCTAssertEqual(RegisterFile.value("ah", gpr: gpr, nextPC: 0), 0x77)
        XCTAssertEqual(RegisterFile.value("r9d", gpr: gpr, nextPC: 0), 1)
        XCTAssertEqual(RegisterFile.value("rip", gpr: gpr, nextPC: 0x42), 0x42)
        XCTAssertNil(RegisterFile.value("xmm0", gpr: gpr, nextPC: 0))
    }

    // MARK: diagnosis

    /// A process: code at 0x401000 (r-x), read-only data at 0x402000, a heap at 0x555555559000, a
    /// stack at 0x7ffd00000000; `code` at the pc 0x401000.
    func crash(
        code: [UInt8], registers: [String: UInt64] = [:], signal: Int32 = 11, siCode: Int32 = 1,
        faultAddress: UInt64, stack: [UInt64] = [], pc: UInt64 = 0x401000, stackOverflow: Bool = false,
        extra: [MemoryRegion] = []
    ) -> FaultRecord {
        var gpr = [UInt64](repeating: 0x7777, count: X86_64Registers.gprCount)
        gpr[X86_64Registers.ripIndex] = pc
        gpr[X86_64Registers.rspIndex] = 0x7ffd_0000_1000
        for (name, value) in registers { gpr[X86_64Registers.names.firstIndex(of: name)!] = value }
        let mappings = [
            MemoryMapping(
                start: 0x401000, end: 0x402000, readable: true, writable: false, executable: true, offset: 0, inode: 1,
                path: "/bin/x"),
            MemoryMapping(
                start: 0x402000, end: 0x403000, readable: true, writable: false, executable: false, offset: 0, inode: 1,
                path: "/bin/x"),
            MemoryMapping(
                start: 0x5555_5555_9000, end: 0x5555_5557_a000, readable: true, writable: true, executable: false, offset: 0,
                inode: 0,
                path: "[heap]"),
            MemoryMapping(
                start: 0x7ffd_0000_0000, end: 0x7ffd_0002_0000, readable: true, writable: true, executable: false, offset: 0,
                inode: 0, path: "[stack]"),
        ]
        let stackBytes = stack.flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> (8 * UInt64($0))) } }
        let regions =
            [MemoryRegion(start: 0x401000, bytes: code), MemoryRegion(start: 0x7ffd_0000_1000, bytes: stackBytes)] + extra
        let captured = RegionMemory(regions: regions)
        let facts = FaultExplanation.Facts(
            signal: signal, code: siCode, faultAddress: faultAddress, gpr: gpr, mappings: mappings, memory: captured,
            modules: [], stackOverflow: stackOverflow)
        return FaultExplanation.explain(facts, captured: captured)
    }

    func testAFieldOfANullStructIsNearNull() {
        let record = crash(code: [0x8b, 0x40, 0x08], registers: ["rax": 0], faultAddress: 8)
        XCTAssertEqual(record.instruction?.text, "mov eax, dword ptr [rax + 8]")
        XCTAssertEqual(record.instruction?.source, "memory")
        XCTAssertEqual(record.access?.kind, .read)
        XCTAssertEqual(record.access?.size, 4)
        XCTAssertEqual(record.access?.expression, "[rax + 8]")
        XCTAssertEqual(record.access?.address, HexAddress(8))
        XCTAssertEqual(record.access?.registers, ["rax": HexAddress(0)])
        XCTAssertEqual(record.diagnosis?.rule, "near-null")
        XCTAssertEqual(record.variable?.register, "rax")
        XCTAssertTrue(record.diagnosis?.summary?.contains("0x8 = NULL + 8 through rax = NULL") == true, "\(record)")
    }

    func testAReadAtNullIsANullDereference() {
        let record = crash(code: [0x48, 0x8b, 0x03], registers: ["rbx": 0], faultAddress: 0)
        XCTAssertEqual(record.diagnosis?.rule, "null-dereference")
    }

    func testAWriteToReadOnlyDataNamesTheMapping() {
        let record = crash(code: [0xc6, 0x00, 0x48], registers: ["rax": 0x402010], siCode: 2, faultAddress: 0x402010)
        XCTAssertEqual(record.access?.kind, .write)
        XCTAssertEqual(record.diagnosis?.rule, "write-to-read-only")
    }

    func testANonCanonicalAddressIsSaidSo() {
        // A general protection fault: SI_KERNEL, no fault address; the access gives it.
        let record = crash(code: [0x48, 0x8b, 0x00], registers: ["rax": 0x4141_4141_4141_4141], siCode: 0x80, faultAddress: 0)
        XCTAssertEqual(record.access?.address, HexAddress(0x4141_4141_4141_4141))
        XCTAssertEqual(record.diagnosis?.rule, "non-canonical")
        // A call through one: the target is the bad address.
        let call = crash(code: [0xff, 0xd0], registers: ["rax": 0x4141_4141_4141_4141], siCode: 0x80, faultAddress: 0)
        XCTAssertEqual(call.access?.kind, .call)
        XCTAssertEqual(call.diagnosis?.rule, "non-canonical")
    }

    func testAnUnmappedAddressIsWild() {
        let record = crash(code: [0x48, 0x8b, 0x00], registers: ["rax": 0x7000_0000_0000], faultAddress: 0x7000_0000_0000)
        XCTAssertEqual(record.diagnosis?.rule, "wild-address")
    }

    func testGlibcsFreeListLinkIsAUseAfterFree() {
        // A pointer read out of the last freed chunk of a list, at 0x5555555592a0: its link is
        // (0x5555555592a0 >> 12) ^ NULL.
        var record = crash(code: [0x8b, 0x40, 0x08], registers: ["rax": 0x5_5555_5559], faultAddress: 0x5_5555_5561)
        XCTAssertEqual(record.diagnosis?.rule, "use-after-free", "\(record)")
        // With a next chunk at 0x555555559330.
        let linked: UInt64 = (0x5555_5555_92a0 >> 12) ^ 0x5555_5555_9330
        record = crash(code: [0x8b, 0x40, 0x08], registers: ["rax": linked], faultAddress: linked + 8)
        XCTAssertEqual(record.diagnosis?.rule, "use-after-free", "\(record)")
        // Garbage is not evidence.
        record = crash(code: [0x8b, 0x40, 0x08], registers: ["rax": 0x10_0000_0001], faultAddress: 0x10_0000_0009)
        XCTAssertEqual(record.diagnosis?.rule, "wild-address")
    }

    func testACallToNullIsFoundFromItsReturnAddress() {
        // `call rdx` at 0x401010 with rdx = 0; the pc is 0, the return address 0x401012 at sp.
        var code = [UInt8](repeating: 0x90, count: 0x20)
        code[0x10] = 0xff
        code[0x11] = 0xd2
        let record = crash(code: code, registers: ["rdx": 0], faultAddress: 0, stack: [0x401012], pc: 0)
        XCTAssertEqual(record.instruction?.text, "call rdx")
        XCTAssertEqual(record.instruction?.address, HexAddress(0x401010))
        XCTAssertNotNil(record.instruction?.role)
        XCTAssertEqual(record.access?.kind, .execute)
        XCTAssertEqual(record.access?.registers, ["rdx": HexAddress(0)])
        XCTAssertEqual(record.diagnosis?.rule, "jump-to-null")
        // Without a return address the call is not found, and the note says so.
        let lost = crash(code: code, registers: ["rdx": 0], faultAddress: 0, stack: [], pc: 0)
        XCTAssertNil(lost.instruction)
        XCTAssertEqual(lost.diagnosis?.rule, "jump-to-null")
        XCTAssertEqual(lost.notes?.count, 1)
    }

    func testAJumpIntoDataIsExecutionOfANonExecutablePage() {
        let record = crash(code: [], faultAddress: 0x5555_5555_9100, stack: [], pc: 0x5555_5555_9100)
        XCTAssertEqual(record.diagnosis?.rule, "execute-non-executable")
    }

    func testDivisionsTrapsAndMisalignment() {
        XCTAssertEqual(
            crash(code: [0xf7, 0xf9], registers: ["rcx": 0], signal: 8, faultAddress: 0x401000).diagnosis?.rule,
            "division-by-zero")
        XCTAssertEqual(crash(code: [0x0f, 0x0b], signal: 4, siCode: 2, faultAddress: 0x401000).diagnosis?.rule, "trap")
        let misaligned = crash(code: [0x0f, 0x28, 0x07], registers: ["rdi": 0x5555_5555_9008], siCode: 0x80, faultAddress: 0)
        XCTAssertEqual(misaligned.diagnosis?.rule, "misaligned")
    }

    func testAStackOverflowKeepsItsRule() {
        let record = crash(code: [0xe8, 0, 0, 0, 0], faultAddress: 0x7ffc_ffff_fff8, stackOverflow: true)
        XCTAssertEqual(record.access?.kind, .write)
        XCTAssertEqual(record.diagnosis?.rule, "stack-overflow")
    }

    func testAPCInNoMappingOrNotCodeIsANote() {
        // Bytes that decode to nothing at a pc in code.
        let record = crash(code: [0x06], signal: 4, siCode: 2, faultAddress: 0x401000)
        XCTAssertNil(record.instruction)
        XCTAssertEqual(record.notes?.first?.contains("not an x86-64 instruction"), true, "\(record)")
    }

    // MARK: aborts

    func event(frames: [String], reason: String? = nil) -> Event {
        var event = Event()
        event.kind = .crash
        event.signal = SignalRecord(number: 6, name: "SIGABRT")
        event.reason = reason
        event.threads = [ThreadRecord(tid: 1, crashed: true, frames: frames.map { FrameRecord(function: $0) })]
        return event
    }

    func testAbortsAreToldByTheirFramesAndMessage() {
        var smash = event(frames: [
            "__pthread_kill_implementation", "raise", "abort", "__libc_message", "__fortify_fail", "__stack_chk_fail", "smash",
            "main",
        ])
        FaultExplanation.diagnoseAbort(&smash)
        XCTAssertEqual(smash.fault?.diagnosis?.rule, "stack-protector")
        XCTAssertTrue(smash.fault?.diagnosis?.summary?.contains("of smash") == true)
        var double = event(
            frames: ["raise", "abort", "malloc_printerr", "free", "main"], reason: "free(): double free detected in tcache 2")
        FaultExplanation.diagnoseAbort(&double)
        XCTAssertEqual(double.fault?.diagnosis?.rule, "double-free")
        var corrupt = event(frames: ["raise", "abort", "main"], reason: "malloc(): corrupted top size")
        FaultExplanation.diagnoseAbort(&corrupt)
        XCTAssertEqual(corrupt.fault?.diagnosis?.rule, "heap-corruption")
        var plain = event(frames: ["raise", "abort", "main"])
        FaultExplanation.diagnoseAbort(&plain)
        XCTAssertEqual(plain.fault?.diagnosis?.rule, "abort")
        // A handled error is no abort.
        var error = event(frames: ["main"])
        error.kind = .error
        FaultExplanation.diagnoseAbort(&error)
        XCTAssertNil(error.fault)
    }
}
