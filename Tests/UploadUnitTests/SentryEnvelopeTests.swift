// Sentry envelopes: a report's envelope round trip through the strict parser (byte for byte),
// what the parser rejects, the session update, and DSNs, good and bad.

import Foundation
import ReportModel
import Upload
import XCTest

final class SentryEnvelopeTests: XCTestCase {
    /// A minidump-like payload with the bytes that break a lenient reader: newlines, a CR, NULs.
    let minidump: [UInt8] = Array("MDMP".utf8) + [0, 0, 0x0A, 0x0D, 0x0A, 0xFF, 0x0A]

    func envelope() throws -> SentryEnvelope {
        let dsn = try SentryDSN("https://abc123@o1.ingest.example.com/42")
        let session = SentrySession(
            sid: "9b992308-5ef4-4aba-b0c6-22d18cbe642a", status: .crashed, started: "2026-11-24T01:30:10.000Z",
            timestamp: "2026-11-24T01:30:16.301Z", duration: 6.301, release: "app@1.2", environment: "staging")
        return try SentryEnvelope.report(
            eventJSON: Data("{\"platform\":\"native\",\n\"level\":\"fatal\"}".utf8),
            eventID: "0123456789abcdef0123456789abcdef", sentAt: "2026-11-24T01:31:00.000Z", dsn: dsn, sdkVersion: "9.9.9",
            minidump: minidump,
            attachments: [
                .init(filename: "app.log", bytes: Array("started\n".utf8), contentType: "text/plain; charset=utf-8"),
                .init(filename: "empty", bytes: []),
            ], session: session)
    }

    func testAReportsEnvelopeRoundTripsThroughTheStrictParser() throws {
        let envelope = try envelope()
        let bytes = try envelope.serialized()
        let parsed = try SentryEnvelope.parse(bytes)
        XCTAssertEqual(parsed, envelope)
        XCTAssertEqual(try parsed.serialized(), bytes)
        XCTAssertEqual(parsed.items.map(\.type), ["event", "attachment", "attachment", "attachment", "session"])
        XCTAssertEqual(parsed.items[1].attachmentType, "event.minidump")
        XCTAssertEqual(parsed.items[1].filename, "minidump.dmp")
        XCTAssertEqual(parsed.items[1].payload, minidump)
        XCTAssertEqual(parsed.items[2].attachmentType, "event.attachment")
        XCTAssertEqual(parsed.items[2].contentType, "text/plain; charset=utf-8", "an attachment from memory's type")
        XCTAssertNil(parsed.items[3].contentType)
        XCTAssertEqual(parsed.items[3].payload, [])

        // The header lines, as the reference's minimal crash envelope shows them.
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(
            lines[0],
            #"{"dsn":"https://abc123@o1.ingest.example.com/42","event_id":"0123456789abcdef0123456789abcdef","#
                + #""sdk":{"name":"crashport","version":"9.9.9"},"sent_at":"2026-11-24T01:31:00.000Z"}"#)
        XCTAssertEqual(lines[1], #"{"length":38,"type":"event"}"#)
        XCTAssertEqual(
            lines[4], #"{"attachment_type":"event.minidump","filename":"minidump.dmp","length":11,"type":"attachment"}"#)
        XCTAssertEqual(bytes.last, UInt8(ascii: "\n"))

        let session = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(parsed.items[4].payload)) as? [String: Any])
        XCTAssertEqual(session["sid"] as? String, "9b992308-5ef4-4aba-b0c6-22d18cbe642a")
        XCTAssertEqual(session["status"] as? String, "crashed")
        XCTAssertEqual(session["errors"] as? Int, 1, "a crash counts as one error")
        XCTAssertEqual(session["init"] as? Bool, true)
        XCTAssertEqual(session["started"] as? String, "2026-11-24T01:30:10.000Z")
        XCTAssertEqual(session["timestamp"] as? String, "2026-11-24T01:30:16.301Z")
        XCTAssertEqual(session["attrs"] as? [String: String], ["release": "app@1.2", "environment": "staging"])
    }

    /// Without the final newline, and with items of types it does not know, it still parses.
    func testTheGrammarsOptionalPartsAreAccepted() throws {
        var bytes = try envelope().serialized()
        bytes.removeLast()
        XCTAssertEqual(try SentryEnvelope.parse(bytes).items.count, 5)
        let unknown = Array("{}\n{\"type\":\"future_thing\",\"length\":2}\nab\n".utf8)
        XCTAssertEqual(
            try SentryEnvelope.parse(unknown).items, [SentryEnvelope.Item(type: "future_thing", payload: Array("ab".utf8))])
        XCTAssertEqual(try SentryEnvelope.parse(Array("{}".utf8)).items, [])
    }

    func testMalformedEnvelopesAreRejectedWithTheReason() throws {
        let cases: [(String, String)] = [
            ("", "a header line was expected"),
            ("not json\n", "not a JSON object"),
            ("[1]\n", "not a JSON object"),
            ("{\"event_id\":\"xyz\"}\n", "is not 32 hex digits"),
            ("{\"event_id\":\"0123456789ABCDEF0123456789ABCDEF\"}\n", "is not 32 hex digits"),
            ("{\"sdk\":\"crashport\"}\n", "sdk is not an object"),
            ("{}\n{\"type\":\"event\"}\n{}\n", "has no valid length"),
            ("{}\n{\"length\":2}\n{}\n", "has no type"),
            ("{}\n{\"type\":\"event\",\"length\":-1}\n", "has no valid length"),
            ("{}\n{\"type\":\"event\",\"length\":\"2\"}\n{}\n", "has no valid length"),
            ("{}\n{\"type\":\"event\",\"length\":true}\n{\n", "has no valid length"),
            ("{}\n{\"type\":\"event\",\"length\":1.5}\n{}\n", "has no valid length"),
            ("{}\n{\"type\":\"attachment\",\"length\":10}\nshort\n", "only 6 bytes follow"),
            ("{}\n{\"type\":\"attachment\",\"length\":2,\"filename\":\"a\"}\nabc\n", "not followed by a newline"),
            ("{}\n{\"type\":\"attachment\",\"length\":1}\na\n", "has no filename"),
            ("{}\n{\"type\":\"event\",\"length\":2}", "has no payload line"),
            ("{}\n{\"type\":\"event\",\"length\":2}\n{}\n", "has no event_id"),
            (
                "{\"event_id\":\"0123456789abcdef0123456789abcdef\"}\n{\"type\":\"event\",\"length\":2}\n{}\n"
                    + "{\"type\":\"event\",\"length\":2}\n{}\n",
                "more than one event item"
            ),
            ("{}\n\n{\"type\":\"event\",\"length\":0}\n\n", "not a JSON object"),
            ("{}\n{\"type\":\"event\",\"length\":2,\"filename\":3}\n{}\n", "filename is not a string"),
        ]
        for (text, reason) in cases {
            XCTAssertThrowsError(try SentryEnvelope.parse(Array(text.utf8)), text.debugDescription) { error in
                guard case SentryError.malformedEnvelope(let why) = error else {
                    return XCTFail("\(error) for \(text.debugDescription)")
                }
                XCTAssertTrue(why.contains(reason), "\(text.debugDescription): \(why)")
            }
        }
        // Every prefix of a real envelope that cuts a payload short is rejected, never read past.
        let bytes = try envelope().serialized()
        for end in 0..<bytes.count {
            _ = try? SentryEnvelope.parse(Array(bytes[..<end]))
        }
    }

    func testDSNsGiveTheEnvelopeURLAndAuthHeader() throws {
        let dsn = try SentryDSN("https://abc123@o1.ingest.example.com/42")
        XCTAssertEqual(dsn.envelopeURL, "https://o1.ingest.example.com/api/42/envelope/")
        XCTAssertEqual(dsn.minidumpURL, "https://o1.ingest.example.com/api/42/minidump/?sentry_key=abc123")
        XCTAssertEqual(
            dsn.authHeader(clientVersion: "0.13.0"), "Sentry sentry_key=abc123, sentry_version=7, sentry_client=crashport/0.13.0")
        XCTAssertEqual(dsn.projectID, "42")
        XCTAssertEqual(dsn.publicKey, "abc123")

        let prefixed = try SentryDSN("http://key:legacysecret@127.0.0.1:9000/sentry/7")
        XCTAssertEqual(prefixed.envelopeURL, "http://127.0.0.1:9000/sentry/api/7/envelope/")
        XCTAssertEqual(prefixed.publicKey, "key")
        XCTAssertEqual(try SentryDSN("https://k@[::1]:8000/3").envelopeURL, "https://[::1]:8000/api/3/envelope/")
    }

    func testBadDSNsAreClearErrors() {
        let cases: [(String, String)] = [
            ("", "not a URL"),
            ("o1.ingest.example.com/42", "not a URL"),
            ("ftp://k@host/1", "scheme must be https or http"),
            ("https://host/1", "no public key"),
            ("https://@host/1", "no public key"),
            ("https://k@/1", "no host"),
            ("https://k@host", "numeric project id"),
            ("https://k@host/", "numeric project id"),
            ("https://k@host/project", "numeric project id"),
            ("https://k@host/1?x=y", "query or fragment"),
            ("https://k@host:99999999/1", "port 99999999 is out of range"),
        ]
        for (text, reason) in cases {
            XCTAssertThrowsError(try SentryDSN(text), text) { error in
                XCTAssertTrue("\(error)".contains(reason), "\(text): \(error)")
                XCTAssertTrue("\(error)".hasPrefix("invalid Sentry DSN '\(text)'"), "\(error)")
            }
        }
    }
}
