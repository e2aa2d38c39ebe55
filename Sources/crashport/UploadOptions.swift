// Where reports go and how: the options upload and send share.

import ArgumentParser
import FoundationEssentials
import Glibc
import Watcher

/// Where reports go and how: shared by upload and send.
struct UploadOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("A Crashpad/Breakpad collector (default: $CRASHPORT_UPLOAD_URL).", valueName: "URL"))
    var url: String?

    @Option(name: .long, help: ArgumentHelp("A Sentry project (default: $CRASHPORT_SENTRY_DSN).", valueName: "DSN"))
    var sentryDsn: String?

    @Option(name: .long, help: ArgumentHelp("Trust this CA file (a private CA) instead of the system's.", valueName: "FILE"))
    var caFile: String?

    @Option(name: .long, help: ArgumentHelp("Per request (default 30000).", valueName: "MS"))
    var timeoutMs: Int?

    @Flag(
        name: .long,
        help: "Also send the program's arguments and the user names in home-directory paths (left out by default).")
    var sendPii = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "An executable given each request's JSON on stdin: it prints it back, edited or not, or exits non-zero to drop the report (default: $CRASHPORT_BEFORE_SEND).",
            valueName: "PROGRAM"))
    var beforeSend: String?

    @Flag(name: .long, help: "Send to Sentry's minidump endpoint (Crashpad's multipart) instead of envelopes.")
    var sentryMinidump = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "crashport.toml to read (default: $CRASHPORT_CONFIG, else ~/.config/crashport/crashport.toml; /etc/crashport/crashport.toml as root).",
            valueName: "FILE"))
    var config: String?

    /// The uploader these options describe (flags, then the environment, then crashport.toml),
    /// nil when no destination is given (a usage error for anything else wrong).
    func uploader(store: ReportStore, command: String) -> Uploader? {
        let environment = ProcessInfo.processInfo.environment
        func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let named = config ?? variable("CRASHPORT_CONFIG")
        let file: UploadConfiguration
        do {
            file = try UploadConfiguration.load(
                path: named ?? UploadConfiguration.defaultPath(environment: environment, uid: getuid()), explicit: named != nil)
        } catch {
            fail("\(command): \(error)", status: ExitStatus.failure)
        }
        func given(_ option: String?, _ name: String, _ configured: String? = nil) -> String? {
            option ?? variable(name) ?? configured
        }
        var destinations: [UploadDestination] = []
        do {
            let dsns = (sentryDsn ?? variable("CRASHPORT_SENTRY_DSN")).map { [$0] } ?? file.sentryDSNs
            let urls = (url ?? variable("CRASHPORT_UPLOAD_URL")).map { [$0] } ?? file.urls
            let minidumpEndpoint = sentryMinidump || file.sentryMinidump == true
            destinations += try dsns.map { dsn in
                let destination = try UploadDestination.sentry(checking: dsn)
                guard minidumpEndpoint, case .sentry(let parsed) = destination else { return destination }
                return .sentryMinidump(parsed)
            }
            destinations += try urls.map { try UploadDestination.crashpad(checking: $0) }
        } catch {
            usageError("\(command): \(file.file.map { "\($0): " } ?? "")\(error)")
        }
        guard !destinations.isEmpty else { return nil }
        let caFile = caFile ?? file.caFile
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            fail("\(command): --ca-file \(caFile) cannot be read", status: ExitStatus.failure)
        }
        var uploader = Uploader(store: store, destinations: destinations, clientVersion: crashportVersion)
        uploader.caFile = caFile
        uploader.environment = given(nil, "CRASHPORT_ENVIRONMENT", file.environment)
        uploader.sendPII = sendPii || file.sendPII == true
        if let milliseconds = file.timeoutMilliseconds { uploader.timeoutMilliseconds = milliseconds }
        if let hook = given(beforeSend, "CRASHPORT_BEFORE_SEND", file.beforeSend) {
            guard FileManager.default.isExecutableFile(atPath: hook) else {
                usageError("\(command): --before-send \(hook) is not an executable file")
            }
            uploader.beforeSend = hook
        }
        if let timeoutMs {
            guard timeoutMs > 0 else { usageError("\(command): --timeout-ms must be positive") }
            uploader.timeoutMilliseconds = timeoutMs
        }
        return uploader
    }

    static func summary(_ outcome: Uploader.Outcome) -> String {
        var line =
            "crashport: upload: \(outcome.sent) sent, \(outcome.retrying) to retry, \(outcome.failed) failed, \(outcome.notDue) waiting, \(outcome.done) done before"
        if outcome.awaitingConsent > 0 { line += ", \(outcome.awaitingConsent) awaiting consent" }
        if outcome.keptLocally > 0 { line += ", \(outcome.keptLocally) kept here by consent" }
        return line + "\n"
    }
}
