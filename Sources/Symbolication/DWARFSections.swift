// DWARFSections: the .debug_* sections of one ELF file, decompressed when needed (read through
// ObjectFile's DWARFCursor).
//
// Ownership: views point into the ELF mapping, into sections libelf inflated or into the
// section cache's copies `elf` mapped, all owned by `elf`, which this object keeps alive. Nothing here is mutated after init, so a DWARFSections
// may be read from any thread.
//
// DW_* constants keep the DWARF 5 specification's names verbatim so they can be grepped against
// it (values from DWARF 5 section 7, plus the GNU extensions LLVM and elfutils accept).

import ObjectFile
import BoundedBytes
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

final class DWARFSections: Sendable {
    let elf: ELFFile
    let info: ByteView
    let abbrev: ByteView
    let line: ByteView
    let lineStr: ByteView
    let str: ByteView
    let strOffsets: ByteView
    let addr: ByteView
    let ranges: ByteView
    let rnglists: ByteView
    let aranges: ByteView
    /// Location lists: DWARF 2–4 (.debug_loc) and 5 (.debug_loclists), for DWARFVariables;
    /// read at their first use, not at open: libc6-dbg's .debug_loclists inflates to megabytes,
    /// which a report that reads no variable there should not pay. A large compressed
    /// .debug_loclists is inflated on demand as .debug_info is (and kept in SectionCache, so a
    /// fresh watcher maps it): `prepareLocationList` puts a list's bytes in place first.
    var loc: ByteView { locationLists().loc }
    var loclists: ByteView { locationLists().loclists }
    private let lists = Mutex<LocationLists?>(nil)

    private struct LocationLists {
        var loc: ByteView
        var loclists: ByteView
        var onDemand: InflatedSection?
    }

    private func locationLists() -> LocationLists {
        lists.withLock { lists in
            if let lists { return lists }
            var onDemand: InflatedSection?
            if DWARFSections.inflatesOnDemand.load(ordering: .relaxed), let section = elf.section(named: ".debug_loclists"),
                let header = elf.compressionHeader(of: section), header.declaredSize >= UInt64(DWARFSections.onDemandThreshold)
            {
                onDemand = elf.inflatedOnDemand(section, scan: nil)
            }
            let read = LocationLists(
                loc: DWARFSections.contents(of: "loc", in: elf) ?? DWARFSections.empty,
                loclists: onDemand?.view ?? DWARFSections.contents(of: "loclists", in: elf) ?? DWARFSections.empty,
                onDemand: onDemand)
            lists = read
            return read
        }
    }

    /// Puts .debug_loclists' bytes in `range` in place (an index entry or a list, before it is
    /// read); clipped to the section.
    func prepareLocationList(_ range: Range<UInt64>) {
        guard let onDemand = locationLists().onDemand else { return }
        let end = min(range.upperBound, UInt64(onDemand.view.count))
        guard range.lowerBound < end else { return }
        onDemand.materialize(Int(clamping: range.lowerBound)..<Int(clamping: end))
    }

    /// The large sections inflated on demand (see `onDemandThreshold`): their views read as
    /// zeros until `prepare…` has put a range in place. nil for sections read whole.
    let infoOnDemand: InflatedSection?
    let abbrevOnDemand: InflatedSection?
    let lineOnDemand: InflatedSection?

    static let empty = ByteView(UnsafeRawBufferPointer(start: nil, count: 0))

    /// A zlib .debug_info, .debug_abbrev or .debug_line declaring at least this much is inflated
    /// on demand rather than whole (libc6-dbg's: 5.8, 1.0 and 1.3 MB); the smaller ones (strings,
    /// range lists, aranges) are read whole (ELFFile.sectionData: inflated, or mapped from the
    /// section cache).
    static let onDemandThreshold = 256 << 10

    /// Whether large compressed sections are inflated on demand (the default: a watcher's
    /// reports touch a few units of each library) or whole at open (a batch over a whole file,
    /// `symbolicate --obj` reading addresses from stdin, which would otherwise inflate them
    /// twice: once streaming at open, once whole when its lookups have covered enough units).
    /// Process-wide; read when a file's DWARF is opened.
    static let inflatesOnDemand = Atomic<Bool>(true)

    /// The sections of `elf`, with the unit headers of an on-demand .debug_info collected while it
    /// streamed by once (nil when it is read whole): DWARFUnits reads them, then lets them go.
    static func open(elf: ELFFile) -> (DWARFSections, [DWARFUnits.Header]?) {
        var collected: [DWARFUnits.Header]?
        let sections = DWARFSections(elf: elf, collected: &collected)
        return (sections, collected)
    }

    private init(elf: ELFFile, collected: inout [DWARFUnits.Header]?) {
        self.elf = elf
        func load(_ name: String) -> ByteView { DWARFSections.contents(of: name, in: elf) ?? DWARFSections.empty }
        func onDemand(_ name: String, scan: ((UnsafeRawBufferPointer, Int) -> Void)? = nil) -> InflatedSection? {
            guard DWARFSections.inflatesOnDemand.load(ordering: .relaxed),
                let section = elf.section(named: ".debug_" + name), let header = elf.compressionHeader(of: section),
                header.declaredSize >= UInt64(DWARFSections.onDemandThreshold)
            else { return nil }
            return elf.inflatedOnDemand(section, scan: scan)
        }
        var collector = DWARFHeaderCollector()
        infoOnDemand = onDemand("info") { collector.consume($0, at: $1) }
        collected = infoOnDemand == nil ? nil : collector.finish()
        abbrevOnDemand = onDemand("abbrev")
        lineOnDemand = onDemand("line")
        info = infoOnDemand?.view ?? load("info")
        abbrev = abbrevOnDemand?.view ?? load("abbrev")
        line = lineOnDemand?.view ?? load("line")
        lineStr = load("line_str")
        str = load("str")
        strOffsets = load("str_offsets")
        addr = load("addr")
        ranges = load("ranges")
        rnglists = load("rnglists")
        aranges = load("aranges")
    }

    /// `.debug_<name>`, else `.zdebug_<name>` (the pre-gABI GNU form), inflated by the ELF layer
    /// when compressed (ELFFile.sectionData: caps checked first, libelf's elf_compress). A refused
    /// or corrupt section reads as absent; the refusals that reports name come from
    /// SectionCompression.sectionRefusals.
    private static func contents(of name: String, in elf: ELFFile) -> ByteView? {
        if let section = elf.section(named: ".debug_" + name) { return try? elf.sectionData(section).get() }
        if let section = elf.section(named: ".zdebug_" + name), elf.compressionHeader(of: section) != nil {
            return try? elf.sectionData(section).get()
        }
        return nil
    }

    /// Puts .debug_info's bytes in `range` in place (a unit, before it is read).
    func prepareInfo(_ range: Range<UInt64>) {
        guard let infoOnDemand else { return }
        infoOnDemand.materialize(Int(clamping: range.lowerBound)..<Int(clamping: range.upperBound))
    }

    /// Puts .debug_abbrev's bytes in `range` in place (a table, before it is decoded).
    func prepareAbbreviations(_ range: Range<UInt64>) {
        guard let abbrevOnDemand else { return }
        abbrevOnDemand.materialize(Int(clamping: range.lowerBound)..<Int(clamping: range.upperBound))
    }

    /// Puts the line program at `offset` of .debug_line in place: its initial length, then as
    /// much as that says (bounded by the section).
    func prepareLineProgram(at offset: UInt64) {
        guard let lineOnDemand else { return }
        let start = Int(clamping: offset)
        lineOnDemand.materialize(start..<start.addingReportingOverflow(12).partialValue)
        var cursor = DWARFCursor(line, offset: offset)
        guard let (length, _) = cursor.initialLength() else { return }
        let end = UInt64(cursor.offset).checkedAdding(length) ?? UInt64(line.count)
        lineOnDemand.materialize(start..<Int(clamping: min(end, UInt64(line.count))))
    }
}

/// The unit headers of a .debug_info that streams by rather than being kept, read as it passes:
/// the first `DWARFUnits.headerSlot` bytes of each, at the offsets the headers' own lengths
/// lead to, as DWARFUnits reads them from a kept section.
struct DWARFHeaderCollector {
    private(set) var headers: [DWARFUnits.Header] = []
    /// Where the header being collected starts; .max once a header ends the walk.
    private var next: UInt64 = 0
    private var current: [UInt8] = []

    mutating func consume(_ chunk: UnsafeRawBufferPointer, at base: Int) {
        var position = UInt64(base)
        let end = UInt64(base + chunk.count)
        while position < end && next != .max {
            // Invariant: position == next + current.count once position reaches next.
            if position < next {
                position = min(next, end)
                continue
            }
            let index = Int(position) - base
            let take = min(DWARFUnits.headerSlot - current.count, Int(end - position))
            current.append(contentsOf: chunk[index..<(index + take)])
            position += UInt64(take)
            if current.count == DWARFUnits.headerSlot { finishHeader() }
        }
    }

    /// Reads the header in `current` and goes on to the next one its length leads to. A next
    /// header inside the bytes already taken (a unit shorter than a slot) keeps them.
    private mutating func finishHeader() {
        let start = next
        let parsed = current.withUnsafeBytes { DWARFUnits.parseHeader(ByteView($0), at: start) }
        if let header = parsed?.header { headers.append(header) }
        let after = parsed?.end ?? .max
        let taken = current
        current = []
        next = after
        if after != .max, after < start + UInt64(taken.count) { current = Array(taken[Int(after - start)...]) }
        if current.count == DWARFUnits.headerSlot { finishHeader() }
    }

    /// The headers, the last ones read from what the section's end left of their slots (as a
    /// kept section's are read from its last bytes). Each header moves on by at least its length
    /// field, so this ends.
    mutating func finish() -> [DWARFUnits.Header] {
        while !current.isEmpty && next != .max { finishHeader() }
        return headers
    }
}

// MARK: - DWARF constants (DWARF 5, section 7)

let DW_TAG_inlined_subroutine: UInt64 = 0x1d
let DW_TAG_compile_unit: UInt64 = 0x11
let DW_TAG_subprogram: UInt64 = 0x2e
let DW_TAG_partial_unit: UInt64 = 0x3c
let DW_TAG_skeleton_unit: UInt64 = 0x4a

let DW_AT_sibling: UInt64 = 0x01
let DW_AT_name: UInt64 = 0x03
let DW_AT_stmt_list: UInt64 = 0x10
let DW_AT_low_pc: UInt64 = 0x11
let DW_AT_high_pc: UInt64 = 0x12
let DW_AT_comp_dir: UInt64 = 0x1b
let DW_AT_abstract_origin: UInt64 = 0x31
let DW_AT_specification: UInt64 = 0x47
let DW_AT_entry_pc: UInt64 = 0x52
let DW_AT_ranges: UInt64 = 0x55
let DW_AT_call_column: UInt64 = 0x57
let DW_AT_call_file: UInt64 = 0x58
let DW_AT_call_line: UInt64 = 0x59
let DW_AT_linkage_name: UInt64 = 0x6e
let DW_AT_str_offsets_base: UInt64 = 0x72
let DW_AT_addr_base: UInt64 = 0x73
let DW_AT_rnglists_base: UInt64 = 0x74
let DW_AT_loclists_base: UInt64 = 0x8c
let DW_AT_language: UInt64 = 0x13
let DW_AT_MIPS_linkage_name: UInt64 = 0x2007
let DW_AT_GNU_ranges_base: UInt64 = 0x2132
let DW_AT_GNU_addr_base: UInt64 = 0x2133

let DW_FORM_addr: UInt64 = 0x01
let DW_FORM_block2: UInt64 = 0x03
let DW_FORM_block4: UInt64 = 0x04
let DW_FORM_data2: UInt64 = 0x05
let DW_FORM_data4: UInt64 = 0x06
let DW_FORM_data8: UInt64 = 0x07
let DW_FORM_string: UInt64 = 0x08
let DW_FORM_block: UInt64 = 0x09
let DW_FORM_block1: UInt64 = 0x0a
let DW_FORM_data1: UInt64 = 0x0b
let DW_FORM_flag: UInt64 = 0x0c
let DW_FORM_sdata: UInt64 = 0x0d
let DW_FORM_strp: UInt64 = 0x0e
let DW_FORM_udata: UInt64 = 0x0f
let DW_FORM_ref_addr: UInt64 = 0x10
let DW_FORM_ref1: UInt64 = 0x11
let DW_FORM_ref2: UInt64 = 0x12
let DW_FORM_ref4: UInt64 = 0x13
let DW_FORM_ref8: UInt64 = 0x14
let DW_FORM_ref_udata: UInt64 = 0x15
let DW_FORM_indirect: UInt64 = 0x16
let DW_FORM_sec_offset: UInt64 = 0x17
let DW_FORM_exprloc: UInt64 = 0x18
let DW_FORM_flag_present: UInt64 = 0x19
let DW_FORM_strx: UInt64 = 0x1a
let DW_FORM_addrx: UInt64 = 0x1b
let DW_FORM_ref_sup4: UInt64 = 0x1c
let DW_FORM_strp_sup: UInt64 = 0x1d
let DW_FORM_data16: UInt64 = 0x1e
let DW_FORM_line_strp: UInt64 = 0x1f
let DW_FORM_ref_sig8: UInt64 = 0x20
let DW_FORM_implicit_const: UInt64 = 0x21
let DW_FORM_loclistx: UInt64 = 0x22
let DW_FORM_rnglistx: UInt64 = 0x23
let DW_FORM_ref_sup8: UInt64 = 0x24
let DW_FORM_strx1: UInt64 = 0x25
let DW_FORM_strx2: UInt64 = 0x26
let DW_FORM_strx3: UInt64 = 0x27
let DW_FORM_strx4: UInt64 = 0x28
let DW_FORM_addrx1: UInt64 = 0x29
let DW_FORM_addrx2: UInt64 = 0x2a
let DW_FORM_addrx3: UInt64 = 0x2b
let DW_FORM_addrx4: UInt64 = 0x2c
let DW_FORM_GNU_addr_index: UInt64 = 0x1f01
let DW_FORM_GNU_str_index: UInt64 = 0x1f02
let DW_FORM_GNU_ref_alt: UInt64 = 0x1f20
let DW_FORM_GNU_strp_alt: UInt64 = 0x1f21

let DW_UT_compile: UInt8 = 0x01
let DW_UT_type: UInt8 = 0x02
let DW_UT_partial: UInt8 = 0x03
let DW_UT_skeleton: UInt8 = 0x04
let DW_UT_split_compile: UInt8 = 0x05
let DW_UT_split_type: UInt8 = 0x06

let DW_RLE_end_of_list: UInt8 = 0x00
let DW_RLE_base_addressx: UInt8 = 0x01
let DW_RLE_startx_endx: UInt8 = 0x02
let DW_RLE_startx_length: UInt8 = 0x03
let DW_RLE_offset_pair: UInt8 = 0x04
let DW_RLE_base_address: UInt8 = 0x05
let DW_RLE_start_end: UInt8 = 0x06
let DW_RLE_start_length: UInt8 = 0x07

let DW_LNS_copy: UInt8 = 0x01
let DW_LNS_advance_pc: UInt8 = 0x02
let DW_LNS_advance_line: UInt8 = 0x03
let DW_LNS_set_file: UInt8 = 0x04
let DW_LNS_set_column: UInt8 = 0x05
let DW_LNS_negate_stmt: UInt8 = 0x06
let DW_LNS_set_basic_block: UInt8 = 0x07
let DW_LNS_const_add_pc: UInt8 = 0x08
let DW_LNS_fixed_advance_pc: UInt8 = 0x09
let DW_LNS_set_prologue_end: UInt8 = 0x0a
let DW_LNS_set_epilogue_begin: UInt8 = 0x0b
let DW_LNS_set_isa: UInt8 = 0x0c

let DW_LNE_end_sequence: UInt8 = 0x01
let DW_LNE_set_address: UInt8 = 0x02
let DW_LNE_define_file: UInt8 = 0x03
let DW_LNE_set_discriminator: UInt8 = 0x04

let DW_LNCT_path: UInt64 = 0x1
let DW_LNCT_directory_index: UInt64 = 0x2
let DW_LNCT_timestamp: UInt64 = 0x3
let DW_LNCT_size: UInt64 = 0x4
let DW_LNCT_MD5: UInt64 = 0x5
