// Uploader: one pass of `crashport upload` over a reports directory: every report that is due
// for a destination is sent, and its state recorded before the next one (Upload.swift has the
// format, the state file and the policy).

import Foundation
import ReportModel

public struct Uploader {
    public var store: ReportStore
    public var destination: UploadDestination
    public var policy = UploadPolicy()
    /// Skip crashport's own backoff (not a server's Retry-After).
    public var now = false
    public var dryRun = false
    public var caFile: String?
    public var timeoutMilliseconds = 30_000
    public var say: (String) -> Void = { print($0) }
    public var clock: () -> Date = Date.init

    public init(store: ReportStore, destination: UploadDestination) {
        self.store = store
        self.destination = destination
    }

    /// What one pass did.
    public struct Outcome: Equatable {
        public var sent = 0
        public var retrying = 0
        public var failed = 0
        public var notDue = 0
        public var done = 0
    }

    /// Sends what is due, oldest report first.
    public func run() -> Outcome {
        var outcome = Outcome()
        for id in store.ids().reversed() {
            let directory = store.path(of: id)
            var state: UploadState
            do {
                state = try UploadState.read(directory: directory)
            } catch {
                say("\(id): \(error); not sending it")
                outcome.failed += 1
                continue
            }
            var entry = state.destinations[destination.key] ?? UploadState.Entry()
            let time = clock().timeIntervalSince1970
            switch entry.status {
            case .sent, .failed:
                outcome.done += 1
                continue
            case .pending:
                break
            }
            if let notBefore = entry.notBefore, notBefore > time {
                say("\(id): the server asked for no request before \(Self.format(notBefore)); waiting")
                outcome.notDue += 1
                continue
            }
            if !now, let next = entry.nextAttempt, next > time {
                outcome.notDue += 1
                continue
            }
            guard let event = try? store.event(id: id) else {
                say("\(id): its event.json cannot be read; not sending it")
                outcome.failed += 1
                continue
            }
            if let age = Self.age(of: event, now: time), age > policy.maximumAge {
                entry.status = .failed
                entry.lastError = "older than \(Int(policy.maximumAge / 86400)) days: not sent"
                record(&state, entry, id: id, directory: directory)
                say("\(id): \(entry.lastError!)")
                outcome.failed += 1
                continue
            }
            let minidumpPath = directory + "/minidump.dmp"
            guard let minidump = FileManager.default.contents(atPath: minidumpPath).map(Array.init) else {
                entry.status = .failed
                entry.lastError = "no minidump.dmp to send (\(event.kind?.rawValue ?? "report") without one)"
                record(&state, entry, id: id, directory: directory)
                say("\(id): \(entry.lastError!)")
                outcome.failed += 1
                continue
            }
            let fields = CrashpadUpload.fields(for: event, reportID: id)
            if dryRun {
                say(
                    "\(id): would send to \(destination.url): upload_file_minidump (\(minidump.count) bytes), \(fields.map { "\($0.0)=\($0.1)" }.joined(separator: ", ")) (gzip)"
                )
                continue
            }
            let (body, boundary) = CrashpadUpload.body(fields: fields, minidump: minidump, fileName: "\(id).dmp")
            var headers = ["Content-Type: multipart/form-data; boundary=\(boundary)", "Expect:"]
            var payload = body
            if let compressed = HTTPClient.gzip(body) {
                payload = compressed
                headers.append("Content-Encoding: gzip")
            }
            entry.attempts += 1
            let answer = HTTPClient.post(
                destination.url, headers: headers, body: payload, timeoutMilliseconds: timeoutMilliseconds, caFile: caFile)
            let after = clock().timeIntervalSince1970
            switch answer {
            case .failure(let failure):
                retryLater(&entry, because: failure.description, now: after)
            case .success(let response):
                if let retryAfter = response.headers["retry-after"], response.status == 429 || response.status == 503 {
                    entry.notBefore = after + policy.serverWait(retryAfter, now: Date(timeIntervalSince1970: after))
                }
                switch response.status {
                case 200..<300:
                    entry.status = .sent
                    entry.serverID = CrashpadUpload.serverID(in: response.body)
                    entry.sentAt = after
                    entry.lastError = nil
                    entry.nextAttempt = nil
                case 429, 500..<600:
                    retryLater(&entry, because: "HTTP \(response.status)\(Self.excerpt(response.body))", now: after)
                default:
                    entry.status = .failed
                    entry.lastError =
                        "HTTP \(response.status)\(Self.excerpt(response.body))\(response.status == 413 ? " (too large for the server)" : ""): not retried"
                }
            }
            record(&state, entry, id: id, directory: directory)
            switch entry.status {
            case .sent:
                say("\(id): sent to \(destination.url)\(entry.serverID.map { " (\($0))" } ?? "")")
                outcome.sent += 1
            case .failed:
                say("\(id): \(entry.lastError ?? "failed")")
                outcome.failed += 1
            case .pending:
                say(
                    "\(id): \(entry.lastError ?? "not sent"); attempt \(entry.attempts) of \(policy.maximumAttempts), next after \(Self.format(max(entry.nextAttempt ?? 0, entry.notBefore ?? 0)))"
                )
                outcome.retrying += 1
            }
        }
        return outcome
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

    func record(_ state: inout UploadState, _ entry: UploadState.Entry, id: String, directory: String) {
        state.destinations[destination.key] = entry
        do {
            try state.write(directory: directory)
        } catch {
            say("\(id): \(error)")
        }
    }

    /// The report's age in seconds, from its timestamp.
    static func age(of event: Event, now: Double) -> Double? {
        guard let timestamp = event.timestamp,
            let date = ISO8601DateFormatter.withFractions.date(from: timestamp)
                ?? ISO8601DateFormatter().date(from: timestamp)
        else { return nil }
        return now - date.timeIntervalSince1970
    }

    static func format(_ seconds: Double) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: seconds))
    }

    /// ": <the server's first line>", at most 200 characters.
    static func excerpt(_ body: String) -> String {
        let line = body.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        return line.isEmpty ? "" : ": " + String(line.prefix(200))
    }
}

extension ISO8601DateFormatter {
    static var withFractions: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}
