// DWARFUnit: one unit of .debug_info (DWARF 2–5 headers, all unit types), what its unit DIE
// says (bases, comp_dir, stmt_list, base address), and the decoding of attribute values in its
// context: addrx through .debug_addr, strx through .debug_str_offsets, range lists through
// .debug_ranges (v2–4) or .debug_rnglists (v5, including rnglistx).
//
// Ownership and threads: a unit belongs to its DWARFInfo. Header and unit-DIE fields are set
// during DWARFInfo.init; `lineTable` and `tree` are filled lazily, behind DWARFInfo's mutex.

import BoundedBytes
import ObjectFile

/// An attribute value as read: `value` is the address, constant, offset or index the form
/// encodes; for DW_FORM_string, blocks and data16 it is the offset of the bytes in .debug_info.
struct DWARFFormValue: Sendable {
    var form: UInt64
    var value: UInt64
}

struct DWARFRange: Sendable {
    var low: UInt64
    var high: UInt64
}

/// Not Sendable: its lazy tables are filled as lookups need them, in the DWARFLookups behind its
/// DWARFInfo's mutex.
final class DWARFUnit {
    let index: Int
    /// Offsets in .debug_info: the unit header, one past the unit's end, the first DIE.
    let offset: UInt64
    let endOffset: UInt64
    let dieOffset: UInt64
    let format: DWARFFormat
    let unitType: UInt8
    let abbrevOffset: UInt64
    let sections: DWARFSections
    private let tables: DWARFAbbreviationTables

    /// What the unit DIE says, read on first use: a file of a thousand units (libc) decodes
    /// only the abbreviation tables and unit DIEs of the units its lookups fall in.
    struct UnitDIE {
        var tag: UInt64 = 0
        var compDir: String?
        var stmtList: UInt64?
        var baseAddress: UInt64?
        var addrBase: UInt64?
        var strOffsetsBase: UInt64?
        var rnglistsBase: UInt64?
        var loclistsBase: UInt64?
        /// DW_AT_language (DW_LANG_*), for how values and types are written.
        var language: UInt64?
        var code = DWARFCodeAttributes()
    }

    /// A unit DIE once read, boxed: a unit not yet looked into (most of a large library's)
    /// costs a pointer for it, not the 180 bytes of the fields (libc6-dbg: 1,900 units).
    private final class LoadedDIE {
        var die = UnitDIE()
    }

    // Lazily, behind DWARFInfo's mutex (or during its init).
    private var loadedAbbreviations: DWARFAbbreviationTable?
    private var loadedDIE: LoadedDIE?
    var lineTableLoaded = false
    var lineTable: DWARFLineTable?
    var tree: DWARFInlineTree?
    /// Call sites, for tail-call frames (DWARFInfo+CallSites), built on first use.
    var callSites: DWARFCallSites?

    /// The unit's abbreviation table, decoded on first use (shared with the units that use the
    /// same table).
    var abbreviations: DWARFAbbreviationTable {
        if let loadedAbbreviations { return loadedAbbreviations }
        // Whoever reads the unit's DIEs asks for its table first: the unit's bytes come with it.
        sections.prepareInfo(offset..<endOffset)
        let table = tables.table(offset: abbrevOffset, format: format)
        loadedAbbreviations = table
        return table
    }

    var unitDIE: UnitDIE {
        if let loadedDIE { return loadedDIE.die }
        // The DIE's own decoding reads bases through `unitDIE`: start from an empty one.
        let box = LoadedDIE()
        loadedDIE = box
        box.die = readUnitDIE()
        return box.die
    }

    var tag: UInt64 { unitDIE.tag }
    var compDir: String? { unitDIE.compDir }
    var stmtList: UInt64? { unitDIE.stmtList }
    var baseAddress: UInt64? { unitDIE.baseAddress }
    var addrBase: UInt64? { unitDIE.addrBase }
    var strOffsetsBase: UInt64? { unitDIE.strOffsetsBase }
    var rnglistsBase: UInt64? { unitDIE.rnglistsBase }
    var loclistsBase: UInt64? { unitDIE.loclistsBase }
    var language: UInt64? { unitDIE.language }

    var isCodeUnit: Bool {
        (unitType == DW_UT_compile || unitType == DW_UT_partial || unitType == DW_UT_skeleton)
            && (tag == DW_TAG_compile_unit || tag == DW_TAG_partial_unit || tag == DW_TAG_skeleton_unit)
    }

    fileprivate init(
        index: Int, offset: UInt64, endOffset: UInt64, dieOffset: UInt64, format: DWARFFormat, unitType: UInt8,
        abbrevOffset: UInt64, sections: DWARFSections, tables: DWARFAbbreviationTables
    ) {
        self.index = index
        self.offset = offset
        self.endOffset = endOffset
        self.dieOffset = dieOffset
        self.format = format
        self.unitType = unitType
        self.abbrevOffset = abbrevOffset
        self.sections = sections
        self.tables = tables
    }

    /// Reads the attributes of the unit DIE that the rest of the unit is decoded against.
    private func readUnitDIE() -> UnitDIE {
        var die = UnitDIE()
        let abbreviations = self.abbreviations
        var cursor = DWARFCursor(sections.info, offset: dieOffset)
        guard let code = cursor.uleb(),
            let abbreviation = abbreviations.index(of: code).map({
                abbreviations.abbreviations[$0]
            })
        else { return die }
        die.tag = abbreviation.tag
        var dir: DWARFFormValue?, entryPC: DWARFFormValue?
        for specIndex in abbreviation.attributes {
            let spec = abbreviations.specs[specIndex]
            guard
                let value = readValue(
                    form: spec.form, implicitConst: spec.implicitConst, cursor: &cursor)
            else { break }
            if die.code.take(spec.attribute, value) { continue }
            switch spec.attribute {
            case DW_AT_comp_dir: dir = value
            case DW_AT_stmt_list: die.stmtList = value.value
            case DW_AT_entry_pc: entryPC = value
            case DW_AT_addr_base, DW_AT_GNU_addr_base: die.addrBase = value.value
            case DW_AT_str_offsets_base: die.strOffsetsBase = value.value
            case DW_AT_rnglists_base: die.rnglistsBase = value.value
            case DW_AT_loclists_base: die.loclistsBase = value.value
            case DW_AT_language: die.language = constant(value)
            default: break
            }
        }
        // Strings and addresses are read against the bases just found.
        loadedDIE?.die = die
        if let dir { die.compDir = string(dir) }
        die.baseAddress = (die.code.lowPC ?? entryPC).flatMap { address($0) }
        return die
    }

    /// The unit DIE's own address ranges (low/high pc, else DW_AT_ranges), as LLVM reads them.
    func unitRanges(into ranges: inout [DWARFRange], budget: inout Int) {
        addressRanges(of: unitDIE.code, into: &ranges, budget: &budget)
    }

    // MARK: - Attribute values

    /// Reads one value of `form`; nil at the end of data or for an unknown form.
    @inline(__always)
    func readValue(form: UInt64, implicitConst: Int64, cursor: inout DWARFCursor) -> DWARFFormValue? {
        var form = form
        for _ in 0..<4 {
            let value: UInt64
            switch form {
            case DW_FORM_addr: guard let v = cursor.unsigned(size: Int(format.addressSize)) else { return nil }; value = v
            case DW_FORM_data1, DW_FORM_ref1, DW_FORM_flag, DW_FORM_strx1, DW_FORM_addrx1:
                guard let v = cursor.u8() else { return nil }; value = UInt64(v)
            case DW_FORM_data2, DW_FORM_ref2, DW_FORM_strx2, DW_FORM_addrx2:
                guard let v = cursor.u16() else { return nil }; value = UInt64(v)
            case DW_FORM_strx3, DW_FORM_addrx3:
                guard let v = cursor.unsigned(size: 3) else { return nil }; value = v
            case DW_FORM_data4, DW_FORM_ref4, DW_FORM_ref_sup4, DW_FORM_strx4, DW_FORM_addrx4:
                guard let v = cursor.u32() else { return nil }; value = UInt64(v)
            case DW_FORM_data8, DW_FORM_ref8, DW_FORM_ref_sig8, DW_FORM_ref_sup8:
                guard let v = cursor.u64() else { return nil }; value = v
            case DW_FORM_udata, DW_FORM_ref_udata, DW_FORM_strx, DW_FORM_addrx, DW_FORM_loclistx, DW_FORM_rnglistx,
                DW_FORM_GNU_addr_index, DW_FORM_GNU_str_index:
                guard let v = cursor.uleb() else { return nil }; value = v
            case DW_FORM_sdata: guard let v = cursor.sleb() else { return nil }; value = UInt64(bitPattern: v)
            case DW_FORM_strp, DW_FORM_line_strp, DW_FORM_sec_offset, DW_FORM_strp_sup, DW_FORM_GNU_ref_alt,
                DW_FORM_GNU_strp_alt:
                guard let v = cursor.unsigned(size: Int(format.offsetSize)) else { return nil }; value = v
            case DW_FORM_ref_addr:
                let size = format.version <= 2 ? format.addressSize : format.offsetSize
                guard let v = cursor.unsigned(size: Int(size)) else { return nil }; value = v
            case DW_FORM_string: guard let start = cursor.skipCString() else { return nil }; value = UInt64(start)
            case DW_FORM_block, DW_FORM_exprloc:
                guard let length = cursor.uleb() else { return nil }
                value = UInt64(cursor.offset)
                guard cursor.skip(length) else { return nil }
            case DW_FORM_block1:
                guard let length = cursor.u8() else { return nil }
                value = UInt64(cursor.offset)
                guard cursor.skip(Int(length)) else { return nil }
            case DW_FORM_block2:
                guard let length = cursor.u16() else { return nil }
                value = UInt64(cursor.offset)
                guard cursor.skip(Int(length)) else { return nil }
            case DW_FORM_block4:
                guard let length = cursor.u32() else { return nil }
                value = UInt64(cursor.offset)
                guard cursor.skip(UInt64(length)) else { return nil }
            case DW_FORM_data16: value = UInt64(cursor.offset); guard cursor.skip(16) else { return nil }
            case DW_FORM_flag_present: value = 1
            case DW_FORM_implicit_const: value = UInt64(bitPattern: implicitConst)
            case DW_FORM_indirect:
                guard let actual = cursor.uleb() else { return nil }
                form = actual
                continue
            default: return nil
            }
            return DWARFFormValue(form: form, value: value)
        }
        return nil
    }

    /// One past the unit's last DIE byte, within the section.
    var dieEnd: Int { Int(min(endOffset, UInt64(sections.info.count))) }

    /// Visits the unit's DIEs in order, each with `cursor` at its attribute values and the scope
    /// its parent gave its children (-1 at the top). `visit` reads or skips the values and
    /// returns the scope of the DIE's own children, or nil to stop (a value that does not
    /// decode). The walk ends too at the unit's end, a truncated code or an unknown
    /// abbreviation; an end-of-siblings entry at the top (padding) is stepped over.
    @inline(__always)
    func walkDIEs(
        _ visit: (_ dieOffset: Int, _ abbreviation: DWARFAbbreviation, _ scope: Int32, _ cursor: inout DWARFCursor) -> Int32?
    ) {
        let table = abbreviations
        var cursor = DWARFCursor(sections.info, offset: dieOffset)
        let end = dieEnd
        var parents: [Int32] = []
        var current: Int32 = -1
        while cursor.offset < end {
            let offset = cursor.offset
            guard let code = cursor.uleb() else { return }
            if code == 0 {
                if let parent = parents.popLast() { current = parent }
                continue
            }
            guard let index = table.index(of: code) else { return }
            let abbreviation = table.abbreviations[index]
            guard let scope = visit(offset, abbreviation, current, &cursor) else { return }
            if abbreviation.hasChildren {
                parents.append(current)
                current = scope
            }
        }
    }

    /// Steps over the attribute values of a DIE whose abbreviation is `abbreviation`.
    @inline(__always)
    func skipAttributes(_ abbreviation: DWARFAbbreviation, cursor: inout DWARFCursor) -> Bool {
        if abbreviation.fixedSize >= 0 { return cursor.skip(abbreviation.fixedSize) }
        let abbreviations = self.abbreviations
        for index in abbreviation.attributes {
            let spec = abbreviations.specs[index]
            switch spec.skip {
            case .fixed: guard cursor.skip(Int(spec.size)) else { return false }
            case .uleb: guard cursor.uleb() != nil else { return false }
            case .sleb: guard cursor.sleb() != nil else { return false }
            case .cString: guard cursor.skipCString() != nil else { return false }
            case .block1: guard let length = cursor.u8(), cursor.skip(Int(length)) else { return false }
            case .block2: guard let length = cursor.u16(), cursor.skip(Int(length)) else { return false }
            case .block4: guard let length = cursor.u32(), cursor.skip(UInt64(length)) else { return false }
            case .blockULEB: guard let length = cursor.uleb(), cursor.skip(length) else { return false }
            case .indirect:
                guard readValue(form: spec.form, implicitConst: 0, cursor: &cursor) != nil else { return false }
            case .invalid: return false
            }
        }
        return true
    }

    /// An address from DW_FORM_addr or an index into .debug_addr.
    func address(_ value: DWARFFormValue) -> UInt64? {
        switch value.form {
        case DW_FORM_addr: return value.value
        case DW_FORM_addrx, DW_FORM_addrx1, DW_FORM_addrx2, DW_FORM_addrx3, DW_FORM_addrx4, DW_FORM_GNU_addr_index:
            return indexedAddress(value.value)
        default: return nil
        }
    }

    func indexedAddress(_ index: UInt64) -> UInt64? {
        let size = UInt64(format.addressSize)
        let base = addrBase ?? (format.version >= 5 ? (format.offsetSize == 8 ? 16 : 8) : 0)
        let (scaled, overflow1) = index.multipliedReportingOverflow(by: size)
        let (at, overflow2) = base.addingReportingOverflow(scaled)
        guard !overflow1, !overflow2 else { return nil }
        return size == 8 ? sections.addr.u64(at) : sections.addr.u32(at).map(UInt64.init)
    }

    /// A constant of the data/udata/sdata/implicit_const classes (sdata as its bit pattern).
    func constant(_ value: DWARFFormValue) -> UInt64? {
        switch value.form {
        case DW_FORM_data1, DW_FORM_data2, DW_FORM_data4, DW_FORM_data8, DW_FORM_udata, DW_FORM_sdata,
            DW_FORM_implicit_const:
            return value.value
        default: return nil
        }
    }

    /// The .debug_info offset a reference points at; nil for forms into other files.
    func reference(_ value: DWARFFormValue) -> UInt64? {
        switch value.form {
        case DW_FORM_ref1, DW_FORM_ref2, DW_FORM_ref4, DW_FORM_ref8, DW_FORM_ref_udata:
            let (target, overflow) = offset.addingReportingOverflow(value.value)
            return overflow ? nil : target
        case DW_FORM_ref_addr: return value.value
        default: return nil  // ref_sig8 (type units), ref_sup*, GNU_ref_alt: other files
        }
    }

    /// A string attribute: inline, .debug_str, .debug_line_str or through .debug_str_offsets.
    func string(_ value: DWARFFormValue) -> String? {
        switch value.form {
        case DW_FORM_string: return sections.info.cString(value.value)
        case DW_FORM_strp: return sections.str.cString(value.value)
        case DW_FORM_line_strp: return sections.lineStr.cString(value.value)
        case DW_FORM_strx, DW_FORM_strx1, DW_FORM_strx2, DW_FORM_strx3, DW_FORM_strx4, DW_FORM_GNU_str_index:
            guard let offset = stringOffset(index: value.value) else { return nil }
            return sections.str.cString(offset)
        default: return nil  // strp_sup, GNU_strp_alt: in a supplementary file we do not read
        }
    }

    func stringOffset(index: UInt64) -> UInt64? {
        let size = UInt64(format.offsetSize)
        let base = strOffsetsBase ?? (format.version >= 5 ? (size == 8 ? 16 : 8) : 0)
        let (scaled, overflow1) = index.multipliedReportingOverflow(by: size)
        let (at, overflow2) = base.addingReportingOverflow(scaled)
        guard !overflow1, !overflow2 else { return nil }
        return size == 8 ? sections.strOffsets.u64(at) : sections.strOffsets.u32(at).map(UInt64.init)
    }

    // MARK: - Address ranges

    /// The ranges of a DIE: [low_pc, high_pc) when both are present (high_pc an address or an
    /// offset from low_pc), else its range list. Empty and inverted ranges are dropped; at most
    /// `budget` ranges are appended in total, so shared or looping lists cannot exhaust memory.
    func addressRanges(of code: DWARFCodeAttributes, into output: inout [DWARFRange], budget: inout Int) {
        if let lowPC = code.lowPC, let highPC = code.highPC, let low = address(lowPC) {
            let high: UInt64?
            if let absolute = address(highPC) { high = absolute } else { high = constant(highPC).map { low &+ $0 } }
            if let high { append(low, high, into: &output, budget: &budget) }
            return
        }
        guard let ranges = code.ranges else { return }
        if format.version >= 5 {
            if ranges.form == DW_FORM_rnglistx {
                let size = UInt64(format.offsetSize)
                let base = rnglistsBase ?? (size == 8 ? 20 : 12)
                let (scaled, overflow1) = ranges.value.multipliedReportingOverflow(by: size)
                let (at, overflow2) = base.addingReportingOverflow(scaled)
                guard !overflow1, !overflow2,
                    let relative = size == 8 ? sections.rnglists.u64(at) : sections.rnglists.u32(at).map(UInt64.init)
                else { return }
                let (listOffset, overflow3) = base.addingReportingOverflow(relative)
                guard !overflow3 else { return }
                rangeList(at: listOffset, into: &output, budget: &budget)
            } else if ranges.form == DW_FORM_sec_offset || constant(ranges) != nil {
                rangeList(at: ranges.value, into: &output, budget: &budget)
            }
        } else if ranges.form == DW_FORM_sec_offset || constant(ranges) != nil {
            legacyRangeList(at: ranges.value, into: &output, budget: &budget)
        }
    }

    @inline(__always)
    private func append(_ low: UInt64, _ high: UInt64, into output: inout [DWARFRange], budget: inout Int) {
        guard low < high, budget > 0 else { return }
        // The tombstone linkers write for discarded code (-1, or -2 in .debug_ranges).
        let tombstone: UInt64 = format.addressSize == 8 ? .max : UInt64(UInt32.max)
        guard low < tombstone - 1 else { return }
        budget -= 1
        output.append(DWARFRange(low: low, high: high))
    }

    /// A .debug_ranges list (DWARF 2–4): pairs of addresses relative to the base address; an
    /// all-ones start selects a new base; (0, 0) ends the list.
    private func legacyRangeList(at offset: UInt64, into output: inout [DWARFRange], budget: inout Int) {
        var cursor = DWARFCursor(sections.ranges, offset: offset)
        guard offset < UInt64(sections.ranges.count) else { return }
        let size = Int(format.addressSize)
        let selection: UInt64 = size == 8 ? .max : UInt64(UInt32.max)
        var base = baseAddress
        while budget > 0, let start = cursor.unsigned(size: size), let end = cursor.unsigned(size: size) {
            if start == 0 && end == 0 { return }
            if start == selection { base = end; continue }
            let offsetBy = base ?? 0
            append(start &+ offsetBy, end &+ offsetBy, into: &output, budget: &budget)
        }
    }

    /// A .debug_rnglists list (DWARF 5), every DW_RLE_* entry kind.
    private func rangeList(at offset: UInt64, into output: inout [DWARFRange], budget: inout Int) {
        guard offset < UInt64(sections.rnglists.count) else { return }
        var cursor = DWARFCursor(sections.rnglists, offset: offset)
        let size = Int(format.addressSize)
        var base = baseAddress
        while budget > 0, let kind = cursor.u8() {
            switch kind {
            case DW_RLE_end_of_list: return
            case DW_RLE_base_addressx:
                guard let index = cursor.uleb() else { return }
                base = indexedAddress(index)
            case DW_RLE_startx_endx:
                guard let first = cursor.uleb(), let second = cursor.uleb() else { return }
                if let low = indexedAddress(first), let high = indexedAddress(second) {
                    append(low, high, into: &output, budget: &budget)
                }
            case DW_RLE_startx_length:
                guard let first = cursor.uleb(), let length = cursor.uleb() else { return }
                if let low = indexedAddress(first) { append(low, low &+ length, into: &output, budget: &budget) }
            case DW_RLE_offset_pair:
                guard let start = cursor.uleb(), let end = cursor.uleb() else { return }
                let offsetBy = base ?? 0
                append(start &+ offsetBy, end &+ offsetBy, into: &output, budget: &budget)
            case DW_RLE_base_address:
                guard let address = cursor.unsigned(size: size) else { return }
                base = address
            case DW_RLE_start_end:
                guard let low = cursor.unsigned(size: size), let high = cursor.unsigned(size: size) else { return }
                append(low, high, into: &output, budget: &budget)
            case DW_RLE_start_length:
                guard let low = cursor.unsigned(size: size), let length = cursor.uleb() else { return }
                append(low, low &+ length, into: &output, budget: &budget)
            default: return
            }
        }
    }
}

/// The attributes that place a DIE's code (DW_AT_low_pc, DW_AT_high_pc, DW_AT_ranges), as the
/// unit DIE, the inline tree and the call-site reader each collect them on their walk.
struct DWARFCodeAttributes {
    var lowPC: DWARFFormValue?, highPC: DWARFFormValue?, ranges: DWARFFormValue?

    /// Keeps `value` when `attribute` is one of the three; whether it was.
    mutating func take(_ attribute: UInt64, _ value: DWARFFormValue) -> Bool {
        switch attribute {
        case DW_AT_low_pc: lowPC = value
        case DW_AT_high_pc: highPC = value
        case DW_AT_ranges: ranges = value
        default: return false
        }
        return true
    }
}

/// The units of a .debug_info: every header, 32 bytes each, and a unit's DWARFUnit (with its
/// lazy tables) made when the unit is first used. A report's lookups fall in a few of
/// libc6-dbg's 2,000 units; one object each for all of them was a quarter of a megabyte of a
/// report's peak. Not Sendable: units are made in the DWARFLookups behind the DWARFInfo's mutex
/// (or during its init).
final class DWARFUnits {
    /// Offsets in .debug_info: the unit header, one past the unit's end (`dieStart`: from the
    /// header to the first DIE, which a header of at most `headerSlot` bytes bounds).
    struct Header: Equatable, Sendable {
        var offset: UInt64
        var endOffset: UInt64
        var abbrevOffset: UInt64
        var format: DWARFFormat
        var unitType: UInt8
        var dieStart: UInt8
    }

    let headers: [Header]
    private var made: [DWARFUnit?]
    private let sections: DWARFSections
    private let tables: DWARFAbbreviationTables

    var count: Int { headers.count }
    var isEmpty: Bool { headers.isEmpty }
    /// How many units have been made (the tests).
    var madeCount: Int { made.count { $0 != nil } }

    /// The first bytes of a unit header that hold every header DWARF 2–5 defines.
    static let headerSlot = 40

    /// Every unit header of .debug_info, in order; stops at the first header that does not fit.
    /// Reads headers only: `tables` decodes a unit's abbreviations when it is first used.
    /// `collected`: the headers read while an on-demand .debug_info streamed by (its view reads
    /// zeros until prepared; HeaderCollector), nil to read them from the section.
    init(sections: DWARFSections, collected: [Header]?, tables: DWARFAbbreviationTables) {
        self.sections = sections
        self.tables = tables
        let size = UInt64(sections.info.count)
        headers = collected.map { Array($0.prefix { $0.endOffset <= size }) } ?? Self.headers(in: sections.info)
        made = Array(repeating: nil, count: headers.count)
    }

    /// The unit headers of a .debug_info kept whole, in order, up to the first that does not fit.
    static func headers(in info: ByteView) -> [Header] {
        let size = UInt64(info.count)
        var headers: [Header] = []
        var offset: UInt64 = 0
        while offset < size, let bytes = info.slice(offset, min(UInt64(headerSlot), size - offset)),
            let (header, end) = parseHeader(bytes, at: offset), end <= size
        {
            if let header { headers.append(header) }
            offset = end
        }
        return headers
    }

    /// Lets the unit at `index` go (made again if used again): the units the address map read
    /// only for their ranges (those no .debug_aranges set names).
    func forget(_ index: Int) {
        made[index] = nil
    }

    /// The unit header in `bytes` (its first bytes, at most `headerSlot`), which is at `offset` of
    /// .debug_info: the header, nil for a unit that is skipped (a version or unit type this
    /// reader does not read), and where the next begins; nil when no length can be read there.
    static func parseHeader(_ bytes: ByteView, at offset: UInt64) -> (header: Header?, end: UInt64)? {
        var cursor = DWARFCursor(bytes)
        guard let (length, offsetSize) = cursor.initialLength(),
            let end = offset.checkedAdding(UInt64(cursor.offset))?.checkedAdding(length)
        else { return nil }
        guard let version = cursor.u16(), version >= 2, version <= 5 else { return (nil, end) }
        var unitType = DW_UT_compile
        var addressSize: UInt8 = 0
        var abbrevOffset: UInt64 = 0
        if version >= 5 {
            guard let type = cursor.u8(), let size = cursor.u8(), let abbrev = cursor.unsigned(size: offsetSize) else {
                return (nil, end)
            }
            unitType = type
            addressSize = size
            abbrevOffset = abbrev
            switch type {
            case DW_UT_skeleton, DW_UT_split_compile: guard cursor.skip(8) else { return (nil, end) }
            case DW_UT_type, DW_UT_split_type: guard cursor.skip(8 + offsetSize) else { return (nil, end) }
            default: break
            }
        } else {
            guard let abbrev = cursor.unsigned(size: offsetSize), let size = cursor.u8() else { return (nil, end) }
            abbrevOffset = abbrev
            addressSize = size
        }
        guard addressSize == 4 || addressSize == 8, offset + UInt64(cursor.offset) < end else { return (nil, end) }
        let header = Header(
            offset: offset, endOffset: end, abbrevOffset: abbrevOffset,
            format: DWARFFormat(version: version, addressSize: addressSize, offsetSize: UInt8(offsetSize)),
            unitType: unitType, dieStart: UInt8(cursor.offset))
        return (header, end)
    }

    /// The index of the unit whose header is at `offset`, if one is.
    func index(ofUnitAt offset: UInt64) -> Int? {
        guard let index = headers.lastIndex(atOrBelow: offset, key: \.offset), headers[index].offset == offset else {
            return nil
        }
        return index
    }

    /// The unit at `index` (< count), made on first use.
    subscript(index: Int) -> DWARFUnit {
        if let unit = made[index] { return unit }
        let header = headers[index]
        let unit = DWARFUnit(
            index: index, offset: header.offset, endOffset: header.endOffset,
            dieOffset: header.offset + UInt64(header.dieStart), format: header.format, unitType: header.unitType,
            abbrevOffset: header.abbrevOffset, sections: sections, tables: tables)
        made[index] = unit
        return unit
    }
}

extension DWARFUnit {
    /// Where the DIE after a subtree begins, from the subtree's first child at `start` in
    /// `info` (this unit's .debug_info); each DIE read costs one of `budget`, and nil when it
    /// runs out or the bytes end first.
    func skipSubtree(from start: Int, in info: ByteView, budget: inout Int) -> Int? {
        let table = abbreviations
        var cursor = DWARFCursor(info, offset: start)
        var depth = 1
        while depth > 0, cursor.offset < dieEnd, budget > 0 {
            budget -= 1
            guard let code = cursor.uleb() else { return nil }
            if code == 0 {
                depth -= 1
                continue
            }
            guard let index = table.index(of: code) else { return nil }
            let abbreviation = table.abbreviations[index]
            guard skipAttributes(abbreviation, cursor: &cursor) else { return nil }
            if abbreviation.hasChildren { depth += 1 }
        }
        return depth == 0 ? cursor.offset : nil
    }
}
