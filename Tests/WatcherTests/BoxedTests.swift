// Boxed keeps a value out of line and still behaves as a value: a copy changed leaves the
// original as it was, and a change in place is seen by the one who made it.

import XCTest

@testable import Watcher

final class BoxedTests: XCTestCase {
    struct Holder {
        @Boxed var numbers: [Int]? = nil
    }

    func testACopyChangedLeavesTheOriginal() {
        var original = Holder()
        original.numbers = [1, 2]
        var copy = original
        copy.numbers?.append(3)
        XCTAssertEqual(original.numbers, [1, 2])
        XCTAssertEqual(copy.numbers, [1, 2, 3])
        original.numbers = nil
        XCTAssertNil(original.numbers)
        XCTAssertEqual(copy.numbers, [1, 2, 3])
    }

    /// A client in the sidecar's dictionary is changed in place through optional chaining.
    func testAChangeThroughADictionaryIsKept() {
        var clients: [Int32: Holder] = [7: Holder()]
        clients[7]?.numbers = [1]
        clients[7]?.numbers?.append(2)
        XCTAssertEqual(clients[7]?.numbers, [1, 2])
        let before = clients[7]
        clients[7]?.numbers?.removeAll()
        XCTAssertEqual(before?.numbers, [1, 2])
        XCTAssertEqual(clients[7]?.numbers, [])
    }

    /// What a client costs the dictionary's storage, bucket by bucket, is about its fields' size
    /// inline: the boxed ones are a pointer each.
    func testAClientBucketStaysSmall() {
        XCTAssertLessThanOrEqual(MemoryLayout<Sidecar.Client>.stride, 128, "\(MemoryLayout<Sidecar.Client>.stride)")
    }
}
