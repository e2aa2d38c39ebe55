// DWARFReaderTests: DWARFInfo on real programs compiled in the test run (gcc and clang, C and
// C++, DWARF 4 and 5, zlib-compressed sections), compared address by address against
// llvm-symbolizer across the whole .text section; plus the inlining semantics checked directly
// against the fixture source (an always_inline function shows above its caller, whose line is
// the call site).

import ObjectFile
import Foundation
@testable import Symbolication
import TestSupport
import XCTest

final class DWARFReaderTests: XCTestCase {
    static let header = """
        /* helpers.h: inline helpers, so some frames come from an included file. */
        static inline __attribute__((always_inline)) int twice(int v) {
            return v * 2 + (v >> 3);
        }
        static inline __attribute__((always_inline)) int helper_scale(int b) {
            int t = twice(b + 1); /* CALL-SITE twice */
            return t * 3 - b;
        }
        static inline __attribute__((always_inline)) double clamp_double(double v, double lo, double hi) {
            return v < lo ? lo : (v > hi ? hi : v);
        }

        """

    static let cSource = """
        #include <stdio.h>
        #include <stdlib.h>
        #include "helpers.h"

        static inline __attribute__((always_inline)) int square(int x) {
            int r = x * x;
            if (r > 1000) r -= 7;
            return r;
        }

        __attribute__((noinline)) int sum_squares(int n, int bias) {
            int total = 0;
            for (int i = 0; i < n; i++)
                total += square(i + bias); /* CALL-SITE square */
            return total;
        }

        __attribute__((noinline)) int collatz(long n) {
            int steps = 0;
            while (n != 1) {
                n = (n % 2) ? 3 * n + 1 : n / 2;
                steps++;
            }
            return steps;
        }

        __attribute__((noinline)) double mix(double a, int b) {
            return clamp_double(a * b, -10.0, 10.0) + helper_scale(b);
        }

        static int table[64];

        __attribute__((noinline)) void fill(int seed) {
            for (int i = 0; i < 64; i++)
                table[i] = (seed * 1103515245 + i) & 0xffff;
        }

        __attribute__((noinline)) int find_max(void) {
            int best = table[0];
            for (int i = 1; i < 64; i++)
                if (table[i] > best) best = table[i];
            return best;
        }

        int main(int argc, char **argv) {
            int n = argc > 1 ? atoi(argv[1]) : 10;
            fill(n);
            printf("%d %d %f %d\\n", sum_squares(n, 3), collatz(n + 27), mix(1.5, n), find_max());
            return 0;
        }

        """

    static let cppSource = """
        #include <algorithm>
        #include <iostream>
        #include <map>
        #include <sstream>
        #include <string>
        #include <vector>

        namespace geo {
        struct Point {
            double x, y;
            double norm() const { return x * x + y * y; }
        };
        template <typename T> T clampv(T v, T lo, T hi) { return std::max(lo, std::min(v, hi)); }
        class Registry {
        public:
            void add(const std::string &key, int value) { items_[key] += value; order_.push_back(key); }
            int total() const { int t = 0; for (auto &kv : items_) t += kv.second; return t; }
            std::string dump() const {
                std::ostringstream out;
                for (auto &key : order_) out << key << '=' << items_.at(key) << ';';
                return out.str();
            }
        private:
            std::map<std::string, int> items_;
            std::vector<std::string> order_;
        };
        } // namespace geo

        int main(int argc, char **argv) {
            geo::Registry registry;
            std::vector<geo::Point> points;
            for (int i = 0; i < argc * 100; i++) points.push_back({double(i), double(i % 7)});
            std::sort(points.begin(), points.end(),
                      [](const geo::Point &a, const geo::Point &b) { return a.norm() < b.norm(); });
            for (auto &p : points) registry.add(std::to_string(int(p.x) % 13), geo::clampv(int(p.y), 1, 5));
            std::cout << registry.total() << registry.dump().size() << std::endl;
            return 0;
        }

        """

    var directory = ""

    override func setUp() {
        directory = SymbolicationFixtures.temporaryDirectory("dwarf-reader")
        try? Self.header.write(toFile: directory + "/helpers.h", atomically: true, encoding: .utf8)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func buildC(_ compiler: String, _ flags: [String], output: String) throws -> String {
        let tools = try SymbolicationFixtures.require(compiler, "llvm-symbolizer")
        return try SymbolicationFixtures.compile(
            source: Self.cSource, name: "program.c", in: directory, compiler: tools[0], flags: flags, output: output)
    }

    private func buildCpp(_ compiler: String, _ flags: [String], output: String) throws -> String {
        let tools = try SymbolicationFixtures.require(compiler, "llvm-symbolizer")
        return try SymbolicationFixtures.compile(
            source: Self.cppSource, name: "program.cpp", in: directory, compiler: tools[0], flags: flags, output: output)
    }

    /// Compares every `stride`-th byte address of .text with llvm-symbolizer; ≥ 99.5% must agree.
    @discardableResult
    private func assertMatchesLLVM(
        _ path: String, stride: UInt64 = 1, file: StaticString = #filePath, line: UInt = #line
    ) throws -> SymbolizerComparison {
        let elf = try ELFFile(path: path)
        let info = try XCTUnwrap(DWARFInfo(elf: elf), "no DWARF in \(path)", file: file, line: line)
        let addresses = SymbolicationFixtures.textAddresses(elf, stride: stride)
        XCTAssertGreaterThan(addresses.count, 50, file: file, line: line)
        let comparison = try SymbolizerComparison.compare(info: info, path: path, addresses: addresses)
        print("\((path as NSString).lastPathComponent): \(comparison)")
        XCTAssertGreaterThanOrEqual(comparison.agreement, 0.995, "\(path): \(comparison)", file: file, line: line)
        // The comparison covers the fixture's own code, not just crt code without DWARF.
        XCTAssertGreaterThan(comparison.agreeing, 100, "\(path): \(comparison)", file: file, line: line)
        return comparison
    }

    private func assertHasInlinedFrames(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let elf = try ELFFile(path: path)
        let info = try XCTUnwrap(DWARFInfo(elf: elf))
        let inlined = SymbolicationFixtures.textAddresses(elf, stride: 1).filter { info.frames(at: $0).first?.inlined == true }
        XCTAssertFalse(inlined.isEmpty, "no inlined frames found in \(path)", file: file, line: line)
    }

    // MARK: - Against llvm-symbolizer

    func testGCCDWARF5MatchesLLVMSymbolizer() throws {
        let path = try buildC("gcc", ["-O2", "-g"], output: "gcc-dwarf5")
        try assertMatchesLLVM(path)
        try assertHasInlinedFrames(path)
    }

    func testGCCDWARF4MatchesLLVMSymbolizer() throws {
        let path = try buildC("gcc", ["-O2", "-gdwarf-4"], output: "gcc-dwarf4")
        try assertMatchesLLVM(path)
        try assertHasInlinedFrames(path)
    }

    func testCompressedSectionsMatchLLVMSymbolizer() throws {
        for (flags, output) in [(["-O2", "-g", "-gz"], "gcc-dwarf5-gz"), (["-O2", "-gdwarf-4", "-gz"], "gcc-dwarf4-gz")] {
            let path = try buildC("gcc", flags, output: output)
            let elf = try ELFFile(path: path)
            let info = try XCTUnwrap(elf.section(named: ".debug_info"))
            XCTAssertNotEqual(info.flags & ELFSection.compressedFlag, 0, "\(output): .debug_info is not SHF_COMPRESSED")
            try assertMatchesLLVM(path)
            try assertHasInlinedFrames(path)
        }
    }

    func testClangDWARF5MatchesLLVMSymbolizer() throws {
        // clang's DWARF 5 uses strx/addrx/rnglistx forms and the *_base attributes.
        let path = try buildC("clang", ["-O2", "-g"], output: "clang-dwarf5")
        try assertMatchesLLVM(path)
        try assertHasInlinedFrames(path)
    }

    func testClangDWARF4MatchesLLVMSymbolizer() throws {
        let path = try buildC("clang", ["-O2", "-gdwarf-4"], output: "clang-dwarf4")
        try assertMatchesLLVM(path)
    }

    func testCPlusPlusMatchesLLVMSymbolizer() throws {
        let path = try buildCpp("g++", ["-O2", "-g"], output: "gxx-dwarf5")
        let comparison = try assertMatchesLLVM(path)
        XCTAssertGreaterThan(comparison.total, 500)
        try assertHasInlinedFrames(path)
    }

    func testClangCPlusPlusDWARF4MatchesLLVMSymbolizer() throws {
        let path = try buildCpp("clang++", ["-O2", "-gdwarf-4"], output: "clangxx-dwarf4")
        try assertMatchesLLVM(path)
    }

    func testLinkTimeOptimizedCrossUnitReferencesMatchLLVMSymbolizer() throws {
        // With -flto, inlined instances refer to abstract origins in other units (DW_FORM_ref_addr).
        let first = """
            #include <stdio.h>
            int helper(int a);
            static int wrap(int v) { return helper(v) * 3 + 1; }
            int main(int argc, char **argv) { printf("%d\\n", wrap(argc * 7) + helper(argc)); return 0; }

            """
        let second = """
            static inline __attribute__((always_inline)) int square2(int x) { return x * x - 1; }
            int helper(int a) { int s = 0; for (int i = 0; i < a; i++) s += square2(i ^ a); return s; }

            """
        try first.write(toFile: directory + "/lto1.c", atomically: true, encoding: .utf8)
        try second.write(toFile: directory + "/lto2.c", atomically: true, encoding: .utf8)
        let gcc = try SymbolicationFixtures.require("gcc", "llvm-symbolizer")[0]
        let output = directory + "/lto"
        let result = try SymbolicationFixtures.run(
            [gcc, "-O2", "-g", "-flto", directory + "/lto1.c", directory + "/lto2.c", "-o", output])
        XCTAssertEqual(result.status, 0, result.stderr)
        try assertMatchesLLVM(output)
        let elf = try ELFFile(path: output)
        let info = try XCTUnwrap(DWARFInfo(elf: elf))
        let inlined = SymbolicationFixtures.textAddresses(elf, stride: 1).map { info.frames(at: $0) }
            .filter { $0.first?.function == "square2" }
        XCTAssertFalse(inlined.isEmpty, "square2 was not found inlined through a cross-unit origin")
        for frames in inlined {
            // helper (lto2.c) may itself be inlined into main (lto1.c), through wrap or not.
            XCTAssertEqual(Array(frames.prefix(2).map(\.function)), ["square2", "helper"], "\(frames)")
            XCTAssertEqual(frames.last?.function, "main", "\(frames)")
            XCTAssertEqual(frames.map(\.inlined), Array(repeating: true, count: frames.count - 1) + [false])
            XCTAssertTrue(frames[0].file?.hasSuffix("/lto2.c") == true, "\(frames)")
        }
    }

    /// libc6-dbg's 2,000 units: a lookup makes the unit it falls in, not all of them (each was
    /// an object of its own: a quarter of a megabyte of a report's peak).
    func testALookupMakesOnlyTheUnitItFallsIn() throws {
        let libc = try TestSupport.buildID(of: "/lib/x86_64-linux-gnu/libc.so.6")
        let path = "/usr/lib/debug/.build-id/\(libc.prefix(2))/\(libc.dropFirst(2)).debug"
        guard FileManager.default.fileExists(atPath: path) else { throw XCTSkip("libc6-dbg is not here") }
        let elf = try ELFFile(path: path)
        let info = try XCTUnwrap(DWARFInfo(elf: elf))
        let (count, before) = info.lookups.withLock { ($0.units.count, $0.units.madeCount) }
        XCTAssertGreaterThan(count, 1000)
        XCTAssertLessThan(before, count / 10, "units made before any lookup")
        // abort's address in the file: its offset in the mapping that holds it, plus the mapping's
        // offset in the file (libc's segments have their file offsets as addresses).
        let abort = UInt64(UInt(bitPattern: try XCTUnwrap(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "abort"))))
        // (Read to its end: a single read of /proc/self/maps may stop short of the line.)
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/maps"))
        let maps = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self).split(separator: "\n")
        try handle.close()
        let mapping = try XCTUnwrap(
            maps.lazy.map { $0.split(separator: " ") }.first { fields in
                let range = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
                return range.count == 2 && range[0] <= abort && abort < range[1]
            })
        let start = try XCTUnwrap(mapping[0].split(separator: "-").first.flatMap { UInt64($0, radix: 16) })
        let offset = try XCTUnwrap(UInt64(mapping[2], radix: 16))
        XCTAssertTrue(mapping.last?.hasSuffix("/libc.so.6") == true, "\(mapping)")
        let address = abort - start + offset
        XCTAssertEqual(info.frames(at: address + 4).last?.function, "abort")
        XCTAssertEqual(info.lookups.withLock { $0.units.madeCount }, before + 1)
    }

    // MARK: - Inlining semantics, checked against the source

    func testAlwaysInlineFunctionIsInlinedFrameAboveCallerWithCallSiteLine() throws {
        for (flags, output) in [(["-O2", "-g"], "v5"), (["-O2", "-gdwarf-4"], "v4")] {
            let path = try buildC("gcc", flags, output: output)
            let elf = try ELFFile(path: path)
            let info = try XCTUnwrap(DWARFInfo(elf: elf))
            let lines = Self.cSource.split(separator: "\n", omittingEmptySubsequences: false)
            let callSite = try XCTUnwrap(lines.firstIndex { $0.contains("CALL-SITE square") }) + 1
            let squareLines = (lines.firstIndex { $0.contains("int square(int x)") }! + 1)...(callSite)

            var found = 0
            for address in SymbolicationFixtures.textAddresses(elf, stride: 1) {
                let frames = info.frames(at: address)
                guard frames.count >= 2, frames[0].function == "square" else { continue }
                found += 1
                XCTAssertTrue(frames[0].inlined, "\(output) 0x\(String(address, radix: 16)): \(frames)")
                XCTAssertTrue(frames[0].file?.hasSuffix("/program.c") == true, "\(frames[0])")
                XCTAssertTrue(squareLines.contains(frames[0].line ?? 0), "\(frames[0])")
                XCTAssertEqual(frames[1].function, "sum_squares", "\(frames)")
                XCTAssertFalse(frames[1].inlined)
                XCTAssertEqual(frames[1].line, callSite, "\(frames)")
                XCTAssertEqual(frames[1].file, frames[0].file)
                XCTAssertNotNil(frames[1].column)
            }
            XCTAssertGreaterThan(found, 0, "\(output): no address inside the inlined square()")

            // A chain of three: twice (helpers.h) ← helper_scale (helpers.h) ← mix (program.c).
            let headerCallSite =
                try XCTUnwrap(
                    Self.header.split(separator: "\n", omittingEmptySubsequences: false).firstIndex {
                        $0.contains("CALL-SITE twice")
                    }) + 1
            var chains = 0
            for address in SymbolicationFixtures.textAddresses(elf, stride: 1) {
                let frames = info.frames(at: address)
                guard frames.first?.function == "twice" else { continue }
                chains += 1
                XCTAssertEqual(frames.map(\.function), ["twice", "helper_scale", "mix"], "\(frames)")
                XCTAssertEqual(frames.map(\.inlined), [true, true, false])
                XCTAssertTrue(frames[0].file?.hasSuffix("/helpers.h") == true, "\(frames[0])")
                XCTAssertEqual(frames[1].line, headerCallSite)
                XCTAssertTrue(frames[2].file?.hasSuffix("/program.c") == true, "\(frames[2])")
            }
            XCTAssertGreaterThan(chains, 0, "\(output): no address inside the inlined twice()")
        }
    }

    func testFilePathsAreAbsolute() throws {
        let path = try buildC("gcc", ["-O2", "-g"], output: "paths")
        let elf = try ELFFile(path: path)
        let info = try XCTUnwrap(DWARFInfo(elf: elf))
        for address in SymbolicationFixtures.textAddresses(elf, stride: 5) {
            for frame in info.frames(at: address) {
                if let file = frame.file { XCTAssertTrue(file.hasPrefix("/"), file) }
            }
        }
    }

    // MARK: - Edges

    func testUnknownAddressesAreEmpty() throws {
        let path = try buildC("gcc", ["-O2", "-g"], output: "unknown")
        let info = try XCTUnwrap(DWARFInfo(elf: try ELFFile(path: path)))
        XCTAssertEqual(info.frames(at: 0), [])
        XCTAssertEqual(info.frames(at: 0xFFFF_FFFF_FFFF_FFF0), [])
    }

    func testStrippedFileHasNoDWARFInfo() throws {
        let tools = try SymbolicationFixtures.require("strip")
        let path = try buildC("gcc", ["-O2", "-g"], output: "to-strip")
        try SymbolicationFixtures.run([tools[0], path])
        XCTAssertNil(DWARFInfo(elf: try ELFFile(path: path)))
    }

    func testConcurrentLookupsAgree() throws {
        let path = try buildCpp("g++", ["-O2", "-g"], output: "concurrent")
        let elf = try ELFFile(path: path)
        let info = try XCTUnwrap(DWARFInfo(elf: elf))
        let addresses = SymbolicationFixtures.textAddresses(elf, stride: 11)
        let reference = try XCTUnwrap(DWARFInfo(elf: elf))
        let expected = addresses.map { reference.frames(at: $0) }
        final class Box: @unchecked Sendable { var frames: [[SourceFrame]] = [] }
        let results = (0..<4).map { _ in Box() }
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            results[worker].frames = addresses.map { info.frames(at: $0) }
        }
        for result in results { XCTAssertEqual(result.frames, expected) }
    }
}
