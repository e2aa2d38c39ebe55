// Uploader: one pass of `crashport upload` over a reports directory: every report that is due
// for a destination is sent there, and its state recorded before the next request (Upload.swift
// has the destinations, the state file and the policy).

import BoundedBytes
import FoundationEssentials
import Processes
import ReportModel
import Store

#if canImport(Glibc)
import Glibc
#endif

public struct Uploader {
    public var store: ReportStore
    public var destinations: [UploadDestination]
    public var policy = UploadPolicy()
    /// Skip crashport's own backoff (not a server's Retry-After or rate limit).
    public var now = false
    public var dryRun = false
    public var caFile: String?
    public var timeoutMilliseconds = 30_000
    /// crashport's version, for Sentry's `sdk` and `X-Sentry-Auth`.
    public var clientVersion: String
    /// The deployment environment for Sentry (CRASHPORT_ENVIRONMENT), nil: from annotations.
    public var environment: String?
    /// Send the arguments and home-directory user names too (UploadPrivacy).
    public var sendPII = false
    /// Whether each frame's variables (event.json's `vars`: the program's data) go to Sentry.
    public var sendVariables = false
    /// An executable that sees each request's JSON first and may edit or drop it.
    public var beforeSend: String?
    /// An executable told what came of each attempt (AfterSend.swift).
    public var afterSend: AfterSend?
    public var say: (String) -> Void = { print($0) }
    public var clock: () -> Date = Date.init

    public init(store: ReportStore, destinations: [UploadDestination], clientVersion: String) {
        self.store = store
        self.destinations = destinations
        self.clientVersion = clientVersion
    }

    /// What one pass did, counted per report and destination.
    public struct Outcome: Equatable {
        public var sent = 0
        public var retrying = 0
        public var failed = 0
        public var notDue = 0
        public var done = 0
        /// Held by consent: awaiting `crashport send` (ask), or never to be sent (never, discarded).
        public var awaitingConsent = 0
        public var keptLocally = 0
        /// Reports between a sidecar's two steps (Event.stage), left for their second.
        public var stillCaptured: [String] = []
    }

    /// Sends what is due, oldest report first.
    /// The files upload keeps in a reports directory beside the reports (not reports, not foreign).
    public static let fileNames: Set<String> = [ConsentSettings.fileName, lockName, logName]
    static let lockName = ReportStore.uploadLockName
    public static let logName = ReportStore.uploadLogName

    public func run() -> Outcome {
        var outcome = Outcome()
        // One pass at a time per reports directory: two would send the same report twice. The
        // lock file is the user's to replace: never followed, never waited on, regular or refused.
        let lock = open(store.root + "/" + Self.lockName, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        defer { if lock >= 0 { close(lock) } }
        var info = stat()
        guard lock >= 0, fstat(lock, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            let why = lock >= 0 ? "\(Self.lockName) is not a regular file" : String(cString: strerror(errno))
            say("cannot use \(store.root) (\(why)): nothing sent")
            return outcome
        }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            say("another crashport upload is working on \(store.root); it sends what is due")
            return outcome
        }
        let consent: ConsentSettings
        do {
            consent = try ConsentSettings.read(root: store.root)
        } catch {
            say("\(error); nothing is sent until it is fixed (crashport consent writes it anew)")
            return outcome
        }
        // Reports written while a pass runs are taken too: a watcher starts an upload after each
        // report, and one that finds this pass holding the lock leaves its report to it.
        // A storm's reports are on disk before their second steps (Event.stage): the pass looks
        // again for those, every 100 ms for up to `capturedPolls` looks, and leaves the rest
        // to the next pass.
        var seen = Set<String>()
        var polls = 0
        var left = Set<String>()  // still at their first step when last looked at
        while case let fresh = store.ids().reversed().filter({ !seen.contains($0) }), !fresh.isEmpty {
            seen.formUnion(fresh)
            // The runs on record, by session id: a crash's envelope carries its run's end.
            let sessions = Dictionary(
                RunHistory(store: store).sessions().map { ($0.sid, $0) }, uniquingKeysWith: { _, last in last })
            outcome.stillCaptured = []
            pass(over: fresh, consent: consent, sessions: sessions, outcome: &outcome)
            left.subtract(fresh)
            left.formUnion(outcome.stillCaptured)
            if !outcome.stillCaptured.isEmpty && polls < Self.capturedPolls {
                polls += 1
                seen.subtract(outcome.stillCaptured)
                usleep(100_000)
            }
        }
        outcome.stillCaptured = left.sorted()
        outcome.notDue += left.count
        for id in outcome.stillCaptured { say("\(id): still being symbolicated; sent once it is") }
        return outcome
    }

    /// How long a report left at its first step (Event.stage) waits for its second.
    static let capturedStageWait: TimeInterval = 600
    /// How many times a pass looks again, 100 ms apart, for reports at their first step.
    static let capturedPolls = 50

    /// Sends what is due of these reports.
    func pass(over ids: [String], consent: ConsentSettings, sessions: [String: SessionRecord], outcome: inout Outcome) {
        for id in ids {
            let directory = store.path(of: id)
            guard let (readState, event) = sendable(id, directory: directory, consent: consent, outcome: &outcome) else {
                continue
            }
            var state = readState
            for destination in destinations {
                deliver(
                    id, to: destination, directory: directory, state: &state, event: event, sessions: sessions,
                    outcome: &outcome)
            }
        }
    }

    /// A report's upload state and event, when some destination may still be sent it; nil
    /// (counted in `outcome`) when they cannot be read, it was sent everywhere, or the user's
    /// say keeps it here: never, discarded, or asked and not answered yet.
    func sendable(
        _ id: String, directory: String, consent: ConsentSettings, outcome: inout Outcome
    ) -> (
        UploadState, Event
    )? {
        let state: UploadState
        do {
            state = try UploadState.read(directory: directory)
        } catch {
            say("\(id): \(error); not sending it")
            outcome.failed += 1
            return nil
        }
        let unsent = destinations.contains { state.destinations[$0.key]?.status ?? .pending == .pending }
        guard unsent else {
            outcome.done += destinations.count
            return nil
        }
        guard let event = try? store.event(id: id) else {
            say("\(id): its event.json cannot be read; not sending it")
            outcome.failed += 1
            return nil
        }
        // A sidecar's report between its two steps (Event.stage): its full event follows within
        // moments, and the watcher starts a pass when it does. One left so for 10 minutes (its
        // watcher stopped first) goes as it is: its minidump is whole.
        if event.stage == Event.capturedStage, let age = Self.age(of: event, now: clock().timeIntervalSince1970),
            age < Self.capturedStageWait
        {
            outcome.stillCaptured.append(id)  // counted as not due once the pass is over
            return nil
        }
        let choice = consent.choice(for: event.process?.executable)
        if state.consent == .denied || choice == .never {
            if dryRun { say("\(id): kept here (\(state.consent == .denied ? "discarded" : "consent: never"))") }
            outcome.keptLocally += 1
            return nil
        }
        if choice == .ask && state.consent != .granted {
            say("\(id): awaiting consent (crashport send \(id), or crashport discard \(id))")
            outcome.awaitingConsent += 1
            return nil
        }
        return (state, event)
    }

    /// One report to one destination, unless it is done there or not due yet: sent (with
    /// --dry-run, only said), or failed for good when too old or unsendable; its upload state
    /// written back, the outcome said, and then the after_send hook told.
    func deliver(
        _ id: String, to destination: UploadDestination, directory: String, state: inout UploadState, event: Event,
        sessions: [String: SessionRecord], outcome: inout Outcome
    ) {
        var entry = state.destinations[destination.key] ?? UploadState.Entry()
        let time = clock().timeIntervalSince1970
        guard entry.status == .pending else {
            outcome.done += 1
            return
        }
        if let notBefore = entry.notBefore, notBefore > time {
            say("\(id): \(destination.url) asked for no request before \(Self.format(notBefore)); waiting")
            outcome.notDue += 1
            return
        }
        if !now, let next = entry.nextAttempt, next > time {
            outcome.notDue += 1
            return
        }
        if let age = Self.age(of: event, now: time), age > policy.maximumAge {
            entry.status = .failed
            entry.lastError = "older than \(Int(policy.maximumAge / 86400)) days: not sent"
        } else {
            switch request(to: destination, id: id, directory: directory, event: event, sessions: sessions) {
            case .failure(let why):
                entry.status = .failed
                entry.lastError = why.description
            case .success(let request):
                if dryRun {
                    say("\(id): would send to \(destination.url): \(request.summary)")
                    return
                }
                send(request, to: destination, entry: &entry)
            }
        }
        state.destinations[destination.key] = entry
        do {
            try state.write(directory: directory)
        } catch {
            say("\(id): \(error)")
        }
        tell(id, entry: entry, destination: destination, outcome: &outcome)
        if let afterSend, !dryRun {
            let notice = AfterSend.Notice(
                reportID: id, report: directory, title: event.title, destination: destination, entry: entry)
            afterSend.run(notice).forEach(say)
        }
    }

    /// Says where a report stands with one destination after an attempt, and counts it.
    func tell(_ id: String, entry: UploadState.Entry, destination: UploadDestination, outcome: inout Outcome) {
        switch entry.status {
        case .sent:
            say("\(id): sent to \(destination.url)\(entry.serverID.map { " (\($0))" } ?? "")")
            outcome.sent += 1
        case .failed:
            say("\(id): \(destination.url): \(entry.lastError ?? "failed")")
            outcome.failed += 1
        case .pending:
            say(
                "\(id): \(destination.url): \(entry.lastError ?? "not sent"); attempt \(entry.attempts) of \(policy.maximumAttempts), next after \(Self.format(max(entry.nextAttempt ?? 0, entry.notBefore ?? 0)))"
            )
            outcome.retrying += 1
        }
    }

    /// One request, ready to send.
    struct Request {
        var headers: [String]
        var body: [UInt8]
        /// What it holds, for --dry-run.
        var summary: String
    }

    /// The request that delivers a report to a destination, or why there is none.
    func request(
        to destination: UploadDestination, id: String, directory: String, event: Event,
        sessions: [String: SessionRecord]
    ) -> Result<
        Request, UploadError
    > {
        // An OpenTelemetry collector takes the event alone: no minidump read.
        if case .otlp(let endpoint) = destination { return otlpRequest(to: endpoint, id: id, event: event) }
        // Through UserFile: the directory is its owner's to edit (no symlink followed, no FIFO
        // waited on, nothing past the bound read). Refused, a collector's upload fails with why
        // and Sentry's event goes without it.
        let read = Result { try UserFile.read(directory + "/minidump.dmp", limit: Self.maximumMinidumpSize) }
        let captured = (try? read.get()) ?? nil
        let minidump = sendPII ? captured : captured.map(UploadPrivacy.scrubbed(minidump:))
        switch destination {
        case .crashpad, .sentryMinidump:
            guard let minidump else {
                if case .failure(let why) = read { return .failure(UploadError("its minidump cannot be sent: \(why)")) }
                return .failure(UploadError("no minidump.dmp to send (a collector takes minidumps only)"))
            }
            var fields = CrashpadUpload.fields(for: event, reportID: id)
            if case .sentryMinidump = destination {
                // Sentry merges a `sentry` field's JSON into the event it makes of the minidump.
                let fragment = ["release": event.release, "environment": environment].compactMapValues { $0 }
                if !fragment.isEmpty, let json = try? JSONObject.data(fragment) {
                    fields.append(("sentry", String(decoding: json, as: UTF8.self)))
                }
            }
            if !sendPII { fields = fields.map { ($0.0, UploadPrivacy.scrubbed($0.1)) } }
            if let beforeSend {
                // The hook sees the fields as one JSON object, and answers with the ones to send.
                let object = Dictionary(fields, uniquingKeysWith: { _, last in last })
                switch UploadPrivacy.beforeSend(beforeSend, json: Data((try? JSONObject.data(object)) ?? [])) {
                case .failure(let why): return .failure(why)
                case .success(let answer):
                    let edited = JSONObject.parseObject(answer) ?? [:]
                    fields = edited.compactMap { key, value in (value as? String).map { (key, $0) } }.sorted { $0.0 < $1.0 }
                }
            }
            let (body, boundary) = CrashpadUpload.body(fields: fields, minidump: minidump, fileName: "\(id).dmp")
            return .success(
                gzipped(
                    Request(
                        headers: ["Content-Type: multipart/form-data; boundary=\(boundary)"], body: body,
                        summary:
                            "upload_file_minidump (\(minidump.count) bytes), \(fields.map { "\($0.0)=\($0.1)" }.joined(separator: ", "))"
                    )))
        case .sentry(let dsn):
            let system = minidump.flatMap { try? Minidump(bytes: $0) }.flatMap { SentryOperatingSystem(minidump: $0) }
            var options = SentryEvent.Options(sdkVersion: clientVersion, environment: environment, operatingSystem: system)
            options.includeVariables = sendVariables
            let eventID = SentryEvent.eventID(reportID: id)
            do {
                var payload: Any = SentryEvent.payload(for: event, options: options)
                if !sendPII { payload = UploadPrivacy.scrubbed(json: payload) }
                var eventJSON = Data(try JSONObject.data(payload))
                if let beforeSend {
                    switch UploadPrivacy.beforeSend(beforeSend, json: eventJSON) {
                    case .failure(let why): return .failure(why)
                    case .success(let answer): eventJSON = answer
                    }
                }
                let envelope = try SentryEnvelope.report(
                    eventJSON: eventJSON, eventID: eventID,
                    sentAt: Self.format(clock().timeIntervalSince1970), dsn: dsn, sdkVersion: clientVersion,
                    minidump: minidump, attachments: attachments(of: event, directory: directory),
                    session: session(for: event, reportID: id, in: sessions))
                return .success(
                    gzipped(
                        Request(
                            headers: [
                                "Content-Type: application/x-sentry-envelope",
                                "X-Sentry-Auth: \(dsn.authHeader(clientVersion: clientVersion))",
                            ], body: try envelope.serialized(),
                            summary:
                                "an envelope: event \(eventID)\(minidump.map { ", event.minidump (\($0.count) bytes)" } ?? "")"
                        )))
            } catch {
                return .failure(UploadError("cannot make its Sentry envelope: \(error)"))
            }
        case .otlp(let endpoint):
            return otlpRequest(to: endpoint, id: id, event: event)
        }
    }

    /// The OTLP/HTTP request that carries a report as one log record (OTLPEvent): through
    /// before_send as OTLP/JSON when there is a hook, then in the endpoint's encoding.
    func otlpRequest(to endpoint: OTLPEndpoint, id: String, event: Event) -> Result<Request, UploadError> {
        let observed = UInt64(max(0, clock().timeIntervalSince1970) * 1000) * 1_000_000
        let options = OTLPEvent.Options(
            crashportVersion: clientVersion, observedTimeUnixNano: observed, hostName: Self.hostName(),
            serviceName: endpoint.serviceName, resourceAttributes: endpoint.resourceAttributes, sendPII: sendPII)
        var logs = OTLPEvent.request(for: event, reportID: id, options: options)
        if let beforeSend {
            let json: Data
            do {
                json = Data(try JSONObject.data(logs.json))
            } catch {
                return .failure(UploadError("cannot make its OTLP request: \(error)"))
            }
            switch UploadPrivacy.beforeSend(beforeSend, json: json) {
            case .failure(let why): return .failure(why)
            case .success(let answer):
                do {
                    logs = try OTLPLogsRequest(json: JSONObject.parseObject(answer) ?? [:])
                } catch {
                    return .failure(
                        UploadError("before_send \(beforeSend) did not answer with an OTLP logs request (\(error)); not sent"))
                }
                guard logs.recordCount > 0 else {
                    return .failure(UploadError("before_send \(beforeSend) left no log record; not sent"))
                }
            }
        }
        let body: [UInt8]
        switch endpoint.encoding {
        case .protobuf: body = logs.protobuf
        case .json:
            do {
                body = try JSONObject.data(logs.json)
            } catch {
                return .failure(UploadError("cannot make its OTLP request: \(error)"))
            }
        }
        let request = Request(
            headers: ["Content-Type: \(endpoint.encoding.contentType)", "User-Agent: crashport/\(clientVersion)"]
                + endpoint.headers.map(\.line),
            body: body,
            summary:
                "\(logs.recordCount) log record(s), \(endpoint.encoding.rawValue) (\(body.count) bytes)\(endpoint.headers.isEmpty ? "" : ", headers " + endpoint.headers.map(\.name).joined(separator: ", "))"
        )
        return .success(endpoint.gzip ? gzipped(request) : request)
    }

    /// This machine's name (gethostname), for an OpenTelemetry resource's host.name.
    static func hostName() -> String? {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return nil }
        let text = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.isEmpty ? nil : text
    }

    /// The files the program attached (crashport_attach_file), as copied into the report: read
    /// from inside the report directory only, through UserFile (a name that leads out of it, a
    /// symlink or anything but a regular file is skipped: the directory is its owner's to edit),
    /// at most 20 MB in all, by name, with the content type an attachment from memory was given;
    /// the system's log only with --send-pii.
    func attachments(of event: Event, directory: String) -> [SentryEnvelope.Attachment] {
        var left = 20 << 20
        return (event.attachments ?? []).compactMap { record in
            // The system's log around the crash (the kernel's lines, the journal's) is the
            // machine's, not the program's: it goes only with --send-pii, as the paths and
            // arguments do.
            guard sendPII || record.scope != AttachmentRecord.systemScope else { return nil }
            guard let file = record.file, !file.hasPrefix("/"), !file.split(separator: "/").contains(".."),
                let bytes = (try? UserFile.read(directory + "/" + file, limit: left)) ?? nil
            else { return nil }
            left -= bytes.count
            return SentryEnvelope.Attachment(
                filename: file.pathBaseName, bytes: bytes,
                contentType: record.contentType.map(MemoryAttachment.checkedContentType))
        }
    }

    /// The largest minidump sent (read whole, then copied into the request): 256 MiB. Crashport's
    /// own are a few megabytes (5 MB for 500 threads; thousands of threads with deep stacks can
    /// pass it, and collectors refuse far less: Sentry takes 100 MB). A larger one fails its
    /// collectors' uploads with the reason; Sentry's event goes without it.
    static let maximumMinidumpSize = 256 << 20

    /// The end of the run this report ended, as Sentry's session update: only in the envelope of
    /// the report the run's record names (so a run is counted once), and only with a release
    /// (Sentry drops a session without one).
    func session(for event: Event, reportID: String, in sessions: [String: SessionRecord]) -> SentrySession? {
        guard let sid = event.session, let record = sessions[sid], record.reportID == reportID,
            let release = record.release ?? event.release, UUID(uuidString: sid) != nil,
            let started = Self.iso8601(record.started)
        else { return nil }
        let status: SentrySession.Status
        switch record.status {
        case .crashed: status = .crashed
        case .abnormal: status = .abnormal
        case .exited: status = .exited
        // Not a session of the release's health: Sentry counts no run for it.
        case .testCrash: return nil
        }
        return SentrySession(
            sid: sid, status: status, started: Self.format(started.timeIntervalSince1970),
            timestamp: Self.format(started.timeIntervalSince1970 + record.duration),
            duration: status == .exited ? record.duration : nil, errors: record.errors, release: release,
            environment: environment)
    }

    /// gzip, as Crashpad and sentry-native send their bodies (the plain body if zlib fails).
    func gzipped(_ request: Request) -> Request {
        var request = request
        request.summary += " (gzip)"
        guard let compressed = HTTPClient.gzip(request.body) else { return request }
        request.body = compressed
        request.headers += ["Content-Encoding: gzip"]
        return request
    }

    /// Sends one request and records what came of it in `entry`.
    func send(_ request: Request, to destination: UploadDestination, entry: inout UploadState.Entry) {
        entry.attempts += 1
        var timeout = timeoutMilliseconds
        if case .otlp(let endpoint) = destination, let own = endpoint.timeoutMilliseconds { timeout = own }
        let answer = HTTPClient.post(
            destination.url, headers: request.headers + ["Expect:"], body: request.body,
            timeoutMilliseconds: timeout, caFile: caFile)
        let after = clock().timeIntervalSince1970
        switch answer {
        case .failure(let failure):
            retryLater(&entry, because: failure.description, now: after)
        case .success(let response):
            // A server's own wait: Sentry's rate limits (on any answer), or Retry-After.
            if case .sentry = destination, let limits = response.headers["x-sentry-rate-limits"],
                let wait = SentryRateLimits.wait(limits, categories: ["error", "attachment"], policy: policy)
            {
                entry.notBefore = after + wait
            } else if let retryAfter = response.headers["retry-after"], response.status == 429 || response.status == 503 {
                entry.notBefore = after + policy.serverWait(retryAfter, now: Date(timeIntervalSince1970: after))
            } else if response.status == 429 {
                entry.notBefore = after + 60  // a bare 429: a minute, as Sentry's SDKs read it
            }
            switch response.status {
            case 200..<300:
                // OTLP's partial success: the collector took the request and rejected the record
                // in it, which the specification says not to send again.
                if case .otlp(let endpoint) = destination,
                    let partial = OTLPResponse.partialSuccess(response.bytes, json: endpoint.encoding == .json),
                    partial.rejected > 0
                {
                    entry.status = .failed
                    entry.lastError =
                        "HTTP \(response.status), but the collector rejected \(partial.rejected) log record(s)\(partial.message.isEmpty ? "" : ": " + partial.message): not retried"
                    entry.nextAttempt = nil
                    return
                }
                entry.status = .sent
                entry.serverID = Self.serverID(in: response.body, destination: destination)
                entry.sentAt = after
                entry.lastError = nil
                entry.nextAttempt = nil
            case 429, 500..<600:
                retryLater(&entry, because: "HTTP \(response.status)\(Self.excerpt(response, destination))", now: after)
            case 300..<400:
                entry.status = .failed
                entry.lastError =
                    "HTTP \(response.status), a redirect to \(response.headers["location"] ?? "nowhere"), which crashport does not follow (give the final URL): not retried"
            default:
                entry.status = .failed
                entry.lastError =
                    "HTTP \(response.status)\(Self.excerpt(response, destination))\(response.status == 413 ? " (too large for the server)" : ""): not retried"
            }
        }
    }

    /// The server's id for what it took: Sentry's `{"id": …}`, a collector's line; none from an
    /// OpenTelemetry collector (OTLP gives none).
    static func serverID(in body: String, destination: UploadDestination) -> String? {
        if case .otlp = destination { return nil }
        if case .sentry = destination {
            let object = JSONObject.parseObject(Array(body.utf8))
            return (object?["id"] as? String).flatMap { $0.isEmpty || $0.count > 64 ? nil : $0 }
        }
        return CrashpadUpload.serverID(in: body)
    }

    /// A transport failure or a server error: another attempt after the backoff, unless the
    /// attempts are spent.
    func retryLater(_ entry: inout UploadState.Entry, because why: String, now: Double) {
        entry.lastError = why
        if entry.attempts >= policy.maximumAttempts {
            entry.status = .failed
            entry.lastError = "\(why); gave up after \(entry.attempts) attempts"
        } else {
            entry.nextAttempt = now + policy.backoff(afterAttempts: entry.attempts)
        }
    }

    /// The report's age in seconds, from its timestamp.
    static func age(of event: Event, now: Double) -> Double? {
        guard let timestamp = event.timestamp,
            let date = iso8601(timestamp)
        else { return nil }
        return now - date.timeIntervalSince1970
    }

    static func format(_ seconds: Double) -> String {
        Date.ISO8601FormatStyle().format(Date(timeIntervalSince1970: seconds))
    }

    /// An ISO 8601 time with or without fractions of a second.
    static func iso8601(_ text: String) -> Date? {
        (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text))
            ?? (try? Date.ISO8601FormatStyle().parse(text))
    }

    /// ": <what the server said>": an OpenTelemetry collector's Status message (in protobuf or
    /// JSON, as its Content-Type says), else the body's first line; at most 200 characters.
    static func excerpt(_ response: HTTPResponse, _ destination: UploadDestination) -> String {
        if case .otlp = destination, let type = response.headers["content-type"]?.lowercased() {
            let message =
                type.contains("json")
                ? OTLPResponse.statusMessage(response.bytes, json: true)
                : type.contains("protobuf") ? OTLPResponse.statusMessage(response.bytes, json: false) : nil
            if let message { return excerpt(message) }
        }
        return excerpt(response.body)
    }

    /// ": <the server's first line>", at most 200 characters.
    static func excerpt(_ body: String) -> String {
        let line = body.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        return line.isEmpty ? "" : ": " + String(line.prefix(200))
    }
}

/// Sentry's `X-Sentry-Rate-Limits` (sidecar-upload-sessions.md §1c): `secs:cats:scope:…` entries,
/// comma-separated; an empty category list means every category.
public enum SentryRateLimits {
    /// The longest wait any entry imposes on one of `categories` (capped as Retry-After is);
    /// nil when none does.
    public static func wait(_ header: String, categories: Set<String>, policy: UploadPolicy) -> Double? {
        var longest: Double?
        for entry in header.split(separator: ",") {
            let fields = entry.split(separator: ":", omittingEmptySubsequences: false).map {
                $0.trimmed
            }
            guard let seconds = fields.first.flatMap(Double.init), seconds >= 0 else { continue }
            let named = fields.count > 1 ? fields[1].split(separator: ";").map(String.init) : []
            guard named.isEmpty || !categories.isDisjoint(with: named) else { continue }
            longest = max(longest ?? 0, min(seconds, policy.longestServerWait))
        }
        return longest
    }
}

/// Starts `crashport upload` for a reports directory in the background, after a report is
/// written (crashport run, the sidecar), when a destination is configured: its own session,
/// stdin from /dev/null, its output appended to .crashport-upload.log there. The watcher does not
/// wait for it.
public enum UploadSpawner {
    /// Whether the environment names a destination, or crashport.toml does (CRASHPORT_CONFIG,
    /// else the user's default file).
    public static func isConfigured(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        let named = [
            "CRASHPORT_SENTRY_DSN", "CRASHPORT_UPLOAD_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
        ]
        if named.contains(where: { !(environment[$0] ?? "").isEmpty }) {
            return true
        }
        let config = environment["CRASHPORT_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        let path = config ?? UploadConfiguration.defaultPath(environment: environment, uid: getuid())
        guard let file = try? UploadConfiguration.load(path: path, explicit: config != nil) else { return false }
        return !file.sentryDSNs.isEmpty || !file.urls.isEmpty || file.otlpEndpoint != nil
    }

    /// Spawns the upload of `reports` (as `owner` when given: a root sidecar starts its users'
    /// uploads with their ids, so what the upload writes there is theirs); its pid, or nil (and
    /// why, through `log`) when it could not be started. A watcher that lives on reaps it.
    ///
    /// It runs in a session of its own, its OOM score back to 0 (the sidecar's protection is not
    /// its), no signal blocked, stdin from /dev/null, and stdout and stderr appended to the
    /// directory's upload log, opened by the child once it has its ids (so the log is the
    /// owner's). With an owner, the child runs as that uid and gid with no supplementary groups
    /// (setgroups(0) before setgid/setuid; initgroups would read the group database between fork
    /// and exec, which is not async-signal-safe in a threaded process, and the upload needs no
    /// group: it reads the owner's 0700 directory and the network), and with
    /// `environment(for:from:)`, not the sidecar's environment (its own /proc/PID/environ is
    /// the user's to read). It is not waited for: a child that could not start ends with 125
    /// (its log), 126 (its ids) or 127 (the exec).
    @discardableResult
    public static func spawn(reports: String, owner: ReportStore.Owner? = nil, log: (String) -> Void) -> pid_t? {
        let executable = ProcFiles.executable(of: ProcessID(getpid())) ?? CommandLine.arguments[0]
        let inherited = ProcessInfo.processInfo.environment
        let variables = (owner.map { environment(for: $0, from: inherited) } ?? inherited).sorted { $0.key < $1.key }
        var options = ChildProcess.Options()
        options.environment = variables.map { "\($0.key)=\($0.value)" }
        options.group = .session
        options.resetOOMScore = true
        options.user = owner.map { Credentials(uid: $0.uid, gid: $0.gid) }
        options.standardInput = .null
        options.standardOutput = .appending(reports + "/" + Uploader.logName)
        options.standardError = .standardOutput
        var none = sigset_t()
        sigemptyset(&none)
        options.signalMask = none
        options.waitsForExec = false
        do {
            return try ChildProcess.spawn(executable, arguments: [executable, "upload", "--reports", reports], options).pid
                .rawValue
        } catch {
            log("could not start crashport upload for \(reports): \(error.reason)")
            return nil
        }
    }

    /// What the upload of `owner`'s reports may see of the sidecar's environment `from`: PATH,
    /// the locale (LANG, LANGUAGE, LC_*) and TZ; crashport's own settings (CRASHPORT_*: the
    /// destinations, CRASHPORT_CONFIG, before_send); what libcurl reads for the transport
    /// (HTTPS_PROXY, HTTP_PROXY, NO_PROXY, ALL_PROXY in either case, and OpenSSL's
    /// SSL_CERT_FILE and SSL_CERT_DIR); OpenTelemetry's exporter settings (OTEL_EXPORTER_OTLP_*,
    /// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: a destination, as CRASHPORT_* name one). HOME, USER and LOGNAME are the owner's, from the password
    /// database. Nothing else: no secret of the sidecar's, no systemd descriptors or sockets.
    public static func environment(for owner: ReportStore.Owner, from sidecar: [String: String]) -> [String: String] {
        let named: Set<String> = [
            "PATH", "LANG", "LANGUAGE", "TZ", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY",
            "no_proxy", "ALL_PROXY", "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "OTEL_SERVICE_NAME",
            "OTEL_RESOURCE_ATTRIBUTES",
        ]
        var kept = sidecar.filter {
            named.contains($0.key) || $0.key.hasPrefix("LC_") || $0.key.hasPrefix("CRASHPORT_")
                || $0.key.hasPrefix("OTEL_EXPORTER_OTLP_")
        }
        if kept["PATH"] == nil { kept["PATH"] = "/usr/local/bin:/usr/bin:/bin" }
        var entry = passwd()
        var buffer = [CChar](repeating: 0, count: 16 << 10)
        var found: UnsafeMutablePointer<passwd>?
        if getpwuid_r(owner.uid, &entry, &buffer, buffer.count, &found) == 0, found != nil {
            kept["HOME"] = entry.pw_dir.map { String(cString: $0) } ?? "/"
            if let name = entry.pw_name.map({ String(cString: $0) }) {
                kept["USER"] = name
                kept["LOGNAME"] = name
            }
        } else {
            kept["HOME"] = "/"
        }
        return kept
    }
}
