// Uploader.resolving: the flags first, then the environment, then crashport.toml, and which
// mistakes are the command's exit 1 (unreadable) and which its usage error.

import Foundation
import TestSupport
import Store
import Upload
import XCTest

final class UploadFlagsTests: XCTestCase {
    let sentry = "https://key@o1.ingest.sentry.io/42"
    let otherSentry = "https://other@o2.ingest.sentry.io/7"
    let collector = "https://crashes.example.com/submit"
    let otherCollector = "https://collector.example.org/post"

    func resolve(_ flags: UploadFlags, _ environment: [String: String]) throws(UploadFlagsError) -> Uploader? {
        try Uploader.resolving(
            flags, store: ReportStore(root: "/nonexistent/reports"), clientVersion: "test", environment: environment,
            uid: 1000)
    }

    func testNoDestinationAnywhereIsNone() throws {
        let home = TestSupport.temporaryDirectory("upload-flags")
        defer { try? FileManager.default.removeItem(atPath: home) }
        XCTAssertNil(try resolve(UploadFlags(), ["HOME": home]))
        XCTAssertNil(try resolve(UploadFlags(), ["HOME": home, "CRASHPORT_SENTRY_DSN": ""]))
    }

    func testFlagsThenEnvironmentThenFile() throws {
        let home = TestSupport.temporaryDirectory("upload-flags")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let config = home + "/crashport.toml"
        try """
        [upload]
        sentry_dsn = "\(sentry)"
        url = "\(collector)"
        environment = "staging"
        timeout_ms = 5000
        """.write(toFile: config, atomically: true, encoding: .utf8)

        let fromFile = try XCTUnwrap(try resolve(UploadFlags(config: config), ["HOME": home]))
        XCTAssertEqual(
            fromFile.destinations,
            [try UploadDestination.sentry(checking: sentry), try UploadDestination.crashpad(checking: collector)])
        XCTAssertEqual(fromFile.environment, "staging")
        XCTAssertEqual(fromFile.timeoutMilliseconds, 5000)

        let environment = ["HOME": home, "CRASHPORT_CONFIG": config, "CRASHPORT_SENTRY_DSN": otherSentry]
        let overridden = try XCTUnwrap(
            try resolve(UploadFlags(url: otherCollector, timeoutMilliseconds: 700), environment))
        XCTAssertEqual(
            overridden.destinations,
            [try UploadDestination.sentry(checking: otherSentry), try UploadDestination.crashpad(checking: otherCollector)])
        XCTAssertEqual(overridden.timeoutMilliseconds, 700)

        let minidump = try XCTUnwrap(try resolve(UploadFlags(sentryDSN: sentry, sentryMinidump: true), ["HOME": home]))
        guard case .sentryMinidump = minidump.destinations.first else {
            return XCTFail("\(minidump.destinations)")
        }
    }

    func testWhatIsUnreadableAndWhatIsAUsageError() {
        func kind(_ flags: UploadFlags, _ environment: [String: String] = ["HOME": "/nonexistent"]) -> UploadFlagsError? {
            do {
                _ = try resolve(flags, environment)
                return nil
            } catch {
                return error
            }
        }
        XCTAssertEqual(kind(UploadFlags(config: "/nonexistent/crashport.toml"))?.kind, .unreadable)
        XCTAssertEqual(kind(UploadFlags(sentryDSN: "not a dsn"))?.kind, .usage)
        XCTAssertEqual(
            kind(UploadFlags(url: collector, caFile: "/nonexistent/ca.pem")),
            UploadFlagsError(.unreadable, "--ca-file /nonexistent/ca.pem cannot be read"))
        XCTAssertEqual(
            kind(UploadFlags(url: collector, timeoutMilliseconds: 0)),
            UploadFlagsError(.usage, "--timeout-ms must be positive"))
        XCTAssertEqual(
            kind(UploadFlags(url: collector), ["HOME": "/nonexistent", "CRASHPORT_BEFORE_SEND": "/nonexistent/hook"]),
            UploadFlagsError(.usage, "--before-send /nonexistent/hook is not an executable file"))
        XCTAssertEqual(
            kind(UploadFlags(url: collector), ["HOME": "/nonexistent", "CRASHPORT_AFTER_SEND": "/nonexistent/told"]),
            UploadFlagsError(.usage, "--after-send /nonexistent/told is not an executable file"))
    }

    /// after_send: the flag first, then CRASHPORT_AFTER_SEND, then crashport.toml's after_send.
    func testTheAfterSendHookIsFoundLikeTheOthers() throws {
        let home = TestSupport.temporaryDirectory("upload-flags")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let config = home + "/crashport.toml"
        try "[upload]\nurl = \"\(collector)\"\nafter_send = \"/bin/true\"\n".write(
            toFile: config, atomically: true, encoding: .utf8)
        XCTAssertEqual(try resolve(UploadFlags(config: config), ["HOME": home])?.afterSend?.program, "/bin/true")
        XCTAssertEqual(
            try resolve(UploadFlags(config: config), ["HOME": home, "CRASHPORT_AFTER_SEND": "/bin/false"])?.afterSend?
                .program, "/bin/false")
        XCTAssertEqual(
            try resolve(
                UploadFlags(afterSend: "/bin/cat", config: config), ["HOME": home, "CRASHPORT_AFTER_SEND": "/bin/false"])?
                .afterSend?.program, "/bin/cat")
        XCTAssertNil(try resolve(UploadFlags(url: collector), ["HOME": home])?.afterSend)
    }
}
