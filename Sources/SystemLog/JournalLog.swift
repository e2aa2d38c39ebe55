// JournalLog: the last lines journald kept of a unit (or a process) before a crash, read with
// journalctl run as the report's owner, bounded in time, bytes and lines.
//
// Who may read: journalctl runs as the report's owner for good (Processes' ChildProcess: the
// user's uid and primary gid, no supplementary group, so not systemd-journal's or adm's), so
// journald's own file permissions decide: a user reads their own journal (user-UID.journal, which
// journald keeps for a regular user in a persistent journal; a system user has none), never
// another user's lines or the system's; root reads all. Where journald does not run
// (no /run/systemd/journal/socket), there is no journal and nothing is said. Its output is
// hostile text (any process may log any bytes): each line is cut and its control bytes escaped.
//
// Read backwards from the crash (--reverse), then put back in the order logged: journalctl
// 252 given --lines and --until takes the match's last lines and then drops those after
// --until, so a unit that logged 50 lines since the crash (restarted, or other processes of
// it) showed none (seen with a real journald, the one SystemLogReportTests starts). A pid's lines
// start at the process's start (--since): a pid is used again, within a boot and across boots of
// a persistent journal.

import BoundedBytes
import ObjectFile
import Processes

#if canImport(Glibc)
import Glibc
#endif

public enum JournalLog {
    public struct Query: Sendable, Equatable {
        /// `_SYSTEMD_UNIT=nginx.service`, or `_PID=1234` for a process in no service.
        public var match: String
        /// When the process started (seconds since the epoch), for a `_PID` match: no line from
        /// before it, which was another process's of the same pid. nil: unknown, or a unit.
        public var since: UInt64?
        /// The crash's time (CLOCK_REALTIME, seconds since the epoch): lines up to then.
        public var until: UInt64
        /// Lines wanted, the newest.
        public var lines = 50
        /// Whose the report is (nil: the watcher's own, root's).
        public var user: Credentials?

        /// `started`: when the process started (seconds since the epoch), where known; used only
        /// without a unit, whose earlier processes' lines are its own.
        public init(unit: String?, pid: Int32, started: UInt64? = nil, until: UInt64, user: Credentials?) {
            match = unit.map { "_SYSTEMD_UNIT=" + $0 } ?? "_PID=\(pid)"
            since = unit == nil ? started : nil
            self.until = until
            self.user = user
        }
    }

    public struct Limits: Sendable {
        public var bytes = 64 << 10
        public var lineBytes = 1024
        public var nanoseconds: UInt64 = 2_000_000_000
        public init() {}
    }

    /// What journalctl gave: its lines, and what went wrong or was cut (nil: nothing).
    public struct Reading: Sendable, Equatable {
        public var lines: [String] = []
        public var problem: String?
        public var truncated = false
    }

    /// Whether journald runs here (its socket exists).
    public static var available: Bool { access("/run/systemd/journal/socket", F_OK) == 0 }

    /// The arguments journalctl is run with for `query`: the newest lines first (`--reverse`),
    /// up to a second after the crash; from a second before the process's start where known
    /// (its start time is whole seconds, from clock ticks after boot).
    static func arguments(_ query: Query) -> [String] {
        ["journalctl", "--no-pager", "--quiet", "--output=short-precise", "--reverse", "--lines=\(query.lines)"]
            + (query.since.map { ["--since=@\($0 > 0 ? $0 - 1 : 0)"] } ?? []) + ["--until=@\(query.until + 1)", query.match]
    }

    /// Runs journalctl for `query`, bounded by `limits`; nil where journald does not run.
    public static func read(_ query: Query, limits: Limits = Limits(), program: String = "/usr/bin/journalctl") -> Reading? {
        guard available else { return nil }
        var options = ChildProcess.Options()
        options.standardInput = .null
        options.standardOutput = .pipe
        options.standardError = .null
        options.group = .own
        options.user = query.user
        options.environment = ["PATH=/usr/bin:/bin", "LC_ALL=C", "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=", "SYSTEMD_LESS="]
        // Started as the watcher (a report thread holds its client's credentials, which could
        // not change to the user's for good), then as the user for good before its exec.
        let started = WatcherIdentity.run {
            Result { () throws(SystemCallError) in
                try ChildProcess.spawn(program, arguments: arguments(query), options)
            }
        }
        let child: ChildProcess
        switch started {
        case .success(let spawned)?: child = spawned
        case .failure(let error)?: return Reading(problem: "journalctl could not be run: \(error)")
        case nil: return Reading(problem: "journalctl could not be run: the report thread could not take on its own identity")
        }
        let (bytes, complete) = drain(child.output!, limit: limits.bytes, nanoseconds: limits.nanoseconds)
        close(child.output!)
        if !complete { child.signal(SIGKILL, group: true) }
        let exit = child.wait().exit
        var reading = parse(bytes, lineLimit: limits.lineBytes)
        reading.lines = loggedOrder(reading.lines)
        if bytes.count >= limits.bytes {
            reading.truncated = true
            reading.problem = "cut at \(limits.bytes >> 10) KiB of journalctl's output: older lines left out"
        } else if !complete {
            reading.truncated = true
            reading.problem =
                "journalctl did not finish within \(limits.nanoseconds / 1_000_000) ms and was stopped: older lines left out"
        } else if exit != .exited(0) {
            reading.problem =
                "journalctl \(exit.map { "\($0)" } ?? "ended") (the journal could not be read as the report's owner)"
        }
        return reading
    }

    /// Reads `fd` until its end, `limit` bytes or the time is up; whether it reached the end.
    static func drain(_ fd: Int32, limit: Int, nanoseconds: UInt64) -> ([UInt8], Bool) {
        var bytes: [UInt8] = []
        let deadline = monotonicNanoseconds() &+ nanoseconds
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while bytes.count < limit {
            let now = monotonicNanoseconds()
            guard now < deadline else { return (bytes, false) }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(1000, (deadline - now) / 1_000_000 + 1)))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, min($0.count, limit - bytes.count)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return (bytes, true) }
            bytes += buffer[..<count]
        }
        return (bytes, false)
    }

    /// journalctl's output as lines: each cut at `lineLimit` bytes, its control bytes and
    /// invalid UTF-8 escaped; empty lines dropped.
    public static func parse(_ bytes: [UInt8], lineLimit: Int = 1024) -> Reading {
        var reading = Reading()
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            let cut = line.count > lineLimit
            var text = ""
            for scalar in String(decoding: line.prefix(lineLimit), as: UTF8.self).unicodeScalars {
                if scalar.value < 0x20 && scalar != "\t" || (0x7F...0x9F).contains(scalar.value) {
                    text += "\\x" + String(scalar.value, radix: 16).leftPadded(to: 2)
                } else {
                    text.unicodeScalars.append(scalar)
                }
            }
            if cut { text += "…[cut]" }
            reading.lines.append(text)
        }
        return reading
    }
}

extension JournalLog {
    /// journalctl's `--reverse` short output (the newest entry first) in the order logged. An
    /// entry is its first line, which starts with its time, and the lines of a multi-line
    /// message after it, which journalctl indents: entries are reversed, their lines are not.
    static func loggedOrder(_ lines: [String]) -> [String] {
        var entries: [[String]] = []
        for line in lines {
            if let first = line.unicodeScalars.first, first == " " || first == "\t", !entries.isEmpty {
                entries[entries.count - 1].append(line)
            } else {
                entries.append([line])
            }
        }
        return entries.reversed().flatMap { $0 }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
