// Which program action leads to which continuation and policy (the table the stub implements in
// cp_handler_signal and cp_forward_deliver).

import ReportModel
@testable import Reports
import XCTest

final class HandlerChainTests: XCTestCase {
    let function = WireAction(handler: 0x5555_0000_1234, flags: 0x4)

    func testContinuationTable() {
        let rows: [(WireAction?, Bool, Bool, ChainAction)] = [
            // program, changed since install, isFault, expected
            (nil, false, true, .defaultAction),
            (WireAction(handler: 0, flags: 0), false, true, .defaultAction),
            (WireAction(handler: 0, flags: 0), true, true, .defaultAction),
            (WireAction(handler: 1, flags: 0), false, true, .defaultAction),  // SIG_IGN on a fault
            (WireAction(handler: 1, flags: 0), true, false, .ignored),  // SIG_IGN on kill()
            (function, false, true, .forwardedToPrevious),
            (function, false, false, .forwardedToPrevious),
            (function, true, true, .forwardedToProgram),
        ]
        for (index, row) in rows.enumerated() {
            XCTAssertEqual(HandlerChain.continuation(program: row.0, changed: row.1, isFault: row.2), row.3, "row \(index)")
        }
    }

    func testPolicyTable() {
        XCTAssertEqual(HandlerChain.policy(program: function, changed: true, forwardFirst: false), .forwardFirst)
        XCTAssertEqual(HandlerChain.policy(program: function, changed: false, forwardFirst: true), .forwardFirst)
        XCTAssertEqual(HandlerChain.policy(program: function, changed: false, forwardFirst: false), .reportThenForward)
        let fallback = WireAction(handler: 0, flags: 0)
        XCTAssertEqual(HandlerChain.policy(program: fallback, changed: true, forwardFirst: false), .reportThenForward)
        // The policy, or a handler that ran first and then reset its action.
        XCTAssertEqual(HandlerChain.policy(program: fallback, changed: true, forwardFirst: true), .forwardFirst)
        XCTAssertEqual(HandlerChain.policy(program: fallback, changed: true, forwardFirst: false, ranFirst: true), .forwardFirst)
    }
}
