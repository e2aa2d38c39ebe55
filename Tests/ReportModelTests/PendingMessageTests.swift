// A consent dialog's wire messages (PendingMessages.swift): the query, the list and one report's
// consent round-trip; short, oversized and garbage bytes are refused with a reason, never a
// crash.

import CCrashPortProtocol
import XCTest

@testable import ReportModel

final class PendingMessageTests: XCTestCase {
    let id = "20261126T230000.123Z-4242-00af"

    func testQueryIsItsHeaderAlone() throws {
        XCTAssertEqual(MemoryLayout<cp_pending_query>.size, 24)
        let query = PendingQuery.encode()
        XCTAssertNoThrow(try PendingQuery.check(query))
        XCTAssertThrowsError(try PendingQuery.check(Array(query.prefix(20)))) { XCTAssertTrue("\($0)".contains("20")) }
        var long = query + [0, 0, 0, 0]
        long[8] = 28
        XCTAssertThrowsError(try PendingQuery.check(long)) { XCTAssertTrue("\($0)".contains("28 bytes"), "\($0)") }
        var reserved = query
        reserved[20] = 1
        XCTAssertThrowsError(try PendingQuery.check(reserved)) { XCTAssertTrue("\($0)".contains("reserved"), "\($0)") }
        XCTAssertThrowsError(try PendingQuery.check(ConsentMessage.encode(.sendPending)))
    }

    /// The list round-trips; texts are cut to their fields at a character boundary, control
    /// characters made spaces; more than 32 entries are cut to 32 and the total kept.
    func testListRoundTripsAndIsBounded() throws {
        XCTAssertEqual(MemoryLayout<cp_pending_entry>.size, 344)
        XCTAssertEqual(MemoryLayout<cp_pending_list>.size, 24 + 32 * 344)
        let entries = [
            PendingEntry(id: id, title: "SIGSEGV in parse (app.c:3)", kind: "crash", timeMilliseconds: 1_795_000_000_123),
            PendingEntry(id: "x", title: "", kind: "", timeMilliseconds: 0),
        ]
        let list = PendingList(entries: entries, total: 5)
        XCTAssertEqual(try PendingList(bytes: list.encode()), list)

        let long = PendingEntry(
            id: String(repeating: "9", count: 80), title: "line\none" + String(repeating: "é", count: 200),
            kind: "termination-and-more", timeMilliseconds: -1)
        let decoded = try PendingList(bytes: PendingList(entries: Array(repeating: long, count: 40), total: 0).encode())
        XCTAssertEqual(decoded.entries.count, 32)
        XCTAssertEqual(decoded.total, 32)
        XCTAssertEqual(decoded.entries[0].id.utf8.count, 63)
        XCTAssertTrue(decoded.entries[0].title.hasPrefix("line one"))
        XCTAssertLessThanOrEqual(decoded.entries[0].title.utf8.count, 255)
        XCTAssertTrue(decoded.entries[0].title.hasSuffix("é"), "cut at a character boundary")
        XCTAssertEqual(decoded.entries[0].kind, "termination-and")
        XCTAssertEqual(decoded.entries[0].timeMilliseconds, -1)
    }

    func testListRefusesShortOversizedAndGarbage() throws {
        let bytes = PendingList(entries: [PendingEntry(id: id, title: "t", kind: "crash", timeMilliseconds: 1)], total: 1)
            .encode()
        XCTAssertThrowsError(try PendingList(bytes: Array(bytes.prefix(100))))
        XCTAssertThrowsError(try PendingList(bytes: Array(bytes.prefix(10)))) { XCTAssertTrue("\($0)".contains("10")) }
        var oversized = bytes + [0]
        oversized[8] = UInt8(truncatingIfNeeded: oversized.count)
        oversized[9] = UInt8(truncatingIfNeeded: oversized.count >> 8)
        XCTAssertThrowsError(try PendingList(bytes: oversized))
        var tooMany = bytes
        tooMany[16] = 33
        XCTAssertThrowsError(try PendingList(bytes: tooMany)) { XCTAssertTrue("\($0)".contains("33 entries"), "\($0)") }
        var unterminated = bytes
        for offset in 24..<(24 + 64) { unterminated[offset] = 0x41 }
        XCTAssertThrowsError(try PendingList(bytes: unterminated)) {
            XCTAssertTrue("\($0)".contains("not NUL-terminated"), "\($0)")
        }
        var garbage = bytes
        for offset in 16..<garbage.count { garbage[offset] = UInt8(truncatingIfNeeded: offset &* 37) }
        XCTAssertThrowsError(try PendingList(bytes: garbage))
        XCTAssertThrowsError(try PendingList(bytes: Array(repeating: 0xFF, count: bytes.count)))
    }

    func testOneReportsConsentRoundTripsAndRefusesBadIDs() throws {
        XCTAssertEqual(MemoryLayout<cp_consent_report>.size, 88)
        for message in [ConsentReportMessage(send: true, id: id), ConsentReportMessage(send: false, id: id)] {
            XCTAssertEqual(try ConsentReportMessage(bytes: message.encode()), message)
        }
        let bytes = ConsentReportMessage(send: true, id: id).encode()
        XCTAssertThrowsError(try ConsentReportMessage(bytes: Array(bytes.prefix(40))))
        var long = bytes + [0, 0, 0, 0]
        long[8] = 92
        XCTAssertThrowsError(try ConsentReportMessage(bytes: long)) { XCTAssertTrue("\($0)".contains("92 bytes"), "\($0)") }
        var action = bytes
        action[16] = 1  // CP_CONSENT_SET: not for one report
        XCTAssertThrowsError(try ConsentReportMessage(bytes: action)) { XCTAssertTrue("\($0)".contains("action 1")) }
        for (what, id) in [("empty", ""), ("a path", "../../etc"), ("a slash", "a/b")] {
            XCTAssertThrowsError(try ConsentReportMessage(bytes: ConsentReportMessage(send: true, id: id).encode()), what)
        }
        var unterminated = bytes
        for offset in 24..<88 { unterminated[offset] = 0x41 }
        XCTAssertThrowsError(try ConsentReportMessage(bytes: unterminated))
    }
}
