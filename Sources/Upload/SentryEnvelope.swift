// SentryEnvelope: the bytes of a Sentry envelope (develop-docs "Envelopes"), a strict parser of
// them, a session update, and the DSN that says where an envelope goes — the first part of
// uploading (issue 16); nothing here opens a connection.
//
// The grammar: `Envelope = Headers {"\n" Item} ["\n"]`, `Item = Headers "\n" Payload`; headers
// are one line of compact JSON. We always write `length` on every item (Sentry requires it when
// a payload holds a newline, which a minidump does), so the writer never depends on the
// payload's content. The parser is stricter than Relay, on purpose, because it checks our own
// writer in tests: every item must carry `length`, the payload must be followed by "\n" or the
// end, headers must be JSON objects, and the envelope's `event_id` must be 32 hex digits. Items
// of unknown type are kept, as the protocol asks.

import FoundationEssentials
import ReportModel

public struct SentryEnvelope: Sendable, Equatable {
    /// One item: its headers (`type`, `length` and the rest) and its payload bytes.
    public struct Item: Sendable, Equatable {
        public var type: String
        /// `attachment` items: the name Sentry shows, and `event.minidump`, `event.attachment`….
        public var filename: String?
        public var attachmentType: String?
        public var contentType: String?
        public var payload: [UInt8]

        public init(
            type: String, payload: [UInt8], filename: String? = nil, attachmentType: String? = nil,
            contentType: String? = nil
        ) {
            self.type = type
            self.payload = payload
            self.filename = filename
            self.attachmentType = attachmentType
            self.contentType = contentType
        }

        /// The event's JSON.
        public static func event(_ json: Data) -> Item { Item(type: "event", payload: Array(json)) }

        /// The report's minidump: Sentry processes it with the event in the same envelope.
        public static func minidump(_ bytes: [UInt8], filename: String = "minidump.dmp") -> Item {
            Item(type: "attachment", payload: bytes, filename: filename, attachmentType: "event.minidump")
        }

        /// Any other file (an attachment the program asked for).
        public static func attachment(_ bytes: [UInt8], filename: String, contentType: String? = nil) -> Item {
            Item(
                type: "attachment", payload: bytes, filename: filename, attachmentType: "event.attachment",
                contentType: contentType)
        }

        /// A session update.
        public static func session(_ session: SentrySession) throws -> Item {
            Item(type: "session", payload: Array(try session.jsonData()))
        }

        var headerObject: [String: Any] {
            var headers: [String: Any] = ["type": type, "length": payload.count]
            if let filename { headers["filename"] = filename }
            if let attachmentType { headers["attachment_type"] = attachmentType }
            if let contentType { headers["content_type"] = contentType }
            return headers
        }
    }

    /// The envelope's headers.
    public var eventID: String?
    /// RFC 3339 UTC, set by the caller at the moment of sending (never cached: Sentry uses it to
    /// correct the client's clock).
    public var sentAt: String?
    public var dsn: String?
    public var sdkName: String?
    public var sdkVersion: String?
    public var items: [Item]

    public init(
        eventID: String?, sentAt: String?, dsn: String? = nil, sdkName: String? = SentryEvent.sdkName,
        sdkVersion: String?, items: [Item]
    ) {
        self.eventID = eventID
        self.sentAt = sentAt
        self.dsn = dsn
        self.sdkName = sdkName
        self.sdkVersion = sdkVersion
        self.items = items
    }

    /// A file sent with a report: its name, its bytes, and its content type when it has one.
    public struct Attachment: Sendable, Equatable {
        public var filename: String
        public var bytes: [UInt8]
        public var contentType: String?

        public init(filename: String, bytes: [UInt8], contentType: String? = nil) {
            self.filename = filename
            self.bytes = bytes
            self.contentType = contentType
        }
    }

    /// The envelope of one report: its event, the minidump (if any) as `event.minidump`, other
    /// attachments as `event.attachment`, and the session update (if any).
    public static func report(
        eventJSON: Data, eventID: String, sentAt: String, dsn: SentryDSN?, sdkVersion: String, minidump: [UInt8]?,
        attachments: [Attachment] = [], session: SentrySession? = nil
    ) throws -> SentryEnvelope {
        var items = [Item.event(eventJSON)]
        if let minidump { items.append(.minidump(minidump)) }
        items += attachments.map {
            Item.attachment($0.bytes, filename: $0.filename, contentType: $0.contentType ?? contentType(of: $0.filename))
        }
        if let session { items.append(try .session(session)) }
        return SentryEnvelope(
            eventID: eventID, sentAt: sentAt, dsn: dsn?.string, sdkVersion: sdkVersion, items: items)
    }

    /// An attachment's content type, where its name says it is text (`system.log`, a program's
    /// `app.log` or `notes.txt`): `text/plain`, so that Sentry shows it inline; nil (Sentry's
    /// default, application/octet-stream) for anything else.
    static func contentType(of filename: String) -> String? {
        filename.hasSuffix(".log") || filename.hasSuffix(".txt") ? "text/plain" : nil
    }

    /// The envelope's bytes: the header line, then each item's header line, payload and "\n".
    public func serialized() throws -> [UInt8] {
        var headers: [String: Any] = [:]
        if let eventID { headers["event_id"] = eventID }
        if let sentAt { headers["sent_at"] = sentAt }
        if let dsn { headers["dsn"] = dsn }
        if sdkName != nil || sdkVersion != nil {
            headers["sdk"] = ["name": sdkName, "version": sdkVersion].compactMapValues { $0 }
        }
        var bytes = try Self.line(headers)
        for item in items {
            bytes.append(UInt8(ascii: "\n"))
            bytes += try Self.line(item.headerObject)
            bytes.append(UInt8(ascii: "\n"))
            bytes += item.payload
        }
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    /// Compact JSON on one line. Control characters are escaped, so a header can never hold a
    /// raw newline.
    static func line(_ object: [String: Any]) throws -> [UInt8] {
        try JSONObject.data(object)
    }

    // MARK: the strict parser

    /// Parses `bytes` strictly (see the file comment); throws `SentryError.malformedEnvelope`
    /// naming what was wrong and where.
    public static func parse(_ bytes: [UInt8]) throws -> SentryEnvelope {
        var position = 0
        func fail(_ what: String) -> SentryError { .malformedEnvelope("\(what) (at byte \(position))") }
        func headerLine() throws -> [String: Any] {
            guard let end = bytes[position...].firstIndex(of: UInt8(ascii: "\n")) ?? (position < bytes.count ? bytes.count : nil)
            else { throw fail("a header line was expected, the envelope ended") }
            let line = bytes[position..<end]
            guard !line.isEmpty, let object = JSONObject.parseObject(line) else {
                throw fail("a header line is not a JSON object")
            }
            position = end
            return object
        }

        let headers = try headerLine()
        var envelope = SentryEnvelope(eventID: nil, sentAt: nil, sdkName: nil, sdkVersion: nil, items: [])
        envelope.eventID = try string(headers, "event_id", fail)
        if let eventID = envelope.eventID, !isEventID(eventID) {
            throw fail("event_id \(eventID) is not 32 hex digits")
        }
        envelope.sentAt = try string(headers, "sent_at", fail)
        envelope.dsn = try string(headers, "dsn", fail)
        if let sdk = headers["sdk"] {
            guard let sdk = sdk as? [String: Any] else { throw fail("sdk is not an object") }
            envelope.sdkName = try string(sdk, "name", fail)
            envelope.sdkVersion = try string(sdk, "version", fail)
        }

        while position < bytes.count {
            // After the envelope's headers or an item's payload: "\n", then the end or an item.
            position += 1
            if position == bytes.count { break }
            let itemHeaders = try headerLine()
            guard let type = try string(itemHeaders, "type", fail) else { throw fail("an item has no type") }
            guard let length = integer(itemHeaders["length"]), length >= 0 else {
                throw fail("item \(type) has no valid length")
            }
            guard position < bytes.count else { throw fail("item \(type) has no payload line") }
            position += 1
            guard length <= bytes.count - position else {
                throw fail("item \(type) says length \(length), only \(bytes.count - position) bytes follow")
            }
            let payload = Array(bytes[position..<position + length])
            position += length
            guard position == bytes.count || bytes[position] == UInt8(ascii: "\n") else {
                throw fail("item \(type)'s payload is not followed by a newline or the end")
            }
            envelope.items.append(
                Item(
                    type: type, payload: payload, filename: try string(itemHeaders, "filename", fail),
                    attachmentType: try string(itemHeaders, "attachment_type", fail),
                    contentType: try string(itemHeaders, "content_type", fail)))
        }
        if envelope.items.filter({ $0.type == "event" }).count > 1 { throw fail("more than one event item") }
        if envelope.items.contains(where: { $0.type == "event" }) && envelope.eventID == nil {
            throw fail("an envelope with an event has no event_id")
        }
        for item in envelope.items where item.type == "attachment" && item.filename == nil {
            throw fail("an attachment item has no filename")
        }
        return envelope
    }

    /// A JSON integer (a JSON boolean is not one).
    static func integer(_ value: Any?) -> Int? { value as? Int }

    static func string(_ object: [String: Any], _ key: String, _ fail: (String) -> SentryError) throws -> String? {
        guard let value = object[key] else { return nil }
        guard let text = value as? String else { throw fail("\(key) is not a string") }
        return text
    }

    static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    /// 32 lowercase hex digits, Sentry's event id without dashes.
    public static func isEventID(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { isDigit($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }
}

/// A session update (develop-docs "Sessions"): sent in the crash's envelope so the release's
/// crash-free rate counts the run. Built by the caller from the run's record (RunHistory keeps
/// one per run; `event.session` names it).
public struct SentrySession: Sendable, Equatable {
    public enum Status: String, Sendable {
        case ok, exited, crashed, abnormal
    }

    public var sid: String
    public var status: Status
    /// RFC 3339 UTC: when the run began, and when this update was made.
    public var started: String
    public var timestamp: String
    /// Seconds; Sentry counts it for `exited` sessions only.
    public var duration: Double?
    /// Errors in the run; a crash counts as one (Sentry would force it to at least one).
    public var errors: Int
    /// The first update of a session. crashport's watcher sees the whole run, so a session it
    /// sends is usually also its last: `init` true with a terminal status.
    public var initial: Bool
    /// Required by Sentry: a session without a release is dropped.
    public var release: String
    public var environment: String?

    public init(
        sid: String, status: Status, started: String, timestamp: String, duration: Double? = nil, errors: Int = 0,
        initial: Bool = true, release: String, environment: String? = nil
    ) {
        self.sid = sid
        self.status = status
        self.started = started
        self.timestamp = timestamp
        self.duration = duration
        self.errors = status == .crashed ? max(errors, 1) : errors
        self.initial = initial
        self.release = release
        self.environment = environment
    }

    public var jsonObject: [String: Any] {
        var object: [String: Any] = [
            "sid": sid, "status": status.rawValue, "started": started, "timestamp": timestamp, "errors": errors,
            "init": initial,
        ]
        if let duration { object["duration"] = duration }
        object["attrs"] = ["release": release, "environment": environment].compactMapValues { $0 }
        return object
    }

    public func jsonData() throws -> Data {
        Data(try JSONObject.data(jsonObject))
    }
}

/// A Sentry DSN, `SCHEME://PUBLIC_KEY[:SECRET]@HOST[:PORT][/PATH]/PROJECT_ID`, checked when it
/// is configured, so a typo is an error then and not a lost report at crash time.
public struct SentryDSN: Sendable, Equatable {
    public var string: String
    public var scheme: String
    public var publicKey: String
    public var host: String
    public var port: Int?
    /// Path before the project id, "" or "/sentry" for a Sentry behind a prefix.
    public var pathPrefix: String
    public var projectID: String

    public init(_ text: String) throws {
        func bad(_ why: String) -> SentryError { .invalidDSN(text, why) }
        string = text
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw bad("it is not a URL")
        }
        guard scheme == "https" || scheme == "http" else { throw bad("the scheme must be https or http, not \(scheme)") }
        guard let user = components.user, !user.isEmpty else { throw bad("it has no public key (https://KEY@host/PROJECT)") }
        guard let host = components.host, !host.isEmpty else { throw bad("it has no host") }
        guard components.query == nil, components.fragment == nil else { throw bad("it has a query or fragment") }
        let path = components.path
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard path.hasPrefix("/"), let last = parts.last, !last.isEmpty, last.utf8.allSatisfy(SentryEnvelope.isDigit)
        else { throw bad("its path must end in the numeric project id (https://KEY@host/PROJECT)") }
        if let port = components.port, !(1...65535).contains(port) { throw bad("its port \(port) is out of range") }
        self.scheme = scheme
        publicKey = user
        self.host = host
        port = components.port
        pathPrefix = String(path.dropLast(last.count + 1))
        projectID = String(last)
    }

    var origin: String {
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme)://\(bracketed)" + (port.map { ":\($0)" } ?? "")
    }

    /// Where envelopes are posted: `…/api/PROJECT/envelope/`.
    public var envelopeURL: String { origin + pathPrefix + "/api/\(projectID)/envelope/" }

    /// Where a bare minidump can be posted instead (Sentry's minidump endpoint).
    public var minidumpURL: String { origin + pathPrefix + "/api/\(projectID)/minidump/?sentry_key=\(publicKey)" }

    /// The `X-Sentry-Auth` header's value, as sentry-native sends it.
    public func authHeader(clientVersion: String) -> String {
        "Sentry sentry_key=\(publicKey), sentry_version=7, sentry_client=\(SentryEvent.sdkName)/\(clientVersion)"
    }
}

/// What can be wrong on the way to Sentry.
public enum SentryError: Error, Equatable, CustomStringConvertible {
    /// A DSN that cannot be used: the text, and why.
    case invalidDSN(String, String)
    /// An envelope that does not follow the grammar: what was wrong, where.
    case malformedEnvelope(String)

    public var description: String {
        switch self {
        case .invalidDSN(let text, let why): return "invalid Sentry DSN '\(text)': \(why)"
        case .malformedEnvelope(let why): return "malformed Sentry envelope: \(why)"
        }
    }
}
