// CrashServer: the watcher's side of the socket. Receives HELLO and CRASH messages, verifies
// them, captures the crashed process, answers with a verdict and writes the report.
//
// Trust: the sender's pid and uid come from SCM_CREDENTIALS (the kernel's word), never from the
// message. A CRASH record is accepted only when its pid equals that pid and its tid is a thread
// of that process, so a peer can only ever make the watcher inspect its own process (DESIGN §8).

import CCrashPortProtocol
import CShims
import Foundation
import LiveProcess
import ReportModel
import Reports
#if canImport(Glibc)
import Glibc
#endif

public struct WrittenReport: Sendable {
    public var id: String
    public var path: String
    public var event: Event
    public var captureNanoseconds: UInt64
}

public final class CrashServer {
    public let socket: Int32
    public let store: ReportStore
    public var options: CaptureOptions
    /// Where the watcher's own messages go (stderr); tests may redirect.
    public var log: (String) -> Void = { FileHandle.standardError.write(Data(("crashport: " + $0 + "\n").utf8)) }
    public var printSummary = true
    public private(set) var reports: [WrittenReport] = []
    /// Crashes whose report could not be written, by pid, with why.
    public private(set) var unwritten: [ProcessID: String] = [:]
    let cache = ELFCache()
    private var phases = ""

    public init(socket: Int32, store: ReportStore, options: CaptureOptions) {
        self.socket = socket
        self.store = store
        self.options = options
    }

    /// Handles every message waiting on the socket without blocking; returns false at EOF.
    @discardableResult
    public func drain() -> Bool {
        var buffer = [UInt8](repeating: 0, count: CrashRecord.maximumSize + 1)
        while true {
            var truncated: Int32 = 0, pid: Int32 = 0, uid: UInt32 = 0, fdCount: Int32 = 0
            var fds = [Int32](repeating: -1, count: 4)
            let count = buffer.withUnsafeMutableBytes { bytes in
                cp_receive_message(
                    socket, bytes.baseAddress, UInt(bytes.count), &truncated, &pid, &uid, &fds, 4, &fdCount, Int32(MSG_DONTWAIT))
            }
            if count < 0 { return errno == EAGAIN || errno == EWOULDBLOCK }
            if count == 0 { return false }
            let received = Array(fds.prefix(Int(fdCount)))
            defer { received.forEach { close($0) } }
            guard truncated == 0 else {
                log("rejected a message from pid \(pid): larger than any crashport message")
                continue
            }
            handle(Array(buffer.prefix(count)), senderPID: ProcessID(pid), senderUID: uid, replyFDs: received)
        }
    }

    func handle(_ bytes: [UInt8], senderPID: ProcessID, senderUID: UInt32, replyFDs: [Int32]) {
        let header: WireHeader
        do {
            header = try WireHeader(bytes: bytes)
        } catch {
            log("rejected a message from pid \(senderPID): \(error)")
            return
        }
        switch header.type {
        case CP_MSG_HELLO.rawValue:
            do {
                let hello = try HelloMessage(bytes: bytes)
                if hello.pid != senderPID { log("HELLO from pid \(senderPID) claims pid \(hello.pid); ignored") }
            } catch {
                log("rejected a HELLO from pid \(senderPID): \(error)")
            }
        case CP_MSG_CRASH.rawValue:
            guard let reply = replyFDs.first, replyFDs.count == 1 else {
                log("rejected a crash record from pid \(senderPID): it carried \(replyFDs.count) descriptors, expected 1")
                return
            }
            let record: CrashRecord
            do {
                record = try CrashRecord(bytes: bytes)
            } catch {
                log("rejected a crash record from pid \(senderPID): \(error)")
                sendVerdict(reply, nanoseconds: 0)
                return
            }
            guard record.pid == senderPID else {
                log("rejected a crash record from pid \(senderPID): it names pid \(record.pid)")
                sendVerdict(reply, nanoseconds: 0)
                return
            }
            // A process that already died (its stub stopped waiting) is still reported from the
            // record: the kernel vouched for the pid when the record was sent.
            guard access("/proc/\(record.pid)/task/\(record.tid)", F_OK) == 0 || access("/proc/\(record.pid)", F_OK) != 0 else {
                log("rejected a crash record from pid \(senderPID): thread \(record.tid) is not one of its threads")
                sendVerdict(reply, nanoseconds: 0)
                return
            }
            handleCrash(record, reply: reply)
        default:
            log("rejected a message from pid \(senderPID): unexpected type \(header.type)")
        }
    }

    /// Never blocks: the reply descriptor is the client's choice, and a socket whose peer never
    /// reads must not stall the watcher.
    func sendVerdict(_ fd: Int32, nanoseconds: UInt64) {
        let verdict = VerdictMessage.encode(captureNanoseconds: nanoseconds)
        _ = verdict.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    }

    /// A report for a death no handler could see or report (SIGKILL, the OOM killer, a crash
    /// with crashport's handler removed or unable to run): what the parent saw, and why there is
    /// no more.
    public func writeTermination(
        pid: ProcessID, signal: Int32, executable: String, arguments: [String], oomKills: (UInt64, UInt64)?
    ) {
        let failure = unwritten[pid]
        let id = ReportStore.newID(pid: pid.rawValue)
        var event = Event()
        event.id = id
        event.kind = .termination
        event.timestamp = Event.timestamp()
        event.process = ProcessInfoRecord(pid: pid, executable: executable, arguments: arguments)
        event.signal = SignalRecord(
            number: signal, name: SignalNames.name(signal), description: SignalNames.meaning(signal))
        var notes = [
            failure.map { "the crash was captured but its full report could not be written (\($0)); this is what remains" }
                ?? "no crash record: the process was killed from outside, or died where crashport's handler could not run (it was removed, replaced without chaining, or the stub was not loaded)"
        ]
        if let (before, after) = oomKills, after > before {
            notes.append(
                "the kernel's OOM killer killed \(after - before) process(es) while this one ran (/proc/vmstat oom_kill \(before) -> \(after))"
            )
        }
        event.notes = notes
        do {
            let path = try store.commit(id: id) { directory in
                try ReportStore.writeFile(directory + "/event.json", Array(try event.jsonData()))
            }
            reports.append(WrittenReport(id: id, path: path, event: event, captureNanoseconds: 0))
            if printSummary {
                log(
                    "\(executable) (pid \(pid)) was killed by \(SignalNames.name(signal)) (\(SignalNames.meaning(signal)))\(failure == nil ? " with no crash record" : "; a short report was written instead")\n  \(notes.dropFirst().joined(separator: "\n  "))\(notes.count > 1 ? "\n  " : "")report: \(path)"
                )
            }
        } catch {
            log("could not write the termination report of pid \(pid): \(error)")
        }
    }

    /// For tools/bench: when CRASHPORT_TIMING_FD names an open descriptor, one line per report.
    func reportTiming(suspended: UInt64, held: UInt64, verdict: UInt64, total: UInt64) {
        guard let text = ProcessInfo.processInfo.environment["CRASHPORT_TIMING_FD"], let fd = Int32(text), fd > 2 else { return }
        let line =
            "crashport-watcher suspended_ns=\(suspended) held_ns=\(held) verdict_ns=\(verdict) report_written_ns=\(total) \(phases)\n"
        _ = line.withCString { write(fd, $0, strlen($0)) }
    }

    func handleCrash(_ record: CrashRecord, reply: Int32) {
        let started = monotonicNanoseconds()
        // A process with many threads takes longer to capture: say so before starting, so the
        // stub's bounded wait does not run out mid-capture (it caps the total at 6x its timeout).
        if ProcFiles.threads(of: record.pid).count > 256 {
            let heartbeat = HeartbeatMessage.encode(extendMilliseconds: 10_000)
            _ = heartbeat.withUnsafeBytes { send(reply, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        }
        let capture = CaptureSession.capture(record: record, options: options, cache: cache)
        // The process is released; let it continue down its handler chain now. Unwinding,
        // symbolication and writing happen while it dies.
        let elapsed = monotonicNanoseconds() - started
        sendVerdict(reply, nanoseconds: elapsed)

        let id = ReportStore.newID(pid: record.pid.rawValue)
        let buildStarted = monotonicNanoseconds()
        var event = ReportBuilder.event(for: capture, id: id, timestamp: Event.timestamp())
        let built = monotonicNanoseconds() - buildStarted
        if record.otherCrashes > 0 {
            event.notes =
                (event.notes ?? []) + ["\(record.otherCrashes) other thread(s) crashed while this crash was being reported"]
        }
        do {
            var encoded: UInt64 = 0, dumped: UInt64 = 0
            let path = try store.commit(id: id) { directory in
                var started = monotonicNanoseconds()
                let json = Array(try event.jsonData())
                encoded = monotonicNanoseconds() - started
                try ReportStore.writeFile(directory + "/event.json", json)
                started = monotonicNanoseconds()
                try MinidumpWriter(includeEnvironment: options.captureEnvironment)
                    .write(capture.snapshot, to: directory + "/minidump.dmp")
                dumped = monotonicNanoseconds() - started
            }
            phases = "unwind_symbolicate_ns=\(built) json_ns=\(encoded) minidump_ns=\(dumped)"
            reports.append(WrittenReport(id: id, path: path, event: event, captureNanoseconds: elapsed))
            let pruned = store.prune(keeping: id)
            if !pruned.isEmpty { log("quota: removed \(pruned.count) oldest report(s) (\(pruned.joined(separator: ", ")))") }
            reportTiming(
                suspended: capture.suspendedNanoseconds, held: capture.heldNanoseconds, verdict: elapsed,
                total: monotonicNanoseconds() - started)
            if printSummary { log(String(CrashLog.summary(event, reportPath: path).dropFirst("crashport: ".count))) }
        } catch {
            unwritten[record.pid] = "\(error)"
            log("could not write the report of pid \(record.pid) (\(SignalNames.name(record.signal))): \(error)")
            if printSummary { log(String(CrashLog.summary(event, reportPath: "(not written)").dropFirst("crashport: ".count))) }
        }
    }
}
