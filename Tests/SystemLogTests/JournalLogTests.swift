// journalctl's short-precise output, parsed as hostile text: control bytes and invalid UTF-8
// escaped, long lines cut.

import SystemLog
import XCTest

final class JournalLogTests: XCTestCase {
    func testLinesAreKeptAndEscaped() {
        let output =
            Array("Nov 26 19:59:15.123456 host app[1234]: starting\n".utf8)
            + Array("Nov 26 19:59:15.200000 host app[1234]: bad ".utf8) + [0x1B, 0x5B, 0xFF, 0xC3, 0xA9] + Array("\n\n".utf8)
        let reading = JournalLog.parse(output)
        XCTAssertEqual(
            reading.lines,
            ["Nov 26 19:59:15.123456 host app[1234]: starting", "Nov 26 19:59:15.200000 host app[1234]: bad \\x1b[\u{FFFD}é"])
    }

    func testLongLinesAreCut() {
        let reading = JournalLog.parse([UInt8](repeating: 0x61, count: 3000), lineLimit: 100)
        XCTAssertEqual(reading.lines, [String(repeating: "a", count: 100) + "…[cut]"])
    }

    func testTheQueryNamesTheUnitOrThePid() {
        XCTAssertEqual(JournalLog.Query(unit: "nginx.service", pid: 5, until: 10, user: nil).match, "_SYSTEMD_UNIT=nginx.service")
        XCTAssertEqual(JournalLog.Query(unit: nil, pid: 5, until: 10, user: nil).match, "_PID=5")
    }
}
