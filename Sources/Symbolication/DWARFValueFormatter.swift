// DWARFValueFormatter: a variable's type name and value as gdb writes them (`whatis`, and the
// values of `info args` / `info locals`), from the DWARF type DIEs and the bytes a location
// gives, for DWARFVariables.
//
// The C rules of gdb's c-valprint.c and valprint.c, with the defaults gdb starts with: integers
// in decimal, `char` as `65 'A'`, `_Bool` as true/false, floats with 9 or 17 significant digits,
// enumerators by name (flag enums as `(A | B)`), pointers in hex with `<symbol+offset>` when a
// function symbol covers them and the string for character pointers, arrays as `{1, 2, 3}` with
// `<repeats N times>` past 10 equal elements and 200 elements at most, character arrays as
// strings, structures as `{a = 1, inner = {x = 2}}`, C++ references as `@0xADDR: value`, base
// classes as `<Base> = {…}`; Rust structures as `Name {a: 1}`.
//
// What it does not hold it does not guess: bytes the capture lacks print `<unavailable>`, a
// register the state lacks too, an empty piece `<optimized out>`. The type graph is hostile:
// typedef and pointer chains are followed at most `typeChain` steps (a cycle prints `<cycle>`),
// aggregates nested deeper than `depth` print `{...}`, a value stops at `bytesPerVariable`
// characters and a frame's values at `bytesPerFrame`, each with `...`. Type DIEs are read once
// per DWARFInfo (DWARFVariableCaches). Not Sendable: made and used inside one lookup, behind the
// DWARFInfo's mutex.

import BoundedBytes
import ObjectFile

#if canImport(Glibc)
import Glibc
#endif

/// One type DIE as the formatter reads it, with the children it needs.
final class DWARFTypeNode {
    struct Member {
        var name: String?
        var type: UInt64?
        /// Bytes from the start of the aggregate.
        var offset: UInt64
        /// For a bitfield: its size and where it starts, in bits from the aggregate's start.
        var bitSize: UInt64?
        var bitOffset: UInt64?
        var isBase = false
    }

    /// One variant of a Rust enum's DW_TAG_variant_part: the discriminant value that selects
    /// it (nil: the default variant) and the member holding its fields.
    struct Variant {
        var discriminant: UInt64?
        var member: Member
    }

    var tag: UInt64 = 0
    var name: String?
    var byteSize: UInt64?
    var encoding: UInt64?
    var target: UInt64?
    var declaration = false
    var language: UInt64?
    var members: [Member] = []
    var enumerators: [(name: String, value: UInt64)] = []
    var enumeratorsSigned = false
    /// Array dimensions, outermost first (nil: unknown bound).
    var dimensions: [UInt64?] = []
    /// Parameter types of a subroutine type (nil: no type), and whether it ends with `...`.
    var parameters: [UInt64?] = []
    var variadic = false
    var prototyped = false
    /// A Rust enum (DW_TAG_variant_part): the member DW_AT_discr names, and the variants.
    var discriminant: Member?
    var variants: [Variant] = []
}

/// The members of a structure, flattened enough to name the one at an offset.
struct DWARFMemberLayout: Sendable, Equatable {
    struct Entry: Sendable, Equatable {
        var name: String
        var offset: UInt64
        var size: UInt64
        /// For an array member: the size of one element and how many.
        var elementSize: UInt64?
        var count: UInt64?
        /// The members of the member (or of one element), when it is an aggregate.
        var children: [Entry]
    }

    var entries: [Entry]

    /// The path of the member at `offset` (see DWARFVariable.memberPath(atOffset:)).
    func path(at offset: UInt64) -> String? {
        Self.path(in: entries, at: offset, depth: 0)
    }

    private static func path(in entries: [Entry], at offset: UInt64, depth: Int) -> String? {
        guard depth < 16 else { return nil }
        for entry in entries where offset >= entry.offset && offset - entry.offset < max(entry.size, 1) {
            var inside = offset - entry.offset
            var text = entry.name
            if let elementSize = entry.elementSize, elementSize > 0 {
                let index = inside / elementSize
                if let count = entry.count, index >= count { continue }
                text += "[\(index)]"
                inside -= index * elementSize
            }
            if let inner = path(in: entry.children, at: inside, depth: depth + 1) {
                if text.isEmpty { return inner }
                return inner.hasPrefix("[") ? text + inner : text + "." + inner
            }
            if !text.isEmpty { return text }
        }
        return nil
    }
}

struct DWARFValueFormatter {
    let lookups: DWARFLookups
    let state: DWARFFrameState
    let limits: DWARFVariableLimits
    /// Characters the current frame's values may still take.
    var frameBudget: Int

    init(lookups: DWARFLookups, state: DWARFFrameState, limits: DWARFVariableLimits) {
        self.lookups = lookups
        self.state = state
        self.limits = limits
        frameBudget = limits.bytesPerFrame
    }

    // MARK: - Type DIEs

    /// The type DIE at `offset`, read once.
    func node(_ offset: UInt64) -> DWARFTypeNode? {
        if let cached = lookups.variableCaches.types[offset] { return cached }
        guard let die = lookups.die(at: offset) else { return nil }
        let node = DWARFTypeNode()
        node.tag = die.tag
        node.name = die.string(DW_AT_name)
        node.byteSize = die.constant(DW_AT_byte_size)
        node.encoding = die.constant(DW_AT_encoding)
        node.target = die.reference(DW_AT_type)
        node.declaration = die.flag(DW_AT_declaration)
        node.prototyped = die.flag(DW_AT_prototyped)
        node.language = die.unit.language
        if Self.isCPlusPlus(node.language) || node.language == Self.DW_LANG_Rust, let name = node.name,
            let prefix = lookups.qualifiers(of: die.unit)[offset], !prefix.isEmpty
        {
            node.name = prefix + name
        }
        // C++ qualifies an enum class's enumerators by the enum, Rust every enum's.
        let enumeratorPrefix =
            Self.isCPlusPlus(node.language) || node.language == Self.DW_LANG_Rust
            ? (lookups.qualifiers(of: die.unit)[offset] ?? "")
                + (die.flag(DW_AT_enum_class) || node.language == Self.DW_LANG_Rust
                    ? (die.string(DW_AT_name) ?? "") + "::" : "")
            : ""
        var budget = 4096
        switch die.tag {
        case DW_TAG_structure_type, DW_TAG_union_type, DW_TAG_class_type:
            for child in lookups.children(of: die, budget: &budget)
            where child.tag == DW_TAG_member || child.tag == DW_TAG_inheritance || child.tag == DW_TAG_variant_part {
                if child.tag == DW_TAG_variant_part {
                    readVariants(child, into: node, budget: &budget)
                    continue
                }
                // Static members (C++: a declaration, or DW_TAG_variable in DWARF 5) have no place.
                if child.flag(DW_AT_external) || child.flag(DW_AT_declaration) { continue }
                var member = DWARFTypeNode.Member(
                    name: child.string(DW_AT_name), type: child.reference(DW_AT_type), offset: 0,
                    isBase: child.tag == DW_TAG_inheritance)
                if let constant = child.constant(DW_AT_data_member_location) {
                    member.offset = constant
                } else if let block = child.block(DW_AT_data_member_location) {
                    var cursor = DWARFCursor(block)
                    guard cursor.u8() == DW_OP_plus_uconst, let constant = cursor.uleb() else { continue }
                    member.offset = constant
                }
                if let bitSize = child.constant(DW_AT_bit_size) {
                    member.bitSize = bitSize
                    if let dataBitOffset = child.constant(DW_AT_data_bit_offset) {
                        member.bitOffset = dataBitOffset
                        // DWARF 4/5 bitfields have no byte location: the byte they start in.
                        if child.value(DW_AT_data_member_location) == nil { member.offset = dataBitOffset / 8 }
                    } else if let bitOffset = child.constant(DW_AT_bit_offset) {
                        // DWARF 2/3: from the most significant bit of a storage unit of
                        // DW_AT_byte_size bytes at the member's offset (little-endian target).
                        let unitBits = (child.constant(DW_AT_byte_size) ?? 0).checkedMultiplying(8) ?? 0
                        let fromStart = member.offset.checkedMultiplying(8)?.checkedAdding(unitBits)
                        member.bitOffset = fromStart?.checkedSubtracting(bitOffset)?.checkedSubtracting(bitSize)
                    } else {
                        member.bitOffset = member.offset.checkedMultiplying(8)
                    }
                }
                node.members.append(member)
            }
        case DW_TAG_enumeration_type:
            for child in lookups.children(of: die, budget: &budget) where child.tag == DW_TAG_enumerator {
                guard let name = child.string(DW_AT_name), let value = child.value(DW_AT_const_value) else { continue }
                if value.form == DW_FORM_sdata && Int64(bitPattern: value.value) < 0 { node.enumeratorsSigned = true }
                node.enumerators.append((enumeratorPrefix + name, die.unit.constant(value) ?? value.value))
            }
        case DW_TAG_array_type:
            for child in lookups.children(of: die, budget: &budget) where child.tag == DW_TAG_subrange_type {
                if let count = child.constant(DW_AT_count) {
                    node.dimensions.append(count)
                } else if let upper = child.value(DW_AT_upper_bound), let bound = die.unit.constant(upper) {
                    let lower = child.constant(DW_AT_lower_bound) ?? 0
                    // An upper bound of -1 (all ones) is a flexible array: no elements.
                    node.dimensions.append(bound == .max ? 0 : bound.checkedSubtracting(lower)?.checkedAdding(1))
                } else {
                    node.dimensions.append(nil)
                }
            }
        case DW_TAG_subroutine_type:
            for child in lookups.children(of: die, budget: &budget) {
                if child.tag == DW_TAG_formal_parameter { node.parameters.append(child.reference(DW_AT_type)) }
                if child.tag == DW_TAG_unspecified_parameters { node.variadic = true }
            }
        default: break
        }
        if lookups.variableCaches.types.count < DWARFVariableCaches.maximumTypes { lookups.variableCaches.types[offset] = node }
        return node
    }

    /// A Rust enum's DW_TAG_variant_part: the discriminant member and each DW_TAG_variant's
    /// value and member (DW_AT_discr_list ranges are not read: such a variant never matches).
    private func readVariants(_ part: DWARFDIE, into node: DWARFTypeNode, budget: inout Int) {
        let discriminant = part.reference(DW_AT_discr)
        for child in lookups.children(of: part, budget: &budget) {
            if child.tag == DW_TAG_member, child.offset == discriminant {
                node.discriminant = DWARFTypeNode.Member(
                    name: nil, type: child.reference(DW_AT_type), offset: child.constant(DW_AT_data_member_location) ?? 0)
            }
            guard child.tag == DW_TAG_variant,
                let member = lookups.children(of: child, budget: &budget).first(where: { $0.tag == DW_TAG_member })
            else { continue }
            node.variants.append(
                DWARFTypeNode.Variant(
                    discriminant: child.constant(DW_AT_discr_value),
                    member: DWARFTypeNode.Member(
                        name: member.string(DW_AT_name), type: member.reference(DW_AT_type),
                        offset: member.constant(DW_AT_data_member_location) ?? 0)))
        }
    }

    /// Whether a tag only qualifies or renames another type.
    private static func isTransparent(_ tag: UInt64) -> Bool {
        tag == DW_TAG_typedef || tag == DW_TAG_const_type || tag == DW_TAG_volatile_type || tag == DW_TAG_restrict_type
            || tag == DW_TAG_atomic_type
    }

    /// The type `offset` names, through typedefs and qualifiers; nil for void, a cycle or
    /// malformed DWARF (`cycle` says which).
    func strip(_ offset: UInt64?, cycle: inout Bool) -> DWARFTypeNode? {
        var current = offset
        for _ in 0..<limits.typeChain {
            guard let at = current, let node = node(at) else { return nil }
            guard Self.isTransparent(node.tag) else { return node }
            current = node.target
        }
        cycle = true
        return nil
    }

    func strip(_ offset: UInt64?) -> DWARFTypeNode? {
        var cycle = false
        return strip(offset, cycle: &cycle)
    }

    func byteSize(of offset: UInt64) -> UInt64? {
        byteSize(strip(offset))
    }

    private func byteSize(_ node: DWARFTypeNode?, depth: Int = 0) -> UInt64? {
        guard let node else { return nil }
        if let size = node.byteSize { return size }
        switch node.tag {
        case DW_TAG_pointer_type, DW_TAG_reference_type, DW_TAG_rvalue_reference_type, DW_TAG_ptr_to_member_type:
            return 8
        case DW_TAG_array_type:
            guard depth < 8, let element = byteSize(strip(node.target), depth: depth + 1) else { return nil }
            var total = element
            for dimension in node.dimensions {
                guard let dimension, let product = total.checkedMultiplying(dimension) else { return nil }
                total = product
            }
            return total
        default: return nil
        }
    }

    private static func isCPlusPlus(_ language: UInt64?) -> Bool {
        guard let language else { return false }
        return [0x04, 0x19, 0x1a, 0x21, 0x2a, 0x2b].contains(language)
    }

    private static let DW_LANG_Rust: UInt64 = 0x1c

    // MARK: - Type names

    /// The type at `offset` as gdb's `whatis` writes it.
    func typeName(_ offset: UInt64) -> String {
        declarator(offset, inner: "", steps: 0)
    }

    private func declarator(_ offset: UInt64?, inner: String, steps: Int) -> String {
        func joined(_ base: String) -> String { inner.isEmpty ? base : base + " " + inner }
        guard steps < limits.typeChain else { return joined("<cycle>") }
        guard let offset else { return joined("void") }
        guard let node = node(offset) else { return joined("<unknown type>") }
        if node.language == Self.DW_LANG_Rust { return rustTypeName(node, steps: steps) }
        let wrapped = inner.hasPrefix("*") || inner.hasPrefix("&") ? "(" + inner + ")" : inner
        switch node.tag {
        case DW_TAG_pointer_type, DW_TAG_reference_type, DW_TAG_rvalue_reference_type:
            if let name = node.name { return joined(name) }  // Rust names its pointers (`*const u8`, `&str`)
            let mark = node.tag == DW_TAG_pointer_type ? "*" : node.tag == DW_TAG_reference_type ? "&" : "&&"
            // A qualifier of the pointer itself stands apart: `char * const`.
            let qualified = ["const", "volatile", "restrict", "_Atomic"].contains { inner.hasPrefix($0) }
            return declarator(node.target, inner: mark + (qualified ? " " : "") + inner, steps: steps + 1)
        case DW_TAG_const_type, DW_TAG_volatile_type, DW_TAG_restrict_type, DW_TAG_atomic_type:
            let word =
                node.tag == DW_TAG_const_type
                ? "const"
                : node.tag == DW_TAG_volatile_type ? "volatile" : node.tag == DW_TAG_restrict_type ? "restrict" : "_Atomic"
            // After a pointer it qualifies the pointer (`char *const`), else what it names.
            let target = node.target.flatMap { self.node($0) }
            if let target, target.tag == DW_TAG_pointer_type || target.tag == DW_TAG_reference_type {
                return declarator(node.target, inner: inner.isEmpty ? word : word + " " + inner, steps: steps + 1)
            }
            return word + " " + declarator(node.target, inner: inner, steps: steps + 1)
        case DW_TAG_array_type:
            let bounds = node.dimensions.map { "[" + ($0.map { String($0) } ?? "") + "]" }.joined()
            return declarator(node.target, inner: wrapped + bounds, steps: steps + 1)
        case DW_TAG_subroutine_type:
            var parameters = node.parameters.map { typeName(ofOptional: $0, steps: steps + 1) }
            if node.variadic { parameters.append("...") }
            let list = parameters.isEmpty ? (node.prototyped ? "void" : "") : parameters.joined(separator: ", ")
            return declarator(node.target, inner: wrapped + "(" + list + ")", steps: steps + 1)
        case DW_TAG_structure_type, DW_TAG_union_type, DW_TAG_class_type, DW_TAG_enumeration_type:
            let keyword =
                node.tag == DW_TAG_union_type
                ? "union" : node.tag == DW_TAG_enumeration_type ? "enum" : node.tag == DW_TAG_class_type ? "class" : "struct"
            let name = node.name ?? "{...}"
            if Self.isCPlusPlus(node.language) || node.language == Self.DW_LANG_Rust, node.name != nil { return joined(name) }
            return joined(keyword + " " + name)
        default:
            return joined(node.name ?? "<unknown type>")
        }
    }

    /// A Rust type as gdb's rust_internal_print_type writes it: named types by their qualified
    /// name, pointers and references alike as `*mut T` (gdb reads no pointer's DW_AT_name),
    /// arrays as `[T; N]`, functions as `fn (A, B) -> R`.
    private func rustTypeName(_ node: DWARFTypeNode, steps: Int) -> String {
        func inner(_ offset: UInt64?) -> String {
            guard let offset else { return "()" }
            return declarator(offset, inner: "", steps: steps + 1)
        }
        switch node.tag {
        case DW_TAG_pointer_type, DW_TAG_reference_type, DW_TAG_rvalue_reference_type:
            return "*mut " + inner(node.target)
        case DW_TAG_array_type:
            var text = inner(node.target)
            for dimension in node.dimensions.reversed() {
                text = "[" + text + (dimension.map { "; " + String($0) } ?? "") + "]"
            }
            return text
        case DW_TAG_subroutine_type:
            let returns = node.target.map { " -> " + inner($0) } ?? ""
            return "fn (" + node.parameters.map { inner($0) }.joined(separator: ", ") + ")" + returns
        case DW_TAG_typedef, DW_TAG_const_type, DW_TAG_volatile_type, DW_TAG_restrict_type, DW_TAG_atomic_type:
            return node.name ?? inner(node.target)
        default:
            return node.name ?? "<unknown type>"
        }
    }

    private func typeName(ofOptional offset: UInt64?, steps: Int) -> String {
        declarator(offset, inner: "", steps: steps)
    }

    // MARK: - Values

    /// What a value's bytes are read from: captured memory at an address, or bytes in hand
    /// (a register, a computed value, pieces), some of which may be missing.
    struct Source {
        var address: UInt64?
        var bytes: [UInt8] = []
        /// Per byte of `bytes`: whether it is known (nil: all are).
        var known: [Bool]?
    }

    enum Fetched: Equatable {
        case bytes([UInt8])
        case unavailable
        case optimizedOut
    }

    private func fetch(_ source: Source, offset: UInt64, size: UInt64) -> Fetched {
        guard size <= 64 else { return .unavailable }
        if let address = source.address {
            guard let at = address.checkedAdding(offset) else { return .unavailable }
            let bytes = state.memory.bytes(at: at, count: Int(size))
            return bytes.count == Int(size) ? .bytes(bytes) : .unavailable
        }
        guard let end = offset.checkedAdding(size), end <= UInt64(source.bytes.count) else { return .unavailable }
        if let known = source.known, known[Int(offset)..<Int(end)].contains(false) { return .optimizedOut }
        return .bytes(Array(source.bytes[Int(offset)..<Int(end)]))
    }

    /// The text gdb prints for a variable of type `type` at `location`.
    mutating func value(of type: UInt64?, at location: DWARFLocation) -> String {
        var source = Source()
        switch location {
        case .optimizedOut: return "<optimized out>"
        case .unavailable, .refused: return "<unavailable>"
        case .implicitPointer: return "<synthetic pointer>"
        case .memory(let address): source.address = address
        case .register(let number):
            guard let value = state.registers[number] else { return "<unavailable>" }
            source.bytes = Self.littleEndian(value)
        case .value(let value): source.bytes = Self.littleEndian(value)
        case .implicit(let bytes): source.bytes = bytes
        case .pieces(let pieces):
            guard let assembled = assemble(pieces) else { return "<unavailable>" }
            source = assembled
        }
        // A computed value shorter than its type (a stack value of a 16-byte type) is zero-extended.
        if source.address == nil, let size = type.flatMap({ byteSize(of: $0) }), size <= 4096, source.bytes.count < Int(size) {
            source.known = source.known.map { $0 + Array(repeating: location.isStackValue, count: Int(size) - $0.count) }
            if source.known == nil && !location.isStackValue {
                source.known =
                    Array(repeating: true, count: source.bytes.count)
                    + Array(repeating: false, count: Int(size) - source.bytes.count)
            }
            source.bytes += Array(repeating: 0, count: Int(size) - source.bytes.count)
        }
        return write(type, source)
    }

    /// A DW_AT_const_value as gdb prints it.
    mutating func constant(_ attribute: DWARFFormValue, of die: DWARFDIE, type: UInt64?) -> String {
        var source = Source()
        if let constant = die.unit.constant(attribute) {
            // As gdb's dwarf2_const_value_data: data1/2/4 are not sign-extended, sdata is.
            source.bytes = Self.littleEndian(constant)
        } else if let block = die.attributes.first(where: { $0.attribute == DW_AT_const_value }),
            let bytes = die.block(block.attribute)
        {
            source.bytes = bytes.array(0, UInt64(bytes.count)) ?? []
        } else if let text = die.unit.string(attribute) {
            return "\"" + text.prefix(limits.elements) + "\""
        } else {
            return "<unavailable>"
        }
        if let size = type.flatMap({ byteSize(of: $0) }), size <= 4096, source.bytes.count < Int(size) {
            source.bytes += Array(repeating: 0, count: Int(size) - source.bytes.count)
        }
        return write(type, source)
    }

    private mutating func write(_ type: UInt64?, _ source: Source) -> String {
        var output = Output(limit: min(limits.bytesPerVariable, max(frameBudget, 0)))
        guard output.limit > 0 else { return "<...>" }
        format(type, source, offset: 0, depth: 0, into: &output)
        frameBudget -= output.text.utf8.count
        return output.truncated ? output.text + "..." : output.text
    }

    private static func littleEndian(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    /// The bytes of a composite location, each piece's at its bit position (whole bytes only).
    private func assemble(_ pieces: [DWARFPiece]) -> Source? {
        var source = Source()
        var known: [Bool] = []
        for piece in pieces {
            guard piece.bitSize % 8 == 0, piece.bitOffset % 8 == 0, piece.bitSize <= 4096 * 8, piece.bitOffset <= 4096 * 8
            else { return nil }
            let size = Int(piece.bitSize / 8), skip = Int(piece.bitOffset / 8)
            var bytes: [UInt8]?
            switch piece.location {
            case .register(let number): bytes = state.registers[number].map { Self.littleEndian($0) }
            case .value(let value):
                // A stack value is zero-extended to its piece (clang: `lit0; stack_value; piece 40`).
                let extended = Self.littleEndian(value)
                bytes = extended + [UInt8](repeating: 0, count: max(0, size + skip - extended.count))
            case .implicit(let value): bytes = value
            case .memory(let address):
                let read = state.memory.bytes(at: address, count: size + skip)
                bytes = read.count == size + skip ? read : nil
            default: bytes = nil
            }
            if let bytes, bytes.count >= size + skip {
                source.bytes += bytes[skip..<(skip + size)]
                known += Array(repeating: true, count: size)
            } else {
                source.bytes += Array(repeating: 0, count: size)
                known += Array(repeating: false, count: size)
            }
        }
        source.known = known
        return source
    }

    /// A value's text, bounded.
    struct Output {
        var text = ""
        var limit: Int
        var truncated = false
        /// Elements compared while looking for repeats: a hostile array of 2^40 equal (or
        /// equally missing) elements stops being scanned here, its count then a lower bound.
        var comparisons = 0
        static let maximumComparisons = 1 << 16

        init(limit: Int) { self.limit = limit }

        mutating func write(_ piece: String) {
            guard !truncated else { return }
            if text.utf8.count + piece.utf8.count > limit {
                text += String(decoding: piece.utf8.prefix(max(0, limit - text.utf8.count)), as: UTF8.self)
                truncated = true
            } else {
                text += piece
            }
        }
    }

    private func format(_ type: UInt64?, _ source: Source, offset: UInt64, depth: Int, into output: inout Output) {
        guard !output.truncated else { return }
        var cycle = false
        guard let node = strip(type, cycle: &cycle) else {
            output.write(cycle ? "<cycle>" : type == nil ? "void" : "<unknown type>")
            return
        }
        switch node.tag {
        case DW_TAG_base_type, DW_TAG_enumeration_type, DW_TAG_pointer_type, DW_TAG_unspecified_type, DW_TAG_ptr_to_member_type:
            if node.language == Self.DW_LANG_Rust, node.tag == DW_TAG_base_type, node.byteSize == 0 {
                output.write("()")  // the unit type
                return
            }
            let size = byteSize(node) ?? 8
            guard size >= 1, size <= 16 else {
                output.write("<unavailable>")
                return
            }
            switch fetch(source, offset: offset, size: size) {
            case .unavailable: output.write("<unavailable>")
            case .optimizedOut: output.write("<optimized out>")
            case .bytes(let bytes): scalar(node, bytes, into: &output)
            }
        case DW_TAG_reference_type, DW_TAG_rvalue_reference_type:
            guard case .bytes(let bytes) = fetch(source, offset: offset, size: 8) else {
                output.write("<unavailable>")
                return
            }
            let address = Self.unsigned(bytes)
            output.write("@0x" + String(address, radix: 16) + ": ")
            guard depth < limits.depth else {
                output.write("{...}")
                return
            }
            format(node.target, Source(address: address), offset: 0, depth: depth + 1, into: &output)
        case DW_TAG_structure_type, DW_TAG_union_type, DW_TAG_class_type:
            if node.language == Self.DW_LANG_Rust {
                rustAggregate(node, source, offset: offset, depth: depth, into: &output)
            } else {
                aggregate(node, source, offset: offset, depth: depth, into: &output)
            }
        case DW_TAG_array_type:
            array(
                element: node.target, dimensions: node.dimensions[...], source, offset: offset, depth: depth,
                rust: node.language == Self.DW_LANG_Rust, into: &output)
        case DW_TAG_subroutine_type:
            output.write("{" + declarator(type, inner: "", steps: 0) + "}")
            if let address = source.address { output.write(" 0x" + String(address, radix: 16) + symbol(address)) }
        default:
            output.write("<unknown type>")
        }
    }

    private static func unsigned(_ bytes: [UInt8]) -> UInt64 {
        var value: UInt64 = 0
        for (index, byte) in bytes.prefix(8).enumerated() { value |= UInt64(byte) << (8 * UInt64(index)) }
        return value
    }

    private static func signExtended(_ value: UInt64, size: Int) -> Int64 {
        guard size < 8 else { return Int64(bitPattern: value) }
        let shift = UInt64(64 - 8 * size)
        return Int64(bitPattern: value << shift) >> Int64(shift)
    }

    private func isCharacter(_ node: DWARFTypeNode?) -> Bool {
        guard let node, node.tag == DW_TAG_base_type, node.byteSize == 1 else { return false }
        return node.encoding == DW_ATE_signed_char || node.encoding == DW_ATE_unsigned_char
    }

    /// A base type, enumeration or pointer, from its bytes.
    private func scalar(_ node: DWARFTypeNode, _ bytes: [UInt8], into output: inout Output) {
        let size = bytes.count
        let raw = Self.unsigned(bytes)
        switch node.tag {
        case DW_TAG_pointer_type, DW_TAG_unspecified_type, DW_TAG_ptr_to_member_type:
            output.write(pointer(raw, to: node.tag == DW_TAG_pointer_type ? node.target : nil))
        case DW_TAG_enumeration_type:
            let signed = node.enumeratorsSigned || strip(node.target)?.encoding == DW_ATE_signed
            let value = signed ? UInt64(bitPattern: Self.signExtended(raw, size: size)) : raw
            if let match = node.enumerators.first(where: { $0.value == value }) {
                output.write(match.name)
            } else if !signed, value != 0, isFlagEnum(node) {
                var names: [String] = []
                var left = value
                for enumerator in node.enumerators where enumerator.value != 0 && left & enumerator.value == enumerator.value {
                    names.append(enumerator.name)
                    left &= ~enumerator.value
                }
                if left != 0 { names.append("unknown: 0x" + String(left, radix: 16)) }
                output.write("(" + names.joined(separator: " | ") + ")")
            } else {
                output.write(signed ? String(Int64(bitPattern: value)) : String(value))
            }
        default:
            switch node.encoding {
            case DW_ATE_boolean:
                output.write(raw == 0 ? "false" : raw == 1 ? "true" : String(raw))
            case DW_ATE_float:
                output.write(Self.float(bytes))
            case DW_ATE_signed, DW_ATE_signed_char:
                let text: String
                if size == 16 {
                    text = String(Int128(bitPattern: UInt128(Self.unsigned(Array(bytes[8...]))) << 64 | UInt128(raw)))
                } else {
                    text = String(Self.signExtended(raw, size: size))
                }
                output.write(text)
                if size == 1 && node.encoding == DW_ATE_signed_char { output.write(" " + Self.characterLiteral(UInt8(raw))) }
            case DW_ATE_UTF where node.language == Self.DW_LANG_Rust && size == 4:
                output.write(String(raw) + " " + Self.rustCharacterLiteral(UInt32(truncatingIfNeeded: raw)))
            case DW_ATE_unsigned, DW_ATE_unsigned_char, DW_ATE_UTF, DW_ATE_address:
                if size == 16 {
                    output.write(String(UInt128(Self.unsigned(Array(bytes[8...]))) << 64 | UInt128(raw)))
                } else {
                    output.write(String(raw))
                }
                if size == 1 && node.encoding != DW_ATE_unsigned && node.encoding != DW_ATE_address {
                    output.write(" " + Self.characterLiteral(UInt8(raw)))
                }
            default:
                output.write(String(raw))
            }
        }
    }

    /// gdb's flag enum: every enumerator a non-negative value whose bits no other shares.
    private func isFlagEnum(_ node: DWARFTypeNode) -> Bool {
        var seen: UInt64 = 0
        for enumerator in node.enumerators {
            if enumerator.value & seen != 0 { return false }
            seen |= enumerator.value
        }
        return true
    }

    /// A float or double with gdb's digits (%g with 9 or 17), inf and nan(0xMANTISSA) as gdb.
    private static func float(_ bytes: [UInt8]) -> String {
        let raw = unsigned(bytes)
        let value: Double
        let digits: Int
        switch bytes.count {
        case 4:
            let single = Float(bitPattern: UInt32(truncatingIfNeeded: raw))
            if single.isNaN {
                return (single.sign == .minus ? "-" : "") + "nan(0x" + String(raw & 0x7f_ffff, radix: 16) + ")"
            }
            value = Double(single)
            digits = 9
        case 8:
            value = Double(bitPattern: raw)
            if value.isNaN {
                return (value.sign == .minus ? "-" : "") + "nan(0x" + String(raw & 0xf_ffff_ffff_ffff, radix: 16) + ")"
            }
            digits = 17
        case 10, 16:
            // x87 extended: 64-bit significand with its integer bit, then sign and exponent.
            let exponent = Int(unsigned(Array(bytes[8..<10])) & 0x7fff)
            let negative = bytes[9] & 0x80 != 0
            if exponent == 0x7fff {
                return (negative ? "-" : "") + (raw << 1 == 0 ? "inf" : "nan(0x" + String(raw & ~(1 << 63), radix: 16) + ")")
            }
            let magnitude = Double(raw) * pow(2.0, Double(exponent - 16383 - 63))
            value = negative ? -magnitude : magnitude
            digits = 18
        default:
            return "<unsupported float of \(bytes.count) bytes>"
        }
        if value.isInfinite { return value < 0 ? "-inf" : "inf" }
        var buffer = [CChar](repeating: 0, count: 64)
        let count = withVaList([value]) { arguments in
            buffer.withUnsafeMutableBufferPointer { vsnprintf($0.baseAddress, 64, "%.\(digits)g", arguments) }
        }
        guard count > 0 else { return String(value) }
        return String(decoding: buffer.prefix(min(Int(count), 63)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `'A'`, `'\n'`, `'\000'`, as gdb writes a character.
    static func characterLiteral(_ byte: UInt8) -> String {
        "'" + escaped(byte, quote: UInt8(ascii: "'")) + "'"
    }

    /// A Rust `char` as gdb's rust_language::emitchar writes it: `'a'`, `'\n'`, `'\0'`,
    /// `'\xe9'`, `'\u{01f600}'`.
    static func rustCharacterLiteral(_ value: UInt32) -> String {
        let text: String
        switch value {
        case UInt32(UInt8(ascii: "\\")), UInt32(UInt8(ascii: "'")): text = "\\" + String(UnicodeScalar(UInt8(value)))
        case 10: text = "\\n"
        case 13: text = "\\r"
        case 9: text = "\\t"
        case 0: text = "\\0"
        case 32..<127: text = String(UnicodeScalar(UInt8(value)))
        case 0..<256:
            let hex = String(value, radix: 16)
            text = "\\x" + (hex.count < 2 ? "0" : "") + hex
        default:
            let hex = String(value, radix: 16)
            text = "\\u{" + String(repeating: "0", count: max(0, 6 - hex.count)) + hex + "}"
        }
        return "'" + text + "'"
    }

    private static func escaped(_ byte: UInt8, quote: UInt8) -> String {
        switch byte {
        case 7: return "\\a"
        case 8: return "\\b"
        case 9: return "\\t"
        case 10: return "\\n"
        case 11: return "\\v"
        case 12: return "\\f"
        case 13: return "\\r"
        case UInt8(ascii: "\\"): return "\\\\"
        case quote: return "\\" + String(UnicodeScalar(byte))
        case 0x20..<0x7f: return String(UnicodeScalar(byte))
        default:
            let octal = String(byte, radix: 8)
            return "\\" + String(repeating: "0", count: 3 - octal.count) + octal
        }
    }

    /// Characters as gdb's generic_printstr writes them: runs of more than 10 equal characters
    /// as `'c' <repeats N times>`, the rest in quotes, at most `elements` characters, then `...`
    /// when `more` (or characters were left).
    func string(_ bytes: ArraySlice<UInt8>, more: Bool) -> String {
        if bytes.isEmpty { return more ? "\"\"..." : "\"\"" }
        var result = ""
        var quoted = false
        var index = bytes.startIndex
        var printed = 0
        while index < bytes.endIndex && printed < limits.elements {
            var end = index + 1
            while end < bytes.endIndex && bytes[end] == bytes[index] { end += 1 }
            let count = end - index
            printed += count
            if count > 10 {
                if quoted {
                    result += "\", "
                    quoted = false
                } else if !result.isEmpty {
                    result += ", "
                }
                result += Self.characterLiteral(bytes[index]) + " <repeats \(count) times>"
            } else {
                if !quoted {
                    if !result.isEmpty { result += ", " }
                    result += "\""
                    quoted = true
                }
                let text = Self.escaped(bytes[index], quote: UInt8(ascii: "\""))
                result += String(repeating: text, count: count)
            }
            index = end
        }
        if quoted { result += "\"" }
        if more || index < bytes.endIndex { result += "..." }
        return result
    }

    /// ` <name+offset>` for an address a function symbol of the file covers, else "".
    private func symbol(_ address: UInt64) -> String {
        guard let file = address.checkedSubtracting(state.loadBias), let match = lookups.symbolFile.symbols.lookup(file),
            match.size > 0, match.offset < match.size
        else { return "" }
        let name = Demangler.demangle(match.name) ?? match.name
        return " <" + name + (match.offset == 0 ? "" : "+\(match.offset)") + ">"
    }

    /// A pointer's text: hex, the function symbol it points into, the string it points at.
    private func pointer(_ value: UInt64, to target: UInt64?) -> String {
        guard value != 0 else { return "0x0" }
        var text = "0x" + String(value, radix: 16) + symbol(value)
        if isCharacter(strip(target)) {
            var bytes: [UInt8] = []
            var more = false
            var address = value
            // Read in chunks: a string that runs into memory the capture lacks stops there.
            while bytes.count < limits.elements {
                let chunk = state.memory.bytes(at: address, count: min(64, limits.elements - bytes.count))
                if let nul = chunk.firstIndex(of: 0) {
                    bytes += chunk[..<nul]
                    break
                }
                bytes += chunk
                if chunk.count < min(64, limits.elements - bytes.count + chunk.count) {
                    if !chunk.isEmpty || !bytes.isEmpty { more = true }
                    break
                }
                address &+= UInt64(chunk.count)
                if bytes.count >= limits.elements { more = true }
            }
            if !bytes.isEmpty || !more {
                // Nothing read at all (not captured) shows the pointer alone.
                if state.memory.bytes(at: value, count: 1).isEmpty { return text }
                text += " " + string(bytes[...], more: more)
            }
        }
        return text
    }

    private func aggregate(_ node: DWARFTypeNode, _ source: Source, offset: UInt64, depth: Int, into output: inout Output) {
        if node.declaration {
            output.write("<incomplete type>")
            return
        }
        guard depth < limits.depth else {
            output.write("{...}")
            return
        }
        let rust = node.language == Self.DW_LANG_Rust
        output.write(rust ? (node.name ?? "") + " {" : "{")
        for (index, member) in node.members.enumerated() {
            guard !output.truncated else { return }
            if index > 0 { output.write(", ") }
            if member.isBase {
                output.write("<" + (member.type.map { typeName($0) } ?? "?") + "> = ")
            } else if let name = member.name {
                output.write(rust ? name + ": " : name + " = ")
            }
            guard let at = offset.checkedAdding(member.offset) else {
                output.write("<unavailable>")
                continue
            }
            if let bitSize = member.bitSize, let bitOffset = member.bitOffset {
                bitfield(member.type, source, offset: offset, bitOffset: bitOffset, bitSize: bitSize, into: &output)
            } else {
                format(member.type, source, offset: at, depth: depth + 1, into: &output)
            }
        }
        output.write("}")
    }

    // MARK: - Rust

    /// A Rust structure as gdb's rust_language::val_print_struct writes it: `Name {a: 1}`, a
    /// structure without fields by its name, a tuple `(1, 2)`, a tuple struct `Name (1, 2)`;
    /// slices and enums apart.
    private func rustAggregate(_ node: DWARFTypeNode, _ source: Source, offset: UInt64, depth: Int, into output: inout Output) {
        if node.declaration {
            output.write("<incomplete type>")
            return
        }
        guard depth < limits.depth else {
            output.write("{...}")
            return
        }
        if node.discriminant != nil || !node.variants.isEmpty {
            rustEnum(node, source, offset: offset, depth: depth, into: &output)
            return
        }
        if let slice = Self.sliceMembers(node) {
            rustSlice(node, data: slice.data, length: slice.length, source, offset: offset, depth: depth, into: &output)
            return
        }
        let tuple = node.name?.hasPrefix("(") == true
        if !tuple {
            output.write(node.name ?? "")
            if node.members.isEmpty { return }
            if node.name != nil { output.write(" ") }
        }
        rustFields(node, source, offset: offset, depth: depth, tuple: tuple || Self.isTupleStruct(node), into: &output)
    }

    /// `(a, b)` or `{x: a, y: b}`: a structure's or variant's fields.
    private func rustFields(
        _ node: DWARFTypeNode, _ source: Source, offset: UInt64, depth: Int, tuple: Bool, into output: inout Output
    ) {
        output.write(tuple ? "(" : "{")
        for (index, member) in node.members.enumerated() {
            guard !output.truncated else { return }
            if index > 0 { output.write(", ") }
            if !tuple { output.write((member.name ?? "") + ": ") }
            guard let at = offset.checkedAdding(member.offset) else {
                output.write("<unavailable>")
                continue
            }
            if let bitSize = member.bitSize, let bitOffset = member.bitOffset {
                bitfield(member.type, source, offset: offset, bitOffset: bitOffset, bitSize: bitSize, into: &output)
            } else {
                format(member.type, source, offset: at, depth: depth + 1, into: &output)
            }
        }
        output.write(tuple ? ")" : "}")
    }

    /// gdb's rust_tuple_struct_type_p: fields named `__0`, `__1`, … in order.
    private static func isTupleStruct(_ node: DWARFTypeNode) -> Bool {
        !node.members.isEmpty && node.members.enumerated().allSatisfy { $0.element.name == "__\($0.offset)" }
    }

    /// gdb's rust_slice_type_p: a named structure of exactly `data_ptr` and `length`.
    private static func sliceMembers(_ node: DWARFTypeNode) -> (data: DWARFTypeNode.Member, length: DWARFTypeNode.Member)? {
        guard node.name != nil, node.members.count == 2,
            let data = node.members.first(where: { $0.name == "data_ptr" }),
            let length = node.members.first(where: { $0.name == "length" })
        else { return nil }
        return (data, length)
    }

    /// A `&str` as its characters (`"paid"`), another slice as its type and elements
    /// (`&[i32] [1, 2]`), read through data_ptr for length elements, as gdb's val_print_slice.
    /// A data_ptr or length that is missing prints gdb's error; elements the capture lacks
    /// are not guessed: the slice prints as the structure it is (`&str {data_ptr: 0x…, length: 4}`).
    private func rustSlice(
        _ node: DWARFTypeNode, data: DWARFTypeNode.Member, length: DWARFTypeNode.Member, _ source: Source, offset: UInt64,
        depth: Int, into output: inout Output
    ) {
        let isString = node.name == "&str"
        let lengthSize = byteSize(strip(length.type)) ?? 8
        guard let dataAt = offset.checkedAdding(data.offset), let lengthAt = offset.checkedAdding(length.offset),
            lengthSize >= 1, lengthSize <= 8
        else {
            output.write("<unavailable>")
            return
        }
        let pointerBytes = fetch(source, offset: dataAt, size: 8)
        let lengthBytes = fetch(source, offset: lengthAt, size: lengthSize)
        if pointerBytes == .optimizedOut || lengthBytes == .optimizedOut {
            if !isString { output.write((node.name ?? "") + " ") }
            output.write("<error reading variable: value has been optimized out>")
            return
        }
        guard case .bytes(let pointer) = pointerBytes, case .bytes(let count) = lengthBytes else {
            output.write("<unavailable>")
            return
        }
        let address = Self.unsigned(pointer)
        let elements = Self.unsigned(count)
        let element = strip(data.type).flatMap { $0.tag == DW_TAG_pointer_type ? $0.target : nil }
        let elementSize = byteSize(strip(element)) ?? 0
        if isString {
            let shown = min(elements, UInt64(limits.elements))
            var characters: [UInt8] = []
            while UInt64(characters.count) < shown {
                let take = min(64, shown - UInt64(characters.count))
                guard let at = address.checkedAdding(UInt64(characters.count)),
                    case .bytes(let chunk) = fetch(Source(address: at), offset: 0, size: take)
                else {
                    characters = []
                    break
                }
                characters += chunk
            }
            if UInt64(characters.count) == shown {
                output.write(string(characters[...], more: elements > shown))
                return
            }
        } else if elements == 0 {
            output.write((node.name ?? "") + " []")
            return
        } else if elementSize > 0, case .bytes = fetch(Source(address: address), offset: 0, size: min(elementSize, 64)) {
            output.write((node.name ?? "") + " ")
            array(
                element: element, dimensions: [elements], Source(address: address), offset: 0, depth: depth, rust: true,
                into: &output)
            return
        }
        // Not captured: the structure itself.
        output.write((node.name ?? "") + " ")
        rustFields(node, source, offset: offset, depth: depth, tuple: false, into: &output)
    }

    /// A Rust enum with data, as gdb's rust_language::print_enum: the variant its discriminant
    /// selects (the default variant when no value matches), by its qualified name, then its
    /// fields: `core::option::Option<i32>::Some(5)`, `Shape::Rect{w: 2, h: 3}`, `…::None`.
    private func rustEnum(_ node: DWARFTypeNode, _ source: Source, offset: UInt64, depth: Int, into output: inout Output) {
        if node.variants.isEmpty {
            output.write((node.name ?? "") + " {<No data fields>}")
            return
        }
        var chosen = node.variants.first { $0.discriminant == nil }
        if let discriminant = node.discriminant {
            let size = byteSize(strip(discriminant.type)) ?? 0
            guard size >= 1, size <= 8, let at = offset.checkedAdding(discriminant.offset) else {
                output.write("<unavailable>")
                return
            }
            switch fetch(source, offset: at, size: size) {
            case .unavailable:
                output.write("<unavailable>")
                return
            case .optimizedOut:
                output.write("<optimized out>")
                return
            case .bytes(let bytes):
                let value = Self.unsigned(bytes)
                let mask: UInt64 = size == 8 ? .max : (1 << (8 * size)) - 1
                if let match = node.variants.first(where: { $0.discriminant.map { $0 & mask } == value }) { chosen = match }
            }
        }
        guard let variant = chosen, let at = offset.checkedAdding(variant.member.offset) else {
            output.write("<error reading variable>")  // gdb: "Could not find active enum variant"
            return
        }
        var cycle = false
        guard let fields = strip(variant.member.type, cycle: &cycle) else {
            output.write(cycle ? "<cycle>" : "<unknown type>")
            return
        }
        output.write(fields.name ?? variant.member.name ?? "")
        if fields.members.isEmpty { return }
        rustFields(fields, source, offset: at, depth: depth, tuple: Self.isTupleStruct(fields), into: &output)
    }

    private func bitfield(
        _ type: UInt64?, _ source: Source, offset: UInt64, bitOffset: UInt64, bitSize: UInt64, into output: inout Output
    ) {
        guard bitSize >= 1, bitSize <= 64, let lastBit = bitOffset.checkedAdding(bitSize - 1) else {
            output.write("<unavailable>")
            return
        }
        let first = bitOffset / 8
        let last = lastBit / 8
        guard let start = offset.checkedAdding(first), last - first < 9 else {
            output.write("<unavailable>")
            return
        }
        let bytes: [UInt8]
        switch fetch(source, offset: start, size: last - first + 1) {
        case .bytes(let fetched): bytes = fetched
        case .optimizedOut:
            output.write("<optimized out>")
            return
        case .unavailable:
            output.write("<unavailable>")
            return
        }
        var wide: UInt128 = 0
        for (index, byte) in bytes.enumerated() { wide |= UInt128(byte) << (8 * index) }
        let shifted = wide >> (bitOffset % 8)
        var value = UInt64(truncatingIfNeeded: shifted) & (bitSize == 64 ? .max : (1 << bitSize) - 1)
        let node = strip(type)
        let signed = node?.encoding == DW_ATE_signed || node?.encoding == DW_ATE_signed_char
        if signed, bitSize < 64, value >> (bitSize - 1) & 1 == 1 { value |= ~((1 << bitSize) - 1) }
        if let node, node.tag == DW_TAG_enumeration_type || node.encoding == DW_ATE_boolean {
            let size = Int(byteSize(node) ?? 8)
            scalar(node, Array(Self.littleEndian(value).prefix(max(1, min(size, 8)))), into: &output)
        } else {
            output.write(signed ? String(Int64(bitPattern: value)) : String(value))
        }
    }

    /// An array's elements, `{1, 2}` (Rust: `[1, 2]`, and bytes as numbers).
    private func array(
        element: UInt64?, dimensions: ArraySlice<UInt64?>, _ source: Source, offset: UInt64, depth: Int,
        rust: Bool = false, into output: inout Output
    ) {
        guard let first = dimensions.first else {
            format(element, source, offset: offset, depth: depth, into: &output)
            return
        }
        let rest = dimensions.dropFirst()
        guard let count = first else {
            output.write(source.address.map { "0x" + String($0, radix: 16) } ?? "{}")
            return
        }
        var size = byteSize(strip(element)) ?? 0
        for dimension in rest {
            guard let dimension, let product = size.checkedMultiplying(dimension) else {
                output.write("<unavailable>")
                return
            }
            size = product
        }
        if !rust, rest.isEmpty, isCharacter(strip(element)), !isPartlyOptimizedOut(source, offset: offset, size: count) {
            let shown = min(count, UInt64(limits.elements) + 1)
            var characters: [UInt8] = []
            var index: UInt64 = 0
            while index < shown {
                let take = min(64, shown - index)
                guard let at = offset.checkedAdding(index), case .bytes(let chunk) = fetch(source, offset: at, size: take) else {
                    output.write("<unavailable>")
                    return
                }
                characters += chunk
                index += take
            }
            // gdb leaves out one trailing NUL of an array it prints whole.
            var length = characters.count
            if count <= UInt64(limits.elements) + 1, UInt64(length) == count, length > 0, characters[length - 1] == 0 {
                length -= 1
            }
            output.write(string(characters[..<length], more: count > shown))
            return
        }
        guard depth < limits.depth else {
            output.write("{...}")
            return
        }
        output.write(rust ? "[" : "{")
        var index: UInt64 = 0
        var printed = 0
        while index < count && printed < limits.elements && !output.truncated {
            if index > 0 { output.write(", ") }
            guard let at = index.checkedMultiplying(size).flatMap({ offset.checkedAdding($0) }) else { break }
            // Equal neighbours, compared by their bytes (elements of at most 64 bytes); missing
            // ones are equal to each other, as gdb's value_contents_eq has it.
            var repeats: UInt64 = 1
            if size > 0, size <= 64 {
                let mine = fetch(source, offset: at, size: size)
                while index + repeats < count, output.comparisons < Output.maximumComparisons,
                    let next = (index + repeats).checkedMultiplying(size).flatMap({ offset.checkedAdding($0) }),
                    fetch(source, offset: next, size: size) == mine
                {
                    repeats += 1
                    output.comparisons += 1
                }
            }
            array(element: element, dimensions: rest, source, offset: at, depth: depth + 1, rust: rust, into: &output)
            if repeats > 10 {
                output.write(" <repeats \(repeats) times>")
                index += repeats
                printed += 10
            } else {
                index += 1
                printed += 1
            }
        }
        if index < count { output.write("...") }
        output.write(rust ? "]" : "}")
    }

    /// Whether some of the bytes of a composite value are missing (gdb then prints a character
    /// array element by element, `{<optimized out> <repeats 16 times>}`).
    private func isPartlyOptimizedOut(_ source: Source, offset: UInt64, size: UInt64) -> Bool {
        guard let known = source.known, let end = offset.checkedAdding(size), end <= UInt64(known.count) else {
            return false
        }
        return known[Int(offset)..<Int(end)].contains(false)
    }

    // MARK: - Member layout

    /// The members of what a pointer-to-aggregate type points at.
    func pointeeLayout(of type: UInt64) -> DWARFMemberLayout? {
        guard let pointer = strip(type), pointer.tag == DW_TAG_pointer_type || pointer.tag == DW_TAG_reference_type,
            let target = strip(pointer.target),
            target.tag == DW_TAG_structure_type || target.tag == DW_TAG_union_type || target.tag == DW_TAG_class_type
        else { return nil }
        var budget = 1024
        return DWARFMemberLayout(entries: entries(of: target, depth: 0, budget: &budget))
    }

    private func entries(of node: DWARFTypeNode, depth: Int, budget: inout Int) -> [DWARFMemberLayout.Entry] {
        guard depth < 6 else { return [] }
        var result: [DWARFMemberLayout.Entry] = []
        for member in node.members where budget > 0 {
            budget -= 1
            let type = strip(member.type)
            var entry = DWARFMemberLayout.Entry(
                name: member.isBase ? "" : (member.name ?? ""), offset: member.offset, size: byteSize(type) ?? 0, children: [])
            var inner = type
            if let array = type, array.tag == DW_TAG_array_type, let count = array.dimensions.first ?? nil {
                inner = strip(array.target)
                entry.count = count
                entry.elementSize = count > 0 ? entry.size / count : byteSize(inner)
            }
            if let inner, inner.tag == DW_TAG_structure_type || inner.tag == DW_TAG_union_type || inner.tag == DW_TAG_class_type {
                entry.children = entries(of: inner, depth: depth + 1, budget: &budget)
            }
            result.append(entry)
        }
        return result
    }
}

extension DWARFLocation {
    var isStackValue: Bool {
        if case .value = self { return true }
        return false
    }
}

// DWARF 5 section 7 (names verbatim).
let DW_TAG_array_type: UInt64 = 0x01
let DW_TAG_class_type: UInt64 = 0x02
let DW_TAG_enumeration_type: UInt64 = 0x04
let DW_TAG_member: UInt64 = 0x0d
let DW_TAG_pointer_type: UInt64 = 0x0f
let DW_TAG_reference_type: UInt64 = 0x10
let DW_TAG_subroutine_type: UInt64 = 0x15
let DW_TAG_unspecified_parameters: UInt64 = 0x18
let DW_TAG_inheritance: UInt64 = 0x1c
let DW_TAG_ptr_to_member_type: UInt64 = 0x1f
let DW_TAG_subrange_type: UInt64 = 0x21
let DW_TAG_base_type: UInt64 = 0x24
let DW_TAG_const_type: UInt64 = 0x26
let DW_TAG_enumerator: UInt64 = 0x28
let DW_TAG_volatile_type: UInt64 = 0x35
let DW_TAG_restrict_type: UInt64 = 0x37
let DW_TAG_unspecified_type: UInt64 = 0x3b
let DW_TAG_rvalue_reference_type: UInt64 = 0x42
let DW_TAG_atomic_type: UInt64 = 0x47
let DW_AT_byte_size: UInt64 = 0x0b
let DW_AT_bit_offset: UInt64 = 0x0c
let DW_AT_bit_size: UInt64 = 0x0d
let DW_AT_lower_bound: UInt64 = 0x22
let DW_AT_prototyped: UInt64 = 0x27
let DW_AT_upper_bound: UInt64 = 0x2f
let DW_AT_count: UInt64 = 0x37
let DW_AT_data_member_location: UInt64 = 0x38
let DW_AT_encoding: UInt64 = 0x3e
let DW_AT_external: UInt64 = 0x3f
let DW_AT_data_bit_offset: UInt64 = 0x6b
let DW_AT_enum_class: UInt64 = 0x6d
let DW_TAG_variant: UInt64 = 0x19
let DW_TAG_variant_part: UInt64 = 0x33
let DW_AT_discr: UInt64 = 0x15
let DW_AT_discr_value: UInt64 = 0x16
let DW_ATE_address: UInt64 = 0x01
let DW_ATE_boolean: UInt64 = 0x02
let DW_ATE_float: UInt64 = 0x04
let DW_ATE_signed: UInt64 = 0x05
let DW_ATE_signed_char: UInt64 = 0x06
let DW_ATE_unsigned: UInt64 = 0x07
let DW_ATE_unsigned_char: UInt64 = 0x08
let DW_ATE_UTF: UInt64 = 0x10
