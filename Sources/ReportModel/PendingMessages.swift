// PendingMessages: a program's consent dialog over the wire. crashport_pending_list asks its
// watcher (PendingQuery, with a reply fd) for its reports awaiting consent and gets them back
// (PendingList); crashport_send_report and crashport_discard_report decide for one report
// (ConsentReportMessage). Fixed layouts from crashport_protocol.h, every text bounded and
// NUL-terminated.

import CCrashPortProtocol

/// crashport_pending_list's query (cp_pending_query): its header, its flags (0, or
/// CP_QUERY_SEND_STATES from crashport_report_states) and a reply fd.
public enum PendingQuery {
    /// Checks a query; whether it asks for the send states.
    @discardableResult
    public static func check(_ bytes: [UInt8]) throws -> Bool {
        let header = try WireHeader(bytes: bytes)
        guard header.type == CP_MSG_PENDING_QUERY.rawValue else { throw WireError.unexpectedType(header.type) }
        guard bytes.count == MemoryLayout<cp_pending_query>.size else {
            throw WireError.badField(
                "a pending-reports query of \(bytes.count) bytes (expected \(MemoryLayout<cp_pending_query>.size))")
        }
        let flags = WireBytes(bytes: bytes).u32(Layout.offset(\cp_pending_query.flags))
        guard flags & ~CP_QUERY_SEND_STATES == 0, WireBytes(bytes: bytes).u32(Layout.offset(\cp_pending_query.reserved)) == 0
        else {
            throw WireError.badField("a pending-reports query whose flags or reserved bytes are unknown")
        }
        return flags == CP_QUERY_SEND_STATES
    }

    public static func encode(sendStates: Bool = false) -> [UInt8] {
        var message = MessageEncoder(type: CP_MSG_PENDING_QUERY.rawValue, size: MemoryLayout<cp_pending_query>.size)
        message.put32(sendStates ? CP_QUERY_SEND_STATES : 0, at: Layout.offset(\cp_pending_query.flags))
        return message.bytes
    }
}

/// One report awaiting consent, as a consent dialog shows it (cp_pending_entry).
public struct PendingEntry: Equatable, Sendable {
    public var id: String
    public var title: String
    /// crash, termination, error, hang, or empty.
    public var kind: String
    /// When it happened, Unix milliseconds; 0 unknown.
    public var timeMilliseconds: Int64

    public init(id: String, title: String, kind: String, timeMilliseconds: Int64) {
        self.id = id
        self.title = title
        self.kind = kind
        self.timeMilliseconds = timeMilliseconds
    }
    /// Reads cp_pending_entry at `base`, each text through `text(offset, capacity)`.
    init(bytes: [UInt8], at base: Int, text: (Int, Int) throws -> String) rethrows {
        func at(_ path: PartialKeyPath<cp_pending_entry>) -> Int { base + Layout.offset(path) }
        self.init(
            id: try text(at(\cp_pending_entry.id), Int(CP_PENDING_ID_SIZE)),
            title: try text(at(\cp_pending_entry.title), Int(CP_PENDING_TITLE_SIZE)),
            kind: try text(at(\cp_pending_entry.kind), Int(CP_PENDING_KIND_SIZE)),
            timeMilliseconds: Int64(bitPattern: WireBytes(bytes: bytes).u64(at(\cp_pending_entry.time_ms))))
    }

    /// Writes cp_pending_entry at `base` of a zeroed message.
    func encode(into message: inout MessageEncoder, at base: Int) {
        func at(_ path: PartialKeyPath<cp_pending_entry>) -> Int { base + Layout.offset(path) }
        message.putText(id, at: at(\cp_pending_entry.id), capacity: Int(CP_PENDING_ID_SIZE))
        message.putText(title, at: at(\cp_pending_entry.title), capacity: Int(CP_PENDING_TITLE_SIZE))
        message.putText(kind, at: at(\cp_pending_entry.kind), capacity: Int(CP_PENDING_KIND_SIZE))
        message.put64(UInt64(bitPattern: timeMilliseconds), at: at(\cp_pending_entry.time_ms))
    }
}

/// The watcher's answer to a PendingQuery (cp_pending_list): at most `capacity` entries, newest
/// first, and how many await in all.
public struct PendingList: Equatable, Sendable {
    public static let capacity = Int(CP_PENDING_MAX)
    public var entries: [PendingEntry]
    public var total: Int

    public init(entries: [PendingEntry], total: Int) {
        self.entries = Array(entries.prefix(Self.capacity))
        self.total = max(total, self.entries.count)
    }

    static let entrySize = MemoryLayout<cp_pending_entry>.size
    static let entriesOffset = Layout.offset(\cp_pending_list.entries)

    public init(bytes: [UInt8]) throws {
        let header = try WireHeader(bytes: bytes)
        guard header.type == CP_MSG_PENDING_LIST.rawValue else { throw WireError.unexpectedType(header.type) }
        guard bytes.count == MemoryLayout<cp_pending_list>.size else {
            throw WireError.badField(
                "a pending-reports list of \(bytes.count) bytes (expected \(MemoryLayout<cp_pending_list>.size))")
        }
        let wire = WireBytes(bytes: bytes)
        let count = Int(wire.u32(Layout.offset(\cp_pending_list.count)))
        guard count <= Self.capacity else { throw WireError.badField("a pending-reports list of \(count) entries") }
        func text(_ offset: Int, _ capacity: Int) throws -> String {
            let field = bytes[offset..<offset + capacity]
            guard let end = field.firstIndex(of: 0) else {
                throw WireError.badField("a pending-reports list with a text that is not NUL-terminated")
            }
            return String(decoding: field[offset..<end], as: UTF8.self)
        }
        entries = try (0..<count).map { index in
            try PendingEntry(bytes: bytes, at: Self.entriesOffset + index * Self.entrySize, text: text)
        }
        total = max(Int(wire.u32(Layout.offset(\cp_pending_list.total))), count)
    }

    public func encode() -> [UInt8] {
        var message = MessageEncoder(type: CP_MSG_PENDING_LIST.rawValue, size: MemoryLayout<cp_pending_list>.size)
        message.put32(UInt32(entries.count), at: Layout.offset(\cp_pending_list.count))
        message.put32(UInt32(clamping: total), at: Layout.offset(\cp_pending_list.total))
        for (index, entry) in entries.prefix(Self.capacity).enumerated() {
            entry.encode(into: &message, at: Self.entriesOffset + index * Self.entrySize)
        }
        return message.bytes
    }
}

/// crashport_send_report or crashport_discard_report (cp_consent_report): one report's consent.
public struct ConsentReportMessage: Equatable, Sendable {
    public var send: Bool
    public var id: String

    public init(send: Bool, id: String) {
        self.send = send
        self.id = id
    }

    public init(bytes: [UInt8]) throws {
        let header = try WireHeader(bytes: bytes)
        guard header.type == CP_MSG_CONSENT_REPORT.rawValue else { throw WireError.unexpectedType(header.type) }
        guard bytes.count == MemoryLayout<cp_consent_report>.size else {
            throw WireError.badField(
                "a report's consent of \(bytes.count) bytes (expected \(MemoryLayout<cp_consent_report>.size))")
        }
        let wire = WireBytes(bytes: bytes)
        let action = wire.u32(Layout.offset(\cp_consent_report.action))
        let reserved = wire.u32(Layout.offset(\cp_consent_report.reserved))
        guard action == CP_CONSENT_SEND || action == CP_CONSENT_DISCARD, reserved == 0 else {
            throw WireError.badField("a report's consent with action \(action) and reserved \(reserved)")
        }
        let start = Layout.offset(\cp_consent_report.id)
        let field = bytes[start..<start + Int(CP_PENDING_ID_SIZE)]
        guard let end = field.firstIndex(of: 0), end > start,
            field[start..<end].allSatisfy({ Self.idBytes.contains($0) })
        else {
            throw WireError.badField("a report's consent whose id is empty, not NUL-terminated or not a report id")
        }
        send = action == CP_CONSENT_SEND
        id = String(decoding: field[start..<end], as: UTF8.self)
    }

    /// What a report id is made of (ReportStore's ids: a time, the pid, a counter).
    static let idBytes = Set(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.".utf8))

    public func encode() -> [UInt8] {
        var message = MessageEncoder(
            type: CP_MSG_CONSENT_REPORT.rawValue, size: MemoryLayout<cp_consent_report>.size)
        message.put32(send ? CP_CONSENT_SEND : CP_CONSENT_DISCARD, at: Layout.offset(\cp_consent_report.action))
        let bytes = Array(id.utf8.prefix(Int(CP_PENDING_ID_SIZE) - 1))
        let offset = Layout.offset(\cp_consent_report.id)
        message.bytes.replaceSubrange(offset..<offset + bytes.count, with: bytes)
        return message.bytes
    }
}

/// What became of a report's upload (cp_send_state): the first that applies.
public struct SendState: Equatable, Sendable {
    public enum Kind: UInt32, Sendable {
        case none = 0, awaitingConsent = 1, pending = 2, sent = 3, failed = 4, notSent = 5
    }

    public var kind: Kind
    /// When it was sent, Unix milliseconds; 0 when not.
    public var sentMilliseconds: Int64
    /// The server's id for it once sent.
    public var serverID: String
    /// Why it failed, waits or is not sent.
    public var reason: String

    public init(_ kind: Kind = .none, sentMilliseconds: Int64 = 0, serverID: String = "", reason: String = "") {
        self.kind = kind
        self.sentMilliseconds = sentMilliseconds
        self.serverID = serverID
        self.reason = reason
    }

    static let serverIDBytes = 64
    static let reasonBytes = Int(CP_SEND_REASON_BYTES)

    /// Writes cp_send_state at `base` of a zeroed message.
    func encode(into message: inout MessageEncoder, at base: Int) {
        func at(_ path: PartialKeyPath<cp_send_state>) -> Int { base + Layout.offset(path) }
        message.put32(kind.rawValue, at: at(\cp_send_state.state))
        message.put64(UInt64(bitPattern: sentMilliseconds), at: at(\cp_send_state.sent_ms))
        message.putText(serverID, at: at(\cp_send_state.server_id), capacity: Self.serverIDBytes)
        message.putText(reason, at: at(\cp_send_state.reason), capacity: Self.reasonBytes)
    }

    /// Reads cp_send_state at `base`: an unknown state is `none`, texts end at their NUL or field.
    init(bytes: [UInt8], at base: Int) {
        func at(_ path: PartialKeyPath<cp_send_state>) -> Int { base + Layout.offset(path) }
        func text(_ offset: Int, _ capacity: Int) -> String {
            String(decoding: bytes[offset..<offset + capacity].prefix { $0 != 0 }, as: UTF8.self)
        }
        let wire = WireBytes(bytes: bytes)
        self.init(
            Kind(rawValue: wire.u32(at(\cp_send_state.state))) ?? .none,
            sentMilliseconds: Int64(bitPattern: wire.u64(at(\cp_send_state.sent_ms))),
            serverID: text(at(\cp_send_state.server_id), Self.serverIDBytes),
            reason: text(at(\cp_send_state.reason), Self.reasonBytes))
    }

    /// The fields CRASHPORT_LAST_RUN_DETAIL appends: "state sent_ms", then, after a tab each,
    /// the server's id and the reason (tabs and newlines made spaces, each cut to its field).
    public var environmentText: String {
        ["\(kind.rawValue) \(sentMilliseconds)", serverID.fieldText(Self.serverIDBytes), reason.fieldText(Self.reasonBytes)]
            .joined(separator: "\t")
    }
}

extension String {
    /// The text as a fixed field the stub reads holds it (WireText.field).
    fileprivate func fieldText(_ capacity: Int) -> String {
        String(decoding: WireText.field(self, capacity: capacity), as: UTF8.self)
    }
}

/// The answer to a query with CP_QUERY_SEND_STATES (cp_report_states): the program's recent
/// reports, newest first, each with what became of its upload (crashport_report_states).
public struct ReportStateList: Equatable, Sendable {
    public static let capacity = Int(CP_PENDING_MAX)
    public var entries: [(report: PendingEntry, send: SendState)]
    public var total: Int

    public init(entries: [(report: PendingEntry, send: SendState)], total: Int) {
        self.entries = Array(entries.prefix(Self.capacity))
        self.total = max(total, self.entries.count)
    }

    public static func == (left: ReportStateList, right: ReportStateList) -> Bool {
        left.total == right.total && left.entries.count == right.entries.count
            && zip(left.entries, right.entries).allSatisfy { $0.report == $1.report && $0.send == $1.send }
    }

    static let entrySize = MemoryLayout<cp_report_state>.size
    static let entriesOffset = Layout.offset(\cp_report_states.entries)

    public func encode() -> [UInt8] {
        var message = MessageEncoder(type: CP_MSG_REPORT_STATES.rawValue, size: MemoryLayout<cp_report_states>.size)
        message.put32(UInt32(entries.count), at: Layout.offset(\cp_report_states.count))
        message.put32(UInt32(clamping: total), at: Layout.offset(\cp_report_states.total))
        for (index, entry) in entries.prefix(Self.capacity).enumerated() {
            let base = Self.entriesOffset + index * Self.entrySize
            entry.report.encode(into: &message, at: base + Layout.offset(\cp_report_state.report))
            entry.send.encode(into: &message, at: base + Layout.offset(\cp_report_state.send))
        }
        return message.bytes
    }

    public init(bytes: [UInt8]) throws {
        let header = try WireHeader(bytes: bytes)
        guard header.type == CP_MSG_REPORT_STATES.rawValue else { throw WireError.unexpectedType(header.type) }
        guard bytes.count == MemoryLayout<cp_report_states>.size else {
            throw WireError.badField("a report-states list of \(bytes.count) bytes")
        }
        let wire = WireBytes(bytes: bytes)
        let count = Int(wire.u32(Layout.offset(\cp_report_states.count)))
        guard count <= Self.capacity else { throw WireError.badField("a report-states list of \(count) entries") }
        func text(_ offset: Int, _ capacity: Int) -> String {
            String(decoding: bytes[offset..<offset + capacity].prefix { $0 != 0 }, as: UTF8.self)
        }
        entries = (0..<count).map { index in
            let base = Self.entriesOffset + index * Self.entrySize
            return (
                PendingEntry(bytes: bytes, at: base + Layout.offset(\cp_report_state.report), text: text),
                SendState(bytes: bytes, at: base + Layout.offset(\cp_report_state.send))
            )
        }
        total = max(Int(wire.u32(Layout.offset(\cp_report_states.total))), count)
    }
}
