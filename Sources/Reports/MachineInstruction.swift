// MachineInstruction: one x86-64 instruction decoded by capstone (Debian's libcapstone), with
// what the fault explanation needs of it: its text, its memory operands (base, index, scale,
// displacement, size, read or write), its register operands, and what kind of instruction it is
// (a call, a jump, a return, a trap, a division, a push).
//
// capstone over Zydis: one API decodes x86 now and arm64 later (Zydis is x86 only), and its
// detail mode gives each operand's access, which is what says "read" or "write". The bytes are
// the crashed program's (hostile): capstone is given at most 15 bytes (x86's longest
// instruction) and asked for one instruction; bytes that are not one give nil.

import CCapstone
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

/// capstone's functions, looked up in libcapstone.so.4 (Debian's libcapstone4) at the first
/// decode rather than linked: the library's relocated tables cost every idle watcher 3 MB of
/// resident memory at startup, for the few instructions a report decodes. Nil when the library
/// is not installed: the report then says the instruction was not decoded.
struct Capstone: @unchecked Sendable {
    let open: @convention(c) (cs_arch, cs_mode, UnsafeMutablePointer<csh>?) -> cs_err
    let close: @convention(c) (UnsafeMutablePointer<csh>?) -> cs_err
    let option: @convention(c) (csh, cs_opt_type, Int) -> cs_err
    let disasm:
        @convention(c) (
            csh, UnsafePointer<UInt8>?, Int, UInt64, Int, UnsafeMutablePointer<UnsafeMutablePointer<cs_insn>?>?
        ) -> Int
    let free: @convention(c) (UnsafeMutablePointer<cs_insn>?, Int) -> Void
    let registerName: @convention(c) (csh, UInt32) -> UnsafePointer<CChar>?
    let inGroup: @convention(c) (csh, UnsafePointer<cs_insn>?, UInt32) -> Bool
    let registersAccessed:
        @convention(c) (
            csh, UnsafePointer<cs_insn>?, UnsafeMutablePointer<UInt16>?, UnsafeMutablePointer<UInt8>?,
            UnsafeMutablePointer<UInt16>?, UnsafeMutablePointer<UInt8>?
        ) -> cs_err

    static let library = "libcapstone.so.4"
    static let shared: Capstone? = {
        guard let handle = dlopen(library, RTLD_NOW | RTLD_LOCAL) else { return nil }
        func symbol<T>(_ name: String, _: T.Type) -> T? {
            dlsym(handle, name).map { unsafeBitCast($0, to: T.self) }
        }
        guard let open = symbol("cs_open", (@convention(c) (cs_arch, cs_mode, UnsafeMutablePointer<csh>?) -> cs_err).self),
            let close = symbol("cs_close", (@convention(c) (UnsafeMutablePointer<csh>?) -> cs_err).self),
            let option = symbol("cs_option", (@convention(c) (csh, cs_opt_type, Int) -> cs_err).self),
            let disasm = symbol(
                "cs_disasm",
                (@convention(c) (
                    csh, UnsafePointer<UInt8>?, Int, UInt64, Int, UnsafeMutablePointer<UnsafeMutablePointer<cs_insn>?>?
                ) -> Int).self),
            let free = symbol("cs_free", (@convention(c) (UnsafeMutablePointer<cs_insn>?, Int) -> Void).self),
            let registerName = symbol("cs_reg_name", (@convention(c) (csh, UInt32) -> UnsafePointer<CChar>?).self),
            let inGroup = symbol("cs_insn_group", (@convention(c) (csh, UnsafePointer<cs_insn>?, UInt32) -> Bool).self),
            let registersAccessed = symbol(
                "cs_regs_access",
                (@convention(c) (
                    csh, UnsafePointer<cs_insn>?, UnsafeMutablePointer<UInt16>?, UnsafeMutablePointer<UInt8>?,
                    UnsafeMutablePointer<UInt16>?, UnsafeMutablePointer<UInt8>?
                ) -> cs_err).self)
        else { return nil }
        return Capstone(
            open: open, close: close, option: option, disasm: disasm, free: free, registerName: registerName,
            inGroup: inGroup, registersAccessed: registersAccessed)
    }()
}

public struct MachineInstruction: Sendable, Equatable {
    /// A memory operand: `size ptr [base + index*scale + displacement]`.
    public struct MemoryOperand: Sendable, Equatable {
        public var segment: String?
        public var base: String?
        public var index: String?
        public var scale: Int
        public var displacement: Int64
        public var size: Int
        public var reads: Bool
        public var writes: Bool

        /// The address as Intel syntax writes it: `[rbx + 8]`, `[rax + rcx*4 - 0x10]`.
        public var expression: String {
            var parts: [String] = []
            if let base { parts.append(base) }
            if let index { parts.append(scale == 1 ? index : "\(index)*\(scale)") }
            var text = parts.joined(separator: " + ")
            if displacement != 0 || text.isEmpty {
                let magnitude = displacement.magnitude
                let number = magnitude < 10 ? String(magnitude) : "0x" + String(magnitude, radix: 16)
                text = text.isEmpty ? (displacement < 0 ? "-" : "") + number : text + (displacement < 0 ? " - " : " + ") + number
            }
            return (segment.map { "\($0):" } ?? "") + "[\(text)]"
        }
    }

    public enum Kind: Sendable, Equatable {
        case other, call, jump, conditionalJump, `return`, trap, divide, push, pop
    }

    public var address: UInt64
    public var bytes: [UInt8]
    public var mnemonic: String
    public var operandText: String
    public var kind: Kind
    public var memoryOperands: [MemoryOperand]
    /// Registers named as operands (not in an address), destination first.
    public var registerOperands: [String]
    /// Every register the instruction writes, named or implicit (`div` writes rax and rdx).
    public var writtenRegisters: [String]
    /// An instruction that needs its memory operand aligned to its size (movaps, movdqa, …).
    public var needsAlignment: Bool

    /// `mov rax, qword ptr [rbx + 8]`, as capstone prints it.
    public var text: String { operandText.isEmpty ? mnemonic : mnemonic + " " + operandText }
    public var length: Int { bytes.count }

    /// The longest x86 instruction.
    public static let maximumLength = 15

    /// The one instruction at the start of `bytes`, at `address`; nil when they are not one.
    public static func decode(_ bytes: [UInt8], at address: UInt64) -> MachineInstruction? {
        let code = Array(bytes.prefix(maximumLength))
        guard !code.isEmpty, let capstone = Capstone.shared else { return nil }
        var handle: csh = 0
        guard capstone.open(CS_ARCH_X86, CS_MODE_64, &handle) == CS_ERR_OK else { return nil }
        defer { _ = capstone.close(&handle) }
        _ = capstone.option(handle, CS_OPT_DETAIL, Int(CS_OPT_ON.rawValue))
        var decoded: UnsafeMutablePointer<cs_insn>?
        let count = code.withUnsafeBufferPointer { capstone.disasm(handle, $0.baseAddress, $0.count, address, 1, &decoded) }
        guard count == 1, let insn = decoded else { return nil }
        defer { capstone.free(insn, count) }
        return MachineInstruction(capstone: capstone, handle: handle, insn: insn)
    }

    init?(capstone: Capstone, handle: csh, insn: UnsafeMutablePointer<cs_insn>) {
        let instruction = insn.pointee
        address = instruction.address
        bytes = withUnsafeBytes(of: instruction.bytes) { Array($0.prefix(Int(instruction.size))) }
        mnemonic = withUnsafeBytes(of: instruction.mnemonic) { Self.string($0) }
        operandText = withUnsafeBytes(of: instruction.op_str) { Self.string($0) }
        guard let detail = instruction.detail?.pointee else { return nil }
        func name(_ register: x86_reg) -> String? {
            guard register != X86_REG_INVALID, let text = capstone.registerName(handle, register.rawValue) else { return nil }
            return String(cString: text)
        }
        let x86 = detail.x86
        var memory: [MemoryOperand] = []
        var registers: [String] = []
        withUnsafeBytes(of: x86.operands) { raw in
            let operands = raw.bindMemory(to: cs_x86_op.self)
            for operand in operands.prefix(Int(x86.op_count)) {
                switch operand.type {
                case X86_OP_MEM:
                    let mem = operand.mem
                    memory.append(
                        MemoryOperand(
                            segment: name(mem.segment), base: name(mem.base), index: name(mem.index), scale: Int(mem.scale),
                            displacement: mem.disp, size: Int(operand.size),
                            reads: operand.access & UInt8(CS_AC_READ.rawValue) != 0,
                            writes: operand.access & UInt8(CS_AC_WRITE.rawValue) != 0))
                case X86_OP_REG:
                    if let register = name(operand.reg) { registers.append(register) }
                default: break
                }
            }
        }
        memoryOperands = memory
        registerOperands = registers
        var read = [UInt16](repeating: 0, count: 64)
        var written = [UInt16](repeating: 0, count: 64)
        var readCount: UInt8 = 0
        var writtenCount: UInt8 = 0
        if capstone.registersAccessed(handle, insn, &read, &readCount, &written, &writtenCount) == CS_ERR_OK {
            writtenRegisters = written.prefix(Int(writtenCount)).compactMap { name(x86_reg(rawValue: UInt32($0))) }
        } else {
            writtenRegisters = []
        }
        func inGroup(_ group: x86_insn_group) -> Bool { capstone.inGroup(handle, insn, group.rawValue) }
        let id = x86_insn(rawValue: instruction.id)
        switch id {
        case X86_INS_UD2, X86_INS_UD0, X86_INS_UD2B, X86_INS_INT3, X86_INS_HLT, X86_INS_INT, X86_INS_INTO: kind = .trap
        case X86_INS_DIV, X86_INS_IDIV: kind = .divide
        case X86_INS_PUSH, X86_INS_PUSHFQ: kind = .push
        case X86_INS_POP, X86_INS_POPFQ: kind = .pop
        case X86_INS_JMP, X86_INS_LJMP: kind = .jump
        default:
            if inGroup(X86_GRP_CALL) {
                kind = .call
            } else if inGroup(X86_GRP_RET) {
                kind = .return
            } else if inGroup(X86_GRP_JUMP) {
                kind = .conditionalJump
            } else {
                kind = .other
            }
        }
        let aligned: Set<UInt32> = [
            X86_INS_MOVAPS.rawValue, X86_INS_MOVAPD.rawValue, X86_INS_MOVDQA.rawValue, X86_INS_MOVNTDQ.rawValue,
            X86_INS_MOVNTPS.rawValue, X86_INS_MOVNTPD.rawValue, X86_INS_VMOVAPS.rawValue, X86_INS_VMOVAPD.rawValue,
            X86_INS_VMOVDQA.rawValue, X86_INS_MOVNTDQA.rawValue,
        ]
        // Legacy SSE with a 16-byte memory operand needs it aligned too, but for the unaligned
        // moves (VEX-encoded forms never do).
        let sse = [X86_GRP_SSE1, X86_GRP_SSE2, X86_GRP_SSE3, X86_GRP_SSSE3, X86_GRP_SSE41, X86_GRP_SSE42].contains(where: inGroup)
        let unaligned = ["movups", "movupd", "movdqu", "lddqu"].contains(mnemonic)
        let legacySSE = sse && !unaligned && !mnemonic.hasPrefix("v")
        needsAlignment = aligned.contains(instruction.id) || (legacySSE && memory.contains { $0.size == 16 })
    }

    public init(
        address: UInt64, bytes: [UInt8], mnemonic: String, operandText: String, kind: Kind,
        memoryOperands: [MemoryOperand] = [], registerOperands: [String] = [], writtenRegisters: [String] = [],
        needsAlignment: Bool = false
    ) {
        self.writtenRegisters = writtenRegisters
        self.address = address
        self.bytes = bytes
        self.mnemonic = mnemonic
        self.operandText = operandText
        self.kind = kind
        self.memoryOperands = memoryOperands
        self.registerOperands = registerOperands
        self.needsAlignment = needsAlignment
    }

    /// A NUL-terminated C string in a fixed buffer (capstone's mnemonic and operand text).
    static func string(_ raw: UnsafeRawBufferPointer) -> String {
        let bytes = raw.prefix { $0 != 0 }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// x86-64 register values from a thread's `user_regs_struct`, by any of their names.
public enum RegisterFile {
    /// The 64-bit register a name is part of, and the part: `ebx` is the low 32 bits of `rbx`,
    /// `ah` bits 8–15 of `rax`.
    public static func full(_ name: String) -> (register: String, shift: UInt64, bits: UInt64)? {
        let legacy: [String: String] = ["a": "rax", "b": "rbx", "c": "rcx", "d": "rdx"]
        if let full = ["rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "rip"].first(where: { $0 == name }) {
            return (full, 0, 64)
        }
        if name.count == 3, name.hasPrefix("e"), name.hasSuffix("x") || name.hasSuffix("i") || name.hasSuffix("p") {
            return ("r" + name.dropFirst(), 0, 32)
        }
        if name.count == 2, name.hasSuffix("x"), let full = legacy[String(name.prefix(1))] { return (full, 0, 16) }
        if name.count == 2, name.hasSuffix("l"), let full = legacy[String(name.prefix(1))] { return (full, 0, 8) }
        if name.count == 2, name.hasSuffix("h"), let full = legacy[String(name.prefix(1))] { return (full, 8, 8) }
        if ["si", "di", "bp", "sp"].contains(name) { return ("r" + name, 0, 16) }
        if ["sil", "dil", "bpl", "spl"].contains(name) { return ("r" + name.dropLast(), 0, 8) }
        if name.hasPrefix("r"), let number = Int(name.dropFirst().prefix { $0.isNumber }), (8...15).contains(number) {
            let suffix = name.dropFirst(1 + String(number).count)
            switch suffix {
            case "": return ("r\(number)", 0, 64)
            case "d": return ("r\(number)", 0, 32)
            case "w": return ("r\(number)", 0, 16)
            case "b": return ("r\(number)", 0, 8)
            default: return nil
            }
        }
        if name == "fs" || name == "gs" { return (name + "_base", 0, 64) }
        return nil
    }

    /// The value of register `name` (any width), with `rip` the address of the next instruction
    /// as an rip-relative operand means it; nil for a register the capture does not hold.
    public static func value(_ name: String, gpr: [UInt64], nextPC: UInt64) -> UInt64? {
        guard let (register, shift, bits) = full(name) else { return nil }
        let whole: UInt64
        if register == "rip" {
            whole = nextPC
        } else if let index = X86_64Registers.names.firstIndex(of: register), index < gpr.count {
            whole = gpr[index]
        } else {
            return nil
        }
        let shifted = whole >> shift
        return bits == 64 ? shifted : shifted & ((1 << bits) - 1)
    }
}
