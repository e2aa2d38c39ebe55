// SidecarHost: `crashport watch --host`, the sidecar as the machine's core handler too
// (HostPattern.swift installs it, HostDumps.swift reports each core). Here: the listening socket
// the cores arrive on (the kernel's coredump socket, accepted by the guard, HostGuard.swift; or
// the pipe helpers' handoff socket), the queue that gives each core its turn on a dump thread
// (HostQueue.swift: none dropped, fair between users, each by its deadline), a look every
// second at the queue and the guard and every few seconds at whether someone else has replaced
// the pattern (logged once, never overwritten back), and the pattern put back at stop.

import BoundedBytes
import CShims
import FoundationEssentials
import LiveProcess
import ReportModel
import Store
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The host level's part of a running sidecar.
final class SidecarHostLevel {
    let pattern: HostPattern
    let installation: HostInstallation
    let listener: Int32
    let dumps: HostDumps
    let queue: HostQueue<CoreArrival>
    let log: WatcherLog
    /// The guard that accepts the kernel's connections (socket modes); nil in pipe mode, or
    /// while one is being started again (the sidecar accepts by itself meanwhile).
    var guardian: HostGuard?
    /// Guards that have gone but were not yet reaped.
    var gone: [HostGuard] = []
    var warned = false
    var lastCheck: UInt64 = 0
    var lastGuardStart: UInt64 = 0

    /// Whether `directory` (absolute) is a directory of root's that only root may write to, not
    /// a link, and every directory above it root's too and writable by root alone or sticky (as
    /// /tmp: no one renames what they do not own there).
    static func isRootsAlone(_ directory: String) -> Bool {
        guard directory.hasPrefix("/") else { return false }
        var path = ""
        let components = directory.split(separator: "/")
        for (index, component) in components.enumerated() {
            path += "/" + component
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == 0 else { return false }
            let othersWrite = info.st_mode & (S_IWGRP | S_IWOTH) != 0
            let last = index == components.count - 1
            if othersWrite && (last || info.st_mode & S_ISVTX == 0) { return false }
        }
        return !components.isEmpty
    }

    init(configuration: HostConfiguration, log: WatcherLog, dumps makeDumps: (HostHandOn?) -> HostDumps) throws {
        let pattern = HostPattern(paths: configuration.paths)
        guard geteuid() == 0 else { throw HostError.notRoot }
        let paths = configuration.paths
        try Self.prepare(paths)
        let mode = configuration.mode ?? HostMode.best()
        let path = mode == .pipe ? paths.handoffSocket : paths.coreSocket
        let fd = try Self.listen(at: path, mode: mode)
        // The guard first: from the moment the pattern names the socket, every dying process it
        // holds has someone to let it go by its deadline.
        if mode != .pipe {
            do {
                guardian = try HostGuard.start(listener: fd)
            } catch {
                close(fd)
                unlink(path)
                throw HostError.socket("cannot start the host level's guard: \(error)")
            }
        }
        do {
            installation = try pattern.install(
                mode: mode, executable: configuration.executable, handOn: configuration.handOn,
                reports: configuration.reports, log: { log.say($0) })
        } catch {
            guardian?.stop()
            close(fd)
            unlink(path)
            throw error
        }
        self.pattern = pattern
        self.listener = fd
        self.log = log
        let handOn = configuration.handOn ? HostHandOn(pattern: installation.replaced) : nil
        let dumps = makeDumps(handOn)
        self.dumps = dumps
        queue = HostQueue(
            name: { "core-\($0.pid)" }, run: { arrival, deadline in dumps.handle(arrival, deadline: deadline) },
            letGo: { arrival in
                dumps.letGoUnread(arrival, why: "its deadline passed before one of its user's places was free")
                arrival.discard()
            })
        lastGuardStart = monotonicNanoseconds()
        log.say(
            "host: the machine's core handler (\(mode.rawValue) mode: \(installation.pattern)); replaced \(HostPattern.quoted(installation.replaced))"
                + (handOn != nil ? ", to which each core is handed on" : "")
        )
        if configuration.handOn && handOn == nil {
            log.say(
                "host: --host-previous chain hands cores on to a pipe handler only; \(HostPattern.quoted(installation.replaced)) is replaced"
            )
        }
    }

    /// The host directory, root's alone, with the marks' directory in it; this process made not
    /// dumpable (the kernel would dump a crash of this sidecar to its own socket, and wait on it).
    static func prepare(_ paths: HostPaths) throws {
        if let failure = ReportStore.makeDirectories(paths.directory, mode: 0o755) {
            throw HostError.unwritable("cannot create \(paths.directory): \(failure)")
        }
        // Its sockets and its record are root's: a directory another user owns or may write to
        // (CRASHPORT_HOST_DIRECTORY kept from a user's environment, say) is refused, as is a link,
        // or one under a directory another user could rename it out of.
        guard isRootsAlone(paths.directory) else {
            throw HostError.unwritable("\(paths.directory) is not a directory of root's that only root may write to")
        }
        // crashport run leaves its marks here as its user; nobody may list or remove another's.
        if ReportStore.makeDirectories(paths.reportedMarks, mode: 0o1733) == nil { chmod(paths.reportedMarks, 0o1733) }
        do {
            try HostProcessSettings.notDumpable()
        } catch {
            throw HostError.unwritable("cannot make the sidecar not dumpable: \(error)")
        }
    }

    /// The socket the kernel (socket modes) or the pipe helpers (pipe mode) connect to. The
    /// kernel connects without waiting: a full backlog loses the crash at once, so it is as deep
    /// as the kernel allows (somaxconn), for a storm that outruns the accepts.
    static func listen(at path: String, mode: HostMode) throws -> Int32 {
        unlink(path)
        do {
            if mode == .pipe {
                let fd = try UnixSocket.listen(on: path, backlog: backlog).fd
                chmod(path, 0o600)
                return fd
            }
            return try CoreSocket.listen(at: path, backlog: backlog).fd
        } catch {
            throw HostError.socket("cannot listen on \(path): \(error)")
        }
    }

    /// The listener's backlog: as deep as the kernel keeps (net.core.somaxconn caps it).
    static let backlog: Int32 = 4096

    /// What the serving loop polls for the host level: the guard's channel, or the listener.
    var pollDescriptor: Int32 { guardian?.channel ?? listener }

    /// Takes every core waiting: from the guard (or the listener, without one) into the queue.
    func accept() {
        if let guardian {
            takeFromGuard(guardian)
            return
        }
        while true {
            if installation.mode == .pipe {
                guard let connection = try? UnixSocket(fd: listener).accept() else { return }
                // The helper's message comes with its descriptors; it waits (bounded) for the answer.
                guard
                    startThread(
                        name: "core-handoff",
                        { [queue, dumps, log] in
                            Self.takeHandoff(connection, into: queue, dumps: dumps, log: log)
                        })
                else {
                    close(connection.fd)
                    return
                }
            } else {
                guard let connection = try? CoreSocket(fd: listener).accept() else { return }
                arrived(connection: connection, from: nil, id: 0, at: monotonicNanoseconds())
            }
        }
    }

    /// The guard's messages: connections it accepted, and any it let go.
    func takeFromGuard(_ guardian: HostGuard) {
        while true {
            switch guardian.next() {
            case .none:
                return
            case .arrival(let id, let arrived, let connection):
                // Taken at once, whatever the queue: the guard's short wait is for a sidecar
                // that does not run, not for one whose places are busy.
                guardian.taken(id)
                self.arrived(connection: CoreSocket(fd: connection), from: guardian, id: id, at: arrived)
            case .released(let id, let arrived, let notTaken):
                let waited = (monotonicNanoseconds() &- arrived) / 1_000_000
                dumps.unread.withLock { $0 += 1 }
                log.say(
                    "host: the guard let a dying process go \(waited) ms after its crash (connection \(id)): "
                        + (notTaken
                            ? "the sidecar did not take it within \(HostGuard.takenNanoseconds / 1_000_000_000) s (stopped, or its serving thread stuck)"
                            : "it was not read by its \(HostLevelLimits.holdNanoseconds / 1_000_000_000) s deadline"))
            case .gone:
                log.say("host: the guard has gone; this sidecar accepts the kernel's connections itself until another starts")
                guardian.closeChannel()
                if !guardian.hasExited() { gone.append(guardian) }
                self.guardian = nil
                return
            }
        }
    }

    /// A connection the kernel made: who is dumping, then its turn in the queue.
    func arrived(connection: CoreSocket, from guardian: HostGuard?, id: UInt64, at time: UInt64) {
        let (found, refusal) = CoreArrival.fromKernel(connection: connection, request: installation.mode == .socketRequest)
        guard var arrival = found else {
            log.say("host: \(refusal ?? "an unknown connection")")
            shutdown(connection.fd, Int32(SHUT_RDWR))
            close(connection.fd)
            guardian?.done(id)
            return
        }
        arrival.arrived = time
        arrival.guardian = guardian
        arrival.guardID = id
        enqueue(arrival)
    }

    func enqueue(_ arrival: CoreArrival) { Self.enqueue(arrival, into: queue, dumps: dumps) }

    /// Into the queue, or let go at once when its user has as many waiting as a user may (on the
    /// serving thread, or a handoff's).
    static func enqueue(_ arrival: CoreArrival, into queue: HostQueue<CoreArrival>, dumps: HostDumps) {
        guard queue.add(arrival, uid: arrival.owner.uid, deadline: arrival.arrived &+ HostLevelLimits.readNanoseconds) else {
            dumps.letGoUnread(arrival, why: "\(HostLevelLimits.queuedPerUser) of its user's crashes are waiting already")
            arrival.discard()
            return
        }
    }

    /// A pipe helper's handoff: "CPHOST1 PID UID GID DUMPMODE" with the pipe the core comes
    /// through and the dying process's pidfd when the kernel gave one. Only root's (the
    /// kernel's helpers) are taken. The helper is told at once that its core is taken (it
    /// reports the core itself if not, within a few seconds), and that it is done once read.
    static func takeHandoff(_ connection: UnixSocket, into queue: HostQueue<CoreArrival>, dumps: HostDumps, log: WatcherLog) {
        var descriptor = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 2000) > 0 else {
            close(connection.fd)
            return
        }
        var buffer = [UInt8](repeating: 0, count: 256)
        guard let message = try? connection.receive(into: &buffer, maxDescriptors: 4) else {
            close(connection.fd)
            return
        }
        let received = message.descriptors
        guard message.count > 0, message.sender.uid == 0, !message.truncated,
            let handoff = CoreHandoff.parse(Array(buffer.prefix(message.count))), received.count >= 1
        else {
            for fd in received { close(fd) }
            close(connection.fd)
            log.say("host: a handoff that is not a crashport core helper's (uid \(message.sender.uid)); refused")
            return
        }
        let pidfd = received.count > 1 ? received[1] : -1
        for fd in received.dropFirst(2) { close(fd) }
        guard writeAll(connection.fd, [CoreHandler.takenByte]) else {
            // The helper has gone (it reports the core itself): nothing to read.
            close(received[0])
            if pidfd >= 0 { close(pidfd) }
            close(connection.fd)
            return
        }
        var arrival = handoff.arrival(stream: received[0], pidfd: pidfd)
        arrival.helper = connection.fd
        enqueue(arrival, into: queue, dumps: dumps)
    }

    /// Every second or so: the queue (its late and expired), the guard (another started if it
    /// has gone, at most every 10 s), and every few seconds whether the pattern is still
    /// crashport's (a change is logged once).
    func check(now: UInt64) {
        queue.look()
        gone.removeAll { $0.hasExited() }
        if let guardian, guardian.hasExited() {
            log.say("host: the guard exited; another is started")
            guardian.closeChannel()
            self.guardian = nil
        }
        if guardian == nil && installation.mode != .pipe && now &- lastGuardStart > 10_000_000_000 {
            lastGuardStart = now
            do {
                guardian = try HostGuard.start(listener: listener)
                log.say("host: a new guard accepts the kernel's connections")
            } catch {
                log.say("host: cannot start another guard (\(error)); this sidecar accepts the kernel's connections itself")
            }
        }
        guard now &- lastCheck > 5_000_000_000 else { return }
        lastCheck = now
        if let other = pattern.replacedSince(installation) {
            if !warned {
                log.say(
                    "host: core_pattern was changed to \(HostPattern.quoted(other)) by someone else; crashport no longer sees crashes at the host level and will not change it back (crashport doctor says so too)"
                )
                warned = true
            }
        } else {
            warned = false
        }
    }

    /// Puts the pattern back, stops listening, waits for the dumps in flight and queued (each
    /// bounded by its deadline), then ends the guard.
    func stop() {
        log.say(pattern.restore(installation))
        unlink(installation.mode == .pipe ? pattern.paths.handoffSocket : pattern.paths.coreSocket)
        // What the guard accepted before the pattern went back is still taken.
        if let guardian { takeFromGuard(guardian) }
        close(listener)
        let deadline = monotonicNanoseconds() &+ HostLevelLimits.holdNanoseconds &+ 1_000_000_000
        while monotonicNanoseconds() < deadline {
            queue.look()
            let counts = queue.counts
            if counts.running + counts.late + counts.queued == 0 { break }
            usleep(10_000)
        }
        guardian?.stop()
        guardian = nil
    }
}

/// How `crashport watch --host` was asked to serve the host level.
public struct HostConfiguration: Sendable {
    public var paths = HostPaths()
    /// Nil: the best the kernel has (HostMode.best).
    public var mode: HostMode?
    /// This crashport, for the pipe helper's pattern.
    public var executable: String
    /// --keep-core: each core kept, compressed, beside its report.
    public var keepCore = false
    /// --host-previous chain: each core also handed on to the pipe handler crashport replaced.
    public var handOn = false
    /// The sidecar's reports directory, recorded for a pipe helper that finds no sidecar.
    public var reports: String?

    public init(executable: String) { self.executable = executable }
}

/// What a pipe helper sends the sidecar with its descriptors.
public struct CoreHandoff: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// The kernel's %d: 2 is a root-only dump (suid_dumpable 2).
    public var dumpMode: Int32

    public init(pid: Int32, uid: UInt32, gid: UInt32, dumpMode: Int32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.dumpMode = dumpMode
    }

    public var encoded: [UInt8] { Array("CPHOST1 \(pid) \(uid) \(gid) \(dumpMode)".utf8) }

    public static func parse(_ bytes: [UInt8]) -> CoreHandoff? {
        let words = String(decoding: bytes, as: UTF8.self).split(separator: " ")
        guard words.count == 5, words[0] == "CPHOST1", let pid = Int32(words[1]), pid > 0, let uid = UInt32(words[2]),
            let gid = UInt32(words[3]), let mode = Int32(words[4])
        else { return nil }
        return CoreHandoff(pid: pid, uid: uid, gid: gid, dumpMode: mode)
    }

    /// The arrival this handoff describes: the kernel's word (the pidfd's) over the helper's
    /// arguments for whose it is, where the kernel gives it.
    public func arrival(stream: Int32, pidfd: Int32) -> CoreArrival {
        var arrival = CoreArrival(
            channel: .pipe, stream: stream, pidfd: pidfd, pid: ProcessID(pid), uid: uid, gid: gid, rootOnly: dumpMode == 2)
        if pidfd >= 0, let info = try? KernelDumpInfo(pidfd: pidfd), info.isDumping, info.pid.rawValue == pid {
            arrival.uid = info.uid
            arrival.gid = info.gid
            arrival.rootOnly = info.rootOnly
        }
        return arrival
    }
}

extension Sidecar {
    /// With --host: installs the host level, its dumps reported through this sidecar's report
    /// writer (its report threads, hooks and per-user stores).
    func startHostLevel() throws {
        guard var host = configuration.host else { return }
        host.reports = configuration.reportsRoot
        let configuration = configuration
        let log = log
        let capturer = capturer!
        hostLevel = try SidecarHostLevel(configuration: host, log: log) { handOn in
            HostDumps(
                paths: host.paths, writer: capturer.writer, cache: capturer.cache,
                storeFor: { Sidecar.store(for: $0, configuration: configuration, log: log) },
                stubReported: { capturer.reportedStubCrash(of: $0, since: $1) },
                say: { log.say($0, uid: $1) }, keepCore: host.keepCore, handOn: handOn)
        }
    }
}

/// The pipe helper (`crashport core-handler`): the kernel starts it per dump, as root, with the
/// core on its stdin and, from Linux 6.16, the dying process's pidfd.
///
/// It hands the sidecar a pipe of its own, not its stdin, and moves the core into it (splice):
/// so the kernel's pipe has one reader, this helper, which exits by the hold deadline whatever
/// the sidecar does, and the kernel (which waits for it) lets the process go then. A sidecar that
/// does not say it took the core within a few seconds (stopped, stuck) is left to itself: the
/// helper reports the core on its own.
public enum CoreHandler {
    /// What the sidecar writes back on the handoff connection: the core is taken (it will be
    /// read), and it is done (the process may go).
    static let takenByte: UInt8 = 2
    static let doneByte: UInt8 = 1

    /// Hands the core to the sidecar listening in the host directory and waits for it to be read
    /// (by the hold deadline); with no sidecar there, or none that takes it, reports it here. The
    /// exit status.
    public static func run(handoff: CoreHandoff, directory: String, pidfd: Int32) -> Int32 {
        let started = monotonicNanoseconds()
        let deadline = started &+ HostLevelLimits.holdNanoseconds
        let paths = HostPaths(directory: directory)
        if let connection = try? UnixSocket.connect(to: paths.handoffSocket) {
            defer { close(connection.fd) }
            if relay(handoff, connection: connection, pidfd: pidfd, started: started, deadline: deadline) { return 0 }
        }
        // No sidecar: this helper reports the core itself, where the sidecar that installed the
        // pattern wrote (its record says), else into the sidecar's default places.
        let recorded = HostPattern(paths: paths).recorded()
        var defaults = SidecarConfiguration.defaults()
        if let reports = recorded?.reports { defaults.reportsRoot = reports }
        let configuration = defaults
        let log = WatcherLog(path: nil)
        let writer = ReportWriter(
            options: configuration.capture, log: { log.say($0) }, announcement: .logLine, keepsReports: false)
        let dumps = HostDumps(
            paths: paths, writer: writer, cache: ELFCache(),
            storeFor: { Sidecar.store(for: $0, configuration: configuration, log: log) },
            stubReported: { _, _ in false }, say: { log.say("core-handler: " + $0, uid: $1) },
            handOn: recorded.flatMap { $0.handOn ? HostHandOn(pattern: $0.replaced) : nil })
        var arrival = handoff.arrival(stream: 0, pidfd: pidfd)
        arrival.arrived = started
        if ReportStore.makeDirectories(configuration.reportsRoot, mode: 0o711) != nil {
            log.say("core-handler: cannot create \(configuration.reportsRoot); pid \(handoff.pid) not reported")
            return 1
        }
        dumps.handle(arrival, deadline: deadline)
        return 0
    }

    /// The core through the sidecar: a pipe of the helper's handed over with the message, the
    /// sidecar's "taken" awaited, the core moved into the pipe, then its "done" awaited (the
    /// kernel holds the process while the sidecar reads its /proc). False, with the pidfd still
    /// open, when the sidecar did not take it in time.
    static func relay(
        _ handoff: CoreHandoff, connection: UnixSocket, pidfd: Int32, started: UInt64, deadline: UInt64
    ) -> Bool {
        guard let pipe = try? HostProcessSettings.pipe() else { return false }
        let sent = (try? connection.send(handoff.encoded, descriptors: pidfd >= 0 ? [pipe.read, pidfd] : [pipe.read])) != nil
        close(pipe.read)
        guard sent, answer(on: connection.fd, until: started &+ HostGuard.takenNanoseconds) == takenByte else {
            close(pipe.write)
            return false
        }
        if pidfd >= 0 { close(pidfd) }
        _ = cp_relay_core(0, pipe.write, connection.fd, deadline)
        close(pipe.write)
        // Stdin stays open until the sidecar is done: the kernel keeps the process (and its
        // /proc, which the sidecar reads) until the core's pipe has no reader but itself.
        _ = answer(on: connection.fd, until: deadline)
        return true
    }

    /// The sidecar's next byte on the connection, nil when it closed or the time ran out.
    static func answer(on fd: Int32, until deadline: UInt64) -> UInt8? {
        while case let now = monotonicNanoseconds(), now < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32((deadline - now) / 1_000_000 + 1))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            var byte: UInt8 = 0
            return read(fd, &byte, 1) == 1 ? byte : nil
        }
        return nil
    }
}
