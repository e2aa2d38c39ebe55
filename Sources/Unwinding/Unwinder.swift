// Unwinder: call stacks from registers plus an abstract memory source (DESIGN §5).
//
// libunwind does the DWARF CFI work, one step at a time (through CShims' callback address
// space); this file supplies memory and the modules' .eh_frame_hdr tables, and owns the walk:
// when it stops, its recovery from a bad pc, its stack scan (StackScan.swift), how frames are
// labelled, and which frames of a very deep stack are kept (FrameRing.swift). Memory comes from
// the modules' files first (code and unwind tables need not be captured to be read), then from
// a `MemoryReader` (captured stacks, a live process, a minidump).

import BoundedBytes
import CShims
import ObjectFile

public struct UnwoundFrame: Sendable, Equatable {
    public enum Method: String, Sendable {
        case context, cfi, framePointer = "frame_pointer", scan
    }

    public var pc: UInt64
    public var sp: UInt64
    public var method: Method
    /// The frame's registers came from a kernel signal frame: it was interrupted by a signal
    /// there, so its pc is the exact instruction (look it up as is, not as a return address).
    public var isSignalFrame: Bool
}

public struct UnwoundStack: Sendable, Equatable {
    public var frames: [UnwoundFrame]
    /// Frames left out between the kept head and tail of a very deep stack.
    public var skipped: Int
}

public final class Unwinder {
    let modules: [LoadedModule]
    /// Read-only, file-backed parts of the modules (code, .eh_frame, .rodata), then `memory`,
    /// then whatever else the files hold (a writable segment's initial contents).
    let memory: LayeredMemory
    /// Executable ranges, runtime addresses, sorted; for scan candidates.
    let codeRanges: [Range<UInt64>]

    public var maxFrames = 512
    public var headFrames = 256
    public var frameLimit = 1_000_000

    public init(memory: any MemoryReader, modules: [LoadedModule]) {
        self.modules = modules.sorted { $0.base < $1.base }
        var ranges: [Range<UInt64>] = []
        for module in self.modules {
            guard let object = module.object else {
                // No file (offline, binary not found): any address in the module may be code,
                // which is all stack scanning needs.
                if module.size > 0, let range = UInt64.checkedRange(start: module.base, count: module.size) {
                    ranges.append(range)
                }
                continue
            }
            for range in object.executableRanges {
                let lower = range.lowerBound &+ module.loadBias, upper = range.upperBound &+ module.loadBias
                if lower < upper { ranges.append(lower..<upper) }
            }
        }
        codeRanges = ranges.sorted { $0.lowerBound < $1.lowerBound }
        self.memory = LayeredMemory([
            ImageMemory(modules: self.modules, segments: .readOnly), memory,
            ImageMemory(modules: self.modules, segments: .all),
        ])
    }

    func isCode(_ address: UInt64) -> Bool {
        guard let found = codeRanges.lastIndex(atOrBelow: address, key: \.lowerBound) else { return false }
        return codeRanges[found].contains(address)
    }

    /// Tables built from .eh_frame for modules without .eh_frame_hdr, each served at a
    /// synthetic address in the kernel half of the address space, which no capture contains.
    private var builtTables: [Int: (address: UInt64, index: EHFrameIndex)?] = [:]
    static let syntheticTableBase: UInt64 = 0xFFFF_C000_0000_0000

    func builtTable(moduleIndex: Int, object: ELFFile) -> (address: UInt64, index: EHFrameIndex)? {
        if let cached = builtTables[moduleIndex] { return cached }
        let built = EHFrameIndex(elf: object).map { (Self.syntheticTableBase + UInt64(moduleIndex) << 32, $0) }
        builtTables[moduleIndex] = built
        return built
    }

    func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        if address >= Self.syntheticTableBase {
            let moduleIndex = Int((address - Self.syntheticTableBase) >> 32)
            guard let built = builtTables[moduleIndex] ?? nil else { return false }
            let offset = address - built.address
            guard offset <= UInt64(built.index.table.count), UInt64(buffer.count) <= UInt64(built.index.table.count) - offset
            else { return false }
            built.index.table.withUnsafeBytes {
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[Int(offset)..<Int(offset) + buffer.count]))
            }
            return true
        }
        return memory.readUpTo(from: address, into: buffer) == buffer.count
    }

    func moduleIndex(containing address: UInt64) -> Int? {
        guard let found = modules.lastIndex(atOrBelow: address, key: \.base),
            address - modules[found].base < modules[found].size
        else { return nil }
        return found
    }

    func table(for ip: UInt64) -> cp_unwind_table? {
        guard let index = moduleIndex(containing: ip), let elf = modules[index].object else { return nil }
        let bias = modules[index].loadBias
        let text = elf.executableRanges
        let start = (text.map(\.lowerBound).min() ?? 0) &+ bias
        let end = (text.map(\.upperBound).max() ?? 0) &+ bias
        if let table = elf.ehFrameTable {
            return cp_unwind_table(
                start_ip: start, end_ip: end, eh_frame_hdr: table.headerAddress &+ bias,
                table_data: table.tableAddress &+ bias, table_entries: table.entries)
        }
        guard let built = builtTable(moduleIndex: index, object: elf) else { return nil }
        return cp_unwind_table(
            start_ip: start, end_ip: end, eh_frame_hdr: built.index.base &+ bias,
            table_data: built.address, table_entries: UInt64(built.index.entries))
    }

    /// libunwind's address space for this source, created on first use and kept for every
    /// thread (its FDE cache is shared). libunwind keeps a pointer to `source`, so it is
    /// allocated here, at a fixed address, and freed after the address space.
    private let source = UnsafeMutablePointer<cp_unwind_source>.allocate(capacity: 1)
    private var handle: OpaquePointer?

    deinit {
        cp_unwinder_destroy(handle)
        source.deallocate()
    }

    private func unwinderHandle() -> OpaquePointer? {
        if let handle { return handle }
        source.initialize(to: cp_unwind_source())
        source.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        source.pointee.read_memory = { context, address, buffer, size in
            let unwinder = Unmanaged<Unwinder>.fromOpaque(context!).takeUnretainedValue()
            guard size <= 1 << 20, let buffer else { return -1 }
            return unwinder.read(address, into: UnsafeMutableRawBufferPointer(start: buffer, count: Int(size))) ? 0 : -1
        }
        source.pointee.find_table = { context, ip, table in
            let unwinder = Unmanaged<Unwinder>.fromOpaque(context!).takeUnretainedValue()
            guard let found = unwinder.table(for: ip) else { return -1 }
            table!.pointee = found
            return 0
        }
        handle = cp_unwinder_create(source)
        return handle
    }

    /// Unwinds one thread from its x86_64 `user_regs_struct` registers.
    public func unwind(registers: [UInt64]) -> UnwoundStack {
        precondition(registers.count == UserRegisters.count)
        guard maxFrames > 0, let handle = unwinderHandle() else { return UnwoundStack(frames: [], skipped: 0) }
        var ring = FrameRing<UnwoundFrame>(capacity: maxFrames, head: headFrames)
        walk(handle, registers: registers, into: &ring)
        let (frames, skipped) = ring.finish()
        return UnwoundStack(frames: frames, skipped: skipped)
    }

    /// The walk: libunwind steps while it can; when it loses the thread, a return address
    /// found on the stack restarts it ("scan").
    ///
    /// Method labels: a caller frame is "cfi" when libunwind had an FDE for its callee,
    /// otherwise "frame_pointer" (libunwind's rbp-chain fallback).
    private func walk(_ handle: OpaquePointer, registers: [UInt64], into ring: inout FrameRing<UnwoundFrame>) {
        var registers = registers
        var pc = registers[UserRegisters.rip], sp = registers[UserRegisters.rsp]
        ring.push(UnwoundFrame(pc: pc, sp: sp, method: .context, isSignalFrame: false))

        // Starts libunwind's cursor at pc and sp, the other registers as given.
        func begin() -> Bool {
            registers[UserRegisters.rip] = pc
            registers[UserRegisters.rsp] = sp
            return registers.withUnsafeBufferPointer { cp_unwind_begin(handle, $0.baseAddress) } >= 0
        }

        // A call through a bad pointer leaves pc outside any code: the caller's return address
        // is the word at sp. Start the unwind from the caller then.
        if !isCode(pc) {
            guard let ret = readWord(sp), isCode(ret) else { return }
            pc = ret
            sp = sp &+ 8
            ring.push(UnwoundFrame(pc: pc, sp: sp, method: .scan, isSignalFrame: false))
        }

        guard begin() else { return }
        var step = cp_step_result()
        while ring.walked < frameLimit {
            cp_unwind_step(handle, &step)
            // A cache hit (no lookup) replays a state libunwind derived from CFI.
            let hasCFI = step.lookup != 0
            let isSignalFrame = step.step > 0 && step.signal_frame != 0
            // A caller must lie above its callee on the stack, except across a signal frame (the
            // handler may run on an alternate stack).
            if step.step > 0 && step.pc != 0 && (step.sp > sp || isSignalFrame) {
                pc = step.pc
                sp = step.sp
                ring.push(
                    UnwoundFrame(pc: pc, sp: sp, method: hasCFI ? .cfi : .framePointer, isSignalFrame: isSignalFrame))
                continue
            }
            // CFI that says "no caller" is the real end of the stack (_start, clone).
            if step.step == 0 && hasCFI { break }
            if step.step > 0 && step.pc == 0 { break }
            // Otherwise libunwind lost the thread: look for a return address above sp.
            guard let found = scanForReturn(above: sp) else { break }
            pc = found.value
            sp = found.slot &+ 8
            ring.push(UnwoundFrame(pc: pc, sp: sp, method: .scan, isSignalFrame: false))
            guard begin() else { break }
        }
    }
}

/// x86_64 `struct user_regs_struct` (crashport_shims.h): the registers `Unwinder.unwind` takes,
/// as ptrace, the stub's crash record and a snapshot's gpr hold them.
public enum UserRegisters {
    public static let count = Int(CP_USER_REGS_COUNT)
    public static let rip = Int(CP_USER_REG_RIP)
    public static let rsp = Int(CP_USER_REG_RSP)
}
