// LEB128 as every reader of DWARF-encoded data decodes it, hostile lengths included.

import BoundedBytes

import ObjectFile
import XCTest

final class LEB128Tests: XCTestCase {
    func decode(_ bytes: [UInt8]) -> (unsigned: UInt64?, signed: Int64?, end: UInt64) {
        bytes.withUnsafeBytes { raw in
            let view = ByteView(raw)
            var a: UInt64 = 0, b: UInt64 = 0
            let unsigned = view.uleb128(at: &a)
            let signed = view.sleb128(at: &b)
            XCTAssertEqual(a, b)
            return (unsigned, signed, a)
        }
    }

    func testValues() {
        XCTAssertEqual(decode([0x02]).unsigned, 2)
        XCTAssertEqual(decode([0x7F]).signed, -1)
        XCTAssertEqual(decode([0xE5, 0x8E, 0x26]).unsigned, 624_485)
        XCTAssertEqual(decode([0xC0, 0xBB, 0x78]).signed, -123_456)
        XCTAssertEqual(decode([0x80, 0x01]).end, 2)
    }

    /// Nine and ten bytes with the sign bit set, and longer runs: no trap, the end found.
    func testOverlongValuesDoNotTrap() {
        for length in 9...20 {
            let bytes = [UInt8](repeating: 0xFF, count: length - 1) + [0x7F]
            let result = decode(bytes)
            XCTAssertEqual(result.end, UInt64(length))
            XCTAssertNotNil(result.signed)
        }
        XCTAssertNil(decode([0x80, 0x80]).unsigned, "runs off the end")
    }
}
