// SidecarConfiguration: what `crashport watch` serves and where it writes, from defaults, the
// command line and an optional configuration file (`key = value` lines, the long option names
// without dashes; reread on SIGHUP). Every numeric value is range-checked where it is read (an
// error names the key and the file): a value that is accepted never overflows later, when it is
// turned into bytes or nanoseconds. A file that is not UTF-8 text is refused as such.

import BoundedBytes
import FoundationEssentials
import LiveProcess
import Reports
import Store
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
    /// `--host`: also the machine's core handler while it runs (SidecarHost.swift).
    public var host: HostConfiguration?
    /// Where the node's files are (the container runtimes' and the kubelet's, which name a
    /// container): `/`, or the node's filesystem mounted into a DaemonSet's pod. Nil: as
    /// $CRASHPORT_NODE_ROOT says, else `/`.
    public var nodeRoot: String?

    /// A reports store at `root` with this configuration's quota, written as `owner`.
    func store(root: String, owner: ReportStore.Owner?) -> ReportStore {
        var store = ReportStore(root: root)
        if let maxReports { store.maxReports = maxReports }
        if let maxBytes { store.maxBytes = maxBytes }
        store.owner = owner
        return store
    }

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

    /// hang-ms (and --hang-ms, CRASHPORT_HANG_MS): from 10 ms to a day. Shorter is noise; longer
    /// is no hang watch anyone waits for, and in nanoseconds it would overflow near 2^64 / 10^6.
    public static let hangMillisecondsRange: ClosedRange<UInt64> = 10...86_400_000
    /// max-size (and --max-size), in MiB: the store's range (ReportStore.maxSizeMiBRange).
    public static let maxSizeMiBRange = ReportStore.maxSizeMiBRange
    /// max-reports: up to a million reports in one directory.
    public static let maxReportsRange: ClosedRange<Int> = 1...1_000_000
    /// The largest configuration file read: a few lines are expected.
    public static let maximumFileSize = 1 << 20

    /// The text of configuration file `path`, for `apply(configFile:file:)`: a regular file of at
    /// most `maximumFileSize` bytes (a FIFO is not opened blocking), and UTF-8 text; otherwise a
    /// Problem that says which and names the file.
    public static func read(file path: String) throws -> String {
        let bytes: [UInt8]?
        do {
            // A symlink root chose (a managed /etc file) is followed: its target is read.
            bytes = try UserFile.read(RunHistory.realPath(path), limit: maximumFileSize)
        } catch {
            throw Problem(description: "\(path): \((error as? UserFile.Refused)?.reason ?? "\(error)")")
        }
        guard let bytes else { throw Problem(description: "\(path): no such file") }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
            let line = (lines.firstIndex { String(validating: $0, as: UTF8.self) == nil } ?? 0) + 1
            throw Problem(description: "\(path):\(line): not UTF-8 text; the file is not read")
        }
        return text
    }

    /// Applies a configuration file: `allow-uid`, `allow-group`, `max-reports`, `max-size`
    /// (MiB), `jobs`, `no-ptrace`, `capture-environment`, `trace-exit`, `trace-exit-codes`,
    /// `hang-ms`, `hang-kill`; `#` starts a comment. The socket,
    /// reports and spool paths are fixed at start (a running sidecar cannot move them).
    /// The caller keeps its previous configuration when this throws (the changes are made to a
    /// copy: `var updated = configuration; try updated.apply(…)`).
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
                guard let count = Int(value), Self.maxReportsRange.contains(count) else {
                    throw bad("not a number of reports in \(Self.maxReportsRange): \(value)")
                }
                maxReports = count
            case "max-size":
                guard let mib = UInt64(value), Self.maxSizeMiBRange.contains(mib) else {
                    throw bad("not a number of MiB in \(Self.maxSizeMiBRange): \(value)")
                }
                maxBytes = mib << 20
            case "jobs":
                guard let count = Int(value), (1...64).contains(count) else { throw bad("not 1...64: \(value)") }
                jobs = count
            case "no-ptrace": capture.usePtrace = !Self.isYes(value)
            case "capture-environment": capture.captureEnvironment = Self.isYes(value)
            case "no-journal": capture.journal = !Self.isYes(value)
            case "trace-exit": traceExit = Self.isYes(value)
            case "trace-exit-codes": traceExitCodes = Self.isYes(value)
            case "hang-ms":
                guard let milliseconds = UInt64(value), Self.hangMillisecondsRange.contains(milliseconds) else {
                    throw bad("not a number of milliseconds in \(Self.hangMillisecondsRange): \(value)")
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
