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

import BoundedBytes

/// BoundedFile's rules, a longer file refused.
public enum UserFile {
    public typealias Refused = BoundedFile.Refused

    /// The bytes of the regular file at `path`, at most `limit` of them; nil when there is no
    /// such file. Throws Refused for a symlink (the last component: O_NOFOLLOW), anything that is
    /// not a regular file, a file larger than `limit`, one `owner` (when given) does not own or
    /// that its group or others may write, or a failed open or read.
    public static func read(_ path: String, limit: Int, owner: UInt32? = nil) throws -> [UInt8]? {
        try BoundedFile.read(path, limit: limit, longer: .refuse, owners: owner.map { [$0] }, whose: "uid \(owner ?? 0)'s")?
            .bytes
    }
}
