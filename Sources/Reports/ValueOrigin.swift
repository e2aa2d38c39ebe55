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
    /// Where a register's value at the pc was loaded from: `[base + displacement]`, with the
    /// base register's value when it still holds what it held at the load, and the load of the
    /// base register itself when that was one too (`mov rax, [rbp - 0x18]; mov rax, [rax]`).
    struct Load: Equatable {
        var base: String
        var displacement: Int64
        /// The base's value at the load, when no instruction since changed it.
        var baseValue: UInt64?
        /// Where the base was loaded from, when it was, from an unchanged rbp or rsp; or where
        /// it was stored before the load (unoptimized code keeps each parameter in its slot).
        var baseSlot: UInt64?
        /// The argument register the base held, or was copied from, unchanged since the
        /// function's entry: the parameter passed in it.
        var entryRegister: String?
    }

    /// How much of a function is decoded to find where a register was loaded.
    static let maximumBytes: UInt64 = 16 << 10

    /// The load that gave `register` its value at `pc`, reading the code from `functionStart`.
    static func load(
        of register: String, at pc: UInt64, functionStart: UInt64, gpr: [UInt64], memory: any MemoryReader
    ) -> Load? {
        guard functionStart <= pc, pc - functionStart <= maximumBytes else { return nil }
        let instructions = sweep(from: functionStart, to: pc, memory: memory)
        guard let load = lastLoad(of: register, in: instructions), let base = load.memoryOperands[0].base,
            load.memoryOperands[0].index == nil, base != "rip"
        else { return nil }
        // `mov rax, [rax]` replaced its own base: the base's value then is not the register's now.
        let fullBase = RegisterFile.full(base)?.register ?? base
        let baseKept =
            !writes(fullBase, after: load, in: instructions)
            && !load.writtenRegisters.contains { RegisterFile.full($0)?.register == fullBase }
        var found = Load(
            base: base, displacement: load.memoryOperands[0].displacement,
            baseValue: baseKept ? RegisterFile.value(base, gpr: gpr, nextPC: 0) : nil)
        // The base register's own load, from a stack slot.
        if let index = instructions.firstIndex(of: load),
            let inner = lastLoad(of: base, in: Array(instructions[..<index])),
            let slotBase = inner.memoryOperands[0].base, slotBase == "rbp" || slotBase == "rsp",
            inner.memoryOperands[0].index == nil, !writes(slotBase, after: inner, in: instructions),
            let value = RegisterFile.value(slotBase, gpr: gpr, nextPC: 0)
        {
            found.baseSlot = value &+ UInt64(bitPattern: inner.memoryOperands[0].displacement)
        }
        if found.baseSlot == nil, let index = instructions.firstIndex(of: load) {
            let before = Array(instructions[..<index])
            let writer = before.lastIndex { $0.writtenRegisters.contains { RegisterFile.full($0)?.register == fullBase } }
            // Stored into a slot since it last changed: `mov qword ptr [rsp + 0x78], rdi`.
            let since = writer.map { $0 + 1 } ?? 0
            if let store = before[since...].last(where: { instruction in
                instruction.mnemonic == "mov"
                    && instruction.registerOperands.first.flatMap({ RegisterFile.full($0)?.register })
                        == fullBase
                    && instruction.memoryOperands.first?.writes == true
            }), let operand = store.memoryOperands.first, let slotBase = operand.base, slotBase == "rbp" || slotBase == "rsp",
                operand.index == nil, !writes(slotBase, after: store, in: instructions),
                let value = RegisterFile.value(slotBase, gpr: gpr, nextPC: 0)
            {
                found.baseSlot = value &+ UInt64(bitPattern: operand.displacement)
            }
            // Never written in the function: the base is an argument register as it came in.
            // Or copied from one that was not written before the copy: `mov rax, rdi`.
            if writer == nil {
                found.entryRegister = fullBase
            } else if let writer, before[writer].mnemonic == "mov", before[writer].memoryOperands.isEmpty,
                before[writer].registerOperands.count == 2,
                let source = RegisterFile.full(before[writer].registerOperands[1])?.register,
                !before[..<writer].contains(where: { $0.writtenRegisters.contains { RegisterFile.full($0)?.register == source } })
            {
                found.entryRegister = source
            }
        }
        return found
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
