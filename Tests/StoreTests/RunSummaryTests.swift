// The last run in full, from the run history (a file its user may write: hostile): what reaches
// the stub is bounded and well-formed whatever the record says.

import Foundation
import ReportModel
import Store
import XCTest

final class RunSummaryTests: XCTestCase {
    /// A session and its report's event give the kind, signal, title and reason; hangs and
    /// handled errors name a run that did not crash.
    func testTheSummaryOfEachWayARunEnds() {
        let started = Date(timeIntervalSince1970: 1_700_000_000.5)
        func session(_ status: SessionRecord.Status, errors: Int = 0) -> SessionRecord {
            SessionRecord(
                executable: "/bin/app", buildID: "ab", release: nil, pid: 7, started: started,
                ended: started.addingTimeInterval(2), status: status, errors: errors, crashedDuringLaunch: false,
                reportID: nil)
        }
        var event = Event()
        event.title = "SIGSEGV in parse (app.c:3)"
        event.signal = SignalRecord(number: 11, name: "SIGSEGV", description: "address not mapped")
        var crash = RunSummary(session(.crashed), event: event)
        XCTAssertEqual(crash.kind, "crash")
        XCTAssertEqual(crash.signal, 11)
        XCTAssertEqual(crash.signalName, "SIGSEGV")
        XCTAssertEqual(crash.reason, "address not mapped", "the fault in words when the runtime said nothing")
        XCTAssertEqual(crash.started, 1_700_000_000_500)
        XCTAssertEqual(crash.duration ?? 0, 2, accuracy: 0.01)
        event.reason = "Fatal error: Index out of range"
        crash = RunSummary(session(.crashed), event: event)
        XCTAssertEqual(crash.reason, "Fatal error: Index out of range")
        XCTAssertEqual(RunSummary(session(.abnormal), event: nil).kind, "termination")
        XCTAssertEqual(RunSummary(session(.testCrash), event: nil).kind, "crash")
        XCTAssertEqual(RunSummary(session(.exited, errors: 2), event: nil).kind, "errors")
        var hung = session(.exited, errors: 2)
        hung.hangs = 1
        XCTAssertEqual(RunSummary(hung, event: nil).kind, "hang", "a hang comes before errors")
        XCTAssertEqual(RunSummary(session(.exited), event: nil).kind, "clean")
    }

    /// A record its user wrote: any kind, text of any length, numbers out of range. The detail
    /// sent is bounded: known kinds only, texts cut to their fields, durations clamped.
    func testAHostileRecordGivesABoundedDetail() throws {
        let json = """
            {"executable": "/bin/app", "consecutive_launch_crashes": 9223372036854775807, "last_crashed": true,
             "last_crashed_during_launch": true, "disabled": false, "last_report_id": "../../etc",
             "last": {"kind": "pwned", "signal": -5, "title": "\(String(repeating: "t\\t\\n", count: 100_000))",
                      "reason": "\(String(repeating: "é", count: 10_000))", "started": 18446744073709551615,
                      "duration": 1e300, "errors": -3, "hangs": 9223372036854775807}}
            """
        let record = try JSONDecoder().decode(ProgramRuns.self, from: Data(json.utf8))
        let info = RunHistory.lastRun(of: record, reportsRoot: "/var/lib/crashport/reports/1000")
        XCTAssertEqual(info.consecutiveLaunchCrashes, UInt32.max)
        XCTAssertNil(info.reportID, "not a report id's shape")
        XCTAssertEqual(info.detail.reportPath, "", "no path without an id")
        XCTAssertEqual(info.detail.kind, .unknown)
        XCTAssertEqual(info.detail.errors, 0)
        XCTAssertEqual(info.detail.hangs, UInt32.max)
        XCTAssertEqual(info.detail.durationMilliseconds, 1_000_000_000_000_000)
        let reply = HelloReplyMessage.encode(accepted: true, spool: "", message: "", lastRun: info)
        XCTAssertEqual(reply.count, 2424, "the message's size never grows with the record")
        let title = reply[(496 + 312)..<(496 + 568)]
        XCTAssertEqual(title.last, 0)
        XCTAssertFalse(title.contains(UInt8(ascii: "\t")) || title.contains(UInt8(ascii: "\n")))
        let environment = info.detail.environmentText
        XCTAssertLessThan(environment.utf8.count, 1700)
        XCTAssertEqual(environment.split(separator: "\t", omittingEmptySubsequences: false).count, 5)
    }

    func testTimestampsParseToMilliseconds() {
        XCTAssertEqual(UTCTime.unixMilliseconds("2023-11-14T22:13:20.500Z"), 1_700_000_000_500)
        XCTAssertEqual(UTCTime.unixMilliseconds("2023-11-14T22:13:20Z"), 1_700_000_000_000)
        XCTAssertEqual(UTCTime.unixMilliseconds("2023-11-14T22:13:20.5Z"), 1_700_000_000_500)
        XCTAssertEqual(UTCTime.unixMilliseconds("2023-11-14T22:13:20.12Z"), 1_700_000_000_120)
        XCTAssertEqual(UTCTime.unixMilliseconds("2023-11-14T22:13:20.123456789012345678Z"), 1_700_000_000_123)
        XCTAssertEqual(UTCTime.unixMilliseconds("1970-01-01T00:00:00.000Z"), 0)
        // What Event.timestamp writes reads back (a time whose fraction is exact in binary).
        let written = Event.timestamp(Date(timeIntervalSince1970: 1_800_000_000.25))
        XCTAssertEqual(UTCTime.unixMilliseconds(written), 1_800_000_000_250, written)
        for bad in [
            "", "Z", "2023-11-14 22:13:20Z", "2023-11-14T22:13:20", "2023-11-14T22:13:20.Z", "2023-13-14T22:13:20Z",
            "2023-11-14T24:00:00Z", "2023-11-14T22:13:20+02:00", "2023-11-14T22:13:20.5xZ", "1969-12-31T23:59:59Z",
            "２023-11-14T22:13:20Z", "2023-11-14T22:13:20." + String(repeating: "9", count: 40) + "Z",
        ] {
            XCTAssertNil(UTCTime.unixMilliseconds(bad), bad)
        }
    }
}
