// The memory section's parsing of the kernel's PSI text, hostile text included, and what
// counts as memory pressure.

import XCTest

@testable import ReportModel

final class MemoryRecordTests: XCTestCase {
    func testPSIText() throws {
        let text = "some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=2.25 avg60=0.50 avg300=0.00 total=7\n"
        let pressure = try XCTUnwrap(PressureRecord(psi: text, scope: "cgroup"))
        XCTAssertEqual(pressure.someAvg10, 12.5)
        XCTAssertEqual(pressure.someAvg60, 3)
        XCTAssertEqual(pressure.fullAvg10, 2.25)
        XCTAssertEqual(pressure.fullAvg60, 0.5)
        for hostile in ["", "some", "some avg10=nan avg60=-1 avg10=inf", "full avg10=1e999", "\u{0}\u{0}", "avg10=1"] {
            XCTAssertNil(PressureRecord(psi: hostile, scope: "machine"), hostile)
        }
    }

    func testUnderPressure() {
        var memory = MemoryRecord()
        XCTAssertFalse(memory.underPressure)
        memory.limit = 100 << 20
        memory.peak = 80 << 20
        XCTAssertFalse(memory.underPressure)
        memory.peak = 90 << 20
        XCTAssertTrue(memory.underPressure)
        memory.peak = 10 << 20
        memory.events = ["oom_kill": 1]
        XCTAssertTrue(memory.underPressure)
        memory.events = ["oom_kill": 0]
        memory.pressure = PressureRecord(psi: "some avg10=25.00 avg60=1.00", scope: "machine")
        XCTAssertTrue(memory.underPressure)
    }
}
