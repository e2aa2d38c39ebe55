// The OpenTelemetry destination without a network: the protobuf encoder against bytes worked out
// by hand from opentelemetry-proto's field numbers, the JSON form read back, a hand-made Event
// (container and pod included) mapped to its record and resource, the OTEL_* variables and
// crashport.toml's otlp_* keys resolved, a collector's answers read.

import Foundation
import ReportModel
import Store
import TestSupport
import Upload
import XCTest

final class OTLPTests: XCTestCase {
    // MARK: the encoder

    /// One record with one attribute, byte for byte: ExportLogsServiceRequest.resource_logs (1)
    /// → ResourceLogs.resource (1) → Resource.attributes (1), ResourceLogs.scope_logs (2) →
    /// ScopeLogs.scope (1), ScopeLogs.log_records (2) → LogRecord's time_unix_nano (1, fixed64),
    /// severity_number (2), severity_text (3), body (5), attributes (6),
    /// observed_time_unix_nano (11, fixed64), event_name (12).
    func testProtobufBytesByHand() {
        var record = OTLPLogRecord()
        record.timeUnixNano = 0x0102_0304_0506_0708
        record.observedTimeUnixNano = 1
        record.severityNumber = 21
        record.severityText = "FATAL"
        record.body = .string("x")
        record.attributes = [OTLPAttribute("n", .int(-1))]
        record.eventName = "app.crash"
        let request = OTLPLogsRequest(resourceLogs: [
            .init(
                resource: [OTLPAttribute("k", .string(""))],
                scopeLogs: [.init(scopeName: "c", scopeVersion: "1", logRecords: [record])])
        ])
        // KeyValue{key "k", value AnyValue{string_value ""}}: an empty string is still set.
        let resourceAttribute: [UInt8] = [0x0A, 0x01, 0x6B, 0x12, 0x02, 0x0A, 0x00]
        let resource: [UInt8] = [0x0A, UInt8(resourceAttribute.count)] + resourceAttribute
        let scope: [UInt8] = [0x0A, 0x01, 0x63, 0x12, 0x01, 0x31]
        // int_value -1: the 64-bit two's complement as a ten-byte varint.
        let minusOne: [UInt8] = [0x18] + [UInt8](repeating: 0xFF, count: 9) + [0x01]
        let attribute: [UInt8] = [0x0A, 0x01, 0x6E, 0x12, UInt8(minusOne.count)] + minusOne
        var logRecord: [UInt8] = [0x09, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01]
        logRecord += [0x10, 21]
        logRecord += [0x1A, 0x05] + Array("FATAL".utf8)
        logRecord += [0x2A, 0x03, 0x0A, 0x01, 0x78]
        logRecord += [0x32, UInt8(attribute.count)] + attribute
        logRecord += [0x59, 0x01, 0, 0, 0, 0, 0, 0, 0]
        logRecord += [0x62, 0x09] + Array("app.crash".utf8)
        let scopeLogs: [UInt8] = [0x0A, UInt8(scope.count)] + scope + [0x12, UInt8(logRecord.count)] + logRecord
        let resourceLogs: [UInt8] = [0x0A, UInt8(resource.count)] + resource + [0x12, UInt8(scopeLogs.count)] + scopeLogs
        XCTAssertEqual(request.protobuf, [0x0A, UInt8(resourceLogs.count)] + resourceLogs)
    }

    /// Every kind of AnyValue through the JSON form and back: lowerCamelCase names, int64 as a
    /// string, bytes as base64; the proto names are read too.
    func testJSONFormReadsBack() throws {
        var record = OTLPLogRecord()
        record.timeUnixNano = 1_795_994_390_704_000_000
        record.severityNumber = 17
        record.severityText = "ERROR"
        record.body = .keyValues([OTLPAttribute("nested", .array([.bool(true), .double(1.5), .bytes([0, 255])]))])
        record.attributes = [OTLPAttribute("big", .int(Int64.min)), OTLPAttribute("empty", .string(""))]
        record.eventName = "exception"
        let request = OTLPLogsRequest(resourceLogs: [
            .init(
                resource: [OTLPAttribute("service.name", .string("s"))],
                scopeLogs: [.init(scopeName: "crashport", logRecords: [record])])
        ])
        let text = String(decoding: try JSONObject.data(request.json), as: UTF8.self)
        XCTAssertTrue(text.contains(#""timeUnixNano":"1795994390704000000""#), text)
        XCTAssertTrue(text.contains(#""intValue":"-9223372036854775808""#), text)
        XCTAssertTrue(text.contains(#""bytesValue":"AP8=""#), text)
        XCTAssertTrue(text.contains(#""severityNumber":17"#), text)
        XCTAssertFalse(text.contains("observedTimeUnixNano"), "a default is left out")
        let back = try OTLPLogsRequest(json: try XCTUnwrap(JSONObject.parseObject(Array(text.utf8))))
        XCTAssertEqual(back, request)

        let protoNames = try OTLPLogsRequest(json: [
            "resource_logs": [["scope_logs": [["log_records": [["time_unix_nano": 5, "event_name": "e"]]]]]]
        ])
        XCTAssertEqual(protoNames.resourceLogs.first?.scopeLogs.first?.logRecords.first?.timeUnixNano, 5)
        XCTAssertThrowsError(try OTLPLogsRequest(json: ["resourceLogs": "no"]))
        XCTAssertThrowsError(
            try OTLPLogsRequest(json: [
                "resourceLogs": [["resource": ["attributes": [["key": "k", "value": ["intValue": "x"]]]]]]
            ]))
    }

    // MARK: the mapping

    func event() -> Event {
        var event = Event()
        event.id = "20261129T120000.000Z-42-abcd"
        event.kind = .crash
        event.timestamp = "2026-11-29T12:00:00.250Z"
        event.title = "SIGSEGV: segmentation fault at 0x0 in parse (parse.c:7)"
        event.release = "ledger@2.1"
        event.signature = "parse | main"
        event.fingerprint = "0123456789abcdef"
        event.signal = SignalRecord(
            number: 11, name: "SIGSEGV", code: 1, codeName: "SEGV_MAPERR", description: "segmentation fault")
        var process = ProcessInfoRecord(
            pid: ProcessID(42), executable: "/home/alice/bin/ledger", arguments: ["/home/alice/bin/ledger", "--secret"])
        process.unit = "ledger@blue.service"
        process.container = "3f2a9c"
        process.containerName = "api"
        process.containerImage = "registry.example/ledger:2.1"
        process.containerRuntime = "containerd"
        process.pod = PodRecord(uid: "7c1d-uid", name: "ledger-5d8f", namespace: "payments")
        event.process = process
        var frame = FrameRecord()
        frame.index = 0
        frame.pc = HexAddress(0x5555_0000_1234)
        frame.function = "parse"
        frame.file = "/home/alice/src/parse.c"
        frame.line = 7
        frame.module = "/home/alice/bin/ledger"
        frame.moduleOffset = HexAddress(0x1234)
        var caller = FrameRecord()
        caller.index = 1
        caller.function = "main"
        var thread = ThreadRecord()
        thread.tid = ThreadID(43)
        thread.crashed = true
        thread.frames = [frame, caller]
        event.threads = [thread]
        return event
    }

    func attributes(_ list: [OTLPAttribute]) -> [String: OTLPValue] {
        Dictionary(list.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    /// A crash in a pod's container: FATAL, app.crash, the exception and its stack as text; the
    /// resource names the systemd service (template and instance), the process, its container
    /// and its pod; home directories' user names and the arguments stay here by default.
    func testACrashInAPod() throws {
        let options = OTLPEvent.Options(crashportVersion: "0.13.0", observedTimeUnixNano: 7, hostName: "node-3")
        let request = OTLPEvent.request(for: event(), reportID: "r1", options: options)
        let resourceLogs = try XCTUnwrap(request.resourceLogs.first)
        let scopeLogs = try XCTUnwrap(resourceLogs.scopeLogs.first)
        XCTAssertEqual(scopeLogs.scopeName, "crashport")
        XCTAssertEqual(scopeLogs.scopeVersion, "0.13.0")
        let record = try XCTUnwrap(scopeLogs.logRecords.first)
        XCTAssertEqual(record.timeUnixNano, 1_795_953_600_250_000_000)
        XCTAssertEqual(record.observedTimeUnixNano, 7)
        XCTAssertEqual(record.severityNumber, 21)
        XCTAssertEqual(record.severityText, "FATAL")
        XCTAssertEqual(record.eventName, "app.crash")
        XCTAssertEqual(record.body, .string("SIGSEGV: segmentation fault at 0x0 in parse (parse.c:7)"))
        let recordAttributes = attributes(record.attributes)
        XCTAssertEqual(recordAttributes["exception.type"], .string("SIGSEGV"))
        XCTAssertEqual(recordAttributes["exception.message"], .string("segmentation fault"))
        XCTAssertEqual(
            recordAttributes["exception.stacktrace"],
            .string("#0  0x0000555500001234 in parse at ~/src/parse.c:7 (ledger+0x1234)\n#1  main"))
        XCTAssertEqual(recordAttributes["crashport.signature"], .string("parse | main"))
        XCTAssertEqual(recordAttributes["crashport.fingerprint"], .string("0123456789abcdef"))
        XCTAssertEqual(recordAttributes["crashport.report_id"], .string("r1"))
        XCTAssertEqual(recordAttributes["crashport.signal"], .string("SIGSEGV"))
        XCTAssertEqual(recordAttributes["thread.id"], .int(43))

        let resource = attributes(resourceLogs.resource)
        XCTAssertEqual(resource["service.name"], .string("ledger"))
        XCTAssertEqual(resource["service.instance.id"], .string("blue"))
        XCTAssertEqual(resource["service.version"], .string("ledger@2.1"))
        XCTAssertEqual(resource["host.name"], .string("node-3"))
        XCTAssertEqual(resource["os.type"], .string("linux"))
        XCTAssertEqual(resource["process.pid"], .int(42))
        XCTAssertEqual(resource["process.executable.name"], .string("ledger"))
        XCTAssertEqual(resource["process.executable.path"], .string("~/bin/ledger"))
        XCTAssertNil(resource["process.command_args"])
        XCTAssertEqual(resource["container.id"], .string("3f2a9c"))
        XCTAssertEqual(resource["container.name"], .string("api"))
        XCTAssertEqual(resource["container.image.name"], .string("registry.example/ledger:2.1"))
        XCTAssertEqual(resource["container.runtime"], .string("containerd"))
        XCTAssertEqual(resource["k8s.pod.uid"], .string("7c1d-uid"))
        XCTAssertEqual(resource["k8s.pod.name"], .string("ledger-5d8f"))
        XCTAssertEqual(resource["k8s.namespace.name"], .string("payments"))
        XCTAssertEqual(resource["k8s.container.name"], .string("api"))

        var private_ = options
        private_.sendPII = true
        let withPII = attributes(OTLPEvent.request(for: event(), reportID: "r1", options: private_).resourceLogs[0].resource)
        XCTAssertEqual(withPII["process.command_args"], .array([.string("/home/alice/bin/ledger"), .string("--secret")]))
        XCTAssertEqual(withPII["process.executable.path"], .string("/home/alice/bin/ledger"))
    }

    /// The environment's resource: OTEL_SERVICE_NAME, else its service.name, name the service;
    /// crashport's facts about the process win over the rest of the same key; the others fill in.
    func testTheEnvironmentsResource() {
        var options = OTLPEvent.Options(crashportVersion: "1", observedTimeUnixNano: 1)
        options.resourceAttributes = [
            OTLPAttribute("service.name", .string("from-attributes")), OTLPAttribute("k8s.pod.name", .string("stale")),
            OTLPAttribute("k8s.cluster.name", .string("east")),
        ]
        var resource = attributes(OTLPEvent.request(for: event(), reportID: "r", options: options).resourceLogs[0].resource)
        XCTAssertEqual(resource["service.name"], .string("from-attributes"))
        XCTAssertEqual(resource["k8s.pod.name"], .string("ledger-5d8f"))
        XCTAssertEqual(resource["k8s.cluster.name"], .string("east"))
        options.serviceName = "ledger-api"
        resource = attributes(OTLPEvent.request(for: event(), reportID: "r", options: options).resourceLogs[0].resource)
        XCTAssertEqual(resource["service.name"], .string("ledger-api"))

        // Without a unit: the executable's name; a handled error is ERROR, event exception.
        var handled = event()
        handled.process?.unit = "session-2.scope"
        handled.kind = .error
        handled.exception = ExceptionRecord(type: "ParseError", message: "bad header", handled: true)
        let request = OTLPEvent.request(
            for: handled, reportID: "r", options: OTLPEvent.Options(crashportVersion: "1", observedTimeUnixNano: 1))
        XCTAssertEqual(attributes(request.resourceLogs[0].resource)["service.name"], .string("ledger"))
        let record = request.resourceLogs[0].scopeLogs[0].logRecords[0]
        XCTAssertEqual(record.severityNumber, 17)
        XCTAssertEqual(record.severityText, "ERROR")
        XCTAssertEqual(record.eventName, "exception")
        XCTAssertEqual(attributes(record.attributes)["exception.type"], .string("ParseError"))
        XCTAssertEqual(attributes(record.attributes)["exception.message"], .string("bad header"))
    }

    // MARK: configuration

    func resolve(_ flags: UploadFlags, _ environment: [String: String]) throws(UploadFlagsError) -> OTLPEndpoint? {
        let uploader = try Uploader.resolving(
            flags, store: ReportStore(root: "/nonexistent/reports"), clientVersion: "test",
            environment: environment.merging(["HOME": "/nonexistent/home"]) { first, _ in first }, uid: 1000)
        for destination in uploader?.destinations ?? [] { if case .otlp(let endpoint) = destination { return endpoint } }
        return nil
    }

    func testTheStandardVariables() throws {
        XCTAssertEqual(OTLPEndpoint.logsURL(base: "http://c:4318"), "http://c:4318/v1/logs")
        XCTAssertEqual(OTLPEndpoint.logsURL(base: "http://c:4318/otlp/"), "http://c:4318/otlp/v1/logs")
        XCTAssertNil(try resolve(UploadFlags(), ["OTEL_EXPORTER_OTLP_ENDPOINT": ""]))

        let plain = try XCTUnwrap(try resolve(UploadFlags(), ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"]))
        XCTAssertEqual(plain.url, "http://c:4318/v1/logs")
        XCTAssertEqual(plain.encoding, .protobuf)
        XCTAssertFalse(plain.gzip)
        XCTAssertEqual(UploadDestination.otlp(plain).key, "otlp http://c:4318/v1/logs")

        let logs = try XCTUnwrap(
            try resolve(
                UploadFlags(),
                [
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "https://l/ingest?x=1",
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/json",
                    "OTEL_EXPORTER_OTLP_HEADERS": "a=1", "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "Api-Key=x%3Dy%2Cz, team = t ",
                    "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
                    "OTEL_SERVICE_NAME": "svc", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=prod",
                ]))
        XCTAssertEqual(logs.url, "https://l/ingest?x=1")
        XCTAssertEqual(UploadDestination.otlp(logs).key, "otlp https://l/ingest")
        XCTAssertEqual(logs.encoding, .json)
        XCTAssertEqual(logs.headers.map { "\($0.name): \($0.value)" }, ["Api-Key: x=y,z", "team: t"])
        XCTAssertEqual(logs.timeoutMilliseconds, 2500)
        XCTAssertTrue(logs.gzip)
        XCTAssertEqual(logs.serviceName, "svc")
        XCTAssertEqual(logs.resourceAttributes, [OTLPAttribute("deployment.environment.name", .string("prod"))])

        // The flags first; --timeout-ms over OTEL_EXPORTER_OTLP_TIMEOUT.
        let flagged = try XCTUnwrap(
            try resolve(
                UploadFlags(timeoutMilliseconds: 900, otlpEndpoint: "http://f:1", otlpProtocol: "http/json"),
                ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500"]))
        XCTAssertEqual(flagged.url, "http://f:1/v1/logs")
        XCTAssertEqual(flagged.encoding, .json)
        XCTAssertNil(flagged.timeoutMilliseconds)

        for (variables, expected) in [
            (["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], "grpc: crashport sends OTLP over HTTP only"),
            (["OTEL_EXPORTER_OTLP_HEADERS": "a=b%0D%0AHost: evil"], "holds a control character"),
            (["OTEL_EXPORTER_OTLP_HEADERS": "novalue"], "is not key=value"),
            (["OTEL_EXPORTER_OTLP_HEADERS": "a=%zz"], "bad percent escape"),
            (["OTEL_EXPORTER_OTLP_TIMEOUT": "soon"], "not a positive number of milliseconds"),
            (["OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"], "is not gzip or none"),
            (["OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"], "not an http(s) URL"),
        ] {
            do {
                _ = try resolve(UploadFlags(), ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"].merging(variables) { $1 })
                XCTFail("\(variables) resolved")
            } catch {
                XCTAssertEqual(error.kind, .usage)
                XCTAssertTrue(error.description.contains(expected), "\(variables): \(error.description)")
            }
        }
        XCTAssertTrue(UploadSpawner.isConfigured(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "HOME": "/nonexistent"]))
        // A root sidecar's upload for a user keeps the exporter's settings, as it keeps CRASHPORT_*.
        let child = UploadSpawner.environment(
            for: ReportStore.Owner(uid: 0, gid: 0),
            from: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "k=v",
                "OTEL_SERVICE_NAME": "s", "OTEL_RESOURCE_ATTRIBUTES": "a=b", "OTEL_TRACES_SAMPLER": "always_on",
            ])
        XCTAssertEqual(
            Set(child.keys.filter { $0.hasPrefix("OTEL_") }),
            ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"])
    }

    /// crashport.toml's otlp_* keys, after the environment.
    func testCrashportToml() throws {
        let file = try UploadConfiguration.parse(
            """
            [upload]
            otlp_endpoint = "http://collector:4318"
            otlp_protocol = "http/json"
            otlp_headers = { "api-key" = "k1", team = "ledger" }
            otlp_compression = "gzip"
            """, file: "crashport.toml")
        XCTAssertEqual(file.otlpEndpoint, "http://collector:4318")
        XCTAssertEqual(file.otlpHeaders, [OTLPKeyValue(key: "api-key", value: "k1"), OTLPKeyValue(key: "team", value: "ledger")])
        let asString = try UploadConfiguration.parse("[upload]\notlp_headers = \"a=1,b=%32\"\n", file: "f")
        XCTAssertEqual(asString.otlpHeaders, [OTLPKeyValue(key: "a", value: "1"), OTLPKeyValue(key: "b", value: "2")])
        XCTAssertThrowsError(try UploadConfiguration.parse("[upload]\notlp_compression = \"br\"\n", file: "f"))

        let home = TestSupport.temporaryDirectory("otlp-toml")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let config = home + "/crashport.toml"
        try """
        [upload]
        otlp_endpoint = "http://collector:4318"
        otlp_protocol = "http/json"
        otlp_headers = { "api-key" = "k1" }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let fromFile = try XCTUnwrap(try resolve(UploadFlags(config: config), [:]))
        XCTAssertEqual(fromFile.url, "http://collector:4318/v1/logs")
        XCTAssertEqual(fromFile.encoding, .json)
        XCTAssertEqual(fromFile.headers.map(\.name), ["api-key"])
        let overridden = try XCTUnwrap(
            try resolve(
                UploadFlags(config: config),
                ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_EXPORTER_OTLP_HEADERS": "other=1"]))
        XCTAssertEqual(overridden.url, "http://env:4318/v1/logs")
        XCTAssertEqual(overridden.encoding, .json, "the file's protocol still holds")
        XCTAssertEqual(overridden.headers.map(\.name), ["other"])
        XCTAssertTrue(
            UploadSpawner.isConfigured(["CRASHPORT_CONFIG": config, "HOME": home]), "a configured collector starts an upload")
    }

    // MARK: answers

    func testACollectorsAnswers() {
        // ExportLogsServiceResponse{partial_success{rejected_log_records 2, error_message "old"}}
        let partial: [UInt8] = [0x0A, 0x07, 0x08, 0x02, 0x12, 0x03] + Array("old".utf8)
        XCTAssertEqual(OTLPResponse.partialSuccess(partial, json: false)?.rejected, 2)
        XCTAssertEqual(OTLPResponse.partialSuccess(partial, json: false)?.message, "old")
        XCTAssertNil(OTLPResponse.partialSuccess([], json: false), "an empty response is a full success")
        let json = Array(#"{"partialSuccess":{"rejectedLogRecords":"3","errorMessage":"m"}}"#.utf8)
        XCTAssertEqual(OTLPResponse.partialSuccess(json, json: true)?.rejected, 3)
        XCTAssertNil(OTLPResponse.partialSuccess(Array("{}".utf8), json: true))
        // google.rpc.Status{code 3, message "bad"}
        XCTAssertEqual(OTLPResponse.statusMessage([0x08, 0x03, 0x12, 0x03] + Array("bad".utf8), json: false), "bad")
        XCTAssertNil(OTLPResponse.statusMessage([0x12, 0x09, 0x41], json: false), "truncated")
        XCTAssertEqual(OTLPResponse.statusMessage(Array(#"{"code":3,"message":"bad"}"#.utf8), json: true), "bad")
    }
}
