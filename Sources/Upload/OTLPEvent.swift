// OTLPEvent: a crashport report (event.json's `Event`) as one OpenTelemetry log record, in a
// request of its own (OTLPLogs.swift), following OpenTelemetry's semantic conventions where they
// have a name for a fact and `crashport.*` where they have none. Pure: an Event and options in,
// a request out; nothing here sends anything.
//
// The choices, and why (docs/using.md says them to users):
//  - The record: `time_unix_nano` is the crash's time (the event's timestamp);
//    `observed_time_unix_nano` is when the upload read the report, as the data model asks of a
//    collector that reads an event made elsewhere. Severity FATAL (21) for a crash or a
//    termination (the process died), ERROR (17) for a handled error or a hang (it lived on),
//    as Sentry's level is chosen (SentryEvent.level). `event_name` is `app.crash` for a crash
//    or a termination, `exception` (the conventions' exception event) for a handled error,
//    `app.hang` for a hang; the attribute `event.name` says the same for older collectors. The
//    body is the report's title.
//  - `exception.type` and `exception.message` are the ones the Sentry event gets
//    (SentryEvent.exceptionValue: a language's exception over the signal); `exception.stacktrace`
//    is the crashed thread's frames as text, innermost first, one per line, as gdb prints them.
//  - The resource is the crashed process, not crashport: `service.name` is its systemd service
//    without `.service` (a template's instance is `service.instance.id`), else its executable's
//    name; `service.version` its release; its pid, executable, host, container and pod by their
//    conventional names. OTEL_SERVICE_NAME, then a `service.name` in OTEL_RESOURCE_ATTRIBUTES,
//    name the service instead (the user's word over crashport's guess, as the SDK specification
//    ranks them); every other attribute crashport knows about the process wins over one of the
//    same key in OTEL_RESOURCE_ATTRIBUTES, which describes the deployment the upload runs in
//    and fills in the rest (`deployment.environment.name`, `k8s.cluster.name`).
//  - Privacy as for every destination (UploadPrivacy): `process.command_args` only with
//    --send-pii, and without it every `/home/NAME/` in any string becomes `~/`.

import BoundedBytes
import FoundationEssentials
import ReportModel

public enum OTLPEvent {
    /// What the `Event` does not say and the caller knows.
    public struct Options: Sendable, Equatable {
        /// crashport's version, the instrumentation scope's.
        public var crashportVersion: String
        /// When the upload read the report (nanoseconds since 1970).
        public var observedTimeUnixNano: UInt64
        /// The machine's name (gethostname).
        public var hostName: String?
        /// OTEL_SERVICE_NAME.
        public var serviceName: String?
        /// OTEL_RESOURCE_ATTRIBUTES, in order.
        public var resourceAttributes: [OTLPAttribute] = []
        /// The program's arguments too (--send-pii), and home directories' user names left as
        /// they are.
        public var sendPII = false

        public init(
            crashportVersion: String, observedTimeUnixNano: UInt64, hostName: String? = nil, serviceName: String? = nil,
            resourceAttributes: [OTLPAttribute] = [], sendPII: Bool = false
        ) {
            self.crashportVersion = crashportVersion
            self.observedTimeUnixNano = observedTimeUnixNano
            self.hostName = hostName
            self.serviceName = serviceName
            self.resourceAttributes = resourceAttributes
            self.sendPII = sendPII
        }
    }

    /// The scope every record is sent under.
    public static let scopeName = "crashport"

    /// The request that carries `event` as one log record.
    public static func request(for event: Event, reportID: String, options: Options) -> OTLPLogsRequest {
        var request = OTLPLogsRequest(resourceLogs: [
            OTLPLogsRequest.ResourceLogs(
                resource: resource(event, options: options),
                scopeLogs: [
                    OTLPLogsRequest.ScopeLogs(
                        scopeName: scopeName, scopeVersion: options.crashportVersion,
                        logRecords: [logRecord(event, reportID: reportID, options: options)])
                ])
        ])
        if !options.sendPII { request = scrubbed(request) }
        return request
    }

    // MARK: the record

    public static func severity(_ kind: ReportKind?) -> OTLPSeverity {
        SentryEvent.level(kind) == "fatal" ? .fatal : .error
    }

    public static func eventName(_ kind: ReportKind?) -> String {
        switch kind {
        case .crash, .termination, nil: return "app.crash"
        case .error: return "exception"
        case .hang: return "app.hang"
        }
    }

    static func logRecord(_ event: Event, reportID: String, options: Options) -> OTLPLogRecord {
        var record = OTLPLogRecord()
        record.timeUnixNano = event.timestamp.flatMap(unixNanoseconds) ?? 0
        record.observedTimeUnixNano = options.observedTimeUnixNano
        let severity = severity(event.kind)
        record.severityNumber = severity.rawValue
        record.severityText = severity.text
        record.eventName = eventName(event.kind)
        let exception = SentryEvent.exceptionValue(event)
        let type = exception["type"] as? String
        let message = exception["value"] as? String
        record.body = .string(event.title ?? [type, message].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ": "))

        var attributes: [OTLPAttribute] = [OTLPAttribute("event.name", .string(record.eventName))]
        func add(_ key: String, _ value: String?) {
            if let value, !value.isEmpty { attributes.append(OTLPAttribute(key, .string(value))) }
        }
        add("exception.type", type)
        add("exception.message", message)
        add("exception.stacktrace", stacktrace(event))
        if let tid = event.crashedThreadRecord?.tid ?? event.crashedThread {
            attributes.append(OTLPAttribute("thread.id", .int(Int64(tid.rawValue))))
        }
        add("thread.name", event.crashedThreadRecord?.name)
        add("crashport.report_id", reportID)
        add("crashport.kind", event.kind?.rawValue)
        add("crashport.signature", event.signature)
        add("crashport.fingerprint", event.fingerprint)
        add("crashport.signal", event.signal?.name)
        add("crashport.signal.code", event.signal?.codeName)
        add("crashport.fault_address", event.signal?.faultAddress?.description)
        add("crashport.cause", event.cause)
        add("crashport.reason", event.reason)
        add("crashport.diagnosis", event.fault?.diagnosis?.summary)
        if let culprit = event.culprit?.function {
            add("code.function.name", culprit)
            add("code.file.path", event.culprit?.file)
            if let line = event.culprit?.line, line > 0 {
                attributes.append(OTLPAttribute("code.line.number", .int(Int64(line))))
            }
        }
        if event.test == true { attributes.append(OTLPAttribute("crashport.test", .bool(true))) }
        // What the program said about itself, and a handled error's own properties, under
        // crashport's names: the program's keys are its own, not the conventions'.
        for (key, value) in (event.annotations ?? [:]).sorted(by: { $0.key < $1.key }) {
            add("crashport.annotation." + key, value)
        }
        for (key, value) in (event.exception?.properties ?? [:]).sorted(by: { $0.key < $1.key }) {
            add("crashport.error_property." + key, value)
        }
        record.attributes = attributes
        return record
    }

    /// The crashed (or reporting) thread's frames, innermost first, one per line as gdb prints
    /// a backtrace: `#0  0x000055d4c3a0113d in crash_null at crash.c:24 (crash+0x113d)`.
    public static func stacktrace(_ event: Event) -> String? {
        guard let frames = event.crashedThreadRecord?.frames, !frames.isEmpty else { return nil }
        return frames.enumerated().map { position, frame in
            var line = "#\(frame.index ?? position)  "
            if let pc = frame.pc {
                let hex = String(pc.value, radix: 16)
                line += "0x" + String(repeating: "0", count: max(0, 16 - hex.count)) + hex + " in "
            }
            line += frame.function ?? "??"
            if let file = frame.file { line += " at \(file)" + (frame.line.map { $0 > 0 ? ":\($0)" : "" } ?? "") }
            if let module = frame.module {
                line += " (\(module.pathBaseName)\(frame.moduleOffset.map { "+\($0)" } ?? ""))"
            }
            if frame.inlined == true { line += " [inlined]" }
            return line
        }.joined(separator: "\n")
    }

    /// An event timestamp (RFC 3339) in nanoseconds since 1970, to the millisecond it keeps.
    static func unixNanoseconds(_ timestamp: String) -> UInt64? {
        guard let date = Uploader.iso8601(timestamp), date.timeIntervalSince1970 > 0 else { return nil }
        return UInt64((date.timeIntervalSince1970 * 1000).rounded()) * 1_000_000
    }

    // MARK: the resource

    static func resource(_ event: Event, options: Options) -> [OTLPAttribute] {
        var known: [OTLPAttribute] = []
        func add(_ key: String, _ value: String?) {
            if let value, !value.isEmpty { known.append(OTLPAttribute(key, .string(value))) }
        }
        let process = event.process
        let service = serviceName(of: event)
        add(
            "service.name",
            options.serviceName ?? options.resourceAttributes.first { $0.key == "service.name" }?.stringValue ?? service.name)
        add("service.instance.id", service.instance)
        add("service.version", event.release)
        add("host.name", options.hostName)
        add("host.arch", SentryEvent.architecture(event).map { $0 == "x86_64" ? "amd64" : $0 })
        add("os.type", "linux")
        if let pid = process?.pid { known.append(OTLPAttribute("process.pid", .int(Int64(pid.rawValue)))) }
        add("process.executable.name", process?.executable?.pathBaseName)
        add("process.executable.path", process?.executable)
        if options.sendPII, let arguments = process?.arguments, !arguments.isEmpty {
            known.append(OTLPAttribute("process.command_args", .array(arguments.map(OTLPValue.string))))
        }
        add("process.executable.build_id.gnu", process?.buildID)
        add("container.id", process?.container)
        add("container.name", process?.containerName)
        add("container.image.name", process?.containerImage)
        add("container.runtime", process?.containerRuntime)
        add("k8s.pod.uid", process?.pod?.uid)
        add("k8s.pod.name", process?.pod?.name)
        add("k8s.namespace.name", process?.pod?.namespace)
        // A pod's container is known by the name its runtime gives it: Kubernetes' own.
        if process?.pod != nil { add("k8s.container.name", process?.containerName) }
        add("crashport.systemd.unit", process?.unit)
        let keys = Set(known.map(\.key))
        return known + options.resourceAttributes.filter { !keys.contains($0.key) }
    }

    /// The service a process is: its systemd service (`nginx.service` is `nginx`; a template's
    /// `getty@tty1.service` is `getty`, instance `tty1`), else its executable's name.
    static func serviceName(of event: Event) -> (name: String?, instance: String?) {
        if let unit = event.process?.unit, unit.hasSuffix(".service"), unit.count > ".service".count {
            let name = String(unit.dropLast(".service".count))
            if let at = name.firstIndex(of: "@"), at != name.startIndex {
                let instance = String(name[name.index(after: at)...])
                return (String(name[..<at]), instance.isEmpty ? nil : instance)
            }
            return (name, nil)
        }
        return (event.process?.executable?.pathBaseName, nil)
    }

    // MARK: privacy

    /// Every string in the request with `/home/NAME/` as `~/` (UploadPrivacy.scrubbed).
    static func scrubbed(_ request: OTLPLogsRequest) -> OTLPLogsRequest {
        var request = request
        func scrub(_ attributes: [OTLPAttribute]) -> [OTLPAttribute] {
            attributes.map { OTLPAttribute(UploadPrivacy.scrubbed($0.key), scrub($0.value)) }
        }
        func scrub(_ value: OTLPValue) -> OTLPValue {
            switch value {
            case .string(let text): return .string(UploadPrivacy.scrubbed(text))
            case .array(let values): return .array(values.map(scrub))
            case .keyValues(let attributes): return .keyValues(scrub(attributes))
            default: return value
            }
        }
        for index in request.resourceLogs.indices {
            request.resourceLogs[index].resource = scrub(request.resourceLogs[index].resource)
            for scope in request.resourceLogs[index].scopeLogs.indices {
                for record in request.resourceLogs[index].scopeLogs[scope].logRecords.indices {
                    var edited = request.resourceLogs[index].scopeLogs[scope].logRecords[record]
                    edited.body = edited.body.map(scrub)
                    edited.attributes = scrub(edited.attributes)
                    request.resourceLogs[index].scopeLogs[scope].logRecords[record] = edited
                }
            }
        }
        return request
    }
}

extension OTLPAttribute {
    /// The value when it is a string.
    var stringValue: String? {
        if case .string(let text) = value { return text }
        return nil
    }
}
