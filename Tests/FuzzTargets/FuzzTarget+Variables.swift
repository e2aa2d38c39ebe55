// The `dwarf-expr` and `dwarf-types` targets: a frame's variables (DWARFVariables, issue 49).
//
// `dwarf-expr` runs DWARFExpression over arbitrary bytes with an arbitrary frame state: input
// bytes 0–1 say which of the general registers (DWARF 0–15) are known, byte 2 whether the CFA is
// and what the frame base is, the next 64 bytes are the only captured memory (at
// `expressionMemory`, where every known register points), the rest is the expression. Each input
// runs with the default limits and with small ones, so the caps are reached.
//
// `dwarf-types` takes an ELF file (the `dwarf` target's seeds are its seeds too), and at
// addresses across its code asks DWARFInfo.variables(at:) for every frame's variables, with all
// registers known and pointing into the input's own bytes (captured memory at `typesMemory`),
// and small limits: the scope walk, location lists, the type walker and the value formatter all
// run over whatever .debug_info, .debug_loclists and .debug_loc say, hostile type graphs too.

import BoundedBytes
import ObjectFile
import Symbolication

extension FuzzTarget {
    /// Where the `dwarf-expr` input's memory lies (and the registers it knows point).
    public static let expressionMemory: UInt64 = 0x1000
    /// Where the `dwarf-types` input's bytes lie as captured memory.
    public static let typesMemory: UInt64 = 0x10_0000

    static func dwarfExpression(_ input: UnsafeRawBufferPointer) {
        guard input.count >= 3 else { return }
        let mask = UInt16(input[0]) | UInt16(input[1]) << 8
        let flags = input[2]
        let memoryBytes = Array(input.dropFirst(3).prefix(64))
        let expression = Array(input.dropFirst(3 + memoryBytes.count))
        var registers: [Int: UInt64] = [:]
        for number in 0..<16 where mask & (1 << number) != 0 {
            registers[number] = expressionMemory &+ UInt64(number * 4)
        }
        let memory = RegionMemory(regions: [MemoryRegion(start: expressionMemory, bytes: memoryBytes)])
        let state = DWARFFrameState(
            registers: registers, cfa: flags & 1 != 0 ? expressionMemory + 32 : nil, loadBias: UInt64(flags >> 4) << 12,
            memory: memory)
        let frameBase: DWARFLocation?
        switch (flags >> 1) & 3 {
        case 0: frameBase = nil
        case 1: frameBase = .memory(expressionMemory + 16)
        case 2: frameBase = .register(Int(flags >> 4))
        default: frameBase = .value(expressionMemory)
        }
        _ = DWARFExpression.evaluate(expression, state: state, frameBase: frameBase)
        var small = DWARFExpressionLimits()
        small.operations = 64
        small.stackDepth = 4
        small.pieces = 2
        let result = DWARFExpression.evaluate(expression, state: state, frameBase: frameBase, limits: small)
        if case .pieces(let pieces) = result { precondition(pieces.count <= small.pieces, "more pieces than allowed") }
    }

    static func dwarfTypes(_ input: UnsafeRawBufferPointer) {
        guard let elf = elfFile(Array(input), name: "fuzz.dwarf-types"), let info = DWARFInfo(elf: elf) else { return }
        let memory = RegionMemory(regions: [MemoryRegion(start: typesMemory, bytes: Array(input.prefix(1 << 16)))])
        var registers: [Int: UInt64] = [:]
        for number in 0...32 { registers[number] = typesMemory &+ UInt64(number * 24) }
        let state = DWARFFrameState(registers: registers, cfa: typesMemory + 512, loadBias: 0, memory: memory)
        var limits = DWARFVariableLimits()
        limits.depth = 4
        limits.bytesPerVariable = 256
        limits.bytesPerFrame = 2048
        limits.elements = 32
        limits.variables = 32
        limits.dies = 4096
        limits.listEntries = 64
        limits.typeChain = 16
        for address in probeAddresses(elf, count: 16) {
            for isReturnAddress in [false, true] {
                let scopes = info.variables(at: address, isReturnAddress: isReturnAddress, state: state, limits: limits)
                for variable in scopes.flatMap(\.variables) {
                    precondition(variable.value.utf8.count <= limits.bytesPerVariable + 8, "value past its limit")
                    for offset in stride(from: UInt64(0), through: 64, by: 8) { _ = variable.memberPath(atOffset: offset) }
                }
            }
        }
    }
}
