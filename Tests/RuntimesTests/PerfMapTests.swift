// PerfMap: a JIT's perf map parsed from good and hostile bytes (malformed, unsorted, overlapping,
// a 1 GiB sparse file read by its tail), and the lookups a report makes with it.

import Foundation
import ReportModel
import XCTest

@testable import Runtimes

final class PerfMapTests: XCTestCase {
    func parse(_ text: String, startsMidLine: Bool = false) -> PerfMap {
        PerfMap(parsing: Array(text.utf8), startsMidLine: startsMidLine)
    }

    func testNodeLinesParseSortedWithNamesThatHoldSpaces() {
        // As `node --perf-basic-prof --interpreted-frames-native-stack` (v20) writes them.
        let map = parse(
            """
            7f22ba7e55c0 378 JS:~crashInNative /tmp/jitexp/app.js:2:23
            7f22ba7e5200 378 JS:~outerFunction /tmp/jitexp/app.js:3:23
            0x18c4000 0x300 Builtin:DeoptimizationEntry_Eager\r

            """)
        XCTAssertEqual(
            map.symbols,
            [
                JITSymbol(start: 0x18c4000, size: 0x300, name: "Builtin:DeoptimizationEntry_Eager"),
                JITSymbol(start: 0x7f22_ba7e_5200, size: 0x378, name: "JS:~outerFunction /tmp/jitexp/app.js:3:23"),
                JITSymbol(start: 0x7f22_ba7e_55c0, size: 0x378, name: "JS:~crashInNative /tmp/jitexp/app.js:2:23"),
            ])
        XCTAssertEqual(map.malformedLines, 0)
        XCTAssertEqual(
            PerfMap.lookup(0x7f22_ba7e_55c0 + 0x10, in: map.symbols)?.name, "JS:~crashInNative /tmp/jitexp/app.js:2:23")
        XCTAssertNil(PerfMap.lookup(0x7f22_ba7e_55c0 + 0x378, in: map.symbols), "the end is not in it")
        XCTAssertNil(PerfMap.lookup(0x1000, in: map.symbols))
    }

    func testMalformedLinesAreSkippedAndCounted() {
        let map = parse(
            """
            zz 10 not hex
            1000
            1000 10
            1000 0 empty
            12345678901234567 10 seventeen digits
            1000 10x trailing
            -1000 10 negative
            2000 10 good one
            """)
        XCTAssertEqual(map.symbols, [JITSymbol(start: 0x2000, size: 0x10, name: "good one")])
        XCTAssertEqual(map.malformedLines, 7)
    }

    func testLaterLinesWinWhereTheyOverlap() {
        // A JIT that moved code: the old function keeps only what no newer line covers.
        let map = parse(
            """
            1000 100 old
            1040 20 newer
            1080 10 newest
            1085 100 last
            """)
        XCTAssertEqual(
            map.symbols,
            [
                JITSymbol(start: 0x1000, size: 0x40, name: "old"),
                JITSymbol(start: 0x1040, size: 0x20, name: "newer"),
                JITSymbol(start: 0x1060, size: 0x20, name: "old"),
                JITSymbol(start: 0x1080, size: 0x5, name: "newest"),
                JITSymbol(start: 0x1085, size: 0x100, name: "last"),
            ])
        // The same line twice, and a newer line wholly inside an older one given first.
        XCTAssertEqual(parse("10 10 a\n10 10 b\n").symbols, [JITSymbol(start: 0x10, size: 0x10, name: "b")])
        XCTAssertEqual(
            parse("0 100 outer\n80 100 second\n20 10 inner\n").symbols,
            [
                JITSymbol(start: 0, size: 0x20, name: "outer"), JITSymbol(start: 0x20, size: 0x10, name: "inner"),
                JITSymbol(start: 0x30, size: 0x50, name: "outer"), JITSymbol(start: 0x80, size: 0x100, name: "second"),
            ])
        // An older line over a newer one does not win.
        XCTAssertEqual(
            parse("20 10 inner\n0 100 outer\n").symbols, [JITSymbol(start: 0, size: 0x100, name: "outer")])
    }

    func testHostileSizesAndNamesStayBounded() {
        let long = String(repeating: "x", count: 5000)
        let map = parse("ffffffffffffff00 1000 wraps\n100 10 \(long)\n")
        XCTAssertEqual(map.symbols.count, 2)
        XCTAssertEqual(map.symbols[1].end, UInt64.max, "a size past the end of the address space ends there")
        XCTAssertEqual(map.symbols[0].name.utf8.count, PerfMap.maximumNameBytes + "…".utf8.count)
        XCTAssertEqual(map.longNames, 1)
        // Not UTF-8, NULs: read as text with replacement characters, never a trap.
        var bytes = Array("100 10 ".utf8) + [0xff, 0x00, 0xfe] + Array("\n".utf8)
        bytes += [UInt8](repeating: 0, count: 100)
        XCTAssertEqual(PerfMap(parsing: bytes).symbols.count, 1)
    }

    func testATailStartingMidLineDropsItsFirstLine() {
        let map = parse("0 cut-off line\n2000 10 whole\n", startsMidLine: true)
        XCTAssertEqual(map.symbols, [JITSymbol(start: 0x2000, size: 0x10, name: "whole")])
        XCTAssertEqual(map.malformedLines, 0)
        XCTAssertEqual(parse("no newline at all", startsMidLine: true).symbols, [])
    }

    func testManyOverlappingLinesResolveQuickly() {
        // 100,000 lines, each overlapping the one before: the sweep is O(n log n).
        var text = ""
        for index in 0..<100_000 { text += "\(String(0x1000 + index * 8, radix: 16)) 40 f\(index)\n" }
        let started = Date()
        let map = parse(text)
        XCTAssertLessThan(Date().timeIntervalSince(started), 20)
        XCTAssertEqual(map.symbols.count, 100_000)
        XCTAssertEqual(map.symbols.first, JITSymbol(start: 0x1000, size: 8, name: "f0"))
        XCTAssertEqual(map.symbols.last, JITSymbol(start: 0x1000 + 99_999 * 8, size: 0x40, name: "f99999"))
        for (a, b) in zip(map.symbols, map.symbols.dropFirst()) { XCTAssertLessThanOrEqual(a.end, b.start) }
    }

    func testOnlyTheSymbolsAddressesPointIntoAreKept() {
        let symbols = parse("1000 10 a\n2000 10 b\n3000 10 c\n").symbols
        XCTAssertEqual(PerfMap.symbols(symbols, holding: [0x2008, 0x2009, 0x5000, 0]).map(\.name), ["b"])
    }

    func testAGigabyteMapIsReadByItsTailOnly() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("perfmap-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/perf-1.map"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        // A hole of 1 GiB (sparse: no disk, no time), then the newest lines.
        XCTAssertEqual(ftruncate(fd, 1 << 30), 0)
        let tail = Array("\n7000 10 JS:*newest /srv/app.js:1:1\n".utf8)
        XCTAssertEqual(pwrite(fd, tail, tail.count, off_t(1 << 30)), tail.count)
        close(fd)
        let started = Date()
        let contents = try XCTUnwrap(RuntimeFile.read(path, limit: PerfMap.readLimit, keep: .tail))
        XCTAssertEqual(contents.bytes.count, PerfMap.readLimit)
        XCTAssertEqual(contents.size, UInt64(1 << 30) + UInt64(tail.count))
        XCTAssertEqual(contents.skipped, contents.size - UInt64(PerfMap.readLimit))
        XCTAssertTrue(contents.truncated)
        let map = PerfMap(parsing: contents.bytes, startsMidLine: contents.skipped > 0)
        XCTAssertEqual(map.symbols, [JITSymbol(start: 0x7000, size: 0x10, name: "JS:*newest /srv/app.js:1:1")])
        XCTAssertLessThan(Date().timeIntervalSince(started), 20)
    }
}
