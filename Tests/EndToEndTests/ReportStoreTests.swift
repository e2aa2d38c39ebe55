// End-to-end: `crashport list` and `crashport show` over real reports, and over broken ones.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class ReportStoreTests: XCTestCase {
    func testListAndShowSurviveBrokenReports() throws {
        let program = try TestSupport.corpus()[0].path
        let reports = TestSupport.temporaryDirectory("store")
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let first = try TestSupport.crashportRun([program, "null"], reports: reports)
        let second = try TestSupport.crashportRun([program, "fpe"], reports: reports)
        XCTAssertEqual(second.reportIDs.count, 2)
        let (older, newer) = (first.reportIDs[0], second.reportIDs.first { $0 != first.reportIDs[0] }!)

        let list = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports])
        XCTAssertEqual(list.status, .exited(0))
        let lines = list.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 2)
        XCTAssertTrue(lines[0].hasPrefix(newer) && lines[0].contains("SIGFPE") && lines[0].contains("crash_fpe"), list.stdout)
        XCTAssertTrue(lines[1].hasPrefix(older) && lines[1].contains("SIGSEGV") && lines[1].contains("crash_null"), list.stdout)

        let text = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, older])
        XCTAssertEqual(text.status, .exited(0))
        XCTAssertTrue(text.stdout.hasPrefix("\(program) (pid"), text.stdout)
        XCTAssertTrue(text.stdout.contains("(crashed)"))
        XCTAssertTrue(text.stdout.contains("crash_null"))
        XCTAssertTrue(text.stdout.contains("Modules:"))
        let json = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, "--format", "json", older])
        XCTAssertEqual(try Event.decode(Data(json.stdout.utf8)).id, older)

        // A truncated event.json, a report that lost its event.json (crashport's marker still
        // there), a half-written report directory, and a directory named like a report that
        // crashport did not write.
        let olderEvent = reports + "/" + older + "/event.json"
        let bytes = try Data(contentsOf: URL(fileURLWithPath: olderEvent))
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: olderEvent))
        let emptied = "20991231T000000.000Z-1-0001"
        try FileManager.default.copyItem(atPath: reports + "/" + newer, toPath: reports + "/" + emptied)
        try FileManager.default.removeItem(atPath: reports + "/" + emptied + "/event.json")
        try FileManager.default.createDirectory(atPath: reports + "/.tmp-in-progress", withIntermediateDirectories: false)
        let unmarked = "20991231T000000.000Z-1-0002"
        try FileManager.default.createDirectory(atPath: reports + "/" + unmarked, withIntermediateDirectories: false)

        let broken = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, older])
        XCTAssertEqual(broken.status, .exited(1))
        XCTAssertTrue(broken.stderr.contains("event.json is not valid"), broken.stderr)
        let half = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, emptied])
        XCTAssertEqual(half.status, .exited(1))
        XCTAssertTrue(half.stderr.contains("event.json is missing"), half.stderr)
        let missing = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, "nope"])
        XCTAssertTrue(missing.stderr.contains("no report 'nope' in \(reports)"), missing.stderr)
        let notOurs = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, unmarked])
        XCTAssertEqual(notOurs.status, .exited(1))
        XCTAssertTrue(notOurs.stderr.contains("no report '\(unmarked)' in \(reports)"), notOurs.stderr)

        let listAgain = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports])
        XCTAssertEqual(listAgain.status, .exited(0))
        XCTAssertTrue(listAgain.stdout.contains(newer), "the good report is still listed")
        XCTAssertFalse(listAgain.stdout.contains("in-progress"))
        XCTAssertTrue(listAgain.stderr.contains(older) && listAgain.stderr.contains(emptied), listAgain.stderr)
        XCTAssertFalse(listAgain.stdout.contains(unmarked) || listAgain.stderr.contains(unmarked), listAgain.stderr)
    }

    /// A reports directory shared with other files (`--reports ~/crashes`): crashport counts,
    /// lists and removes only the reports it wrote, and says once per run that it shares it.
    func testSharedDirectoryKeepsEverythingElse() throws {
        let program = try TestSupport.corpus()[0].path
        let reports = TestSupport.temporaryDirectory("shared")
        let outside = TestSupport.temporaryDirectory("shared-outside")
        defer {
            try? FileManager.default.removeItem(atPath: reports)
            try? FileManager.default.removeItem(atPath: outside)
        }
        let files = FileManager.default
        // Names sorting before the report ids, and after them.
        try Data("mine\n".utf8).write(to: URL(fileURLWithPath: reports + "/0notes.txt"))
        try Data("photos\n".utf8).write(to: URL(fileURLWithPath: reports + "/01-notes.txt"))
        try files.createDirectory(atPath: reports + "/1-important-data/nested", withIntermediateDirectories: true)
        try Data("data\n".utf8).write(to: URL(fileURLWithPath: reports + "/1-important-data/nested/data.bin"))
        try Data("later\n".utf8).write(to: URL(fileURLWithPath: reports + "/zz-after-the-ids.txt"))
        // The shape of a report id (older than any real one) without crashport's marker: an
        // event.json of someone else's schema.
        let lookalike = "20000101T000000.000Z-1-abcd"
        try files.createDirectory(atPath: reports + "/" + lookalike, withIntermediateDirectories: false)
        try Data(#"{"schema": "someone-else.v1"}"#.utf8).write(
            to: URL(fileURLWithPath: reports + "/" + lookalike + "/event.json"))
        // A symlink named like a report to a directory that has everything a report has.
        let linked = "20000101T000000.000Z-2-abcd"
        let target = outside + "/" + linked
        try files.createDirectory(atPath: target, withIntermediateDirectories: false)
        try Data("crashport report crashport.event.v1\n".utf8).write(to: URL(fileURLWithPath: target + "/.crashport-report"))
        try Data(#"{"schema": "crashport.event.v1", "id": "20000101T000000.000Z-2-abcd"}"#.utf8).write(
            to: URL(fileURLWithPath: target + "/event.json"))
        try files.createSymbolicLink(atPath: reports + "/" + linked, withDestinationPath: target)

        /// Every path under `root` (symlinks not followed) with its type and contents.
        func inventory(_ root: String) throws -> [String: String] {
            var found: [String: String] = [:]
            for name in try files.subpathsOfDirectory(atPath: root) {
                let path = root + "/" + name
                let attributes = try files.attributesOfItem(atPath: path)
                let type = attributes[.type] as? FileAttributeType
                switch type {
                case .typeSymbolicLink?: found[name] = "link " + (try files.destinationOfSymbolicLink(atPath: path))
                case .typeDirectory?: found[name] = "directory"
                default: found[name] = "file " + String(decoding: files.contents(atPath: path) ?? Data(), as: UTF8.self)
                }
            }
            return found
        }
        let othersBefore = try inventory(reports)
        let outsideBefore = try inventory(outside)

        var written: [String] = []
        var removed: [String] = []
        for mode in ["null", "fpe", "ill", "bus", "abort"] {
            let watched = try TestSupport.crashportRun([program, mode], options: ["--max-reports", "2"], reports: reports)
            let stderr = watched.result.stderr
            XCTAssertEqual(stderr.components(separatedBy: "will share it").count - 1, 1, stderr)
            XCTAssertTrue(stderr.contains("0notes.txt"), stderr)
            for line in stderr.split(separator: "\n") {
                if let range = line.range(of: "report: ") {
                    written.append((String(line[range.upperBound...]) as NSString).lastPathComponent)
                }
                if let range = line.range(of: "quota: removed ") {
                    let list = line[range.upperBound...].split(separator: "(").last?.prefix { $0 != ")" } ?? ""
                    removed += list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                }
            }
        }
        XCTAssertEqual(written.count, 5)
        XCTAssertEqual(removed, Array(written.prefix(3)), "only crashport's oldest reports go, oldest first")

        let left = try files.contentsOfDirectory(atPath: reports).sorted()
        let kept = left.filter { files.fileExists(atPath: reports + "/" + $0 + "/.crashport-report") && $0 != linked }
        XCTAssertEqual(kept, Array(written.suffix(2)).sorted(), "exactly the newest two reports are kept")
        var othersAfter = try inventory(reports)
        othersAfter = othersAfter.filter { path, _ in !kept.contains { path == $0 || path.hasPrefix($0 + "/") } }
        // crashport's own run history beside its reports (RunHistory) is not someone else's.
        let history = [".crashport-runs.json", ".crashport-runs.lock", ".crashport-sessions.jsonl"]
        XCTAssertTrue(history.allSatisfy { othersAfter[$0] != nil }, "\(othersAfter.keys.sorted())")
        othersAfter = othersAfter.filter { path, _ in !history.contains(path) }
        XCTAssertEqual(othersAfter, othersBefore, "every other entry is untouched")
        XCTAssertEqual(try inventory(outside), outsideBefore, "the symlink's target is untouched")

        let list = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports])
        XCTAssertEqual(list.status, .exited(0))
        XCTAssertEqual(list.stdout.split(separator: "\n").map { String($0.prefix { $0 != " " }) }, kept.reversed())
        XCTAssertEqual(list.stderr, "", "entries that are not reports are not mentioned")
        for name in [lookalike, linked, "0notes.txt", "1-important-data"] {
            let shown = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, name])
            XCTAssertEqual(shown.status, .exited(1))
            XCTAssertTrue(shown.stderr.contains("no report '\(name)' in \(reports)"), shown.stderr)
        }
    }

    func testQuotaRemovesTheOldestReports() throws {
        let program = try TestSupport.corpus()[0].path
        let reports = TestSupport.temporaryDirectory("quota")
        defer { try? FileManager.default.removeItem(atPath: reports) }
        var written: [String] = []
        for mode in ["null", "fpe", "ill", "bus"] {
            let watched = try TestSupport.crashportRun([program, mode], options: ["--max-reports", "2"], reports: reports)
            written += watched.reportIDs.filter { !written.contains($0) }
            if mode == "bus" { XCTAssertTrue(watched.result.stderr.contains("quota: removed"), watched.result.stderr) }
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }.sorted()
        XCTAssertEqual(left.count, 2)
        XCTAssertEqual(left, Array(written.suffix(2)).sorted(), "the newest two are kept")
    }

    /// The reports directory removed while the program runs: it is made again.
    func testReportsDirectoryRemovedWhileRunning() throws {
        let program = try TestSupport.compile(
            [TestSupport.fixture("coexist/stress.c")], output: TestSupport.temporaryDirectory("gone") + "/stress",
            flags: ["-O2", "-g", "-pthread"])
        let parent = TestSupport.temporaryDirectory("gone-reports")
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let reports = parent + "/reports"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestSupport.crashport)
        process.arguments = ["run", "--reports", reports, "--", program, "slow"]
        process.environment = ProcessInfo.processInfo.environment.merging(["CRASHPORT_STUB": try TestSupport.stub()]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = Pipe()
        try process.run()
        _ = output.fileHandleForReading.availableData  // the program is running
        try FileManager.default.removeItem(atPath: reports)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, SIGSEGV)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }.count, 1)
    }

    /// A full disk: a clear log line, and the process still dies correctly.
    func testDiskFull() throws {
        let mountPoint = TestSupport.temporaryDirectory("full")
        defer { try? FileManager.default.removeItem(atPath: mountPoint) }
        let mount = try TestSupport.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", mountPoint])
        guard mount.status == .exited(0) else {
            throw XCTSkip("needs to mount a small tmpfs (root in a machine that allows mounts): \(mount.stderr)")
        }
        defer { _ = try? TestSupport.run(["umount", mountPoint]) }
        let program = try TestSupport.corpus()[0].path
        let watched = try TestSupport.crashportRun([program, "null"], reports: mountPoint + "/reports")
        XCTAssertEqual(watched.result.status, .signaled(11))
        XCTAssertTrue(watched.result.stderr.contains("could not write the report"), watched.result.stderr)
        XCTAssertTrue(watched.result.stderr.contains("No space left on device"), watched.result.stderr)
        // No half-written report is left behind; what fits is a short termination report that
        // says the full one could not be written.
        XCTAssertLessThanOrEqual(watched.reportIDs.count, 1)
        if watched.reportIDs.count == 1 {
            let event = try watched.event()
            XCTAssertEqual(event.kind?.rawValue, "termination")
            XCTAssertTrue(event.notes?.first?.contains("could not be written") ?? false, "\(event.notes ?? [])")
            XCTAssertFalse(FileManager.default.fileExists(atPath: watched.minidumpPath()))
        }
    }
}
