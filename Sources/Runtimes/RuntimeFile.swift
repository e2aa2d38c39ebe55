// RuntimeFile: how a file a runtime wrote for the crashed process (its perf map, the JVM's hs_err
// file, Node's report) is read: BoundedFile's rules, with the process's users as owners. The caller has taken on the process's user's credentials
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

import BoundedBytes

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

    public typealias Contents = BoundedFile.Contents
    public typealias Refused = BoundedFile.Refused

    /// The file at `path`, at most `limit` bytes of it; nil when there is no such file. Throws
    /// Refused (see the file's comment).
    public static func read(
        _ path: String, limit: Int, keep: Keep = .head, owners: Set<UInt32>? = nil, modified window: ClosedRange<Int64>? = nil
    ) throws -> Contents? {
        try BoundedFile.read(
            path, limit: limit, longer: keep == .tail ? .tail : .head, owners: owners, whose: "the process's user's",
            modified: window)
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
            let name = directoryEntryName(entry)
            if name != "." && name != ".." { names.append(name) }
        }
        return (names, true)
    }
}
