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

    /// With `relay`, Sentry Relay's normalizer (tools/fetch-validators) judges each envelope's event.
    init(answers: [[String: Any]], directory: String, relay: Bool = false, tls: (certificate: String, key: String)? = nil) throws
    {
        let answersPath = directory + "/answers-\(UUID().uuidString.prefix(6)).json"
        log = directory + "/requests-\(UUID().uuidString.prefix(6)).jsonl"
        try JSONSerialization.data(withJSONObject: answers).write(to: URL(fileURLWithPath: answersPath))
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", TestSupport.fixture("upload/collector.py"), answersPath, log]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        var environment = ProcessInfo.processInfo.environment
        if relay { environment["PYTHONPATH"] = TestSupport.repositoryRoot + "/tools/.cache/relay" }
        if let tls { environment["COLLECTOR_TLS"] = tls.certificate + ":" + tls.key }
        process.environment = environment
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
    func crashed() throws -> (reports: String, id: String) { try Self.crashed(in: Self.directory) }

    /// A fresh reports directory in `directory` holding one real crash report (release
    /// ledger@2.1); its id. OTLPUploadTests' crash too.
    static func crashed(in directory: String) throws -> (reports: String, id: String) {
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: directory + "/crash", flags: ["-O1", "-g"])
        let run = try TestSupport.crashportRun(
            [program, "null"], reports: directory + "/reports-\(UUID().uuidString.prefix(6))",
            environment: ["CRASHPORT_RELEASE": "ledger@2.1"])
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        return (run.reportsDirectory, run.reportIDs[0])
    }

    func upload(_ reports: String, _ url: String, _ extra: [String] = []) throws -> RunResult {
        try TestSupport.run([TestSupport.crashport, "upload", "--reports", reports, "--url", url] + extra)
    }

    /// The report's upload state for the destination whose key starts with `kind`.
    func state(_ reports: String, _ id: String, _ kind: String = "crashpad") throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: reports + "/" + id + "/upload.json"))
        let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let destinations = json?["destinations"] as? [String: Any] ?? [:]
        return destinations.first { $0.key.hasPrefix(kind + " ") }?.value as? [String: Any] ?? [:]
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
        // What upload keeps beside the reports is crashport's own: no "not crashport reports".
        _ = try TestSupport.run([TestSupport.crashport, "consent", "always", "--reports", reports])
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/crash", flags: ["-O1", "-g"])
        let next = try TestSupport.crashportRun([program, "null"], reports: reports)
        XCTAssertFalse(next.result.stderr.contains("not crashport reports"), next.result.stderr)
        let nowhere = try upload(Self.directory + "/no-such-directory", collector.url)
        XCTAssertTrue(nowhere.stdout.contains("cannot use"), nowhere.stdout)
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
        XCTAssertTrue(
            first.stdout.contains("\(id): \(collector.url): HTTP 500: storage unavailable; attempt 1 of 6"), first.stdout)
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
        XCTAssertTrue(now.stdout.contains("\(limited.url) asked for no request before"), now.stdout)

        let (others, other) = try crashed()
        let refusing = try Collector(answers: [["status": 413, "body": "Discarded=too_large"]], directory: Self.directory)
        let refused = try upload(others, refusing.url)
        XCTAssertTrue(
            refused.stdout.contains(
                "\(other): \(refusing.url): HTTP 413: Discarded=too_large (too large for the server): not retried"),
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
        let port = TestSupport.closedPort()
        let result = try upload(reports, "http://127.0.0.1:\(port)/submit", ["--timeout-ms", "5000"])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        let recorded = try state(reports, id)
        XCTAssertEqual(recorded["status"] as? String, "pending")
        XCTAssertTrue((recorded["last_error"] as? String ?? "").lowercased().contains("connect"), "\(recorded)")
    }

    /// A Sentry project and a Crashpad collector at once: an envelope to the project's envelope
    /// endpoint (X-Sentry-Auth from the DSN, gzip; the event, which Sentry Relay's own
    /// normalizer takes without errors, and the minidump as event.minidump), Crashpad's multipart
    /// to the collector; each recorded as sent with its server's id.
    func testSentToSentryAndACollectorAtOnce() throws {
        let relay = FileManager.default.fileExists(atPath: TestSupport.repositoryRoot + "/tools/.cache/relay/sentry_relay")
        let (reports, id) = try crashed()
        let sentry = try Collector(
            answers: [["status": 200, "body": "{\"id\":\"$EVENT_ID\"}"]], directory: Self.directory, relay: relay)
        let crashpad = try Collector(answers: [["status": 200, "body": "CrashID=bp-both\n"]], directory: Self.directory)
        let dsn = "http://publickey@127.0.0.1:\(sentry.port)/42"
        let result = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", reports, "--sentry-dsn", dsn, "--url", crashpad.url])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        XCTAssertTrue(result.stderr.contains("2 sent, 0 to retry, 0 failed"), result.stderr + result.stdout)

        guard let request = sentry.requests.first else { return XCTFail("nothing reached Sentry: \(result.stdout)") }
        XCTAssertNil(request["error"], "\(request)")
        XCTAssertEqual(request["path"] as? String, "/api/42/envelope/")
        let headers = request["headers"] as? [String: String] ?? [:]
        XCTAssertTrue(
            headers["x-sentry-auth"]?.hasPrefix("Sentry sentry_key=publickey, sentry_version=7, sentry_client=crashport/")
                == true,
            "\(headers)")
        XCTAssertEqual(headers["content-encoding"], "gzip")
        let items = request["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(items.map { $0["type"] as? String }, ["event", "attachment", "session"])
        XCTAssertEqual(items[1]["attachment_type"] as? String, "event.minidump")
        XCTAssertEqual(items[1]["magic"] as? String, "MDMP")
        // The run's end, from the run history: crashed, with the release, counted once.
        let session = items.last?["session"] as? [String: Any] ?? [:]
        XCTAssertEqual(session["status"] as? String, "crashed")
        XCTAssertEqual(session["init"] as? Bool, true)
        XCTAssertEqual((session["attrs"] as? [String: String])?["release"], "ledger@2.1")
        XCTAssertNotNil(UUID(uuidString: session["sid"] as? String ?? ""), "\(session)")
        if relay {
            XCTAssertEqual((items.first?["relay_errors"] as? [Any])?.count, 0, "\(items.first ?? [:])")
        } else {
            print(
                "UploadTests: sentry_relay is not in tools/.cache (tools/fetch-validators could not install it): the event was not normalized"
            )
        }
        let eventID = request["event_id"] as? String ?? ""
        XCTAssertEqual(eventID.count, 32)
        XCTAssertEqual(try state(reports, id, "sentry")["server_id"] as? String, eventID)
        XCTAssertEqual(try state(reports, id, "crashpad")["server_id"] as? String, "bp-both")
        XCTAssertEqual(crashpad.requests.count, 1)

        let list = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports])
        XCTAssertTrue(list.stdout.contains("[crashpad: sent bp-both, sentry: sent \(eventID)]"), list.stdout)
    }

    /// Sentry's rate limit, on a 429 with X-Sentry-Rate-Limits for the error category: pending,
    /// and --now keeps the server's wait.
    func testSentryRateLimitIsKept() throws {
        let (reports, id) = try crashed()
        let sentry = try Collector(
            answers: [["status": 429, "body": "", "headers": ["X-Sentry-Rate-Limits": "1800:error;default:organization"]]],
            directory: Self.directory)
        let dsn = "http://publickey@127.0.0.1:\(sentry.port)/42"
        _ = try TestSupport.run([TestSupport.crashport, "upload", "--reports", reports, "--sentry-dsn", dsn])
        let recorded = try state(reports, id, "sentry")
        XCTAssertEqual(recorded["status"] as? String, "pending")
        let wait = (recorded["not_before"] as? Double ?? 0) - Date().timeIntervalSince1970
        XCTAssertTrue((1700...1800).contains(wait), "the server's 1800 s: \(wait)")
        let now = try TestSupport.run([TestSupport.crashport, "upload", "--reports", reports, "--sentry-dsn", dsn, "--now"])
        XCTAssertEqual(sentry.requests.count, 1, now.stdout)
    }

    /// By default neither the program's arguments nor a home directory's user name leave the
    /// machine, in the minidump or in the event; --send-pii sends them. A before_send hook sees
    /// each request first: one that passes it through sends it, one that exits non-zero drops it.
    func testPrivacyByDefaultAndTheBeforeSendHook() throws {
        guard getuid() == 0 else { throw XCTSkip("the program must run from a directory under /home, which root makes here") }
        let home = "/home/cptest\(getpid())"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: home + "/crash", flags: ["-O1", "-g"])
        let reports = Self.directory + "/private-\(UUID().uuidString.prefix(6))"
        let sentry = try Collector(answers: [["status": 200, "body": "{\"id\":\"$EVENT_ID\"}"]], directory: Self.directory)
        let crashpad = try Collector(answers: [["status": 200, "body": "CrashID=bp-private\n"]], directory: Self.directory)
        let dsn = "http://publickey@127.0.0.1:\(sentry.port)/42"
        let name = (home as NSString).lastPathComponent

        // A crash sent by default, then another sent with --send-pii (the first is sent by then).
        for (index, sendPII) in [false, true].enumerated() {
            _ = try TestSupport.crashportRun([program, "null", "--password=hunter2"], reports: reports)
            let result = try TestSupport.run(
                [TestSupport.crashport, "upload", "--reports", reports, "--sentry-dsn", dsn, "--url", crashpad.url]
                    + (sendPII ? ["--send-pii"] : []))
            XCTAssertEqual(result.status, .exited(0), result.stderr)
            guard sentry.requests.count == index + 1, crashpad.requests.count == index + 1 else {
                return XCTFail("\(result.stdout)\(result.stderr)")
            }
            let items = sentry.requests[index]["items"] as? [[String: Any]] ?? []
            let files = crashpad.requests[index]["files"] as? [String: [String: Any]] ?? [:]
            let event = items.first { $0["type"] as? String == "event" }?["saved"] as? String ?? ""
            let minidumps =
                items.filter { $0["attachment_type"] as? String == "event.minidump" }.compactMap { $0["saved"] as? String }
                + files.values.compactMap { $0["saved"] as? String }
            // The system's log around the crash is the machine's: sent only with --send-pii.
            XCTAssertEqual(
                items.contains { $0["filename"] as? String == "system.log" }, sendPII,
                "\(items.map { $0["filename"] as? String ?? "" })")
            XCTAssertEqual(minidumps.count, 2, "one to Sentry, one to the collector")
            for path in [event] + minidumps {
                let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
                XCTAssertEqual(text.contains("/home/\(name)/"), sendPII, "\(path): user name")
                // The event never carries arguments; a minidump does only with --send-pii (its
                // command line stream, and the strings at the top of the main thread's stack).
                XCTAssertEqual(text.contains("hunter2"), sendPII && path != event, "\(path): arguments")
            }
            // The edited minidump still reads as the same crash (rust-minidump's stackwalk).
            let walked = try TestSupport.stackwalk(minidumps[0])
            XCTAssertEqual(walked["status"] as? String, "OK")
            XCTAssertEqual((walked["crash_info"] as? [String: Any])?["type"] as? String, "SIGSEGV / SEGV_MAPERR")
        }

        // before_send: /bin/cat passes the request through; a hook exiting 3 drops it.
        let hook = Self.directory + "/drop-\(UUID().uuidString.prefix(6)).sh"
        try "#!/bin/sh\ncat > /dev/null\nexit 3\n".write(toFile: hook, atomically: true, encoding: .utf8)
        chmod(hook, 0o755)
        let (others, other) = try crashed()
        let passed = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", others, "--url", crashpad.url, "--before-send", "/bin/cat"])
        XCTAssertTrue(passed.stdout.contains("\(other): sent to"), passed.stdout + passed.stderr)
        let (dropped, droppedID) = try crashed()
        let refused = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", dropped, "--url", crashpad.url, "--before-send", hook])
        XCTAssertTrue(
            refused.stdout.contains("\(droppedID): \(crashpad.url): dropped by before_send \(hook) (it exited 3)"), refused.stdout
        )
        XCTAssertEqual(try state(dropped, droppedID)["status"] as? String, "failed")
    }

    /// crashport consent: never keeps reports here; ask holds each until crashport send (which
    /// sends it at once) or crashport discard (never sent, even after consent becomes always);
    /// list says which; a consent for one program leaves the others to the general one.
    func testConsent() throws {
        let (reports, first) = try crashed()
        let collector = try Collector(answers: [["status": 200, "body": "CrashID=bp-consent\n"]], directory: Self.directory)
        func crashport(_ arguments: [String]) throws -> RunResult {
            try TestSupport.run([TestSupport.crashport] + arguments + ["--reports", reports])
        }
        XCTAssertEqual(try crashport(["consent", "never"]).status, .exited(0))
        let kept = try upload(reports, collector.url)
        XCTAssertTrue(kept.stderr.contains("1 kept here by consent"), kept.stderr)
        XCTAssertTrue(collector.requests.isEmpty)

        XCTAssertEqual(try crashport(["consent", "ask"]).status, .exited(0))
        let held = try upload(reports, collector.url)
        XCTAssertTrue(held.stdout.contains("\(first): awaiting consent (crashport send \(first)"), held.stdout)
        XCTAssertTrue(collector.requests.isEmpty)
        XCTAssertTrue(try crashport(["list"]).stdout.contains("[consent: awaiting]"))

        let sent = try TestSupport.run(
            [TestSupport.crashport, "send", "--all", "--reports", reports, "--url", collector.url])
        XCTAssertTrue(sent.stdout.contains("1 report(s) allowed to be sent: \(first)"), sent.stdout)
        XCTAssertTrue(sent.stdout.contains("\(first): sent to"), sent.stdout + sent.stderr)
        XCTAssertEqual(collector.requests.count, 1)

        // A second crash, discarded: never sent, not even once consent is always.
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/crash", flags: ["-O1", "-g"])
        _ = try TestSupport.crashportRun([program, "null"], reports: reports)
        let second = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") && $0 != first }
        XCTAssertEqual(second.count, 1)
        XCTAssertTrue(try crashport(["discard", second[0]]).stdout.contains("1 report(s) will never be sent"))
        XCTAssertEqual(try crashport(["consent", "always"]).status, .exited(0))
        _ = try upload(reports, collector.url, ["--now"])
        XCTAssertEqual(collector.requests.count, 1, "discarded")
        XCTAssertTrue(try crashport(["list"]).stdout.contains("[consent: discarded]"))

        // never for this program only: a third crash of it stays here.
        XCTAssertEqual(try crashport(["consent", "never", "--program", program]).status, .exited(0))
        let settings = try crashport(["consent"]).stdout
        XCTAssertTrue(settings.contains("every program: always") && settings.contains("\(program): never"), settings)
        _ = try TestSupport.crashportRun([program, "null"], reports: reports)
        let third = try upload(reports, collector.url)
        XCTAssertTrue(third.stderr.contains("2 kept here by consent"), third.stderr)
        XCTAssertEqual(collector.requests.count, 1)
        XCTAssertEqual(try crashport(["send"]).status, .exited(64), "ids or --all")
    }

    /// crashport run with a destination in its environment starts the upload itself, in the
    /// background, after the report is written; the program's exit is not delayed by it.
    func testCrashportRunUploadsInTheBackground() throws {
        let collector = try Collector(answers: [["status": 200, "body": "CrashID=bp-background\n"]], directory: Self.directory)
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/crash", flags: ["-O1", "-g"])
        let run = try TestSupport.crashportRun(
            [program, "null"], reports: Self.directory + "/background-\(UUID().uuidString.prefix(6))",
            environment: ["CRASHPORT_UPLOAD_URL": collector.url, "CRASHPORT_SENTRY_DSN": ""])
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        XCTAssertTrue(run.result.stderr.contains("crashport: uploading in the background (log: "), run.result.stderr)
        try waitUntil("the background upload reaches the collector", timeout: 60) { collector.requests.count == 1 }
        try waitUntil("its state is recorded", timeout: 60) {
            (try? state(run.reportsDirectory, run.reportIDs[0]))?["status"] as? String == "sent"
        }
        let log = try String(contentsOfFile: run.reportsDirectory + "/.crashport-upload.log", encoding: .utf8)
        XCTAssertTrue(log.contains("sent to \(collector.url) (bp-background)"), log)
    }

    /// TLS against a private CA: refused without it (the system's CAs do not know it: pending,
    /// with the TLS error), accepted with --ca-file. The certificate is made here with openssl.
    func testTLSWithAPrivateCA() throws {
        guard let openssl = TestSupport.which("openssl", also: ["/usr/bin"]) else { throw XCTSkip("no openssl") }
        let directory = Self.directory + "/tls-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let made = try TestSupport.run([
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem",
        ])
        XCTAssertEqual(made.status, .exited(0), made.stderr)
        let (reports, id) = try crashed()
        let collector = try Collector(
            answers: [["status": 200, "body": "CrashID=bp-tls\n"]], directory: Self.directory,
            tls: (directory + "/cert.pem", directory + "/key.pem"))
        let url = "https://127.0.0.1:\(collector.port)/submit"
        let refused = try upload(reports, url)
        XCTAssertEqual(try state(reports, id)["status"] as? String, "pending", refused.stdout)
        XCTAssertTrue(
            (try state(reports, id)["last_error"] as? String ?? "").lowercased().contains("certificate"), refused.stdout)
        let accepted = try upload(reports, url, ["--now", "--ca-file", directory + "/cert.pem"])
        XCTAssertTrue(accepted.stdout.contains("\(id): sent to \(url) (bp-tls)"), accepted.stdout + accepted.stderr)
    }

    /// A proxy from the environment (http_proxy, as libcurl reads it): the collector, acting as
    /// the proxy, gets the request for the absolute URL of a host that does not exist.
    func testProxyFromTheEnvironment() throws {
        let (reports, id) = try crashed()
        let proxy = try Collector(answers: [["status": 200, "body": "CrashID=bp-proxied\n"]], directory: Self.directory)
        let result = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", reports, "--url", "http://collector.invalid/submit"],
            environment: ["http_proxy": "http://127.0.0.1:\(proxy.port)", "no_proxy": ""])
        XCTAssertTrue(result.stdout.contains("\(id): sent to http://collector.invalid/submit (bp-proxied)"), result.stdout)
        XCTAssertEqual(proxy.requests.first?["path"] as? String, "http://collector.invalid/submit")
    }

    /// Destinations from crashport.toml (--config, or CRASHPORT_CONFIG): a Sentry project and a
    /// collector at once; a broken file is an error that names it.
    func testDestinationsFromCrashportToml() throws {
        let (reports, id) = try crashed()
        let sentry = try Collector(answers: [["status": 200, "body": "{\"id\":\"$EVENT_ID\"}"]], directory: Self.directory)
        let crashpad = try Collector(answers: [["status": 200, "body": "CrashID=bp-toml\n"]], directory: Self.directory)
        let file = Self.directory + "/crashport-\(UUID().uuidString.prefix(6)).toml"
        try """
        [upload]
        sentry_dsn = "http://publickey@127.0.0.1:\(sentry.port)/42"
        url = "\(crashpad.url)"
        environment = "staging"
        """.write(toFile: file, atomically: true, encoding: .utf8)
        let result = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", reports],
            environment: ["CRASHPORT_CONFIG": file, "CRASHPORT_UPLOAD_URL": "", "CRASHPORT_SENTRY_DSN": ""])
        XCTAssertTrue(result.stderr.contains("2 sent"), result.stdout + result.stderr)
        XCTAssertEqual(try state(reports, id, "crashpad")["server_id"] as? String, "bp-toml")
        XCTAssertEqual(sentry.requests.count, 1)

        let broken = Self.directory + "/broken-\(UUID().uuidString.prefix(6)).toml"
        try "[upload]\nurl = 7\n".write(toFile: broken, atomically: true, encoding: .utf8)
        let refused = try TestSupport.run([TestSupport.crashport, "upload", "--reports", reports, "--config", broken])
        XCTAssertEqual(refused.status, .exited(1), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("\(broken): upload.url must be a string or a list of strings"), refused.stderr)
    }

    /// Sentry's minidump endpoint, where asked (--sentry-minidump): Crashpad's multipart to
    /// /api/PROJECT/minidump/?sentry_key=KEY, with the release in a `sentry` field; Sentry's
    /// answer (the event id, as text) kept.
    func testSentryMinidumpEndpoint() throws {
        let (reports, id) = try crashed()
        let sentry = try Collector(
            answers: [["status": 200, "body": "6fe3a5b2c1d04e0f8a9b7c6d5e4f3a2b"]], directory: Self.directory)
        let dsn = "http://publickey@127.0.0.1:\(sentry.port)/42"
        let result = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", reports, "--sentry-dsn", dsn, "--sentry-minidump"])
        XCTAssertTrue(result.stdout.contains("\(id): sent to"), result.stdout + result.stderr)
        let request = sentry.requests.first ?? [:]
        XCTAssertEqual(request["path"] as? String, "/api/42/minidump/?sentry_key=publickey")
        let fields = request["fields"] as? [String: String] ?? [:]
        XCTAssertEqual(fields["sentry"], "{\"release\":\"ledger@2.1\"}")
        XCTAssertEqual(
            ((request["files"] as? [String: Any])?["upload_file_minidump"] as? [String: Any])?["magic"] as? String, "MDMP")
        XCTAssertEqual(try state(reports, id, "sentry-minidump")["server_id"] as? String, "6fe3a5b2c1d04e0f8a9b7c6d5e4f3a2b")
    }

    /// The files a program attached (crashport_attach_file) go to Sentry as event.attachment
    /// items beside the minidump.
    func testAttachmentsGoToSentry() throws {
        let libraries = (try TestSupport.stub() as NSString).deletingLastPathComponent
        let directory = Self.directory + "/attach-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let program = try TestSupport.compile(
            [TestSupport.fixture("api/app.c")], output: directory + "/app",
            flags: ["-O1", "-g", "-pthread", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
        let run = try TestSupport.crashportRun([program, "tell", directory], reports: directory + "/reports")
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let sentry = try Collector(answers: [["status": 200, "body": "{\"id\":\"$EVENT_ID\"}"]], directory: Self.directory)
        _ = try TestSupport.run(
            [
                TestSupport.crashport, "upload", "--reports", run.reportsDirectory, "--sentry-dsn",
                "http://publickey@127.0.0.1:\(sentry.port)/42",
            ])
        let items = sentry.requests.first?["items"] as? [[String: Any]] ?? []
        let attached = items.first { $0["attachment_type"] as? String == "event.attachment" }
        XCTAssertEqual(attached?["filename"] as? String, "app.log", "\(items)")
        let text = try String(contentsOfFile: attached?["saved"] as? String ?? "", encoding: .utf8)
        XCTAssertEqual(text, "started\nconfig loaded\n")
    }

    /// A server that misbehaves: one that drops the connection without answering, one slower
    /// than the timeout (both pending, with the transport's reason), a bare 429 (a minute, the
    /// server's), a redirect (not followed, not retried).
    func testServersThatMisbehave() throws {
        for (answer, extra, expectation) in [
            (["close": true] as [String: Any], [String](), "empty reply"),
            (["status": 200, "delay": 4, "body": "CrashID=bp-late\n"], ["--timeout-ms", "1000"], "timed out"),
        ] {
            let (reports, id) = try crashed()
            let collector = try Collector(answers: [answer], directory: Self.directory)
            let result = try upload(reports, collector.url, extra)
            let recorded = try state(reports, id)
            XCTAssertEqual(recorded["status"] as? String, "pending", result.stdout)
            XCTAssertTrue((recorded["last_error"] as? String ?? "").lowercased().contains(expectation), "\(recorded)")
        }
        let (reports, id) = try crashed()
        let bare = try Collector(answers: [["status": 429]], directory: Self.directory)
        _ = try upload(reports, bare.url)
        let wait = (try state(reports, id)["not_before"] as? Double ?? 0) - Date().timeIntervalSince1970
        XCTAssertTrue((50...60).contains(wait), "a bare 429 is a minute: \(wait)")

        let (moved, movedID) = try crashed()
        let redirecting = try Collector(
            answers: [["status": 302, "headers": ["Location": "https://elsewhere.example/submit"]]], directory: Self.directory)
        let result = try upload(moved, redirecting.url)
        XCTAssertEqual(try state(moved, movedID)["status"] as? String, "failed", result.stdout)
        XCTAssertTrue(result.stdout.contains("a redirect to https://elsewhere.example/submit"), result.stdout)
        XCTAssertEqual(redirecting.requests.count, 1, "not followed")
    }

    /// A report whose minidump.dmp is not a regular file (a FIFO its owner put there) fails at
    /// once with why: it never keeps the upload (and a sidecar's uploads behind it) waiting.
    func testAMinidumpThatIsAFIFOFailsAtOnce() throws {
        let (reports, id) = try crashed()
        let minidump = reports + "/" + id + "/minidump.dmp"
        XCTAssertEqual(unlink(minidump), 0)
        XCTAssertEqual(mkfifo(minidump, 0o600), 0)
        let collector = try Collector(answers: [["status": 200, "body": "CrashID=bp-fifo\n"]], directory: Self.directory)
        let result = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", reports, "--url", collector.url], timeout: 30)
        let entry = try state(reports, id)
        XCTAssertEqual(entry["status"] as? String, "failed", result.stdout + result.stderr)
        XCTAssertTrue((entry["last_error"] as? String ?? "").contains("not a regular file"), "\(entry)")
        XCTAssertTrue(collector.requests.isEmpty)
    }

    /// An attached copy that is not a regular file (a FIFO the report's owner put there) is left
    /// out of the envelope at once, and the report is sent without it.
    func testAnAttachmentThatIsAFIFOIsLeftOut() throws {
        let (reports, id) = try crashed()
        let directory = reports + "/" + id
        // The report may have attachments/ already (its system.log).
        XCTAssertTrue(mkdir(directory + "/attachments", 0o700) == 0 || errno == EEXIST)
        XCTAssertEqual(mkfifo(directory + "/attachments/app.log", 0o600), 0)
        let eventURL = URL(fileURLWithPath: directory + "/event.json")
        var event = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: eventURL)) as? [String: Any])
        event["attachments"] = [["path": "/var/log/app.log", "file": "attachments/app.log"]]
        try JSONSerialization.data(withJSONObject: event).write(to: eventURL)
        let sentry = try Collector(answers: [["status": 200, "body": "{\"id\":\"$EVENT_ID\"}"]], directory: Self.directory)
        let dsn = "http://publickey@127.0.0.1:\(sentry.port)/42"
        let result = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", reports, "--sentry-dsn", dsn], timeout: 30)
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        XCTAssertEqual(try state(reports, id, "sentry")["status"] as? String, "sent", result.stderr + result.stdout)
        XCTAssertEqual(sentry.requests.count, 1)
        let items = sentry.requests.first?["items"] as? [[String: Any]] ?? []
        XCTAssertTrue(items.contains { $0["type"] as? String == "event" }, "\(items)")
        XCTAssertTrue(items.contains { $0["attachment_type"] as? String == "event.minidump" }, "\(items)")
        XCTAssertFalse(items.contains { $0["filename"] as? String == "app.log" }, "left out: \(items)")
    }

    /// Two uploads at once: the second finds the first's lock and sends nothing.
    func testOneUploadAtATime() throws {
        let (reports, id) = try crashed()
        let collector = try Collector(answers: [["status": 200, "body": "CrashID=bp-locked\n"]], directory: Self.directory)
        let lock = open(reports + "/.crashport-upload.lock", O_RDWR | O_CREAT, 0o600)
        XCTAssertEqual(flock(lock, LOCK_EX), 0)
        let blocked = try upload(reports, collector.url)
        XCTAssertTrue(blocked.stdout.contains("another crashport upload is working on"), blocked.stdout)
        XCTAssertTrue(collector.requests.isEmpty)
        close(lock)
        _ = try upload(reports, collector.url)
        XCTAssertEqual(try state(reports, id)["status"] as? String, "sent")
    }

    /// An upload killed mid-queue and run again: every report ends sent; only the one whose
    /// request was in flight can reach the server twice, with the same guid (a collector, and
    /// Sentry by its event id, takes it once).
    func testUploadKilledMidQueueLosesNothing() throws {
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/crash", flags: ["-O1", "-g"])
        let reports = Self.directory + "/queue-\(UUID().uuidString.prefix(6))"
        for _ in 0..<4 { _ = try TestSupport.crashportRun([program, "null"], reports: reports) }
        let ids = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }.sorted()
        XCTAssertEqual(ids.count, 4)
        let collector = try Collector(
            answers: [["status": 200, "delay": 0.5, "body": "CrashID=bp-queue\n"]], directory: Self.directory)
        let first = Process()
        first.executableURL = URL(fileURLWithPath: TestSupport.crashport)
        first.arguments = ["upload", "--reports", reports, "--url", collector.url]
        first.standardOutput = FileHandle.nullDevice
        first.standardError = FileHandle.nullDevice
        try first.run()
        try waitUntil("two requests reach the collector", timeout: 60) { collector.requests.count >= 2 }
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        let second = try upload(reports, collector.url)
        XCTAssertEqual(second.status, .exited(0), second.stderr)
        for id in ids { XCTAssertEqual(try state(reports, id)["status"] as? String, "sent", id) }
        let sent = collector.requests.compactMap { ($0["fields"] as? [String: String])?["crashport_report_id"] }
        XCTAssertEqual(Set(sent), Set(ids))
        XCTAssertLessThanOrEqual(sent.count, ids.count + 1, "\(sent)")
        let guids = collector.requests.compactMap {
            ($0["fields"] as? [String: String]).map { ($0["crashport_report_id"] ?? "", $0["guid"] ?? "") }
        }
        XCTAssertEqual(Set(guids.map { "\($0.0) \($0.1)" }).count, ids.count, "a report sent twice has the same guid")
    }

    /// before_send that hangs (killed after 10 s) or prints something that is not JSON: the
    /// report is not sent, and the reason is kept.
    func testBeforeSendThatHangsOrPrintsGarbage() throws {
        let collector = try Collector(answers: [["status": 200, "body": "CrashID=bp-hook\n"]], directory: Self.directory)
        for (script, expectation) in [
            ("#!/bin/sh\nexec sleep 60\n", "took longer than 10 s"),
            ("#!/bin/sh\ncat >/dev/null\necho garbage\n", "did not answer with a JSON object"),
        ] {
            let (reports, id) = try crashed()
            let hook = Self.directory + "/hook-\(UUID().uuidString.prefix(6)).sh"
            try script.write(toFile: hook, atomically: true, encoding: .utf8)
            chmod(hook, 0o755)
            let result = try TestSupport.run(
                [TestSupport.crashport, "upload", "--reports", reports, "--url", collector.url, "--before-send", hook],
                timeout: 60)
            XCTAssertTrue(result.stdout.contains(expectation), result.stdout)
            XCTAssertEqual(try state(reports, id)["status"] as? String, "failed")
        }
        XCTAssertTrue(collector.requests.isEmpty)
    }

    /// An after_send hook (a real script, which writes what it got to files and then exits 5) is
    /// told of each attempt once its state is recorded: a report sent, with the collector's id;
    /// one the collector refused for good (a 400); one nobody was listening for (to be retried).
    /// Its output is in the upload's; its exit changes neither the state nor the exit status.
    func testAfterSendIsToldOfEachAttempt() throws {
        let directory = Self.directory + "/after-send-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let hook = directory + "/told.sh"
        try """
        #!/bin/sh
        printf '%s|' "$@" >> \(directory)/arguments
        echo >> \(directory)/arguments
        cat >> \(directory)/stdin
        echo >> \(directory)/stdin
        echo "told of $3"
        exit 5
        """.write(toFile: hook, atomically: true, encoding: .utf8)
        chmod(hook, 0o755)
        func told() throws -> (arguments: [String], objects: [[String: Any]]) {
            let arguments = try String(contentsOfFile: directory + "/arguments", encoding: .utf8)
            let stdin = try String(contentsOfFile: directory + "/stdin", encoding: .utf8)
            return (
                arguments.split(separator: "\n").map(String.init),
                try stdin.split(separator: "\n").map {
                    try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
                }
            )
        }

        let (reports, id) = try crashed()
        let collector = try Collector(answers: [["status": 200, "body": "CrashID=bp-told\n"]], directory: Self.directory)
        let sent = try upload(reports, collector.url, ["--after-send", hook])
        XCTAssertEqual(sent.status, .exited(0), "the hook's exit 5 changes nothing: \(sent.stderr)")
        XCTAssertTrue(
            sent.stdout.contains("\(id): sent to \(collector.url) (bp-told)\n\(id): after_send: told of sent\n"), sent.stdout)
        XCTAssertTrue(sent.stdout.contains("\(id): after_send \(hook) exited 5"), sent.stdout)
        XCTAssertEqual(try told().arguments, ["\(id)|\(collector.url)|sent|bp-told|"])
        let success = try told().objects.last ?? [:]
        XCTAssertEqual(success["report_id"] as? String, id)
        XCTAssertEqual(success["report"] as? String, reports + "/" + id)
        XCTAssertEqual(success["result"] as? String, "sent")
        XCTAssertEqual(success["server_id"] as? String, "bp-told")
        XCTAssertEqual(success["destination"] as? String, collector.url)
        XCTAssertEqual(success["attempts"] as? Int, 1)
        XCTAssertEqual(try state(reports, id)["status"] as? String, "sent")
        // Nothing is attempted in the next pass, so the hook is not run.
        _ = try upload(reports, collector.url, ["--after-send", hook, "--now"])
        XCTAssertEqual(try told().arguments.count, 1)

        let (refusedReports, refusedID) = try crashed()
        let refusing = try Collector(answers: [["status": 400, "body": "Discarded=bad_request"]], directory: Self.directory)
        let refused = try upload(refusedReports, refusing.url, ["--after-send", hook])
        XCTAssertEqual(refused.status, .exited(1), refused.stderr)
        XCTAssertEqual(
            try told().arguments.last, "\(refusedID)|\(refusing.url)|failed|HTTP 400: Discarded=bad_request: not retried|")
        let failure = try told().objects.last ?? [:]
        XCTAssertEqual(failure["result"] as? String, "failed")
        XCTAssertEqual(failure["error"] as? String, "HTTP 400: Discarded=bad_request: not retried")
        XCTAssertNil(failure["server_id"])
        XCTAssertEqual(try state(refusedReports, refusedID)["status"] as? String, "failed")

        let (unheardReports, unheardID) = try crashed()
        let nobody = "http://127.0.0.1:\(TestSupport.closedPort())/submit"
        let unheard = try upload(unheardReports, nobody, ["--after-send", hook, "--timeout-ms", "5000"])
        XCTAssertEqual(unheard.status, .exited(0), "to be retried: nothing is lost yet: \(unheard.stderr)")
        let transient = try told().objects.last ?? [:]
        XCTAssertEqual(transient["report_id"] as? String, unheardID)
        XCTAssertEqual(transient["result"] as? String, "retrying")
        XCTAssertTrue((transient["error"] as? String ?? "").lowercased().contains("connect"), "\(transient)")
        XCTAssertNotNil(transient["next_attempt"] as? String, "\(transient)")
        XCTAssertTrue(try told().arguments.last?.hasPrefix("\(unheardID)|\(nobody)|retrying|") == true)
        XCTAssertEqual(try state(unheardReports, unheardID)["status"] as? String, "pending")
    }

    /// crashport upload's exit status: 0 when everything due was sent, or is to be retried; 1
    /// when a report failed for good in this pass (a 413 here), even beside one sent to another
    /// destination; 0 again in the next pass, which has nothing new to lose.
    func testUploadExitsOneWhenAReportIsLost() throws {
        let (reports, _) = try crashed()
        let collector = try Collector(answers: [["status": 200, "body": "CrashID=bp-fine\n"]], directory: Self.directory)
        let fine = try upload(reports, collector.url)
        XCTAssertEqual(fine.status, .exited(0), fine.stderr)

        let (others, other) = try crashed()
        let refusing = try Collector(answers: [["status": 413, "body": "Discarded=too_large"]], directory: Self.directory)
        let both = Self.directory + "/both-\(UUID().uuidString.prefix(6)).toml"
        try "[upload]\nurl = [\"\(collector.url)\", \"\(refusing.url)\"]\n".write(toFile: both, atomically: true, encoding: .utf8)
        let mixed = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", others, "--config", both],
            environment: ["CRASHPORT_UPLOAD_URL": "", "CRASHPORT_SENTRY_DSN": ""])
        XCTAssertEqual(mixed.status, .exited(1), mixed.stderr)
        XCTAssertTrue(mixed.stderr.contains("1 sent, 0 to retry, 1 failed"), mixed.stderr)
        let recorded = try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: others + "/" + other + "/upload.json")))
        let destinations = (recorded as? [String: Any])?["destinations"] as? [String: [String: Any]] ?? [:]
        XCTAssertEqual(destinations["crashpad " + collector.url]?["status"] as? String, "sent", "\(destinations)")
        XCTAssertEqual(destinations["crashpad " + refusing.url]?["status"] as? String, "failed", "\(destinations)")
        let again = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", others, "--config", both, "--now"],
            environment: ["CRASHPORT_UPLOAD_URL": "", "CRASHPORT_SENTRY_DSN": ""])
        XCTAssertEqual(again.status, .exited(0), again.stderr)
        XCTAssertTrue(again.stderr.contains("2 done before"), again.stderr)
    }

    /// The sidecar with a destination configured starts an upload after a client's report,
    /// as the report's owner: the crash arrives at the collector without anyone running upload.
    func testSidecarUploadsAfterAReport() throws {
        let collector = try Collector(answers: [["status": 200, "body": "CrashID=bp-sidecar\n"]], directory: Self.directory)
        let directory = Self.directory + "/sidecar-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let sidecar = try SidecarProcess(
            directory: directory, environment: ["CRASHPORT_UPLOAD_URL": collector.url, "CRASHPORT_SENTRY_DSN": ""])
        defer { sidecar.stop() }
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/crash", flags: ["-O1", "-g"])
        let result = try TestSupport.run(
            [program, "null"], environment: ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(result.status, .signaled(SIGSEGV), result.stderr)
        let id = try sidecar.waitForReports(1)[0].id ?? ""
        try waitUntil("the upload the sidecar started reaches the collector:\n\(sidecar.log)", timeout: 60) {
            collector.requests.count == 1
        }
        try waitUntil("its state is recorded", timeout: 60) {
            (try? state(sidecar.reportsDirectory(), id))?["server_id"] as? String == "bp-sidecar"
        }
        let log = sidecar.reportsDirectory() + "/.crashport-upload.log"
        var info = stat()
        XCTAssertEqual(stat(log, &info), 0)
        XCTAssertEqual(info.st_uid, getuid(), "written with the report owner's ids")
    }

    /// A root sidecar uploads another user's report as that user. The report is written on a
    /// thread reading as the client (its ids, no capabilities), where no child could take the
    /// user's ids: the upload is asked for there and started by the sidecar's own thread.
    /// Before that split, a user's report never left the machine.
    func testRootSidecarUploadsAnotherUsersReportAsThatUser() throws {
        guard getuid() == 0 else { throw XCTSkip("a root sidecar serving another user needs root") }
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let collector = try Collector(answers: [["status": 200, "body": "CrashID=bp-user\n"]], directory: Self.directory)
        let work = Self.directory + "/user-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        chmod(work, 0o755)
        try FileManager.default.copyItem(atPath: try TestSupport.stub(), toPath: work + "/libcrashport.so")
        chmod(work + "/libcrashport.so", 0o755)
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: work + "/crash", flags: ["-O1", "-g"])
        chmod(program, 0o755)
        let sidecar = try SidecarProcess(
            directory: work, environment: ["CRASHPORT_UPLOAD_URL": collector.url, "CRASHPORT_SENTRY_DSN": ""])
        defer { sidecar.stop() }
        chmod(sidecar.reports, 0o711)
        let result = try TestSupport.run([
            "/usr/sbin/runuser", "-u", user.name, "--", "env", "LD_PRELOAD=" + work + "/libcrashport.so",
            "CRASHPORT_SOCKET=" + sidecar.socket, program, "null",
        ])
        // runuser passes the signal on as a shell does: 128 + SIGSEGV.
        XCTAssertEqual(result.status, .exited(128 + SIGSEGV), result.stderr)
        let id = try sidecar.waitForReports(1, uid: user.uid)[0].id ?? ""
        try waitUntil("the user's report reaches the collector:\n\(sidecar.log)", timeout: 60) {
            collector.requests.count == 1
        }
        let reports = sidecar.reportsDirectory(uid: user.uid)
        try waitUntil("its state is recorded", timeout: 60) {
            (try? state(reports, id))?["server_id"] as? String == "bp-user"
        }
        var info = stat()
        XCTAssertEqual(stat(reports + "/.crashport-upload.log", &info), 0)
        XCTAssertEqual(info.st_uid, user.uid, "the upload ran as the report's owner")
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
            [TestSupport.crashport, "upload", "--reports", reports],
            environment: ["CRASHPORT_UPLOAD_URL": "", "CRASHPORT_SENTRY_DSN": ""])
        XCTAssertEqual(none.status, .exited(64), none.stderr)
        XCTAssertTrue(none.stderr.contains("no destination"), none.stderr)
        for bad in ["ftp://example.invalid/x", "not a url", "http://"] {
            let result = try upload(reports, bad)
            XCTAssertEqual(result.status, .exited(64), "\(bad): \(result.stderr)")
        }
        let dsn = try TestSupport.run(
            [TestSupport.crashport, "upload", "--reports", reports, "--sentry-dsn", "https://sentry.example/42"])
        XCTAssertEqual(dsn.status, .exited(64), dsn.stderr)
        XCTAssertTrue(dsn.stderr.contains("invalid Sentry DSN"), dsn.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: reports + "/" + id + "/upload.json"))
    }
}
