// JournalEntry: every report written is also a journal entry, the one systemd-coredump would
// have written for the same crash, so that the machine's tools that read systemd-coredump's
// output read crashport's: `coredumpctl list` and `info` (its MESSAGE_ID, the COREDUMP_*
// fields, the crashed thread's stack in systemd's own form), `coredumpctl gdb` with
// `--keep-core` (COREDUMP_FILENAME names the kept core.zst), and whatever watches the journal
// for that MESSAGE_ID. crashport's own fields follow (CRASHPORT_REPORT_ID, the report's path,
// its signature and fingerprint). A crash of a core-dumping signal gets systemd-coredump's
// MESSAGE_ID; any other report (a handled error, a hang, a kill, an OOM kill) systemd's
// backtrace MESSAGE_ID, which coredumpctl lists with its reason rather than a signal.
//
// Sent to journald's native socket (CShims' cp_journal_send) when one listens, bounded (250 ms
// for a full or slow socket: a report never waits on the journal), without a word when there is
// no journald (a machine or container without one), with a log line when there is and it fails.
// `--no-journal` (run, watch) or `no-journal` in the sidecar's settings turns it off.

import BoundedBytes
import CShims
import FoundationEssentials
import ReportModel
import Reports

#if canImport(Glibc)
import Glibc
#endif

struct JournalEntry {
    /// systemd's SD_MESSAGE_COREDUMP and SD_MESSAGE_BACKTRACE (sd-messages.h).
    static let coredumpMessageID = "fc2e22bc6ee647b6b90729ab34a250b1"
    static let backtraceMessageID = "1f4e0a44a88649939aaea34fc6da8c95"
    /// journald's native socket; CRASHPORT_JOURNAL_SOCKET names another (tests, a journald
    /// namespace's /run/systemd/journal.NAME/socket).
    static let defaultSocket = "/run/systemd/journal/socket"
    /// The signals whose default action dumps core (signal(7)): a crash of one is a coredump.
    static let coreSignals: Set<Int32> = [SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGXCPU, SIGXFSZ, SIGSYS]
    /// Frames of the stack trace, and bytes of one field and of the whole entry.
    static let maxFrames = 64
    static let maxFieldBytes = 16 << 10
    static let maxEntryBytes = 96 << 10

    private(set) var fields: [(name: String, value: String)] = []

    /// Whose crash: the report's owner (the store's), else this watcher's own user.
    struct Owner {
        var uid: UInt32
        var gid: UInt32
    }

    init(_ event: Event, reportPath: String, owner: Owner, hostname: String?, core: String?) {
        let pid = event.process?.pid.map { String($0.rawValue) } ?? "0"
        let executable = event.process?.executable
        let comm = Self.comm(event)
        let signal = event.signal?.number
        let coredump = event.kind == .crash && signal.map { Self.coreSignals.contains($0) } == true
        let stack = Self.stackTrace(event)
        var message: String
        if coredump {
            // systemd-coredump's first line, word for word (tools match it), then crashport's.
            message =
                "Process \(pid) (\(Self.clean(comm))) of user \(owner.uid) dumped core.\n\n\(Self.clean(CrashLog.oneLine(event)))"
        } else {
            message = "Process \(pid) (\(Self.clean(comm))) of user \(owner.uid): \(Self.clean(CrashLog.oneLine(event)))"
        }
        message += "\nReport: \(Self.clean(reportPath))"
        if !stack.isEmpty { message += "\n\n" + stack }
        add("MESSAGE", message, lines: true)
        add("MESSAGE_ID", coredump ? Self.coredumpMessageID : Self.backtraceMessageID)
        add("PRIORITY", event.kind == .error ? "3" : "2")
        add("SYSLOG_IDENTIFIER", "crashport")
        add("COREDUMP_PID", pid)
        add("COREDUMP_UID", String(owner.uid))
        add("COREDUMP_GID", String(owner.gid))
        if coredump, let signal {
            add("COREDUMP_SIGNAL", String(signal))
        } else {
            // A backtrace entry's "signal" is its reason (coredumpctl info: "Reason: …").
            add("COREDUMP_SIGNAL", Self.reason(event))
        }
        if let name = event.signal?.name { add("COREDUMP_SIGNAL_NAME", name) }
        add("COREDUMP_COMM", comm)
        if let executable { add("COREDUMP_EXE", executable) }
        if let arguments = event.process?.arguments, !arguments.isEmpty {
            add("COREDUMP_CMDLINE", arguments.joined(separator: " "))
        }
        if let cgroup = event.process?.cgroup { add("COREDUMP_CGROUP", cgroup) }
        if let unit = event.process?.unit {
            add(event.process?.cgroup?.contains("/user@") == true ? "COREDUMP_USER_UNIT" : "COREDUMP_UNIT", unit)
        }
        if let hostname { add("COREDUMP_HOSTNAME", hostname) }
        if let time = Self.microseconds(event.timestamp) { add("COREDUMP_TIMESTAMP", String(time)) }
        let main = event.modules?.first { $0.path != nil && $0.path == executable }
        if let package = main?.package, let name = package.name {
            add("COREDUMP_PACKAGE_NAME", name)
            if let version = package.version { add("COREDUMP_PACKAGE_VERSION", version) }
        }
        if let json = Self.packageJSON(event.modules ?? []) { add("COREDUMP_PACKAGE_JSON", json) }
        if let core {
            add("COREDUMP_FILENAME", core)
        }
        if !stack.isEmpty { add("COREDUMP_STACKTRACE", stack, lines: true) }
        if let container = event.process?.container { add("COREDUMP_CONTAINER_ID", container) }
        if let name = event.process?.containerName { add("CRASHPORT_CONTAINER_NAME", name) }
        if let pod = event.process?.pod {
            if let name = pod.name { add("CRASHPORT_POD_NAME", name) }
            if let namespace = pod.namespace { add("CRASHPORT_POD_NAMESPACE", namespace) }
            if let uid = pod.uid { add("CRASHPORT_POD_UID", uid) }
        }
        if let id = event.id { add("CRASHPORT_REPORT_ID", id) }
        add("CRASHPORT_REPORT", reportPath)
        if let kind = event.kind { add("CRASHPORT_KIND", kind.rawValue) }
        if let source = event.source { add("CRASHPORT_SOURCE", source) }
        if let signature = event.signature { add("CRASHPORT_SIGNATURE", signature) }
        if let fingerprint = event.fingerprint { add("CRASHPORT_FINGERPRINT", fingerprint) }
        if let release = event.release { add("CRASHPORT_RELEASE", release) }
    }

    /// A field, its value cut to `maxFieldBytes` on a character's boundary. A one-line field's
    /// control characters are escaped (a program's name, path or arguments are its user's bytes,
    /// and coredumpctl prints them to an administrator's terminal as they are); MESSAGE and the
    /// stack trace are built of escaped parts with newlines of crashport's own.
    private mutating func add(_ name: String, _ value: String, lines: Bool = false) {
        var value = lines ? value : Self.clean(value)
        if value.utf8.count > Self.maxFieldBytes {
            value = Self.cut(value, to: Self.maxFieldBytes - 3) + "..."
        }
        fields.append((name, value))
    }

    /// The entry in journald's native protocol: `NAME=value\n`, or for a value holding a newline
    /// `NAME\n`, its length as 64-bit little-endian, the value, `\n`. Fields past
    /// `maxEntryBytes` are left out (MESSAGE and the ids come first).
    var encoded: [UInt8] {
        var bytes: [UInt8] = []
        for (name, value) in fields {
            var field = Array(name.utf8)
            if value.utf8.contains(UInt8(ascii: "\n")) {
                field.append(UInt8(ascii: "\n"))
                var length = UInt64(value.utf8.count).littleEndian
                withUnsafeBytes(of: &length) { field.append(contentsOf: $0) }
                field.append(contentsOf: value.utf8)
            } else {
                field.append(UInt8(ascii: "="))
                field.append(contentsOf: value.utf8)
            }
            field.append(UInt8(ascii: "\n"))
            if bytes.count + field.count > Self.maxEntryBytes { continue }
            bytes.append(contentsOf: field)
        }
        return bytes
    }

    /// What came of a send.
    enum Outcome: Equatable {
        /// journald took it, or none listens there (no socket at the path, nothing bound to it).
        case sent
        /// journald did not take it in time: its socket is full (it is slow, stopped, or flooded).
        case timedOut(String)
        case failed(String)
    }

    /// Sends the entry to `socket`, waiting at most `timeoutMilliseconds` for room.
    func send(to socket: String, timeoutMilliseconds: Int32 = 250) -> Outcome {
        let bytes = encoded
        let status = bytes.withUnsafeBytes { cp_journal_send(socket, $0.baseAddress, UInt($0.count), timeoutMilliseconds) }
        if status == 0 { return .sent }
        let error = errno
        if error == ENOENT { return .sent }
        if error == ECONNREFUSED {
            // A socket no one listens on is a stopped journald; anything else is no socket.
            var status = stat()
            if stat(socket, &status) == 0, status.st_mode & S_IFMT != S_IFSOCK {
                return .failed("\(socket) is not a socket: no journal entry")
            }
            return .sent
        }
        if error == ETIMEDOUT {
            return .timedOut("journald did not take the entry within \(timeoutMilliseconds) ms (its socket is full)")
        }
        return .failed("could not send the entry to \(socket): \(String(cString: strerror(error)))")
    }

    // MARK: - Fields

    /// `text` as is, or escaped (CrashLog.escaped) when it holds a control character.
    static func clean(_ text: String) -> String {
        text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) } ? CrashLog.escaped(text) : text
    }

    /// `text`'s first `limit` bytes at most, cut on a character's boundary.
    static func cut(_ text: String, to limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var scalars = String.UnicodeScalarView()
        var bytes = 0
        for scalar in text.unicodeScalars {
            bytes += UTF8.width(scalar)
            if bytes > limit { break }
            scalars.append(scalar)
        }
        return String(scalars)
    }

    /// The process's name as the kernel's comm would be: the executable's file name, 15 bytes.
    static func comm(_ event: Event) -> String {
        let name = event.process?.executable.map { String($0.split(separator: "/").last ?? "") } ?? ""
        let cut = Self.cut(name, to: 15)
        return cut.isEmpty ? "?" : cut
    }

    /// What a report that is no coredump is about, in a few words.
    static func reason(_ event: Event) -> String {
        switch event.kind {
        case .error: return "error: " + (event.exception?.type ?? event.reason ?? "handled error")
        case .hang: return "hang"
        case .termination: return event.cause ?? event.signal?.name ?? "termination"
        default: return event.signal?.name ?? event.cause ?? "crash"
        }
    }

    /// The crashed thread's stack as systemd-coredump prints it ("Stack trace of thread TID:",
    /// then `#N  0xPC FUNCTION (MODULE + 0xOFFSET)`), each frame's file and line after it where
    /// known; an interpreter's frame (no address) as `#N  FUNCTION (FILE:LINE)`.
    static func stackTrace(_ event: Event) -> String {
        guard let thread = event.crashedThreadRecord, let frames = thread.frames, !frames.isEmpty else { return "" }
        var lines = ["Stack trace of thread \(thread.tid.map { String($0.rawValue) } ?? "?"):"]
        for (index, frame) in frames.prefix(maxFrames).enumerated() {
            let number = index < 10 ? "#\(index) " : "#\(index)"
            let function = clean(frame.function ?? frame.symbol ?? "n/a")
            let module = clean(frame.module.map { String($0.split(separator: "/").last ?? "") } ?? "n/a")
            let file = frame.file.map(clean)
            let place = file.map { " at \($0)\(frame.line.map { ":\($0)" } ?? "")" } ?? ""
            if let pc = frame.pc {
                let hex = String(pc.value, radix: 16)
                let padded = String(repeating: "0", count: max(0, 16 - hex.count)) + hex
                let offset = frame.moduleOffset.map { " + 0x" + String($0.value, radix: 16) } ?? ""
                lines.append("\(number) 0x\(padded) \(function) (\(module)\(offset))\(place)")
            } else {
                lines.append("\(number) \(function) (\(file ?? module)\(frame.line.map { ":\($0)" } ?? ""))")
            }
        }
        if frames.count > maxFrames { lines.append("(\(frames.count - maxFrames) more frames in the report)") }
        return lines.joined(separator: "\n")
    }

    /// COREDUMP_PACKAGE_JSON: each module's path to its build id and package, as
    /// systemd-coredump writes it (`{"/usr/bin/foo":{"buildId":…,"name":…,"version":…}}`).
    static func packageJSON(_ modules: [ModuleRecord]) -> String? {
        var object: [String: [String: String]] = [:]
        for module in modules.prefix(128) {
            guard let path = module.path else { continue }
            var entry: [String: String] = [:]
            if let buildID = module.buildID { entry["buildId"] = buildID }
            if let package = module.package {
                entry["type"] = package.type
                entry["name"] = package.name
                entry["version"] = package.version
                entry["architecture"] = package.architecture
                entry["os"] = package.os
                entry["osVersion"] = package.osVersion
                entry["debugInfoUrl"] = package.debuginfodURL
            }
            if !entry.isEmpty { object[path] = entry }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard !object.isEmpty, let data = try? encoder.encode(object) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// An event's timestamp (`2026-11-29T23:10:03.123Z`) in microseconds since the epoch.
    static func microseconds(_ timestamp: String?) -> UInt64? {
        timestamp.flatMap(UTCTime.unixMilliseconds).map { $0 * 1000 }
    }
}
