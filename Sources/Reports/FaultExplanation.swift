// FaultExplanation: why the program died, from what the report captured (`fault` in event.json,
// issue 49): the instruction at the crashed thread's pc decoded (MachineInstruction, capstone),
// what it did (a read or write of N bytes at an address made of which registers, a call or jump
// through one, a trap, a division), and a one-line diagnosis with the rule that decided it and
// the facts it read. The signature does not change: it is made from the frames.
//
// Everything here reads only the snapshot: its registers, its captured memory (and the modules'
// files for code), its memory map. So a report built offline from a minidump says the same.
// The bytes are the crashed program's: an instruction that does not decode, a pc in no module,
// a map that is missing are each said in `notes`, never guessed.

import BoundedBytes
import ObjectFile
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public enum FaultExplanation {
    /// What the rules read: the crash as the snapshot holds it.
    struct Facts {
        var signal: Int32
        var code: Int32
        var faultAddress: UInt64
        var gpr: [UInt64]
        var mappings: [MemoryMapping]
        var memory: any MemoryReader
        var modules: [LoadedModule]
        var stackOverflow: Bool

        var pc: UInt64 { gpr[X86_64Registers.ripIndex] }
        var sp: UInt64 { gpr[X86_64Registers.rspIndex] }
        /// Below this an address is NULL's or a field of it: the first 64 KiB (Linux's default
        /// vm.mmap_min_addr, which keeps them unmapped), or less when something is mapped there.
        var nullReach: UInt64 { min(mappings.map(\.start).min() ?? 0x10000, 0x10000) }
        func mapping(containing address: UInt64) -> MemoryMapping? { mappings.first { $0.contains(address) } }
    }

    /// The fault of a snapshot's crashed thread: nil for a signal that is not a fault or a trap
    /// (a kill, a handled error) or when the crashed thread is unknown.
    public static func explain(_ snapshot: ProcessSnapshot, mappings: [MemoryMapping], stackOverflow: Bool) -> FaultRecord? {
        let exception = snapshot.exception
        guard let thread = snapshot.threads.first(where: { $0.tid == snapshot.crashedThreadID }) else { return nil }
        let captured = RegionMemory(regions: snapshot.threads.compactMap(\.stack) + snapshot.extraMemory)
        let facts = Facts(
            signal: exception.signal, code: exception.code, faultAddress: exception.faultAddress,
            gpr: thread.registers.gpr, mappings: mappings.sorted { $0.start < $1.start },
            memory: LayeredMemory([captured, ImageMemory(modules: snapshot.modules, segments: .readOnly)]),
            modules: snapshot.modules, stackOverflow: stackOverflow)
        // A signal that is no fault of the instruction at the pc (an abort, a kill): that
        // instruction is where the thread was, decoded, and no more.
        guard [SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP].contains(exception.signal), exception.code > 0 else {
            guard let (decoded, source) = instruction(at: facts.pc, facts: facts, captured: captured) else { return nil }
            return FaultRecord(
                instruction: InstructionRecord(
                    address: HexAddress(facts.pc), bytes: hex(decoded.bytes), text: decoded.text, source: source))
        }
        return explain(facts, captured: captured)
    }

    static func explain(_ facts: Facts, captured: RegionMemory) -> FaultRecord {
        var record = FaultRecord()
        var notes: [String] = []
        let pc = facts.pc
        let atPC = instruction(at: pc, facts: facts, captured: captured)
        // A fault on fetching the instruction itself: the pc is the bad address (a call through
        // a null or wild pointer). The call that went there is the caller's, before the return
        // address at sp.
        let fetchFault = facts.signal == SIGSEGV && facts.faultAddress == pc || (atPC == nil && !isExecutable(pc, facts))
        if fetchFault {
            var access = AccessRecord(kind: .execute, address: HexAddress(pc))
            if let (call, source) = callThatWentTo(pc, facts: facts, captured: captured) {
                record.instruction = InstructionRecord(
                    address: HexAddress(call.address), bytes: hex(call.bytes), text: call.text, source: source,
                    role: "the call that jumped to \(HexAddress(pc))")
                access.expression = call.operandText
                access.registers = registers(of: call, facts: facts)
            } else {
                notes.append("the call that jumped to \(HexAddress(pc)) was not found before the return address at sp")
            }
            record.access = access
        } else if let (decoded, source) = atPC {
            record.instruction = InstructionRecord(
                address: HexAddress(pc), bytes: hex(decoded.bytes), text: decoded.text, source: source)
            record.access = access(of: decoded, facts: facts)
        } else {
            notes.append(undecodable(pc, facts: facts))
        }
        record.diagnosis = diagnose(facts, instruction: fetchFault ? nil : atPC?.instruction, access: record.access)
        record.notes = notes.isEmpty ? nil : notes
        if let base = badRegister(record.access, facts: facts) {
            record.variable = BadValueRecord(register: base.name, value: HexAddress(base.value))
        }
        return record
    }

    /// The instruction at `address`, from the captured bytes (what ran) or else the module's
    /// file, and which.
    static func instruction(
        at address: UInt64, facts: Facts, captured: RegionMemory
    ) -> (instruction: MachineInstruction, source: String)? {
        for (reader, source) in [(captured as any MemoryReader, "memory"), (facts.memory, "file")] {
            var bytes = [UInt8](repeating: 0, count: MachineInstruction.maximumLength)
            let count = bytes.withUnsafeMutableBytes { reader.readUpTo(from: address, into: $0) }
            guard count > 0, let decoded = MachineInstruction.decode(Array(bytes.prefix(count)), at: address) else { continue }
            return (decoded, source)
        }
        return nil
    }

    /// Why the pc could not be decoded.
    static func undecodable(_ pc: UInt64, facts: Facts) -> String {
        if Capstone.shared == nil {
            return "the instruction at \(HexAddress(pc)) was not decoded: capstone (\(Capstone.library), "
                + "Debian's libcapstone4) is not installed"
        }
        guard let mapping = facts.mapping(containing: pc) else {
            return "the instruction at \(HexAddress(pc)) could not be decoded: no mapping holds it"
        }
        if !facts.modules.contains(where: { $0.contains(pc) }) && !mapping.executable {
            return "the instruction at \(HexAddress(pc)) could not be decoded: its mapping is not code"
        }
        return "the bytes at \(HexAddress(pc)) are not an x86-64 instruction capstone decodes"
    }

    static func isExecutable(_ address: UInt64, _ facts: Facts) -> Bool {
        facts.mapping(containing: address)?.executable ?? facts.modules.contains { $0.contains(address) }
    }

    /// The call instruction that ends at the return address on top of the stack and whose
    /// target is `pc`: a call through a register or memory (its target read with the
    /// captured registers and memory), or a direct call to `pc`.
    static func callThatWentTo(
        _ pc: UInt64, facts: Facts, captured: RegionMemory
    ) -> (MachineInstruction, String)? {
        guard let returnAddress = try? captured.fetch(UInt64.self, from: facts.sp), isExecutable(returnAddress, facts) else {
            return nil
        }
        // Calls are 2 (`call rax`) to 7 (`call qword ptr [rax + rcx*8 + 0x1000]`) bytes long.
        for length in 2...7 {
            guard let start = returnAddress.checkedSubtracting(UInt64(length)),
                let (call, source) = instruction(at: start, facts: facts, captured: captured), call.kind == .call,
                call.length == length
            else { continue }
            // The registers at the crash are the caller's at the call, but rsp (one push less).
            if let target = callTarget(call, facts: facts, spAtCall: facts.sp &+ 8), target != pc { continue }
            return (call, source)
        }
        return nil
    }

    /// Where a call or jump through a register or memory goes; nil for a direct one or one
    /// whose operand the capture does not hold.
    static func callTarget(_ call: MachineInstruction, facts: Facts, spAtCall: UInt64? = nil) -> UInt64? {
        var gpr = facts.gpr
        if let spAtCall { gpr[X86_64Registers.rspIndex] = spAtCall }
        let next = call.address &+ UInt64(call.length)
        if let operand = call.memoryOperands.first {
            guard let address = address(of: operand, gpr: gpr, nextPC: next) else { return nil }
            return try? facts.memory.fetch(UInt64.self, from: address)
        }
        if let register = call.registerOperands.first { return RegisterFile.value(register, gpr: gpr, nextPC: next) }
        if call.operandText.hasPrefix("0x"), let target = UInt64(call.operandText.dropFirst(2), radix: 16) { return target }
        return nil
    }

    /// The address a memory operand gives with `gpr`; nil when a register is unknown. Wraps as
    /// the processor does.
    static func address(of operand: MachineInstruction.MemoryOperand, gpr: [UInt64], nextPC: UInt64) -> UInt64? {
        var address = UInt64(bitPattern: operand.displacement)
        if let base = operand.base {
            guard let value = RegisterFile.value(base, gpr: gpr, nextPC: nextPC) else { return nil }
            address = address &+ value
        }
        if let index = operand.index {
            guard let value = RegisterFile.value(index, gpr: gpr, nextPC: nextPC) else { return nil }
            address = address &+ value &* UInt64(max(operand.scale, 1))
        }
        if let segment = operand.segment {
            guard segment == "fs" || segment == "gs", let value = RegisterFile.value(segment, gpr: gpr, nextPC: nextPC)
            else { return address }
            address = address &+ value
        }
        return address
    }

    /// What the decoded instruction at the pc did.
    static func access(of instruction: MachineInstruction, facts: Facts) -> AccessRecord? {
        let next = instruction.address &+ UInt64(instruction.length)
        switch instruction.kind {
        case .trap: return AccessRecord(kind: .trap)
        case .divide:
            var record = AccessRecord(kind: .divide, expression: instruction.operandText)
            record.registers = registers(of: instruction, facts: facts)
            return record
        case .call, .jump:
            // A direct call or jump names no register: only its push can fault (below).
            if instruction.memoryOperands.isEmpty && instruction.registerOperands.isEmpty { break }
            // Through memory: the read of the operand is what faulted when its address is the
            // fault's or not canonical (then the memory path below says so).
            if let operand = instruction.memoryOperands.first,
                let address = address(of: operand, gpr: facts.gpr, nextPC: next),
                address & ~0xfff == facts.faultAddress & ~0xfff || !isCanonical(address)
            {
                break
            }
            // Otherwise the target is the bad address: a general protection fault for a
            // non-canonical one leaves the pc on the call or jump.
            guard let target = callTarget(instruction, facts: facts) else { break }
            return AccessRecord(
                kind: instruction.kind == .call ? .call : .jump, expression: instruction.operandText,
                address: HexAddress(target), registers: registers(of: instruction, facts: facts))
        case .push where instruction.memoryOperands.isEmpty:
            return AccessRecord(
                kind: .write, size: 8, expression: "[rsp - 8]", address: HexAddress(facts.sp &- 8),
                registers: ["rsp": HexAddress(facts.sp)])
        default: break
        }
        if instruction.kind == .call && instruction.memoryOperands.isEmpty {
            // A call pushes its return address: on an overflowed stack that write faults.
            return AccessRecord(
                kind: .write, size: 8, expression: "[rsp - 8]", address: HexAddress(facts.sp &- 8),
                registers: ["rsp": HexAddress(facts.sp)])
        }
        // The memory operand that faulted: the one whose address is the fault's (string moves
        // have two), else the first. `lea` and `nop` compute an address but touch none.
        let touching = instruction.memoryOperands.filter { $0.reads || $0.writes }
        guard !["lea", "nop"].contains(instruction.mnemonic), !touching.isEmpty else { return nil }
        let addressed = touching.map { ($0, address(of: $0, gpr: facts.gpr, nextPC: next)) }
        let page: (UInt64) -> UInt64 = { $0 & ~0xfff }
        let (operand, computed) =
            addressed.first { $0.1.map { page($0) == page(facts.faultAddress) } ?? false } ?? addressed[0]
        let kind: AccessRecord.Kind = operand.reads && operand.writes ? .readWrite : operand.writes ? .write : .read
        var registers: [String: HexAddress] = [:]
        for name in [operand.base, operand.index].compactMap({ $0 }) {
            if let value = RegisterFile.value(name, gpr: facts.gpr, nextPC: next) { registers[name] = HexAddress(value) }
        }
        return AccessRecord(
            kind: kind, size: operand.size, expression: operand.expression, address: computed.map(HexAddress.init),
            registers: registers.isEmpty ? nil : registers)
    }

    /// Whether an address is canonical on x86-64 (48-bit virtual addresses): its top 17 bits
    /// all equal. A non-canonical one is no pointer the kernel ever gives.
    static func isCanonical(_ address: UInt64) -> Bool {
        let top = address >> 47
        return top == 0 || top == 0x1ffff
    }

    /// Every register an instruction names (in its addresses and as operands), with its value.
    static func registers(of instruction: MachineInstruction, facts: Facts) -> [String: HexAddress]? {
        let next = instruction.address &+ UInt64(instruction.length)
        var names = instruction.registerOperands
        for operand in instruction.memoryOperands { names += [operand.base, operand.index].compactMap { $0 } }
        var values: [String: HexAddress] = [:]
        for name in names where name != "rip" {
            if let value = RegisterFile.value(name, gpr: facts.gpr, nextPC: next) { values[name] = HexAddress(value) }
        }
        return values.isEmpty ? nil : values
    }

    /// The register that held the bad address: a memory operand's base (else its index), or a
    /// call's target register.
    static func badRegister(_ access: AccessRecord?, facts: Facts) -> (name: String, value: UInt64)? {
        guard let access, let registers = access.registers, let expression = access.expression else { return nil }
        // The first register written in the expression is the base.
        func position(_ name: String) -> String.Index { expression.firstUTF8Range(of: name)?.lowerBound ?? expression.endIndex }
        let named = registers.keys.sorted { position($0) < position($1) }
        guard let name = named.first, name != "rsp", let value = registers[name] else { return nil }
        return (name, value.value)
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }
}

extension String {
    func leftPadded(to length: Int, with pad: Character = "0") -> String {
        count >= length ? self : String(repeating: pad, count: length - count) + self
    }
}
