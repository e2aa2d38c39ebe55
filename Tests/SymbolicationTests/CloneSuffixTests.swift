// GCC's clones and split parts (issue 33): which suffixes CloneSuffixes drops, and how
// Symbolizer names a clone's frame: for reports by its source function (DWARF's, else the
// symbol's without the suffixes) with the symbol that ran in `symbol`; for `symbolicate --obj`
// by the symbol itself, as llvm-symbolizer does. C and C++ (whose suffixed names must still
// demangle), with DWARF and with a symbol table alone.

import Foundation
import ObjectFile
@testable import Symbolication
import TestSupport
import XCTest

final class CloneSuffixTests: XCTestCase {
    func testSuffixesDropped() {
        let table: [(String, String?)] = [
            ("worker_loop.cold", "worker_loop"),
            ("parse_records.cold.3", "parse_records"),
            ("bind_port.constprop.0", "bind_port"),
            ("serve.constprop.12", "serve"),
            ("scale.isra.0", "scale"),
            ("handle.part.0", "handle"),
            ("handle.part.0.isra.0", "handle"),
            ("serve.constprop.0.isra.0", "serve"),
            ("lookup.part.0.cold", "lookup"),
            ("decode.hot", "decode"),
            ("helper.lto_priv.0", "helper"),
            ("entry.localalias", "entry"),
            ("_ZN3foo3barEv.cold", "_ZN3foo3barEv"),
            ("_ZL6reportPKc.constprop.0.isra.0", "_ZL6reportPKc"),
            // Not GCC's suffixes, or nothing before them: kept as they are.
            ("worker_loop", nil),
            ("main", nil),
            ("cold", nil),
            (".cold", nil),
            (".constprop.0", nil),
            ("f.cold.x", nil),
            ("f.coldish", nil),
            ("f.0", nil),
            ("f.constprop.0.llvm.1234", nil),
            ("_ZN4core3fmt5write17h0123456789abcdefE", nil),
            ("$s4main3fooyyF", nil),
            ("Swift.Array.subscript.getter", nil),
            ("std::vector<int>::at(unsigned long) const", nil),
            ("memcpy@@GLIBC_2.14", nil),
            ("", nil),
        ]
        for (name, expected) in table {
            XCTAssertEqual(CloneSuffixes.stripped(name), expected, name)
        }
    }

    /// __cxa_demangle reads a suffixed C++ name as a clone of its function; without the suffix
    /// it is the function's own name.
    func testSuffixedCxxNamesDemangle() {
        XCTAssertEqual(Demangler.demangle("_ZN3foo3barEv.cold"), "foo::bar() [clone .cold]")
        XCTAssertEqual(Demangler.demangle(CloneSuffixes.stripped("_ZN3foo3barEv.cold")!), "foo::bar()")
        XCTAssertEqual(Demangler.demangle(CloneSuffixes.stripped("_ZL6reportPKc.constprop.0.isra.0")!), "report(char const*)")
    }

    static let cxxSource = """
        #include <cstdio>
        namespace store {
        __attribute__((cold, noinline)) void warn(int value) { std::fprintf(stderr, "bad %d\\n", value); }
        __attribute__((noinline)) int check(int *values, int count) {
            int total = 0;
            for (int index = 0; index < count; index++) {
                if (__builtin_expect(values[index] < 0, 0)) {
                    warn(index);
                    warn(values[index]);
                }
                total += values[index];
            }
            return total;
        }
        }
        int main(int argc, char **) { int values[3] = {1, -argc, 3}; return store::check(values, 3) > 100; }
        """

    /// Frames of `address` in `program`: as reports name them, and as `--obj` does.
    func frames(_ program: String, at address: UInt64) throws -> (report: [SymbolicatedFrame], obj: [SymbolicatedFrame]) {
        let elf = try ELFFile(path: program)
        let image = DebugImageCache().image(for: elf, locator: DebugFileLocator())
        return (
            Symbolizer.frames(in: image, virtualAddress: address, isReturnAddress: false),
            Symbolizer.frames(in: image, virtualAddress: address, isReturnAddress: false, asLLVMSymbolizer: true)
        )
    }

    /// The address of each symbol of `program` (nm).
    func symbols(_ program: String) throws -> [String: UInt64] {
        var found: [String: UInt64] = [:]
        for line in try TestSupport.run(["nm", program]).stdout.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 3, let address = UInt64(parts[0], radix: 16) { found[String(parts[2])] = address }
        }
        return found
    }

    func testCloneFramesNamedBySourceFunction() throws {
        let directory = TestSupport.temporaryDirectory("clone-names")
        let cProgram = TestSupport.fixture("clones/clones.c")
        let cxxSource = directory + "/store.cpp"
        try Self.cxxSource.write(toFile: cxxSource, atomically: true, encoding: .utf8)
        for debug in [true, false] {
            let flags = debug ? ["-O2", "-g"] : ["-O2"]
            let c = try TestSupport.compile([cProgram], output: directory + "/clones\(debug ? "-g" : "")", flags: flags)
            let cxx = try TestSupport.compile(
                [cxxSource], output: directory + "/store\(debug ? "-g" : "")", compiler: "c++", flags: flags)
            let cSymbols = try symbols(c), cxxSymbols = try symbols(cxx)
            let cases: [(program: String, symbol: String, function: String, mangled: String?, address: UInt64?)] = [
                (c, "worker_loop.cold", "worker_loop", nil, cSymbols["worker_loop.cold"]),
                (c, "handle.part.0", "handle", nil, cSymbols["handle.part.0"]),
                (c, "serve.constprop.0.isra.0", "serve", nil, cSymbols["serve.constprop.0.isra.0"]),
                (
                    cxx, "_ZN5store5checkEPii.cold", "store::check(int*, int)", "_ZN5store5checkEPii",
                    cxxSymbols["_ZN5store5checkEPii.cold"]
                ),
            ]
            for entry in cases {
                let label = "\(entry.symbol)\(debug ? " (DWARF)" : " (symbol table)")"
                let address = try XCTUnwrap(entry.address, "\(label): GCC made no such clone")
                let (report, obj) = try frames(entry.program, at: address + 1)
                let outermost = try XCTUnwrap(report.last, label)
                XCTAssertEqual(outermost.function, entry.function, label)
                XCTAssertEqual(outermost.mangled, entry.mangled, label)
                XCTAssertEqual(outermost.symbol, entry.symbol, label)
                XCTAssertEqual(outermost.functionOffset, 1, "\(label): the offset counts from the symbol that ran")
                XCTAssertTrue(report.dropLast().allSatisfy { $0.symbol == nil }, label)
                // --obj: llvm-symbolizer's name, the symbol's, demangled as it is.
                let readable = Demangler.demangle(entry.symbol) ?? entry.symbol
                XCTAssertEqual(obj.last?.function, readable, label)
                XCTAssertNil(obj.last?.symbol, label)
            }
            // A function that is no clone has no `symbol`.
            let main = try XCTUnwrap(cSymbols["main"])
            XCTAssertEqual(try frames(c, at: main + 1).report.last?.function, "main")
            XCTAssertNil(try frames(c, at: main + 1).report.last?.symbol)
        }
    }
}
