// SentryEvent: a crashport report (event.json's `Event`) in the shape Sentry ingests, the
// payload of an envelope's `event` item (SentryEnvelope) — the first part of uploading reports
// (issue 16); nothing here sends anything.
//
// The mapping is written down in docs/app-api.md ("Reports in Sentry's shape"); the choices that are
// not Sentry's own rules, and why:
//  - `event_id` is a 128-bit FNV-1a hash of the report id, so converting the same report twice
//    (a retried upload, a second destination) gives the same id and Sentry drops the duplicate.
//  - `level`: fatal for a crash or a termination (the process died), error for a handled error
//    and for a hang (the program lived on; sentry-native's AppHang events are `error` too).
//  - The crashing thread's stack goes on the exception (`exception.values[0].stacktrace`, with
//    `thread_id`), and its entry in `threads` carries no second copy, as Sentry's threads
//    interface asks; every other thread carries its own.
//  - Frames are reversed: crashport lists the innermost first, Sentry wants it last. An inlined
//    frame keeps the pc of the frame it was inlined into, as symbolicator emits them.
//  - `debug_meta.images` are `elf` images keyed by their GNU build-id (`code_id`) and the
//    `debug_id` Sentry derives from it (SentryDebugID); a module without a build-id is left out
//    (Sentry requires a debug_id, and the first-page hash it would fall back to needs the file).
//  - Annotations become tags when Sentry's documented limits allow (a key of at most 32 of
//    `[A-Za-z0-9_.:-]`, a value of 1 to 200 characters without a newline); every other
//    annotation goes to `extra.annotations` whole, so nothing is cut. `release` and
//    `environment` annotations fill the fields of those names instead, and `user` and `dist`,
//    tag keys Relay reserves for its own fields (it drops them silently; seen with
//    sentry-relay 0.10.1), go to extra too. A handled error's own properties
//    (`exception.properties`) follow the same rule, as a Sentry SDK's scope for one capture
//    gives them: tags where they fit (the error's winning over an annotation of the same key),
//    the rest in `extra.error_properties`.
//  - Privacy: the program's arguments and environment are never sent (only the executable's file
//    name, in the `process` context), attachments are named by their copy's file name, not the
//    path the program gave. Paths of modules and source files are sent as the report has them,
//    home directories included; a later part of the issue adds `--send-pii` and scrubbing.
//
// Pure: an `Event` and options in, a JSON object out; the OS facts come from the caller (the
// minidump's SystemInfo and os-release streams, `SentryOperatingSystem(minidump:)`).

import BoundedBytes
import FoundationEssentials
import ReportModel

public enum SentryEvent {
    /// What the `Event` does not say and the caller knows.
    public struct Options: Sendable, Equatable {
        /// crashport's version, for `sdk.version`.
        public var sdkVersion: String
        /// The deployment environment ("production"); when nil, an `environment` annotation, if
        /// any, else the field is left out.
        public var environment: String?
        /// The crashed machine's OS and CPU, when known (from the minidump).
        public var operatingSystem: SentryOperatingSystem?
        /// Each frame's variables as Sentry's frame `vars` (upload's --send-variables).
        public var includeVariables = false

        public init(sdkVersion: String, environment: String? = nil, operatingSystem: SentryOperatingSystem? = nil) {
            self.sdkVersion = sdkVersion
            self.environment = environment
            self.operatingSystem = operatingSystem
        }
    }

    /// The SDK name crashport reports as (`sdk.name`, and the envelope's).
    public static let sdkName = "crashport"
    /// Sentry's documented tag limits (docs "Tags"): longer keys or values go to `extra`.
    public static let maximumTagKeyLength = 32
    public static let maximumTagValueLength = 200
    /// Tag keys Relay fills from the event's own fields and drops when an SDK sends them.
    public static let reservedTagKeys: Set<String> = ["release", "environment", "user", "dist"]

    /// The event as a JSON object (`JSONObject`'s loose values).
    public static func payload(for event: Event, options: Options) -> [String: Any] {
        var payload: [String: Any] = ["platform": "native", "level": level(event.kind), "logger": "crashport"]
        payload["event_id"] = eventID(reportID: event.id ?? event.timestamp ?? "")
        if let timestamp = event.timestamp { payload["timestamp"] = timestamp }
        payload["sdk"] = ["name": sdkName, "version": options.sdkVersion]

        let annotations = event.annotations ?? [:]
        if let release = event.release ?? annotations["release"], !release.isEmpty { payload["release"] = release }
        if let environment = options.environment ?? annotations["environment"], !environment.isEmpty {
            payload["environment"] = environment
        }

        let modules = (event.modules ?? []).filter { $0.base != nil }
        let crashed = event.crashedThreadRecord
        var exception = exceptionValue(event)
        if let crashed, let frames = crashed.frames, !frames.isEmpty {
            exception["stacktrace"] = stacktrace(
                frames, registers: crashed.registers, modules: modules, variables: options.includeVariables)
            if let tid = crashed.tid { exception["thread_id"] = Int(tid.rawValue) }
        }
        payload["exception"] = ["values": [exception]]

        // A handled error's own stack is the exception's alone: the reporting thread, with its
        // own stack, is the current one.
        if let threads = event.threads?.filter({ $0.errorStack != true }), !threads.isEmpty {
            payload["threads"] = [
                "values": threads.map { thread in
                    var value: [String: Any] = [:]
                    if let tid = thread.tid { value["id"] = Int(tid.rawValue) }
                    if let name = thread.name { value["name"] = name }
                    let isCrashed = thread == crashed
                    value["crashed"] = isCrashed && (event.kind == .crash || event.kind == .termination)
                    value["current"] = isCrashed || (crashed?.errorStack == true && thread.tid == crashed?.tid)
                    if !isCrashed, let frames = thread.frames, !frames.isEmpty {
                        value["stacktrace"] = stacktrace(frames, registers: thread.registers, modules: modules)
                    }
                    return value
                }
            ]
        }

        let images = modules.compactMap(debugImage)
        if !images.isEmpty { payload["debug_meta"] = ["images": images] }
        payload["contexts"] = contexts(event, options: options)

        var tags: [String: String] = [:]
        var extraAnnotations: [String: String] = [:]
        for (key, value) in annotations where key != "release" && key != "environment" {
            if isTag(key: key, value: value) { tags[key] = value } else { extraAnnotations[key] = value }
        }
        // A handled error's own properties, as an SDK's scope for one capture gives them: tags
        // where the limits allow, winning over an annotation of the same key; the rest in extra.
        var errorProperties: [String: String] = [:]
        for (key, value) in event.exception?.properties ?? [:] {
            if isTag(key: key, value: value) { tags[key] = value } else { errorProperties[key] = value; tags[key] = nil }
        }
        if let kind = event.kind { tags["crashport.kind"] = kind.rawValue }
        // The machine's grouping, so that the server groups as `crashport list --group` does.
        if let fingerprint = event.fingerprint {
            payload["fingerprint"] = [fingerprint]
            tags["crashport.fingerprint"] = fingerprint
        }
        if let cause = event.cause { tags["crashport.cause"] = cause }
        if let rule = event.fault?.diagnosis?.rule { tags["crashport.diagnosis"] = rule }
        if event.test == true { tags["crashport.test"] = "true" }
        // Where it ran, by the names OpenTelemetry's semantic conventions give them.
        let process = event.process
        let placement: [(String, String?)] = [
            ("container.id", process?.container), ("container.name", process?.containerName),
            ("container.runtime", process?.containerRuntime), ("container.image", process?.containerImage),
            ("k8s.pod.name", process?.pod?.name), ("k8s.namespace.name", process?.pod?.namespace),
            ("k8s.pod.uid", process?.pod?.uid),
            ("k8s.container.name", process?.pod != nil ? process?.containerName : nil),
        ]
        for case (let key, let value?) in placement where isTag(key: key, value: value) { tags[key] = value }
        // The crashed program's package (its note, or dpkg's), as `package@version`.
        if let package = mainPackage(event), let name = package.name {
            let value = package.version.map { "\(name)@\($0)" } ?? name
            if isTag(key: "crashport.package", value: value) { tags["crashport.package"] = value }
        }
        payload["tags"] = tags
        var extra = self.extra(event)
        if !extraAnnotations.isEmpty { extra["annotations"] = extraAnnotations }
        if !errorProperties.isEmpty { extra["error_properties"] = errorProperties }
        if let cut = event.exception?.propertiesTruncated, !cut.isEmpty { extra["error_properties_truncated"] = cut }
        if !extra.isEmpty { payload["extra"] = extra }

        if let breadcrumbs = event.breadcrumbs, !breadcrumbs.isEmpty {
            payload["breadcrumbs"] = ["values": breadcrumbs.map(breadcrumb)]
        }
        if let culprit = event.culprit, let function = culprit.function {
            let file = culprit.file.map { $0.pathBaseName }
            payload["culprit"] = function + (file.map { " (\($0)" + (culprit.line.map { ":\($0)" } ?? "") + ")" } ?? "")
        }
        return payload
    }

    /// The payload as compact JSON (sorted keys, so the same report gives the same bytes).
    public static func jsonData(for event: Event, options: Options) throws -> Data {
        Data(try JSONObject.data(payload(for: event, options: options)))
    }

    /// Sentry's `level` for a kind of report (see the file comment).
    public static func level(_ kind: ReportKind?) -> String {
        switch kind {
        case .error, .hang: return "error"
        case .crash, .termination, nil: return "fatal"
        }
    }

    /// 32 lowercase hex digits from the report id: FNV-1a, 128 bits, stable across runs and
    /// machines (Swift's own hashing is seeded per process).
    public static func eventID(reportID: String) -> String {
        var hash: UInt128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d
        let prime: UInt128 = 0x0000_0000_0100_0000_0000_0000_0000_013B
        for byte in reportID.utf8 {
            hash ^= UInt128(byte)
            hash = hash &* prime
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 32 - hex.count) + hex
    }

    /// Whether an annotation can be a tag under Sentry's documented limits.
    /// The package of the event's executable (its module record's).
    static func mainPackage(_ event: Event) -> PackageRecord? {
        let modules = event.modules ?? []
        let executable = event.process?.executable
        let main = if let executable { modules.first { $0.path == executable } } else { modules.first }
        return main?.package
    }

    public static func isTag(key: String, value: String) -> Bool {
        let allowedKey = key.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "_.:-".unicodeScalars.contains($0)
        }
        return !reservedTagKeys.contains(key) && !key.isEmpty && key.count <= maximumTagKeyLength && allowedKey && !value.isEmpty
            && value.count <= maximumTagValueLength && !value.contains(where: \.isNewline)
    }

    // MARK: the exception

    /// The one exception value: what ended (or troubled) the program and how it was caught.
    static func exceptionValue(_ event: Event) -> [String: Any] {
        var value: [String: Any] = [:]
        var mechanism: [String: Any] = [:]
        let signal = event.signal
        switch event.kind {
        case .error:
            value["type"] = event.exception?.type ?? "Error"
            value["value"] = event.exception?.message ?? event.reason ?? ""
            mechanism = ["type": "crashport_report_error", "handled": true]
        case .hang:
            // sentry-native's app-hang events: type and mechanism AppHang, handled, synthetic.
            value["type"] = "AppHang"
            value["value"] = "App hung for at least \(event.hangMilliseconds ?? 0) ms."
            mechanism = ["type": "AppHang", "handled": true, "synthetic": true]
        case .termination:
            value["type"] = signal?.name ?? terminationType(event.cause)
            value["value"] = event.reason ?? event.title ?? signal?.description ?? "terminated"
            mechanism = ["type": "termination", "handled": false, "synthetic": true]
        case .crash, nil:
            // A language's own exception (C++, a Rust panic) names the crash better than its
            // SIGABRT; otherwise the signal is the type, synthetic as sentry-native marks it.
            if let type = event.exception?.type {
                value["type"] = type
                value["value"] = event.exception?.message ?? event.reason ?? ""
                mechanism = ["type": "signalhandler", "handled": false]
            } else {
                value["type"] = signal?.name ?? "crash"
                value["value"] = event.reason ?? signal?.description ?? event.title ?? ""
                mechanism = ["type": "signalhandler", "handled": false, "synthetic": true]
            }
        }
        if let signal, let number = signal.number {
            var meta: [String: Any] = ["number": Int(number)]
            if let code = signal.code { meta["code"] = Int(code) }
            if let name = signal.name { meta["name"] = name }
            if let codeName = signal.codeName { meta["code_name"] = codeName }
            mechanism["meta"] = ["signal": meta]
        }
        var data: [String: Any] = [:]
        if let address = signal?.faultAddress { data["fault_address"] = address.description }
        if signal?.stackOverflow == true { data["stack_overflow"] = true }
        if let sender = signal?.senderPID { data["sender_pid"] = Int(sender.rawValue) }
        if let reraised = signal?.reraisedBy {
            data["reraised_by"] = [
                "how": reraised.how?.rawValue, "signal": reraised.signal, "function": reraised.function,
                "module": reraised.module,
            ].compactMapValues { $0 }
        }
        if let cause = event.cause { data["cause"] = cause }
        if let fault = event.fault {
            // The explanation (issue 49): the decoded instruction, its access, the verdict.
            if let diagnosis = fault.diagnosis {
                data["diagnosis"] = diagnosis.summary
                data["diagnosis_rule"] = diagnosis.rule
            }
            if let text = fault.instruction?.text { data["instruction"] = text }
            if let access = fault.access {
                data["access"] = [
                    "kind": access.kind?.rawValue as Any?, "size": access.size as Any?, "expression": access.expression as Any?,
                    "address": access.address?.description as Any?,
                ].compactMapValues { $0 }
            }
            if let variable = fault.variable?.expression ?? fault.variable?.variable { data["bad_value_variable"] = variable }
        }
        if let related = event.related { data["related_report"] = related }
        if !data.isEmpty { mechanism["data"] = data }
        value["mechanism"] = mechanism
        return value
    }

    /// A termination with no signal: its cause as a type Sentry groups by.
    static func terminationType(_ cause: String?) -> String {
        switch cause {
        case "oom-kill": return "OOMKill"
        case "exit": return "AbnormalExit"
        case "watchdog": return "WatchdogKill"
        default: return "Termination"
        }
    }

    // MARK: stacks and images

    /// A thread's frames in Sentry's order (outermost first, innermost last).
    static func stacktrace(
        _ frames: [FrameRecord], registers: [String: HexAddress]?, modules: [ModuleRecord], variables: Bool = false
    )
        -> [String: Any]
    {
        var stacktrace: [String: Any] = [
            "frames": frames.reversed().map { frame($0, modules: modules, variables: variables) }
        ]
        if let registers, !registers.isEmpty { stacktrace["registers"] = registers.mapValues(\.description) }
        return stacktrace
    }

    static func frame(_ record: FrameRecord, modules: [ModuleRecord], variables: Bool = false) -> [String: Any] {
        var frame: [String: Any] = [:]
        if let pc = record.pc { frame["instruction_addr"] = pc.description }
        if let function = record.function { frame["function"] = function }
        // Sentry's `symbol` is the name as it is in the binary: the clone or alias that ran
        // (`worker_loop.cold`) when there is one, else the mangled name of `function`.
        if let symbol = record.symbol ?? record.mangled { frame["symbol"] = symbol }
        if let pc = record.pc?.value, let offset = record.functionOffset?.value, offset <= pc {
            frame["symbol_addr"] = HexAddress(pc - offset).description
        }
        if let file = record.file {
            frame["filename"] = file
            if file.hasPrefix("/") { frame["abs_path"] = file }
        }
        if let line = record.line, line > 0 { frame["lineno"] = line }
        if let column = record.column, column > 0 { frame["colno"] = column }
        if let module = module(of: record, in: modules) {
            if let path = module.path { frame["package"] = path }
            if let base = module.base { frame["image_addr"] = base.description }
        } else if let name = record.module {
            frame["package"] = name
        }
        if let inApp = record.inApp { frame["in_app"] = inApp }
        if let trust = trust(record.trust) { frame["trust"] = trust }
        // A Python frame among native ones: Sentry's per-frame platform, as its SDKs set for
        // mixed stacks.
        if record.language == FrameRecord.pythonLanguage { frame["platform"] = "python" }
        // Sentry's frame `vars`: name to value (an inner scope's name shadows an outer one's,
        // which comes later in the list).
        if variables, let vars = record.vars, !vars.isEmpty {
            frame["vars"] = Dictionary(vars.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        }
        return frame
    }

    /// The module a frame is in: the one whose range holds its pc, else the one its file name names.
    static func module(of frame: FrameRecord, in modules: [ModuleRecord]) -> ModuleRecord? {
        if let pc = frame.pc?.value,
            let found = modules.first(where: {
                guard let base = $0.base?.value, let size = $0.size?.value else { return false }
                return pc >= base && pc - base < size
            })
        {
            return found
        }
        guard let name = frame.module else { return nil }
        return modules.first { ($0.path.map { $0.pathBaseName }) == name }
    }

    /// Sentry's names for how a frame was found (symbolicator's `FrameTrust`); a signal frame
    /// has none of its own, so it is left without.
    static func trust(_ trust: FrameTrust?) -> String? {
        switch trust {
        case .context: return "context"
        case .cfi: return "cfi"
        case .framePointer: return "fp"
        case .scan: return "scan"
        case .signalFrame, nil: return nil
        }
    }

    /// A module as a debug image; nil without a build-id or a base (see the file comment).
    static func debugImage(_ module: ModuleRecord) -> [String: Any]? {
        guard let buildID = module.buildID, let debugID = SentryDebugID(buildID: buildID), let base = module.base else {
            return nil
        }
        var image: [String: Any] = [
            "type": "elf", "code_id": buildID.lowercased(), "debug_id": debugID.description, "image_addr": base.description,
        ]
        if let path = module.path { image["code_file"] = path }
        if let size = module.size?.value { image["image_size"] = Int(clamping: size) }
        return image
    }

    // MARK: contexts, extra, breadcrumbs

    static func contexts(_ event: Event, options: Options) -> [String: Any] {
        var contexts: [String: Any] = [:]
        let os = options.operatingSystem
        if let os {
            var value: [String: Any] = ["type": "os", "name": os.name]
            if let release = os.kernelRelease {
                value["version"] = release
                value["kernel_version"] = release
            }
            if let build = os.kernelVersion { value["build"] = build }
            if let name = os.distributionName { value["distribution_name"] = name }
            if let version = os.distributionVersion { value["distribution_version"] = version }
            if let pretty = os.distributionPrettyName { value["distribution_pretty_name"] = pretty }
            contexts["os"] = value
        }
        if let arch = os?.machine ?? architecture(event) { contexts["device"] = ["type": "device", "arch": arch] }
        var process: [String: Any] = ["type": "process"]
        if let executable = event.process?.executable { process["name"] = executable.pathBaseName }
        if let pid = event.process?.pid { process["pid"] = Int(pid.rawValue) }
        if process.count > 1 { contexts["process"] = process }
        return contexts
    }

    /// The CPU the registers were taken from, when the OS facts are missing.
    static func architecture(_ event: Event) -> String? {
        guard let registers = event.crashedThreadRecord?.registers ?? event.threads?.first?.registers else { return nil }
        if registers["rip"] != nil { return "x86_64" }
        if registers["x29"] != nil || registers["pc"] != nil && registers["sp"] != nil { return "arm64" }
        return nil
    }

    /// What has no field of its own in Sentry's event: the report's id, why it ended, what the
    /// capture could not get. Never the arguments or the environment.
    static func extra(_ event: Event) -> [String: Any] {
        var extra: [String: Any] = [:]
        if let id = event.id { extra["crashport_report_id"] = id }
        if let title = event.title { extra["title"] = title }
        if let reason = event.reason { extra["reason"] = reason }
        if let notes = event.notes, !notes.isEmpty { extra["capture_notes"] = notes }
        if let truncated = event.annotationsTruncated, !truncated.isEmpty { extra["annotations_truncated"] = truncated }
        if let launch = event.launch {
            var value: [String: Any] = [:]
            if let during = launch.crashedDuringLaunch { value["crashed_during_launch"] = during }
            if let since = launch.sinceInstallMilliseconds { value["since_install_ms"] = Int(clamping: since) }
            if !value.isEmpty { extra["launch"] = value }
        }
        if let session = event.session { extra["session"] = session }
        if let hang = event.hangMilliseconds { extra["hang_ms"] = Int(clamping: hang) }
        if let code = event.exitCode { extra["exit_code"] = Int(code) }
        if let from = event.capturedFrom { extra["captured_from"] = from }
        if let attachments = event.attachments, !attachments.isEmpty {
            extra["attachments"] = attachments.map { attachment -> [String: Any] in
                var value: [String: Any] = [:]
                if let file = attachment.file ?? attachment.path {
                    value["name"] = file.pathBaseName
                }
                if let size = attachment.size { value["size"] = Int(clamping: size) }
                if let copied = attachment.copied { value["copied"] = Int(clamping: copied) }
                if attachment.truncated == true { value["truncated"] = true }
                if let error = attachment.error { value["error"] = error }
                if let scope = attachment.scope { value["scope"] = scope }
                return value
            }
        }
        return extra
    }

    static func breadcrumb(_ record: BreadcrumbRecord) -> [String: Any] {
        var value: [String: Any] = ["type": "default", "level": "info"]
        if let timestamp = record.timestamp { value["timestamp"] = timestamp }
        if let category = record.category { value["category"] = category }
        if let message = record.message { value["message"] = message }
        if record.truncated == true { value["data"] = ["truncated": true] }
        return value
    }
}

/// Sentry's debug identifier of an ELF file, from its GNU build-id, as symbolic computes it
/// (symbolic-debuginfo `elf.rs`, `compute_debug_id`): the first 16 bytes of the build-id (a
/// shorter one padded with zeros), read as a little-endian GUID, so the first three fields
/// (4, 2 and 2 bytes) are byte-swapped; age 0, so no suffix. Printed as a lowercase UUID.
public struct SentryDebugID: Sendable, Equatable, CustomStringConvertible {
    public var bytes: [UInt8]

    /// Nil unless `buildID` is an even number of hex digits, at least one byte.
    public init?(buildID: String) {
        let digits = Array(buildID.utf8)
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        var raw: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
                return nil
            }
            raw.append(byte)
        }
        var guid = Array(raw.prefix(16)) + Array(repeating: 0, count: max(0, 16 - raw.count))
        guid[0..<4].reverse()
        guid[4..<6].reverse()
        guid[6..<8].reverse()
        bytes = guid
    }

    public var description: String {
        let hex = bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
        return [hex[0..<4], hex[4..<6], hex[6..<8], hex[8..<10], hex[10..<16]].map { $0.joined() }.joined(separator: "-")
    }
}

/// The crashed machine's OS, for Sentry's `os` and `device` contexts: uname's fields and
/// os-release's, as the minidump keeps them (SystemInfo's csd_version is `uname -srvm`; the
/// LinuxLsbRelease stream holds /etc/lsb-release or /etc/os-release verbatim).
public struct SentryOperatingSystem: Sendable, Equatable {
    /// uname's sysname ("Linux").
    public var name: String
    /// uname's release ("6.1.0-28-amd64").
    public var kernelRelease: String?
    /// uname's version ("#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1").
    public var kernelVersion: String?
    /// uname's machine ("x86_64").
    public var machine: String?
    /// os-release's ID, VERSION_ID and PRETTY_NAME (lsb-release's DISTRIB_*).
    public var distributionName: String?
    public var distributionVersion: String?
    public var distributionPrettyName: String?

    public init(
        name: String = "Linux", kernelRelease: String? = nil, kernelVersion: String? = nil, machine: String? = nil,
        distributionName: String? = nil, distributionVersion: String? = nil, distributionPrettyName: String? = nil
    ) {
        self.name = name
        self.kernelRelease = kernelRelease
        self.kernelVersion = kernelVersion
        self.machine = machine
        self.distributionName = distributionName
        self.distributionVersion = distributionVersion
        self.distributionPrettyName = distributionPrettyName
    }

    /// From a minidump's SystemInfo and LinuxLsbRelease streams; nil without SystemInfo.
    public init?(minidump: Minidump) {
        guard let system = minidump.systemInfo?.system else { return nil }
        self.init(
            name: system.sysname.isEmpty ? "Linux" : system.sysname, kernelRelease: system.release.nilIfEmpty,
            kernelVersion: system.version.nilIfEmpty, machine: system.machine.nilIfEmpty)
        if let release = minidump.stream(MinidumpFormat.MINIDUMP_STREAM_TYPE.LinuxLsbRelease) {
            let fields = Self.releaseFields(String(decoding: release, as: UTF8.self))
            distributionName = fields["ID"] ?? fields["DISTRIB_ID"]
            distributionVersion = fields["VERSION_ID"] ?? fields["DISTRIB_RELEASE"]
            distributionPrettyName = fields["PRETTY_NAME"] ?? fields["DISTRIB_DESCRIPTION"]
        }
    }

    /// `KEY=value` lines (os-release(5): values may be quoted), unquoted; other lines skipped.
    public static func releaseFields(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "="), !line.hasPrefix("#") else { continue }
            var value = line[line.index(after: equals)...].trimmed
            if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
                value = String(value.dropFirst().dropLast())
            }
            fields[String(line[..<equals])] = value
        }
        return fields
    }
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}
