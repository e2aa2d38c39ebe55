// The parts of `crashport upload` that decide without a server: the backoff, a server's
// Retry-After, Crashpad's part-name escaping, the server's id in its answer, and an upload
// state that is not one (never silently replaced: it may say "sent").

import Foundation
import TestSupport
import XCTest

@testable import Upload

final class UploadPolicyTests: XCTestCase {
    func testBackoffDoublesFromFifteenMinutesToEightHours() {
        let policy = UploadPolicy()
        let waits = (1...8).map { policy.backoff(afterAttempts: $0, jitter: 0) / 60 }
        XCTAssertEqual(waits, [15, 30, 60, 120, 240, 480, 480, 480])
        XCTAssertEqual(policy.backoff(afterAttempts: 1, jitter: 0.1), 15 * 60 * 1.1, accuracy: 0.001)
    }

    func testRetryAfterIsSecondsOrAnHTTPDateCappedAtADay() {
        let policy = UploadPolicy()
        let now = Date(timeIntervalSince1970: 1_795_000_000)
        XCTAssertEqual(policy.serverWait("120", now: now), 120)
        XCTAssertEqual(policy.serverWait("999999", now: now), 24 * 3600)
        XCTAssertEqual(policy.serverWait("soon", now: now), 60, "what it cannot read is a minute, as sentry-native reads it")
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        XCTAssertEqual(policy.serverWait(formatter.string(from: now.addingTimeInterval(300)), now: now), 300, accuracy: 1)
        XCTAssertEqual(policy.serverWait(formatter.string(from: now.addingTimeInterval(-300)), now: now), 0)
    }

    func testHTTPDates() {
        XCTAssertEqual(UploadPolicy.httpDate("Sun, 06 Nov 1994 08:49:37 GMT")?.timeIntervalSince1970, 784_111_777)
        XCTAssertEqual(UploadPolicy.httpDate(" Thu, 01 Jan 1970 00:00:00 GMT\r")?.timeIntervalSince1970, 0)
        for text in [
            "Sun, 06 Nov 1994 08:49:37 PST", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
            "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Now 1994 08:49:37 GMT", "",
        ] {
            XCTAssertNil(UploadPolicy.httpDate(text), text)
        }
    }

    /// The before_send hook, a real program each time: its answer, its refusal, its silence.
    func testTheBeforeSendHook() throws {
        let directory = NSTemporaryDirectory() + "before-send-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func hook(_ name: String, _ script: String) throws -> String {
            let path = directory + "/" + name
            try Data("#!/bin/sh\n\(script)\n".utf8).write(to: URL(fileURLWithPath: path))
            chmod(path, 0o755)
            return path
        }
        // 4 MB of input, many times a pipe's buffer: the hook answers first and never reads it all.
        let large = Data(#"{"pad":""#.utf8 + [UInt8](repeating: UInt8(ascii: "x"), count: 4 << 20) + #""}"#.utf8)
        let early = try hook("early", #"head -c 10 >/dev/null; printf '{"kept":1}'"#)
        XCTAssertEqual(try UploadPrivacy.beforeSend(early, json: large).get(), Data(#"{"kept":1}"#.utf8))
        let echo = try hook("echo", "cat")
        XCTAssertEqual(try UploadPrivacy.beforeSend(echo, json: large).get(), large)

        func failure(_ result: Result<Data, UploadError>) -> String {
            if case .failure(let error) = result { return "\(error)" }
            return "succeeded"
        }
        let refuse = try hook("refuse", "cat >/dev/null; exit 3")
        XCTAssertEqual(
            failure(UploadPrivacy.beforeSend(refuse, json: Data("{}".utf8))), "dropped by before_send \(refuse) (it exited 3)")
        let notJSON = try hook("text", "echo hello")
        XCTAssertTrue(
            failure(UploadPrivacy.beforeSend(notJSON, json: Data("{}".utf8))).hasSuffix(
                "did not answer with a JSON object; not sent"))
        // Past its time the hook is killed: were it waited for, this test would not end.
        let slow = try hook("slow", "exec sleep 100000")
        XCTAssertEqual(
            failure(UploadPrivacy.beforeSend(slow, json: Data("{}".utf8), timeout: 0.3)),
            "before_send \(slow) took longer than 0.3 s; not sent")
        XCTAssertTrue(
            failure(UploadPrivacy.beforeSend(directory + "/missing", json: Data())).hasSuffix(
                "cannot be run: No such file or directory"))
    }

    func testPartNamesAreEscapedAsCrashpadDoes() {
        XCTAssertEqual(CrashpadUpload.escape("a\"b%c\r\nd"), "a%22b%25c%0d%0ad")
        let (body, boundary) = CrashpadUpload.body(fields: [("na\"me", "v")], minidump: Array("MDMP".utf8), fileName: "x.dmp")
        let text = String(decoding: body, as: UTF8.self)
        XCTAssertTrue(text.contains("name=\"na%22me\""))
        XCTAssertTrue(text.hasSuffix("\r\n--\(boundary)--\r\n"))
    }

    func testServerIDs() {
        XCTAssertEqual(CrashpadUpload.serverID(in: "CrashID=bp-1234\n"), "bp-1234")
        XCTAssertEqual(CrashpadUpload.serverID(in: "3c5d3b7fa1b1\n"), "3c5d3b7fa1b1")
        XCTAssertNil(CrashpadUpload.serverID(in: "<html>ok</html>"))
        XCTAssertNil(CrashpadUpload.serverID(in: ""))
    }

    func testAnUnreadableStateIsAnErrorNotAFreshStart() throws {
        let directory = NSTemporaryDirectory() + "upload-state-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        XCTAssertEqual(try UploadState.read(directory: directory), UploadState(), "none yet: empty")
        var state = UploadState()
        state.destinations["crashpad http://x/submit"] = UploadState.Entry(status: .sent, attempts: 1, serverID: "bp-1")
        try state.write(directory: directory)
        XCTAssertEqual(try UploadState.read(directory: directory), state)
        try Data("{\"destinations\": 7}".utf8).write(to: URL(fileURLWithPath: directory + "/upload.json"))
        XCTAssertThrowsError(try UploadState.read(directory: directory)) {
            XCTAssertTrue("\($0)".contains("is not an upload state"))
        }
        XCTAssertThrowsError(try UploadDestination.crashpad(checking: "file:///etc/passwd"))
        XCTAssertEqual(
            try UploadDestination.crashpad(checking: "https://c.example/submit?key=secret").key,
            "crashpad https://c.example/submit")
        XCTAssertEqual(
            try UploadDestination.sentry(checking: "https://k3y@o1.ingest.example/42").key,
            "sentry https://o1.ingest.example/api/42/envelope/", "the key is not kept")
        XCTAssertThrowsError(try UploadDestination.sentry(checking: "https://o1.ingest.example/42")) {
            XCTAssertTrue("\($0)".contains("no public key"), "\($0)")
        }
    }

    /// X-Sentry-Rate-Limits: the longest wait over the categories an event upload uses, an
    /// empty category list meaning all; other categories and junk ignored; capped at a day.
    func testSentryRateLimits() {
        let policy = UploadPolicy()
        let events: Set<String> = ["error", "attachment"]
        XCTAssertEqual(
            SentryRateLimits.wait("60:error:organization, 2700:transaction:key", categories: events, policy: policy), 60)
        XCTAssertEqual(SentryRateLimits.wait("30::key", categories: events, policy: policy), 30)
        XCTAssertNil(SentryRateLimits.wait("900:transaction;session:key", categories: events, policy: policy))
        XCTAssertEqual(SentryRateLimits.wait("10:error, 20:attachment;session", categories: events, policy: policy), 20)
        XCTAssertEqual(SentryRateLimits.wait("999999:error", categories: events, policy: policy), 24 * 3600)
        XCTAssertNil(SentryRateLimits.wait("soon:error, :", categories: events, policy: policy))
    }
}

/// What leaves the machine by default: home directories' user names and the arguments, out.
final class UploadPrivacyTests: XCTestCase {
    func testHomeDirectoriesInText() {
        XCTAssertEqual(UploadPrivacy.scrubbed("/home/alice/src/app.c"), "~/src/app.c")
        XCTAssertEqual(UploadPrivacy.scrubbed("at /home/al.ice_2/x and /home/bob/y"), "at ~/x and ~/y")
        XCTAssertEqual(UploadPrivacy.scrubbed("/home/"), "/home/")
        XCTAssertEqual(UploadPrivacy.scrubbed("/home//x /home/a b/"), "/home//x /home/a b/")
        XCTAssertEqual(UploadPrivacy.scrubbed("/usr/lib/libc.so.6"), "/usr/lib/libc.so.6")
        let json = UploadPrivacy.scrubbed(json: ["frames": [["abs_path": "/home/carol/a.c", "lineno": 3]]]) as? [String: Any]
        let frame = (json?["frames"] as? [[String: Any]])?.first
        XCTAssertEqual(frame?["abs_path"] as? String, "~/a.c")
        XCTAssertEqual(frame?["lineno"] as? Int, 3)
    }

    /// A minidump edited in place: the command line stream cut to argv[0] (its size shortened,
    /// the rest zeroed), user names masked in ASCII and UTF-16; nothing moves.
    func testMinidumpKeepsItsLayout() {
        let cmdline = Array("/home/dave/bin/app\0--token\0s3cret\0".utf8)
        let wide = Array("/home/dave/x".utf16.flatMap { [UInt8](littleEndian: $0) })
        // One stream, the directory at 32, version 0.
        var bytes = MinidumpBytes.header(streams: 1, directory: 32, version: 0)
        bytes += MinidumpBytes.directoryEntry(type: 0x4767_0006, size: UInt32(cmdline.count), rva: 64)
        bytes.pad(to: 64)
        bytes += cmdline
        bytes.pad(to: 120)
        bytes += wide
        bytes.pad(to: 200)
        let scrubbed = UploadPrivacy.scrubbed(minidump: bytes)
        XCTAssertEqual(scrubbed.count, bytes.count)
        let kept = Int(scrubbed[36]) | Int(scrubbed[37]) << 8
        XCTAssertEqual(kept, "/home/dave/bin/app\0".utf8.count)
        XCTAssertEqual(String(decoding: scrubbed[64..<64 + kept - 1], as: UTF8.self), "/home/****/bin/app")
        XCTAssertTrue(scrubbed[64 + kept..<64 + cmdline.count].allSatisfy { $0 == 0 }, "the arguments are gone")
        XCTAssertEqual(
            String(decoding: stride(from: 120, to: 120 + wide.count, by: 2).map { scrubbed[$0] }, as: UTF8.self), "/home/****/x")
        XCTAssertEqual(UploadPrivacy.scrubbed(minidump: Array("not a minidump".utf8)), Array("not a minidump".utf8))
    }
}

/// crashport.toml: what it may say, and a clear error, naming the file and key, for the rest.
final class UploadConfigurationTests: XCTestCase {
    func testSettings() throws {
        let text = """
            # where reports go
            [upload]
            sentry_dsn = ["https://a@o1.example/1", "https://b@o2.example/2"]
            url = "https://crashes.example/submit"
            environment = "production"
            ca_file = "/etc/ssl/ca.pem"
            timeout_ms = 5000
            send_pii = true
            send_variables = true
            before_send = "/usr/local/bin/scrub"
            after_send = "/usr/local/bin/tell"
            """
        let configuration = try UploadConfiguration.parse(text, file: "c.toml")
        XCTAssertEqual(configuration.sentryDSNs, ["https://a@o1.example/1", "https://b@o2.example/2"])
        XCTAssertEqual(configuration.urls, ["https://crashes.example/submit"])
        XCTAssertEqual(configuration.environment, "production")
        XCTAssertEqual(configuration.caFile, "/etc/ssl/ca.pem")
        XCTAssertEqual(configuration.timeoutMilliseconds, 5000)
        XCTAssertEqual(configuration.sendPII, true)
        XCTAssertEqual(configuration.sendVariables, true)
        XCTAssertEqual(configuration.beforeSend, "/usr/local/bin/scrub")
        XCTAssertEqual(configuration.afterSend, "/usr/local/bin/tell")
        XCTAssertEqual(try UploadConfiguration.parse("", file: "empty.toml"), UploadConfiguration())
    }

    func testErrorsNameTheFileAndKey() {
        for (text, expected) in [
            ("[upload]\nurl = 7\n", "c.toml: upload.url must be a string or a list of strings"),
            ("[upload]\nsentry = \"x\"\n", "c.toml: unknown key upload.sentry"),
            ("[uploads]\nurl = \"x\"\n", "c.toml: unknown table or key 'uploads'"),
            ("[upload]\ntimeout_ms = -1\n", "c.toml: upload.timeout_ms must be a positive integer"),
            ("[upload]\nsend_pii = \"yes\"\n", "c.toml: upload.send_pii must be true or false"),
            ("[upload]\nafter_send = [\"/bin/true\"]\n", "c.toml: upload.after_send must be a string"),
            ("[upload]\nurl = \"unterminated\n", "c.toml:2: not TOML"),
            ("upload = 3\n", "c.toml: upload must be a table"),
        ] {
            XCTAssertThrowsError(try UploadConfiguration.parse(text, file: "c.toml"), text) {
                XCTAssertTrue("\($0)".hasPrefix(expected), "\(text): \($0)")
            }
        }
        XCTAssertThrowsError(try UploadConfiguration.load(path: "/nonexistent/crashport.toml", explicit: true))
        XCTAssertEqual(try UploadConfiguration.load(path: "/nonexistent/crashport.toml", explicit: false), UploadConfiguration())
    }
}
