// SidecarHost: `crashport watch --host`, the sidecar as the machine's core handler too
// (HostPattern.swift installs it, HostDumps.swift reports each core). Here: the listening socket
// the cores arrive on (the kernel's coredump socket, or the pipe helpers' handoff socket), one
// thread per dump being read (at most HostLevelLimits.concurrentDumps; the rest are answered at
// once and counted), a look every few seconds at whether someone else has replaced the pattern
// (logged once, never overwritten back), and the pattern put back at stop.

import BoundedBytes
import FoundationEssentials
import LiveProcess
import ReportModel
import Store
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The host level's part of a running sidecar.
final class SidecarHostLevel: @unchecked Sendable {
    // Unchecked: `installation`, `listener` and `warned` are the serving thread's; the dump
    // threads touch only `dumps` (Sendable) and `running` (a Mutex).
    let pattern: HostPattern
    let installation: HostInstallation
    let listener: Int32
    let dumps: HostDumps
    let log: WatcherLog
    let running = Mutex<Int>(0)
    var warned = false
    var lastCheck: UInt64 = 0

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
        if let failure = ReportStore.makeDirectories(paths.directory, mode: 0o755) {
            throw HostError.unwritable("cannot create \(paths.directory): \(failure)")
        }
        // Its sockets and its record are root's: a directory another user owns or may write to
        // (CRASHPORT_HOST_DIRECTORY kept from a user's environment, say) is refused, as is a link,
        // or one under a directory another user could rename it out of.
        guard Self.isRootsAlone(paths.directory) else {
            throw HostError.unwritable("\(paths.directory) is not a directory of root's that only root may write to")
        }
        // crashport run leaves its marks here as its user; nobody may list or remove another's.
        if ReportStore.makeDirectories(paths.reportedMarks, mode: 0o1733) == nil { chmod(paths.reportedMarks, 0o1733) }
        // The kernel would dump a crash of this sidecar to its own socket, and wait on it.
        do {
            try HostProcessSettings.notDumpable()
        } catch {
            throw HostError.unwritable("cannot make the sidecar not dumpable: \(error)")
        }
        let mode = configuration.mode ?? HostMode.best()
        let path = mode == .pipe ? paths.handoffSocket : paths.coreSocket
        unlink(path)
        let fd: Int32
        do {
            if mode == .pipe {
                fd = try UnixSocket.listen(on: path, backlog: 64).fd
                chmod(path, 0o600)
            } else {
                fd = try CoreSocket.listen(at: path, backlog: 64).fd
            }
        } catch {
            throw HostError.socket("cannot listen on \(path): \(error)")
        }
        do {
            installation = try pattern.install(
                mode: mode, executable: configuration.executable, handOn: configuration.handOn,
                reports: configuration.reports, log: { log.say($0) })
        } catch {
            close(fd)
            unlink(path)
            throw error
        }
        self.pattern = pattern
        self.listener = fd
        self.log = log
        let handOn = configuration.handOn ? HostHandOn(pattern: installation.replaced) : nil
        dumps = makeDumps(handOn)
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

    /// Takes every connection waiting: one thread per dump.
    func accept() {
        while true {
            if installation.mode == .pipe {
                guard let connection = try? UnixSocket(fd: listener).accept() else { return }
                // The helper's message comes with its descriptors; it waits (bounded) for the answer.
                startDump(name: "core-handoff") { [self] in takeHandoff(connection) }
            } else {
                guard let connection = try? CoreSocket(fd: listener).accept() else { return }
                let (arrival, refusal) = CoreArrival.fromKernel(
                    connection: connection, request: installation.mode == .socketRequest)
                guard let arrival else {
                    log.say("host: \(refusal ?? "an unknown connection")")
                    close(connection.fd)
                    continue
                }
                startDump(name: "core-\(arrival.pid)") { [self] in dumps.handle(arrival) }
            }
        }
    }

    func startDump(name: String, _ body: @escaping @Sendable () -> Void) {
        running.withLock { $0 += 1 }
        let started = startThread(name: name) { [self] in
            body()
            running.withLock { $0 -= 1 }
        }
        if !started {
            running.withLock { $0 -= 1 }
            log.say("host: no thread for a dump (\(String(cString: strerror(errno)))); it was let go unreported")
        }
    }

    /// A pipe helper's handoff: "CPHOST1 PID UID GID DUMPMODE" with its stdin (the core) and the
    /// dying process's pidfd when the kernel gave one. Only root's (the kernel's helpers) are taken.
    func takeHandoff(_ connection: UnixSocket) {
        defer { close(connection.fd) }
        var descriptor = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 2000) > 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 256)
        guard let message = try? connection.receive(into: &buffer, maxDescriptors: 4) else { return }
        let received = message.descriptors
        guard message.count > 0, message.sender.uid == 0, !message.truncated,
            let handoff = CoreHandoff.parse(Array(buffer.prefix(message.count))), received.count >= 1
        else {
            for fd in received { close(fd) }
            log.say("host: a handoff that is not a crashport core helper's (uid \(message.sender.uid)); refused")
            return
        }
        let pidfd = received.count > 1 ? received[1] : -1
        for fd in received.dropFirst(2) { close(fd) }
        dumps.handle(handoff.arrival(stream: received[0], pidfd: pidfd))
        _ = writeAll(connection.fd, [1])
    }

    /// Every few seconds: whether the pattern is still crashport's (a change is logged once).
    func check(now: UInt64) {
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

    /// Puts the pattern back, stops listening, and waits for the dumps in flight (each bounded
    /// by its hold deadline).
    func stop() {
        log.say(pattern.restore(installation))
        close(listener)
        unlink(installation.mode == .pipe ? pattern.paths.handoffSocket : pattern.paths.coreSocket)
        let deadline = monotonicNanoseconds() &+ HostLevelLimits.holdNanoseconds &+ 1_000_000_000
        while running.withLock({ $0 }) > 0 && monotonicNanoseconds() < deadline { usleep(10_000) }
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
    /// With --host: installs the host level, its dumps reported through this sidecar's crash
    /// server (its report threads, hooks and per-user stores).
    func startHostLevel() throws {
        guard var host = configuration.host else { return }
        host.reports = configuration.reportsRoot
        let configuration = configuration
        let log = log
        let server = server
        hostLevel = try SidecarHostLevel(configuration: host, log: log) { handOn in
            HostDumps(
                paths: host.paths, server: server,
                storeFor: { Sidecar.store(for: $0, configuration: configuration, log: log) },
                stubReported: { server.reportedStubCrash(of: $0, since: $1) },
                say: { log.say($0, uid: $1) }, keepCore: host.keepCore, handOn: handOn)
        }
    }
}

/// The pipe helper (`crashport core-handler`): the kernel starts it per dump, as root, with the
/// core on its stdin and, from Linux 6.16, the dying process's pidfd.
public enum CoreHandler {
    /// Hands the core to the sidecar listening in the host directory and waits for it to be read (at most
    /// the hold bound and a little); with no sidecar there, reports it here. The exit status.
    public static func run(handoff: CoreHandoff, directory: String, pidfd: Int32) -> Int32 {
        let paths = HostPaths(directory: directory)
        let socket = paths.handoffSocket
        if let connection = try? UnixSocket.connect(to: socket) {
            defer { close(connection.fd) }
            if (try? connection.send(handoff.encoded, descriptors: pidfd >= 0 ? [0, pidfd] : [0])) != nil {
                // The sidecar holds the stream now: the kernel waits for its copy to close.
                close(0)
                if pidfd >= 0 { close(pidfd) }
                var descriptor = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
                let wait = Int32((HostLevelLimits.holdNanoseconds + 5_000_000_000) / 1_000_000)
                _ = poll(&descriptor, 1, wait)
                return 0
            }
        }
        // No sidecar: this helper reports the core itself, where the sidecar that installed the
        // pattern wrote (its record says), else into the sidecar's default places.
        let recorded = HostPattern(paths: paths).recorded()
        var defaults = SidecarConfiguration.defaults()
        if let reports = recorded?.reports { defaults.reportsRoot = reports }
        let configuration = defaults
        let log = WatcherLog(path: nil)
        let server = CrashServer(socket: -1, store: ReportStore(root: configuration.reportsRoot), options: configuration.capture)
        server.printSummary = false
        server.reportLine = true
        server.keepReports = false
        server.log = { log.say($0) }
        let dumps = HostDumps(
            paths: paths, server: server,
            storeFor: { Sidecar.store(for: $0, configuration: configuration, log: log) },
            stubReported: { _, _ in false }, say: { log.say("core-handler: " + $0, uid: $1) },
            handOn: recorded.flatMap { $0.handOn ? HostHandOn(pattern: $0.replaced) : nil })
        let arrival = handoff.arrival(stream: 0, pidfd: pidfd)
        if ReportStore.makeDirectories(configuration.reportsRoot, mode: 0o711) != nil {
            log.say("core-handler: cannot create \(configuration.reportsRoot); pid \(handoff.pid) not reported")
            return 1
        }
        dumps.handle(arrival)
        return 0
    }
}
