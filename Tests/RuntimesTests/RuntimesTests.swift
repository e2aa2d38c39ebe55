import ReportModel
import XCTest

final class RuntimeStateTests: XCTestCase {
    func testJITSymbolEndSaturates() {
        XCTAssertEqual(JITSymbol(start: UInt64.max - 1, size: 4, name: "x").end, UInt64.max)
        XCTAssertEqual(JITSymbol(start: 0x1000, size: 0x10, name: "x").end, 0x1010)
    }
}
