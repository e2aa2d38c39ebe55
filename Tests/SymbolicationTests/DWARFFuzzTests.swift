// DWARFFuzzTests: DWARFInfo (lookups and call sites) over thousands of corrupted copies of real programs' debug
// sections (flipped bits, runs of 0xFF/0x80 that make endless LEB128s, random bytes, sections
// truncated or moved through their header, zlib streams damaged), from C and C++ programs. The files are built in memory with
// MappedFile(bytes:), with a fixed seed so a failure reproduces. It passes by not trapping,
// not hanging (a wall-clock bound) and not exhausting memory; the results are not checked.

import ObjectFile
import Foundation
import Symbolication
import TestSupport
import XCTest

final class DWARFFuzzTests: XCTestCase {
    struct Subject {
        var bytes: [UInt8]
        var sections: [(index: Int, section: ELFSection)]
        var sectionHeaders: Int
        var addresses: [UInt64]
    }

    private func subject(_ path: String) throws -> Subject {
        let elf = try ELFFile(path: path)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let sections = elf.sections.enumerated()
            .filter { $0.element.name.hasPrefix(".debug_") && $0.element.type != ELFSection.noBits && $0.element.size > 0 }
            .map { (index: $0.offset, section: $0.element) }
        let sectionHeaders = ELFImage(bytes: bytes).shoff
        let text = try XCTUnwrap(elf.section(named: ".text"))
        let addresses = SymbolicationFixtures.textAddresses(elf, stride: max(1, text.size / 40))
        XCTAssertFalse(sections.isEmpty)
        XCTAssertNotNil(DWARFInfo(elf: elf))
        return Subject(bytes: bytes, sections: sections, sectionHeaders: sectionHeaders, addresses: addresses)
    }

    func testMutatedDebugSectionsNeverCrash() throws {
        let directory = SymbolicationFixtures.temporaryDirectory("dwarf-fuzz")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gcc = try SymbolicationFixtures.require("gcc")[0]
        try DWARFReaderTests.header.write(toFile: directory + "/helpers.h", atomically: true, encoding: .utf8)
        var subjects: [Subject] = []
        for (flags, output) in [(["-O2", "-g"], "v5"), (["-O2", "-gdwarf-4"], "v4"), (["-O2", "-g", "-gz"], "gz")] {
            subjects.append(
                try subject(
                    try SymbolicationFixtures.compile(
                        source: DWARFReaderTests.cSource, name: "fuzz.c", in: directory, compiler: gcc, flags: flags,
                        output: output)))
        }
        if let gxx = SymbolicationFixtures.tool("g++") {
            subjects.append(
                try subject(
                    try SymbolicationFixtures.compile(
                        source: DWARFReaderTests.cppSource, name: "fuzz.cpp", in: directory, compiler: gxx, flags: ["-O2", "-g"],
                        output: "cpp")))
        }
        if let clang = SymbolicationFixtures.tool("clang") {
            subjects.append(
                try subject(
                    try SymbolicationFixtures.compile(
                        source: DWARFReaderTests.cSource, name: "fuzz.c", in: directory, compiler: clang, flags: ["-O2", "-g"],
                        output: "clang")))
        }

        // DWARF_FUZZ_ITERATIONS / DWARF_FUZZ_SECONDS / DWARF_FUZZ_SEED run a longer campaign.
        let environment = ProcessInfo.processInfo.environment
        let limit = environment["DWARF_FUZZ_ITERATIONS"].flatMap(Int.init) ?? 2000
        let seconds = environment["DWARF_FUZZ_SECONDS"].flatMap(Double.init) ?? 20
        var generator = SplitMix64(seed: environment["DWARF_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0x5EED_DEAD_BEEF)
        let start = Date()
        var iterations = 0, parsed = 0, frames = 0
        var slowest: TimeInterval = 0
        while iterations < limit && Date().timeIntervalSince(start) < seconds {
            let subject = subjects[iterations % subjects.count]
            var bytes = subject.bytes
            let (index, section) = subject.sections[generator.below(subject.sections.count)]
            let base = Int(section.offset), size = Int(section.size)
            switch generator.below(6) {
            case 0:  // flip a few bits
                for _ in 0..<(1 + generator.below(8)) { bytes[base + generator.below(size)] ^= UInt8(1 << generator.below(8)) }
            case 1:  // random bytes, scattered or in one block
                if generator.below(2) == 0 {
                    for _ in 0..<(1 + generator.below(16)) {
                        bytes[base + generator.below(size)] = UInt8(truncatingIfNeeded: generator.next())
                    }
                } else {
                    let at = base + generator.below(size)
                    for offset in at..<min(base + size, at + 1 + generator.below(256)) {
                        bytes[offset] = UInt8(truncatingIfNeeded: generator.next())
                    }
                }
            case 2:  // a run of LEB128 continuation bytes or all-ones
                let fill: UInt8 = generator.below(2) == 0 ? 0xFF : 0x80
                let at = base + generator.below(size)
                for offset in at..<min(base + size, at + 1 + generator.below(64)) { bytes[offset] = fill }
            case 3:  // truncate the section through its header's sh_size
                let header = subject.sectionHeaders + index * 64 + 32
                let newSize = UInt64(generator.below(size))
                bytes.put(u64: newSize, at: header)
            case 4:  // move the section: a random sh_offset, possibly out of the file
                let header = subject.sectionHeaders + index * 64 + 24
                let newOffset = generator.below(2) == 0 ? UInt64(generator.below(bytes.count)) : generator.next()
                bytes.put(u64: newOffset, at: header)
            default:  // damage every debug section a little
                for (_, other) in subject.sections {
                    bytes[Int(other.offset) + generator.below(Int(other.size))] = UInt8(truncatingIfNeeded: generator.next())
                }
            }
            iterations += 1
            let variantStart = Date()
            let file = MappedFile(bytes: bytes, name: "fuzz-\(iterations)")
            guard let elf = try? ELFFile(file: file), let info = DWARFInfo(elf: elf) else { continue }
            parsed += 1
            for address in subject.addresses {
                frames += info.frames(at: address).count
                // The call sites of tail-call frames (DWARFCallSites), read from the same units.
                _ = info.callSite(returningTo: address)
                if let entry = info.functionEntry(containing: address) { _ = info.tailCalls(ofFunctionAt: entry, limit: 64) }
            }
            slowest = max(slowest, Date().timeIntervalSince(variantStart))
        }
        print(
            "DWARF fuzz: \(iterations) variants, \(parsed) parsed, \(frames) frames, \(Date().timeIntervalSince(start)) s,"
                + " slowest variant \(slowest) s")
        XCTAssertGreaterThan(iterations, 100)
        XCTAssertGreaterThan(parsed, iterations / 2)
    }
}
