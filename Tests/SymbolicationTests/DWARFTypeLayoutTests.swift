// DWARFTypeLayoutTests: member offsets and type sizes read from the DWARF of a C program gcc
// compiles in the test run (DWARF 5 and 4), against the offsetof() and sizeof() values the same
// program prints when run; and hostile or absent answers as nil.

import Foundation
import ObjectFile
import Symbolication
import TestSupport
import XCTest

final class DWARFTypeLayoutTests: XCTestCase {
    /// Nested structures, typedef'd and tagged names, an anonymous struct and union member,
    /// const and volatile members, a bitfield; main prints each offsetof/sizeof as "key value".
    static let source = """
        #include <stddef.h>
        #include <stdio.h>
        struct inner { char tag; long long value; struct { short a; int b; } pair; };
        typedef struct outer_s {
            int first;
            const volatile struct inner nested;
            struct { char c; double d; };
            union { int i; struct { char pad[3]; long deep; }; };
            struct inner list[3];
            unsigned flags : 3;
            void *last;
        } Outer;
        typedef const Outer ConstOuter;
        typedef struct { int x; Outer o; } Wrapper;
        Wrapper global_wrapper;
        ConstOuter *global_pointer;
        int main(void) {
            printf("Outer.first %zu\\n", offsetof(Outer, first));
            printf("Outer.nested %zu\\n", offsetof(Outer, nested));
            printf("Outer.nested.value %zu\\n", offsetof(Outer, nested.value));
            printf("Outer.nested.pair.b %zu\\n", offsetof(Outer, nested.pair.b));
            printf("Outer.d %zu\\n", offsetof(Outer, d));
            printf("Outer.i %zu\\n", offsetof(Outer, i));
            printf("Outer.deep %zu\\n", offsetof(Outer, deep));
            printf("Outer.list %zu\\n", offsetof(Outer, list));
            printf("Outer.last %zu\\n", offsetof(Outer, last));
            printf("Wrapper.o.nested.pair.a %zu\\n", offsetof(Wrapper, o.nested.pair.a));
            printf("Wrapper.o.deep %zu\\n", offsetof(Wrapper, o.deep));
            printf("sizeof Outer %zu\\n", sizeof(Outer));
            printf("sizeof Wrapper %zu\\n", sizeof(Wrapper));
            printf("sizeof inner %zu\\n", sizeof(struct inner));
            return 0;
        }

        """

    var directory = ""

    override func setUp() {
        directory = TestSupport.temporaryDirectory("dwarf-type-layout")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The program built with `flags` and what it prints, as "key" → value.
    private func build(_ flags: [String], output: String) throws -> (String, [String: UInt64]) {
        guard TestSupport.which("gcc") != nil else { throw XCTSkip("no gcc") }
        let source = directory + "/layout.c"
        try Self.source.write(toFile: source, atomically: true, encoding: .utf8)
        let program = try TestSupport.compile([source], output: directory + "/" + output, compiler: "gcc", flags: flags)
        let result = try TestSupport.run([program])
        XCTAssertEqual(result.status, .exited(0))
        var expected: [String: UInt64] = [:]
        for line in result.stdout.split(separator: "\n") {
            let parts = line.split(separator: " ")
            expected[parts.dropLast().joined(separator: " ")] = UInt64(parts.last!)
        }
        XCTAssertEqual(expected.count, 14)
        return (program, expected)
    }

    private func assertMatches(_ flags: [String], output: String) throws {
        let (program, expected) = try build(flags, output: output)
        let elf = try ELFFile(path: program)
        let names: Set<String> = ["Outer", "Wrapper", "inner", "outer_s", "ConstOuter", "missing"]
        let layout = try XCTUnwrap(DWARFTypeLayout(elf: elf, typeNames: names))
        for (key, value) in expected {
            if key.hasPrefix("sizeof ") {
                XCTAssertEqual(layout.size(of: String(key.dropFirst(7))), value, key)
            } else {
                let dot = key.firstIndex(of: ".")!
                let type = String(key[..<dot]), path = String(key[key.index(after: dot)...])
                XCTAssertEqual(layout.offset(of: path, in: type), value, key)
                if type == "Outer" {
                    // The struct's tag and a typedef of a const Outer name the same layout.
                    XCTAssertEqual(layout.offset(of: path, in: "outer_s"), value, key)
                    XCTAssertEqual(layout.offset(of: path, in: "ConstOuter"), value, key)
                }
            }
        }
        XCTAssertEqual(layout.size(of: "ConstOuter"), expected["sizeof Outer"])
        // Not there: a type, a member, a path through a pointer or an array, a bitfield.
        XCTAssertNil(layout.size(of: "missing"))
        XCTAssertNil(layout.offset(of: "first", in: "missing"))
        XCTAssertNil(layout.offset(of: "nothing", in: "Outer"))
        XCTAssertNil(layout.offset(of: "last.x", in: "Outer"))
        XCTAssertNil(layout.offset(of: "list.tag", in: "Outer"))
        XCTAssertNil(layout.offset(of: "flags", in: "Outer"))
        XCTAssertNil(layout.offset(of: "", in: "Outer"))
        XCTAssertNil(layout.offset(of: "first.", in: "Outer"))
    }

    func testGCCDWARF5OffsetsMatchOffsetof() throws {
        try assertMatches(["-O0", "-g"], output: "layout-dwarf5")
    }

    func testGCCDWARF4OffsetsMatchOffsetof() throws {
        try assertMatches(["-O0", "-gdwarf-4"], output: "layout-dwarf4")
    }

    func testCompressedDWARFOffsetsMatchOffsetof() throws {
        try assertMatches(["-O0", "-g", "-gz"], output: "layout-gz")
    }

    func testNoDWARFIsNil() throws {
        let (program, _) = try build(["-O0"], output: "layout-nodebug")
        XCTAssertNil(DWARFTypeLayout(elf: try ELFFile(path: program), typeNames: ["Outer"]))
        XCTAssertNil(
            DWARFTypeLayout.open(
                elf: try ELFFile(path: program), locator: DebugFileLocator(debugDirectories: [directory]),
                typeNames: ["Outer"]))
    }

    /// A stripped program's DWARF from its separate debug file (.gnu_debuglink, next to it).
    func testSeparateDebugFile() throws {
        let (program, expected) = try build(["-O0", "-g"], output: "layout-split")
        guard TestSupport.which("objcopy") != nil else { throw XCTSkip("no objcopy") }
        let debug = program + ".debug"
        for command in [
            ["objcopy", "--only-keep-debug", program, debug],
            ["objcopy", "--strip-debug", "--add-gnu-debuglink=" + debug, program],
        ] {
            XCTAssertEqual(try TestSupport.run(command).status, .exited(0), "\(command)")
        }
        let stripped = try ELFFile(path: program)
        XCTAssertNil(stripped.section(named: ".debug_info"))
        XCTAssertNil(DWARFTypeLayout(elf: stripped, typeNames: ["Outer"]))
        let layout = try XCTUnwrap(
            DWARFTypeLayout.open(elf: stripped, locator: DebugFileLocator(), typeNames: ["Outer", "Wrapper"]))
        XCTAssertEqual(layout.file.path, debug)
        XCTAssertEqual(layout.offset(of: "o.deep", in: "Wrapper"), expected["Wrapper.o.deep"])
        XCTAssertEqual(layout.size(of: "Outer"), expected["sizeof Outer"])
    }

    /// A typedef whose DW_AT_type names itself (patched in where readelf shows it): nil for
    /// that name, in bounded time, and the other names still answered.
    func testTypedefCycleIsNil() throws {
        let (program, expected) = try build(["-O0", "-g"], output: "layout-cycle")
        guard TestSupport.which("readelf") != nil else { throw XCTSkip("no readelf") }
        let dump = try TestSupport.run(["readelf", "--debug-dump=info", program]).stdout
        // "Compilation Unit @ offset 0x0:", " <1><1be>: Abbrev Number: 6 (DW_TAG_typedef)",
        // "    <1bf>   DW_AT_name        : (indirect string, offset: 0xbc): ConstOuter",
        // "    <1c5>   DW_AT_type        : <0x1b9>".
        func hex(_ text: Substring) -> Int? { Int(text.drop { !$0.isHexDigit }.prefix { $0.isHexDigit }, radix: 16) }
        var unit = 0, die = 0
        var patch: (at: Int, value: Int)?
        var inTypedef = false
        for line in dump.split(separator: "\n") {
            if let range = line.range(of: "Compilation Unit @ offset 0x") {
                unit = Int(line[range.upperBound...].prefix { $0.isHexDigit }, radix: 16) ?? 0
            } else if line.contains("Abbrev Number"), let close = line.firstIndex(of: ">"),
                let open = line[line.index(after: close)...].firstIndex(of: "<")
            {
                die = hex(line[open...]) ?? 0
                inTypedef = line.contains("DW_TAG_typedef")
            } else if inTypedef, line.hasSuffix(": ConstOuter") {
                patch = (0, 0)  // the typedef found: its DW_AT_type comes next
            } else if inTypedef, patch?.at == 0, line.contains("DW_AT_type"), let at = hex(line) {
                patch = (at, die - unit)
                break
            }
        }
        let (at, value) = try XCTUnwrap(patch)
        XCTAssertGreaterThan(at, 0)
        let elf = try ELFFile(path: program)
        let info = try XCTUnwrap(elf.section(named: ".debug_info"))
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: program)))
        for index in 0..<4 { bytes[Int(info.offset) + at + index] = UInt8(truncatingIfNeeded: value >> (8 * index)) }
        let path = directory + "/cycle"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let layout = try XCTUnwrap(DWARFTypeLayout(elf: try ELFFile(path: path), typeNames: ["ConstOuter", "Outer"]))
        XCTAssertNil(layout.offset(of: "first", in: "ConstOuter"))
        XCTAssertNil(layout.size(of: "ConstOuter"))
        XCTAssertEqual(layout.offset(of: "deep", in: "Outer"), expected["Outer.deep"])
    }

    /// Every byte of .debug_info flipped in turn (a few at a time), and cut short: answers are
    /// nil or numbers, never a trap or a hang.
    func testCorruptedDWARFNeverTraps() throws {
        let (program, _) = try build(["-O0", "-g"], output: "layout-corrupt")
        let original = try Data(contentsOf: URL(fileURLWithPath: program))
        let elf = try ELFFile(path: program)
        let info = try XCTUnwrap(elf.section(named: ".debug_info"))
        let start = Int(info.offset), count = Int(info.size)
        var generator = SystemRandomNumberGenerator()
        for round in 0..<60 {
            var bytes = [UInt8](original)
            if round % 10 == 9 {
                // Cut: the rest of the section zeros.
                let cut = Int.random(in: 0..<count, using: &generator)
                for index in (start + cut)..<(start + count) { bytes[index] = 0 }
            } else {
                for _ in 0..<8 {
                    bytes[start + Int.random(in: 0..<count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                }
            }
            let path = directory + "/corrupt-\(round)"
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            guard let corrupt = try? ELFFile(path: path),
                let layout = DWARFTypeLayout(elf: corrupt, typeNames: ["Outer", "Wrapper", "inner"])
            else { continue }
            for path in ["first", "nested.pair.b", "deep", "o.deep", "last"] {
                for type in ["Outer", "Wrapper"] {
                    if let value = layout.offset(of: path, in: type) { XCTAssertLessThanOrEqual(value, 1 << 32) }
                }
            }
            _ = layout.size(of: "inner")
        }
    }
}
