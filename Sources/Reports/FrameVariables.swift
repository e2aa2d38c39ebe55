// FrameVariables: the crashed thread's top frames' parameters and locals (each frame's `vars`),
// and the variable that held the bad value (`fault.variable`), from the modules' DWARF
// (Symbolication's DWARFVariables) over the registers and memory the report captured.
//
// A frame's registers are what the unwind knows of it: every general register for the crashed
// frame; for a caller, its stack pointer, pc and the callee-saved registers its callee's CFI
// restored; its CFA is its caller's stack pointer. Memory is the capture's (the stacks, the
// windows around pointers) and the modules' read-only segments from their files (string
// literals): a value whose bytes are elsewhere prints `<unavailable>`, never a guess.
// CRASHPORT_VARIABLES=off leaves every frame's `vars` out (the values are the program's data);
// upload sends them only with --send-variables.

import BoundedBytes
import ObjectFile
import ReportModel
import Symbolication
import Unwinding

#if canImport(Glibc)
import Glibc
#endif

enum FrameVariables {
    /// What one crashed thread's variables are read with, and what the fault explanation
    /// takes of its top frame.
    final class Collection {
        let memory: any MemoryReader
        /// The scopes (innermost first) and the function's first instruction of the crashed
        /// frame and of its caller (where a call to a bad pointer was made).
        var scopes: [[DWARFScopeVariables]] = [[], []]
        var functionStarts: [UInt64?] = [nil, nil]

        init(memory: any MemoryReader) { self.memory = memory }

        /// The variables of unwound frame `position` into its records (one per scope, inlined
        /// ones first, as symbolication made them).
        func read(
            into records: inout [FrameRecord], position: Int, stack: [UnwoundFrame], gpr: [UInt64], fxsave: [UInt8],
            isReturnAddress: Bool, symbolizer: Symbolizer
        ) {
            let frame = stack[position]
            let calledBadPointer = position == 1 && stack[0].method == .context && frame.sp == stack[0].sp &+ 8
            guard !frame.isSignalTrampoline, frame.method != .scan || calledBadPointer,
                let state = FrameVariables.state(of: position, in: stack, gpr: gpr, fxsave: fxsave, memory: memory)
            else { return }
            let scopes = symbolizer.variables(pc: frame.pc, isReturnAddress: isReturnAddress, state: state)
            if position < 2 {
                self.scopes[position] = scopes
                if let offset = records.last?.functionOffset?.value, offset <= frame.pc {
                    functionStarts[position] = frame.pc - offset
                }
            }
            pending = []
            guard !scopes.isEmpty else { return }
            for (index, scope) in scopes.enumerated() {
                // One scope per record when they line up; else by the function's name.
                let target =
                    scopes.count == records.count ? index : records.firstIndex { $0.function == scope.function && $0.vars == nil }
                guard let target, records.indices.contains(target) else {
                    pending.append(scope)
                    continue
                }
                let values = FrameVariables.records(scope)
                records[target].vars = values.isEmpty ? nil : values
            }
        }

        /// Scopes of the last frame read that no record of it took: an inlined function the
        /// DWARF has at that pc, which symbolication shows as a tail call's frame after it.
        var pending: [DWARFScopeVariables] = []

        /// A frame put back between two (a tail call's) takes a pending scope of its name.
        func adopt(into record: inout FrameRecord) {
            guard let index = pending.firstIndex(where: { $0.function == record.function }) else { return }
            let values = FrameVariables.records(pending.remove(at: index))
            record.vars = values.isEmpty ? nil : values
        }
    }

    /// Frames of the crashed thread given their variables (innermost first, inlined ones
    /// counted).
    static let maximumFrames = 5

    /// Whether variables are read at all: not with CRASHPORT_VARIABLES=off (or 0, no, false).
    static var enabled: Bool {
        guard let value = getenv("CRASHPORT_VARIABLES").map({ String(cString: $0).lowercased() }) else { return true }
        return !["off", "0", "no", "false"].contains(value)
    }

    /// The DWARF register numbers of x86-64's general registers (System V psABI, figure 3.36).
    static let dwarfNumbers: [String: Int] = [
        "rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7, "r8": 8, "r9": 9, "r10": 10,
        "r11": 11, "r12": 12, "r13": 13, "r14": 14, "r15": 15, "rip": 16,
    ]

    /// The state of unwound frame `position` of `stack` for its location expressions.
    static func state(
        of position: Int, in frames: [UnwoundFrame], gpr: [UInt64], fxsave: [UInt8] = [], memory: any MemoryReader,
        depth: Int = 0
    ) -> DWARFFrameState? {
        let frame = frames[position]
        var registers: [Int: UInt64] = [:]
        // A call to a bad pointer: the caller, found at the return address on top of the stack,
        // still has every register as at its call, but the pc and sp.
        let calledBadPointer =
            position == 1 && frames[0].method == .context && frame.method == .scan && frame.sp == frames[0].sp &+ 8
        if frame.method == .context || calledBadPointer {
            for (name, number) in dwarfNumbers {
                if let index = X86_64Registers.names.firstIndex(of: name) { registers[number] = gpr[index] }
            }
            if calledBadPointer { (registers[7], registers[16]) = (frame.sp, frame.pc) }
            // xmm0–15 (DWARF 17–32), their low 8 bytes: a double or float variable's home. The
            // FXSAVE image keeps them from byte 160, 16 bytes each.
            if fxsave.count >= 160 + 16 * 16 {
                for index in 0..<16 {
                    let start = 160 + 16 * index
                    registers[17 + index] = fxsave[start..<(start + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) }
                }
            }
        } else {
            // A caller's own registers: scanned or signal-interrupted frames keep only sp and pc.
            guard !frame.isSignalFrame else { return nil }
            registers[7] = frame.sp
            registers[16] = frame.pc
            for (name, value) in frame.calleeSaved?.named ?? [] { registers[dwarfNumbers[name]!] = value }
        }
        // The CFA is the caller's sp after the return (x86-64: the sp before the call).
        let next = position + 1
        let known = next < frames.count && !frames[next].isSignalTrampoline && frames[next].method != .scan
        let cfa = known ? frames[next].sp : nil
        // The caller, for a parameter the DWARF gives as "its value on entry": the caller's
        // call site says what it passed (gdb's entry values). A few callers deep at most.
        var caller: DWARFCallerFrame?
        if known, depth < maximumCallerDepth,
            let state = state(of: next, in: frames, gpr: gpr, memory: memory, depth: depth + 1)
        {
            caller = DWARFCallerFrame(pc: frames[next].pc, state: state)
        }
        return DWARFFrameState(registers: registers, cfa: cfa, memory: memory, caller: caller)
    }

    /// How many callers a frame's entry values may go through (the reader follows 4).
    static let maximumCallerDepth = 4

    /// An event's variable records of one frame's scope.
    static func records(_ scope: DWARFScopeVariables) -> [VariableRecord] {
        scope.variables.map { variable in
            var record = VariableRecord(
                name: variable.name, type: variable.typeName, value: variable.value,
                parameter: variable.isParameter ? true : nil)
            switch variable.location {
            case .register: record.location = variable.registerName
            case .memory(let address, _):
                record.location = "memory"
                record.address = HexAddress(address)
            case .other: break
            }
            return record
        }
    }

    /// The variable that held the bad value: the one the DWARF places in the bad register at
    /// the pc (optimized code), else the one whose stack slot the register was loaded from
    /// (unoptimized code: ValueOrigin). Filled into `fault.variable` with the access in the
    /// program's words (`o->sku`).
    /// `parameterAtEntry`: the parameter (its name and function) the DWARF places in a register
    /// at the crashing function's first instruction.
    static func nameBadValue(
        _ fault: inout FaultRecord, scopes: [DWARFScopeVariables], pc: UInt64, functionStart: UInt64?, gpr: [UInt64],
        memory: any MemoryReader, parameterAtEntry: (String) -> (name: String, function: String?)? = { _ in nil }
    ) {
        nameFromCode(
            &fault, scopes: scopes, pc: pc, functionStart: functionStart, gpr: gpr, memory: memory,
            parameterAtEntry: parameterAtEntry)
        nameByValue(&fault, scopes: scopes)
    }

    static func nameFromCode(
        _ fault: inout FaultRecord, scopes: [DWARFScopeVariables], pc: UInt64, functionStart: UInt64?, gpr: [UInt64],
        memory: any MemoryReader, parameterAtEntry: (String) -> (name: String, function: String?)?
    ) {
        guard let register = fault.variable?.register, let full = RegisterFile.full(register)?.register else { return }
        let displacement = displacement(of: fault.access)
        for scope in scopes {
            if let variable = scope.variables.first(where: { $0.registerName == full }) {
                fill(&fault, variable: variable, function: scope.function, path: nil, displacement: displacement)
                return
            }
        }
        guard let functionStart,
            let load = FaultExplanation.load(of: register, at: pc, functionStart: functionStart, gpr: gpr, memory: memory)
        else { return }
        // The register was loaded through a pointer variable (held in a register, or loaded
        // from its stack slot just before): it is that variable's field.
        func member(of variable: DWARFVariable, scope: DWARFScopeVariables) {
            let field = load.displacement >= 0 ? variable.memberPath(atOffset: UInt64(load.displacement)) : nil
            fill(
                &fault, variable: variable, function: scope.function,
                path: "\(variable.name)->\(field ?? "(+\(load.displacement))")", displacement: nil)
        }
        let base = RegisterFile.full(load.base)?.register
        for scope in scopes {
            if load.baseValue != nil, let variable = scope.variables.first(where: { $0.registerName == base }) {
                return member(of: variable, scope: scope)
            }
        }
        // A pointer variable whose value the base still held (one the DWARF gives as its value
        // on entry, or a copy), not NULL: that pointer's field.
        if let value = load.baseValue, value != 0, load.base != "rbp" && load.base != "rsp" {
            for scope in scopes {
                if let variable = scope.variables.first(where: {
                    leadingNumber($0.value) == value && ($0.typeName ?? "").contains("*")
                }) {
                    return member(of: variable, scope: scope)
                }
            }
        }
        // Loaded from a variable's own stack slot (unoptimized code): that variable.
        if load.base == "rbp" || load.base == "rsp", let value = load.baseValue {
            let slot = value &+ UInt64(bitPattern: load.displacement)
            if let (variable, scope) = variable(at: slot, in: scopes) {
                return fill(&fault, variable: variable, function: scope.function, path: nil, displacement: displacement)
            }
        }
        if let slot = load.baseSlot, let (variable, scope) = variable(at: slot, in: scopes) {
            return member(of: variable, scope: scope)
        }
        // The parameter passed in the register the base came from: where the DWARF puts it at
        // the function's first instruction.
        if let register = load.entryRegister, let atEntry = parameterAtEntry(register),
            let scope = scopes.first(where: { $0.function == atEntry.function }) ?? scopes.last,
            let variable = scope.variables.first(where: { $0.name == atEntry.name && $0.isParameter })
        {
            member(of: variable, scope: scope)
        }
    }

    /// The last resort: the one variable whose value is the bad register's (a parameter whose
    /// DWARF says "its value on entry", which the register still holds). NULL is a value too
    /// many variables have: only a pointer, and only when it is the one pointer that is NULL.
    static func nameByValue(_ fault: inout FaultRecord, scopes: [DWARFScopeVariables]) {
        guard fault.variable?.variable == nil, let value = fault.variable?.value?.value else { return }
        var found: [(DWARFVariable, DWARFScopeVariables)] = []
        for scope in scopes {
            for variable in scope.variables where leadingNumber(variable.value) == value {
                if value == 0 && !(variable.typeName ?? "").contains("*") { continue }
                found.append((variable, scope))
            }
        }
        guard let (variable, scope) = found.first, value != 0 || found.count == 1 else { return }
        fill(&fault, variable: variable, function: scope.function, path: nil, displacement: displacement(of: fault.access))
    }

    /// The number a printed value starts with (`0x5555… "text"`, `42`, `0x0`).
    static func leadingNumber(_ text: String) -> UInt64? {
        let head = text.prefix { !$0.isWhitespace }
        if head.hasPrefix("0x") { return UInt64(head.dropFirst(2), radix: 16) }
        if head.hasPrefix("-") { return Int64(head).map { UInt64(bitPattern: $0) } }
        return UInt64(head)
    }

    /// The variable whose home is the memory at `address`.
    static func variable(at address: UInt64, in scopes: [DWARFScopeVariables]) -> (DWARFVariable, DWARFScopeVariables)? {
        for scope in scopes {
            for variable in scope.variables {
                if case .memory(let home, _) = variable.location, home == address { return (variable, scope) }
            }
        }
        return nil
    }

    /// The displacement of the access's address expression (`[rax + 8]` → 8), when it has one
    /// and a base.
    static func displacement(of access: AccessRecord?) -> Int64? {
        guard let expression = access?.expression, access?.kind != .call, access?.kind != .jump,
            access?.kind != .execute
        else { return nil }
        let inner = expression.drop { $0 != "[" }.dropFirst().prefix { $0 != "]" }
        let parts = inner.split(separator: " ")
        guard parts.count == 3, let number = parts.last, let sign = parts.dropLast().last else {
            return parts.count == 1 ? 0 : nil
        }
        let digits = number.hasPrefix("0x") ? Int64(number.dropFirst(2), radix: 16) : Int64(number)
        guard let digits else { return nil }
        return sign == "-" ? -digits : sign == "+" ? digits : nil
    }

    static func fill(
        _ fault: inout FaultRecord, variable: DWARFVariable, function: String?, path: String?, displacement: Int64?
    ) {
        fault.variable?.variable = variable.name
        fault.variable?.function = function
        if let path {
            fault.variable?.expression = path
        } else if let displacement, displacement >= 0, let member = variable.memberPath(atOffset: UInt64(displacement)) {
            fault.variable?.expression = "\(variable.name)->\(member)"
        } else {
            fault.variable?.expression = variable.name
        }
    }
}
