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
        /// The crashed frame's scopes (innermost first) and its function's first instruction.
        var topScopes: [DWARFScopeVariables] = []
        var topFunctionStart: UInt64?

        init(memory: any MemoryReader) { self.memory = memory }

        /// The variables of unwound frame `position` into its records (one per scope, inlined
        /// ones first, as symbolication made them).
        func read(
            into records: inout [FrameRecord], position: Int, stack: [UnwoundFrame], gpr: [UInt64], isReturnAddress: Bool,
            symbolizer: Symbolizer
        ) {
            let frame = stack[position]
            guard !frame.isSignalTrampoline, frame.method != .scan,
                let state = FrameVariables.state(of: position, in: stack, gpr: gpr, memory: memory)
            else { return }
            let scopes = symbolizer.variables(pc: frame.pc, isReturnAddress: isReturnAddress, state: state)
            if position == 0 {
                topScopes = scopes
                if let offset = records.last?.functionOffset?.value, offset <= frame.pc { topFunctionStart = frame.pc - offset }
            }
            guard !scopes.isEmpty else { return }
            for (index, scope) in scopes.enumerated() {
                // One scope per record when they line up; else by the function's name.
                let target =
                    scopes.count == records.count ? index : records.firstIndex { $0.function == scope.function && $0.vars == nil }
                guard let target, records.indices.contains(target) else { continue }
                let values = FrameVariables.records(scope)
                records[target].vars = values.isEmpty ? nil : values
            }
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
        of position: Int, in frames: [UnwoundFrame], gpr: [UInt64], memory: any MemoryReader
    ) -> DWARFFrameState? {
        let frame = frames[position]
        var registers: [Int: UInt64] = [:]
        if frame.method == .context {
            for (name, number) in dwarfNumbers {
                if let index = X86_64Registers.names.firstIndex(of: name) { registers[number] = gpr[index] }
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
        let cfa = next < frames.count && !frames[next].isSignalTrampoline && frames[next].method != .scan ? frames[next].sp : nil
        return DWARFFrameState(registers: registers, cfa: cfa, memory: memory)
    }

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
    static func nameBadValue(
        _ fault: inout FaultRecord, scopes: [DWARFScopeVariables], pc: UInt64, functionStart: UInt64?, gpr: [UInt64],
        memory: any MemoryReader
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
            let origin = FaultExplanation.origin(of: register, at: pc, functionStart: functionStart, gpr: gpr, memory: memory)
        else { return }
        let slot: UInt64
        var field: Int64?
        switch origin {
        case .slot(let address): slot = address
        case .field(let address, let offset): (slot, field) = (address, offset)
        }
        for scope in scopes {
            guard
                let variable = scope.variables.first(where: {
                    if case .memory(let address, _) = $0.location { return address == slot }
                    return false
                })
            else { continue }
            if let field {
                let member = field >= 0 ? variable.memberPath(atOffset: UInt64(field)) : nil
                let path = "\(variable.name)->\(member ?? "(+\(field))")"
                fill(&fault, variable: variable, function: scope.function, path: path, displacement: nil)
            } else {
                fill(&fault, variable: variable, function: scope.function, path: nil, displacement: displacement)
            }
            return
        }
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
