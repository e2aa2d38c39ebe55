// End-to-end: `crashport upload` to an OpenTelemetry collector over OTLP/HTTP. A real crash
// reported by the real watcher, sent over real HTTP to a receiver on 127.0.0.1 started by the
// test (Tests/Fixtures/otlp/receiver.py: it decodes each request with OpenTelemetry's own
// protobuf definitions, from PyPI's opentelemetry-proto, which tools/fetch-validators installs,
// and answers as told); what it decoded and the state crashport keeps beside the report are read
// back after each pass.

import Foundation
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// An OTLP/HTTP logs receiver on 127.0.0.1, answering `answers` in order (the last one repeated).
final class OTLPReceiver {
    let process = Process()
    let port: Int
    let log: String

    static let packages = TestSupport.repositoryRoot + "/tools/.cache/otlp"

    init(answers: [[String: Any]], directory: String) throws {
        guard FileManager.default.fileExists(atPath: Self.packages + "/opentelemetry/proto") else {
            throw TestFailure(
                "opentelemetry-proto is not in tools/.cache/otlp: run tools/fetch-validators (it decodes what crashport sends)")
        }
        let answersPath = directory + "/answers-\(UUID().uuidString.prefix(6)).json"
        log = directory + "/requests-\(UUID().uuidString.prefix(6)).jsonl"
        try JSONSerialization.data(withJSONObject: answers).write(to: URL(fileURLWithPath: answersPath))
        let output = Pipe()
        let errors = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", TestSupport.fixture("otlp/receiver.py"), answersPath, log]
        process.standardOutput = output
        process.standardError = errors
        var environment = ProcessInfo.processInfo.environment
        environment["PYTHONPATH"] = Self.packages
        process.environment = environment
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            let why = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw TestFailure("the receiver did not start: \(line)\(why)")
        }
        self.port = port
    }

    /// The base endpoint, as OTEL_EXPORTER_OTLP_ENDPOINT gives it.
    var endpoint: String { "http://127.0.0.1:\(port)" }
    var logsURL: String { endpoint + "/v1/logs" }

    /// The requests it got, as it decoded them.
    var requests: [[String: Any]] {
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }
}

/// One decoded request's parts, protobuf's JSON form read back.
struct DecodedLogs {
    var resource: [String: Any] = [:]
    var scope: [String: Any] = [:]
    var records: [[String: Any]] = []

    init(_ request: [String: Any]) {
        let decoded = request["request"] as? [String: Any] ?? [:]
        let resourceLogs = (decoded["resourceLogs"] as? [[String: Any]])?.first ?? [:]
        resource = Self.attributes((resourceLogs["resource"] as? [String: Any])?["attributes"])
        let scopeLogs = (resourceLogs["scopeLogs"] as? [[String: Any]])?.first ?? [:]
        scope = scopeLogs["scope"] as? [String: Any] ?? [:]
        records = scopeLogs["logRecords"] as? [[String: Any]] ?? []
    }

    /// KeyValues as a dictionary of their plain values (an intValue as its decimal string).
    static func attributes(_ list: Any?) -> [String: Any] {
        var result: [String: Any] = [:]
        for pair in list as? [[String: Any]] ?? [] {
            guard let key = pair["key"] as? String, let value = pair["value"] as? [String: Any] else { continue }
            result[key] = value["stringValue"] ?? value["intValue"] ?? value["boolValue"] ?? value["arrayValue"] ?? value
        }
        return result
    }

    var record: [String: Any] { records.first ?? [:] }
    var recordAttributes: [String: Any] { Self.attributes(record["attributes"]) }
}

final class OTLPUploadTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("otlp-upload")

    /// A fresh reports directory holding one real crash report; its id.
    func crashed() throws -> (reports: String, id: String) { try UploadTests.crashed(in: Self.directory) }

    /// `crashport upload` with only these OpenTelemetry variables (and no other destination,
    /// whatever the test's own environment holds).
    func upload(_ reports: String, _ variables: [String: String], _ extra: [String] = []) throws -> RunResult {
        var environment = [
            "CRASHPORT_UPLOAD_URL": "", "CRASHPORT_SENTRY_DSN": "", "CRASHPORT_CONFIG": "", "OTEL_EXPORTER_OTLP_ENDPOINT": "",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "", "OTEL_EXPORTER_OTLP_PROTOCOL": "", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "",
            "OTEL_EXPORTER_OTLP_HEADERS": "", "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "", "OTEL_EXPORTER_OTLP_TIMEOUT": "",
            "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT": "", "OTEL_EXPORTER_OTLP_COMPRESSION": "",
            "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION": "", "OTEL_SERVICE_NAME": "", "OTEL_RESOURCE_ATTRIBUTES": "",
        ]
        environment.merge(variables) { $1 }
        return try TestSupport.run([TestSupport.crashport, "upload", "--reports", reports] + extra, environment: environment)
    }

    /// The report's upload state for one receiver.
    func state(_ reports: String, _ id: String, _ receiver: OTLPReceiver) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: reports + "/" + id + "/upload.json"))
        let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let destinations = json?["destinations"] as? [String: Any] ?? [:]
        return destinations["otlp " + receiver.logsURL] as? [String: Any] ?? [:]
    }

    /// OTEL_EXPORTER_OTLP_ENDPOINT alone sends the crash as one log record, protobuf to
    /// /v1/logs, which OpenTelemetry's own definitions decode, byte for byte as their encoder
    /// makes it: FATAL, event_name app.crash, the crash's time, the exception with the crashed
    /// thread's real frames, crashport's signature and fingerprint; the crashed process as the
    /// resource. Recorded as sent with no server id, never sent again. The headers, the service
    /// name and the resource attributes from the environment arrive too.
    func testACrashIsOneLogRecord() throws {
        let (reports, id) = try crashed()
        let receiver = try OTLPReceiver(answers: [["status": 200]], directory: Self.directory)
        let before = Date().timeIntervalSince1970
        let result = try upload(reports, ["OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        XCTAssertTrue(result.stdout.contains("\(id): sent to \(receiver.logsURL)\n"), result.stdout)
        guard let request = receiver.requests.first else { return XCTFail("nothing arrived: \(result.stdout)") }
        XCTAssertNil(request["error"], "\(request)")
        XCTAssertEqual(request["path"] as? String, "/v1/logs")
        XCTAssertEqual(request["canonical"] as? Bool, true, "the official encoder makes the same bytes of it")
        let headers = request["headers"] as? [String: String] ?? [:]
        XCTAssertEqual(headers["content-type"], "application/x-protobuf")
        XCTAssertNil(headers["content-encoding"], "no compression unless asked")

        let logs = DecodedLogs(request)
        XCTAssertEqual(logs.records.count, 1)
        XCTAssertEqual(logs.scope["name"] as? String, "crashport")
        XCTAssertNotNil(logs.scope["version"])
        let record = logs.record
        XCTAssertEqual(record["severityNumber"] as? String, "SEVERITY_NUMBER_FATAL")
        XCTAssertEqual(record["severityText"] as? String, "FATAL")
        XCTAssertEqual(record["eventName"] as? String, "app.crash")
        let body = (record["body"] as? [String: Any])?["stringValue"] as? String ?? ""
        XCTAssertTrue(body.hasPrefix("SIGSEGV") && body.contains("crash_null"), body)
        // The crash's time, before the upload's; observed when the upload read it.
        let time = Double(record["timeUnixNano"] as? String ?? "0")! / 1e9
        let observed = Double(record["observedTimeUnixNano"] as? String ?? "0")! / 1e9
        XCTAssertTrue(time > before - 120 && time <= before, "\(time) vs \(before)")
        XCTAssertTrue(observed >= before - 1 && observed >= time, "\(observed)")

        let attributes = logs.recordAttributes
        XCTAssertEqual(attributes["event.name"] as? String, "app.crash")
        XCTAssertEqual(attributes["exception.type"] as? String, "SIGSEGV")
        XCTAssertTrue((attributes["exception.message"] as? String ?? "").contains("SEGV_MAPERR"), "\(attributes)")
        let stack = (attributes["exception.stacktrace"] as? String ?? "").split(separator: "\n").map(String.init)
        XCTAssertEqual(
            Array(stack.prefix(4).map { $0.split(separator: " ").dropFirst(3).first.map(String.init) ?? "" }),
            ["crash_null", "level_two", "level_one", "main"], "\(stack)")
        XCTAssertTrue(stack.first?.hasPrefix("#0  0x") == true && stack.first?.contains("crash.c:") == true, "\(stack)")
        XCTAssertEqual(attributes["crashport.report_id"] as? String, id)
        XCTAssertEqual(attributes["crashport.signal"] as? String, "SIGSEGV")
        XCTAssertEqual((attributes["crashport.fingerprint"] as? String)?.count, 16)
        XCTAssertTrue((attributes["crashport.signature"] as? String ?? "").contains("crash_null"), "\(attributes)")

        let resource = logs.resource
        let event =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: reports + "/" + id + "/event.json"))) as? [String: Any]
        let process = event?["process"] as? [String: Any] ?? [:]
        XCTAssertEqual(resource["service.name"] as? String, "crash")
        XCTAssertEqual(resource["service.version"] as? String, "ledger@2.1")
        XCTAssertEqual(resource["process.pid"] as? String, "\(process["pid"] as? Int ?? -1)")
        XCTAssertEqual(resource["process.executable.name"] as? String, "crash")
        XCTAssertEqual(resource["process.executable.path"] as? String, process["executable"] as? String)
        XCTAssertEqual(resource["host.name"] as? String, ProcessInfo.processInfo.hostName)
        XCTAssertEqual(resource["os.type"] as? String, "linux")
        XCTAssertNil(resource["process.command_args"], "the arguments only with --send-pii")

        let recorded = try state(reports, id, receiver)
        XCTAssertEqual(recorded["status"] as? String, "sent")
        XCTAssertNil(recorded["server_id"])
        let again = try upload(reports, ["OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint], ["--now"])
        XCTAssertTrue(again.stderr.contains("1 done before"), again.stderr)
        XCTAssertEqual(receiver.requests.count, 1, "a report recorded as sent is never sent again")
        let list = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports])
        XCTAssertTrue(list.stdout.contains("otlp: sent"), list.stdout)

        // The environment's headers (percent-decoded), service name and resource attributes:
        // OTEL_SERVICE_NAME names the service; the crashed process's own facts win over the
        // environment's; the rest of the environment's fill in. --send-pii sends the arguments.
        let (others, _) = try crashed()
        let second = try OTLPReceiver(answers: [["status": 200]], directory: Self.directory)
        let sent = try upload(
            others,
            [
                "OTEL_EXPORTER_OTLP_ENDPOINT": second.endpoint, "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s3cr%20t , x-team=ledger",
                "OTEL_SERVICE_NAME": "ledger-api",
                "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=production,process.pid=1,k8s.cluster.name=east%2C1",
            ], ["--send-pii"])
        XCTAssertEqual(sent.status, .exited(0), sent.stderr)
        guard let edited = second.requests.first else { return XCTFail("nothing arrived: \(sent.stdout)") }
        let editedHeaders = edited["headers"] as? [String: String] ?? [:]
        XCTAssertEqual(editedHeaders["api-key"], "s3cr t")
        XCTAssertEqual(editedHeaders["x-team"], "ledger")
        let merged = DecodedLogs(edited).resource
        XCTAssertEqual(merged["service.name"] as? String, "ledger-api")
        XCTAssertEqual(merged["deployment.environment.name"] as? String, "production")
        XCTAssertEqual(merged["k8s.cluster.name"] as? String, "east,1")
        XCTAssertNotEqual(merged["process.pid"] as? String, "1", "the crashed process's pid wins")
        let arguments = (merged["process.command_args"] as? [String: Any])?["values"] as? [[String: Any]] ?? []
        XCTAssertEqual(arguments.compactMap { $0["stringValue"] as? String }.last, "null", "\(merged)")
    }

    /// http/json (OTEL_EXPORTER_OTLP_PROTOCOL), which protobuf's own JSON parser reads into the
    /// same message, gzipped (OTEL_EXPORTER_OTLP_COMPRESSION), to a logs endpoint used as it is
    /// (OTEL_EXPORTER_OTLP_LOGS_ENDPOINT); then the flags, which the environment does not beat.
    func testJSONGzipAndTheLogsEndpoint() throws {
        let (reports, id) = try crashed()
        let receiver = try OTLPReceiver(answers: [["status": 200]], directory: Self.directory)
        let result = try upload(
            reports,
            [
                "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": receiver.endpoint + "/ingest/logs",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9/ignored",
            ])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        guard let request = receiver.requests.first else { return XCTFail("nothing arrived: \(result.stdout)") }
        XCTAssertNil(request["error"], "\(request)")
        XCTAssertEqual(request["path"] as? String, "/ingest/logs")
        let headers = request["headers"] as? [String: String] ?? [:]
        XCTAssertEqual(headers["content-type"], "application/json")
        XCTAssertEqual(headers["content-encoding"], "gzip")
        let logs = DecodedLogs(request)
        XCTAssertEqual(logs.record["eventName"] as? String, "app.crash")
        XCTAssertEqual(logs.record["severityNumber"] as? String, "SEVERITY_NUMBER_FATAL")
        XCTAssertEqual(logs.recordAttributes["crashport.report_id"] as? String, id)
        XCTAssertNotNil(logs.resource["process.pid"])

        let (others, _) = try crashed()
        let flagged = try OTLPReceiver(answers: [["status": 200]], directory: Self.directory)
        let byFlags = try upload(
            others, ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"],
            ["--otlp-endpoint", flagged.endpoint + "/", "--otlp-protocol", "http/json"])
        XCTAssertEqual(byFlags.status, .exited(0), byFlags.stderr)
        XCTAssertEqual(flagged.requests.first?["path"] as? String, "/v1/logs")
        XCTAssertEqual((flagged.requests.first?["headers"] as? [String: String])?["content-type"], "application/json")

        // grpc is not what crashport speaks: said, and nothing sent.
        let grpc = try upload(
            others, ["OTEL_EXPORTER_OTLP_ENDPOINT": flagged.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], ["--now"])
        XCTAssertEqual(grpc.status, .exited(64), grpc.stderr)
        XCTAssertTrue(grpc.stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL: grpc: crashport sends OTLP over HTTP only"), grpc.stderr)
    }

    /// A collector that misbehaves, each time with a clear line and the report kept: a 429 with
    /// Retry-After (pending, the server's wait kept by --now, then sent once it is over), a 500
    /// (pending, sent by --now), one that stalls past OTEL_EXPORTER_OTLP_TIMEOUT and one that
    /// closes the connection (both pending, with why), a 400 (failed for good, with the
    /// collector's own message), a partial success that rejects the record (failed, with its
    /// message).
    func testACollectorThatMisbehaves() throws {
        let (reports, id) = try crashed()
        func attempt(
            _ answers: [[String: Any]], _ variables: [String: String] = [:], extra: [String] = []
        ) throws -> (
            OTLPReceiver, RunResult, [String: Any]
        ) {
            let receiver = try OTLPReceiver(answers: answers, directory: Self.directory)
            let result = try upload(reports, ["OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint].merging(variables) { $1 }, extra)
            return (receiver, result, try state(reports, id, receiver))
        }

        let (limited, limitedRun, limitedState) = try attempt([
            ["status": 429, "headers": ["Retry-After": "2"], "message": "slow down"], ["status": 200],
        ])
        XCTAssertEqual(limitedState["status"] as? String, "pending", limitedRun.stdout)
        XCTAssertTrue(
            limitedRun.stdout.contains("\(id): \(limited.logsURL): HTTP 429: slow down; attempt 1 of 6"), limitedRun.stdout)
        let early = try upload(reports, ["OTEL_EXPORTER_OTLP_ENDPOINT": limited.endpoint], ["--now"])
        XCTAssertTrue(early.stdout.contains("asked for no request before"), early.stdout)
        XCTAssertEqual(limited.requests.count, 1, "Retry-After is the server's: --now keeps it")
        Thread.sleep(forTimeInterval: 2.5)
        let later = try upload(reports, ["OTEL_EXPORTER_OTLP_ENDPOINT": limited.endpoint], ["--now"])
        XCTAssertTrue(later.stdout.contains("\(id): sent to \(limited.logsURL)"), later.stdout)
        XCTAssertEqual(try state(reports, id, limited)["attempts"] as? Int, 2)

        let (failing, failingRun, failingState) = try attempt([["status": 500, "message": "storage down"], ["status": 200]])
        XCTAssertEqual(failingState["status"] as? String, "pending", failingRun.stdout)
        XCTAssertTrue(failingRun.stdout.contains("HTTP 500: storage down; attempt 1 of 6, next after"), failingRun.stdout)
        let retried = try upload(reports, ["OTEL_EXPORTER_OTLP_ENDPOINT": failing.endpoint], ["--now"])
        XCTAssertTrue(retried.stdout.contains("\(id): sent to \(failing.logsURL)"), retried.stdout)

        let started = Date()
        let (_, stalledRun, stalledState) = try attempt([["status": 200, "delay": 5]], ["OTEL_EXPORTER_OTLP_TIMEOUT": "1000"])
        XCTAssertLessThan(Date().timeIntervalSince(started), 4.5, "bounded by the timeout")
        XCTAssertEqual(stalledState["status"] as? String, "pending", stalledRun.stdout)
        XCTAssertTrue((stalledState["last_error"] as? String ?? "").lowercased().contains("timed out"), "\(stalledState)")

        let (_, closedRun, closedState) = try attempt([["close": true]])
        XCTAssertEqual(closedState["status"] as? String, "pending", closedRun.stdout)
        XCTAssertTrue((closedState["last_error"] as? String ?? "").lowercased().contains("empty reply"), "\(closedState)")

        for json in [false, true] {
            let (refusing, refusedRun, refusedState) = try attempt(
                [["status": 400, "message": "log record has no resource"]],
                json ? ["OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"] : [:])
            XCTAssertEqual(refusedRun.status, .exited(1), refusedRun.stderr)
            XCTAssertEqual(refusedState["status"] as? String, "failed")
            XCTAssertTrue(
                refusedRun.stdout.contains("\(id): \(refusing.logsURL): HTTP 400: log record has no resource: not retried"),
                refusedRun.stdout)
        }

        let (_, rejectedRun, rejectedState) = try attempt([["status": 200, "rejected": 1, "message": "too old"]])
        XCTAssertEqual(rejectedState["status"] as? String, "failed", rejectedRun.stdout)
        XCTAssertTrue(
            rejectedRun.stdout.contains("the collector rejected 1 log record(s): too old: not retried"), rejectedRun.stdout)

        // Nothing lost: the report is still there, whole.
        XCTAssertTrue(FileManager.default.fileExists(atPath: reports + "/" + id + "/event.json"))
        XCTAssertTrue(FileManager.default.fileExists(atPath: reports + "/" + id + "/minidump.dmp"))
    }

    /// crashport run with OTEL_EXPORTER_OTLP_ENDPOINT in its environment (the program's own
    /// telemetry setting) starts the upload in the background, as any destination does.
    func testCrashportRunUploadsInTheBackground() throws {
        let receiver = try OTLPReceiver(answers: [["status": 200]], directory: Self.directory)
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/crash", flags: ["-O1", "-g"])
        let run = try TestSupport.crashportRun(
            [program, "null"], reports: Self.directory + "/background-\(UUID().uuidString.prefix(6))",
            environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "CRASHPORT_UPLOAD_URL": "", "CRASHPORT_SENTRY_DSN": "",
            ])
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        XCTAssertTrue(run.result.stderr.contains("crashport: uploading in the background (log: "), run.result.stderr)
        try waitUntil("the background upload reaches the receiver", timeout: 60) { receiver.requests.count == 1 }
        try waitUntil("its state is recorded", timeout: 60) {
            (try? state(run.reportsDirectory, run.reportIDs[0], receiver))?["status"] as? String == "sent"
        }
    }

    /// Consent holds for a collector as for any destination: under ask the report waits for
    /// crashport send. A before_send hook sees the request as OTLP/JSON: what it edits is what
    /// the collector gets (in protobuf), one that exits non-zero drops the report.
    func testConsentAndBeforeSend() throws {
        let (reports, id) = try crashed()
        let receiver = try OTLPReceiver(answers: [["status": 200]], directory: Self.directory)
        let variables = ["OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint]
        XCTAssertEqual(
            try TestSupport.run([TestSupport.crashport, "consent", "ask", "--reports", reports]).status, .exited(0))
        let held = try upload(reports, variables)
        XCTAssertTrue(held.stdout.contains("\(id): awaiting consent"), held.stdout)
        XCTAssertTrue(receiver.requests.isEmpty)

        let hook = Self.directory + "/edit-\(UUID().uuidString.prefix(6)).sh"
        try "#!/bin/sh\nsed 's/\"FATAL\"/\"FATAL (edited)\"/'\n".write(toFile: hook, atomically: true, encoding: .utf8)
        chmod(hook, 0o755)
        var environment = variables
        environment.merge(["CRASHPORT_UPLOAD_URL": "", "CRASHPORT_SENTRY_DSN": "", "CRASHPORT_CONFIG": ""]) { $1 }
        let sent = try TestSupport.run(
            [TestSupport.crashport, "send", id, "--reports", reports, "--before-send", hook], environment: environment)
        XCTAssertTrue(sent.stdout.contains("\(id): sent to \(receiver.logsURL)"), sent.stdout + sent.stderr)
        guard let request = receiver.requests.first else { return XCTFail("nothing arrived: \(sent.stdout)") }
        XCTAssertEqual(request["canonical"] as? Bool, true)
        XCTAssertEqual(DecodedLogs(request).record["severityText"] as? String, "FATAL (edited)")

        let (others, other) = try crashed()
        let drop = Self.directory + "/drop-\(UUID().uuidString.prefix(6)).sh"
        try "#!/bin/sh\ncat > /dev/null\nexit 3\n".write(toFile: drop, atomically: true, encoding: .utf8)
        chmod(drop, 0o755)
        let dropped = try upload(others, variables, ["--before-send", drop])
        XCTAssertTrue(dropped.stdout.contains("\(other): \(receiver.logsURL): dropped by before_send"), dropped.stdout)
        XCTAssertEqual(try state(others, other, receiver)["status"] as? String, "failed")
        XCTAssertEqual(receiver.requests.count, 1)
    }
}
