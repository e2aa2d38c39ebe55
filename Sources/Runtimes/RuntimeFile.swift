// RuntimeFile: how a file a runtime wrote for the crashed process (its perf map, the JVM's hs_err
// file, Node's report) is read. The caller has taken on the process's user's credentials
// (LiveProcess' ProcessAccess.perform), so the kernel checks the open as that user's: a file
// the user could not read is not read. On top of that, because the user (or, in /tmp, anyone)
// chose what is at the path:
//  - the last component is not followed (O_NOFOLLOW): a symlink to another file is refused;
//  - the open never blocks (O_NONBLOCK): a FIFO opens at once and is refused by fstat, as is
//    anything that is not a regular file;
//  - the file must belong to one of `owners` and no one else may write it: a /tmp/perf-PID.map
//    another user made in advance to name our frames is refused;
//  - at most `limit` bytes are read, with pread (never a mapping another writer could
//    truncate under us), from the start or, for a file a runtime appends to, from the end;
//  - with `modified`, a file last changed outside that window (an old crash's log, left in the
//    working directory by a process whose pid this one reuses) is refused.

#if canImport(Glibc)
import Glibc
#endif

public enum RuntimeFile {
    /// Which part of a file longer than the limit is read.
    public enum Keep: Sendable {
        case head
        /// The end: a file its writer appends to holds its newest lines there.
        case tail
    }

    /// A file read, or the part of it that fits.
    public struct Contents: Sendable, Equatable {
        public var bytes: [UInt8]
        /// The file's size when it was read.
        public var size: UInt64
        /// Bytes before the part read (`.tail`), 0 when it was read from its start.
        public var skipped: UInt64
        /// Its last modification, in Unix seconds.
        public var modified: Int64

        /// Not all of the file was read.
        public var truncated: Bool { UInt64(bytes.count) < size }
    }

    /// Why a file was not read; its description names the file.
    public struct Refused: Error, CustomStringConvertible, Equatable {
        public var path: String
        public var reason: String
        /// The file is there and its own, but from another time: not worth a note.
        public var stale: Bool = false
        public var description: String { "\(path): \(reason)" }
    }

    /// The file at `path`, at most `limit` bytes of it; nil when there is no such file. Throws
    /// Refused (see the file's comment).
    public static func read(
        _ path: String, limit: Int, keep: Keep = .head, owners: Set<UInt32>? = nil, modified window: ClosedRange<Int64>? = nil
    ) throws -> Contents? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            let error = errno
            if error == ENOENT || error == ENOTDIR { return nil }
            throw Refused(path: path, reason: error == ELOOP ? "a symbolic link, not followed" : String(cString: strerror(error)))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Refused(path: path, reason: "fstat: \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw Refused(path: path, reason: "not a regular file") }
        if let owners, !owners.contains(info.st_uid) || info.st_mode & (S_IWGRP | S_IWOTH) != 0 {
            let mode = String(info.st_mode & 0o7777, radix: 8)
            let expected = owners.sorted().map(String.init).joined(separator: " or ")
            throw Refused(
                path: path, reason: "not the process's user's own (owner \(info.st_uid), not \(expected); mode \(mode))")
        }
        let modified = Int64(info.st_mtim.tv_sec)
        if let window, !window.contains(modified) {
            throw Refused(
                path: path, reason: "last modified at \(modified), not between \(window.lowerBound) and \(window.upperBound)",
                stale: true)
        }
        let size = UInt64(max(info.st_size, 0))
        let wanted = Int(min(size, UInt64(max(limit, 0))))
        let start = keep == .tail ? size - UInt64(wanted) : 0
        var bytes = [UInt8](repeating: 0, count: wanted)
        var count = 0
        // The size may change while it is read: never more than `wanted`, whatever it becomes.
        while count < wanted {
            let got = bytes.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress! + count, wanted - count, off_t(start) + off_t(count))
            }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { throw Refused(path: path, reason: "read: \(String(cString: strerror(errno)))") }
            if got == 0 { break }
            count += got
        }
        bytes.removeSubrange(count...)
        return Contents(bytes: bytes, size: size, skipped: start, modified: modified)
    }

    /// The names in directory `path`, at most `limit` of them (a working directory may hold a
    /// million files); nil when it cannot be opened. Opened without following a last symlink,
    /// and without blocking.
    public static func names(in path: String, limit: Int) -> (names: [String], complete: Bool)? {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0, let directory = fdopendir(fd) else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            guard names.count < limit else { return (names, false) }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return (names, true)
    }
}
