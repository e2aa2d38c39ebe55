// ReportStore: the reports directory (docs/using.md).
//
// A report is a directory REPORTS/<id>/ holding event.json and minidump.dmp. It is written
// under REPORTS/.tmp-<id>, every file fsynced, then renamed into place and the parent fsynced,
// so a report either appears whole or not at all. Directories are created 0700: reports hold
// memory of the crashed process.
//
// The directory may be shared with anything else (`--reports ~/crashes`). The store touches
// only what it wrote: an entry is a report when its name has the shape of `newID`, it is a real
// directory (symlinks are never followed, not even to look), and it holds crashport's marker,
// the `.crashport-report` file `commit` writes (or, for reports written before the marker, an
// event.json of schema crashport.event.v1). Nothing else is listed, counted toward the quota
// or removed.

import BoundedBytes
import FoundationEssentials
import Processes
import ReportModel
#if canImport(Glibc)
import Glibc
#endif

public enum StoreError: Error, CustomStringConvertible {
    case notWritable(path: String, reason: String)
    case system(call: String, path: String, errno: Int32)
    case noSuchReport(String)
    case unreadable(id: String, reason: String)
    /// `reference` names no report in `directory`; `nearest` are the ids that look most like
    /// it (longest common prefix, then newest), at most three.
    case notFound(reference: String, directory: String, nearest: [String], directoryExists: Bool)
    /// `prefix` begins more than one report's id.
    case ambiguous(prefix: String, directory: String, matches: [String])

    public var description: String {
        switch self {
        case .notWritable(let path, let reason): return "reports directory \(path) is not writable: \(reason)"
        case .system(let call, let path, let errno): return "\(call) \(path): \(String(cString: strerror(errno)))"
        case .noSuchReport(let id): return "no report named \(id)"
        case .unreadable(let id, let reason): return "report \(id) cannot be read: \(reason)"
        case .notFound(let reference, let directory, let nearest, let exists):
            let detail =
                !exists
                ? "the directory does not exist"
                : nearest.isEmpty ? "it holds no reports" : "nearest: \(nearest.joined(separator: ", "))"
            return "no report '\(reference)' in \(directory) (\(detail))"
        case .ambiguous(let prefix, let directory, let matches):
            let shown = matches.prefix(10).joined(separator: ", ") + (matches.count > 10 ? ", …" : "")
            return "'\(prefix)' is the beginning of \(matches.count) reports in \(directory): \(shown)"
        }
    }
}

public struct ReportStore: Sendable {
    public let root: String
    /// Quota: at most this many reports, and at most this many bytes in all; the oldest go
    /// first. Defaults: 200 reports, 256 MiB (a crash storm cannot fill the disk).
    public var maxReports = 200
    public var maxBytes: UInt64 = 256 << 20
    /// The quota's size as given (--max-size, max-size), in MiB: up to 16 TiB, so that the
    /// bytes fit (2^64 / 2^20 is the wrapping point of the shift).
    public static let maxSizeMiBRange: ClosedRange<UInt64> = 1...(1 << 24)
    /// The user whose reports these are, when the writer is root serving many users (the
    /// sidecar): `commit` and `prune` then run with that user's credentials on the calling
    /// thread (Credentials.perform: filesystem ids, primary group only, no capabilities), so
    /// whatever that user put in the directory (a symlink, a directory swapped in mid-write, an
    /// attachment only a group of root's may read), root can do there only what the user could.
    public var owner: Owner?

    /// The owner is a user's Credentials (uid and primary gid; no supplementary group).
    public typealias Owner = Credentials

    public init(root: String) {
        self.root = root
    }

    /// Runs `body` with the owner's filesystem ids (none: as is).
    public func asOwner<T>(_ body: () throws -> T) throws -> T { try Self.withFilesystemIDs(of: owner, body) }

    /// Runs `body` on this thread with `owner`'s credentials (nil: as is), then restores
    /// root's.
    public static func withFilesystemIDs<T>(of owner: Owner?, _ body: () throws -> T) throws -> T {
        try owner.map { try $0.perform(body) } ?? body()
    }

    /// The largest event.json read (UserFile: bounded, no symlink followed): a report of
    /// thousands of threads stays well under it.
    static let maximumEventSize = 64 << 20

    /// The files the upload keeps in a reports directory beside the reports (Upload's consent
    /// settings, its lock and its log use these names): neither reports nor foreign.
    public static let consentFileName = ".crashport-consent.json"
    public static let uploadLockName = ".crashport-upload.lock"
    public static let uploadLogName = ".crashport-upload.log"
    static let uploadFileNames: Set<String> = [consentFileName, uploadLockName, uploadLogName]

    /// The file `commit` writes into every report: what marks a directory as crashport's.
    public static let markerName = ".crashport-report"

    /// Removes the oldest reports until the quota holds; only reports (see `ids()`), never a
    /// directory being written (.tmp-*) nor `keep`. Returns the ids removed.
    @discardableResult
    public func prune(keeping keep: String? = nil) -> [String] {
        (try? asOwner { pruneAsOwner(keeping: keep) }) ?? []
    }

    private func pruneAsOwner(keeping keep: String?) -> [String] {
        var reports = ids().map { ($0, Self.size(of: path(of: $0))) }  // newest first
        var total = reports.reduce(UInt64(0)) { $0.checkedAdding($1.1) ?? .max }
        var removed: [String] = []
        while reports.count > max(maxReports, 1) || (total > maxBytes && reports.count > 1) {
            guard let oldest = reports.last, oldest.0 != keep else { break }
            reports.removeLast()
            total = total.checkedSubtracting(oldest.1) ?? 0
            Self.removeReport(root: root, id: oldest.0)
            removed.append(oldest.0)
        }
        return removed
    }

    /// The bytes of the files directly in a report directory (lstat: links count as links).
    static func size(of directory: String) -> UInt64 {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
        return names.reduce(UInt64(0)) { total, name in
            var info = stat()
            guard lstat(directory + "/" + name, &info) == 0 else { return total }
            return total.checkedAdding(UInt64(max(info.st_size, 0))) ?? .max
        }
    }

    /// Whether `name` has the shape `newID` gives: yyyyMMdd'T'HHmmss.SSS'Z'-PID-xxxx (four
    /// lowercase hex digits), e.g. 20261122T073952.796Z-716-3b8b.
    public static func isReportIDShape(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        func digits(_ range: Range<Int>) -> Bool { range.allSatisfy { bytes[$0] >= 0x30 && bytes[$0] <= 0x39 } }
        // 8 digits, T, 6 digits, '.', 3 digits, Z, '-': 21 bytes; then PID, '-', 4 hex.
        guard bytes.count >= 21 + 1 + 1 + 4, bytes.count <= 21 + 10 + 1 + 4, digits(0..<8), bytes[8] == 0x54,
            digits(9..<15), bytes[15] == 0x2E, digits(16..<19), bytes[19] == 0x5A, bytes[20] == 0x2D,
            bytes[bytes.count - 5] == 0x2D, digits(21..<(bytes.count - 5))
        else { return false }
        return bytes[(bytes.count - 4)...].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// Whether ROOT/name is a report crashport wrote: the id's shape, a real directory (lstat:
    /// a symlink is never one), and crashport's marker in it, a regular `.crashport-report` or,
    /// for reports written before the marker existed, a regular event.json (at most 64 MiB)
    /// whose schema is crashport.event.v1.
    public func isReport(_ name: String) -> Bool {
        guard Self.isReportIDShape(name) else { return false }
        let directory = path(of: name)
        var info = stat()
        guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return false }
        if lstat(directory + "/" + Self.markerName, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG { return true }
        guard let bytes = try? UserFile.read(directory + "/event.json", limit: Self.maximumEventSize) ?? nil,
            let object = JSONObject.parseObject(bytes)
        else { return false }
        return object["schema"] as? String == Event.schemaName
    }

    /// What the directory holds besides crashport's reports and its own temporary directories
    /// (.tmp-<id>), sorted: `crashport run` says once that it shares the directory with them.
    public func foreignEntries() -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
        return names.filter { name in
            !(name.hasPrefix(".tmp-") && Self.isReportIDShape(String(name.dropFirst(5)))) && !isReport(name)
                && !RunHistory.fileNames.contains(name) && !Self.uploadFileNames.contains(name)
        }.sorted()
    }

    /// --reports, then $CRASHPORT_REPORTS, $XDG_STATE_HOME/crashport/reports, ~/.local/state/crashport/reports.
    public static func defaultRoot(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let path = environment["CRASHPORT_REPORTS"], !path.isEmpty { return path }
        if let state = environment["XDG_STATE_HOME"], !state.isEmpty { return state + "/crashport/reports" }
        let home = environment["HOME"] ?? userHome
        return home + "/.local/state/crashport/reports"
    }

    /// HOME, or when it is unset or empty this user's home from the password database.
    public static func homeDirectory(environment: [String: String]) -> String {
        environment["HOME"].nonEmpty ?? userHome
    }

    /// This user's home directory from the password database, for when HOME is unset.
    public static var userHome: String {
        guard let entry = getpwuid(getuid()), let directory = entry.pointee.pw_dir else { return "/" }
        return String(cString: directory)
    }

    /// Creates the directory (0700) if needed and checks that a report could be written now.
    public func prepare() throws {
        if let failure = Self.makeDirectories(root, mode: 0o700) {
            throw StoreError.notWritable(path: root, reason: failure)
        }
        var info = stat()
        guard stat(root, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw StoreError.notWritable(path: root, reason: "not a directory")
        }
        guard access(root, W_OK | X_OK) == 0 else {
            throw StoreError.notWritable(path: root, reason: String(cString: strerror(errno)))
        }
    }

    /// mkdir -p: every missing directory of `path` (absolute or relative) created with `mode`.
    /// Nil, or what failed ("mkdir PATH: reason").
    public static func makeDirectories(_ path: String, mode: mode_t) -> String? {
        BoundedBytes.makeDirectories(path, mode: mode)
    }

    /// A new report id: sortable by time, unique per process and moment.
    public static func newID(pid: Int32, date: Date = Date()) -> String {
        let time = UTCTime(date)
        let suffix = String(UInt16.random(in: 0...UInt16.max), radix: 16)
        return
            "\(time.date(""))T\(time.time("")).\(UTCTime.digits(time.millisecond, 3))Z-\(pid)-\(String(repeating: "0", count: 4 - suffix.count))\(suffix)"
    }

    public func path(of id: String) -> String { root + "/" + id }

    /// Writes a report atomically: files are produced by `write` inside a temporary directory.
    public func commit(id: String, durable: Bool = true, write: (_ directory: String) throws -> Void) throws -> String {
        try asOwner { try commitAsOwner(id: id, durable: durable, write: write) }
    }

    /// `durable` false: nothing is fsynced and no marker written (a sidecar's first step, on disk
    /// at once, known by its event.json's schema until `amend` writes the marker and makes it
    /// durable moments later; `write` then writes with `sync: false` too).
    private func commitAsOwner(id: String, durable: Bool, write: (_ directory: String) throws -> Void) throws -> String {
        try prepare()
        let temporary = root + "/.tmp-" + id
        guard mkdir(temporary, 0o700) == 0 else { throw StoreError.system(call: "mkdir", path: temporary, errno: errno) }
        do {
            // A first step's report is known by its event.json until `amend` writes the marker.
            if durable { try Self.writeMarker(in: temporary) }
            try write(temporary)
            if durable { try Self.fsync(path: temporary) }
            let final = path(of: id)
            guard rename(temporary, final) == 0 else { throw StoreError.system(call: "rename", path: final, errno: errno) }
            if durable { try Self.fsync(path: root) }
            return final
        } catch {
            Self.removeTree(temporary)
            throw error
        }
    }

    /// A committed report's second step (a sidecar's): `write` replaces some of its files
    /// (`replaceFile`: each renamed over its old self, so a reader sees the old file or the new,
    /// never half of one); then the marker is written, and the report's directory and the root
    /// are fsynced, so the whole report is durable when this returns. Runs as the store's owner. Throws when
    /// the report is gone (removed, pruned) or is no longer a directory.
    public func amend(id: String, write: (_ directory: String) throws -> Void) throws -> String {
        try asOwner {
            let directory = path(of: id)
            var info = stat()
            guard lstat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { throw StoreError.noSuchReport(id) }
            try write(directory)
            // Its name is what marks a report (lstat): the directory's fsync makes it durable.
            try Self.writeMarker(in: directory, sync: false)
            try Self.fsync(path: directory)
            try Self.fsync(path: root)
            return directory
        }
    }

    /// crashport's marker in a report directory, fsynced unless `sync` is false.
    static func writeMarker(in directory: String, sync: Bool = true) throws {
        try writeFile(directory + "/" + markerName, Array("crashport report \(Event.schemaName)\n".utf8), sync: sync)
    }

    /// Writes `bytes` under a temporary name beside `path` (writeNew: never following a link),
    /// fsyncs them and renames them over `path`.
    public static func replaceFile(_ path: String, _ bytes: [UInt8]) throws {
        let temporary = path + ".new"
        do {
            try writeNew(temporary, bytes)
            guard rename(temporary, path) == 0 else { throw StoreError.system(call: "rename", path: path, errno: errno) }
        } catch {
            _ = unlink(temporary)
            throw error
        }
    }

    /// Writes `bytes` to a new file at `path` (removed first) and fsyncs it: O_EXCL | O_NOFOLLOW,
    /// so whatever the user puts at the name in between (a FIFO that would block the open, a
    /// symlink) fails the write instead of being used.
    static func writeNew(_ path: String, _ bytes: [UInt8]) throws {
        unlink(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.system(call: "open", path: path, errno: errno) }
        defer { close(fd) }
        guard writeAll(fd, bytes) else { throw StoreError.system(call: "write", path: path, errno: errno) }
        guard Glibc.fsync(fd) == 0 else { throw StoreError.system(call: "fsync", path: path, errno: errno) }
    }

    /// Writes bytes to a file and fsyncs it (`sync` false: leaves that to the caller). The
    /// directory is the report's, which its user may write into meanwhile (a report's marker
    /// between its two steps, a file of the one being committed): whatever the user put at the
    /// name is never followed (a symlink) nor waited on (a FIFO, which would hold the thread that
    /// writes every user's second steps), and anything but a regular file fails the write.
    public static func writeFile(_ path: String, _ bytes: [UInt8], sync: Bool = true) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.system(call: "open", path: path, errno: errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw StoreError.notWritable(path: path, reason: "not a regular file")
        }
        guard writeAll(fd, bytes) else { throw StoreError.system(call: "write", path: path, errno: errno) }
        guard !sync || Glibc.fsync(fd) == 0 else { throw StoreError.system(call: "fsync", path: path, errno: errno) }
    }

    static func fsync(path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError.system(call: "open", path: path, errno: errno) }
        defer { close(fd) }
        _ = Glibc.fsync(fd)
    }

    static func removeTree(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Removes ROOT/id through descriptors opened with O_NOFOLLOW, so a report swapped for a
    /// symlink after it was recognised removes nothing outside. The marker and event.json go
    /// last: a removal cut short leaves a report still recognised, removed next time.
    static func removeReport(root: String, id: String) {
        let parent = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else { return }
        defer { close(parent) }
        removeTree(at: parent, name: id, depth: 0)
    }

    private static func removeTree(at parent: Int32, name: String, depth: Int) {
        let fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            _ = unlinkat(parent, name, 0)  // not a directory (or a symlink to one): the entry itself
            return
        }
        guard depth < 16, let stream = fdopendir(fd) else {
            close(fd)
            return
        }
        defer { closedir(stream) }  // closes fd
        var names: [String] = []
        while let entry = readdir(stream) {
            let child = directoryEntryName(entry)
            if child != "." && child != ".." { names.append(child) }
        }
        let last = [ReportStore.markerName, "event.json"]
        for child in names.filter({ !last.contains($0) }) + last.filter(names.contains) {
            if unlinkat(fd, child, 0) != 0 && (errno == EISDIR || errno == EPERM) {
                removeTree(at: fd, name: child, depth: depth + 1)
            }
        }
        _ = unlinkat(parent, name, AT_REMOVEDIR)
    }

    /// Report ids, newest first: only crashport's reports (see `isReport`); temporary
    /// directories and everything else in the directory are skipped.
    public func ids() -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
        return names.filter(isReport).sorted(by: >)
    }

    public func event(id: String) throws -> Event {
        guard !id.contains("/"), isReport(id) else {
            throw StoreError.noSuchReport(id)
        }
        let file = path(of: id) + "/event.json"
        let read: [UInt8]?
        do {
            read = try UserFile.read(file, limit: Self.maximumEventSize)
        } catch {
            throw StoreError.unreadable(id: id, reason: "\(error)")
        }
        guard let data = read.map({ Data($0) }) else {
            throw StoreError.unreadable(id: id, reason: "event.json is missing")
        }
        do {
            return try Event.decode(data)
        } catch {
            throw StoreError.unreadable(id: id, reason: "event.json is not valid (\(Event.describe(decodingError: error)))")
        }
    }
}
