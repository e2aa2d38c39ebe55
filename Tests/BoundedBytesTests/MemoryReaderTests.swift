// The one memory-reader protocol and what every parser of hostile bytes reads through: regions
// read by address, partial reads that say how far they got, layers, typed fetches, and checked
// arithmetic at the edges of UInt64.

import BoundedBytes
import XCTest

final class MemoryReaderTests: XCTestCase {
    let regions = RegionMemory(regions: [
        MemoryRegion(start: 0x2000, bytes: [0x10, 0x11, 0x12, 0x13]),
        MemoryRegion(start: 0x1000, bytes: Array(0..<16)),
    ])

    func testRegionsAreReadByAddressAndShortReadsSayHowFar() throws {
        XCTAssertEqual(regions.bytes(at: 0x1004, count: 4), [4, 5, 6, 7])
        XCTAssertEqual(regions.bytes(at: 0x100E, count: 8), [14, 15], "stops at the region's end")
        XCTAssertEqual(regions.bytes(at: 0x1010, count: 1), [], "one past the end")
        XCTAssertEqual(regions.bytes(at: 0x0FFF, count: 1), [], "below every region")
        XCTAssertEqual(try regions.fetch(UInt32.self, from: 0x2000), 0x1312_1110)
        XCTAssertThrowsError(try regions.fetch(UInt64.self, from: 0x2000)) { error in
            XCTAssertEqual(error as? MemoryReadError, MemoryReadError(address: 0x2000, count: 8))
        }
    }

    func testARegionAtTheTopOfTheAddressSpaceNeitherWrapsNorTraps() {
        let top = RegionMemory(regions: [MemoryRegion(start: UInt64.max - 3, bytes: [1, 2, 3, 4, 5, 6])])
        XCTAssertEqual(top.regions[0].end, UInt64.max, "saturates")
        XCTAssertEqual(top.bytes(at: UInt64.max - 1, count: 8), [3, 4, 5, 6])
        XCTAssertEqual(top.bytes(at: 0, count: 4), [])
    }

    func testLayersAnswerFromTheFirstThatHasTheAddress() {
        let over = RegionMemory(regions: [MemoryRegion(start: 0x1000, bytes: [0xAA, 0xBB])])
        let layered = LayeredMemory([over, regions])
        XCTAssertEqual(layered.bytes(at: 0x1000, count: 2), [0xAA, 0xBB])
        XCTAssertEqual(layered.bytes(at: 0x1002, count: 2), [2, 3], "the lower layer where the upper has nothing")
        XCTAssertEqual(layered.bytes(at: 0x9000, count: 2), [])
    }

    func testCheckedArithmeticRefusesWhatWraps() {
        XCTAssertNil(UInt64.max.checkedAdding(1))
        XCTAssertEqual(UInt64(5).checkedSubtracting(3), 2)
        XCTAssertNil(UInt64(3).checkedSubtracting(5))
        XCTAssertNil((UInt64(1) << 62).checkedMultiplying(8))
        XCTAssertEqual(UInt64(13).checkedAligned(to: 8), 16)
        XCTAssertNil((UInt64.max - 2).checkedAligned(to: 8))
        XCTAssertNil(UInt64.checkedRange(start: UInt64.max - 1, count: 4))
        XCTAssertEqual(UInt64.checkedRange(start: 16, count: 4), 16..<20)
        XCTAssertNil(Int(checkedCount: UInt64.max))
        XCTAssertNil(Int(checkedCount: 1000, limit: 999))
    }

    func testByteViewNeverReadsOutOfBounds() {
        let bytes: [UInt8] = [1, 0, 0, 0, 0x41, 0x42, 0]
        bytes.withUnsafeBytes { raw in
            let view = ByteView(raw)
            XCTAssertEqual(view.u32(0), 1)
            XCTAssertNil(view.u32(4))
            XCTAssertNil(view.u64(UInt64.max - 2), "an offset that wraps")
            XCTAssertEqual(view.cString(4), "AB")
            XCTAssertNil(view.slice(6, UInt64.max))
        }
    }

    func testSortedSearchFindsTheLastKeyAtOrBelow() {
        let starts: [UInt64] = [10, 20, 30]
        XCTAssertNil(starts.lastIndex(atOrBelow: 9, key: { $0 }))
        XCTAssertEqual(starts.lastIndex(atOrBelow: 20, key: { $0 }), 1)
        XCTAssertEqual(starts.lastIndex(atOrBelow: UInt64.max, key: { $0 }), 2)
    }
}
