// Which saved action leads to which continuation (the table the stub implements in
// cp_handler_continue_chain and the forward-first path).

import ReportModel
@testable import Reports
import XCTest

final class HandlerChainTests: XCTestCase {
    func testContinuationTable() {
        let function = WireAction(handler: 0x5555_0000_1234, flags: 0x4)
        let rows: [(WireAction?, Bool, Bool, Bool, ChainAction)] = [
            // previous, forwardFirst, previousGaveUp, isFault, expected
            (nil, false, false, true, .defaultAction),
            (WireAction(handler: 0, flags: 0), false, false, true, .defaultAction),
            (WireAction(handler: 0, flags: 0), true, false, true, .defaultAction),
            (WireAction(handler: 1, flags: 0), false, false, true, .defaultAction),  // SIG_IGN on a fault
            (WireAction(handler: 1, flags: 0), false, false, false, .forwardedToPrevious),  // SIG_IGN on kill()
            (function, false, false, true, .forwardedToPrevious),
            (function, false, false, false, .forwardedToPrevious),
            (function, true, false, true, .defaultAction),  // forward-first: the fault came back
            (function, true, true, true, .forwardedToPrevious),  // forward-first: it chose the ending
        ]
        for (index, row) in rows.enumerated() {
            XCTAssertEqual(
                HandlerChain.continuation(previous: row.0, forwardFirst: row.1, previousGaveUp: row.2, isFault: row.3),
                row.4, "row \(index)")
        }
    }
}
