// HostPattern: crashport as the machine's core handler (the host level, Mach's
// host_set_exception_ports), installed in /proc/sys/kernel/core_pattern while `crashport watch
// --host` runs, and put back exactly as it was found when it stops.
//
// Modes, best first (docs/architecture.md, "The three levels"):
//  - socket-request (Linux 6.17+): `@@/run/crashport/core.sock`. The kernel connects as the
//    dying process, says what it supports, and crashport answers per crash: stream the core and
//    keep the process until the socket closes (COREDUMP_KERNEL|COREDUMP_WAIT), or no core at all
//    (COREDUMP_REJECT: a crash its stub already reported, a rate-limited one).
//  - socket (Linux 6.16): `@/run/crashport/core.sock`, the same stream without the request.
//  - pipe (any kernel): `|crashport core-handler …`, a helper the kernel starts per crash, which
//    hands its stdin and pidfd to the running sidecar (or writes the report itself when no
//    sidecar answers). core_pipe_limit is raised from 0 so that the kernel keeps the process's
//    /proc until the helper is done, and restored with the pattern.
//
// What was found is recorded in a state file (HostPaths.state) before the pattern is changed, so
// a sidecar that was killed (SIGKILL, a crash of its own) leaves enough for the next one: it
// finds its own stale pattern, takes the pattern that was there before from the record, and puts
// that back when it stops. A pattern someone else set while crashport ran is never overwritten
// back: crashport logs it, doctor reports it, and the stop leaves it as it is.

import BoundedBytes
import FoundationEssentials
import LiveProcess
import Processes
import ReportModel
import Store
#if canImport(Glibc)
import Glibc
#endif

/// How the kernel hands a core to crashport.
public enum HostMode: String, Sendable, CaseIterable, Codable {
    case socketRequest = "socket-request"
    case socket
    case pipe

    /// The best this kernel has: the request protocol from 6.17, the plain socket from 6.16,
    /// else the pipe helper.
    public static func best(kernelRelease release: String = HostMode.kernelRelease()) -> HostMode {
        let parts = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard parts.count == 2 else { return .pipe }
        let version = parts[0] * 1000 + parts[1]
        return version >= 6017 ? .socketRequest : version >= 6016 ? .socket : .pipe
    }

    /// `uname -r`.
    public static func kernelRelease() -> String {
        var name = utsname()
        guard uname(&name) == 0 else { return "" }
        return withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}

/// Where the host level keeps its parts. `directory` is /run/crashport for the system's sidecar
/// (or CRASHPORT_HOST_DIRECTORY, which every command that looks for this machine's host level
/// reads); tests use their own (every path is in it, so nothing a test does touches the system's).
public struct HostPaths: Sendable, Equatable {
    public var directory: String
    /// The kernel's own files (tests never change these).
    public var corePattern = "/proc/sys/kernel/core_pattern"
    public var corePipeLimit = "/proc/sys/kernel/core_pipe_limit"

    public init(directory: String = HostPaths.systemDirectory()) { self.directory = directory }

    /// What crashport found and installed (HostInstallation, JSON, 0644: `crashport host status`
    /// reads it as any user).
    public var state: String { directory + "/host.json" }
    /// The coredump socket the kernel connects to (socket modes), 0600 root.
    public var coreSocket: String { directory + "/core.sock" }
    /// Where the pipe helper hands a core to the running sidecar, 0600 root.
    public var handoffSocket: String { directory + "/core-handoff.sock" }
    /// Marks left by `crashport run` for the crashes its stub reported (mode 1733): the host level
    /// does not report them again.
    public var reportedMarks: String { directory + "/reported" }

    /// The host directory of this machine's host level: CRASHPORT_HOST_DIRECTORY when it is an
    /// absolute path, else /run/crashport.
    public static func systemDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        environment["CRASHPORT_HOST_DIRECTORY"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/run/crashport"
    }

    /// The marks directory of a host level installed on this machine (its record names the
    /// directory its sockets are in), nil when none is: `crashport run` leaves its marks there.
    public static func systemReportedMarks(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        let marks = HostPaths(directory: systemDirectory(environment: environment)).reportedMarks
        var info = stat()
        guard lstat(marks, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == 0 else { return nil }
        return marks
    }
}

/// What crashport found in core_pattern and what it put there (HostPaths.state).
public struct HostInstallation: Codable, Sendable, Equatable {
    public var mode: HostMode
    /// The pattern crashport installed.
    public var pattern: String
    /// The pattern it found, put back when it stops.
    public var replaced: String
    /// core_pipe_limit as it was found, when crashport changed it (pipe mode).
    public var replacedPipeLimit: Int?
    /// When it was installed (RFC 3339, UTC).
    public var since: String
    /// The sidecar that installed it.
    public var pid: Int32
    /// Whether each core is also handed on, unchanged, to the pattern it replaced.
    public var handOn: Bool
    /// The sidecar's reports directory: where a pipe helper that finds no sidecar writes.
    public var reports: String?

    enum CodingKeys: String, CodingKey {
        case mode, pattern, replaced, since, pid
        case replacedPipeLimit = "replaced_pipe_limit"
        case handOn = "hand_on"
        case reports
    }
}

public enum HostError: Error, CustomStringConvertible {
    case notRoot
    case unwritable(String)
    case anotherSidecar(Int32)
    case socket(String)

    public var description: String {
        switch self {
        case .notRoot: "the host level needs root (it sets /proc/sys/kernel/core_pattern)"
        case .unwritable(let why): why
        case .anotherSidecar(let pid): "another crashport watch --host (pid \(pid)) is the machine's core handler"
        case .socket(let why): why
        }
    }
}

public struct HostPattern: Sendable {
    public var paths: HostPaths

    public init(paths: HostPaths) { self.paths = paths }

    /// The kernel's pattern now (the file ends with a newline, which is not part of it).
    public func current() throws -> String {
        guard let bytes = ProcFiles.read(paths.corePattern, limit: 4096) else {
            throw HostError.unwritable("cannot read \(paths.corePattern): \(String(cString: strerror(errno)))")
        }
        var text = String(decoding: bytes, as: UTF8.self)
        while text.hasSuffix("\n") { text.removeLast() }
        return text
    }

    func set(_ pattern: String) throws {
        try Self.write(pattern + "\n", to: paths.corePattern)
    }

    func pipeLimit() -> Int? {
        ProcFiles.read(paths.corePipeLimit, limit: 64).flatMap {
            Int(String(decoding: $0, as: UTF8.self).split(whereSeparator: \.isWhitespace).first ?? "")
        }
    }

    static func write(_ text: String, to path: String) throws {
        let fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
        guard fd >= 0 else { throw HostError.unwritable("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard writeAll(fd, Array(text.utf8)) else {
            throw HostError.unwritable("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// The pattern crashport installs in `mode`, with this crashport as the pipe helper. The
    /// kernel keeps at most 127 bytes of a pattern: a longer one is refused here, not cut there.
    public func pattern(for mode: HostMode, executable: String) throws -> String {
        let pattern =
            switch mode {
            case .socketRequest: "@@" + paths.coreSocket
            case .socket: "@" + paths.coreSocket
            // The host directory (the helper finds the handoff socket there), %P the pid
            // (initial namespace), %u %g its real ids, %d the dump mode, %F the pidfd's
            // descriptor (6.16+: 3). Nothing else: the kernel keeps 127 bytes.
            case .pipe:
                "|\(executable) core-handler \(paths.directory) %P %u %g %d" + (HostMode.best() == .pipe ? "" : " %F")
            }
        guard pattern.utf8.count < 128 else {
            throw HostError.unwritable(
                "the core pattern \(pattern) is longer than the kernel keeps (127 bytes): choose a shorter --host-directory or install path"
            )
        }
        return pattern
    }

    /// Whether `pattern` is one this crashport installs over `paths` (a stale one of its own).
    public func isOurs(_ pattern: String) -> Bool {
        pattern == "@@" + paths.coreSocket || pattern == "@" + paths.coreSocket
            || (pattern.hasPrefix("|") && pattern.contains(" core-handler \(paths.directory) %P "))
    }

    /// The installation on record, if any (an unreadable or foreign file reads as none). The
    /// directory may be one a command was pointed at (--host-directory, CRASHPORT_HOST_DIRECTORY),
    /// so the record counts only as a regular file of root's that no one else may write (only
    /// a root sidecar makes one, and `restore` puts its pattern into core_pattern), and a FIFO
    /// there is refused, not waited on.
    public func recorded() -> HostInstallation? {
        guard let bytes = (try? UserFile.read(paths.state, limit: 64 << 10, owner: 0)) ?? nil else { return nil }
        return try? JSONDecoder().decode(HostInstallation.self, from: Data(bytes))
    }

    func record(_ installation: HostInstallation) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(installation)
        let temporary = paths.state + ".new"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw HostError.unwritable("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        let ok = writeAll(fd, Array(data) + [0x0A]) && fsync(fd) == 0
        close(fd)
        guard ok, rename(temporary, paths.state) == 0 else {
            unlink(temporary)
            throw HostError.unwritable("cannot write \(paths.state): \(String(cString: strerror(errno)))")
        }
    }

    /// Installs crashport's pattern: records what was there first (a stale pattern of its own
    /// is replaced by what its record says was there before it). `log` hears what was found.
    public func install(
        mode: HostMode, executable: String, handOn: Bool, reports: String? = nil, log: (String) -> Void
    ) throws -> HostInstallation {
        guard geteuid() == 0 else { throw HostError.notRoot }
        let found = try current()
        var replaced = found
        var replacedLimit: Int?
        if let previous = recorded() {
            if previous.pid != getpid(), Self.isRunningSidecar(previous.pid), isOurs(found) {
                throw HostError.anotherSidecar(previous.pid)
            }
            if isOurs(found) {
                replaced = previous.replaced
                replacedLimit = previous.replacedPipeLimit
                log(
                    "host: found its own pattern left by pid \(previous.pid) (since \(previous.since), which did not stop cleanly); the pattern before it was \(Self.quoted(previous.replaced))"
                )
            } else if found != previous.pattern {
                log(
                    "host: the record of pid \(previous.pid)'s installation is stale (core_pattern now \(Self.quoted(found))); starting afresh"
                )
            }
        } else if isOurs(found) {
            // Ours, but with no record of what it replaced: the kernel's default is all there is.
            replaced = "core"
            log("host: found its own pattern with no record of what it replaced; will put back \"core\"")
        }
        let pattern = try pattern(for: mode, executable: executable)
        if mode == .pipe, replacedLimit == nil, let limit = pipeLimit(), limit == 0 {
            replacedLimit = limit
        }
        let installation = HostInstallation(
            mode: mode, pattern: pattern, replaced: replaced, replacedPipeLimit: replacedLimit,
            since: Event.timestamp(), pid: getpid(), handOn: handOn, reports: reports)
        try record(installation)
        if mode == .pipe, replacedLimit != nil {
            // The kernel keeps the dying process's /proc until the helper exits only while the
            // limit is non-zero; it also bounds how many helpers run at once.
            try Self.write("\(HostLevelLimits.concurrentDumps * 2)\n", to: paths.corePipeLimit)
        }
        try set(pattern)
        return installation
    }

    /// What stands in core_pattern now against what was installed: nil while it is still
    /// crashport's, else the pattern someone else set.
    public func replacedSince(_ installation: HostInstallation) -> String? {
        guard let now = try? current() else { return nil }
        return now == installation.pattern ? nil : now
    }

    /// Puts back what was found, unless someone else has set another pattern since (never
    /// overwritten back); removes the record. Returns what happened, for the log.
    @discardableResult
    public func restore(_ installation: HostInstallation) -> String {
        var said: String
        if let other = replacedSince(installation) {
            said =
                "host: core_pattern was changed to \(Self.quoted(other)) while crashport ran; left as it is (crashport had replaced \(Self.quoted(installation.replaced)))"
        } else {
            do {
                try set(installation.replaced)
                said = "host: core_pattern put back to \(Self.quoted(installation.replaced))"
            } catch {
                return
                    "host: could not put back core_pattern \(Self.quoted(installation.replaced)): \(error); the record stays in \(paths.state) for the next start"
            }
        }
        if let limit = installation.replacedPipeLimit {
            do {
                try Self.write("\(limit)\n", to: paths.corePipeLimit)
            } catch {
                said += "; core_pipe_limit could not be put back to \(limit): \(error)"
            }
        }
        unlink(paths.state)
        return said
    }

    /// `crashport host restore`: puts back the pattern a sidecar that no longer runs left in
    /// place (killed, or its package removed), as its own stop would have; a pattern of
    /// crashport's with no record of what it replaced becomes the kernel's default, `core`.
    /// Never touches a pattern another tool set, nor one a running sidecar holds. Returns what
    /// happened and whether core_pattern is now free of crashport.
    public func restoreLeftBehind() -> (text: String, done: Bool) {
        switch state() {
        case .notInstalled(let now):
            return ("core_pattern: \(now) (not crashport's: nothing to put back)", true)
        case .replaced(let other, _):
            unlink(paths.state)
            return ("core_pattern: \(other), set by another tool since crashport installed its own: left as it is", true)
        case .installed(let installation, running: true):
            return (
                "core_pattern is held by the running sidecar, pid \(installation.pid): stop it (systemctl stop crashport.service) and it puts back \(Self.quoted(installation.replaced))",
                false
            )
        case .installed(let installation, running: false):
            let said = restore(installation)
            return (said, (try? current()) != installation.pattern)
        case .stale:
            do {
                try set("core")
                return (
                    "core_pattern: crashport's, with no record of what it replaced: set to the kernel's default, \"core\"", true
                )
            } catch {
                return ("core_pattern could not be set to the kernel's default \"core\": \(error)", false)
            }
        }
    }

    /// The installation of this machine's host level, when its pattern is in place now.
    public static func installedOnThisMachine() -> HostInstallation? {
        guard case .installed(let installation, _) = HostPattern(paths: HostPaths(directory: HostPaths.systemDirectory())).state()
        else { return nil }
        return installation
    }

    /// Whether pid is a live crashport (its executable's name), not a reused pid.
    static func isRunningSidecar(_ pid: Int32) -> Bool {
        guard pid > 0, kill(pid, 0) == 0 || errno == EPERM else { return false }
        return ProcFiles.executable(of: ProcessID(pid)).map { $0.hasSuffix("/crashport") } ?? false
    }

    static func quoted(_ pattern: String) -> String { "\"" + pattern + "\"" }

    /// What stands in core_pattern, against crashport's record of it.
    public enum State: Equatable {
        /// Not crashport's: the pattern that is there.
        case notInstalled(String)
        /// crashport's pattern with no record of it (a sidecar killed before it recorded).
        case stale(String)
        /// Installed, but another tool has set `pattern` since.
        case replaced(by: String, HostInstallation)
        /// Installed and in place; whether the sidecar that installed it still runs.
        case installed(HostInstallation, running: Bool)
    }

    /// The state of the host level now (doctor and `crashport host status` read it).
    public func state() -> State {
        let now = (try? current()) ?? "(unreadable)"
        guard let installation = recorded() else { return isOurs(now) ? .stale(now) : .notInstalled(now) }
        if now != installation.pattern { return .replaced(by: now, installation) }
        return .installed(installation, running: Self.isRunningSidecar(installation.pid))
    }

    /// `crashport host status`: which mode is installed, since when, what it replaced, and
    /// whether another tool has replaced it since.
    public func status() -> (text: String, installed: Bool) {
        func describe(_ installation: HostInstallation, now: String) -> [String] {
            [
                "core_pattern: \(now)",
                "host level: \(installation.mode.rawValue) mode, installed \(installation.since) by pid \(installation.pid)\(Self.isRunningSidecar(installation.pid) ? "" : " (not running: the next start takes over)")",
                "replaced: \(installation.replaced)" + (installation.handOn ? " (each core is handed on to it)" : ""),
            ]
        }
        switch state() {
        case .notInstalled(let now):
            return ("core_pattern: \(now)\nhost level: not installed (start it with: crashport watch --host)", false)
        case .stale(let now):
            return (
                "core_pattern: \(now)\nhost level: crashport's pattern is installed but no sidecar recorded it (a stale pattern: the next crashport watch --host replaces it)",
                false
            )
        case .replaced(let now, let installation):
            let lines =
                describe(installation, now: now) + [
                    "warning: another tool has set core_pattern since; crashport does not see crashes until it is restarted"
                ]
            return (lines.joined(separator: "\n"), false)
        case .installed(let installation, _):
            return (describe(installation, now: installation.pattern).joined(separator: "\n"), true)
        }
    }
}

/// The host level's bounds (docs/operating.md, "The host level").
public enum HostLevelLimits {
    /// Cores read at once in all (HostQueue); the rest wait their turn, each by its deadline.
    public static let concurrentDumps = 16
    /// Cores of one user read at once: one user's slow or huge dumps hold that user's places only.
    public static let dumpsPerUser = 4
    /// More places, for queued cores whose deadline is near (read for what is left of it).
    public static let lateDumps = 8
    /// Cores of one user waiting at most; past it, that user's next crashes are let go at once,
    /// unread (said, and counted in the next report's notes).
    public static let queuedPerUser = 128
    /// How near its deadline a queued core starts in a late place.
    public static let lateMarginNanoseconds: UInt64 = 5_000_000_000
    /// The longest a dying process is held by its dump: the kernel waits for the handler, so
    /// every dump has a deadline from its arrival. 30 s reads a 10 GB core at the disk-free speed
    /// of a pipe (about 1 GB/s here) three times over. The guard (HostGuard) lets the process go
    /// at this deadline whatever the sidecar does; the sidecar's own reads stop a second before
    /// (`readNanoseconds`), so that it closes the stream itself and reports what was read.
    public static let holdNanoseconds: UInt64 = 30_000_000_000
    public static let readNanoseconds: UInt64 = holdNanoseconds - 1_000_000_000
    /// The memory kept from the cores being read at once (stacks, windows, image pages), shared:
    /// each core's plan is cut to what is left (the crashing thread's stack first), with at least
    /// `keptBytesFloor` each.
    public static let keptBytesBudget = 128 << 20
    public static let keptBytesFloor = 1 << 20
    /// Full reports per program (and user) per window; after that crashes are only counted, and
    /// the next full report says how many.
    public static let reportsPerWindow = 5
    public static let windowSeconds = 600
}
