// End-to-end: `crashport upload` to a Crashpad/Breakpad collector. A real crash reported by the
// real watcher, sent over real HTTP to a collector on 127.0.0.1 started by the test
// (Tests/Fixtures/upload/collector.py: it parses what it gets as a collector would, gunzipped and
// split into form fields and file parts, and answers as told); the state crashport keeps beside
// the report read back after each pass.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A collector on 127.0.0.1, answering `answers` in order (the last one repeated).
final class Collector {
    let process = Process()
    let port: Int
    let log: String

    init(answers: [[String: Any]], directory: String) throws {
        let answersPath = directory + "/answers-\(UUID().uuidString.prefix(6)).json"
        log = directory + "/requests-\(UUID().uuidString.prefix(6)).jsonl"
        try JSONSerialization.data(withJSONObject: answers).write(to: URL(fileURLWithPath: answersPath))
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", TestSupport.fixture("upload/collector.py"), answersPath, log]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            throw TestFailure("the collector did not start: \(line)")
        }
        self.port = port
    }

    var url: String { "http://127.0.0.1:\(port)/submit" }

    /// The requests it got, as it parsed them.
    var requests: [[String: Any]] {
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }
}

final class UploadTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("upload")

    /// A fresh reports directory holding one real crash report; its id.
    func crashed() throws -> (reports: String, id: String) {
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/crash", flags: ["-O1", "-g"])
        let run = try TestSupport.crashportRun(
            [program, "null"], reports: Self.directory + "/reports-\(UUID().uuidString.prefix(6))",
            environment: ["CRASHPORT_RELEASE": "ledger@2.1"])
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        return (run.reportsDirectory, run.reportIDs[0])
    }

    func upload(_ reports: String, _ url: String, _ extra: [String] = []) throws -> RunResult {
        try TestSupport.run([TestSupport.crashport, "upload", "--reports", reports, "--url", url] + extra)
    }

    func state(_ reports: String, _ id: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: reports + "/" + id + "/upload.json"))
        let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let destinations = json?["destinations"] as? [String: Any]
        XCTAssertEqual(destinations?.count, 1)
        return destinations?.values.first as? [String: Any] ?? [:]
    }

    /// Sent as Crashpad sends: gzipped multipart, the minidump as upload_file_minidump, prod,
    /// ver (the release), guid; recorded as sent with Antenna's CrashID; never sent again; shown
    /// by `crashport list`. A dry run before sends nothing.
    func testSentOnceAsCrashpadSends() throws {
        let (reports, id) = try crashed()
        let collector = try Collector(
            answers: [["status": 200, "body": "CrashID=bp-6fe3a5b2-0000-4000-8000-000000241124\n"]], directory: Self.directory)
        let dry = try upload(reports, collector.url, ["--dry-run"])
        XCTAssertEqual(dry.status, .exited(0), dry.stderr)
        XCTAssertTrue(dry.stdout.contains("\(id): would send to \(collector.url): upload_file_minidump"), dry.stdout)
        XCTAssertTrue(collector.requests.isEmpty)
        XCTAssertFalse(FileManager.default.fileExists(atPath: reports + "/" + id + "/upload.json"))

        let first = try upload(reports, collector.url)
        XCTAssertEqual(first.status, .exited(0), first.stderr)
        XCTAssertTrue(
            first.stdout.contains("\(id): sent to \(collector.url) (bp-6fe3a5b2-0000-4000-8000-000000241124)"), first.stdout)
        let requests = collector.requests
        XCTAssertEqual(requests.count, 1)
        let request = requests.first ?? [:]
        XCTAssertNil(request["error"], "\(request)")
        XCTAssertEqual((request["headers"] as? [String: String])?["content-encoding"], "gzip")
        let fields = request["fields"] as? [String: String] ?? [:]
        XCTAssertEqual(fields["prod"], "crash")
        XCTAssertEqual(fields["ver"], "ledger@2.1")
        XCTAssertEqual(fields["guid"]?.count, 36)
        XCTAssertEqual(fields["crashport_report_id"], id)
        let minidump = (request["files"] as? [String: Any])?["upload_file_minidump"] as? [String: Any]
        XCTAssertEqual(minidump?["magic"] as? String, "MDMP")
        let onDisk = try FileManager.default.attributesOfItem(atPath: reports + "/" + id + "/minidump.dmp")[.size] as? Int
        XCTAssertEqual(minidump?["size"] as? Int, onDisk)
        XCTAssertEqual(minidump?["filename"] as? String, "\(id).dmp")

        let recorded = try state(reports, id)
        XCTAssertEqual(recorded["status"] as? String, "sent")
        XCTAssertEqual(recorded["server_id"] as? String, "bp-6fe3a5b2-0000-4000-8000-000000241124")

        let again = try upload(reports, collector.url, ["--now"])
        XCTAssertEqual(again.status, .exited(0), again.stderr)
        XCTAssertEqual(collector.requests.count, 1, "a report recorded as sent is never sent again")
        XCTAssertTrue(again.stderr.contains("0 sent, 0 to retry, 0 failed, 0 waiting, 1 done before"), again.stderr)

        let list = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports])
        XCTAssertTrue(list.stdout.contains("[crashpad: sent bp-6fe3a5b2-0000-4000-8000-000000241124]"), list.stdout)
    }

    /// A 500: pending, its next attempt after crashport's backoff (15 min ± 10%), so a second
    /// pass sends nothing; `--now` skips the backoff and the 200 that follows is recorded.
    func testServerErrorIsRetriedAfterTheBackoffOrNow() throws {
        let (reports, id) = try crashed()
        let collector = try Collector(
            answers: [["status": 500, "body": "storage unavailable"], ["status": 200, "body": "CrashID=bp-second\n"]],
            directory: Self.directory)
        let started = Date().timeIntervalSince1970
        let first = try upload(reports, collector.url)
        XCTAssertTrue(first.stdout.contains("\(id): HTTP 500: storage unavailable; attempt 1 of 6"), first.stdout)
        var recorded = try state(reports, id)
        XCTAssertEqual(recorded["status"] as? String, "pending")
        XCTAssertEqual(recorded["attempts"] as? Int, 1)
        let wait = (recorded["next_attempt"] as? Double ?? 0) - started
        XCTAssertTrue((13.5 * 60...16.6 * 60).contains(wait), "next attempt \(wait) s later")

        let early = try upload(reports, collector.url)
        XCTAssertEqual(collector.requests.count, 1, early.stdout)
        XCTAssertTrue(early.stderr.contains("1 waiting"), early.stderr)

        let now = try upload(reports, collector.url, ["--now"])
        XCTAssertTrue(now.stdout.contains("\(id): sent to"), now.stdout)
        recorded = try state(reports, id)
        XCTAssertEqual(recorded["status"] as? String, "sent")
        XCTAssertEqual(recorded["attempts"] as? Int, 2)
        XCTAssertEqual(collector.requests.count, 2)
    }

    /// A 429 with Retry-After: the server's wait holds even with --now. A 413: failed, said, and
    /// never retried.
    func testServerLimitsAndRefusalsAreKept() throws {
        let (reports, id) = try crashed()
        let limited = try Collector(
            answers: [["status": 429, "body": "", "headers": ["Retry-After": "3600"]]], directory: Self.directory)
        _ = try upload(reports, limited.url)
        let recorded = try state(reports, id)
        XCTAssertEqual(recorded["status"] as? String, "pending")
        XCTAssertNotNil(recorded["not_before"])
        let now = try upload(reports, limited.url, ["--now"])
        XCTAssertEqual(limited.requests.count, 1, "Retry-After is the server's: --now keeps it")
        XCTAssertTrue(now.stdout.contains("the server asked for no request before"), now.stdout)

        let (others, other) = try crashed()
        let refusing = try Collector(answers: [["status": 413, "body": "Discarded=too_large"]], directory: Self.directory)
        let refused = try upload(others, refusing.url)
        XCTAssertTrue(
            refused.stdout.contains("\(other): HTTP 413: Discarded=too_large (too large for the server): not retried"),
            refused.stdout)
        XCTAssertEqual(try state(others, other)["status"] as? String, "failed")
        _ = try upload(others, refusing.url, ["--now"])
        XCTAssertEqual(refusing.requests.count, 1)
        let list = try TestSupport.run([TestSupport.crashport, "list", "--reports", others])
        XCTAssertTrue(list.stdout.contains("[crashpad: failed: HTTP 413"), list.stdout)
    }

    /// Nobody listening: pending, with the transport's reason, for the next attempt.
    func testUnreachableCollectorIsRetried() throws {
        let (reports, id) = try crashed()
        // A port that was just free: bound, then closed.
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(probe, $0, length) == 0 && getsockname(probe, $0, &length) == 0
            }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        close(probe)
        let result = try upload(reports, "http://127.0.0.1:\(port)/submit", ["--timeout-ms", "5000"])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        let recorded = try state(reports, id)
        XCTAssertEqual(recorded["status"] as? String, "pending")
        XCTAssertTrue((recorded["last_error"] as? String ?? "").lowercased().contains("connect"), "\(recorded)")
    }

    /// The timer and service tools/install puts in lib/systemd/user pass systemd's own check.
    func testTimerUnitsVerify() throws {
        guard let analyze = TestSupport.which("systemd-analyze", also: ["/usr/bin"]) else {
            throw XCTSkip("no systemd-analyze (Debian: systemd)")
        }
        let directory = Self.directory + "/units-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let bin = (TestSupport.crashport as NSString).deletingLastPathComponent
        let root = TestSupport.repositoryRoot + "/packaging/systemd/user/"
        try String(contentsOfFile: root + "crashport-upload.service.in", encoding: .utf8)
            .replacingOccurrences(of: "@bindir@", with: bin)
            .write(toFile: directory + "/crashport-upload.service", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: root + "crashport-upload.timer", toPath: directory + "/crashport-upload.timer")
        let result = try TestSupport.run(
            [analyze, "verify", directory + "/crashport-upload.timer", directory + "/crashport-upload.service"])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        XCTAssertEqual(result.stderr.trimmingCharacters(in: .whitespacesAndNewlines), "", result.stderr)
    }

    /// No destination, or one that is not an http(s) URL: a usage error, and nothing written.
    func testDestinationIsRequiredAndChecked() throws {
        let (reports, id) = try crashed()
        var environment = ProcessInfo.processInfo.environment
        environment["CRASHPORT_UPLOAD_URL"] = nil
        let none = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", reports], environment: ["CRASHPORT_UPLOAD_URL": ""])
        XCTAssertEqual(none.status, .exited(64), none.stderr)
        XCTAssertTrue(none.stderr.contains("no destination"), none.stderr)
        for bad in ["ftp://example.invalid/x", "not a url", "http://"] {
            let result = try upload(reports, bad)
            XCTAssertEqual(result.status, .exited(64), "\(bad): \(result.stderr)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: reports + "/" + id + "/upload.json"))
    }
}
