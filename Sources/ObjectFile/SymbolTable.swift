// SymbolTable: the function symbols of one ELF file (.symtab, then .dynsym), sorted for lookup.
//
// Built once per file (the ELFFile caches it). Entries are decoded by libelf (gelf_getsym),
// here only: ELFFile.definesSymbol uses `forEachSymbol` too. Names are read from the string
// table only when a lookup hits (bounds-checked; a name offset outside the table drops the
// symbol at build time), so building costs one pass over the symbol entries and one sort.

import BoundedBytes
import CLibELF

#if canImport(Glibc)
import Glibc
#endif

public struct SymbolTable: Sendable {
    /// 24 bytes (libc6-dbg's .symtab: 9,000 of them). A size past 4 GiB is clamped: no
    /// function is that long, and a symbol claiming it covers 4 GiB instead.
    struct Entry: Sendable {
        var address: UInt64
        var size: UInt32
        var nameOffset: UInt32
        /// Name offset of the STT_FILE symbol before this one in its table (0: none).
        var fileNameOffset: UInt32
        var table: UInt8  // index into `strings`: .symtab's first when it has one
        var rank: UInt8  // lower wins among aliases: sized global < sized local < unsized, then the public name
    }

    public struct Match: Sendable, Equatable {
        public var name: String
        public var address: UInt64
        public var offset: UInt64
        public var size: UInt64
        /// The STT_FILE symbol preceding it in the table: a guess at its source file that
        /// llvm-symbolizer prints when there is no DWARF. Often wrong (every global gets the
        /// last file of the locals), so reports do not use it.
        public var symbolFile: String?
    }

    private var entries: [Entry] = []
    private var strings: [ByteView] = []

    public var count: Int { entries.count }

    /// The symbol tables of a file, in lookup order: .symtab (SHT_SYMTAB), then .dynsym.
    static func tables(in sections: [ELFSection]) -> [ELFSection] {
        [ELFSection.symbolTable, ELFSection.dynamicSymbolTable].compactMap { type in
            sections.first { $0.type == type }
        }
    }

    /// The string table a symbol table links to, if it lies in the file. Names are read from it
    /// bounds-checked (ByteView.cString), when a lookup hits.
    static func strings(for table: ELFSection, sections: [ELFSection], view: ByteView) -> ByteView? {
        stringSection(for: table, in: sections).flatMap { ELFFile.contents(of: $0, in: view) }
    }

    /// The section a symbol table's `sh_link` names as its strings, if it names one.
    static func stringSection(for table: ELFSection, in sections: [ELFSection]) -> ELFSection? {
        guard Int(table.link) < sections.count, table.link != 0 else { return nil }
        return sections[Int(table.link)]
    }

    /// The one decoder of symbol entries (the table here and ELFFile.definesSymbol): gelf_getsym
    /// over the section's elf_getdata, in order, until `body` returns false. The section must lie
    /// in the file (checked before libelf is asked) and libelf must see it as ELF_T_SYM.
    /// Called with the descriptor's lock held.
    static func forEachSymbol(
        libelf elf: OpaquePointer, table: ELFSection, view: ByteView, _ body: (GElf_Sym) -> Bool
    ) {
        guard let data = ELFFile.data(elf, table, view), data.pointee.d_type == ELF_T_SYM else { return }
        let entrySize = Int(gelf_fsize(elf, ELF_T_SYM, 1, UInt32(EV_CURRENT)))
        guard entrySize > 0 else { return }
        for index in 0..<Int32(clamping: data.pointee.d_size / entrySize) {
            var symbol = GElf_Sym()
            guard gelf_getsym(data, index, &symbol) != nil, body(symbol) else { return }
        }
    }

    /// Whether a symbol is a function the table keeps: a function or GNU indirect function that
    /// is defined (not SHN_UNDEF), at a nonzero address, with its name inside the string table.
    private static func isFunction(_ symbol: GElf_Sym, names: ByteView) -> Bool {
        let type = Int32(symbol.st_info & 0x0F)  // ELF64_ST_TYPE
        return (type == STT_FUNC || type == STT_GNU_IFUNC) && symbol.st_shndx != UInt16(SHN_UNDEF)
            && symbol.st_value != 0 && Int(symbol.st_name) < names.count
    }

    init(libelf elf: OpaquePointer, sections: [ELFSection], view: ByteView) {
        let empty = ByteView(UnsafeRawBufferPointer(start: nil, count: 0))
        var tables: [(section: ELFSection, names: ByteView)] = []
        for table in Self.tables(in: sections) {
            // A table whose strings are not in the file gives no symbols.
            guard let names = Self.strings(for: table, sections: sections, view: view) else { continue }
            tables.append((table, names))
        }
        // One pass to count, so that the entries are allocated once at their size (not grown by
        // doubling, the old buffer alive beside the new: half a megabyte at libc6-dbg's peak).
        // No reserving from sh_size: a hostile header may claim anything; the count is of the
        // symbols libelf gives from data checked against the file.
        var count = 0
        for (table, names) in tables {
            Self.forEachSymbol(libelf: elf, table: table, view: view) { symbol in
                if Self.isFunction(symbol, names: names) { count += 1 }
                return true
            }
        }
        entries.reserveCapacity(count)
        for (table, names) in tables {
            let tableIndex = UInt8(strings.count)
            strings.append(names)
            var fileNameOffset: UInt32 = 0
            Self.forEachSymbol(libelf: elf, table: table, view: view) { symbol in
                if Int32(symbol.st_info & 0x0F) == STT_FILE, Int(symbol.st_name) < names.count {
                    fileNameOffset = symbol.st_name
                }
                guard Self.isFunction(symbol, names: names) else { return true }
                let binding = Int32(symbol.st_info >> 4)  // ELF64_ST_BIND
                // Among aliases of one rank, the public name: default visibility before hidden,
                // then the fewest leading underscores (`free` before `__free` and `__libc_free`,
                // as gdb names it).
                var underscores: UInt8 = 0
                while underscores < 3, names.u8(UInt64(symbol.st_name) + UInt64(underscores)) == UInt8(ascii: "_") {
                    underscores += 1
                }
                let hidden: UInt8 = symbol.st_other & 0x3 == UInt8(STV_DEFAULT) ? 0 : 1
                let rank: UInt8 = (symbol.st_size == 0 ? 2 : (binding == STB_GLOBAL ? 0 : 1)) * 16 + hidden * 4 + underscores
                entries.append(
                    Entry(
                        address: symbol.st_value, size: UInt32(clamping: symbol.st_size), nameOffset: symbol.st_name,
                        fileNameOffset: binding == STB_LOCAL ? fileNameOffset : 0,  // only locals belong to a FILE
                        table: tableIndex, rank: rank))
                return true
            }
        }
        if strings.isEmpty { strings.append(empty) }
        entries.sort { ($0.address, $0.rank, $0.table) < ($1.address, $1.rank, $1.table) }
        // Keep one entry per address, the best-ranked alias, in place.
        var kept = 0
        for index in entries.indices where kept == 0 || entries[kept - 1].address != entries[index].address {
            entries[kept] = entries[index]
            kept += 1
        }
        entries.removeLast(entries.count - kept)
    }

    /// The function containing `address` (an ELF virtual address). A sized symbol covers its
    /// size; an unsized one covers up to the next symbol.
    public func lookup(_ address: UInt64) -> Match? {
        guard let found = entryIndex(containing: address) else { return nil }
        let entry = entries[found]
        let strings = self.strings[Int(entry.table)]
        let file = entry.fileNameOffset == 0 ? nil : strings.cString(UInt64(entry.fileNameOffset))
        return Match(
            name: Self.name(at: entry.nameOffset, in: strings) ?? "?", address: entry.address,
            offset: address - entry.address, size: UInt64(entry.size), symbolFile: file)
    }

    /// The start of the function containing `address`, without reading its name (the lookups
    /// whose name DWARF gives anyway).
    public func start(containing address: UInt64) -> UInt64? {
        entryIndex(containing: address).map { entries[$0].address }
    }

    @inline(__always)
    private func entryIndex(containing address: UInt64) -> Int? {
        guard let found = entries.lastIndex(atOrBelow: address, key: \.address) else { return nil }
        let entry = entries[found]
        let offset = address - entry.address
        if entry.size > 0 {
            guard offset < UInt64(entry.size) else { return nil }
        } else if found + 1 < entries.count, address >= entries[found + 1].address {
            return nil
        }
        return found
    }

    /// The NUL-terminated name at `offset`, bounded by the table, without the version of a
    /// versioned name in a .symtab ("__libc_start_main@@GLIBC_2.34": the version is not part of
    /// the function's name). One pass over the bytes.
    static func name(at offset: UInt32, in strings: ByteView) -> String? {
        let bytes = strings.bytes
        let start = Int(offset)
        guard start < bytes.count else { return nil }
        var end = start
        var version = -1
        while end < bytes.count {
            let byte = bytes[end]
            if byte == 0 { break }
            if byte == 0x40 && version < 0 && end != start { version = end }
            end += 1
        }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<(version >= 0 ? version : end)]), as: UTF8.self)
    }
}
