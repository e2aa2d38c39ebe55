// ReportStore: the reports directory (DESIGN §6).
//
// A report is a directory REPORTS/<id>/ holding event.json and minidump.dmp. It is written
// under REPORTS/.tmp-<id>, every file fsynced, then renamed into place and the parent fsynced,
// so a report either appears whole or not at all. Directories are created 0700: reports hold
// memory of the crashed process.

import Foundation
import ReportModel
#if canImport(Glibc)
import Glibc
#endif

public enum StoreError: Error, CustomStringConvertible {
    case notWritable(path: String, reason: String)
    case system(call: String, path: String, errno: Int32)
    case noSuchReport(String)
    case unreadable(id: String, reason: String)

    public var description: String {
        switch self {
        case .notWritable(let path, let reason): return "reports directory \(path) is not writable: \(reason)"
        case .system(let call, let path, let errno): return "\(call) \(path): \(String(cString: strerror(errno)))"
        case .noSuchReport(let id): return "no report named \(id)"
        case .unreadable(let id, let reason): return "report \(id) cannot be read: \(reason)"
        }
    }
}

public struct ReportStore: Sendable {
    public let root: String
    /// Quota: at most this many reports, and at most this many bytes in all; the oldest go
    /// first. Defaults: 200 reports, 256 MiB (a crash storm cannot fill the disk).
    public var maxReports = 200
    public var maxBytes: UInt64 = 256 << 20

    public init(root: String) {
        self.root = root
    }

    /// Removes the oldest reports until the quota holds; never a directory being written
    /// (.tmp-*) nor `keep`. Returns the ids removed.
    @discardableResult
    public func prune(keeping keep: String? = nil) -> [String] {
        var reports = ids().map { ($0, Self.size(of: path(of: $0))) }  // newest first
        var total = reports.reduce(UInt64(0)) { $0 + $1.1 }
        var removed: [String] = []
        while reports.count > max(maxReports, 1) || (total > maxBytes && reports.count > 1) {
            guard let oldest = reports.last, oldest.0 != keep else { break }
            reports.removeLast()
            total -= oldest.1
            Self.removeTree(path(of: oldest.0))
            removed.append(oldest.0)
        }
        return removed
    }

    static func size(of directory: String) -> UInt64 {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
        return names.reduce(UInt64(0)) { total, name in
            var info = stat()
            return total + (stat(directory + "/" + name, &info) == 0 ? UInt64(max(info.st_size, 0)) : 0)
        }
    }

    /// --reports, then $CRASHPORT_REPORTS, $XDG_STATE_HOME/crashport/reports, ~/.local/state/crashport/reports.
    public static func defaultRoot(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let path = environment["CRASHPORT_REPORTS"], !path.isEmpty { return path }
        if let state = environment["XDG_STATE_HOME"], !state.isEmpty { return state + "/crashport/reports" }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/state/crashport/reports"
    }

    /// Creates the directory (0700) if needed and checks that a report could be written now.
    public func prepare() throws {
        var path = ""
        for component in root.split(separator: "/", omittingEmptySubsequences: false) {
            path += (path.isEmpty && root.hasPrefix("/") ? "" : (path.isEmpty ? "" : "/")) + component
            if path.isEmpty { path = "/"; continue }
            if mkdir(path, 0o700) != 0 && errno != EEXIST {
                throw StoreError.notWritable(path: root, reason: "mkdir \(path): \(String(cString: strerror(errno)))")
            }
        }
        var info = stat()
        guard stat(root, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw StoreError.notWritable(path: root, reason: "not a directory")
        }
        guard access(root, W_OK | X_OK) == 0 else {
            throw StoreError.notWritable(path: root, reason: String(cString: strerror(errno)))
        }
    }

    /// A new report id: sortable by time, unique per process and moment.
    public static func newID(pid: Int32, date: Date = Date()) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss.SSS'Z'"
        let suffix = String(UInt16.random(in: 0...UInt16.max), radix: 16)
        return "\(formatter.string(from: date))-\(pid)-\(String(repeating: "0", count: 4 - suffix.count))\(suffix)"
    }

    public static func timestamp(_ date: Date = Date()) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    public func path(of id: String) -> String { root + "/" + id }

    /// Writes a report atomically: files are produced by `write` inside a temporary directory.
    public func commit(id: String, write: (_ directory: String) throws -> Void) throws -> String {
        try prepare()
        let temporary = root + "/.tmp-" + id
        guard mkdir(temporary, 0o700) == 0 else { throw StoreError.system(call: "mkdir", path: temporary, errno: errno) }
        do {
            try write(temporary)
            try Self.fsync(path: temporary)
            let final = path(of: id)
            guard rename(temporary, final) == 0 else { throw StoreError.system(call: "rename", path: final, errno: errno) }
            try Self.fsync(path: root)
            return final
        } catch {
            Self.removeTree(temporary)
            throw error
        }
    }

    /// Writes bytes to a file and fsyncs it.
    public static func writeFile(_ path: String, _ bytes: [UInt8]) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.system(call: "open", path: path, errno: errno) }
        defer { close(fd) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { throw StoreError.system(call: "write", path: path, errno: errno) }
            offset += written
        }
        guard Glibc.fsync(fd) == 0 else { throw StoreError.system(call: "fsync", path: path, errno: errno) }
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

    /// Report ids, newest first; temporary directories are skipped.
    public func ids() -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
        return names.filter { !$0.hasPrefix(".") }.sorted(by: >)
    }

    public func event(id: String) throws -> Event {
        guard !id.contains("/"), !id.hasPrefix("."), FileManager.default.fileExists(atPath: path(of: id)) else {
            throw StoreError.noSuchReport(id)
        }
        let file = path(of: id) + "/event.json"
        guard let data = FileManager.default.contents(atPath: file) else {
            throw StoreError.unreadable(id: id, reason: "event.json is missing")
        }
        do {
            return try Event.decode(data)
        } catch {
            throw StoreError.unreadable(id: id, reason: "event.json is not valid (\(Self.describe(error)))")
        }
    }

    static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context):
            return context.underlyingError.map { "\($0.localizedDescription)" } ?? context.debugDescription
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.keyNotFound(_, let context):
            return context.debugDescription + " at " + context.codingPath.map(\.stringValue).joined(separator: ".")
        default: return "\(error)"
        }
    }
}
