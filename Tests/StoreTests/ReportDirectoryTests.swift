// The report store on a real directory: what it counts as its own, what quota pruning removes,
// and that it never follows a link or touches a file it did not write. (EndToEndTests drive the
// same store through `crashport run` and `crashport list`.)

import Foundation
import ReportModel
import Store
import TestSupport
import XCTest

final class ReportDirectoryTests: XCTestCase {
    func makeReport(_ store: ReportStore, pid: Int32, seconds: TimeInterval) throws -> String {
        let id = ReportStore.newID(pid: pid, date: Date(timeIntervalSince1970: 1_800_000_000 + seconds))
        var event = Event()
        event.id = id
        event.kind = .crash
        _ = try store.commit(id: id) { directory in
            try ReportStore.writeFile(directory + "/event.json", Array(try event.jsonData()))
        }
        return id
    }

    func testCommittedReportsAreListedNewestFirstAndReadBack() throws {
        let store = ReportStore(root: TestSupport.temporaryDirectory("store-list") + "/reports")
        try store.prepare()
        let older = try makeReport(store, pid: 10, seconds: 0)
        let newer = try makeReport(store, pid: 11, seconds: 60)
        XCTAssertEqual(store.ids(), [newer, older])
        XCTAssertEqual(try store.event(id: older).id, older)
        XCTAssertTrue(ReportStore.isReportIDShape(older))
        XCTAssertFalse(ReportStore.isReportIDShape("notes.txt"))
    }

    func testPruningRemovesOnlyTheOldestOfItsOwnReports() throws {
        let root = TestSupport.temporaryDirectory("store-prune") + "/reports"
        var store = ReportStore(root: root)
        try store.prepare()
        let ids = try (0..<4).map { try makeReport(store, pid: 20 + Int32($0), seconds: TimeInterval($0)) }
        // Things that are not crashport's: a file, a directory with a report's name but no
        // marker, and a symlink with a report's name pointing at a directory of ours.
        let foreignFile = root + "/notes.txt"
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: foreignFile))
        let impostor = root + "/" + ReportStore.newID(pid: 1, date: Date(timeIntervalSince1970: 1_700_000_000))
        try FileManager.default.createDirectory(atPath: impostor, withIntermediateDirectories: false)
        let link = root + "/" + ReportStore.newID(pid: 2, date: Date(timeIntervalSince1970: 1_700_000_001))
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: root + "/" + ids[3])

        XCTAssertEqual(store.foreignEntries().count, 3, "\(store.foreignEntries())")
        store.maxReports = 2
        XCTAssertEqual(Set(store.prune()), Set(ids[0..<2]))
        XCTAssertEqual(store.ids(), [ids[3], ids[2]])
        for kept in [foreignFile, impostor, link] {
            XCTAssertNotNil(try? FileManager.default.attributesOfItem(atPath: kept), "\(kept) untouched")
        }
    }
}
