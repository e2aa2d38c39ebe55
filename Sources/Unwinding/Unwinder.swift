// Unwinder: call stacks from registers plus an abstract memory source (docs/architecture.md, "The crash path").
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
    /// On the kernel's signal frame itself (`<signal handler called>`: pc is the rt_sigreturn
    /// trampoline the handler returns into, an exact address): where its ucontext lies, which
    /// holds the registers of the next frame. Nil on every other frame.
    public var ucontext: UInt64?
    /// On the signal frame: the siginfo the kernel delivered with it (the signal the handler
    /// ran for, and its fault address), when readable.
    public var signalInfo: SignalInfo?
    /// A caller's callee-saved registers as its callee's CFI restores them (where its
    /// variables may live); nil where they are not known (the first frame has the thread's
    /// own, a frame found by scanning or a frame pointer has none).
    public var calleeSaved: CalleeSaved?

    public init(
        pc: UInt64, sp: UInt64, method: Method, isSignalFrame: Bool = false, ucontext: UInt64? = nil,
        signalInfo: SignalInfo? = nil
    ) {
        self.pc = pc
        self.sp = sp
        self.method = method
        self.isSignalFrame = isSignalFrame
        self.ucontext = ucontext
        self.signalInfo = signalInfo
    }

    /// Whether this is the kernel's signal frame (`<signal handler called>`).
    public var isSignalTrampoline: Bool { ucontext != nil }
}

/// x86-64's callee-saved registers, which a callee's CFI says where it saved.
public struct CalleeSaved: Sendable, Equatable {
    public var rbx, rbp, r12, r13, r14, r15: UInt64

    public init(rbx: UInt64, rbp: UInt64, r12: UInt64, r13: UInt64, r14: UInt64, r15: UInt64) {
        (self.rbx, self.rbp, self.r12, self.r13, self.r14, self.r15) = (rbx, rbp, r12, r13, r14, r15)
    }

    /// By name, as X86_64Registers names them.
    public var named: [(String, UInt64)] {
        [("rbx", rbx), ("rbp", rbp), ("r12", r12), ("r13", r13), ("r14", r14), ("r15", r15)]
    }
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
    /// The first layer of `memory`, recording what it serves.
    let fileBytes: FileReads

    /// At most this many frames per thread (a deep recursion is kept whole up to here, the crash
    /// log folds it); past it, the first `headFrames` and the last ones are kept and the count
    /// of those in between is recorded (ThreadRecord.truncated).
    public var maxFrames = 10_000
    public var headFrames = 5_000
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
        fileBytes = FileReads(ImageMemory(modules: self.modules, segments: .readOnly))
        self.memory = LayeredMemory([fileBytes, memory, ImageMemory(modules: self.modules, segments: .all)])
    }

    /// The read-only bytes of the modules' files this unwinder has read (code, .eh_frame_hdr,
    /// .eh_frame), at their runtime addresses: for the minidump, so that an unwind offline,
    /// where only a module's debug file is found (which keeps its code and CFI sections' places
    /// but not their bytes), reads the same bytes and finds the same frames.
    public func fileBytesRead() -> [MemoryRegion] { fileBytes.regions() }

    func isCode(_ address: UInt64) -> Bool { Self.address(address, isIn: codeRanges) }

    /// Whether one of `ranges` (sorted by start, not overlapping) holds `address`.
    static func address(_ address: UInt64, isIn ranges: [Range<UInt64>]) -> Bool {
        guard let found = ranges.lastIndex(atOrBelow: address, key: \.lowerBound) else { return false }
        return ranges[found].contains(address)
    }

    /// Executable memory that is no module's (a JIT's code: the JVM's, V8's), from the process's
    /// maps, sorted. A caller found by frame pointer may return into it (JIT code keeps rbp
    /// chains); a stack scan never takes a word pointing there (anything may).
    public var jitCode: [Range<UInt64>] = [] {
        didSet { jitCode.sort { $0.lowerBound < $1.lowerBound } }
    }

    func isJITCode(_ address: UInt64) -> Bool { Self.address(address, isIn: jitCode) }

    /// Tables built from .eh_frame for modules without .eh_frame_hdr, each served at a
    /// synthetic address in the kernel half of the address space, which no capture contains.
    private var builtTables: [Int: (address: UInt64, index: EHFrameIndex)?] = [:]
    /// Whether the code at an address is a signal trampoline (isSignalTrampoline).
    private var trampolines: [UInt64: Bool] = [:]
    static let syntheticTableBase: UInt64 = 0xFFFF_C000_0000_0000
    /// Modules that may have a synthetic table (and a .debug_frame image): each takes 4 GiB of
    /// address space from its base, and the first 0x1000 fill the space up to debugFrameBase
    /// (whose 0x1000 end below 2^64). A process that maps more ELF files than that (its maps are
    /// its own to make: 13,000 mappings of one file) unwinds its later ones by .eh_frame_hdr
    /// alone, rather than overflowing the address.
    static let syntheticSlots = 0x1000

    func builtTable(moduleIndex: Int, object: ELFFile) -> (address: UInt64, index: EHFrameIndex)? {
        if let cached = builtTables[moduleIndex] { return cached }
        guard moduleIndex < Self.syntheticSlots else { return nil }
        let built = EHFrameIndex(elf: object).map { (Self.syntheticTableBase + UInt64(moduleIndex) << 32, $0) }
        builtTables[moduleIndex] = built
        return built
    }

    func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        /// `buffer.count` bytes of `bytes`, served at `base`, from `address`.
        func copy(_ bytes: [UInt8], servedAt base: UInt64) -> Bool {
            let offset = address - base
            guard offset <= UInt64(bytes.count), UInt64(buffer.count) <= UInt64(bytes.count) - offset else { return false }
            bytes.withUnsafeBytes {
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[Int(offset)..<Int(offset) + buffer.count]))
            }
            return true
        }
        if address >= Self.debugFrameBase {
            guard let image = debugFrames[Int((address - Self.debugFrameBase) >> 32)] ?? nil else { return false }
            return copy(image.bytes, servedAt: image.address)
        }
        if address >= Self.syntheticTableBase {
            guard let built = builtTables[Int((address - Self.syntheticTableBase) >> 32)] ?? nil else { return false }
            return copy(built.index.table, servedAt: built.address)
        }
        return memory.readUpTo(from: address, into: buffer) == buffer.count
    }

    func moduleIndex(containing address: UInt64) -> Int? {
        guard let found = modules.lastIndex(atOrBelow: address, key: \.base),
            address - modules[found].base < modules[found].size
        else { return nil }
        return found
    }

    /// Each module's .eh_frame_hdr table, its header read through `memory` (the file's bytes
    /// online, recorded for the minidump; the minidump's offline where only a debug file is
    /// found).
    private var headerTables: [Int: ELFFile.EHFrameTable?] = [:]

    /// The tables of modules whose file is found nowhere, from their headers in `memory`.
    private var imageTables: [Int: cp_unwind_table?] = [:]

    /// The kinds of table (cp_unwind_table.kind) a module's CFI comes from.
    enum TableKind: Int32 {
        case ehFrameHeader = 0, ehFrame, debugFrame, debugFileDebugFrame
    }

    /// The `index`-th table for `ip`, in the order they are tried: the module's .eh_frame (by
    /// its .eh_frame_hdr, else a table built from it), then its .debug_frame (the file's own,
    /// else its debug file's), where the first has no FDE for `ip`.
    func table(for ip: UInt64, index: Int) -> cp_unwind_table? {
        guard let module = moduleIndex(containing: ip) else { return nil }
        guard let elf = modules[module].object else { return index == 0 ? imageTable(moduleIndex: module) : nil }
        let bias = modules[module].loadBias
        let text = elf.executableRanges
        let start = (text.map(\.lowerBound).min() ?? 0) &+ bias
        let end = (text.map(\.upperBound).max() ?? 0) &+ bias
        let ehFrame = ehFrameTable(moduleIndex: module, object: elf, start: start, end: end)
        switch (index, ehFrame) {
        case (0, let table?): return table
        case (0, nil), (1, _?): return debugFrameTable(moduleIndex: module, object: elf, start: start, end: end)
        default: return nil
        }
    }

    func ehFrameTable(moduleIndex index: Int, object elf: ELFFile, start: UInt64, end: UInt64) -> cp_unwind_table? {
        let bias = modules[index].loadBias
        let headerTable: ELFFile.EHFrameTable?
        if let known = headerTables[index] {
            headerTable = known
        } else {
            headerTable = elf.ehFrameTable(headerFrom: memory, bias: bias)
            headerTables[index] = headerTable
            // Read through `memory` too, so the minidump holds them: offline, a module found
            // nowhere is unwound from its headers there (imageTable).
            _ = ELFFile.programHeaders(ofImageAt: modules[index].base, in: memory)
        }
        if let table = headerTable {
            return cp_unwind_table(
                start_ip: start, end_ip: end, eh_frame_hdr: table.headerAddress &+ bias,
                table_data: table.tableAddress &+ bias, table_entries: table.entries, ip_relative: 0,
                kind: TableKind.ehFrameHeader.rawValue)
        }
        guard let built = builtTable(moduleIndex: index, object: elf) else { return nil }
        return cp_unwind_table(
            start_ip: start, end_ip: end, eh_frame_hdr: built.index.base &+ bias,
            table_data: built.address, table_entries: UInt64(built.index.entries), ip_relative: 0,
            kind: TableKind.ehFrame.rawValue)
    }

    /// .debug_frame images, each served at its own synthetic address (debugFrameBase + module
    /// index << 32), with its table after it.
    private var debugFrames: [Int: (address: UInt64, bytes: [UInt8], table: cp_unwind_table)?] = [:]
    static let debugFrameBase: UInt64 = 0xFFFF_D000_0000_0000

    func debugFrameTable(moduleIndex index: Int, object elf: ELFFile, start: UInt64, end: UInt64) -> cp_unwind_table? {
        if let known = debugFrames[index] { return known?.table }
        guard index < Self.syntheticSlots else { return nil }
        let code = elf.executableRanges
        var kind = TableKind.debugFrame
        var found = elf.debugFrame(code: code)
        if found == nil, let debugFile = debugFile?(modules[index]) {
            found = debugFile.debugFrame(code: code)
            kind = .debugFileDebugFrame
        }
        let address = Self.debugFrameBase + UInt64(index) << 32
        let made = found.flatMap { $0.image(at: address, bias: modules[index].loadBias, startIP: start) }.map { image in
            let entries = (image.bytes.count - image.tableOffset - 8) / 8
            let table = cp_unwind_table(
                start_ip: start, end_ip: end, eh_frame_hdr: address, table_data: address + UInt64(image.tableOffset),
                table_entries: UInt64(entries), ip_relative: 1, kind: kind.rawValue)
            return (address: address, bytes: image.bytes, table: table)
        }
        debugFrames[index] = made
        return made?.table
    }

    /// Where a module's separate debug file is (ReportBuilder asks the DebugFileLocator): its
    /// .debug_frame unwinds code that has no .eh_frame.
    public var debugFile: ((LoadedModule) -> ELFFile?)?
    /// The modules (paths) some frame was unwound with .debug_frame for, and the debug file it
    /// came from (nil: the module's own).
    public private(set) var debugFrameUse: [String: String?] = [:]

    /// The unwind table of a module with no file here, read from its image in `memory` (a
    /// minidump holding the headers and tables the unwind read online).
    func imageTable(moduleIndex index: Int) -> cp_unwind_table? {
        if let known = imageTables[index] { return known }
        let found = ELFFile.unwindTable(ofImageAt: modules[index].base, in: memory).map { image in
            cp_unwind_table(
                start_ip: image.executable.map(\.lowerBound).min() ?? 0,
                end_ip: image.executable.map(\.upperBound).max() ?? 0, eh_frame_hdr: image.table.headerAddress,
                table_data: image.table.tableAddress, table_entries: image.table.entries, ip_relative: 0,
                kind: TableKind.ehFrameHeader.rawValue)
        }
        imageTables[index] = found
        return found
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
        source.pointee.find_table = { context, ip, index, table in
            let unwinder = Unmanaged<Unwinder>.fromOpaque(context!).takeUnretainedValue()
            guard let found = unwinder.table(for: ip, index: Int(index)) else { return -1 }
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

    /// How many signal frames one walk follows; a forged frame whose ucontext leads back to
    /// itself ends here.
    public var maxSignalFrames = 16

    /// The walk: libunwind steps while it can; when it loses the thread, a return address
    /// found on the stack restarts it ("scan"). A return address into an rt_sigreturn
    /// trampoline is the kernel's signal frame: it is kept as a frame of its own, and the walk
    /// restarts from the registers its ucontext saved (SignalFrame.swift), on whatever stack
    /// they point to.
    ///
    /// Method labels: a caller frame is "cfi" when libunwind had an FDE for its callee,
    /// otherwise "frame_pointer" (libunwind's rbp-chain fallback); a frame interrupted by a
    /// signal is "cfi" when its registers are plausible (pc in code, sp in captured memory),
    /// "scan" when not (a forged or clobbered ucontext).
    private func walk(_ handle: OpaquePointer, registers: [UInt64], into ring: inout FrameRing<UnwoundFrame>) {
        var registers = registers
        var frame = UnwoundFrame(
            pc: registers[UserRegisters.rip], sp: registers[UserRegisters.rsp], method: .context)
        var signalFrames = 0
        // libunwind's cursor must be (re)started at `frame` with `registers`: the first frame,
        // a scan, or registers from a signal frame.
        var restart = true

        while ring.walked < frameLimit {
            if isSignalTrampoline(frame.pc) {
                let ucontext = frame.sp
                frame.ucontext = ucontext
                frame.signalInfo = SignalFrame.signalInfo(ucontext: ucontext, memory: memory)
                ring.push(frame)
                signalFrames += 1
                guard signalFrames <= maxSignalFrames,
                    let interrupted = SignalFrame.registers(ucontext: ucontext, base: registers, memory: memory)
                else { return }
                registers = interrupted
                let pc = registers[UserRegisters.rip], sp = registers[UserRegisters.rsp]
                let plausible = isCode(pc) && readWord(sp) != nil
                frame = UnwoundFrame(pc: pc, sp: sp, method: plausible ? .cfi : .scan, isSignalFrame: true)
                restart = true
                continue
            }
            ring.push(frame)
            if restart {
                // A call through a bad pointer leaves pc outside any code: the caller's return
                // address is the word at sp. Start the unwind from the caller then. A pc in a
                // JIT's code is code (a fault in compiled JavaScript or Java): its caller is found
                // by its frame pointer, as for a JIT frame further up.
                if !isCode(frame.pc) && !isJITCode(frame.pc) {
                    guard let ret = readWord(frame.sp), isCode(ret) else { return }
                    frame = UnwoundFrame(pc: ret, sp: frame.sp &+ 8, method: .scan)
                    continue
                }
                registers[UserRegisters.rip] = frame.pc
                registers[UserRegisters.rsp] = frame.sp
                guard registers.withUnsafeBufferPointer({ cp_unwind_begin(handle, $0.baseAddress) }) >= 0 else { return }
                restart = false
            }

            var step = cp_step_result()
            cp_unwind_step(handle, &step)
            if step.lookup == 1 && step.table >= TableKind.debugFrame.rawValue { noteDebugFrame(at: frame.pc) }
            // A cache hit (no lookup) replays a state libunwind derived from CFI.
            let hasCFI = step.lookup != 0
            let isSignalFrame = step.step > 0 && step.signal_frame != 0
            // A caller must lie above its callee on the stack, except across a signal frame (the
            // handler may run on an alternate stack).
            if step.step > 0 && step.pc != 0 && (step.sp > frame.sp || isSignalFrame) {
                if isSignalFrame {
                    // libunwind crossed a signal frame whose trampoline it knows (by its FDE)
                    // and we did not: the frame just kept was that trampoline.
                    signalFrames += 1
                    guard signalFrames <= maxSignalFrames else { return }
                    ring.updateLast { last in
                        last.ucontext = last.sp
                        last.signalInfo = SignalFrame.signalInfo(ucontext: last.sp, memory: memory)
                    }
                }
                // libunwind's rbp-chain fallback takes whatever rbp points at: a caller found so
                // is kept only when it returns into code (-O2 code keeps data in rbp), a
                // module's or a JIT's.
                if hasCFI || isSignalFrame || isCode(step.pc) || isJITCode(step.pc) {
                    frame = UnwoundFrame(
                        pc: step.pc, sp: step.sp, method: hasCFI ? .cfi : .framePointer, isSignalFrame: isSignalFrame)
                    if hasCFI {
                        let saved = step.callee_saved
                        frame.calleeSaved = CalleeSaved(
                            rbx: saved.0, rbp: saved.1, r12: saved.2, r13: saved.3, r14: saved.4, r15: saved.5)
                    }
                    continue
                }
            }
            // CFI that says "no caller" is the real end of the stack (_start, clone).
            if step.step == 0 && hasCFI { return }
            if step.step > 0 && step.pc == 0 { return }
            // Otherwise libunwind lost the thread: look for a return address above sp.
            guard let found = scanForReturn(above: frame.sp) else { return }
            frame = UnwoundFrame(pc: found.value, sp: found.slot &+ 8, method: .scan)
            restart = true
        }
    }

    private func noteDebugFrame(at pc: UInt64) {
        guard let index = moduleIndex(containing: pc) else { return }
        let path = modules[index].path
        guard debugFrameUse[path] == nil else { return }
        let fromDebugFile = debugFrames[index]??.table.kind == TableKind.debugFileDebugFrame.rawValue
        debugFrameUse[path] = fromDebugFile ? debugFile?(modules[index])?.path : nil
    }

    /// Whether the code at `pc` is an rt_sigreturn trampoline; remembered per address.
    func isSignalTrampoline(_ pc: UInt64) -> Bool {
        if let known = trampolines[pc] { return known }
        let found = isCode(pc) && SignalFrame.isTrampoline(at: pc, in: memory)
        trampolines[pc] = found
        return found
    }
}

/// x86_64 `struct user_regs_struct` (crashport_shims.h): the registers `Unwinder.unwind` takes,
/// as ptrace, the stub's crash record and a snapshot's gpr hold them.
public enum UserRegisters {
    public static let count = Int(CP_USER_REGS_COUNT)
    public static let rip = Int(CP_USER_REG_RIP)
    public static let rsp = Int(CP_USER_REG_RSP)
}
