// DWARFUnits' unit headers: read from a kept .debug_info and read by DWARFHeaderCollector as an
// on-demand one streams by, in chunks of any size, they are the same headers; hostile lengths
// (a DWARF64 length near the top of the address space, a unit past the section's end, a unit
// shorter than its own header, a version this reader does not read) end the walk or skip the
// unit, never trap.

import BoundedBytes
import XCTest

@testable import Symbolication

final class DWARFUnitHeaderTests: XCTestCase {
    func le(_ value: UInt64, _ size: Int) -> [UInt8] { (0..<size).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }

    /// A unit: its initial length (4 bytes, or 12 for DWARF64), then `body`.
    func unit(_ body: [UInt8], dwarf64: Bool = false) -> [UInt8] {
        dwarf64 ? [0xff, 0xff, 0xff, 0xff] + le(UInt64(body.count), 8) + body : le(UInt64(body.count), 4) + body
    }

    var section: [UInt8] {
        let die: [UInt8] = [1, 0x11, 0, 0, 0]
        var bytes: [UInt8] = []
        bytes += unit(le(4, 2) + le(0x10, 4) + [8] + die)  // DWARF 4
        bytes += unit(le(5, 2) + [1, 8] + le(0x20, 4) + die)  // DWARF 5 compile unit
        bytes += unit(le(5, 2) + [4, 8] + le(0x30, 4) + le(0xdead, 8) + die)  // DWARF 5 skeleton
        bytes += unit(le(7, 2) + [0, 0, 0, 0, 0, 0])  // version 7: skipped
        bytes += unit(le(4, 2))  // shorter than its own header: skipped
        bytes += unit(le(4, 2) + le(0x40, 8) + [8] + die, dwarf64: true)  // DWARF64, version 4
        bytes += unit(le(2, 2) + le(0x50, 4) + [4] + die)  // DWARF 2, 4-byte addresses
        // Three 12-byte units to end it: all in the last header's slot, which the stream leaves
        // short.
        for abbrev in [0x60, 0x70, 0x80] as [UInt64] { bytes += unit(le(4, 2) + le(abbrev, 4) + [8, 0]) }
        return bytes
    }

    func kept(_ bytes: [UInt8]) -> [DWARFUnits.Header] {
        bytes.withUnsafeBytes { DWARFUnits.headers(in: ByteView($0)) }
    }

    func streamed(_ bytes: [UInt8], chunk: Int) -> [DWARFUnits.Header] {
        var collector = DWARFHeaderCollector()
        var base = 0
        while base < bytes.count {
            let end = min(base + chunk, bytes.count)
            bytes[base..<end].withUnsafeBytes { collector.consume($0, at: base) }
            base = end
        }
        // As DWARFUnits takes them: up to the first that does not fit the section.
        return Array(collector.finish().prefix { $0.endOffset <= UInt64(bytes.count) })
    }

    func testKeptAndStreamedHeadersAgree() {
        let headers = kept(section)
        XCTAssertEqual(headers.map(\.abbrevOffset), [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80])
        XCTAssertEqual(headers.map(\.format.version), [4, 5, 5, 4, 2, 4, 4, 4])
        XCTAssertEqual(headers.map(\.format.offsetSize), [4, 4, 4, 8, 4, 4, 4, 4])
        XCTAssertEqual(headers[2].unitType, 4, "the skeleton unit")
        XCTAssertEqual(headers.last?.endOffset, UInt64(section.count))
        for chunk in [1, 3, 7, 39, 40, 41, 4096] {
            XCTAssertEqual(streamed(section, chunk: chunk), headers, "chunks of \(chunk)")
        }
    }

    func testHostileLengthsEndTheWalk() {
        let die: [UInt8] = [1, 0x11, 0, 0, 0]
        let good = unit(le(4, 2) + le(0x10, 4) + [8] + die)
        // A DWARF64 length that overflows the offset, a 32-bit one past the section, and a
        // section that ends inside a header: each stops the walk after the good unit.
        let tails: [[UInt8]] = [
            [0xff, 0xff, 0xff, 0xff] + le(UInt64.max - 3, 8) + le(4, 2),
            le(0x7fff_0000, 4) + le(4, 2) + le(0, 4) + [8],
            [0x20, 0, 0],
        ]
        for tail in tails {
            let bytes = good + tail
            XCTAssertEqual(kept(bytes).count, 1, "\(tail.prefix(12))")
            for chunk in [1, 5, 40, 4096] {
                XCTAssertEqual(streamed(bytes, chunk: chunk), kept(bytes), "\(tail.prefix(12)), chunks of \(chunk)")
            }
        }
    }
}
