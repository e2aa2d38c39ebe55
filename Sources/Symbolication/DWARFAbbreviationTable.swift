// DWARFAbbreviationTable: one abbreviation table of .debug_abbrev, decoded for one unit format.
//
// Each attribute's form is resolved once, here, into how to step over its value (a fixed size,
// a LEB128, a string, a counted block), and an abbreviation whose values all have fixed sizes
// records their sum: the DIE walk then skips the DIEs it does not care about (types, variables,
// parameters: nearly all of them) with one addition instead of a decode per attribute.
//
// A table is immutable once built. Tables are cached by DWARFInfo per (offset, format).

/// The shape of a unit that form sizes depend on.
import ObjectFile
import BoundedBytes

struct DWARFFormat: Hashable, Sendable {
    var version: UInt16
    var addressSize: UInt8
    var offsetSize: UInt8
}

struct DWARFAttributeSpec: Sendable {
    enum Skip: UInt8, Sendable {
        case fixed, uleb, sleb, cString, block1, block2, block4, blockULEB, indirect, invalid
    }

    /// DW_AT_* and DW_FORM_*, kept in 16 bits (16 bytes a spec instead of 32: libc's debug file
    /// has 400,000 of them). Every attribute and form crashport knows fits; a larger value from
    /// a file reads as 0xFFFF, which matches none (an unknown form is `.invalid`, as before).
    private var attributeCode: UInt16
    private var formCode: UInt16
    var skip: Skip
    var size: UInt8
    var implicitConst: Int64

    var attribute: UInt64 { UInt64(attributeCode) }
    var form: UInt64 { UInt64(formCode) }

    init(attribute: UInt64, form: UInt64, implicitConst: Int64, skip: Skip, size: UInt8) {
        attributeCode = UInt16(clamping: attribute)
        formCode = UInt16(clamping: form)
        self.implicitConst = implicitConst
        self.skip = skip
        self.size = size
    }

    /// How to step over a value of `form` in a unit of `format`; `.invalid` for unknown forms,
    /// which end the walk of the unit (its values' sizes are unknowable).
    static func skip(for form: UInt64, format: DWARFFormat) -> (Skip, UInt8) {
        let offsetSize = format.offsetSize, addressSize = format.addressSize
        switch form {
        case DW_FORM_addr: return (.fixed, addressSize)
        case DW_FORM_block2: return (.block2, 0)
        case DW_FORM_block4: return (.block4, 0)
        case DW_FORM_data2, DW_FORM_ref2, DW_FORM_strx2, DW_FORM_addrx2: return (.fixed, 2)
        case DW_FORM_data4, DW_FORM_ref4, DW_FORM_ref_sup4, DW_FORM_strx4, DW_FORM_addrx4: return (.fixed, 4)
        case DW_FORM_data8, DW_FORM_ref8, DW_FORM_ref_sig8, DW_FORM_ref_sup8: return (.fixed, 8)
        case DW_FORM_strx3, DW_FORM_addrx3: return (.fixed, 3)
        case DW_FORM_string: return (.cString, 0)
        case DW_FORM_block, DW_FORM_exprloc: return (.blockULEB, 0)
        case DW_FORM_block1: return (.block1, 0)
        case DW_FORM_data1, DW_FORM_ref1, DW_FORM_flag, DW_FORM_strx1, DW_FORM_addrx1: return (.fixed, 1)
        case DW_FORM_sdata: return (.sleb, 0)
        case DW_FORM_udata, DW_FORM_ref_udata, DW_FORM_strx, DW_FORM_addrx, DW_FORM_loclistx, DW_FORM_rnglistx,
            DW_FORM_GNU_addr_index, DW_FORM_GNU_str_index:
            return (.uleb, 0)
        case DW_FORM_strp, DW_FORM_line_strp, DW_FORM_sec_offset, DW_FORM_strp_sup, DW_FORM_GNU_ref_alt,
            DW_FORM_GNU_strp_alt:
            return (.fixed, offsetSize)
        case DW_FORM_ref_addr: return (.fixed, format.version <= 2 ? addressSize : offsetSize)
        case DW_FORM_indirect: return (.indirect, 0)
        case DW_FORM_flag_present, DW_FORM_implicit_const: return (.fixed, 0)
        case DW_FORM_data16: return (.fixed, 16)
        default: return (.invalid, 0)
        }
    }
}

struct DWARFAbbreviation: Sendable {
    var tag: UInt64
    var hasChildren: Bool
    /// Subprogram or inlined subroutine: the DIEs the inline tree records.
    var isSubroutine: Bool
    var attributes: Range<Int>
    /// The size of all attribute values when every one is fixed-size, else -1.
    var fixedSize: Int
}

final class DWARFAbbreviationTable: Sendable {
    let format: DWARFFormat
    let abbreviations: [DWARFAbbreviation]
    let specs: [DWARFAttributeSpec]
    /// Codes are usually 1, 2, 3, … in order; then `codes` is nil and lookup is an index.
    private let codes: [UInt64: Int]?

    /// Parses the table at `offset` of .debug_abbrev; a malformed entry ends the table early.
    /// Reads at most `budget` bytes and deducts what it read (bounding the work that many
    /// units with distinct hostile offsets could cause).
    init(section: ByteView, offset: UInt64, format: DWARFFormat, budget: inout Int) {
        self.format = format
        var abbreviations: [DWARFAbbreviation] = []
        var specs: [DWARFAttributeSpec] = []
        var cursor = DWARFCursor(section, offset: offset)
        var sparse: [UInt64: Int] = [:]
        var dense = true
        let start = cursor.offset
        defer { budget -= cursor.offset - start }
        while cursor.offset - start < budget, let code = cursor.uleb(), code != 0 {
            guard let tag = cursor.uleb(), let children = cursor.u8() else { break }
            let first = specs.count
            var fixedSize = 0
            var complete = false
            while let attribute = cursor.uleb(), let form = cursor.uleb() {
                if attribute == 0 && form == 0 { complete = true; break }
                var implicitConst: Int64 = 0
                if form == DW_FORM_implicit_const {
                    guard let value = cursor.sleb() else { break }
                    implicitConst = value
                }
                let (skip, size) = DWARFAttributeSpec.skip(for: form, format: format)
                if skip == .fixed && fixedSize >= 0 { fixedSize += Int(size) } else { fixedSize = -1 }
                specs.append(
                    DWARFAttributeSpec(
                        attribute: attribute, form: form, implicitConst: implicitConst, skip: skip, size: size))
            }
            guard complete else { specs.removeSubrange(first...); break }
            if dense && code != UInt64(abbreviations.count) + 1 {
                dense = false
                for index in abbreviations.indices { sparse[UInt64(index) + 1] = index }
            }
            if !dense && sparse[code] == nil { sparse[code] = abbreviations.count }
            abbreviations.append(
                DWARFAbbreviation(
                    tag: tag, hasChildren: children != 0,
                    isSubroutine: tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine,
                    attributes: first..<specs.count, fixedSize: fixedSize))
        }
        self.abbreviations = abbreviations
        self.specs = specs
        codes = dense ? nil : sparse
    }

    @inline(__always)
    func index(of code: UInt64) -> Int? {
        if let codes { return codes[code] }
        guard code >= 1 && code <= UInt64(abbreviations.count) else { return nil }
        return Int(code - 1)
    }
}

/// The abbreviation tables of one DWARFInfo, decoded on first use and shared by the units that
/// name the same (offset, format). Used only behind DWARFInfo's mutex (or during its init). The
/// bytes decoded over all tables are bounded by a budget derived from .debug_abbrev's size, so
/// units naming many distinct hostile offsets cannot multiply the work.
/// Not Sendable: its DWARFInfo's units hold it, in the DWARFLookups behind the DWARFInfo's mutex.
final class DWARFAbbreviationTables {
    private struct Key: Hashable {
        var offset: UInt64
        var format: DWARFFormat
    }

    private let sections: DWARFSections
    private var tables: [Key: DWARFAbbreviationTable] = [:]
    private var budget: Int
    /// The tables' offsets named by the units, sorted: where a table of an on-demand
    /// .debug_abbrev ends at the latest (the next one's start).
    var starts: [UInt64] = []

    init(sections: DWARFSections) {
        self.sections = sections
        budget = 4 * sections.abbrev.count + (1 << 20)
    }

    func table(offset: UInt64, format: DWARFFormat) -> DWARFAbbreviationTable {
        let key = Key(offset: offset, format: format)
        if let table = tables[key] { return table }
        if sections.abbrevOnDemand != nil {
            let next = starts.lastIndex(atOrBelow: offset, key: { $0 }).map { $0 + 1 } ?? 0
            let end = next < starts.count && starts[next] > offset ? starts[next] : UInt64(sections.abbrev.count)
            sections.prepareAbbreviations(offset..<max(end, offset))
        }
        let section = sections.abbrev
        let table = DWARFAbbreviationTable(section: section, offset: offset, format: format, budget: &budget)
        tables[key] = table
        return table
    }
}
