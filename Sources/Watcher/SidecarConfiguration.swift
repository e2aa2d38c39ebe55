// SidecarConfiguration: what `crashport watch` serves and where it writes, from defaults, the
// command line and an optional configuration file (`key = value` lines, the long option names
// without dashes; reread on SIGHUP).

import BoundedBytes
import FoundationEssentials
import LiveProcess
import Reports
#if canImport(Glibc)
import Glibc
#endif

public struct SidecarConfiguration: Sendable {
    /// A path, or with a leading '@' a name in the abstract namespace.
    public var socketPath: String
    /// Root: one directory per uid under it (0700, owned by that uid). A user: the reports.
    public var reportsRoot: String
    public var spoolDirectory: String
    /// Empty: every uid this sidecar may serve (all as root; its own as a user).
    public var allowUIDs: Set<UInt32> = []
    /// Empty: no group restriction. Otherwise the process's real gid or a supplementary group
    /// must be one of these.
    public var allowGroups: Set<UInt32> = []
    public var logPath: String?
    public var configPath: String?
    /// Threads that unwind, symbolicate and write reports.
    public var jobs = 2
    public var maxClients = 4096
    public var maxClientsPerUID = 512
    public var maxReports: Int?
    public var maxBytes: UInt64?
    public var capture = CaptureOptions()
    /// Which frames are the program's own (--in-app / --not-in-app).
    public var inAppRules = InAppRules()
    /// Keep every client traced until it exits (a client can also ask: CRASHPORT_TRACE_EXIT=1);
    /// with `traceExitCodes`, a non-zero exit() is reported too.
    public var traceExit = false
    public var traceExitCodes = false
    /// Watch the heartbeat of every client that beats (a client can name its own:
    /// CRASHPORT_HANG_MS); with `hangKill`, end a hung client with SIGABRT after its report.
    public var hangMilliseconds: UInt64?
    public var hangKill = false

    /// The defaults: root serves every user from /run, /var/lib and /var/spool; a user serves
    /// itself from $XDG_RUNTIME_DIR and ~/.local/state.
    public static func defaults(
        environment: [String: String] = ProcessInfo.processInfo.environment, uid: UInt32 = getuid()
    ) -> SidecarConfiguration {
        if uid == 0 {
            return SidecarConfiguration(
                socketPath: environment["CRASHPORT_SOCKET"].nonEmpty ?? "/run/crashport/crashport.sock",
                reportsRoot: environment["CRASHPORT_REPORTS"].nonEmpty ?? "/var/lib/crashport/reports",
                spoolDirectory: environment["CRASHPORT_SPOOL"].nonEmpty ?? "/var/spool/crashport")
        }
        let home = ReportStore.homeDirectory(environment: environment)
        let state = environment["XDG_STATE_HOME"].nonEmpty ?? home + "/.local/state"
        let runtime = environment["XDG_RUNTIME_DIR"].nonEmpty.map { $0 + "/crashport" } ?? state + "/crashport"
        return SidecarConfiguration(
            socketPath: environment["CRASHPORT_SOCKET"].nonEmpty ?? runtime + "/crashport.sock",
            reportsRoot: ReportStore.defaultRoot(environment: environment),
            spoolDirectory: environment["CRASHPORT_SPOOL"].nonEmpty ?? state + "/crashport/spool")
    }

    public struct Problem: Error, CustomStringConvertible {
        public var description: String
    }

    /// Applies a configuration file: `allow-uid`, `allow-group`, `max-reports`, `max-size`
    /// (MiB), `jobs`, `no-ptrace`, `capture-environment`, `trace-exit`, `trace-exit-codes`,
    /// `hang-ms`, `hang-kill`; `#` starts a comment. The socket,
    /// reports and spool paths are fixed at start (a running sidecar cannot move them).
    public mutating func apply(configFile text: String, file: String) throws {
        allowUIDs = []
        allowGroups = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let trimmed = line.trimmed
            if trimmed.isEmpty { continue }
            let parts = trimmed.split(separator: "=", maxSplits: 1).map { $0.trimmed }
            let key = parts[0]
            let value = parts.count > 1 ? parts[1] : ""
            func bad(_ why: String) -> Problem { Problem(description: "\(file):\(number + 1): \(key): \(why)") }
            switch key {
            case "allow-uid":
                guard let uid = Self.userID(value) else { throw bad("no user \(value)") }
                allowUIDs.insert(uid)
            case "allow-group":
                guard let gid = Self.groupID(value) else { throw bad("no group \(value)") }
                allowGroups.insert(gid)
            case "max-reports":
                guard let count = Int(value), count > 0 else { throw bad("not a positive number: \(value)") }
                maxReports = count
            case "max-size":
                guard let mib = UInt64(value), mib > 0 else { throw bad("not a positive number of MiB: \(value)") }
                maxBytes = mib << 20
            case "jobs":
                guard let count = Int(value), (1...64).contains(count) else { throw bad("not 1...64: \(value)") }
                jobs = count
            case "no-ptrace": capture.usePtrace = !Self.isYes(value)
            case "capture-environment": capture.captureEnvironment = Self.isYes(value)
            case "trace-exit": traceExit = Self.isYes(value)
            case "trace-exit-codes": traceExitCodes = Self.isYes(value)
            case "hang-ms":
                guard let milliseconds = UInt64(value), milliseconds >= 10 else {
                    throw bad("not a number of milliseconds from 10: \(value)")
                }
                hangMilliseconds = milliseconds
            case "hang-kill": hangKill = Self.isYes(value)
            case "socket", "reports", "spool", "log":
                throw bad("set it on the command line (it cannot change while the sidecar runs)")
            default: throw bad("unknown setting")
            }
        }
    }

    /// A boolean setting: present alone, or `true`/`yes`.
    static func isYes(_ value: String) -> Bool { value.isEmpty || value == "true" || value == "yes" }

    /// A uid from a number or a user name.
    public static func userID(_ text: String) -> UInt32? {
        if let number = UInt32(text) { return number }
        return text.withCString { getpwnam($0) }.map { $0.pointee.pw_uid }
    }

    /// A gid from a number or a group name.
    public static func groupID(_ text: String) -> UInt32? {
        if let number = UInt32(text) { return number }
        return text.withCString { getgrnam($0) }.map { $0.pointee.gr_gid }
    }
}

extension Optional where Wrapped == String {
    var nonEmpty: String? { self.flatMap { $0.isEmpty ? nil : $0 } }
}
