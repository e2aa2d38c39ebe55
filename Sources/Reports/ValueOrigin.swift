// ValueOrigin: where the bad register's value came from, read back through the crashing
// function's own instructions: unoptimized code loads a variable from its stack slot into a
// register just before it uses it (`mov rax, qword ptr [rbp - 0x18]`), so the register is no
// variable's location, but the slot it was loaded from is. And a pointer read through another
// (`mov rax, qword ptr [rax]`, `o->next`) is that variable's field.
//
// The function's instructions are decoded from its start (the symbol's) up to the pc, at most
// `maximumBytes` of them: compilers lay a function's code out so that a linear sweep decodes it.
// Only the last write of the register before the pc is followed, and only when it is a plain
// load; anything else (an arithmetic result, a call's return value, a branch between) gives no
// origin rather than a guess.

import BoundedBytes
import ReportModel

extension FaultExplanation {
    /// The origin of a register's value at the pc.
    enum Origin: Equatable {
        /// Loaded from memory at `slot` (a variable's home, where the frame's variables say).
        case slot(UInt64)
        /// Loaded from `offset` bytes into what a pointer loaded from `slot` points at.
        case field(slot: UInt64, offset: Int64)
    }

    /// How much of a function is decoded to find where a register was loaded.
    static let maximumBytes: UInt64 = 16 << 10

    /// Where `register`'s value at `pc` was loaded from, reading the code from `functionStart`.
    static func origin(
        of register: String, at pc: UInt64, functionStart: UInt64, gpr: [UInt64], memory: any MemoryReader
    ) -> Origin? {
        guard functionStart <= pc, pc - functionStart <= maximumBytes else { return nil }
        let instructions = sweep(from: functionStart, to: pc, memory: memory)
        guard let load = lastLoad(of: register, in: instructions) else { return nil }
        let operand = load.memoryOperands[0]
        // The slot's base register must still hold what it held at the load: rbp and rsp in a
        // function's body do (no push or call moves rsp between, checked below).
        if let base = operand.base, base == "rbp" || base == "rsp", operand.index == nil {
            guard !movesStack(after: load, in: instructions) || base == "rbp",
                !writes(base, after: load, in: instructions),
                let value = RegisterFile.value(base, gpr: gpr, nextPC: 0)
            else { return nil }
            return .slot(value &+ UInt64(bitPattern: operand.displacement))
        }
        // A pointer read through another register: one level of `p->field`.
        guard let base = operand.base, operand.index == nil,
            case .slot(let slot)? = innerOrigin(of: base, before: load, in: instructions, gpr: gpr)
        else { return nil }
        return .field(slot: slot, offset: operand.displacement)
    }

    /// The slot a register was loaded from before `instruction` (the load that used it).
    static func innerOrigin(
        of register: String, before instruction: MachineInstruction, in instructions: [MachineInstruction], gpr: [UInt64]
    ) -> Origin? {
        guard let index = instructions.firstIndex(of: instruction) else { return nil }
        let earlier = Array(instructions[..<index])
        guard let load = lastLoad(of: register, in: earlier), let base = load.memoryOperands[0].base, base == "rbp",
            load.memoryOperands[0].index == nil, !writes("rbp", after: load, in: instructions),
            let value = RegisterFile.value(base, gpr: gpr, nextPC: 0)
        else { return nil }
        return .slot(value &+ UInt64(bitPattern: load.memoryOperands[0].displacement))
    }

    /// Instructions from `start` up to (not including) `end`, decoded one after another.
    static func sweep(from start: UInt64, to end: UInt64, memory: any MemoryReader) -> [MachineInstruction] {
        var instructions: [MachineInstruction] = []
        var address = start
        var bytes = [UInt8](repeating: 0, count: MachineInstruction.maximumLength)
        while address < end {
            let count = bytes.withUnsafeMutableBytes { memory.readUpTo(from: address, into: $0) }
            guard count > 0, let instruction = MachineInstruction.decode(Array(bytes.prefix(count)), at: address) else {
                return []
            }
            instructions.append(instruction)
            address &+= UInt64(instruction.length)
        }
        // A sweep that does not land on the pc decoded something else than what ran.
        return address == end ? instructions : []
    }

    /// The last instruction that wrote `register` (any width of it), when it is a plain load
    /// (`mov`/`movzx`/`movsx`/`movsxd` from memory) with nothing but straight-line code after
    /// it: a jump or call between could have come from elsewhere.
    static func lastLoad(of register: String, in instructions: [MachineInstruction]) -> MachineInstruction? {
        guard let full = RegisterFile.full(register)?.register else { return nil }
        for instruction in instructions.reversed() {
            if [.jump, .conditionalJump, .call, .return].contains(instruction.kind) { return nil }
            guard instruction.writtenRegisters.contains(where: { RegisterFile.full($0)?.register == full }) else { continue }
            let loads = ["mov", "movzx", "movsx", "movsxd"].contains(instruction.mnemonic)
            return loads && instruction.memoryOperands.count == 1 ? instruction : nil
        }
        return nil
    }

    /// Whether anything after `load` writes `register` (a destination operand).
    static func writes(_ register: String, after load: MachineInstruction, in instructions: [MachineInstruction]) -> Bool {
        guard let index = instructions.firstIndex(of: load) else { return true }
        return instructions[(index + 1)...].contains { instruction in
            instruction.writtenRegisters.contains { RegisterFile.full($0)?.register == register }
        }
    }

    /// Whether a push, pop or call after `load` moved rsp.
    static func movesStack(after load: MachineInstruction, in instructions: [MachineInstruction]) -> Bool {
        guard let index = instructions.firstIndex(of: load) else { return true }
        return instructions[(index + 1)...].contains { $0.writtenRegisters.contains("rsp") }
    }
}
