// Hostile ELF files, made from a real one built with cc and patched byte-wise: each gives an
// error value or a partial result (a section skipped, no symbols), never a trap, a crash inside
// libelf or an unbounded allocation. And the libelf-backed reader on the unpatched file, from
// several threads at once.

import BoundedBytes
import Foundation
import ObjectFile
import Synchronization
import TestSupport
import XCTest

final class ELFHostileTests: XCTestCase {
    /// One build per test process: a dynamically linked program with a build-id, a .symtab,
    /// and SHF_COMPRESSED (zlib) debug sections.
    nonisolated(unsafe) static var built: [UInt8]?
    static let lock = NSLock()

    static func program() throws -> [UInt8] {
        lock.lock()
        defer { lock.unlock() }
        if let built { return built }
        let directory = TestSupport.temporaryDirectory("elf-hostile")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = directory + "/p.c"
        try """
        #include <stdio.h>
        __attribute__((noinline)) int sum_squares(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * i; return s; }
        int main(int argc, char **argv) { printf("%d\\n", sum_squares(argc * 10)); return 0; }
        """.write(toFile: source, atomically: true, encoding: .utf8)
        let output = try TestSupport.compile(
            [source], output: directory + "/p", flags: ["-O1", "-g", "-gz=zlib", "-Wl,--build-id"])
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: output)))
        built = bytes
        return bytes
    }

    /// The patched bytes as a file, opened the way production opens files (mmap).
    func open(_ bytes: [UInt8]) throws -> ELFFile {
        let directory = TestSupport.temporaryDirectory("elf-hostile")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/patched"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return try ELFFile(path: path)
    }

    // MARK: - Raw access to the unpatched layout (little-endian)

    func raw() throws -> ELFImage { ELFImage(bytes: try Self.program()) }

    // MARK: - The unpatched file

    func testRealFileThroughLibELF() throws {
        let elf = try open(try Self.program())
        XCTAssertEqual(Int32(elf.type), ET_DYN)
        XCTAssertNotNil(elf.buildID)
        XCTAssertTrue(elf.neededLibraries.contains("libc.so.6"), "\(elf.neededLibraries)")
        XCTAssertTrue(elf.isDynamicallyLinked)
        XCTAssertTrue(elf.definesSymbol(named: "sum_squares"))
        XCTAssertTrue(elf.definesSymbol(named: "main"))
        XCTAssertFalse(elf.definesSymbol(named: "sum_square"))
        XCTAssertFalse(elf.definesSymbol(named: "printf"))  // undefined: an import
        for (index, section) in elf.sections.enumerated() { XCTAssertEqual(section.index, index) }
        XCTAssertEqual(elf.sections.first?.type, 0)
        let text = try XCTUnwrap(elf.section(named: ".text"))
        XCTAssertEqual(elf.contents(of: text)?.count, Int(text.size))
        // A symbol lookup over the function's address.
        let symbols = try XCTUnwrap(elf.section(named: ".symtab"))
        XCTAssertEqual(symbols.type, ELFSection.symbolTable)
        let info = try XCTUnwrap(elf.section(named: ".debug_info"))
        XCTAssertNotEqual(info.flags & ELFSection.compressedFlag, 0)
        let header = try XCTUnwrap(elf.compressionHeader(of: info))
        let inflated = try elf.sectionData(info).get()
        XCTAssertEqual(UInt64(inflated.count), header.declaredSize)
        XCTAssertEqual(inflated.u16(4), 5)  // a DWARF 5 unit header's version
        // Asked again: the same bytes (inflated once).
        XCTAssertEqual(try elf.sectionData(info).get().bytes.baseAddress, inflated.bytes.baseAddress)
        XCTAssertEqual(SectionCompression.sectionRefusals(in: elf), [])
        XCTAssertEqual(elf.sectionData(text).map(\.count), .success(Int(text.size)))
    }

    func testSymbolLookupFindsTheFunction() throws {
        let elf = try open(try Self.program())
        // Find sum_squares' address by scanning the executable range for a lookup that names it.
        let range = try XCTUnwrap(elf.executableRanges.first)
        var found: SymbolTable.Match?
        var address = range.lowerBound
        while address < range.upperBound, found == nil {
            if let match = elf.symbols.lookup(address), match.name == "sum_squares" { found = match }
            address += 1
        }
        XCTAssertNotNil(found)
    }

    func testConcurrentUseOfOneFile() throws {
        let elf = try open(try Self.program())
        let info = try XCTUnwrap(elf.section(named: ".debug_info"))
        let line = try XCTUnwrap(elf.section(named: ".debug_line"))
        let results = Mutex<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 16) { index in
            let section = index % 2 == 0 ? info : line
            let count = (try? elf.sectionData(section).get().count) ?? -1
            let defines = elf.definesSymbol(named: "sum_squares")
            let symbols = elf.symbols.count
            results.withLock { $0.append(defines && symbols > 0 ? count : -2) }
        }
        let counts = results.withLock { $0 }
        XCTAssertEqual(Set(counts).count, 2, "\(counts)")
        XCTAssertFalse(counts.contains(-1) || counts.contains(-2))
    }

    func testTwoFilesOverOneMapping() throws {
        let bytes = try Self.program()
        let mapping = MappedFile(bytes: bytes, name: "shared")
        let first = try ELFFile(file: mapping)
        let second = try ELFFile(file: mapping)
        let info = try XCTUnwrap(first.section(named: ".debug_info"))
        let one = try first.sectionData(info).get()
        let two = try second.sectionData(try XCTUnwrap(second.section(named: ".debug_info"))).get()
        XCTAssertEqual(one.count, two.count)
        XCTAssertEqual(second.sections, first.sections)
    }

    // MARK: - Hostile cases

    func testTruncatedHeaders() throws {
        let bytes = try Self.program()
        for length in [0, 4, 16, 63] {
            XCTAssertThrowsError(try open(Array(bytes.prefix(length)))) { error in
                guard case ObjectFileError.notELF = error else { return XCTFail("\(length): \(error)") }
            }
        }
        // The ELF header, but the program headers cut off: malformed.
        XCTAssertThrowsError(try open(Array(bytes.prefix(100)))) { error in
            guard case ObjectFileError.malformed = error else { return XCTFail("\(error)") }
        }
        // Headers whole, the section header table cut off: libelf drops it, a partial result.
        let raw = try raw()
        let partial = try open(Array(bytes.prefix(raw.shoff + 10)))
        XCTAssertEqual(partial.sections, [])
        XCTAssertFalse(partial.segments.isEmpty)
        XCTAssertNotNil(partial.buildID)  // from PT_NOTE
        XCTAssertEqual(partial.symbols.count, 0)
        XCTAssertEqual(partial.neededLibraries, [])
    }

    func testNotASixtyFourBitLittleEndianFile() throws {
        var raw = try raw()
        raw.bytes[4] = 1
        XCTAssertThrowsError(try open(raw.bytes)) { error in
            guard case ObjectFileError.notELF = error else { return XCTFail("\(error)") }
        }
        raw = try self.raw()
        raw.bytes[5] = 2
        XCTAssertThrowsError(try open(raw.bytes)) { error in
            guard case ObjectFileError.notELF = error else { return XCTFail("\(error)") }
        }
    }

    func testSectionOffsetsPastTheEndOfTheFile() throws {
        var raw = try raw()
        let size = raw.bytes.count
        for name in [".symtab", ".debug_info", ".note.gnu.build-id", ".dynamic", ".dynsym"] {
            let section = try XCTUnwrap(raw.section(name))
            raw.put(UInt64(size - 8), at: section.header + 24, size: 8)  // starts inside, ends past
        }
        let huge = try XCTUnwrap(raw.section(".debug_line"))
        raw.put(UInt64.max - 16, at: huge.header + 24, size: 8)  // offset+size wraps
        let elf = try open(raw.bytes)
        let symtab = try XCTUnwrap(elf.section(named: ".symtab"))
        XCTAssertNil(elf.contents(of: symtab))
        XCTAssertEqual(elf.symbols.count, 0)
        XCTAssertFalse(elf.definesSymbol(named: "sum_squares"))
        XCTAssertEqual(elf.neededLibraries, [])
        XCTAssertNotNil(elf.buildID)  // the PT_NOTE segment still has it
        for name in [".debug_info", ".debug_line"] {
            let section = try XCTUnwrap(elf.section(named: name))
            XCTAssertNil(elf.compressionHeader(of: section))
            guard case .failure = elf.sectionData(section) else { return XCTFail("\(name) read") }
        }
        XCTAssertEqual(SectionCompression.sectionRefusals(in: elf), [])
    }

    func testCompressedSectionDeclaringGigabytes() throws {
        var raw = try raw()
        let info = try XCTUnwrap(raw.section(".debug_info"))
        raw.put(3 << 30, at: info.offset + 8, size: 8)  // Elf64_Chdr.ch_size
        let line = try XCTUnwrap(raw.section(".debug_line"))
        raw.put(UInt64.max, at: line.offset + 8, size: 8)
        let elf = try open(raw.bytes)
        let refusals = SectionCompression.sectionRefusals(in: elf)
        XCTAssertEqual(refusals.map(\.section), [".debug_info", ".debug_line"])
        XCTAssertEqual(refusals.first?.reason, "declares 3 GiB, past the 256 MiB cap")
        XCTAssertEqual(refusals.first?.module, "patched")
        for name in [".debug_info", ".debug_line"] {
            guard case .failure(let refusal) = elf.sectionData(try XCTUnwrap(elf.section(named: name))) else {
                return XCTFail("\(name) inflated")
            }
            XCTAssertTrue(refusal.reason.hasPrefix("declares"), refusal.reason)
        }
    }

    func testCompressedSectionInflatingToOtherThanDeclared() throws {
        let reference = try open(try Self.program())
        let actual = try XCTUnwrap(reference.compressionHeader(of: try XCTUnwrap(reference.section(named: ".debug_info"))))
        for declared in [actual.declaredSize - 1, actual.declaredSize + 1, actual.declaredSize * 4] {
            var raw = try raw()
            let info = try XCTUnwrap(raw.section(".debug_info"))
            raw.put(declared, at: info.offset + 8, size: 8)
            let elf = try open(raw.bytes)
            let section = try XCTUnwrap(elf.section(named: ".debug_info"))
            guard case .failure(let refusal) = elf.sectionData(section) else { return XCTFail("\(declared) inflated") }
            XCTAssertTrue(refusal.reason.hasPrefix("does not inflate"), refusal.reason)
        }
        // A corrupt stream: refused, not trusted.
        var raw = try raw()
        let info = try XCTUnwrap(raw.section(".debug_info"))
        for at in (info.offset + 26)..<(info.offset + 40) { raw.bytes[at] ^= 0x5A }
        let elf = try open(raw.bytes)
        guard case .failure = elf.sectionData(try XCTUnwrap(elf.section(named: ".debug_info"))) else {
            return XCTFail("corrupt stream inflated")
        }
    }

    func testNotesWhoseLengthsWrap() throws {
        for (nameSize, descSize) in [(UInt64(0xFFFF_FFFF), UInt64(20)), (4, 0xFFFF_FFFD), (0xFFFF_FFFC, 0xFFFF_FFFC)] {
            var raw = try raw()
            let note = try XCTUnwrap(raw.section(".note.gnu.build-id"))
            raw.put(nameSize, at: note.offset, size: 4)
            raw.put(descSize, at: note.offset + 4, size: 4)
            let elf = try open(raw.bytes)
            XCTAssertNil(elf.buildID)  // the PT_NOTE segment holds the same bytes
            let contents = try XCTUnwrap(elf.contents(of: try XCTUnwrap(elf.section(named: ".note.gnu.build-id"))))
            XCTAssertNil(ELFFile.buildID(inNotes: contents))
        }
    }

    func testSymbolNamesOutsideTheStringTable() throws {
        var raw = try raw()
        let symtab = try XCTUnwrap(raw.section(".symtab"))
        for entry in stride(from: symtab.offset, to: symtab.offset + symtab.size, by: 24) {
            raw.put(0xFFFF_FF00, at: entry, size: 4)  // st_name
        }
        let elf = try open(raw.bytes)
        XCTAssertFalse(elf.definesSymbol(named: "sum_squares"))
        for range in elf.executableRanges {
            var address = range.lowerBound
            while address < range.upperBound {
                XCTAssertNotEqual(elf.symbols.lookup(address)?.name, "sum_squares")
                address += 4
            }
        }
        // The string table itself cut to nothing: no symbols from .symtab either.
        var cut = try self.raw()
        let strtab = try XCTUnwrap(cut.section(".strtab"))
        cut.put(0, at: strtab.header + 32, size: 8)
        XCTAssertFalse(try open(cut.bytes).definesSymbol(named: "sum_squares"))
    }

    func testHugeSectionAndProgramHeaderCounts() throws {
        var raw = try raw()
        raw.put(0xFFFF, at: 60, size: 2)  // e_shnum: past the file, so libelf drops the table
        var elf = try open(raw.bytes)
        XCTAssertEqual(elf.sections, [])
        XCTAssertNotNil(elf.buildID)

        raw = try self.raw()
        raw.put(0, at: 60, size: 2)  // extended numbering: the count in section 0's sh_size
        raw.put(0xFFFF_FFFF, at: raw.shoff + 32, size: 8)
        elf = try open(raw.bytes)
        XCTAssertEqual(elf.sections, [])

        raw = try self.raw()
        raw.put(UInt64(1) << 40, at: raw.shoff + 32, size: 8)  // beyond a GElf_Word: libelf errors
        raw.put(0, at: 60, size: 2)
        XCTAssertNoThrow(try? open(raw.bytes))

        raw = try self.raw()
        raw.put(0xFFFE, at: 56, size: 2)  // e_phnum past the file
        XCTAssertThrowsError(try open(raw.bytes)) { error in
            guard case ObjectFileError.malformed = error else { return XCTFail("\(error)") }
        }
        // PN_XNUM: the count is section 0's sh_info, here 0: no program headers, a partial result.
        raw.put(0xFFFF, at: 56, size: 2)
        XCTAssertEqual(try open(raw.bytes).segments, [])
        raw.put(0x7FFF_FFFF, at: raw.shoff + 44, size: 4)  // and now a huge sh_info
        XCTAssertThrowsError(try open(raw.bytes))
        raw = try self.raw()
        raw.put(UInt64.max - 8, at: 32, size: 8)  // e_phoff wraps
        XCTAssertThrowsError(try open(raw.bytes))
    }

    func testSectionNameTableIndexOutOfRange() throws {
        for index in [UInt64(0xFFF0), 0xFFFF, 1] {  // past the table, SHN_XINDEX, not a string table
            var raw = try raw()
            raw.put(index, at: 62, size: 2)
            let elf = try open(raw.bytes)
            XCTAssertFalse(elf.sections.isEmpty)
            if index != 1 { XCTAssertTrue(elf.sections.allSatisfy { $0.name.isEmpty }) }
            // Symbol tables are found by type: still read.
            XCTAssertTrue(elf.definesSymbol(named: "sum_squares"))
            XCTAssertNotNil(elf.buildID)  // PT_NOTE
        }
    }
}
