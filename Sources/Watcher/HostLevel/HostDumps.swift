// HostDumps: one core the kernel hands to the host level, from arrival to report. The same steps
// whichever way it came (the coredump socket through the guard, or the pipe helper's relay passed
// on to the sidecar, or kept by a helper that found no sidecar):
//
//  1. Whose it is: the kernel's word (the pidfd's PIDFD_INFO_COREDUMP, or the helper's %u %g %d),
//     never the stream's. A dump the kernel made as root only (suid_dumpable 2: a setuid program)
//     is reported into root's reports alone, never the user's.
//  2. Its turn (HostQueue): every core is taken, read when one of its user's places frees, by
//     the deadline its arrival set.
//  3. Whether to report it: not when its stub already reported it (through this sidecar, or a
//     `crashport run` that left a mark), not past the program's rate limit (then counted, in
//     its run history with the report it repeats: `list --group` and `stats` show it). A dump
//     that is not reported is answered without a core (socket-request: COREDUMP_REJECT) or
//     ended at once (socket, pipe).
//  4. Read it: the stream once, keeping only what a report needs (Sources/CoreDump; the bytes
//     kept come out of one budget shared by the cores read at once), and the process's /proc as
//     its user could read it, while the kernel holds the process, until the deadline at most:
//     past it the report says so and has what was read.
//  5. Let it go (the stream shut down and closed, the guard told), then build and write the
//     report on a report thread, as the user, with the same pipeline as a live crash: `source`
//     is `host`.

import BoundedBytes
import CoreDump
import FoundationEssentials
import LiveProcess
import ObjectFile
import Processes
import ReportModel
import Reports
import Store
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One core the kernel hands over, and what the kernel said of its process.
public struct CoreArrival: Sendable {
    public enum Channel: String, Sendable {
        /// `@@`: the kernel waits for crashport's answer before it streams anything.
        case socketRequest = "socket-request"
        case socket
        case pipe
    }

    public var channel: Channel
    /// The connection (socket modes) or the pipe the core comes through (pipe).
    public var stream: Int32
    /// The dying process's pidfd, -1 where the kernel gave none.
    public var pidfd: Int32
    /// In the initial pid namespace.
    public var pid: ProcessID
    /// Its real ids.
    public var uid: UInt32
    public var gid: UInt32
    /// The kernel dumped it as root only (suid_dumpable 2): its report is root's alone.
    public var rootOnly: Bool
    /// When it arrived (CLOCK_MONOTONIC): its deadline counts from here.
    public var arrived: UInt64 = monotonicNanoseconds()
    /// The guard that holds a copy of the connection, and its id there (socket modes).
    var guardian: HostGuard?
    var guardID: UInt64 = 0
    /// The pipe helper's connection, told when the dump is done (pipe mode, through the sidecar).
    public var helper: Int32 = -1

    public init(
        channel: Channel, stream: Int32, pidfd: Int32, pid: ProcessID, uid: UInt32, gid: UInt32, rootOnly: Bool
    ) {
        self.channel = channel
        self.stream = stream
        self.pidfd = pidfd
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.rootOnly = rootOnly
    }

    /// Whose report it is: the process's user, or root's alone for a root-only dump.
    var owner: Sender { rootOnly ? Sender(pid: pid, uid: 0, gid: 0) : Sender(pid: pid, uid: uid, gid: gid) }

    /// The process goes on to its end: the stream shut down (a socket's other copies, the
    /// guard's, end with it) and closed, the guard told, the helper answered. Once per arrival.
    func letGo() {
        if channel != .pipe { shutdown(stream, Int32(SHUT_RDWR)) }
        close(stream)
        guardian?.done(guardID)
        if helper >= 0 {
            _ = writeAll(helper, [CoreHandler.doneByte])
            close(helper)
        }
    }

    /// Lets go of a dump that is not read at all, and of its pidfd.
    func discard() {
        letGo()
        if pidfd >= 0 { close(pidfd) }
    }

    /// A connection on the coredump socket: who the kernel says is dumping. Nil (with why) for a
    /// peer the kernel does not say is dumping: nobody but the kernel can connect (the socket is
    /// root's, 0600), but root's own processes can, and are not believed.
    static func fromKernel(connection: CoreSocket, request: Bool) -> (CoreArrival?, String?) {
        let pidfd: Int32
        let info: KernelDumpInfo
        do {
            pidfd = try connection.peerPidfd()
            do {
                info = try KernelDumpInfo(pidfd: pidfd)
            } catch {
                close(pidfd)
                throw error
            }
        } catch {
            if (error as? SystemCallError)?.errno == ESRCH {
                return (nil, "a connection whose process has ended before it was read (let go while the sidecar did not run)")
            }
            return (nil, "a connection whose dying process the kernel does not name: \(error)")
        }
        // PIDFD_COREDUMPED is set once the dump is done; while it streams, USER or ROOT is.
        guard info.isDumping, info.pid.rawValue > 0 else {
            close(pidfd)
            return (nil, "a connection from pid \(info.pid) that the kernel does not say is dumping core; closed")
        }
        return (
            CoreArrival(
                channel: request ? .socketRequest : .socket, stream: connection.fd, pidfd: pidfd, pid: info.pid,
                uid: info.uid, gid: info.gid, rootOnly: info.rootOnly),
            nil
        )
    }
}

/// The bytes kept from the cores being read at once (HostLevelLimits.keptBytesBudget): each
/// core's plan asks for what it would keep and gets what is left, at least the floor.
final class KeptBytesBudget: Sendable {
    private let available: Mutex<Int>
    let floor: Int

    init(bytes: Int = HostLevelLimits.keptBytesBudget, floor: Int = HostLevelLimits.keptBytesFloor) {
        available = Mutex(bytes)
        self.floor = floor
    }

    /// What a plan of `planned` bytes may keep (taken from the budget until `give`n back).
    func take(_ planned: Int) -> Int {
        available.withLock { left in
            let granted = min(planned, max(left, floor))
            left -= granted
            return granted
        }
    }

    func give(_ bytes: Int) { available.withLock { $0 += bytes } }

    var left: Int { available.withLock { $0 } }
}

/// The host level's report writer, shared by the sidecar's dump threads (or used once by a pipe
/// helper that found no sidecar).
public final class HostDumps: Sendable {
    let paths: HostPaths
    /// The one report writer (the sidecar's, or a helper's own), and the modules opened.
    let writer: ReportWriter
    let cache: ELFCache
    let limiter: HostRateLimit
    /// Where a user's reports go (the sidecar's per-user stores); nil: not served.
    let storeFor: @Sendable (Sender) -> ReportStore?
    /// Whether the stub of `pid` reported a crash at or after `startedNanoseconds` (realtime).
    let stubReported: @Sendable (ProcessID, UInt64) -> Bool
    let say: @Sendable (String, UInt32?) -> Void
    /// --keep-core: each core kept, compressed, beside its report (CoreKeeper).
    let keepCore: Bool
    /// --host-previous chain: the pipe handler crashport replaced, each core handed on to it.
    let handOn: HostHandOn?
    let kept = KeptBytesBudget()
    /// Crashes let go unread: their deadline passed before a place was free, or the guard let
    /// them go while the sidecar did not run (said in the next report's notes).
    let unread = Mutex<Int>(0)

    public init(
        paths: HostPaths, writer: ReportWriter, cache: ELFCache, storeFor: @escaping @Sendable (Sender) -> ReportStore?,
        stubReported: @escaping @Sendable (ProcessID, UInt64) -> Bool, say: @escaping @Sendable (String, UInt32?) -> Void,
        keepCore: Bool = false, handOn: HostHandOn? = nil
    ) {
        self.keepCore = keepCore
        self.handOn = handOn
        self.paths = paths
        self.writer = writer
        self.cache = cache
        self.limiter = HostRateLimit(directory: paths.directory + "/rate")
        self.storeFor = storeFor
        self.stubReported = stubReported
        self.say = say
    }

    /// A dump the host level reports: whose, where, and under which id.
    struct Admitted {
        var store: ReportStore
        var access: ProcessAccess
        var id: String
        var executable: String
        /// When the process started (realtime ns; 0 unknown).
        var startedAt: UInt64
        /// Crashes of its program only counted before it (past the rate limit).
        var counted: Int
    }

    /// Handles one arrival to the end, by `deadline` (CLOCK_MONOTONIC; by default the sidecar's
    /// read deadline from the arrival): the stream and pidfd are closed when it returns (the
    /// report itself may still be written on a report thread). Returns the report's id, nil
    /// when none is written.
    @discardableResult
    public func handle(_ arrival: CoreArrival, deadline given: UInt64? = nil) -> String? {
        var open = true
        defer {
            if open { arrival.letGo() }
            if arrival.pidfd >= 0 { close(arrival.pidfd) }
        }
        let started = monotonicNanoseconds()
        let deadline = given ?? arrival.arrived &+ HostLevelLimits.readNanoseconds
        guard let admitted = admit(arrival, deadline: deadline) else { return nil }
        let (pid, owner, access, id) = (arrival.pid, arrival.owner, admitted.access, admitted.id)
        let reading = monotonicNanoseconds()
        let stream = DeadlineReader(fd: arrival.stream, deadline: deadline)
        // --keep-core: the stream also goes, compressed, to a file of the user's.
        let keeper =
            keepCore ? (try? access.perform { CoreKeeper(directory: admitted.store.root, id: id) }) ?? nil : nil
        var granted = 0
        var dump = readStream(arrival, stream: stream, deadline: deadline, keeper: keeper) { planned in
            granted = self.kept.take(planned)
            return granted
        }
        defer { kept.give(granted) }
        if let handOn { dump.notes.append("the core was handed on to the handler crashport replaced, \(handOn.words[0])") }
        let read = monotonicNanoseconds()
        // A stream that ended before any thread's registers (the process killed as its dump
        // began, the kernel's dump failed, a helper that went away) has nothing to report from.
        guard var capture = CaptureSession.core(dump, access: access, cache: cache) else {
            unread.withLock { $0 += 1 }
            say(
                "host: pid \(pid) (\(admitted.executable)): its core ended before any thread's registers (\(dump.notes.last ?? "no notes")); not reported",
                owner.uid)
            return nil
        }
        // The dying process goes on (to its end) once the stream closes.
        arrival.letGo()
        open = false
        let held = monotonicNanoseconds() &- arrival.arrived
        ReportWriter.timingLine(
            "crashport-host pid=\(pid) waited_ns=\(started &- arrival.arrived) checked_ns=\(reading &- started) read_ns=\(read &- reading) proc_ns=\(monotonicNanoseconds() &- read) held_ns=\(held)"
        )
        capture.suspendedNanoseconds = held
        capture.heldNanoseconds = held
        capture.notes += notes(
            arrival, timedOut: stream.timedOut, counted: admitted.counted, waited: started &- arrival.arrived, keeper: keeper)
        var request = ReportRequest(capture: capture, id: id, store: admitted.store, started: started, captureNanoseconds: held)
        write(request: &request, admitted, keeper: keeper)
        return id
    }

    /// Whether a dump is reported: not when its stub reported it, not for a user not served, not
    /// past its program's rate limit (counted then); the kernel asked for the core in
    /// socket-request mode. Nil: declined (answered, said).
    func admit(_ arrival: CoreArrival, deadline: UInt64) -> Admitted? {
        let pid = arrival.pid
        let owner = arrival.owner
        let executable = ProcFiles.executable(of: pid) ?? "(gone)"
        let startedAt = Self.startRealtimeNanoseconds(of: pid)
        if stubReported(pid, startedAt) || takeMark(pid: pid, uid: arrival.uid, startedAt: startedAt) {
            decline(arrival, deadline: deadline)
            say("host: pid \(pid) (\(executable)): reported by its stub; not again", owner.uid)
            return nil
        }
        guard let store = storeFor(owner) else {
            decline(arrival, deadline: deadline)
            return nil
        }
        let access = ProcessAccess(pid: pid, as: owner.credentials)
        let id = ReportStore.newID(pid: pid.rawValue)
        let counted: Int
        switch limiter.admit(program: HostProgram.key(of: access, executable: executable), uid: owner.uid, id: id) {
        case .count(let total, let last):
            decline(arrival, deadline: deadline)
            say(
                "host: pid \(pid) (\(executable)): \(total) reports of it in \(HostLevelLimits.windowSeconds / 60) minutes; counted, not reported",
                owner.uid)
            recordCounted(executable: executable, pid: pid, startedAt: startedAt, repeating: last, store: store, access: access)
            return nil
        case .report(let number):
            counted = number
        }
        if arrival.channel == .socketRequest,
            let failure = Self.answer(arrival.stream, mask: Self.coredumpKernel | Self.coredumpWait, deadline: deadline)
        {
            say("host: pid \(pid): the kernel's request went wrong (\(failure)); not reported", owner.uid)
            return nil
        }
        return Admitted(
            store: store, access: access, id: id, executable: executable, startedAt: startedAt, counted: counted)
    }

    /// The report of a core read, on a report thread as the user: in two steps, as a stub's crash
    /// is (in a storm every report is on disk, its minidump and captured event, before the first
    /// is symbolicated); one that cannot be written is kept in the spool as a record of the
    /// crashing thread (its registers and the top of its stack), reported from there. Then the
    /// kept core, and the program's run history.
    func write(request: inout ReportRequest, _ admitted: Admitted, keeper: CoreKeeper?) {
        let capture = request.capture
        let duringLaunch =
            admitted.startedAt > 0
            ? capture.record.timeNanoseconds &- admitted.startedAt < Self.launchWindowNanoseconds : nil
        // The program's build-id, for its run history: its main module's.
        let buildID = capture.snapshot.modules.first { $0.path == capture.executable }?.buildID?.description
        request.recordBytes = Self.spoolRecord(of: capture)
        request.source = "host"
        request.twoStepsAs = admitted.access
        request.keptCore = keeper != nil
        request.amend = { event in
            if let duringLaunch, event.launch == nil { event.launch = LaunchRecord(crashedDuringLaunch: duringLaunch) }
        }
        let (request, pid, uid) = (request, capture.record.pid, admitted.access.credentials?.uid)
        writer.submit { [self, writer] in
            writer.asClient(admitted.access, pid: pid) {
                let written = writer.write(request)
                if let keeper {
                    let kept = keeper.finish(into: written ? admitted.store.root + "/" + admitted.id : nil)
                    if keeper.failure != nil || !written { say("host: pid \(pid): \(kept)", uid) }
                }
                guard written, admitted.executable != "(gone)" else { return }
                // A crash of the program like any other: its run history and launch-crash count.
                RunHistory(store: admitted.store).ended(
                    SessionRecord(
                        executable: admitted.executable, buildID: buildID, release: nil, pid: pid.rawValue,
                        started: Date(timeIntervalSince1970: Double(admitted.startedAt) / 1e9), ended: Date(),
                        status: .crashed, errors: 0, crashedDuringLaunch: duringLaunch, reportID: admitted.id))
            }
        }
    }

    /// The record the spool keeps of a host capture whose report cannot be written.
    static func spoolRecord(of capture: Capture) -> [UInt8] {
        var record = capture.record
        if let stack = capture.snapshot.threads.first(where: { $0.tid == capture.snapshot.crashedThreadID })?.stack {
            record.stack = stack
        }
        return record.encodedHostDump()
    }

    /// What a report of the host level says of how its core was read.
    func notes(_ arrival: CoreArrival, timedOut: Bool, counted: Int, waited: UInt64, keeper: CoreKeeper?) -> [String] {
        var notes: [String] = []
        if timedOut {
            notes.append(
                "the core stream was not read whole by its deadline (\(HostLevelLimits.holdNanoseconds / 1_000_000_000) s from its arrival): the process was let go with what had been read"
            )
        }
        if waited >= 1_000_000_000 {
            notes.append("the core waited \(waited / 1_000_000) ms for a place (the cores of its user read at once)")
        }
        if counted > 0 {
            notes.append(
                "\(counted) crash(es) of this program before this one were only counted (more than \(HostLevelLimits.reportsPerWindow) in \(HostLevelLimits.windowSeconds / 60) minutes)"
            )
        }
        let skipped = unread.withLock { value -> Int in
            defer { value = 0 }
            return value
        }
        if skipped > 0 {
            notes.append(
                "\(skipped) crash(es) on the machine were let go unread before this one (their deadline passed before they could be read)"
            )
        }
        if arrival.rootOnly {
            notes.append(
                "dumped as root only (fs.suid_dumpable = 2: the process had changed its credentials): reported to root, not to uid \(arrival.uid)"
            )
        }
        if let keeper {
            // The reader stops at the last load; the rest of the stream (the section headers
            // gdb does not need) is not waited for.
            notes.append(keeper.failure ?? "the core stream is kept in \(CoreKeeper.fileName) beside this report")
        }
        return notes
    }

    /// A crash past its program's rate limit, in its run history as a crash that repeats the
    /// program's last report (`list --group` counts it with that report's bug, `stats` as a
    /// crash): written on a report thread, as the user.
    func recordCounted(
        executable: String, pid: ProcessID, startedAt: UInt64, repeating last: String?, store: ReportStore,
        access: ProcessAccess
    ) {
        guard executable != "(gone)" else { return }
        let ended = Date()
        writer.submit { [writer] in
            writer.asClient(access, pid: pid) {
                var session = SessionRecord(
                    executable: executable, buildID: nil, release: nil, pid: pid.rawValue,
                    started: startedAt > 0 ? Date(timeIntervalSince1970: Double(startedAt) / 1e9) : ended, ended: ended,
                    status: .crashed, errors: 0, crashedDuringLaunch: nil, reportID: nil)
                session.countedWith = last ?? ""
                RunHistory(store: store).ended(session)
            }
        }
    }

    /// A core let go unread (its deadline passed before a place, or the guard let it go while
    /// the sidecar did not run): said, and counted for the next report's notes.
    func letGoUnread(_ arrival: CoreArrival, why: String) {
        unread.withLock { $0 += 1 }
        say(
            "host: pid \(arrival.pid) (\(ProcFiles.executable(of: arrival.pid) ?? "gone")): \(why); let go unread",
            arrival.owner.uid)
    }

    /// Crashes within this long of the process's start count as launch crashes (the stub's default
    /// CRASHPORT_LAUNCH_MS: a process without the stub has no other word on it).
    static let launchWindowNanoseconds = UInt64(LaunchWindow.defaultMilliseconds) * 1_000_000

    /// Answers a dump that is not reported: no core at all where the kernel asked (the process
    /// ends as it would have, without its core), else the stream closed unread.
    /// With --host-previous chain the core is still handed on whole, only not reported here.
    func decline(_ arrival: CoreArrival, deadline: UInt64) {
        guard handOn != nil else {
            if arrival.channel == .socketRequest {
                _ = Self.answer(arrival.stream, mask: Self.coredumpReject, deadline: deadline)
            }
            return
        }
        if arrival.channel == .socketRequest,
            Self.answer(arrival.stream, mask: Self.coredumpKernel | Self.coredumpWait, deadline: deadline) != nil
        {
            return
        }
        var passing = CoreDumpReader.Limits()
        passing.keptBytes = 0
        passing.threads = 1
        _ = readStream(
            arrival, stream: DeadlineReader(fd: arrival.stream, deadline: deadline), deadline: deadline, keeper: nil,
            limits: passing)
    }

    /// Reads the stream once: what a report keeps, the whole of it to `keeper` (--keep-core), and
    /// with --host-previous chain every byte to the handler crashport replaced, started once the
    /// notes name the signal (the bytes before are held until then) and waited for before the
    /// process is let go.
    func readStream(
        _ arrival: CoreArrival, stream: DeadlineReader, deadline: UInt64, keeper: CoreKeeper?,
        limits: CoreDumpReader.Limits = CoreDumpReader.Limits(), grant: ((Int) -> Int)? = nil
    ) -> CoreDump {
        final class Passing {
            var running: HostHandOn.Running?
            var pending: [UInt8]? = []
        }
        let passing = Passing()
        let handOn = handOn
        var dump: CoreDump
        do {
            dump = try CoreDumpReader.read(
                from: { buffer in
                    let count = stream.read(buffer)
                    let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
                    keeper?.append(chunk)
                    if handOn != nil {
                        if let running = passing.running {
                            running.write(chunk, deadline: deadline)
                        } else if passing.pending != nil {
                            passing.pending! += chunk
                        }
                    }
                    return count
                }, limits: limits, grant: grant,
                notesRead: { [say] notes in
                    guard let handOn, let pending = passing.pending else { return }
                    passing.pending = nil
                    let facts = HostHandOn.Facts(
                        pid: arrival.pid, uid: arrival.uid, gid: arrival.gid,
                        signal: notes.signalInfo?.signal ?? notes.threads.first?.signal ?? 0, dumpMode: arrival.rootOnly ? 2 : 1)
                    passing.running = handOn.start(facts) { say($0, arrival.uid) }
                    pending.withUnsafeBytes { passing.running?.write($0, deadline: deadline) }
                })
        } catch {
            dump = CoreDump()
            dump.notes.append("the core stream could not be read: \(error)")
        }
        if let running = passing.running {
            // The rest of the stream (past the last load a report needs) goes on too.
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while case let count = buffer.withUnsafeMutableBytes({ stream.read($0) }), count > 0 {
                buffer.withUnsafeBytes { running.write(UnsafeRawBufferPointer(rebasing: $0[0..<count]), deadline: deadline) }
            }
            if let problem = running.finish(deadline: deadline) {
                say("host: pid \(arrival.pid): the previous handler: \(problem)", arrival.uid)
            }
        }
        return dump
    }

    /// The marks `crashport run` leaves for the crashes its stub reported (HostPaths.reportedMarks):
    /// `PID-START` (the process's start, Unix nanoseconds / 10^9), owned by the process's user. A
    /// mark is believed only from that user (a mark suppresses only its owner's report), only as
    /// a file of its own (one link: with fs.protected_hardlinks off, a user could link a file
    /// of root's there), and is removed once read.
    func takeMark(pid: ProcessID, uid: UInt32, startedAt: UInt64) -> Bool {
        guard startedAt > 0 else { return false }
        let path = paths.reportedMarks + "/\(pid)-\(startedAt / 1_000_000_000)"
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == uid, info.st_nlink == 1 else {
            return false
        }
        unlink(path)
        return true
    }

    /// When the process started, in realtime nanoseconds (its start ticks after boot, and the
    /// boot time); 0 when unknown.
    static func startRealtimeNanoseconds(of pid: ProcessID) -> UInt64 {
        CaptureSession.startTime(of: pid).map { UInt64($0) * 1_000_000_000 } ?? 0
    }

    // MARK: - The request protocol (include/uapi/linux/coredump.h)

    static let coredumpKernel: UInt64 = 1
    static let coredumpReject: UInt64 = 4
    static let coredumpWait: UInt64 = 8

    /// Reads the kernel's coredump_req, answers with a coredump_ack of `mask` and reads the
    /// kernel's mark; nil when the kernel took the answer, else what went wrong.
    static func answer(_ fd: Int32, mask: UInt64, deadline: UInt64) -> String? {
        let reader = DeadlineReader(fd: fd, deadline: deadline)
        // coredump_req: u32 size, u32 size_ack, u64 mask; later versions are longer (read whole).
        guard let head = reader.exactly(8) else { return "no request" }
        let size = Int(UInt32(head[0]) | UInt32(head[1]) << 8 | UInt32(head[2]) << 16 | UInt32(head[3]) << 24)
        guard (16...4096).contains(size), let rest = reader.exactly(size - 8) else { return "a request of \(size) bytes" }
        var supported: UInt64 = 0
        for index in 0..<8 { supported |= UInt64(rest[index]) << (8 * index) }
        guard supported & mask == mask else { return "the kernel does not offer \(mask) (offers \(supported))" }
        var ack = [UInt8](repeating: 0, count: 16)
        ack[0] = 16
        for index in 0..<8 { ack[8 + index] = UInt8(truncatingIfNeeded: mask >> (8 * index)) }
        guard writeAll(fd, ack) else { return "the answer could not be sent: \(String(cString: strerror(errno)))" }
        guard let mark = reader.exactly(4) else { return "no mark after the answer" }
        return mark == [0, 0, 0, 0] ? nil : "the kernel refused the answer (mark \(mark[0]))"
    }
}

/// Reads a stream with one deadline for everything (CLOCK_MONOTONIC ns): a dying process is held
/// while its stream is read, so no read may wait past it.
final class DeadlineReader: Sendable {
    let fd: Int32
    let deadline: UInt64
    private let ranOut = Atomic<Bool>(false)

    /// Whether a read met the deadline.
    var timedOut: Bool { ranOut.load(ordering: .relaxed) }

    init(fd: Int32, deadline: UInt64) {
        self.fd = fd
        self.deadline = deadline
    }

    /// Up to `buffer.count` bytes; 0 at the end of the stream, a failure, or the deadline.
    func read(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            let now = monotonicNanoseconds()
            guard now < deadline else {
                ranOut.store(true, ordering: .relaxed)
                return 0
            }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let wait = Int32(min((deadline - now) / 1_000_000 + 1, 1000))
            let ready = poll(&descriptor, 1, wait)
            if ready < 0 && errno != EINTR { return 0 }
            guard ready > 0 else { continue }
            let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            return max(0, count)
        }
    }

    /// Exactly `count` bytes, or nil.
    func exactly(_ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes.withUnsafeMutableBytes { read(UnsafeMutableRawBufferPointer(rebasing: $0[filled...])) }
            guard got > 0 else { return nil }
            filled += got
        }
        return bytes
    }
}
