// ProcFiles: reading /proc files and parsing the ones the watcher needs (the task list; the maps
// text is parsed by ReportModel's MemoryMapping, because a minidump carries it too).
//
// /proc files report size 0, so they are read in a loop until EOF. Every parse is defensive:
// a line that does not parse is skipped, never fatal.

import BoundedBytes
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
        // A stack buffer, not a fresh zeroed array per call: capture reads a dozen /proc files
        // while the process is held.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16384) { chunk in
            while result.count < limit {
                let count = Glibc.read(fd, chunk.baseAddress, chunk.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                result.append(contentsOf: UnsafeBufferPointer(rebasing: chunk[0..<min(count, limit - result.count)]))
            }
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
            let name = directoryEntryName(entry)
            if let tid = Int32(name) { tids.append(ThreadID(tid)) }
        }
        return tids.sorted { $0.rawValue < $1.rawValue }
    }

    /// A thread's name from /proc/PID/task/TID/comm, without the newline.
    public static func threadName(pid: ProcessID, tid: ThreadID) -> String {
        guard let text = readText("/proc/\(pid)/task/\(tid)/comm") else { return "" }
        return text.hasSuffix("\n") ? String(text.dropLast()) : text
    }

    /// The arguments in /proc/PID/cmdline bytes (NUL-separated, the last one NUL-terminated).
    public static func arguments(cmdline bytes: [UInt8]) -> [String] {
        bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast(bytes.last == 0 ? 1 : 0)
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

    /// A process's (or with `thread`, one of its threads') id in each pid namespace it is in,
    /// from the reader's outward in: /proc/PID/status NSpid (Linux 4.1). One id for a process in
    /// the reader's own namespace; nil when it is gone.
    public static func namespaceIDs(of pid: ProcessID, thread: ThreadID? = nil) -> [Int32]? {
        let path = thread.map { "/proc/\(pid)/task/\($0)/status" } ?? "/proc/\(pid)/status"
        guard let status = read(path, limit: 8192),
            let line = status.split(separator: UInt8(ascii: "\n")).first(where: { $0.starts(with: "NSpid:".utf8) })
        else { return nil }
        let ids = line.dropFirst(6).split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") })
            .compactMap { Int32(String(decoding: $0, as: UTF8.self)) }
        return ids.isEmpty ? nil : ids
    }

    /// The thread of `pid` whose id in the process's own (innermost) pid namespace is `inner`:
    /// how a process in a container names its threads. Nil when none is.
    public static func thread(of pid: ProcessID, innerID inner: Int32) -> ThreadID? {
        threads(of: pid).first { namespaceIDs(of: pid, thread: $0)?.last == inner }
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
        read("/proc/\(pid)/status").flatMap(credentials(status:))
    }

    /// The credentials in /proc/PID/status text already read; nil when it has no Uid: line.
    public static func credentials(status: [UInt8]) -> (uid: UInt32, gids: [UInt32])? {
        var uid: UInt32?
        var gids: [UInt32] = []
        // Only three of its fifty lines matter: the others are not split.
        for line in status.split(separator: UInt8(ascii: "\n"))
        where line.starts(with: "Uid:".utf8) || line.starts(with: "Gid:".utf8) || line.starts(with: "Groups:".utf8) {
            let numbers = line.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }).dropFirst()
                .lazy.compactMap { UInt32(String(decoding: $0, as: UTF8.self)) }
            switch line.first {
            case UInt8(ascii: "U"): uid = numbers.first
            case UInt8(ascii: "G") where line.starts(with: "Gid:".utf8): gids.append(contentsOf: numbers.prefix(1))
            default: gids.append(contentsOf: numbers)
            }
        }
        return uid.map { ($0, gids) }
    }

}
