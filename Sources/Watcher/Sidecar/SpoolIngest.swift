// SpoolIngest: the spool directory, where a stub writes its crash record when no watcher
// answers (the sidecar is down or restarting), and where the sidecar keeps a captured crash
// whose report it cannot write (a full or read-only reports directory). `crashport watch`
// ingests it when it starts, when inotify says a file arrived, and every 30 seconds.
//
// A spool file is hostile: any user may write one into a root sidecar's spool (mode 1733, like
// /tmp without listing). Its owner (the kernel's word) is who it is reported for, never the pid
// or path inside it; it is read, and the modules it names are opened, with the owner's
// filesystem ids, so it can make the sidecar read nothing its owner could not; it never names a
// process the sidecar reads. A file that does not parse is kept as NAME.bad and said once.

import BoundedBytes
import CCrashPortProtocol
import FoundationEssentials
import LiveProcess
import ReportModel
import Store
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

final class SpoolIngest: Sendable {
    let directory: String
    let fd: Int32
    /// inotify descriptor for arrivals, or -1 (then only the periodic scan finds them).
    let changes: Int32
    /// Root's spool, shared by every user: files are read as their owners.
    let shared: Bool
    let log: WatcherLog
    /// Files being ingested by the pool, and when a file last failed (retried after a minute).
    private let state = Mutex<(inFlight: Set<String>, failed: [String: UInt64])>(([], [:]))

    init(directory: String, shared: Bool, log: WatcherLog) throws {
        self.directory = directory
        self.shared = shared
        self.log = log
        try makeDirectories(parentOf: directory, mode: shared ? 0o755 : 0o700)
        let mode: mode_t = shared ? 0o1733 : 0o700
        if mkdir(directory, mode) == 0 {
            chmod(directory, mode)
        } else if errno != EEXIST {
            throw SidecarError.directory("cannot create the spool \(directory): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw SidecarError.directory("the spool \(directory) is not a directory")
        }
        guard info.st_uid == getuid() else {
            throw SidecarError.directory(
                "the spool \(directory) belongs to uid \(info.st_uid), not to this sidecar's uid \(getuid())")
        }
        if shared && info.st_mode & 0o7777 != 0o1733 { chmod(directory, 0o1733) }
        fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            throw SidecarError.directory("cannot open the spool \(directory): \(String(cString: strerror(errno)))")
        }
        let watch = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if watch >= 0 && inotify_add_watch(watch, directory, UInt32(IN_MOVED_TO | IN_CLOSE_WRITE)) < 0 {
            close(watch)
            changes = -1
        } else {
            changes = watch
        }
    }

    /// Empties the inotify queue (the scan that follows finds what arrived).
    func consumeChanges() {
        guard changes >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Glibc.read(changes, &buffer, buffer.count) > 0 {}
    }

    /// Whether `name` is a spool file's name: PID-TID-NANOSECONDS.crash.
    static func isSpoolName(_ name: String) -> Bool {
        guard name.hasSuffix(".crash") else { return false }
        let parts = name.dropLast(6).split(separator: "-", omittingEmptySubsequences: false)
        return parts.count == 3
            && parts.allSatisfy { !$0.isEmpty && $0.count <= 20 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }
    }

    /// Names in the directory (its own descriptor: a symlink swapped in for it is not followed).
    func names() -> [String] {
        let copy = dup(fd)
        guard copy >= 0, let stream = fdopendir(copy) else { return [] }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [String] = []
        while let entry = readdir(stream) {
            names.append(directoryEntryName(entry))
        }
        return names
    }

    /// Queues every spool file not already being ingested.
    func ingest(writer: ReportWriter, storeFor: @escaping (ReportStore.Owner) -> ReportStore?) {
        let now = monotonicNanoseconds()
        for name in names() {
            if name.hasPrefix(".tmp-") {
                removeIfAbandoned(name)
                continue
            }
            guard Self.isSpoolName(name) else { continue }
            let skip = state.withLock { state in
                if state.inFlight.contains(name) { return true }
                if let failed = state.failed[name], now &- failed < 60_000_000_000 { return true }
                state.inFlight.insert(name)
                return false
            }
            if skip { continue }
            guard let (spooled, owner) = read(name) else {
                state.withLock { _ = $0.inFlight.remove(name) }
                continue
            }
            if spooled.wasSent && writer.wasReported(spooled.record) {
                log.say("spool: \(name) was reported live already; removed")
                remove(name, owner: owner)
                state.withLock { _ = $0.inFlight.remove(name) }
                continue
            }
            guard let store = storeFor(owner) else {
                state.withLock { state in
                    state.inFlight.remove(name)
                    state.failed[name] = now
                }
                continue
            }
            writer.submit { [self] in
                let written = report(spooled, name: name, owner: owner, into: store, writer: writer)
                if written { remove(name, owner: owner) }
                state.withLock { state in
                    state.inFlight.remove(name)
                    if !written { state.failed[name] = monotonicNanoseconds() }
                }
            }
        }
    }

    /// One spooled crash reported into `store`, read and symbolicated as its owner (the debug
    /// files it finds are the owner's to read), dated when it crashed, not when it was picked
    /// up. Whether it was written.
    func report(
        _ spooled: SpooledRecord, name: String, owner: ReportStore.Owner, into store: ReportStore, writer: ReportWriter
    ) -> Bool {
        let capture = try? asOwner(owner) {
            CaptureSession.spooled(
                record: spooled.record, executable: spooled.executable, maps: spooled.maps,
                mapsTruncated: spooled.mapsTruncated, commandLine: spooled.commandLine,
                commandLineTruncated: spooled.commandLineTruncated, cache: ELFCache())
        }
        guard let capture else { return false }
        log.say("spool: reporting \(name) (uid \(owner.uid))")
        let crashed = Self.crashDate(of: spooled.record, now: realtimeNanoseconds())
        var request = ReportRequest(
            capture: capture, id: ReportStore.newID(pid: spooled.record.pid.rawValue, date: crashed ?? Date()), store: store,
            started: monotonicNanoseconds(), captureNanoseconds: 0)
        request.capturedFrom = "spool"
        request.spoolOnFailure = false
        request.source = spooled.record.isHostDump ? "host" : nil
        let time = spooled.record.timeNanoseconds
        request.amend = { event in
            if let crashed {
                event.timestamp = Event.timestamp(crashed)
            } else {
                event.notes =
                    (event.notes ?? []) + [
                        "the spool file's crash time (\(time) ns since 1970) is not a past moment: the timestamp is when it was reported"
                    ]
            }
        }
        return (try? asOwner(owner) { writer.write(request) }) ?? false
    }

    /// When a spooled crash happened: its record's CLOCK_REALTIME at the fault (the time in
    /// the file's name too); nil when that is 0 or later than `now` (nanoseconds since 1970),
    /// which no crash that is being reported can be.
    static func crashDate(of record: CrashRecord, now: UInt64) -> Date? {
        let time = record.timeNanoseconds
        guard time > 0, time <= now else { return nil }
        return Date(timeIntervalSince1970: Double(time / 1_000_000_000) + Double(time % 1_000_000_000) / 1e9)
    }

    /// The file's record and its owner, read as the owner; nil (said why, the file kept as
    /// NAME.bad when it is not a spool file) when it cannot be.
    func read(_ name: String) -> (SpooledRecord, ReportStore.Owner)? {
        var info = stat()
        guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        let owner = ReportStore.Owner(uid: info.st_uid, gid: info.st_gid)
        guard (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= SpooledRecord.maximumSize else {
            reject(name, owner: owner, why: "not a regular file of at most \(SpooledRecord.maximumSize) bytes")
            return nil
        }
        let bytes: [UInt8]? = try? asOwner(owner) {
            let file = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
            guard file >= 0 else { return nil }
            defer { close(file) }
            var opened = stat()
            guard fstat(file, &opened) == 0, opened.st_ino == info.st_ino, opened.st_dev == info.st_dev,
                (opened.st_mode & S_IFMT) == S_IFREG
            else { return nil }
            var bytes = [UInt8](repeating: 0, count: Int(opened.st_size))
            var offset = 0
            while offset < bytes.count {
                let count = bytes[offset...].withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                offset += count
            }
            return Array(bytes.prefix(offset))
        }
        guard let bytes else {
            log.say("spool: cannot read \(name) as its owner uid \(owner.uid); left in place")
            state.withLock { $0.failed[name] = monotonicNanoseconds() }
            return nil
        }
        do {
            return (try SpooledRecord(bytes: bytes), owner)
        } catch {
            reject(name, owner: owner, why: "\(error)")
            return nil
        }
    }

    func reject(_ name: String, owner: ReportStore.Owner, why: String) {
        log.say("spool: \(name) (uid \(owner.uid)) is not a crash record: \(why); kept as \(name).bad")
        _ = try? asOwner(owner) { renameat(fd, name, fd, name + ".bad") }
    }

    func remove(_ name: String, owner: ReportStore.Owner) {
        _ = try? asOwner(owner) { unlinkat(fd, name, 0) }
    }

    /// A .tmp- file a stub left when it died mid-write, an hour old.
    func removeIfAbandoned(_ name: String) {
        var info = stat()
        guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0, (info.st_mode & S_IFMT) == S_IFREG,
            time(nil) - info.st_mtim.tv_sec > 3600
        else { return }
        unlinkat(fd, name, 0)
    }

    /// Keeps a captured crash whose report could not be written, as a spool file owned by the
    /// crashed process's user: ingested (and so reported) once the reports directory takes it.
    func keep(capture: Capture, recordBytes: [UInt8], owner: ReportStore.Owner?, because why: String) {
        let record = capture.record
        let executable = Array((capture.executable ?? "").utf8.prefix(Int(CP_SPOOL_EXE_MAX)))
        let maps = Array((capture.snapshot.linuxFiles.maps ?? []).prefix(Int(CP_SPOOL_MAPS_MAX)))
        let commandLine = Array(
            capture.arguments.flatMap { argument -> [UInt8] in Array(argument.utf8) + [0] }.prefix(Int(CP_SPOOL_CMDLINE_MAX)))
        let bytes = SpooledRecord.encode(record: recordBytes, executable: executable, maps: maps, commandLine: commandLine)
        let name = "\(record.pid)-\(record.tid)-\(record.timeNanoseconds).crash"
        let temporary = ".tmp-watch-\(name)"
        let kept: Bool =
            (try? asOwner(owner) {
                let file = openat(fd, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                guard file >= 0 else { return false }
                let done = bytes.withUnsafeBytes { write(file, $0.baseAddress, $0.count) } == bytes.count
                close(file)
                guard done, renameat(fd, temporary, fd, name) == 0 else {
                    unlinkat(fd, temporary, 0)
                    return false
                }
                return true
            }) ?? false
        log.say(
            kept
                ? "the report of pid \(record.pid) could not be written (\(why)); its record is kept in the spool as \(directory)/\(name) and will be reported when the reports directory takes it"
                : "the report of pid \(record.pid) could not be written (\(why)), nor kept in the spool \(directory) (\(String(cString: strerror(errno))))"
        )
    }

    /// Runs `body` as the file's owner in root's shared spool; as is in a user's own.
    func asOwner<T>(_ owner: ReportStore.Owner?, _ body: () throws -> T) throws -> T {
        try ReportStore.withFilesystemIDs(of: shared ? owner : nil, body)
    }
}
