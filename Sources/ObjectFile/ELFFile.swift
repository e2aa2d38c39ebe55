// ELFFile: a bounds-checked reader of 64-bit little-endian ELF files over an mmap.
//
// Why our own reader and not libelf for this part: headers, notes and symbol tables are a few
// hundred lines, and reading them straight from the mapping costs no copies and no per-call C
// bridging; every offset is checked, so a truncated or hostile file yields an error or a nil,
// never a trap. (DWARF, where the format is large, is a separate reader.)

import BoundedBytes
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

public struct ELFSegment: Sendable, Equatable {
    public var type: UInt32
    public var flags: UInt32
    public var offset: UInt64
    public var vaddr: UInt64
    public var fileSize: UInt64
    public var memorySize: UInt64

    // Spec names from <elf.h> (through Glibc).
    public static let load = UInt32(PT_LOAD)
    public static let dynamic = UInt32(PT_DYNAMIC)
    public static let interpreter = UInt32(PT_INTERP)
    public static let note = UInt32(PT_NOTE)
    public static let gnuEHFrame = UInt32(PT_GNU_EH_FRAME)
    public var isExecutable: Bool { flags & UInt32(PF_X) != 0 }
    public var isWritable: Bool { flags & UInt32(PF_W) != 0 }
}

public struct ELFSection: Sendable, Equatable {
    public var name: String
    public var type: UInt32
    public var flags: UInt64
    public var address: UInt64
    public var offset: UInt64
    public var size: UInt64
    public var link: UInt32
    public var entrySize: UInt64

    public static let noBits = UInt32(SHT_NOBITS)
    public static let compressedFlag = UInt64(SHF_COMPRESSED)
}

/// Immutable once read (the symbol table, built on first use, behind a lock): shareable
/// between threads.
public final class ELFFile: Sendable {
    public let file: MappedFile
    public let view: ByteView
    public let type: UInt16
    public let machine: UInt16
    public let segments: [ELFSegment]
    public let sections: [ELFSection]
    /// The GNU build-id (NT_GNU_BUILD_ID), if the file has one.
    public let buildID: BuildID?
    /// The `.eh_frame_hdr` search table, if PT_GNU_EH_FRAME names a usable one.
    public let ehFrameTable: EHFrameTable?

    public var path: String { file.path }
    /// The last component of the path: how reports name a module.
    public var fileName: String { path.split(separator: "/").last.map(String.init) ?? path }

    public convenience init(path: String) throws {
        try self.init(file: MappedFile(path: path))
    }

    public init(file: MappedFile) throws {
        self.file = file
        let view = ByteView(file.bytes)
        self.view = view
        let path = file.path
        guard view.has(0, 64), view.u32(0) == 0x464C_457F else {
            throw ObjectFileError.notELF(path: path, reason: "no ELF magic")
        }
        guard view.u8(4) == 2 else { throw ObjectFileError.notELF(path: path, reason: "not a 64-bit ELF") }
        guard view.u8(5) == 1 else { throw ObjectFileError.notELF(path: path, reason: "not little-endian") }
        type = view.u16(16)!
        machine = view.u16(18)!
        let phoff = view.u64(32)!, shoff = view.u64(40)!
        let phentsize = UInt64(view.u16(54)!), phnum = UInt64(view.u16(56)!)
        let shentsize = UInt64(view.u16(58)!)
        var shnum = UInt64(view.u16(60)!)
        var shstrndx = UInt64(view.u16(62)!)

        var segments: [ELFSegment] = []
        if phnum > 0 {
            guard phentsize >= 56, view.has(phoff, phentsize * phnum) else {
                throw ObjectFileError.malformed(path: path, reason: "program headers out of bounds")
            }
            for index in 0..<phnum {
                let at = phoff + index * phentsize
                segments.append(
                    ELFSegment(
                        type: view.u32(at)!, flags: view.u32(at + 4)!, offset: view.u64(at + 8)!,
                        vaddr: view.u64(at + 16)!, fileSize: view.u64(at + 32)!, memorySize: view.u64(at + 40)!))
            }
        }
        self.segments = segments

        var sections: [ELFSection] = []
        if shoff != 0 && shentsize >= 64 {
            // Extended numbering: the real counts live in section 0.
            if shnum == 0, let at = shoff.checkedAdding(32), let count = view.u64(at) { shnum = count }
            if shstrndx == 0xFFFF, let at = shoff.checkedAdding(40), let link = view.u32(at) { shstrndx = UInt64(link) }
            if shnum > 0 && shnum <= 65536 && view.has(shoff, shentsize * shnum) {
                var raw: [(nameOffset: UInt32, section: ELFSection)] = []
                raw.reserveCapacity(Int(shnum))
                for index in 0..<shnum {
                    let at = shoff + index * shentsize
                    raw.append(
                        (
                            view.u32(at)!,
                            ELFSection(
                                name: "", type: view.u32(at + 4)!, flags: view.u64(at + 8)!, address: view.u64(at + 16)!,
                                offset: view.u64(at + 24)!, size: view.u64(at + 32)!, link: view.u32(at + 40)!,
                                entrySize: view.u64(at + 56)!)
                        ))
                }
                let names: ByteView? =
                    shstrndx < shnum
                    ? view.slice(raw[Int(shstrndx)].section.offset, raw[Int(shstrndx)].section.size) : nil
                for (nameOffset, var section) in raw {
                    section.name = names?.cString(UInt64(nameOffset)) ?? ""
                    sections.append(section)
                }
            }
        }
        self.sections = sections
        buildID = Self.readBuildID(view: view, sections: sections, segments: segments)
        ehFrameTable = Self.readEHFrameTable(view: view, segments: segments)
    }

    public func section(named name: String) -> ELFSection? { sections.first { $0.name == name } }

    /// The bytes of a section in the file; nil for SHT_NOBITS or out-of-bounds sections.
    public func contents(of section: ELFSection) -> ByteView? { Self.contents(of: section, in: view) }

    static func contents(of section: ELFSection, in view: ByteView) -> ByteView? {
        guard section.type != ELFSection.noBits else { return nil }
        return view.slice(section.offset, section.size)
    }

    /// The virtual address at which file offset 0 is loaded: what a module's base maps to.
    public var imageVirtualBase: UInt64 {
        let loads = segments.filter { $0.type == ELFSegment.load }
        if let first = loads.min(by: { $0.vaddr < $1.vaddr }) {
            return first.vaddr &- first.offset
        }
        return 0
    }

    /// Translates an ELF virtual address to the file offset holding its bytes, if any.
    public func fileOffset(forVirtualAddress address: UInt64) -> UInt64? {
        for segment in segments where segment.type == ELFSegment.load {
            if address >= segment.vaddr && address - segment.vaddr < segment.fileSize {
                return segment.offset.checkedAdding(address - segment.vaddr)
            }
        }
        return nil
    }

    /// Copies `count` bytes at ELF virtual address `address` out of the file's loaded contents.
    public func read(virtualAddress address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        guard let offset = fileOffset(forVirtualAddress: address),
            let segment = segments.first(where: {
                $0.type == ELFSegment.load && address >= $0.vaddr && address - $0.vaddr < $0.fileSize
            }),
            let end = (address - segment.vaddr).checkedAdding(UInt64(buffer.count)), end <= segment.fileSize,
            view.has(offset, UInt64(buffer.count))
        else { return false }
        buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: view.bytes[Int(offset)..<Int(offset) + buffer.count]))
        return true
    }

    /// Executable address ranges (ELF virtual addresses) of the loaded image.
    public var executableRanges: [Range<UInt64>] {
        segments.compactMap { segment in
            guard segment.type == ELFSegment.load, segment.isExecutable, segment.memorySize > 0 else { return nil }
            return UInt64.checkedRange(start: segment.vaddr, count: segment.memorySize)  // nil: it wraps
        }
    }

    /// Walks the notes of a note area; stops quietly at the first malformed note.
    public static func notes(in area: ByteView, _ body: (_ name: String, _ type: UInt32, _ desc: ByteView) -> Bool) {
        var offset: UInt64 = 0
        while let nameSize = area.u32(offset), let descSize = area.u32(offset + 4), let type = area.u32(offset + 8) {
            let nameStart = offset + 12
            let descStart = nameStart + ((UInt64(nameSize) + 3) & ~3)
            guard let nameView = area.slice(nameStart, UInt64(nameSize)),
                let desc = area.slice(descStart, UInt64(descSize))
            else { return }
            var name = nameView.cString(0) ?? ""
            if name.count > Int(nameSize) { name = String(name.prefix(Int(nameSize))) }
            if !body(name, type, desc) { return }
            offset = descStart + ((UInt64(descSize) + 3) & ~3)
        }
    }

    /// The GNU build-id (NT_GNU_BUILD_ID), from the section if present, else the PT_NOTE segments.
    static func readBuildID(view: ByteView, sections: [ELFSection], segments: [ELFSegment]) -> BuildID? {
        var areas: [ByteView] = []
        if let section = sections.first(where: { $0.name == ".note.gnu.build-id" }),
            let contents = contents(of: section, in: view)
        {
            areas.append(contents)
        }
        for segment in segments where segment.type == ELFSegment.note {
            if let area = view.slice(segment.offset, segment.fileSize) { areas.append(area) }
        }
        for area in areas {
            if let found = buildID(inNotes: area) { return found }
        }
        return nil
    }

    /// The NT_GNU_BUILD_ID note of a note area (a section, a PT_NOTE segment, or the same read
    /// from a process's memory), if any.
    public static func buildID(inNotes area: ByteView) -> BuildID? {
        var found: [UInt8]?
        notes(in: area) { name, type, desc in
            if name == "GNU" && type == UInt32(NT_GNU_BUILD_ID) { found = desc.array(0, UInt64(desc.count)) }
            return found == nil
        }
        return found.flatMap(BuildID.init)
    }

    /// `.gnu_debuglink`: the name of the separate debug file and the CRC32 of its contents.
    public var debugLink: (name: String, crc: UInt32)? {
        guard let section = section(named: ".gnu_debuglink"), let data = contents(of: section),
            let name = data.cString(0), !name.isEmpty
        else { return nil }
        let crcOffset = (UInt64(name.utf8.count) + 1 + 3) & ~3
        guard let crc = data.u32(crcOffset) else { return nil }
        return (name, crc)
    }

    /// The `.eh_frame_hdr` search table, in ELF virtual addresses.
    public struct EHFrameTable: Sendable {
        public var headerAddress: UInt64
        public var tableAddress: UInt64
        public var entries: UInt64
    }

    static func readEHFrameTable(view: ByteView, segments: [ELFSegment]) -> EHFrameTable? {
        guard let segment = segments.first(where: { $0.type == ELFSegment.gnuEHFrame }),
            let header = view.slice(segment.offset, segment.fileSize),
            header.u8(0) == 1
        else { return nil }
        // version 1, eh_frame_ptr_enc, fde_count_enc, table_enc; libunwind's remote search
        // supports the standard table encoding only: DW_EH_PE_datarel | DW_EH_PE_sdata4.
        guard let framePointerEncoding = header.u8(1), let countEncoding = header.u8(2),
            header.u8(3) == 0x3B
        else { return nil }
        let pointerSize: UInt64
        switch framePointerEncoding & 0x0F {
        case 0x03, 0x0B: pointerSize = 4
        case 0x04, 0x0C: pointerSize = 8
        default: return nil
        }
        let countOffset = 4 + pointerSize
        let count: UInt64
        switch countEncoding & 0x0F {
        case 0x03: guard let value = header.u32(countOffset) else { return nil }; count = UInt64(value)
        case 0x0B:
            guard let value = header.u32(countOffset) else { return nil };
            count = UInt64(UInt32(bitPattern: Int32(bitPattern: value)))
        case 0x04, 0x0C: guard let value = header.u64(countOffset) else { return nil }; count = value
        default: return nil
        }
        let tableOffset = countOffset + ((countEncoding & 0x0F) == 0x04 || (countEncoding & 0x0F) == 0x0C ? 8 : 4)
        // The count and the segment's address are the file's word: a table that does not fit
        // in the segment, or an address that wraps, means no table (libunwind then falls back).
        guard count > 0, let tableSize = count.checkedMultiplying(8), header.has(tableOffset, tableSize),
            let tableAddress = segment.vaddr.checkedAdding(tableOffset),
            tableAddress.checkedAdding(tableSize) != nil
        else { return nil }
        return EHFrameTable(headerAddress: segment.vaddr, tableAddress: tableAddress, entries: count)
    }

    /// The function symbols, built on first use (one pass and a sort), then shared: safe to ask
    /// from any thread.
    public var symbols: SymbolTable {
        symbolTable.withLock { table in
            if let table { return table }
            let built = SymbolTable(elf: self)
            table = built
            return built
        }
    }
    private let symbolTable = Mutex<SymbolTable?>(nil)

    /// DT_NEEDED entries of the dynamic section: the shared libraries the file asks for.
    public var neededLibraries: [String] {
        guard let dynamic = section(named: ".dynamic"), let entries = contents(of: dynamic),
            let dynstr = section(named: ".dynstr"), let strings = contents(of: dynstr)
        else { return [] }
        var result: [String] = []
        var offset: UInt64 = 0
        while let tag = entries.u64(offset), let value = entries.u64(offset + 8), tag != 0 {
            if tag == UInt64(DT_NEEDED), let name = strings.cString(value) { result.append(name) }
            offset += 16
        }
        return result
    }

    /// Whether the file has a program interpreter (PT_INTERP): false for static executables.
    public var isDynamicallyLinked: Bool { segments.contains { $0.type == ELFSegment.interpreter } }

    /// Whether .symtab or .dynsym defines a symbol of this name.
    public func definesSymbol(named name: String) -> Bool {
        let wanted = Array(name.utf8)
        for tableName in [".symtab", ".dynsym"] {
            guard let table = section(named: tableName), let data = contents(of: table),
                Int(table.link) < sections.count, let strings = contents(of: sections[Int(table.link)])
            else { continue }
            var index: UInt64 = 0
            while let nameOffset = data.u32(index * 24), let sectionIndex = data.u16(index * 24 + 6) {
                index += 1
                guard sectionIndex != 0, let candidate = strings.slice(UInt64(nameOffset), UInt64(wanted.count + 1)) else {
                    continue
                }
                if candidate.u8(UInt64(wanted.count)) == 0
                    && (0..<wanted.count).allSatisfy({ candidate.u8(UInt64($0)) == wanted[$0] })
                {
                    return true
                }
            }
        }
        return false
    }
}
