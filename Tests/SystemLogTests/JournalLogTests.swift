// journalctl's short-precise output, parsed as hostile text: control bytes and invalid UTF-8
// escaped, long lines cut; read backwards from the crash and put back in the order logged; the
// arguments journalctl is run with.

@testable import SystemLog
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

    /// journalctl 252 with --lines and --until (no --reverse) printed nothing where the match's
    /// last lines came after --until (a unit that went on logging after the crash): it is read
    /// backwards from --until. A pid's lines start a second before the process did.
    func testTheJournalIsReadBackwardsFromTheCrashAndAPidsSinceItsStart() {
        XCTAssertEqual(
            JournalLog.arguments(JournalLog.Query(unit: nil, pid: 5, started: 100, until: 200, user: nil)),
            [
                "journalctl", "--no-pager", "--quiet", "--output=short-precise", "--reverse", "--lines=50", "--since=@99",
                "--until=@201", "_PID=5",
            ])
        // A unit's earlier processes are its own: no --since; nor where the start is unknown.
        XCTAssertEqual(
            JournalLog.arguments(JournalLog.Query(unit: "nginx.service", pid: 5, started: 100, until: 200, user: nil)),
            [
                "journalctl", "--no-pager", "--quiet", "--output=short-precise", "--reverse", "--lines=50", "--until=@201",
                "_SYSTEMD_UNIT=nginx.service",
            ])
        XCTAssertNil(JournalLog.Query(unit: nil, pid: 5, until: 200, user: nil).since)
    }

    /// --reverse's output, newest first, back in the order logged; a multi-line message's
    /// lines (indented by journalctl, as a real journald's entry printed them) stay in order.
    func testReversedOutputIsPutBackInTheOrderLogged() {
        let output = """
            Nov 29 20:40:46.587487 vm ml[14]: last one
            Nov 29 20:40:46.587481 vm ml[14]: first
                                                second
                                              third
            Nov 29 20:40:46.587460 vm ml[14]: multi a
            Nov 29 20:40:46.587012 vm ml[14]: single one

            """
        XCTAssertEqual(
            JournalLog.loggedOrder(JournalLog.parse(Array(output.utf8)).lines),
            [
                "Nov 29 20:40:46.587012 vm ml[14]: single one", "Nov 29 20:40:46.587460 vm ml[14]: multi a",
                "Nov 29 20:40:46.587481 vm ml[14]: first", "                                    second",
                "                                  third", "Nov 29 20:40:46.587487 vm ml[14]: last one",
            ])
        // Indented lines with no entry before them (none journalctl prints) stay lines of their own.
        XCTAssertEqual(JournalLog.loggedOrder(["  lone", "b", "a"]), ["a", "b", "  lone"])
        XCTAssertEqual(JournalLog.loggedOrder([]), [])
    }
}
