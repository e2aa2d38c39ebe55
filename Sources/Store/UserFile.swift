// UserFile: how the watcher reads a file that a user controls (their reports directory's
// consent settings, run history, sessions, a report's event.json and upload state). A root
// sidecar reads them on its serving thread, so a user must not be able to make the read block
// (a FIFO), follow a link somewhere the user could not read (a symlink to a root-only file), or
// take time and memory in proportion to a size they chose (a 1.5 GB sparse file): the file is
// opened with O_NOFOLLOW | O_NONBLOCK, checked with fstat (a regular file, at most `limit`
// bytes) before a byte is read, and read no further than `limit`. The caller sets the
// filesystem ids (ReportStore.asOwner): the kernel then checks the open as the user's own.
// A file that must be someone's own (the host level's record, root's) is read the same way,
// and refused unless that user owns it and no one else may write it (`owner`).

import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

public enum UserFile {
    /// Why a file was not read; its description names the file.
    public struct Refused: Error, CustomStringConvertible {
        public var path: String
        public var reason: String
        public var description: String { "\(path): \(reason)" }
    }

    /// The bytes of the regular file at `path`, at most `limit` of them; nil when there is no
    /// such file. Throws Refused for a symlink (the last component: O_NOFOLLOW), anything that is
    /// not a regular file, a file larger than `limit`, one `owner` (when given) does not own or
    /// that its group or others may write, or a failed open or read.
    public static func read(_ path: String, limit: Int, owner: UInt32? = nil) throws -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            let error = errno
            if error == ENOENT { return nil }
            throw Refused(path: path, reason: error == ELOOP ? "a symbolic link, not followed" : String(cString: strerror(error)))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Refused(path: path, reason: "fstat: \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw Refused(path: path, reason: "not a regular file") }
        if let owner, info.st_uid != owner || info.st_mode & (S_IWGRP | S_IWOTH) != 0 {
            let mode = String(info.st_mode & 0o7777, radix: 8)
            throw Refused(path: path, reason: "not uid \(owner)'s own (owner \(info.st_uid), mode \(mode))")
        }
        guard info.st_size >= 0, info.st_size <= limit else {
            throw Refused(path: path, reason: "\(info.st_size) bytes, more than the \(limit) it may hold; not read")
        }
        // The size may change while it is read: never more than the limit, whatever it becomes.
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { throw Refused(path: path, reason: "read: \(String(cString: strerror(errno)))") }
            if got == 0 { break }
            count += got
        }
        bytes.removeSubrange(count...)
        return bytes
    }
}
