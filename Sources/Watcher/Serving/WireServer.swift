// WireServer: the watcher's side of the crash socket, and only that. Receives HELLO, CRASH,
// ERROR, SETTING, CONSENT, GOODBYE, LAUNCH and the consent dialog's messages, checks each one,
// and makes one call of its delegate (the mode: the launcher, the sidecar) per message it
// accepts. It knows nothing of captures, reports or stores: what a message means is the mode's.
//
// Trust: the sender's pid and uid come from SCM_CREDENTIALS (the kernel's word), never from the
// message. A CRASH record is accepted only when its pid equals that pid and its tid is a thread
// of that process, still of the sender's user, so a peer can only ever make the watcher inspect
// its own process (docs/security.md). Every refusal is logged (per user, through `logAbout`)
// and returned, so the sidecar can close the connection.

import BoundedBytes
import CCrashPortProtocol
import LiveProcess
import Processes
import ReportModel
#if canImport(Glibc)
import Glibc
#endif

/// Who sent a message: the kernel's word (SCM_CREDENTIALS), never the message's.
public struct Sender: Sendable, Equatable {
    public var pid: ProcessID
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: ProcessID, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    /// Whose credentials apply to whatever is read for this sender: its user's, never root's.
    public var credentials: Credentials { Credentials(uid: uid, gid: gid) }

    /// A process of this sender's (its own, or a thread's pid mapped from its namespace), read
    /// as the sender's user may read it.
    public func access(_ process: ProcessID) -> ProcessAccess { ProcessAccess(pid: process, as: credentials) }
}

/// One receive on a crashport socket.
public enum Received {
    case message([UInt8], Sender, replyFDs: [Int32])
    /// Nothing waiting (non-blocking).
    case empty
    /// The peer closed its end.
    case closed
    /// A message that can never be valid (larger than any crashport message, or with more
    /// descriptors than fit); its descriptors are already closed.
    case rejected(String, Sender)
}

/// A crash or error record the wire server accepted: its pid is the sender's, its thread one of
/// the sender's (or the process has already died), and the process is still the sender's user's.
/// The mode captures it and answers on `reply`, which stays open until its call returns.
public struct AcceptedCrash: Sendable {
    public var record: CrashRecord
    /// The record as received (the spool keeps these bytes if its report cannot be written).
    public var bytes: [UInt8]
    public let reply: Int32
    /// The process's threads when it was checked; empty when it had already died.
    public var threads: [ThreadID]
    /// /proc/PID/status as read when it was checked; nil when it had already died.
    public var status: [UInt8]?
    public var sender: Sender

    /// The verdict: the stub lets the signal go on. Never blocks (WireServer.sendVerdict).
    public func answer(captureNanoseconds: UInt64) { WireServer.sendVerdict(reply, nanoseconds: captureNanoseconds) }

    /// Asks the stub to wait longer for the verdict (a capture of many threads). Never blocks.
    public func extendWait(milliseconds: UInt32) {
        let heartbeat = HeartbeatMessage.encode(extendMilliseconds: milliseconds)
        _ = heartbeat.withUnsafeBytes { send(reply, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    }
}

/// The serving thread's: not shared with report threads.
public final class WireServer {
    /// The socket `drain` reads (`crashport run`'s end of its child's socketpair); the sidecar
    /// hands each client's connection to `receive` instead.
    public let socket: Int32
    /// Where the server's lines go (stderr by default).
    let log: (String) -> Void
    /// Where a line about one client goes, with the client's uid (the sidecar limits floods per
    /// user); nil: `log`.
    let logAbout: ((String, UInt32) -> Void)?
    /// The mode: what each accepted message means.
    weak var delegate: WireServerDelegate?
    private var buffer = [UInt8](repeating: 0, count: CrashRecord.maximumSize + 1)

    init(
        socket: Int32 = -1, delegate: WireServerDelegate?, log: @escaping (String) -> Void,
        logAbout: ((String, UInt32) -> Void)? = nil
    ) {
        self.socket = socket
        self.delegate = delegate
        self.log = log
        self.logAbout = logAbout
    }

    /// Receives one message from `fd` without blocking. Descriptors beyond the one a CRASH
    /// carries are closed by cp_receive_message (and the kernel), never leaked.
    public func receive(from fd: Int32) -> Received {
        let received: UnixSocket.Message?
        do {
            received = try UnixSocket(fd: fd).receive(into: &buffer, maxDescriptors: 4)
        } catch {
            return error.errno == EAGAIN || error.errno == EWOULDBLOCK ? .empty : .closed
        }
        guard let received else { return .closed }
        guard !received.truncated else {
            received.descriptors.forEach { close($0) }
            return .rejected("larger than any crashport message, or carrying more than 4 descriptors", received.sender)
        }
        return .message(Array(buffer.prefix(received.count)), received.sender, replyFDs: received.descriptors)
    }

    /// Handles every message waiting on the socket without blocking; returns false at EOF.
    @discardableResult
    public func drain() -> Bool {
        while true {
            switch receive(from: socket) {
            case .empty: return true
            case .closed: return false
            case .rejected(let why, let sender): log(about: sender.uid, "rejected a message from pid \(sender.pid): \(why)")
            case .message(let bytes, let sender, let fds):
                _ = handle(bytes, sender: sender, replyFDs: fds)
            }
        }
    }

    /// Handles one message; closes the descriptors it carried. Returns why it was rejected, or
    /// nil when it was valid.
    @discardableResult
    public func handle(_ bytes: [UInt8], sender: Sender, replyFDs: [Int32]) -> String? {
        defer { replyFDs.forEach { close($0) } }
        let senderPID = sender.pid
        let header: WireHeader
        do {
            header = try WireHeader(bytes: bytes)
        } catch {
            return reject(sender.uid, "\(Self.messageName(bytes)) from pid \(senderPID): \(error)")
        }
        switch header.type {
        case CP_MSG_HELLO.rawValue: return handleHello(bytes, sender: sender)
        case CP_MSG_CRASH.rawValue, CP_MSG_ERROR.rawValue: return handleCrashRecord(bytes, sender: sender, replyFDs: replyFDs)
        case CP_MSG_SETTING.rawValue: return handleSetting(bytes, sender: sender)
        case CP_MSG_CONSENT.rawValue: return handleConsent(bytes, sender: sender)
        case CP_MSG_GOODBYE.rawValue: return handleGoodbye(bytes, sender: sender)
        case CP_MSG_LAUNCH.rawValue: return handleLaunch(bytes, sender: sender)
        case CP_MSG_PENDING_QUERY.rawValue: return handlePendingQuery(bytes, sender: sender, replyFDs: replyFDs)
        case CP_MSG_CONSENT_REPORT.rawValue: return handleConsentReport(bytes, sender: sender)
        default: return reject(sender.uid, "a message from pid \(sender.pid): unexpected type \(header.type)")
        }
    }

    // MARK: - One function per message type: each returns why it rejected the message, or nil.

    func handleHello(_ bytes: [UInt8], sender: Sender) -> String? {
        let senderPID = sender.pid
        do {
            let hello = try HelloMessage(bytes: bytes)
            if hello.pid != senderPID && ProcFiles.namespaceIDs(of: senderPID)?.last != hello.pid.rawValue {
                log(about: sender.uid, "HELLO from pid \(senderPID) claims pid \(hello.pid); ignored")
            }
            delegate?.hello(hello, from: sender)
        } catch {
            return reject(sender.uid, "a HELLO from pid \(senderPID): \(error)")
        }
        return nil
    }

    /// A CRASH or ERROR record: checked against the kernel's word for its sender (pid, thread,
    /// owner), then captured, answered and reported.
    func handleCrashRecord(_ bytes: [UInt8], sender: Sender, replyFDs: [Int32]) -> String? {
        let senderPID = sender.pid
        guard let reply = replyFDs.first, replyFDs.count == 1 else {
            return reject(
                sender.uid,
                "a crash record from pid \(senderPID): it carried \(replyFDs.count) descriptors, expected 1")
        }
        var kind = stat()
        guard fstat(reply, &kind) == 0, (kind.st_mode & S_IFMT) == S_IFSOCK else {
            return reject(sender.uid, "a crash record from pid \(senderPID): its reply descriptor is not a socket")
        }
        var record: CrashRecord
        do {
            record = try CrashRecord(bytes: bytes)
        } catch {
            Self.sendVerdict(reply, nanoseconds: 0)
            return reject(sender.uid, "a crash record from pid \(senderPID): \(error)")
        }
        if record.pid != senderPID, let mapped = Self.fromOwnPidNamespace(record, sender: senderPID) { record = mapped }
        guard record.pid == senderPID else {
            Self.sendVerdict(reply, nanoseconds: 0)
            return reject(sender.uid, "a crash record from pid \(senderPID): it names pid \(record.pid)")
        }
        // A process that already died (its stub stopped waiting) is still reported from the
        // record: the kernel vouched for the pid when the record was sent.
        let threads = ProcFiles.threads(of: record.pid)
        let alive = !threads.isEmpty
        guard !alive || threads.contains(record.tid) else {
            Self.sendVerdict(reply, nanoseconds: 0)
            return reject(sender.uid, "a crash record from pid \(senderPID): thread \(record.tid) is not one of its threads")
        }
        // The pid may have been reused since the record was sent: the process there now
        // must still belong to the sender's user, or it is not read at all.
        let status = alive ? ProcFiles.read("/proc/\(record.pid)/status") : nil
        if let owner = status.flatMap({ ProcFiles.credentials(status: $0)?.uid }), owner != sender.uid {
            Self.sendVerdict(reply, nanoseconds: 0)
            return reject(
                sender.uid,
                "a crash record from pid \(senderPID) (uid \(sender.uid)): pid \(record.pid) now belongs to uid \(owner)")
        }
        if record.isError, !errorTimes.allows(record.pid) {
            Self.sendVerdict(reply, nanoseconds: 0)
            return reject(
                sender.uid,
                "an error report from pid \(senderPID): more than \(Self.errorsPerMinute) in a minute from this process")
        }
        let accepted = AcceptedCrash(record: record, bytes: bytes, reply: reply, threads: threads, status: status, sender: sender)
        if let refusal = delegate?.crash(accepted) {
            Self.sendVerdict(reply, nanoseconds: 0)
            return reject(sender.uid, "a crash record from pid \(senderPID): \(refusal)")
        }
        return nil
    }

    func handleSetting(_ bytes: [UInt8], sender: Sender) -> String? {
        let senderPID = sender.pid
        guard bytes.count == MemoryLayout<cp_setting>.size else {
            return reject(sender.uid, "a setting from pid \(senderPID): \(bytes.count) bytes")
        }
        let enabled = bytes[Int(MemoryLayout<cp_setting>.offset(of: \cp_setting.enabled)!)]
        guard enabled <= 1 else { return reject(sender.uid, "a setting from pid \(senderPID): enabled = \(enabled)") }
        // Past the limit it is ignored, not rejected: the connection (and the crash it may
        // carry later) stays.
        guard settingTimes.allows(senderPID) else {
            log(about: sender.uid, "ignored a setting from pid \(senderPID): more than \(Self.settingsPerMinute) in a minute")
            return nil
        }
        log(about: sender.uid, "pid \(senderPID) turned crash reporting \(enabled == 1 ? "on" : "off") for its program")
        delegate?.setting(enabled: enabled == 1, from: sender)
        return nil
    }

    func handleConsent(_ bytes: [UInt8], sender: Sender) -> String? {
        let senderPID = sender.pid
        let message: ConsentMessage
        do {
            message = try ConsentMessage(bytes: bytes)
        } catch {
            return reject(sender.uid, "a consent message from pid \(senderPID): \(error)")
        }
        // Past the limit it is ignored, not rejected, as a setting is.
        guard settingTimes.allows(senderPID) else {
            log(
                about: sender.uid,
                "ignored a consent message from pid \(senderPID): more than \(Self.settingsPerMinute) in a minute")
            return nil
        }
        delegate?.consent(message, from: sender)
        return nil
    }

    func handleGoodbye(_ bytes: [UInt8], sender: Sender) -> String? {
        do {
            delegate?.goodbye(try GoodbyeMessage(bytes: bytes), from: sender)
        } catch {
            return reject(sender.uid, "a GOODBYE from pid \(sender.pid): \(error)")
        }
        return nil
    }

    func handleLaunch(_ bytes: [UInt8], sender: Sender) -> String? {
        let message: LaunchMessage
        do {
            message = try LaunchMessage(bytes: bytes)
        } catch {
            return reject(sender.uid, "a launch message from pid \(sender.pid): \(error)")
        }
        // Once per run is what the stub sends; past the settings' limit it is ignored (not logged).
        guard settingTimes.allows(sender.pid) else { return nil }
        if message.protectTimedOut {
            log(about: sender.uid, "pid \(sender.pid): its launch protection's protect work did not finish in time; it launched")
        } else if message.protected {
            let why = message.threshold == 0 ? "its own decision" : "threshold \(message.threshold)"
            log(
                about: sender.uid,
                "pid \(sender.pid) ran its launch protection (\(message.consecutiveLaunchCrashes) launch crashes in a row, \(why))"
            )
        }
        delegate?.launch(message, from: sender)
        return nil
    }

    /// A process in a pid namespace of its own (a container) names itself and its thread in the
    /// record as it sees them; the kernel's credentials give its pid here. The record is the
    /// sender's when /proc/PID/status NSpid says the sender is, inside, the pid the record
    /// names; its thread is the sender's thread whose NSpid ends in the record's tid. Nil when
    /// they do not match (the record stays rejected).
    static func fromOwnPidNamespace(_ record: CrashRecord, sender: ProcessID) -> CrashRecord? {
        guard let ids = ProcFiles.namespaceIDs(of: sender), ids.count > 1, ids.last == record.pid.rawValue,
            let thread = ProcFiles.thread(of: sender, innerID: record.tid.rawValue)
        else { return nil }
        var mapped = record
        mapped.pid = sender
        mapped.tid = thread
        return mapped
    }

    /// What a message whose header is not valid says it is, by its type field when it has one
    /// ("a GOODBYE"): for the log line that rejects it.
    static func messageName(_ bytes: [UInt8]) -> String {
        guard bytes.count >= WireHeader.byteCount else { return "a message" }
        let type = UInt32(bytes[12]) | UInt32(bytes[13]) << 8 | UInt32(bytes[14]) << 16 | UInt32(bytes[15]) << 24
        switch type {
        case CP_MSG_HELLO.rawValue: return "a HELLO"
        case CP_MSG_CRASH.rawValue: return "a crash record"
        case CP_MSG_ERROR.rawValue: return "an error record"
        case CP_MSG_SETTING.rawValue: return "a setting"
        case CP_MSG_GOODBYE.rawValue: return "a GOODBYE"
        case CP_MSG_CONSENT.rawValue: return "a consent message"
        case CP_MSG_LAUNCH.rawValue: return "a launch message"
        case CP_MSG_PENDING_QUERY.rawValue: return "a pending-reports query"
        case CP_MSG_CONSENT_REPORT.rawValue: return "a report's consent"
        default: return "a message"
        }
    }

    /// Handled errors one process may have captured per minute (the stub allows 10 in a row, then
    /// one every 6 s: a stub that does not keep to it is cut off here).
    static let errorsPerMinute = 20
    /// crashport_set_enabled calls one process may have kept per minute (each writes a file).
    static let settingsPerMinute = 10
    private let errorTimes = RateLimit<ProcessID>(perMinute: errorsPerMinute)
    private let settingTimes = RateLimit<ProcessID>(perMinute: settingsPerMinute)
    /// A consent dialog's queries and per-report decisions one process may make per minute
    /// (each reads or writes the user's reports): a dialog deciding for every listed report fits.
    static let pendingPerMinute = 2 * Int(CP_PENDING_MAX) + 16
    let pendingTimes = RateLimit<ProcessID>(perMinute: pendingPerMinute)

    func reject(_ uid: UInt32, _ what: String) -> String {
        log(about: uid, "rejected \(what)")
        return what
    }

    /// A line about a client of `uid`, through `logAbout` (the sidecar's per-user flood
    /// limit), else `log`.
    func log(about uid: UInt32, _ text: String) {
        if let logAbout { logAbout(text, uid) } else { log(text) }
    }

    /// Never blocks: the reply descriptor is the client's choice, and a socket whose peer never
    /// reads must not stall the watcher.
    static func sendVerdict(_ fd: Int32, nanoseconds: UInt64) {
        let verdict = VerdictMessage.encode(captureNanoseconds: nanoseconds)
        _ = verdict.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    }
}
