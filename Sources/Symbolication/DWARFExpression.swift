// DWARFExpression: a bounded evaluator of DWARF location expressions (DWARF 5 section 2.5 and
// 2.6, with GCC's GNU operations), for the variables of a crashed frame (DWARFVariables).
//
// A stack machine over 64-bit values (the generic type of an x86_64 target). What it reads comes
// only from the frame state it is given: the registers the unwinder knows for the frame, the CFA,
// the load bias and the captured memory (`any MemoryReader`). What the state lacks makes the
// result `unavailable`, never a guess; what the machine does not do (TLS, DW_OP_call*, the
// object address) makes it `refused`. The expression is hostile: every operand is read through
// a bounds-checked cursor, branches must land inside the expression, and the operations executed,
// the stack depth and the pieces are capped (DWARFExpressionLimits), so a loop through DW_OP_bra
// ends. DW_OP_entry_value and DW_OP_GNU_parameter_ref read what the caller's call site passed
// (DWARFEntryValues, resolved beforehand from `state.caller`); without it they are optimized
// out. Typed operations (DW_OP_convert, DW_OP_regval_type, DW_OP_const_type …) give each stack
// entry its base type, as gdb's evaluator does: conversions between integers and floating-point
// values convert, and arithmetic on two floating-point values is floating-point arithmetic (GCC
// describes `double fill = slot * 0.25` as `breg4; convert int; convert double; const_type
// double 0.25; mul`). What mixes a floating-point value with another type is refused, never
// computed on a double's bits.
//
// Not thread-bound: a pure function of its inputs.

import BoundedBytes
import ObjectFile

/// What the evaluator may read of one frame: registers by DWARF number, the CFA, the load bias
/// and memory. Owned by the caller; the memory reader is read only during evaluation.
public struct DWARFFrameState {
    /// x86_64 DWARF register numbers (0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp,
    /// 8–15 r8–r15, 16 the return address / rip; 17–32 xmm0–xmm15, their low 8 bytes, where
    /// floating-point values live) → value, for the registers known in the frame: all general
    /// registers in frame 0; sp, pc and maybe callee-saved ones in outer frames.
    public var registers: [Int: UInt64]
    /// The canonical frame address (DW_OP_call_frame_cfa): on x86_64 the caller's sp after the
    /// return; nil when the unwinder does not know it.
    public var cfa: UInt64?
    /// What was added to the file's virtual addresses when it was loaded (DW_OP_addr).
    public var loadBias: UInt64
    /// The captured memory; a read it does not hold makes a value unavailable.
    public var memory: any MemoryReader
    /// The frame that called this one, when it is known: where its call site says what this
    /// function's parameters were on entry (DW_OP_entry_value). Nil: such values are optimized out.
    public var caller: DWARFCallerFrame?

    public init(
        registers: [Int: UInt64], cfa: UInt64? = nil, loadBias: UInt64 = 0, memory: any MemoryReader,
        caller: DWARFCallerFrame? = nil
    ) {
        self.registers = registers
        self.cfa = cfa
        self.loadBias = loadBias
        self.memory = memory
        self.caller = caller
    }

    /// The x86_64 name of DWARF register `number` (System V psABI, figure 3.36), nil past xmm15.
    public static func registerName(_ number: Int) -> String? {
        let names = [
            "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
            "rip",
        ]
        if number >= 0 && number < names.count { return names[number] }
        return number >= 17 && number <= 32 ? "xmm\(number - 17)" : nil
    }
}

/// Where a variable's value is, as its location expression says at one pc.
public enum DWARFLocation: Sendable, Equatable {
    /// In DWARF register n (DW_OP_reg*).
    case register(Int)
    /// In memory at this address.
    case memory(UInt64)
    /// Nowhere: the expression computed the value itself (DW_OP_stack_value).
    case value(UInt64)
    /// The value's bytes are in the expression (DW_OP_implicit_value).
    case implicit([UInt8])
    /// A pointer that was optimized away, to the value of the DIE at this .debug_info offset
    /// (DW_OP_implicit_pointer); gdb shows it as `<synthetic pointer>`.
    case implicitPointer(die: UInt64, offset: Int64)
    /// Assembled from pieces (DW_OP_piece, DW_OP_bit_piece), first piece at the lowest bits.
    case pieces([DWARFPiece])
    /// The compiler says the value is gone (an empty expression or piece, an entry value that
    /// cannot be found).
    case optimizedOut
    /// The expression needs something the state does not hold (a register, memory, the CFA).
    case unavailable(String)
    /// The expression is malformed or uses what this evaluator does not do.
    case refused(String)
}

/// One piece of a composite location.
public struct DWARFPiece: Sendable, Equatable {
    public var bitSize: UInt64
    /// DW_OP_bit_piece's offset into the piece's location (0 for DW_OP_piece).
    public var bitOffset: UInt64
    public var location: DWARFLocation

    public init(bitSize: UInt64, bitOffset: UInt64, location: DWARFLocation) {
        self.bitSize = bitSize
        self.bitOffset = bitOffset
        self.location = location
    }
}

/// The caps of one evaluation: a hostile expression stops at them.
public struct DWARFExpressionLimits: Sendable, Equatable {
    /// Operations executed (a DW_OP_bra loop counts each pass).
    public var operations = 10_000
    /// Values on the stack.
    public var stackDepth = 64
    /// Pieces of a composite location.
    public var pieces = 64

    public init() {}
}

/// The DWARF expression evaluator (see the file's comment).
public enum DWARFExpression {
    /// Evaluates `expression` for the frame `state`. `frameBase` is the enclosing subprogram's
    /// DW_AT_frame_base as already evaluated (for DW_OP_fbreg). Operations that need a unit
    /// (DW_OP_addrx, DW_OP_constx) are unavailable here; DWARFVariables passes them in.
    public static func evaluate(
        _ expression: [UInt8], state: DWARFFrameState, frameBase: DWARFLocation? = nil,
        limits: DWARFExpressionLimits = DWARFExpressionLimits()
    ) -> DWARFLocation {
        expression.withUnsafeBytes {
            evaluate(ByteView($0), context: Context(state: state, frameBase: frameBase, limits: limits))
        }
    }

    /// What an evaluation may ask of the unit its expression belongs to.
    struct Context {
        var state: DWARFFrameState
        var frameBase: DWARFLocation?
        var limits: DWARFExpressionLimits
        var addressSize = 8
        /// The .debug_info offset size of the unit (DW_OP_implicit_pointer's reference).
        var offsetSize = 4
        /// An entry of .debug_addr (DW_OP_addrx, DW_OP_constx), nil when there is none.
        var indexedAddress: (UInt64) -> UInt64? = { _ in nil }
        /// What the caller's call site passed (DW_OP_entry_value); nil when it is not known.
        var entryValues: DWARFEntryValues?
        /// The .debug_info offset of the unit (DW_OP_GNU_parameter_ref's offset is relative to it).
        var unitOffset: UInt64 = 0
        /// Whether the base type DIE at this unit-relative offset (a typed operation's type) is
        /// floating-point.
        var baseType: (UInt64) -> DWARFBaseType? = { _ in nil }
    }

    /// Why an evaluation stopped early.
    fileprivate enum Stop: Error {
        case unavailable(String)
        case refused(String)
        case optimizedOut
    }

    /// What the value left by the expression means (DWARF 5 section 2.6.1.1).
    private enum Kind {
        case memory, register(Int), stackValue, implicit([UInt8]), implicitPointer(UInt64, Int64), empty
    }

    static func evaluate(_ bytes: ByteView, context: Context) -> DWARFLocation {
        var machine = Machine(bytes: bytes, context: context)
        do {
            return try machine.run()
        } catch {
            switch error {
            case .unavailable(let reason): return .unavailable(reason)
            case .refused(let reason): return .refused(reason)
            case .optimizedOut: return .optimizedOut
            }
        }
    }

    private struct Machine {
        let bytes: ByteView
        let context: Context
        var stack: [UInt64] = []
        /// Each stack entry's base type (the generic type but where a typed operation said).
        var types: [DWARFBaseType] = []
        var pieces: [DWARFPiece] = []
        var kind = Kind.memory
        /// Whether anything was pushed or named since the last piece (an empty piece is optimized out).
        var described = false

        init(bytes: ByteView, context: Context) {
            self.bytes = bytes
            self.context = context
            stack.reserveCapacity(8)
        }

        mutating func push(_ value: UInt64, type: DWARFBaseType = .generic) throws(Stop) {
            guard stack.count < context.limits.stackDepth else {
                throw .refused("stack deeper than \(context.limits.stackDepth)")
            }
            stack.append(value)
            types.append(type)
            described = true
        }

        mutating func pop() throws(Stop) -> UInt64 { try popTyped().value }

        mutating func popTyped() throws(Stop) -> (value: UInt64, type: DWARFBaseType) {
            guard let value = stack.popLast(), let type = types.popLast() else { throw .refused("stack underflow") }
            return (value, type)
        }

        func peekTyped(_ depth: Int) throws(Stop) -> (value: UInt64, type: DWARFBaseType) {
            guard depth >= 0, depth < stack.count else { throw .refused("stack underflow") }
            return (stack[stack.count - 1 - depth], types[types.count - 1 - depth])
        }

        /// The base type a typed operation names (0: the generic type).
        func baseType(_ offset: UInt64) throws(Stop) -> DWARFBaseType {
            if offset == 0 { return .generic }
            guard let type = context.baseType(offset) else { throw .refused("no base type at 0x\(String(offset, radix: 16))") }
            return type
        }

        func peek(_ depth: Int) throws(Stop) -> UInt64 {
            guard depth >= 0, depth < stack.count else { throw .refused("stack underflow") }
            return stack[stack.count - 1 - depth]
        }

        func register(_ number: UInt64) throws(Stop) -> UInt64 {
            guard number <= 1024, let value = context.state.registers[Int(number)] else {
                let name = number <= 1024 ? DWARFFrameState.registerName(Int(number)) : nil
                throw .unavailable("register \(name ?? "#\(number)") is not known in this frame")
            }
            return value
        }

        func read(_ address: UInt64, size: Int) throws(Stop) -> UInt64 {
            guard size >= 1, size <= 8 else { throw .refused("dereference of \(size) bytes") }
            var value: UInt64 = 0
            let count = withUnsafeMutableBytes(of: &value) {
                context.state.memory.readUpTo(from: address, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<size]))
            }
            guard count == size else { throw .unavailable("memory at 0x\(String(address, radix: 16)) was not captured") }
            return UInt64(littleEndian: value)
        }

        /// The frame base as a value (DW_OP_fbreg): a register's contents, an address, a value.
        func frameBaseValue() throws(Stop) -> UInt64 {
            switch context.frameBase {
            case .memory(let address)?: return address
            case .value(let value)?: return value
            case .register(let number)?: return try register(UInt64(number))
            case .unavailable(let reason)?: throw .unavailable("frame base: " + reason)
            case .optimizedOut?: throw .optimizedOut
            case .refused(let reason)?: throw .refused("frame base: " + reason)
            default: throw .unavailable("no frame base")
            }
        }

        /// The location the state since the last piece describes, and the reset for the next.
        mutating func takeLocation() throws(Stop) -> DWARFLocation {
            defer {
                kind = .memory
                described = false
            }
            guard described else { return .optimizedOut }
            switch kind {
            case .register(let number): return .register(number)
            case .stackValue: return .value(try pop())
            case .implicit(let value): return .implicit(value)
            case .implicitPointer(let die, let offset): return .implicitPointer(die: die, offset: offset)
            case .empty: return .optimizedOut
            case .memory: return .memory(try pop())
            }
        }

        mutating func run() throws(Stop) -> DWARFLocation {
            var cursor = DWARFCursor(bytes)
            var executed = 0
            while cursor.offset < bytes.count {
                executed += 1
                guard executed <= context.limits.operations else {
                    throw .refused("more than \(context.limits.operations) operations")
                }
                guard let op = cursor.u8() else { throw .refused("truncated") }
                // After a register, an implicit value or a stack value only a piece may follow.
                if case .memory = kind {
                } else if op != DW_OP_piece && op != DW_OP_bit_piece {
                    throw .refused("operation 0x\(String(op, radix: 16)) after a location description")
                }
                switch op {
                case DW_OP_lit0...DW_OP_lit31: try push(UInt64(op - DW_OP_lit0))
                case DW_OP_addr:
                    guard let address = cursor.unsigned(size: context.addressSize) else { throw .refused("truncated") }
                    try push(address &+ context.state.loadBias)
                case DW_OP_addrx, DW_OP_GNU_addr_index, DW_OP_constx, DW_OP_GNU_const_index:
                    guard let index = cursor.uleb() else { throw .refused("truncated") }
                    guard let value = context.indexedAddress(index) else { throw .refused("no .debug_addr entry \(index)") }
                    let relocated = op == DW_OP_addrx || op == DW_OP_GNU_addr_index
                    try push(relocated ? value &+ context.state.loadBias : value)
                case DW_OP_const1u: try push(UInt64(try operand(cursor.u8())))
                case DW_OP_const1s: try push(UInt64(bitPattern: Int64(Int8(bitPattern: try operand(cursor.u8())))))
                case DW_OP_const2u: try push(UInt64(try operand(cursor.u16())))
                case DW_OP_const2s: try push(UInt64(bitPattern: Int64(Int16(bitPattern: try operand(cursor.u16())))))
                case DW_OP_const4u: try push(UInt64(try operand(cursor.u32())))
                case DW_OP_const4s: try push(UInt64(bitPattern: Int64(Int32(bitPattern: try operand(cursor.u32())))))
                case DW_OP_const8u, DW_OP_const8s: try push(try operand(cursor.u64()))
                case DW_OP_constu: try push(try operand(cursor.uleb()))
                case DW_OP_consts: try push(UInt64(bitPattern: try operand(cursor.sleb())))
                case DW_OP_dup:
                    let top = try peekTyped(0)
                    try push(top.value, type: top.type)
                case DW_OP_drop: _ = try pop()
                case DW_OP_over:
                    let second = try peekTyped(1)
                    try push(second.value, type: second.type)
                case DW_OP_pick:
                    let picked = try peekTyped(Int(try operand(cursor.u8())))
                    try push(picked.value, type: picked.type)
                case DW_OP_swap:
                    let a = try popTyped(), b = try popTyped()
                    try push(a.value, type: a.type)
                    try push(b.value, type: b.type)
                case DW_OP_rot:
                    let a = try popTyped(), b = try popTyped(), c = try popTyped()
                    try push(a.value, type: a.type)
                    try push(c.value, type: c.type)
                    try push(b.value, type: b.type)
                case DW_OP_deref: try push(try read(try pop(), size: context.addressSize))
                case DW_OP_deref_size:
                    let size = Int(try operand(cursor.u8()))
                    try push(try read(try pop(), size: size))
                case DW_OP_deref_type, DW_OP_GNU_deref_type:
                    let size = Int(try operand(cursor.u8()))
                    let type = try baseType(try operand(cursor.uleb()))
                    try push(try read(try pop(), size: size), type: type)
                case DW_OP_abs, DW_OP_neg:
                    let (raw, type) = try popTyped()
                    if type.isFloat {
                        // The sign bit: cleared for abs, flipped for neg.
                        let sign: UInt64 = type.size == 4 ? 1 << 31 : 1 << 63
                        try push(op == DW_OP_abs ? raw & ~sign : raw ^ sign, type: type)
                    } else if op == DW_OP_neg {
                        try push(0 &- raw, type: type)
                    } else {
                        let value = Int64(bitPattern: raw)
                        try push(value < 0 ? UInt64(bitPattern: 0 &- value) : UInt64(bitPattern: value), type: type)
                    }
                case DW_OP_not:
                    let (value, type) = try popTyped()
                    guard !type.isFloat else { throw .refused("DW_OP_not of a floating-point value") }
                    try push(~value, type: type)
                case DW_OP_plus_uconst:
                    let (value, type) = try popTyped()
                    guard !type.isFloat else { throw .refused("DW_OP_plus_uconst of a floating-point value") }
                    try push(value &+ (try operand(cursor.uleb())), type: type)
                case DW_OP_and, DW_OP_div, DW_OP_minus, DW_OP_mod, DW_OP_mul, DW_OP_or, DW_OP_plus, DW_OP_shl, DW_OP_shr,
                    DW_OP_shra, DW_OP_xor, DW_OP_eq, DW_OP_ge, DW_OP_gt, DW_OP_le, DW_OP_lt, DW_OP_ne:
                    let b = try popTyped(), a = try popTyped()
                    if a.type.isFloat || b.type.isFloat {
                        guard a.type == b.type else {
                            throw .refused("arithmetic between a floating-point value and another type")
                        }
                        let result = try Self.floating(op, a.value, b.value, size: a.type.size)
                        try push(result.value, type: result.comparison ? .generic : a.type)
                    } else {
                        try push(try Self.binary(op, a.value, b.value), type: a.type.isGeneric ? b.type : a.type)
                    }
                case DW_OP_skip, DW_OP_bra:
                    let delta = Int(Int16(bitPattern: try operand(cursor.u16())))
                    let taken = op == DW_OP_skip ? true : (try pop()) != 0
                    if taken {
                        let target = cursor.offset + delta
                        guard target >= 0, target <= bytes.count else { throw .refused("branch out of the expression") }
                        cursor.offset = target
                    }
                case DW_OP_reg0...DW_OP_reg31:
                    kind = .register(Int(op - DW_OP_reg0))
                    described = true
                case DW_OP_regx:
                    let number = try operand(cursor.uleb())
                    guard number <= 1024 else { throw .refused("register \(number)") }
                    kind = .register(Int(number))
                    described = true
                case DW_OP_breg0...DW_OP_breg31:
                    let offset = try operand(cursor.sleb())
                    try push((try register(UInt64(op - DW_OP_breg0))) &+ UInt64(bitPattern: offset))
                case DW_OP_bregx:
                    let number = try operand(cursor.uleb())
                    let offset = try operand(cursor.sleb())
                    try push((try register(number)) &+ UInt64(bitPattern: offset))
                case DW_OP_regval_type, DW_OP_GNU_regval_type:
                    let number = try operand(cursor.uleb())
                    let type = try baseType(try operand(cursor.uleb()))
                    try push(type.truncate(try register(number)), type: type)
                case DW_OP_fbreg:
                    let offset = try operand(cursor.sleb())
                    try push((try frameBaseValue()) &+ UInt64(bitPattern: offset))
                case DW_OP_call_frame_cfa:
                    guard let cfa = context.state.cfa else { throw .unavailable("the frame's CFA is not known") }
                    try push(cfa)
                case DW_OP_piece, DW_OP_bit_piece:
                    let size = try operand(cursor.uleb())
                    let bits = op == DW_OP_piece ? size.checkedMultiplying(8) : size
                    let bitOffset = op == DW_OP_bit_piece ? try operand(cursor.uleb()) : 0
                    guard let bits, bits > 0, bits <= 1 << 20 else { throw .refused("piece of \(size)") }
                    guard pieces.count < context.limits.pieces else {
                        throw .refused("more than \(context.limits.pieces) pieces")
                    }
                    pieces.append(DWARFPiece(bitSize: bits, bitOffset: bitOffset, location: try takeLocation()))
                case DW_OP_stack_value:
                    guard !stack.isEmpty else { throw .refused("stack value of an empty stack") }
                    kind = .stackValue
                case DW_OP_implicit_value:
                    let length = try operand(cursor.uleb())
                    guard length <= 1 << 16, let start = Optional(cursor.offset), cursor.skip(length),
                        let value = bytes.array(UInt64(start), length)
                    else { throw .refused("truncated") }
                    kind = .implicit(value)
                    described = true
                case DW_OP_implicit_pointer, DW_OP_GNU_implicit_pointer:
                    let die = try operand(cursor.unsigned(size: context.offsetSize))
                    let offset = try operand(cursor.sleb())
                    kind = .implicitPointer(die, offset)
                    described = true
                case DW_OP_entry_value, DW_OP_GNU_entry_value:
                    // The value a register had on entry, which only the caller's call-site
                    // parameters tell: gdb prints it as optimized out when they do not.
                    let length = try operand(cursor.uleb())
                    guard length <= UInt64(bytes.count - cursor.offset), let block = bytes.slice(UInt64(cursor.offset), length),
                        cursor.skip(length)
                    else { throw .refused("truncated") }
                    guard let named = Self.entryRegister(block, addressSize: context.addressSize),
                        let value = context.entryValues?.value(of: named.register, dereferencing: named.dereference)
                    else { throw .optimizedOut }
                    let type = try named.type.map { offset throws(Stop) in try baseType(offset) } ?? .generic
                    try push(type.truncate(value), type: type)
                case DW_OP_GNU_parameter_ref:
                    let offset = try operand(cursor.u32())
                    guard let value = context.entryValues?.parameters[context.unitOffset &+ UInt64(offset)] else {
                        throw .optimizedOut
                    }
                    try push(value)
                case DW_OP_const_type, DW_OP_GNU_const_type:
                    let type = try baseType(try operand(cursor.uleb()))
                    let size = Int(try operand(cursor.u8()))
                    guard size >= 1, size <= 8, let value = cursor.unsigned(size: size) else {
                        throw .refused("typed constant of \(size) bytes")
                    }
                    try push(value, type: type)
                case DW_OP_convert, DW_OP_GNU_convert:
                    let type = try baseType(try operand(cursor.uleb()))
                    let (value, from) = try popTyped()
                    try push(try Self.convert(value, from: from, to: type), type: type)
                case DW_OP_reinterpret, DW_OP_GNU_reinterpret:
                    let type = try baseType(try operand(cursor.uleb()))
                    let (value, _) = try popTyped()
                    try push(value, type: type)
                case DW_OP_nop, DW_OP_GNU_uninit: break
                case DW_OP_form_tls_address, DW_OP_GNU_push_tls_address: throw .refused("thread-local storage")
                case DW_OP_push_object_address: throw .refused("DW_OP_push_object_address")
                case DW_OP_call2, DW_OP_call4, DW_OP_call_ref: throw .refused("DW_OP_call*")
                case DW_OP_xderef, DW_OP_xderef_size, DW_OP_xderef_type: throw .refused("address spaces")
                default: throw .refused("unknown operation 0x\(String(op, radix: 16))")
                }
            }
            // What follows the last piece describes nothing (the expression should end with the
            // piece): ignored, as gdb does.
            if !pieces.isEmpty { return .pieces(pieces) }
            if case .stackValue = kind { return .value(try pop()) }
            if !described { return .optimizedOut }
            return try takeLocation()
        }

        /// The register a DW_OP_entry_value block names, as gdb reads it: DW_OP_regN or
        /// DW_OP_regx or DW_OP_regval_type (the register's value on entry, with its type's DIE
        /// for the last); DW_OP_bregN 0 or DW_OP_bregx N 0 (the
        /// same); either breg followed by DW_OP_deref or DW_OP_deref_size (the bytes it pointed
        /// at on entry, `dereference` of them). Nil for any other block.
        fileprivate static func entryRegister(
            _ block: ByteView, addressSize: Int
        ) -> (register: Int, dereference: Int?, type: UInt64?)? {
            var cursor = DWARFCursor(block)
            guard let op = cursor.u8() else { return nil }
            let register: UInt64
            var isBase = false
            var typeOffset: UInt64?
            switch op {
            case DW_OP_reg0...DW_OP_reg31: register = UInt64(op - DW_OP_reg0)
            case DW_OP_regx:
                guard let number = cursor.uleb() else { return nil }
                register = number
            case DW_OP_regval_type, DW_OP_GNU_regval_type:
                guard let number = cursor.uleb(), let type = cursor.uleb() else { return nil }
                register = number
                typeOffset = type
            case DW_OP_breg0...DW_OP_breg31, DW_OP_bregx:
                var number = UInt64(op &- DW_OP_breg0)
                if op == DW_OP_bregx {
                    guard let value = cursor.uleb() else { return nil }
                    number = value
                }
                guard cursor.sleb() == 0 else { return nil }
                register = number
                isBase = true
            default: return nil
            }
            guard register <= 1024 else { return nil }
            if cursor.offset == block.count { return (Int(register), nil, typeOffset) }
            guard isBase, let next = cursor.u8() else { return nil }
            var size = addressSize
            if next == DW_OP_deref_size {
                guard let value = cursor.u8(), value >= 1, value <= 8 else { return nil }
                size = Int(value)
            } else if next != DW_OP_deref {
                return nil
            }
            return cursor.offset == block.count ? (Int(register), size, nil) : nil
        }

        private func operand<T>(_ value: T?) throws(Stop) -> T {
            guard let value else { throw .refused("truncated") }
            return value
        }

        /// A value converted between base types (DW_OP_convert): an integer's value as a
        /// floating-point one's, truncated towards zero the other way, widened or narrowed.
        private static func convert(_ value: UInt64, from: DWARFBaseType, to: DWARFBaseType) throws(Stop) -> UInt64 {
            switch (from.isFloat, to.isFloat) {
            case (false, false):
                let narrowed = from.truncate(value)
                guard from.isSigned, from.size < 8 else { return to.truncate(narrowed) }
                let shift = UInt64(64 - 8 * from.size)
                return to.truncate(UInt64(bitPattern: Int64(bitPattern: narrowed << shift) >> shift))
            case (false, true):
                let number: Double
                if from.isSigned {
                    let shift = UInt64(64 - 8 * min(from.size, 8))
                    number = Double(Int64(bitPattern: from.truncate(value) << shift) >> shift)
                } else {
                    number = Double(from.truncate(value))
                }
                return try DWARFBaseType.bits(of: number, size: to.size)
            case (true, false):
                let number = try DWARFBaseType.number(of: value, size: from.size)
                guard number.isFinite, number > -9.3e18, number < 1.8e19 else { throw .refused("conversion out of range") }
                return to.truncate(number < 0 ? UInt64(bitPattern: Int64(number)) : UInt64(number))
            case (true, true):
                return try DWARFBaseType.bits(of: try DWARFBaseType.number(of: value, size: from.size), size: to.size)
            }
        }

        /// Floating-point arithmetic on two values of one base type; comparisons give 0 or 1 of
        /// the generic type.
        private static func floating(
            _ op: UInt8, _ a: UInt64, _ b: UInt64, size: Int
        ) throws(Stop) -> (value: UInt64, comparison: Bool) {
            let x = try DWARFBaseType.number(of: a, size: size), y = try DWARFBaseType.number(of: b, size: size)
            let result: Double
            switch op {
            case DW_OP_plus: result = x + y
            case DW_OP_minus: result = x - y
            case DW_OP_mul: result = x * y
            case DW_OP_div: result = x / y
            case DW_OP_eq: return (x == y ? 1 : 0, true)
            case DW_OP_ne: return (x != y ? 1 : 0, true)
            case DW_OP_lt: return (x < y ? 1 : 0, true)
            case DW_OP_le: return (x <= y ? 1 : 0, true)
            case DW_OP_gt: return (x > y ? 1 : 0, true)
            case DW_OP_ge: return (x >= y ? 1 : 0, true)
            default: throw .refused("operation 0x\(String(op, radix: 16)) on floating-point values")
            }
            return (try DWARFBaseType.bits(of: result, size: size), false)
        }

        private static func binary(_ op: UInt8, _ a: UInt64, _ b: UInt64) throws(Stop) -> UInt64 {
            let sa = Int64(bitPattern: a), sb = Int64(bitPattern: b)
            switch op {
            case DW_OP_and: return a & b
            case DW_OP_or: return a | b
            case DW_OP_xor: return a ^ b
            case DW_OP_plus: return a &+ b
            case DW_OP_minus: return a &- b
            case DW_OP_mul: return a &* b
            case DW_OP_div:
                guard sb != 0 else { throw .refused("division by zero") }
                return UInt64(bitPattern: sa.dividedReportingOverflow(by: sb).partialValue)
            case DW_OP_mod:
                guard b != 0 else { throw .refused("division by zero") }
                return a % b
            case DW_OP_shl: return b >= 64 ? 0 : a << b
            case DW_OP_shr: return b >= 64 ? 0 : a >> b
            case DW_OP_shra: return UInt64(bitPattern: b >= 64 ? (sa < 0 ? -1 : 0) : sa >> b)
            case DW_OP_eq: return a == b ? 1 : 0
            case DW_OP_ne: return a != b ? 1 : 0
            case DW_OP_ge: return sa >= sb ? 1 : 0
            case DW_OP_gt: return sa > sb ? 1 : 0
            case DW_OP_le: return sa <= sb ? 1 : 0
            default: return sa < sb ? 1 : 0
            }
        }
    }
}

// DWARF 5 section 7.7.1, table 7.9 (names verbatim), and GCC's GNU extensions.
let DW_OP_addr: UInt8 = 0x03
let DW_OP_deref: UInt8 = 0x06
let DW_OP_const1u: UInt8 = 0x08
let DW_OP_const1s: UInt8 = 0x09
let DW_OP_const2u: UInt8 = 0x0a
let DW_OP_const2s: UInt8 = 0x0b
let DW_OP_const4u: UInt8 = 0x0c
let DW_OP_const4s: UInt8 = 0x0d
let DW_OP_const8u: UInt8 = 0x0e
let DW_OP_const8s: UInt8 = 0x0f
let DW_OP_constu: UInt8 = 0x10
let DW_OP_consts: UInt8 = 0x11
let DW_OP_dup: UInt8 = 0x12
let DW_OP_drop: UInt8 = 0x13
let DW_OP_over: UInt8 = 0x14
let DW_OP_pick: UInt8 = 0x15
let DW_OP_swap: UInt8 = 0x16
let DW_OP_rot: UInt8 = 0x17
let DW_OP_xderef: UInt8 = 0x18
let DW_OP_abs: UInt8 = 0x19
let DW_OP_and: UInt8 = 0x1a
let DW_OP_div: UInt8 = 0x1b
let DW_OP_minus: UInt8 = 0x1c
let DW_OP_mod: UInt8 = 0x1d
let DW_OP_mul: UInt8 = 0x1e
let DW_OP_neg: UInt8 = 0x1f
let DW_OP_not: UInt8 = 0x20
let DW_OP_or: UInt8 = 0x21
let DW_OP_plus: UInt8 = 0x22
let DW_OP_plus_uconst: UInt8 = 0x23
let DW_OP_shl: UInt8 = 0x24
let DW_OP_shr: UInt8 = 0x25
let DW_OP_shra: UInt8 = 0x26
let DW_OP_xor: UInt8 = 0x27
let DW_OP_bra: UInt8 = 0x28
let DW_OP_eq: UInt8 = 0x29
let DW_OP_ge: UInt8 = 0x2a
let DW_OP_gt: UInt8 = 0x2b
let DW_OP_le: UInt8 = 0x2c
let DW_OP_lt: UInt8 = 0x2d
let DW_OP_ne: UInt8 = 0x2e
let DW_OP_skip: UInt8 = 0x2f
let DW_OP_lit0: UInt8 = 0x30
let DW_OP_lit31: UInt8 = 0x4f
let DW_OP_reg0: UInt8 = 0x50
let DW_OP_reg31: UInt8 = 0x6f
let DW_OP_breg0: UInt8 = 0x70
let DW_OP_breg31: UInt8 = 0x8f
let DW_OP_regx: UInt8 = 0x90
let DW_OP_fbreg: UInt8 = 0x91
let DW_OP_bregx: UInt8 = 0x92
let DW_OP_piece: UInt8 = 0x93
let DW_OP_deref_size: UInt8 = 0x94
let DW_OP_xderef_size: UInt8 = 0x95
let DW_OP_nop: UInt8 = 0x96
let DW_OP_push_object_address: UInt8 = 0x97
let DW_OP_call2: UInt8 = 0x98
let DW_OP_call4: UInt8 = 0x99
let DW_OP_call_ref: UInt8 = 0x9a
let DW_OP_form_tls_address: UInt8 = 0x9b
let DW_OP_call_frame_cfa: UInt8 = 0x9c
let DW_OP_bit_piece: UInt8 = 0x9d
let DW_OP_implicit_value: UInt8 = 0x9e
let DW_OP_stack_value: UInt8 = 0x9f
let DW_OP_implicit_pointer: UInt8 = 0xa0
let DW_OP_addrx: UInt8 = 0xa1
let DW_OP_constx: UInt8 = 0xa2
let DW_OP_entry_value: UInt8 = 0xa3
let DW_OP_const_type: UInt8 = 0xa4
let DW_OP_regval_type: UInt8 = 0xa5
let DW_OP_deref_type: UInt8 = 0xa6
let DW_OP_xderef_type: UInt8 = 0xa7
let DW_OP_convert: UInt8 = 0xa8
let DW_OP_reinterpret: UInt8 = 0xa9
let DW_OP_GNU_push_tls_address: UInt8 = 0xe0
let DW_OP_GNU_uninit: UInt8 = 0xf0
let DW_OP_GNU_implicit_pointer: UInt8 = 0xf2
let DW_OP_GNU_entry_value: UInt8 = 0xf3
let DW_OP_GNU_const_type: UInt8 = 0xf4
let DW_OP_GNU_regval_type: UInt8 = 0xf5
let DW_OP_GNU_deref_type: UInt8 = 0xf6
let DW_OP_GNU_convert: UInt8 = 0xf7
let DW_OP_GNU_reinterpret: UInt8 = 0xf9
let DW_OP_GNU_parameter_ref: UInt8 = 0xfa
let DW_OP_GNU_addr_index: UInt8 = 0xfb
let DW_OP_GNU_const_index: UInt8 = 0xfc

/// A typed stack entry's base type (DW_TAG_base_type: its encoding and size), or the generic
/// type: an address-sized integer of unspecified sign.
struct DWARFBaseType: Equatable, Sendable {
    var isFloat: Bool
    var isSigned: Bool
    var size: Int
    var isGeneric: Bool

    static let generic = DWARFBaseType(isFloat: false, isSigned: false, size: 8, isGeneric: true)

    init(isFloat: Bool, isSigned: Bool, size: Int, isGeneric: Bool = false) {
        self.isFloat = isFloat
        self.isSigned = isSigned
        self.size = min(max(size, 1), 8)
        self.isGeneric = isGeneric
    }

    /// The low `size` bytes of a value.
    func truncate(_ value: UInt64) -> UInt64 { size >= 8 ? value : value & ((1 << (8 * UInt64(size))) - 1) }

    /// A float's or double's bits as a number; other sizes are refused (x87's 10 bytes, half).
    fileprivate static func number(of bits: UInt64, size: Int) throws(DWARFExpression.Stop) -> Double {
        switch size {
        case 4: return Double(Float(bitPattern: UInt32(truncatingIfNeeded: bits)))
        case 8: return Double(bitPattern: bits)
        default: throw .refused("a floating-point value of \(size) bytes")
        }
    }

    fileprivate static func bits(of number: Double, size: Int) throws(DWARFExpression.Stop) -> UInt64 {
        switch size {
        case 4: return UInt64(Float(number).bitPattern)
        case 8: return number.bitPattern
        default: throw .refused("a floating-point value of \(size) bytes")
        }
    }
}
