// UploadFlags: what a command line says about an upload (`crashport upload`, `crashport send`),
// and the one place it is resolved into an Uploader: each setting from the flags first, then the
// environment (CRASHPORT_SENTRY_DSN, CRASHPORT_UPLOAD_URL, CRASHPORT_ENVIRONMENT,
// CRASHPORT_BEFORE_SEND, CRASHPORT_AFTER_SEND, CRASHPORT_CONFIG, OpenTelemetry's OTEL_* as
// OTLPEndpoint reads them), then crashport.toml (UploadConfiguration). The command line parses
// and calls; the precedence and the checks are upload's.

import FoundationEssentials
import Store

#if canImport(Glibc)
import Glibc
#endif

/// The upload options as given on the command line: nil, or false, for each one not given.
public struct UploadFlags: Sendable, Equatable {
    /// --url: a Crashpad/Breakpad collector.
    public var url: String?
    /// --sentry-dsn: a Sentry project.
    public var sentryDSN: String?
    /// --ca-file: trust this CA file instead of the system's.
    public var caFile: String?
    /// --timeout-ms: per request.
    public var timeoutMilliseconds: Int?
    /// --send-pii: the arguments and home-directory user names too.
    public var sendPII = false
    /// --send-variables: each frame's variables to Sentry too.
    public var sendVariables = false
    /// --before-send: an executable that sees each request's JSON first.
    public var beforeSend: String?
    /// --after-send: an executable told what came of each attempt.
    public var afterSend: String?
    /// --sentry-minidump: Sentry's minidump endpoint instead of envelopes.
    public var sentryMinidump = false
    /// --config: the crashport.toml to read.
    public var config: String?
    /// --otlp-endpoint: an OpenTelemetry collector's base OTLP/HTTP endpoint.
    public var otlpEndpoint: String?
    /// --otlp-protocol: http/protobuf or http/json.
    public var otlpProtocol: String?

    public init(
        url: String? = nil, sentryDSN: String? = nil, caFile: String? = nil, timeoutMilliseconds: Int? = nil,
        sendPII: Bool = false, beforeSend: String? = nil, afterSend: String? = nil, sentryMinidump: Bool = false,
        config: String? = nil, sendVariables: Bool = false, otlpEndpoint: String? = nil, otlpProtocol: String? = nil
    ) {
        self.otlpEndpoint = otlpEndpoint
        self.otlpProtocol = otlpProtocol
        self.sendVariables = sendVariables
        self.url = url
        self.sentryDSN = sentryDSN
        self.caFile = caFile
        self.timeoutMilliseconds = timeoutMilliseconds
        self.sendPII = sendPII
        self.beforeSend = beforeSend
        self.afterSend = afterSend
        self.sentryMinidump = sentryMinidump
        self.config = config
    }
}

/// Why flags, environment and crashport.toml make no upload: something named cannot be read
/// (`unreadable`: the command's exit 1), or a value is wrong (`usage`: exit 64). The description
/// is the message, without the command's name.
public struct UploadFlagsError: Error, CustomStringConvertible, Equatable {
    public enum Kind: Sendable, Equatable { case unreadable, usage }
    public var kind: Kind
    public var description: String

    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}

extension Uploader {
    /// The uploader `flags` describe (flags, then `environment`, then crashport.toml: --config,
    /// else CRASHPORT_CONFIG, else the default file for `uid`); nil when none of them names a
    /// destination.
    public static func resolving(
        _ flags: UploadFlags, store: ReportStore, clientVersion: String,
        environment: [String: String] = ProcessInfo.processInfo.environment, uid: UInt32 = getuid()
    ) throws(UploadFlagsError) -> Uploader? {
        func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let named = flags.config ?? variable("CRASHPORT_CONFIG")
        let file: UploadConfiguration
        do {
            file = try UploadConfiguration.load(
                path: named ?? UploadConfiguration.defaultPath(environment: environment, uid: uid), explicit: named != nil)
        } catch {
            throw UploadFlagsError(.unreadable, "\(error)")
        }
        func given(_ option: String?, _ name: String, _ configured: String? = nil) -> String? {
            option ?? variable(name) ?? configured
        }
        var destinations: [UploadDestination] = []
        do {
            let dsns = (flags.sentryDSN ?? variable("CRASHPORT_SENTRY_DSN")).map { [$0] } ?? file.sentryDSNs
            let urls = (flags.url ?? variable("CRASHPORT_UPLOAD_URL")).map { [$0] } ?? file.urls
            let minidumpEndpoint = flags.sentryMinidump || file.sentryMinidump == true
            destinations += try dsns.map { dsn in
                let destination = try UploadDestination.sentry(checking: dsn)
                guard minidumpEndpoint, case .sentry(let parsed) = destination else { return destination }
                return .sentryMinidump(parsed)
            }
            destinations += try urls.map { try UploadDestination.crashpad(checking: $0) }
        } catch {
            throw UploadFlagsError(.usage, "\(file.file.map { "\($0): " } ?? "")\(error)")
        }
        do {
            // Its errors name the flag, variable or key they come from.
            if var otlp = try OTLPEndpoint.resolving(
                endpoint: flags.otlpEndpoint, protocol: flags.otlpProtocol, environment: environment, file: file)
            {
                // --timeout-ms is the command line's word: it holds over OTEL_EXPORTER_OTLP_TIMEOUT.
                if flags.timeoutMilliseconds != nil { otlp.timeoutMilliseconds = nil }
                destinations.append(.otlp(otlp))
            }
        } catch {
            throw UploadFlagsError(.usage, "\(error)")
        }
        guard !destinations.isEmpty else { return nil }
        let caFile = flags.caFile ?? file.caFile
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw UploadFlagsError(.unreadable, "--ca-file \(caFile) cannot be read")
        }
        var uploader = Uploader(store: store, destinations: destinations, clientVersion: clientVersion)
        uploader.caFile = caFile
        uploader.environment = given(nil, "CRASHPORT_ENVIRONMENT", file.environment)
        uploader.sendPII = flags.sendPII || file.sendPII == true
        uploader.sendVariables = flags.sendVariables || file.sendVariables == true
        if let milliseconds = file.timeoutMilliseconds { uploader.timeoutMilliseconds = milliseconds }
        if let hook = given(flags.beforeSend, "CRASHPORT_BEFORE_SEND", file.beforeSend) {
            guard FileManager.default.isExecutableFile(atPath: hook) else {
                throw UploadFlagsError(.usage, "--before-send \(hook) is not an executable file")
            }
            uploader.beforeSend = hook
        }
        if let hook = given(flags.afterSend, "CRASHPORT_AFTER_SEND", file.afterSend) {
            guard FileManager.default.isExecutableFile(atPath: hook) else {
                throw UploadFlagsError(.usage, "--after-send \(hook) is not an executable file")
            }
            uploader.afterSend = AfterSend(program: hook)
        }
        if let timeoutMilliseconds = flags.timeoutMilliseconds {
            guard timeoutMilliseconds > 0 else { throw UploadFlagsError(.usage, "--timeout-ms must be positive") }
            uploader.timeoutMilliseconds = timeoutMilliseconds
        }
        return uploader
    }
}
