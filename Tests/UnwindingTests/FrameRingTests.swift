// FrameRing: the head and tail a very deep stack keeps, and the count left out between.

@testable import Unwinding
import XCTest

final class FrameRingTests: XCTestCase {
    func pushed(_ count: Int, capacity: Int, head: Int) -> (elements: [Int], skipped: Int) {
        var ring = FrameRing<Int>(capacity: capacity, head: head)
        for frame in 0..<count { ring.push(frame) }
        XCTAssertEqual(ring.walked, count)
        return ring.finish()
    }

    func testDeepStackKeepsHeadThenTailInOrder() {
        let (elements, skipped) = pushed(1000, capacity: 512, head: 256)
        XCTAssertEqual(elements, Array(0..<256) + Array(744..<1000))
        XCTAssertEqual(skipped, 488)
    }

    func testEveryWrapPositionRestoresOrder() {
        for count in 8...30 {
            let (elements, skipped) = pushed(count, capacity: 8, head: 3)
            XCTAssertEqual(elements, Array(0..<3) + Array(count - 5..<count), "\(count)")
            XCTAssertEqual(skipped, count - 8)
        }
    }

    func testFewerThanCapacityKeepsAll() {
        let (elements, skipped) = pushed(10, capacity: 512, head: 256)
        XCTAssertEqual(elements, Array(0..<10))
        XCTAssertEqual(skipped, 0)
        XCTAssertEqual(pushed(512, capacity: 512, head: 256).elements, Array(0..<512))
        XCTAssertEqual(pushed(0, capacity: 512, head: 256).elements, [])
    }

    func testHeadEqualToCapacityKeepsTheFirstFrames() {
        let (elements, skipped) = pushed(100, capacity: 16, head: 16)
        XCTAssertEqual(elements, Array(0..<16))
        XCTAssertEqual(skipped, 84)
    }

    func testNoHeadKeepsTheLastFrames() {
        let (elements, skipped) = pushed(100, capacity: 16, head: 0)
        XCTAssertEqual(elements, Array(84..<100))
        XCTAssertEqual(skipped, 84)
    }

    func testHeadIsClampedToCapacity() {
        let (elements, skipped) = pushed(20, capacity: 4, head: 10)
        XCTAssertEqual(elements, [0, 1, 2, 3])
        XCTAssertEqual(skipped, 16)
    }

    func testUpdateLastChangesTheNewestKeptElementOnly() {
        for count in 1...20 {
            var ring = FrameRing<Int>(capacity: 8, head: 3)
            for frame in 0..<count { ring.push(frame) }
            ring.updateLast { $0 = -1 }
            let (elements, _) = ring.finish()
            XCTAssertEqual(elements.last, -1, "\(count)")
            XCTAssertEqual(elements.filter { $0 == -1 }.count, 1, "\(count)")
        }
        var empty = FrameRing<Int>(capacity: 4, head: 2)
        empty.updateLast { $0 = -1 }
        XCTAssertEqual(empty.finish().elements, [])
    }
}
