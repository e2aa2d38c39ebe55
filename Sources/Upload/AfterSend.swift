// AfterSend: the `after_send` hook, App Center's did-succeed / did-fail for whoever runs
// crashport: an executable run by `crashport upload` after each attempt to deliver a report to a
// destination, told what came of it: `sent` (with the server's id), `retrying` (a transport
// failure, a 429 or a 5xx; tried again later) or `failed` (for good: a 4xx, a redirect, the
// attempts spent, too old, dropped by before_send). It is told, never asked: the attempt is
// recorded in upload.json before it runs, and nothing it does (its exit status, its silence,
// its output) changes the report's state, the rest of the pass or the pass's exit status.
//
// It gets the same in two shapes, as a shell script or a program would want it:
//
//     PROGRAM REPORT_ID DESTINATION RESULT DETAIL      (DETAIL: the server's id, or the reason)
//     stdin: {"report_id": …, "report": DIR, "title": …, "destination": URL, "kind": "crashpad",
//             "result": "sent", "server_id": …, "error": …, "attempts": 1, "next_attempt": …}
//
// Bounded as before_send is: killed (with its process group) after 10 s; its stdout and stderr
// read together, the first 4 KiB said in upload's output, the rest read and dropped.

import FoundationEssentials
import ReportModel

public struct AfterSend: Sendable, Equatable {
    /// What one attempt came to for one destination: upload.json's status, `pending` said as
    /// `retrying`.
    public enum Result: String, Sendable {
        case sent, retrying, failed
    }

    /// What the hook is told about one attempt.
    public struct Notice: Equatable, Sendable {
        public var reportID: String
        /// The report's directory.
        public var report: String
        public var title: String?
        public var destination: UploadDestination
        public var result: Result
        public var serverID: String?
        public var error: String?
        /// Requests made for it to this destination so far (0 when it failed before any: too
        /// old, dropped by before_send).
        public var attempts: Int
        /// When it will be tried again, when it will.
        public var nextAttempt: Double?

        public init(
            reportID: String, report: String, title: String?, destination: UploadDestination, result: Result,
            serverID: String? = nil, error: String? = nil, attempts: Int, nextAttempt: Double? = nil
        ) {
            self.reportID = reportID
            self.report = report
            self.title = title
            self.destination = destination
            self.result = result
            self.serverID = serverID
            self.error = error
            self.attempts = attempts
            self.nextAttempt = nextAttempt
        }

        /// After an attempt recorded in `entry`.
        init(reportID: String, report: String, title: String?, destination: UploadDestination, entry: UploadState.Entry) {
            let result: Result
            switch entry.status {
            case .sent: result = .sent
            case .pending: result = .retrying
            case .failed: result = .failed
            }
            let next = [entry.nextAttempt, entry.notBefore].compactMap { $0 }.max()
            self.init(
                reportID: reportID, report: report, title: title, destination: destination, result: result,
                serverID: result == .sent ? entry.serverID : nil,
                error: result == .sent ? nil : entry.lastError ?? "not sent", attempts: entry.attempts,
                nextAttempt: result == .retrying ? next : nil)
        }

        /// The hook's arguments after its name: the report's id, the destination, the result,
        /// then the server's id (empty when it gave none) or the reason.
        public var arguments: [String] {
            [reportID, destination.url, result.rawValue, (result == .sent ? serverID : error) ?? ""]
        }

        /// What its stdin gets: one JSON object, keys sorted, the ones with no value left out.
        public var json: [UInt8] {
            var object: [String: Any] = [
                "report_id": reportID, "report": report, "destination": destination.url, "kind": destination.kind,
                "result": result.rawValue, "attempts": attempts,
            ]
            object["title"] = title
            object["server_id"] = serverID
            object["error"] = error
            object["next_attempt"] = nextAttempt.map(Uploader.format)
            return (try? JSONObject.data(object)) ?? []
        }
    }

    public var program: String
    /// Seconds it may take before it is killed.
    public var timeout: Double = 10
    /// Bytes of its output said; the rest is dropped.
    public var outputLimit = 4096

    public init(program: String) { self.program = program }

    /// Runs the hook for `notice`; what to say of it, each line beginning with the report's id:
    /// what it printed, then how it failed if it did. Nothing is returned to act on.
    public func run(_ notice: Notice) -> [String] {
        let prefix = "\(notice.reportID): after_send"
        switch Hook.run(
            program, arguments: notice.arguments, input: notice.json, seconds: timeout, outputLimit: outputLimit,
            standardErrorToo: true)
        {
        case .cannotRun(let why):
            return ["\(prefix) \(program) cannot be run: \(why)"]
        case .timedOut:
            return ["\(prefix) \(program) took longer than \(UploadPrivacy.seconds(timeout)) s; killed"]
        case .finished(let exit, let output, let dropped):
            var lines = String(decoding: output, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            if lines.last == "" { lines.removeLast() }
            var said = lines.map { "\(prefix): \($0)" }
            if dropped > 0 { said.append("\(prefix): … \(dropped) more bytes of its output not shown") }
            switch exit {
            case .exited(0): break
            case .exited(let code): said.append("\(prefix) \(program) exited \(code)")
            case .signaled(let signal): said.append("\(prefix) \(program) was killed by signal \(signal)")
            case nil: said.append("\(prefix) \(program) ended unexpectedly")
            }
            return said
        }
    }
}

extension UploadDestination {
    /// Which kind of destination, as upload.json's keys begin: crashpad, sentry, sentry-minidump,
    /// otlp.
    public var kind: String {
        switch self {
        case .crashpad: return "crashpad"
        case .sentry: return "sentry"
        case .sentryMinidump: return "sentry-minidump"
        case .otlp: return "otlp"
        }
    }
}
