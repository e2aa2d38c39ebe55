// FaultRecord: why the program died, as the report explains it (`fault` in event.json, issue 49).
//
// What the faulting instruction did (decoded with capstone), the address it used and each
// register that made it, a one-line diagnosis with the rule that decided it, and the variable
// the DWARF of the crashing function says held the bad value. Each frame's own variables are
// FrameRecord's `vars`. Every part is optional: what could not be decoded is said in `notes`,
// and the rest of the report is unchanged.

/// `fault`: the faulting instruction, its access, the diagnosis and the bad value's variable.
public struct FaultRecord: Codable, Sendable, Equatable {
    /// The instruction at the crashed thread's pc (for a jump or call to a page that is not
    /// code, the call that went there: its caller's instruction before the return address).
    public var instruction: InstructionRecord?
    /// What that instruction did when it faulted.
    public var access: AccessRecord?
    /// The verdict, in a line, with the rule that decided it.
    public var diagnosis: DiagnosisRecord?
    /// The variable that held the bad value, where the DWARF says which one.
    public var variable: BadValueRecord?
    /// What could not be decoded, and why (code bytes that are not an instruction, a pc in no
    /// module, a location expression that was refused).
    public var notes: [String]?

    public init(
        instruction: InstructionRecord? = nil, access: AccessRecord? = nil, diagnosis: DiagnosisRecord? = nil,
        variable: BadValueRecord? = nil, notes: [String]? = nil
    ) {
        self.instruction = instruction
        self.access = access
        self.diagnosis = diagnosis
        self.variable = variable
        self.notes = notes
    }
}

/// One decoded machine instruction.
public struct InstructionRecord: Codable, Sendable, Equatable {
    public var address: HexAddress?
    /// The instruction's bytes, in hex.
    public var bytes: String?
    /// Intel syntax, as capstone and `gdb -ex 'set disassembly-flavor intel'` print it:
    /// `mov rax, qword ptr [rbx + 8]`.
    public var text: String?
    /// Where its bytes were read: `memory` (captured at the crash) or `file` (the module's file).
    public var source: String?
    /// When the instruction is not the one at the pc: why (`the call that jumped to 0`).
    public var role: String?

    public init(
        address: HexAddress? = nil, bytes: String? = nil, text: String? = nil, source: String? = nil, role: String? = nil
    ) {
        self.address = address
        self.bytes = bytes
        self.text = text
        self.source = source
        self.role = role
    }
}

/// What the faulting instruction did.
public struct AccessRecord: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case read, write
        case readWrite = "read-write"
        /// Instructions fetched from the address (a jump or call went there).
        case execute
        /// A call or jump through a register or memory, whose target is `address`.
        case call, jump
        /// A deliberate trap: `ud2`, `int3`, `hlt` in user mode.
        case trap
        /// An integer division (by zero, or overflowing).
        case divide
    }

    public var kind: Kind?
    /// Bytes read or written.
    public var size: Int?
    /// The address as the instruction made it: `[rbx + 8]`, `rax`, `qword ptr [rip + 0x2f1a]`.
    public var expression: String?
    /// The address the expression gives with the captured registers.
    public var address: HexAddress?
    /// Each register of the expression (and a divisor's), with its value at the crash.
    public var registers: [String: HexAddress]?

    public init(
        kind: Kind? = nil, size: Int? = nil, expression: String? = nil, address: HexAddress? = nil,
        registers: [String: HexAddress]? = nil
    ) {
        self.kind = kind
        self.size = size
        self.expression = expression
        self.address = address
        self.registers = registers
    }
}

/// A verdict: `null pointer dereference: read of 8 bytes at 0x8 = NULL + 8 through rbx`.
public struct DiagnosisRecord: Codable, Sendable, Equatable {
    /// The rule's name, for machines: `null-dereference`, `near-null`, `non-canonical`,
    /// `wild-address`, `write-to-read-only`, `execute-non-executable`, `jump-to-null`,
    /// `stack-overflow`, `stack-protector`, `heap-corruption`, `double-free`,
    /// `use-after-free`, `misaligned`, `division-by-zero`, `trap`, `runtime-trap`, `abort`.
    public var rule: String?
    /// The line a person reads.
    public var summary: String?
    /// What decided it: the facts the rule read ("0x8 is below the first mapping at 0x55…").
    public var evidence: [String]?

    public init(rule: String? = nil, summary: String? = nil, evidence: [String]? = nil) {
        self.rule = rule
        self.summary = summary
        self.evidence = evidence
    }
}

/// The variable that held the bad value: "`o->sku` read through `rax` = NULL, `o` = 0x7ffd…".
public struct BadValueRecord: Codable, Sendable, Equatable {
    /// The register that held the bad base address (or the bad target).
    public var register: String?
    /// Its value.
    public var value: HexAddress?
    /// The variable the DWARF says the register held at the pc (`o`), and the function it
    /// belongs to (an inlined one included).
    public var variable: String?
    public var function: String?
    /// The access in the program's words, where its type says the field: `o->sku`.
    public var expression: String?

    public init(
        register: String? = nil, value: HexAddress? = nil, variable: String? = nil, function: String? = nil,
        expression: String? = nil
    ) {
        self.register = register
        self.value = value
        self.variable = variable
        self.function = function
        self.expression = expression
    }
}

/// A parameter or local of a frame, as gdb's `info args` and `info locals` print it.
public struct VariableRecord: Codable, Sendable, Equatable {
    public var name: String
    /// The type as C or the language writes it: `struct order *`, `int`, `const char *`.
    public var type: String?
    /// The value as gdb prints it: `42`, `0x0`, `0x5555… "text"`, `true`, `RED`,
    /// `<optimized out>`; `<unavailable>` where the capture does not hold the bytes.
    public var value: String
    /// A parameter (`info args`); a local otherwise.
    public var parameter: Bool?
    /// Where it lived: a register's name, or `memory` at `address`.
    public var location: String?
    public var address: HexAddress?

    public init(
        name: String, type: String? = nil, value: String, parameter: Bool? = nil, location: String? = nil,
        address: HexAddress? = nil
    ) {
        self.name = name
        self.type = type
        self.value = value
        self.parameter = parameter
        self.location = location
        self.address = address
    }
}
