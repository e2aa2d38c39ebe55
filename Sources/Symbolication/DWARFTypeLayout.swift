// DWARFTypeLayout: where a member lies inside a named C structure, and how big a named type is,
// from the DWARF of one ELF file: `offset(of: "interpreters.head", in: "_PyRuntimeState")`,
// `size(of: "PyASCIIObject")`. For readers of another program's memory whose structures change
// with the way the program was built (CPython's debug build), when the program's debug
// information is at hand.
//
// One pass over .debug_info, collecting only the types asked for by name: a structure, union or
// typedef DIE named so (a typedef's name or the struct's tag: `PyThreadState` or `_ts`). The
// pass stops after the first unit by which every name has a complete definition (C headers put
// the same types in most units, so that is usually one of the first units). A member path is
// then followed from that DIE: through DW_AT_type (typedef, const, volatile, restrict, _Atomic)
// to the structure or union a member has, into anonymous members, adding each member's
// DW_AT_data_member_location (a constant, DWARF 4 and 5, or DW_OP_plus_uconst, DWARF 2 and 3).
// A bitfield has no byte offset: asking for one is nil.
//
// The file is hostile: every read is bounds-checked (DWARFCursor), type chains are followed at
// most `maximumChain` steps, anonymous members at most `maximumNesting` deep, children at most
// `childBudget` DIEs over the whole object, and an offset or size past `maximumValue` is nil.
// Not Sendable: one caller at a time (it is made, asked and dropped in one call).

import BoundedBytes
import ObjectFile

public final class DWARFTypeLayout {
    /// The file the DWARF was read from (the module itself, or its separate debug file).
    public let file: ELFFile
    private let sections: DWARFSections
    private let units: DWARFUnits
    /// Each name asked for, with the DIE of its complete structure, union or type.
    private var definitions: [String: UInt64] = [:]
    private var childBudget = 1 << 20

    /// Type chains longer than this (typedef of const of typedef …) are refused: a cycle.
    static let maximumChain = 16
    /// Anonymous members inside anonymous members, deeper than this, are not searched.
    static let maximumNesting = 8
    /// The largest offset or size answered: no structure crashport asks about is near it.
    public static let maximumValue: UInt64 = 1 << 32

    /// The named types of `elf`'s own DWARF; nil when it has no readable .debug_info unit.
    /// Names not defined there are simply not answered.
    public init?(elf: ELFFile, typeNames: Set<String>) {
        file = elf
        let (sections, collected) = DWARFSections.open(elf: elf)
        guard sections.info.count > 0 else { return nil }
        let tables = DWARFAbbreviationTables(sections: sections)
        let units = DWARFUnits(sections: sections, collected: collected, tables: tables)
        tables.starts = Array(Set(units.headers.map(\.abbrevOffset))).sorted()
        guard !units.isEmpty else { return nil }
        self.sections = sections
        self.units = units
        collect(typeNames)
    }

    /// The named types from the DWARF of `elf` when it has any, else from its separate debug
    /// file (by build-id or .gnu_debuglink, as `locator` finds it); nil when neither has DWARF.
    public static func open(elf: ELFFile, locator: DebugFileLocator, typeNames: Set<String>) -> DWARFTypeLayout? {
        if elf.section(named: ".debug_info") != nil || elf.section(named: ".zdebug_info") != nil,
            let own = DWARFTypeLayout(elf: elf, typeNames: typeNames)
        {
            return own
        }
        return locator.debugFile(for: elf).flatMap { DWARFTypeLayout(elf: $0, typeNames: typeNames) }
    }

    /// The byte offset of `memberPath` (member names joined by "."; anonymous members are
    /// looked through) inside the type named `typeName`; nil when a name is not found, a
    /// member is a bitfield or has no constant location, or the DWARF is malformed.
    public func offset(of memberPath: String, in typeName: String) -> UInt64? {
        guard let start = definitions[typeName] else { return nil }
        var aggregate = start
        var total: UInt64 = 0
        let names = memberPath.split(separator: ".", omittingEmptySubsequences: false)
        for (position, name) in names.enumerated() {
            guard !name.isEmpty, let (offset, memberType) = member(named: name, in: aggregate, depth: 0),
                let sum = total.checkedAdding(offset), sum <= Self.maximumValue
            else { return nil }
            total = sum
            if position < names.count - 1 {
                guard let memberType, let next = aggregateType(from: memberType) else { return nil }
                aggregate = next
            }
        }
        return total
    }

    /// The byte size of the type named `typeName` (DW_AT_byte_size of what its typedefs name).
    public func size(of typeName: String) -> UInt64? {
        guard let start = definitions[typeName] else { return nil }
        return byteSize(of: start)
    }

    // MARK: - The pass

    private func collect(_ wanted: Set<String>) {
        guard !wanted.isEmpty else { return }
        // .debug_str is shared by the units: a name's offset there, once compared, is known.
        var knownStrings: [UInt64: String?] = [:]
        for index in 0..<units.count where definitions.count < wanted.count {
            let header = units.headers[index]
            guard header.unitType == DW_UT_compile || header.unitType == DW_UT_partial else { continue }
            let unit = units[index]
            var found: [(String, UInt64)] = []
            unit.walkDIEs { dieOffset, abbreviation, scope, cursor in
                switch abbreviation.tag {
                case DW_TAG_structure_type, DW_TAG_union_type, DW_TAG_typedef:
                    var name: String??
                    var declaration = false
                    let table = unit.abbreviations
                    for specIndex in abbreviation.attributes {
                        let spec = table.specs[specIndex]
                        guard let value = unit.readValue(form: spec.form, implicitConst: spec.implicitConst, cursor: &cursor)
                        else { return nil }
                        switch spec.attribute {
                        case DW_AT_name:
                            if let at = strOffset(value, unit: unit) {
                                if let known = knownStrings[at] {
                                    name = .some(known.flatMap { wanted.contains($0) ? $0 : nil })
                                } else {
                                    let text = sections.str.cString(at)
                                    let kept = text.flatMap { wanted.contains($0) ? $0 : nil }
                                    if knownStrings.count < 1 << 16 { knownStrings[at] = .some(kept) }
                                    name = .some(kept)
                                }
                            } else {
                                name = .some(unit.string(value).flatMap { wanted.contains($0) ? $0 : nil })
                            }
                        case DWARFTypeLayout.DW_AT_declaration: declaration = value.value != 0
                        default: break
                        }
                    }
                    if case .some(.some(let matched)) = name, !declaration, definitions[matched] == nil {
                        found.append((matched, UInt64(dieOffset)))
                    }
                default:
                    guard unit.skipAttributes(abbreviation, cursor: &cursor) else { return nil }
                }
                return scope
            }
            for (name, offset) in found where definitions[name] == nil {
                // A typedef of a struct this unit only declares does not define it: go on.
                if let target = completeType(from: offset) { definitions[name] = target }
            }
            if units.headers.count > 64 { units.forget(index) }
        }
    }

    /// The .debug_str offset of a strp or strx name (nil for an inline string).
    private func strOffset(_ value: DWARFFormValue, unit: DWARFUnit) -> UInt64? {
        switch value.form {
        case DW_FORM_strp: return value.value
        case DW_FORM_strx, DW_FORM_strx1, DW_FORM_strx2, DW_FORM_strx3, DW_FORM_strx4, DW_FORM_GNU_str_index:
            return unit.stringOffset(index: value.value)
        default: return nil
        }
    }

    // MARK: - DIEs

    /// What the type queries read of one DIE.
    private struct TypeDIE {
        var unit: DWARFUnit
        var tag: UInt64
        var hasChildren: Bool
        var name: String?
        var type: UInt64?
        var byteSize: UInt64?
        var location: UInt64?
        var locationIsConstant = true
        var declaration = false
        var bitfield = false
        var sibling: UInt64?
        /// Where its first child (if any) begins.
        var end: Int
    }

    private func unit(containing offset: UInt64) -> DWARFUnit? {
        guard let index = units.headers.lastIndex(atOrBelow: offset, key: \.offset) else { return nil }
        let header = units.headers[index]
        guard offset >= header.offset + UInt64(header.dieStart), offset < header.endOffset else { return nil }
        return units[index]
    }

    private func die(at offset: UInt64, readingName: Bool = false) -> TypeDIE? {
        guard let unit = unit(containing: offset) else { return nil }
        let table = unit.abbreviations
        var cursor = DWARFCursor(sections.info, offset: offset)
        guard let code = cursor.uleb(), code != 0, let index = table.index(of: code) else { return nil }
        let abbreviation = table.abbreviations[index]
        var die = TypeDIE(unit: unit, tag: abbreviation.tag, hasChildren: abbreviation.hasChildren, end: 0)
        for specIndex in abbreviation.attributes {
            let spec = table.specs[specIndex]
            guard let value = unit.readValue(form: spec.form, implicitConst: spec.implicitConst, cursor: &cursor) else {
                return nil
            }
            switch spec.attribute {
            case DW_AT_name: if readingName { die.name = unit.string(value) }
            case DWARFTypeLayout.DW_AT_type: die.type = unit.reference(value)
            case DWARFTypeLayout.DW_AT_byte_size: die.byteSize = unit.constant(value)
            case DWARFTypeLayout.DW_AT_data_member_location:
                if let constant = unit.constant(value) {
                    die.location = constant
                } else if value.form == DW_FORM_block1 || value.form == DW_FORM_block || value.form == DW_FORM_exprloc
                    || value.form == DW_FORM_block2 || value.form == DW_FORM_block4
                {
                    // DWARF 2 and 3: an expression, in practice DW_OP_plus_uconst alone.
                    var expression = DWARFCursor(sections.info, offset: value.value)
                    if expression.u8() == DWARFTypeLayout.DW_OP_plus_uconst, let constant = expression.uleb() {
                        die.location = constant
                    } else {
                        die.locationIsConstant = false
                    }
                } else {
                    die.locationIsConstant = false
                }
            case DWARFTypeLayout.DW_AT_declaration: die.declaration = value.value != 0
            case DWARFTypeLayout.DW_AT_bit_size, DWARFTypeLayout.DW_AT_data_bit_offset: die.bitfield = true
            case DW_AT_sibling: die.sibling = unit.reference(value)
            default: break
            }
        }
        die.end = cursor.offset
        return die
    }

    /// The offsets of the children of `parent`, in order, within the object's child budget.
    private func children(of parent: TypeDIE) -> [UInt64] {
        guard parent.hasChildren else { return [] }
        var result: [UInt64] = []
        var offset = UInt64(parent.end)
        let end = UInt64(parent.unit.dieEnd)
        while offset < end, childBudget > 0 {
            childBudget -= 1
            var cursor = DWARFCursor(sections.info, offset: offset)
            guard let code = cursor.uleb() else { break }
            if code == 0 { break }
            guard let child = die(at: offset) else { break }
            result.append(offset)
            guard child.hasChildren else {
                offset = UInt64(child.end)
                continue
            }
            if let sibling = child.sibling, sibling > offset, sibling <= end {
                offset = sibling
                continue
            }
            guard let after = child.unit.skipSubtree(from: child.end, in: sections.info, budget: &childBudget) else { break }
            offset = UInt64(after)
        }
        return result
    }

    /// The DIE a type reference names, and its offset, through typedefs and qualifiers, at most
    /// `maximumChain` steps: a cycle ends there as nil.
    private func resolved(_ offset: UInt64) -> (offset: UInt64, die: TypeDIE)? {
        var current = offset
        for _ in 0..<Self.maximumChain {
            guard let die = die(at: current) else { return nil }
            switch die.tag {
            case DW_TAG_typedef, DWARFTypeLayout.DW_TAG_const_type, DWARFTypeLayout.DW_TAG_volatile_type,
                DWARFTypeLayout.DW_TAG_restrict_type, DWARFTypeLayout.DW_TAG_atomic_type:
                guard let next = die.type else { return nil }
                current = next
            default:
                return (current, die)
            }
        }
        return nil
    }

    /// The offset of the complete structure or union (or other sized type) a named DIE defines.
    private func completeType(from offset: UInt64) -> UInt64? {
        guard let (target, die) = resolved(offset), !die.declaration, let size = die.byteSize, size <= Self.maximumValue
        else { return nil }
        return target
    }

    /// The structure or union a member's type is.
    private func aggregateType(from offset: UInt64) -> UInt64? {
        guard let target = completeType(from: offset), let die = die(at: target),
            die.tag == DW_TAG_structure_type || die.tag == DW_TAG_union_type
        else { return nil }
        return target
    }

    private func byteSize(of offset: UInt64) -> UInt64? {
        guard let die = resolved(offset)?.die, let size = die.byteSize, size <= Self.maximumValue else { return nil }
        return size
    }

    /// The offset inside `aggregate` of its member `name` (looked for through anonymous
    /// members too) and the member's type.
    private func member(named name: Substring, in aggregate: UInt64, depth: Int) -> (UInt64, UInt64?)? {
        guard depth <= Self.maximumNesting, let parent = die(at: aggregate),
            parent.tag == DW_TAG_structure_type || parent.tag == DW_TAG_union_type
        else { return nil }
        var anonymous: [(UInt64, UInt64)] = []
        for offset in children(of: parent) {
            guard let child = die(at: offset, readingName: true), child.tag == DWARFTypeLayout.DW_TAG_member else {
                continue
            }
            // A union's members have no location: they are all at 0.
            let location: UInt64? = child.locationIsConstant ? (child.location ?? 0) : nil
            if let childName = child.name {
                guard childName == name else { continue }
                guard !child.bitfield, let location else { return nil }
                return (location, child.type)
            }
            if let type = child.type, let location { anonymous.append((location, type)) }
        }
        for (location, type) in anonymous {
            guard let inner = aggregateType(from: type),
                let (offset, memberType) = member(named: name, in: inner, depth: depth + 1),
                let sum = location.checkedAdding(offset)
            else { continue }
            return (sum, memberType)
        }
        return nil
    }

    // DWARF 5, section 7 (names verbatim).
    static let DW_TAG_member: UInt64 = 0x0d
    static let DW_TAG_const_type: UInt64 = 0x26
    static let DW_TAG_volatile_type: UInt64 = 0x35
    static let DW_TAG_restrict_type: UInt64 = 0x37
    static let DW_TAG_atomic_type: UInt64 = 0x47
    static let DW_AT_byte_size: UInt64 = 0x0b
    static let DW_AT_bit_size: UInt64 = 0x0d
    static let DW_AT_data_member_location: UInt64 = 0x38
    static let DW_AT_declaration: UInt64 = 0x3c
    static let DW_AT_type: UInt64 = 0x49
    static let DW_AT_data_bit_offset: UInt64 = 0x6b
    static let DW_OP_plus_uconst: UInt8 = 0x23
}

let DW_TAG_structure_type: UInt64 = 0x13
let DW_TAG_typedef: UInt64 = 0x16
let DW_TAG_union_type: UInt64 = 0x17
