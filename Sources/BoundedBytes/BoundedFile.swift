// BoundedFile: how the watcher reads a file someone else controls (a user's consent settings and
// run history, the host level's record, a runtime's perf map or crash log). A root watcher reads
// them on its serving or capturing thread, so whoever chose what is at the path must not be able
// to make the read block (a FIFO), follow a link somewhere they could not read (a symlink to a
// root-only file), or take time and memory in proportion to a size they chose (a 1.5 GB sparse
// file). So:
//  - the last component is not followed (O_NOFOLLOW), and the open never blocks (O_NONBLOCK):
//    anything fstat does not call a regular file is refused before a byte is read;
//  - with `owners`, the file must belong to one of them and no one else may write it (a
//    /tmp/perf-PID.map another user made in advance, a record that is not root's own);
//  - with `modified`, a file last changed outside that window is refused (`stale`);
//  - at most `limit` bytes are read, with pread (never a mapping another writer could truncate
//    under us): a longer file is refused (`.refuse`), or read from its start or its end.
// The caller sets the filesystem ids, so the kernel checks the open as the user's own.

#if canImport(Glibc)
import Glibc
#endif

public enum BoundedFile {
    /// What is done with a file longer than the limit.
    public enum Longer: Sendable {
        /// Not read: Refused.
        case refuse
        /// Its first `limit` bytes.
        case head
        /// Its last `limit` bytes: a file its writer appends to holds its newest lines there.
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
    /// Refused (see the file's comment). `whose` names the owners in a refusal ("uid 0's").
    public static func read(
        _ path: String, limit: Int, longer: Longer, owners: Set<UInt32>? = nil, whose: String = "its owner's",
        modified window: ClosedRange<Int64>? = nil
    ) throws(Refused) -> Contents? {
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
            throw Refused(path: path, reason: "not \(whose) own (owner \(info.st_uid), mode \(mode))")
        }
        let modified = Int64(info.st_mtim.tv_sec)
        if let window, !window.contains(modified) {
            throw Refused(
                path: path, reason: "last modified at \(modified), not between \(window.lowerBound) and \(window.upperBound)",
                stale: true)
        }
        let size = UInt64(max(info.st_size, 0))
        if longer == .refuse, size > UInt64(max(limit, 0)) {
            throw Refused(path: path, reason: "\(info.st_size) bytes, more than the \(limit) it may hold; not read")
        }
        let wanted = Int(min(size, UInt64(max(limit, 0))))
        let start = longer == .tail ? size - UInt64(wanted) : 0
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
}
