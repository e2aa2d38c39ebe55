// DWARFSymbolNames: the ELF symbol lookup llvm-symbolizer uses to rename the outermost frame.
//
// DWARF names the source function (`f`); the symbol table names the code that ran (`f.cold`,
// `f.constprop.0`, `f.part.0`, one of a constructor's C1/C2 aliases). llvm-symbolizer, with
// linkage names, takes the symbol's name for the outermost frame, and DWARFInfo does the same
// when asked (`symbolicate --obj`, which answers as llvm-symbolizer; reports name every frame
// from DWARF, as gdb does, and keep the symbol that ran in `symbol`: Symbolizer).
// This is deliberately LLVM's SymbolizableObjectFile rule, not SymbolTable's (which serves
// function+offset and ranks aliases its own way): .symtab (else .dynsym) symbols of type
// NOTYPE, FUNC, OBJECT or GNU_IFUNC in a real section; sorted by (address, size) keeping
// table order among equals; per address the last one wins (so the largest size); a sized
// symbol covers its size, an unsized one everything up to the next symbol.
//
// Names are read from the string table on first use and cached. Not thread-safe on its own:
// DWARFInfo keeps it behind its mutex (DWARFLookups).

import ObjectFile
import BoundedBytes

#if canImport(Glibc)
import Glibc
#endif

struct DWARFSymbolNames {
    private struct Entry {
        var address: UInt64
        var size: UInt64
        var nameOffset: UInt32
    }

    private let entries: [Entry]
    private let index: DWARFSortedIndex
    private var names: [String?]
    private let strings: ByteView

    init(elf: ELFFile) {
        var entries: [Entry] = []
        var strings = DWARFSections.empty
        for tableName in [".symtab", ".dynsym"] {
            guard let section = elf.section(named: tableName), let data = elf.contents(of: section),
                Int(section.link) < elf.sections.count,
                let stringTable = elf.contents(of: elf.sections[Int(section.link)])
            else { continue }
            strings = stringTable
            let count = UInt64(data.count) / 24
            guard count > 1 else { continue }
            entries.reserveCapacity(Int(count))
            for index in 1..<count {
                let at = index * 24
                guard let nameOffset = data.u32(at), let info = data.u8(at + 4), let sectionIndex = data.u16(at + 6),
                    let value = data.u64(at + 8), let size = data.u64(at + 16)
                else { break }
                let type = Int32(info & 0x0F)  // ELF64_ST_TYPE
                guard type == STT_NOTYPE || type == STT_OBJECT || type == STT_FUNC || type == STT_GNU_IFUNC,
                    sectionIndex != SHN_UNDEF, sectionIndex < SHN_LORESERVE
                else { continue }  // SHN_UNDEF, SHN_ABS, SHN_COMMON…
                entries.append(Entry(address: value, size: size, nameOffset: nameOffset))
            }
            break  // .dynsym only when there is no .symtab
        }
        // Stable sort by (address, size): Swift's sort is not stable, so order by index last.
        let indexed = entries.enumerated().sorted {
            ($0.element.address, $0.element.size, $0.offset) < ($1.element.address, $1.element.size, $1.offset)
        }
        var unique: [Entry] = []
        unique.reserveCapacity(indexed.count)
        for (_, entry) in indexed {
            if let last = unique.last, last.address == entry.address {
                unique[unique.count - 1] = entry
            } else {
                unique.append(entry)
            }
        }
        self.entries = unique
        self.strings = strings
        index = DWARFSortedIndex(keys: unique.map(\.address))
        names = Array(repeating: nil, count: unique.count)
    }

    /// The name of the symbol covering `address`, if any.
    mutating func name(at address: UInt64) -> String? {
        let low = index.upperBound(address)
        guard low > 0 else { return nil }
        let entry = entries[low - 1]
        if entry.size != 0 && address - entry.address >= entry.size { return nil }
        if let name = names[low - 1] { return name }
        let name = strings.cString(UInt64(entry.nameOffset))
        names[low - 1] = name
        return name
    }
}
