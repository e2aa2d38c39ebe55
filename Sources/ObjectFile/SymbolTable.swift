// SymbolTable: the function symbols of one ELF file (.symtab, then .dynsym), sorted for lookup.
//
// Built once per file (the ELFFile caches it); names are read from the string table only when
// a lookup hits, so building costs one pass over the symbol entries and one sort.

import BoundedBytes

#if canImport(Glibc)
import Glibc
#endif

public struct SymbolTable: Sendable {
    struct Entry: Sendable {
        var address: UInt64
        var size: UInt64
        var nameOffset: UInt32
        var table: UInt8  // 0 = .symtab, 1 = .dynsym
        var rank: UInt8  // lower wins among aliases: sized global < sized local < unsized
        /// Name offset of the STT_FILE symbol before this one in its table (0: none).
        var fileNameOffset: UInt32
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

    init(elf: ELFFile) {
        for (tableIndex, name) in [".symtab", ".dynsym"].enumerated() {
            guard let section = elf.section(named: name), let data = elf.contents(of: section),
                Int(section.link) < elf.sections.count,
                let stringTable = elf.contents(of: elf.sections[Int(section.link)])
            else {
                strings.append(ByteView(UnsafeRawBufferPointer(start: nil, count: 0)))
                continue
            }
            strings.append(stringTable)
            let count = UInt64(data.count) / 24
            entries.reserveCapacity(entries.count + Int(count))
            var fileNameOffset: UInt32 = 0
            for index in 0..<count {
                let at = index * 24
                guard let nameOffset = data.u32(at), let info = data.u8(at + 4), let sectionIndex = data.u16(at + 6),
                    let value = data.u64(at + 8), let size = data.u64(at + 16)
                else { break }
                let type = Int32(info & 0x0F), binding = Int32(info >> 4)  // ELF64_ST_TYPE, ELF64_ST_BIND
                if type == STT_FILE { fileNameOffset = nameOffset }
                // Functions and GNU indirect functions that are defined (not SHN_UNDEF).
                guard type == STT_FUNC || type == STT_GNU_IFUNC, sectionIndex != SHN_UNDEF, value != 0 else { continue }
                let rank: UInt8 = size == 0 ? 2 : (binding == STB_GLOBAL ? 0 : 1)
                entries.append(
                    Entry(
                        address: value, size: size, nameOffset: nameOffset, table: UInt8(tableIndex), rank: rank,
                        fileNameOffset: binding == STB_LOCAL ? fileNameOffset : 0))  // only locals belong to a FILE
            }
        }
        entries.sort { ($0.address, $0.rank, $0.table) < ($1.address, $1.rank, $1.table) }
        // Keep one entry per address: the best-ranked alias.
        var unique: [Entry] = []
        unique.reserveCapacity(entries.count)
        for entry in entries where unique.last?.address != entry.address { unique.append(entry) }
        entries = unique
    }

    /// The function containing `address` (an ELF virtual address). A sized symbol covers its
    /// size; an unsized one covers up to the next symbol.
    public func lookup(_ address: UInt64) -> Match? {
        guard let found = entries.lastIndex(atOrBelow: address, key: \.address) else { return nil }
        let entry = entries[found]
        let low = found + 1
        let offset = address - entry.address
        if entry.size > 0 {
            guard offset < entry.size else { return nil }
        } else if low < entries.count, address >= entries[low].address {
            return nil
        }
        var name = strings[Int(entry.table)].cString(UInt64(entry.nameOffset)) ?? "?"
        // Versioned names in a .symtab ("__libc_start_main@@GLIBC_2.34"): the version is not
        // part of the function's name.
        if let at = name.firstIndex(of: "@"), at != name.startIndex { name = String(name[..<at]) }
        let file = entry.fileNameOffset == 0 ? nil : strings[Int(entry.table)].cString(UInt64(entry.fileNameOffset))
        return Match(name: name, address: entry.address, offset: offset, size: entry.size, symbolFile: file)
    }
}
