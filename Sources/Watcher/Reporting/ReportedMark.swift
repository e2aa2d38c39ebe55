// ReportedMark: the mark `crashport run` leaves for each crash its stub reported, in the host
// level's marks directory (HostPaths.reportedMarks), so that the host level does not report the
// same crash again from its core (HostDumps.takeMark reads it: only its owner's mark counts).
//
// The directory is like /tmp (root's, 1733: any user may create in it, only an entry's owner or
// root may remove one), and a mark's name (PID-START) is public, so whatever is at that name may
// be a user's plant: a FIFO (an open for writing would wait for a reader, a root `crashport run`
// held there deaf to SIGTERM, its child a zombie), a symlink, a directory, another user's file.
// So a mark is only ever created, never opened: O_CREAT | O_EXCL (nothing that exists is opened,
// a symlink included), O_NOFOLLOW and O_NONBLOCK besides. A name already taken counts when it is
// this user's own regular file with one link (the mark of an earlier record of the same process;
// with fs.protected_hardlinks off, a user could link someone else's file there); anything else is
// removed (root may, in a sticky directory; an empty directory too) and the mark created once
// more. A user's own `crashport run` may not remove another user's plant: its mark is then not
// left, and the host level reports that crash as well (a second report, never a lost one).

#if canImport(Glibc)
import Glibc
#endif

enum ReportedMark {
    /// Leaves the mark `name` in `directory`; nil once it is there, else why it is not.
    static func leave(_ name: String, in directory: String) -> String? {
        let path = directory + "/" + name
        var removed = false
        while true {
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
            if fd >= 0 {
                close(fd)
                return nil
            }
            guard errno == EEXIST else { return "cannot create \(path): \(String(cString: strerror(errno)))" }
            var info = stat()
            guard lstat(path, &info) == 0 else {
                if errno == ENOENT && !removed {  // gone meanwhile
                    removed = true
                    continue
                }
                return "\(path): \(String(cString: strerror(errno)))"
            }
            let type = info.st_mode & S_IFMT
            if type == S_IFREG && info.st_uid == geteuid() && info.st_nlink == 1 { return nil }
            let what = type == S_IFIFO ? "a FIFO" : type == S_IFLNK ? "a symlink" : type == S_IFDIR ? "a directory" : "a file"
            let planted = "\(path) is \(what) of uid \(info.st_uid)"
            guard !removed else { return planted + ", again after it was removed; no mark left" }
            let gone = type == S_IFDIR ? rmdir(path) == 0 : unlink(path) == 0
            guard gone || errno == ENOENT else {
                return planted + " that cannot be removed (\(String(cString: strerror(errno)))); no mark left"
            }
            removed = true
        }
    }
}
