// End-to-end: real reports in Sentry's shape, judged by Sentry's own code. Real programs crash,
// report a handled error, are SIGKILLed and hang under the real `crashport run`; each report's
// event.json is converted by Upload.SentryEvent (as an upload will) and passed through Relay's
// normalizer (sentry-relay's StoreNormalizer, from PyPI), which must find no `errors` and keep
// the exception, the threads and the debug images. The crash also goes through a whole envelope
// (its real minidump and attachment) and the strict parser, and its executable's debug_id is
// checked against symbolic's for the same file. sentry-relay and symbolic come from
// tools/fetch-validators (tools/.cache, never committed); where PyPI cannot be reached the tests
// skip and say so.

import Foundation
import ReportModel
import Upload
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class SentryEventEndToEndTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("sentry")
    let options = SentryEvent.Options(sdkVersion: "0.0.0-test")

    override func setUpWithError() throws {
        if let why = SentryValidators.unavailable() {
            print("SentryEventEndToEndTests skipped: \(why)")
            throw XCTSkip(why)
        }
    }

    /// Tests/Fixtures/api/app.c, linked with the stub the tests preload.
    func apiProgram() throws -> String {
        let libraries = (try TestSupport.stub() as NSString).deletingLastPathComponent
        return try TestSupport.compile(
            [TestSupport.fixture("api/app.c")], output: Self.directory + "/app",
            flags: ["-O1", "-g", "-pthread", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
    }

    /// The report's event converted, with the OS facts its minidump holds.
    func sentryJSON(_ run: CrashportRun, _ index: Int = 0) throws -> (event: Event, json: Data) {
        let event = try run.event(index)
        let minidump = try? Minidump(path: run.minidumpPath(index))
        let options = SentryEvent.Options(
            sdkVersion: self.options.sdkVersion, operatingSystem: minidump.flatMap { SentryOperatingSystem(minidump: $0) })
        return (event, try SentryEvent.jsonData(for: event, options: options))
    }

    /// Relay's verdict: no errors, and the exception, the threads and the images kept.
    @discardableResult
    func assertRelayAccepts(
        _ json: Data, _ event: Event, file: StaticString = #filePath, line: UInt = #line
    ) throws
        -> [String: Any]
    {
        let normalized = try SentryValidators.normalize(json)
        XCTAssertNil(normalized["errors"], "Relay found errors: \(normalized["errors"] ?? "")", file: file, line: line)
        let exceptions = (normalized["exception"] as? [String: Any])?["values"] as? [[String: Any]] ?? []
        XCTAssertEqual(exceptions.count, 1, "the exception is kept", file: file, line: line)
        let threads = (normalized["threads"] as? [String: Any])?["values"] as? [[String: Any]] ?? []
        XCTAssertEqual(threads.count, event.threads?.count ?? 0, "every thread is kept", file: file, line: line)
        let images = (normalized["debug_meta"] as? [String: Any])?["images"] as? [[String: Any]] ?? []
        XCTAssertEqual(
            images.count, event.modules?.filter { $0.buildID != nil }.count ?? 0, "every module with a build-id is kept",
            file: file, line: line)
        return normalized
    }

    func frames(_ normalized: [String: Any]) -> [[String: Any]] {
        let exception = ((normalized["exception"] as? [String: Any])?["values"] as? [[String: Any]])?.first
        return (exception?["stacktrace"] as? [String: Any])?["frames"] as? [[String: Any]] ?? []
    }

    /// A crash with annotations, 100 breadcrumbs and an attachment: Relay takes the event, the
    /// innermost frame is last, the executable's debug_id is symbolic's, and the whole envelope
    /// (with the real minidump) parses strictly back to the same bytes.
    func testACrashPassesRelaysNormalizerAndItsEnvelopeRoundTrips() throws {
        let work = Self.directory + "/tell-" + UUID().uuidString.prefix(6)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let program = try apiProgram()
        let run = try TestSupport.crashportRun([program, "tell", work])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let (event, json) = try sentryJSON(run)
        XCTAssertEqual(event.kind, .crash)

        let normalized = try assertRelayAccepts(json, event)
        XCTAssertEqual(normalized["level"] as? String, "fatal")
        XCTAssertEqual(normalized["platform"] as? String, "native")
        let functions = frames(normalized).map { $0["function"] as? String ?? "?" }
        XCTAssertEqual(functions.last, "crash_after_telling", "innermost last: \(functions)")
        // Relay keeps the machine's grouping: Sentry groups by it rather than by its own rules.
        XCTAssertEqual(normalized["fingerprint"] as? [String], [try XCTUnwrap(event.fingerprint)])
        XCTAssertTrue(containsInOrder(functions, ["main", "tell", "crash_after_telling"]), "\(functions)")
        let exception = try XCTUnwrap(((normalized["exception"] as? [String: Any])?["values"] as? [[String: Any]])?.first)
        let signal = ((exception["mechanism"] as? [String: Any])?["meta"] as? [String: Any])?["signal"] as? [String: Any]
        XCTAssertEqual(signal?["name"] as? String, "SIGSEGV")
        XCTAssertEqual(signal?["code_name"] as? String, "SEGV_MAPERR")
        let breadcrumbs = (normalized["breadcrumbs"] as? [String: Any])?["values"] as? [[String: Any]] ?? []
        XCTAssertEqual(breadcrumbs.count, event.breadcrumbs?.count)
        // Relay stores tags as [key, value] pairs.
        var tags: [String: String] = [:]
        for case let pair as [Any] in normalized["tags"] as? [Any] ?? [] where pair.count == 2 {
            if let key = pair[0] as? String, let value = pair[1] as? String { tags[key] = value }
        }
        XCTAssertEqual(tags["n0"], "filler", "\(normalized["tags"] ?? "no tags")")
        XCTAssertEqual(tags["crashport.kind"], "crash")
        let extraAnnotations = (normalized["extra"] as? [String: Any])?["annotations"] as? [String: String] ?? [:]
        XCTAssertEqual(extraAnnotations["user"], "bob", "Relay reserves the tag")
        XCTAssertEqual(extraAnnotations["build"], "nightly\n\u{1b}[31mred", "a newline cannot be a tag")
        XCTAssertEqual(extraAnnotations["long"]?.count, 1023, "nor 1023 characters")
        let os = (normalized["contexts"] as? [String: Any])?["os"] as? [String: Any]
        XCTAssertEqual(os?["name"] as? String, "Linux", "from the minidump")
        // The arguments named the work directory; only the attachment's file name is sent.
        XCTAssertFalse(String(decoding: json, as: UTF8.self).contains((work as NSString).lastPathComponent), "no arguments")

        // The executable's image: symbolic's debug_id and code_id for the very same file.
        let images = (normalized["debug_meta"] as? [String: Any])?["images"] as? [[String: Any]] ?? []
        let image = try XCTUnwrap(images.first { $0["code_file"] as? String == program })
        let symbolic = try SentryValidators.debugID(of: program)
        XCTAssertEqual(image["debug_id"] as? String, symbolic.debugID)
        XCTAssertEqual(image["code_id"] as? String, symbolic.codeID)

        // The envelope an upload would send, parsed back strictly.
        let reportDirectory = run.reportsDirectory + "/" + run.reportIDs[0]
        let minidump = try XCTUnwrap(FileManager.default.contents(atPath: run.minidumpPath()))
        let log = try XCTUnwrap(FileManager.default.contents(atPath: reportDirectory + "/attachments/app.log"))
        let eventID = SentryEvent.eventID(reportID: try XCTUnwrap(event.id))
        let envelope = try SentryEnvelope.report(
            eventJSON: json, eventID: eventID, sentAt: Event.timestamp(), dsn: try SentryDSN("http://key@127.0.0.1:9/1"),
            sdkVersion: options.sdkVersion, minidump: Array(minidump),
            attachments: [.init(filename: "app.log", bytes: Array(log))],
            session: SentrySession(
                sid: try XCTUnwrap(event.session), status: .crashed, started: try XCTUnwrap(event.timestamp),
                timestamp: try XCTUnwrap(event.timestamp), release: event.release ?? "unknown"))
        let bytes = try envelope.serialized()
        let parsed = try SentryEnvelope.parse(bytes)
        XCTAssertEqual(parsed, envelope)
        XCTAssertEqual(parsed.eventID, eventID)
        XCTAssertEqual(parsed.items.map(\.type), ["event", "attachment", "attachment", "session"])
        XCTAssertEqual(parsed.items[1].payload, Array(minidump), "the minidump, byte for byte")
        XCTAssertEqual(parsed.items[1].attachmentType, "event.minidump")
        XCTAssertEqual(parsed.items[2].filename, "app.log")
        try assertRelayAccepts(Data(parsed.items[0].payload), event)
    }

    /// A handled error (crashport_report_error): level error, handled, the process lived on.
    func testAHandledErrorPassesRelaysNormalizer() throws {
        let run = try TestSupport.crashportRun([try apiProgram(), "error"])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .exited(0), run.result.stderr)
        let index = try XCTUnwrap((0..<run.reportIDs.count).first { (try? run.event($0))?.exception?.type == "ParseError" })
        let (event, json) = try sentryJSON(run, index)
        let normalized = try assertRelayAccepts(json, event)
        XCTAssertEqual(normalized["level"] as? String, "error")
        let exception = try XCTUnwrap(((normalized["exception"] as? [String: Any])?["values"] as? [[String: Any]])?.first)
        XCTAssertEqual(exception["type"] as? String, "ParseError")
        XCTAssertEqual((exception["mechanism"] as? [String: Any])?["handled"] as? Bool, true)
        XCTAssertTrue(frames(normalized).contains { $0["function"] as? String == "parse_config" })
    }

    /// A SIGKILL from outside, seen by `--trace-exit`: a termination Relay takes as fatal.
    func testATerminationPassesRelaysNormalizer() throws {
        let run = try TestSupport.crashportRun([try TraceExitTests.fixture(), "kill"], options: ["--trace-exit"])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .signaled(SIGKILL), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let (event, json) = try sentryJSON(run)
        XCTAssertEqual(event.kind, .termination)
        let normalized = try assertRelayAccepts(json, event)
        XCTAssertEqual(normalized["level"] as? String, "fatal")
        let exception = try XCTUnwrap(((normalized["exception"] as? [String: Any])?["values"] as? [[String: Any]])?.first)
        XCTAssertEqual(exception["type"] as? String, "SIGKILL")
        XCTAssertTrue(frames(normalized).contains { $0["function"] as? String == "wait_for_kill" })
    }

    /// A stall seen by `--hang-ms`: an AppHang the program recovered from.
    func testAHangPassesRelaysNormalizer() throws {
        let run = try TestSupport.crashportRun([try TraceExitTests.fixture(), "stall"], options: ["--hang-ms", "500"])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.result.status, .exited(0), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let (event, json) = try sentryJSON(run)
        XCTAssertEqual(event.kind, .hang)
        let normalized = try assertRelayAccepts(json, event)
        XCTAssertEqual(normalized["level"] as? String, "error")
        let exception = try XCTUnwrap(((normalized["exception"] as? [String: Any])?["values"] as? [[String: Any]])?.first)
        XCTAssertEqual(exception["type"] as? String, "AppHang")
        XCTAssertTrue(frames(normalized).contains { $0["function"] as? String == "stall_for_a_while" })
    }
}
