// Where reports go and how: the options upload and send share.

import ArgumentParser
import Store
import Upload

/// Where reports go and how: shared by upload and send.
struct UploadOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("A Crashpad/Breakpad collector (default: $CRASHPORT_UPLOAD_URL).", valueName: "URL"))
    var url: String?

    @Option(name: .long, help: ArgumentHelp("A Sentry project (default: $CRASHPORT_SENTRY_DSN).", valueName: "DSN"))
    var sentryDsn: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "An OpenTelemetry collector's OTLP/HTTP endpoint; /v1/logs is added (default: $OTEL_EXPORTER_OTLP_LOGS_ENDPOINT as it is, else $OTEL_EXPORTER_OTLP_ENDPOINT).",
            valueName: "URL"))
    var otlpEndpoint: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "http/protobuf or http/json (default: $OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf).", valueName: "PROTOCOL"))
    var otlpProtocol: String?

    @Option(name: .long, help: ArgumentHelp("Trust this CA file (a private CA) instead of the system's.", valueName: "FILE"))
    var caFile: String?

    @Option(name: .long, help: ArgumentHelp("Per request (default 30000).", valueName: "MS"))
    var timeoutMs: Int?

    @Flag(
        name: .long,
        help: "Also send the program's arguments and the user names in home-directory paths (left out by default).")
    var sendPii = false

    @Flag(
        name: .long,
        help: "Also send each frame's variables to Sentry (the program's data: left out by default).")
    var sendVariables = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "An executable given each request's JSON on stdin: it prints it back, edited or not, or exits non-zero to drop the report (default: $CRASHPORT_BEFORE_SEND).",
            valueName: "PROGRAM"))
    var beforeSend: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "An executable run after each attempt to send a report, given its id, the destination, the result (sent, retrying or failed) and the server's id or the reason as arguments, and all of it as JSON on stdin; what it does changes nothing (default: $CRASHPORT_AFTER_SEND).",
            valueName: "PROGRAM"))
    var afterSend: String?

    @Flag(name: .long, help: "Send to Sentry's minidump endpoint (Crashpad's multipart) instead of envelopes.")
    var sentryMinidump = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "crashport.toml to read (default: $CRASHPORT_CONFIG, else ~/.config/crashport/crashport.toml; /etc/crashport/crashport.toml as root).",
            valueName: "FILE"))
    var config: String?

    /// The options as given, for upload to resolve.
    var flags: UploadFlags {
        UploadFlags(
            url: url, sentryDSN: sentryDsn, caFile: caFile, timeoutMilliseconds: timeoutMs, sendPII: sendPii,
            beforeSend: beforeSend, afterSend: afterSend, sentryMinidump: sentryMinidump, config: config,
            sendVariables: sendVariables, otlpEndpoint: otlpEndpoint, otlpProtocol: otlpProtocol)
    }

    /// The uploader these options describe (Uploader.resolving: flags, then the environment, then
    /// crashport.toml), nil when no destination is given; what cannot be read exits 1, anything
    /// else wrong is a usage error.
    func uploader(store: ReportStore, command: String) -> Uploader? {
        do {
            return try Uploader.resolving(flags, store: store, clientVersion: crashportVersion)
        } catch {
            fail("\(command): \(error)", status: error.kind == .usage ? ExitStatus.usage : ExitStatus.failure)
        }
    }

    static func summary(_ outcome: Uploader.Outcome) -> String {
        var line =
            "crashport: upload: \(outcome.sent) sent, \(outcome.retrying) to retry, \(outcome.failed) failed, \(outcome.notDue) waiting, \(outcome.done) done before"
        if outcome.awaitingConsent > 0 { line += ", \(outcome.awaitingConsent) awaiting consent" }
        if outcome.keptLocally > 0 { line += ", \(outcome.keptLocally) kept here by consent" }
        return line + "\n"
    }
}
