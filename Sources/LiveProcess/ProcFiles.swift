// ProcFiles: reading /proc files and parsing the ones the watcher needs (the task list; the maps
// text is parsed by ReportModel's MemoryMapping, because a minidump carries it too).
//
// /proc files report size 0, so they are read in a loop until EOF. Every parse is defensive:
// a line that does not parse is skipped, never fatal.

import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public enum ProcFiles {
    /// The whole file, read until EOF, at most `limit` bytes; nil when it cannot be opened.
    public static func read(_ path: String, limit: Int = 16 << 20) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while result.count < limit {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            result.append(contentsOf: chunk[0..<min(count, limit - result.count)])
        }
        return result
    }

    public static func readText(_ path: String) -> String? {
        read(path).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Thread ids in /proc/PID/task, ascending.
    public static func threads(of pid: ProcessID) -> [ThreadID] {
        guard let directory = opendir("/proc/\(pid)/task") else { return [] }
        defer { closedir(directory) }
        var tids: [ThreadID] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let tid = Int32(name) { tids.append(ThreadID(tid)) }
        }
        return tids.sorted { $0.rawValue < $1.rawValue }
    }

    /// A thread's name from /proc/PID/task/TID/comm, without the newline.
    public static func threadName(pid: ProcessID, tid: ThreadID) -> String {
        guard let text = readText("/proc/\(pid)/task/\(tid)/comm") else { return "" }
        return text.hasSuffix("\n") ? String(text.dropLast()) : text
    }

    /// The arguments from /proc/PID/cmdline.
    public static func arguments(of pid: ProcessID) -> [String] {
        guard let bytes = read("/proc/\(pid)/cmdline") else { return [] }
        return bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast(bytes.last == 0 ? 1 : 0)
            .map { String(decoding: $0, as: UTF8.self) }
    }

    /// The fields of /proc/PID/stat after the command name (which may hold spaces and
    /// parentheses): element 0 is field 3, the state. Nil when the process is gone.
    public static func statFields(of pid: ProcessID) -> [Substring]? {
        guard let stat = readText("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }

    /// The parent's pid (/proc/PID/stat field 4); nil when the process is gone.
    public static func parentPID(of pid: ProcessID) -> ProcessID? {
        guard let fields = statFields(of: pid), fields.count > 1 else { return nil }
        return Int32(fields[1]).map { ProcessID($0) }
    }

    /// The target of /proc/PID/exe.
    public static func executable(of pid: ProcessID) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The real uid and the supplementary groups and real gid of a process (/proc/PID/status
    /// Uid:, Gid:, Groups:); nil when it is gone.
    public static func credentials(of pid: ProcessID) -> (uid: UInt32, gids: [UInt32])? {
        guard let status = readText("/proc/\(pid)/status") else { return nil }
        var uid: UInt32?
        var gids: [UInt32] = []
        for line in status.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let key = fields.first, fields.count > 1 else { continue }
            switch key {
            case "Uid:": uid = UInt32(fields[1])
            case "Gid:": gids.append(contentsOf: UInt32(fields[1]).map { [$0] } ?? [])
            case "Groups:": gids.append(contentsOf: fields.dropFirst().compactMap { UInt32($0) })
            default: break
            }
        }
        return uid.map { ($0, gids) }
    }

    /// The real uid of a process; nil when it is gone.
    public static func owner(of pid: ProcessID) -> UInt32? { credentials(of: pid)?.uid }
}
