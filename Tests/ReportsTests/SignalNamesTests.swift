// Signal and si_code names as reports print them.

import Reports
import XCTest

final class SignalNamesTests: XCTestCase {
    func testSignalNames() {
        XCTAssertEqual(SignalNames.name(11), "SIGSEGV")
        XCTAssertEqual(SignalNames.codeName(signal: 11, code: 1), "SEGV_MAPERR")
        XCTAssertEqual(SignalNames.codeName(signal: 6, code: -6), "SI_TKILL")
        XCTAssertEqual(SignalNames.codeName(signal: 7, code: 2), "BUS_ADRERR")
        XCTAssertEqual(SignalNames.number("segv"), 11)
        XCTAssertEqual(SignalNames.describe(signal: 8, code: 1), "arithmetic exception: integer divide by zero (FPE_INTDIV)")
    }
}
