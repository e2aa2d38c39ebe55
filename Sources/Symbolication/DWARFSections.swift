// DWARFSections: the .debug_* sections of one ELF file, decompressed when needed (read through
// ObjectFile's DWARFCursor).
//
// Ownership: views point into the ELF mapping or into sections libelf inflated, both owned by
// `elf`, which this object keeps alive. Nothing here is mutated after init, so a DWARFSections
// may be read from any thread.
//
// DW_* constants keep the DWARF 5 specification's names verbatim so they can be grepped against
// it (values from DWARF 5 section 7, plus the GNU extensions LLVM and elfutils accept).

import ObjectFile
import BoundedBytes

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

    static let empty = ByteView(UnsafeRawBufferPointer(start: nil, count: 0))

    init(elf: ELFFile) {
        self.elf = elf
        func load(_ name: String) -> ByteView { DWARFSections.contents(of: name, in: elf) ?? DWARFSections.empty }
        info = load("info")
        abbrev = load("abbrev")
        line = load("line")
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
