// What a compressed section costs in memory once inflated: the compressed stream's pages are
// given back (the watcher keeps inflated debug sections for warm reports, and held both before),
// read from /proc/self/pagemap, and the file's bytes read the same afterwards.

import BoundedBytes
import Foundation
@testable import ObjectFile
import TestSupport
import XCTest

final class SectionMemoryTests: XCTestCase {
    /// Whether each page of `range` in this process is in memory (pagemap's present bit).
    func residentPages(_ range: UnsafeRawBufferPointer) throws -> [Bool] {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let first = Int(bitPattern: range.baseAddress) / page
        let last = (Int(bitPattern: range.baseAddress) + range.count - 1) / page
        let handle = try XCTUnwrap(FileHandle(forReadingAtPath: "/proc/self/pagemap"))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(first * 8))
        let data = try XCTUnwrap(try handle.read(upToCount: (last - first + 1) * 8))
        return stride(from: 0, to: data.count, by: 8).map { data[data.startIndex + $0 + 7] & 0x80 != 0 }
    }

    func testInflatingGivesBackTheCompressedPages() throws {
        let directory = TestSupport.temporaryDirectory("section-memory")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Enough distinct types and functions for a .debug_info whose stream spans many pages.
        var source = ""
        for index in 0..<3000 {
            source += "struct s\(index) { int a\(index); long b\(index); const char *c\(index); };\n"
            source += "long f\(index)(struct s\(index) *p) { return p->a\(index) + p->b\(index) + (long)p->c\(index); }\n"
        }
        source += "int main(void) { return 0; }\n"
        try source.write(toFile: directory + "/big.c", atomically: true, encoding: .utf8)
        let path = try TestSupport.compile(
            [directory + "/big.c"], output: directory + "/big", flags: ["-O0", "-g", "-gz=zlib"])
        let elf = try ELFFile(path: path)
        let info = try XCTUnwrap(elf.section(named: ".debug_info"))
        XCTAssertNotNil(elf.compressionHeader(of: info))
        let stream = try XCTUnwrap(elf.contents(of: info))
        XCTAssertGreaterThan(stream.count, 8 * 4096, "the test needs a stream of several pages")
        let copy = try XCTUnwrap(stream.array(0, UInt64(stream.count)))  // reads, so faults, every page
        XCTAssertEqual(try residentPages(stream.bytes).filter { $0 }.count, try residentPages(stream.bytes).count)

        let inflated = try elf.sectionData(info).get()
        XCTAssertEqual(inflated.u16(4), 5)  // a DWARF 5 unit header's version

        // Every page wholly inside the stream is gone; at most the two it shares at its ends stay.
        let resident = try residentPages(stream.bytes)
        XCTAssertLessThanOrEqual(resident.filter { $0 }.count, 2, "\(resident)")
        // The file reads back unchanged (faulted in again from the page cache), and asking again
        // gives the same inflated bytes.
        XCTAssertEqual(stream.array(0, UInt64(stream.count)), copy)
        XCTAssertEqual(try elf.sectionData(info).get().bytes.baseAddress, inflated.bytes.baseAddress)
    }

    func testAnImageHeldInMemoryKeepsItsBytes() throws {
        // The same program copied into memory (as the vDSO or MiniDebugInfo are): nothing is
        // released, since anonymous memory given back would read as zeros.
        let directory = TestSupport.temporaryDirectory("section-memory")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "int main(void) { return 0; }\n".write(toFile: directory + "/p.c", atomically: true, encoding: .utf8)
        let path = try TestSupport.compile([directory + "/p.c"], output: directory + "/p", flags: ["-O0", "-g", "-gz=zlib"])
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        let elf = try ELFFile(file: MappedFile(bytes: bytes, name: "p (copied)"))
        let info = try XCTUnwrap(elf.section(named: ".debug_info"))
        let before = try XCTUnwrap(elf.contents(of: info).flatMap { $0.array(0, UInt64($0.count)) })
        _ = try elf.sectionData(info).get()
        XCTAssertEqual(elf.contents(of: info).flatMap { $0.array(0, UInt64($0.count)) }, before)
    }

    /// A program whose zlib .debug_info spans several of InflatedSection's checkpoints, as a
    /// fresh copy in `directory` that the test may change (its mode, its bytes), with a build-id
    /// of its own, as a program compiled for the test would have: what one test puts in the
    /// section cache (keyed by build-id) is never another's.
    func bigCompressedProgram(_ directory: String) throws -> String {
        guard let built = Self.bigProgram.path else { throw TestFailure(Self.bigProgram.failure) }
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: built)))
        let id = try XCTUnwrap(try ELFFile(path: built).buildID, "the program has no build-id").bytes
        let at = try XCTUnwrap(
            (0...(bytes.count - id.count)).first { bytes[$0..<$0 + id.count].elementsEqual(id) }, "its build-id's bytes")
        for index in at..<at + id.count { bytes[index] = UInt8.random(in: 0...255) }
        let path = directory + "/big"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        XCTAssertEqual(chmod(path, 0o755), 0)
        return path
    }

    /// The big program, compiled once per test process (each compile takes seconds, and four
    /// tests use it), or why it could not be.
    static let bigProgram: (path: String?, failure: String) = {
        let directory = TestSupport.temporaryDirectory("section-memory-big")
        var source = ""
        for index in 0..<8000 {
            source += "struct s\(index) { int a\(index); long b\(index); const char *c\(index); };\n"
            source += "long f\(index)(struct s\(index) *p) { return p->a\(index) + p->b\(index) + (long)p->c\(index); }\n"
        }
        source += "int main(void) { return 0; }\n"
        do {
            try source.write(toFile: directory + "/big.c", atomically: true, encoding: .utf8)
            return (
                try TestSupport.compile([directory + "/big.c"], output: directory + "/big", flags: ["-O0", "-g", "-gz=zlib"]), ""
            )
        } catch {
            return (nil, "\(error)")
        }
    }()

    func testOnDemandInflationGivesLibelfsBytesForThePagesAskedOnly() throws {
        let directory = TestSupport.temporaryDirectory("section-memory")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try bigCompressedProgram(directory)
        // Others may write the file: nothing of it goes to SectionCache (whose copy the reference
        // read would make, and the on-demand read below would then map instead of inflating).
        XCTAssertEqual(chmod(path, 0o777), 0)
        let reference = try ELFFile(path: path)
        let info = try XCTUnwrap(reference.section(named: ".debug_info"))
        let whole = try reference.sectionData(info).get()
        XCTAssertGreaterThan(whole.count, InflatedSection.checkpointInterval + 4096, "the test needs a checkpoint")

        let elf = try ELFFile(path: path)
        var scanned = 0
        let section = try XCTUnwrap(
            elf.inflatedOnDemand(info) { chunk, offset in
                XCTAssertEqual(offset, scanned)
                XCTAssertEqual(Array(chunk), whole.array(UInt64(offset), UInt64(chunk.count)))
                scanned += chunk.count
            })
        XCTAssertEqual(scanned, whole.count)
        XCTAssertEqual(section.view.count, whole.count)
        // Nothing is in memory until asked for.
        XCTAssertEqual(try residentPages(section.view.bytes).filter { $0 }.count, 0)

        let page = 4096
        let ranges = [
            (whole.count / 2 + 100)..<(whole.count / 2 + 5000),  // after a checkpoint
            0..<64,  // before the first
            (whole.count - 10)..<whole.count,  // the end
            (InflatedSection.checkpointInterval - 3)..<(InflatedSection.checkpointInterval + 3),  // across one
        ]
        var expected = 0
        for range in ranges {
            section.materialize(range)
            expected += (range.upperBound - 1) / page - range.lowerBound / page + 1
            XCTAssertEqual(
                section.view.array(UInt64(range.lowerBound), UInt64(range.count)),
                whole.array(UInt64(range.lowerBound), UInt64(range.count)), "\(range)")
        }
        XCTAssertLessThanOrEqual(try residentPages(section.view.bytes).filter { $0 }.count, expected)
    }

    /// A section the cache kept is scanned once at open (its unit headers) by reading the file,
    /// not through the mapping: the scan does not grow the resident set by the section's size
    /// (libc6-dbg's .debug_info: 5.8 MB, most of a crash storm's peak above a sidecar's floor).
    func testACachedSectionIsScannedWithoutMappingItsPages() throws {
        guard let directory = SectionCache.directory else {
            throw XCTSkip("no section cache directory for this user (CRASHPORT_SECTION_CACHE empty, or no home)")
        }
        let size = 8 << 20
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 7) }
        let buildID = try XCTUnwrap(BuildID((0..<20).map { _ in UInt8.random(in: 0...255) }))
        let name = try XCTUnwrap(SectionCache.name(buildID: buildID, section: ".debug_info", size: size))
        let path = directory + "/" + name
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes), attributes: [.posixPermissions: 0o600]))
        defer { try? FileManager.default.removeItem(atPath: path) }
        func fileResident() -> Int {
            let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("RssFile:") } ?? ""
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) << 10
        }
        var scanned = 0
        var atStart = 0
        var grown = 0
        let file = try XCTUnwrap(
            SectionCache.mapped(buildID: buildID, section: ".debug_info", size: size) { chunk, offset in
                XCTAssertEqual(offset, scanned)
                XCTAssertLessThanOrEqual(chunk.count, 64 << 10)
                if offset == 0 { atStart = fileResident() }
                if chunk.elementsEqual(bytes[offset..<offset + chunk.count]) == false { XCTFail("chunk at \(offset) differs") }
                scanned += chunk.count
                grown = max(grown, fileResident() - atStart)
            })
        let mapping = file.bytes
        XCTAssertEqual(scanned, size)
        XCTAssertEqual(mapping.count, size)
        XCTAssertLessThan(grown, 2 << 20, "the scan mapped the section's pages in")
        XCTAssertEqual(try residentPages(mapping).filter { $0 }.count, 0)
        XCTAssertEqual(Array(mapping[123_457..<123_557]), Array(bytes[123_457..<123_557]))
    }

    /// A cache file that shrinks under its mapping (or fails a read) reads as zeros past its new
    /// end, is torn, and is removed when let go of: the next watcher inflates that section again.
    func testATornCacheFileIsRemoved() throws {
        guard let directory = SectionCache.directory else {
            throw XCTSkip("no section cache directory for this user (CRASHPORT_SECTION_CACHE empty, or no home)")
        }
        let size = 64 << 10
        let buildID = try XCTUnwrap(BuildID((0..<20).map { _ in UInt8.random(in: 0...255) }))
        let name = try XCTUnwrap(SectionCache.name(buildID: buildID, section: ".debug_str", size: size))
        let path = directory + "/" + name
        XCTAssertTrue(
            FileManager.default.createFile(
                atPath: path, contents: Data(repeating: 7, count: size), attributes: [.posixPermissions: 0o600]))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try XCTUnwrap(SectionCache.mapped(buildID: buildID, section: ".debug_str", size: size))
        XCTAssertEqual(ByteView(file.bytes).u8(10), 7)
        XCTAssertEqual(truncate(path, 4096), 0)
        XCTAssertEqual(ByteView(file.bytes).u8(UInt64(size - 1)), 0)
        XCTAssertTrue(file.torn)
        SectionCache.discard(file)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
    }

    /// Root's files on a nosuid mount (a user's media or FUSE mount, where a file can read as
    /// root's whatever its bytes) are not kept in the section cache; the same file elsewhere is.
    func testAFileOnANosuidMountIsNotCached() throws {
        guard let cache = SectionCache.directory else {
            throw XCTSkip("no section cache directory for this user (CRASHPORT_SECTION_CACHE empty, or no home)")
        }
        guard getuid() == 0 else { throw XCTSkip("mounting a tmpfs needs root") }
        let directory = TestSupport.temporaryDirectory("section-nosuid")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let mount = directory + "/mount"
        XCTAssertEqual(mkdir(mount, 0o755), 0)
        let mounted = try TestSupport.run(["mount", "-t", "tmpfs", "-o", "nosuid,size=64m", "tmpfs", mount])
        guard mounted.status == .exited(0) else {
            throw XCTSkip("this machine cannot mount a tmpfs here: \(mounted.stderr)")
        }
        defer { _ = try? TestSupport.run(["umount", mount]) }
        let program = try bigCompressedProgram(directory)
        let onNosuid = mount + "/big"
        XCTAssertEqual(try TestSupport.run(["cp", program, onNosuid]).status, .exited(0))
        func cachedSections(_ path: String) throws -> [String] {
            let elf = try ELFFile(path: path)
            let buildID = try XCTUnwrap(elf.buildID, "the program has no build-id")
            // .debug_str (and the other smaller sections) are read whole through sectionData.
            let strings = try XCTUnwrap(elf.section(named: ".debug_str"))
            _ = try elf.sectionData(strings).get()
            return ((try? FileManager.default.contentsOfDirectory(atPath: cache)) ?? []).filter {
                $0.hasPrefix(buildID.hex)
            }
        }
        XCTAssertEqual(try cachedSections(onNosuid), [], "a file of a nosuid mount was cached")
        let kept = try cachedSections(program)
        XCTAssertFalse(kept.isEmpty, "the same file on a suid mount was not cached: the test shows nothing")
        for name in kept { try? FileManager.default.removeItem(atPath: cache + "/" + name) }
    }

    /// The symbol tables are read once, into a sorted table: their pages then go back (a
    /// report of libc held libc6-dbg's 360 KB of them), and names read again fault back in.
    func testTheSymbolTablesPagesGoBackOnceSorted() throws {
        let directory = TestSupport.temporaryDirectory("section-memory")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try bigCompressedProgram(directory)
        let elf = try ELFFile(path: path)
        let symtab = try XCTUnwrap(elf.section(named: ".symtab"))
        XCTAssertGreaterThan(symtab.size, 64 << 10, "the test needs a symbol table of many pages")
        let range = Int(symtab.offset)..<Int(symtab.offset + symtab.size)
        let pages = UnsafeRawBufferPointer(rebasing: elf.file.bytes[range])
        let table = elf.symbols
        XCTAssertGreaterThan(table.count, 8000)
        // Whole pages inside the table only: the ends may share a page with another section.
        XCTAssertLessThanOrEqual(try residentPages(pages).filter { $0 }.count, 2)
        let nm = try TestSupport.run(["nm", path]).stdout
        let line = try XCTUnwrap(nm.split(separator: "\n").first { $0.hasSuffix(" T f4321") })
        let address = try XCTUnwrap(UInt64(line.prefix { $0 != " " }, radix: 16))
        XCTAssertEqual(table.lookup(address + 4)?.name, "f4321")
    }

    func testACorruptOrMisdeclaredStreamIsNotInflatedOnDemand() throws {
        let directory = TestSupport.temporaryDirectory("section-memory")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try bigCompressedProgram(directory)
        let original = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        let info = try XCTUnwrap(try ELFFile(path: path).section(named: ".debug_info"))
        let streamStart = Int(info.offset) + 24  // after the Elf64_Chdr
        let declaredAt = Int(info.offset) + 8  // ch_size
        var cases: [(String, [UInt8])] = []
        var corrupt = original
        for index in (streamStart + Int(info.size) / 2)..<(streamStart + Int(info.size) / 2 + 64) { corrupt[index] = 0 }
        cases.append(("corrupt stream", corrupt))
        for (label, delta) in [
            ("declares more than it holds", 4096), ("declares less than it holds", -4096),
            ("declares 3 GiB, past the cap", 3 << 30),
        ] {
            var misdeclared = original
            let declared = Int(truncatingIfNeeded: original.u64(at: declaredAt)) + delta
            misdeclared.put(UInt64(truncatingIfNeeded: declared), at: declaredAt, size: 8)
            cases.append((label, misdeclared))
        }
        var truncated = original
        truncated.removeSubrange((streamStart + 100)..<(streamStart + Int(info.size) - 24))
        cases.append(("truncated stream", truncated))
        for (label, bytes) in cases {
            guard let elf = try? ELFFile(file: MappedFile(bytes: bytes, name: label)),
                let section = elf.section(named: ".debug_info")
            else { continue }  // a header the cut left unreadable: nothing to inflate
            XCTAssertNil(elf.inflatedOnDemand(section) { _, _ in }, label)
        }
    }
}
