// RuntimeLogAttachments: the crash logs the process's runtime wrote (the JVM's hs_err file,
// Node's report), and the system's log around the crash (Watcher's SystemLogAttachment), written
// into the report's attachments/ directory beside the program's own.
//
// Their bytes were read at capture time, as the process's user and bounded (LiveProcess'
// RuntimeFiles): nothing is opened here but the copy, which is created like every attachment
// (O_EXCL, mode 0600, inside ReportStore.commit with the owner's filesystem ids).

import BoundedBytes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

extension Attachments {
    /// Writes each log's bytes into `directory`/attachments/ (created if the program's
    /// attachments did not), named after its file ("runtime-", or the scope, before it when a
    /// program's attachment took the name), and says what each copy holds (scope `runtime`, or
    /// `system` for the system's log around the crash).
    public static func writeRuntimeLogs(
        _ runtimeLogs: [RuntimeCrashLog], into directory: String, scope: String = AttachmentRecord.runtimeScope
    ) -> [AttachmentRecord] {
        guard !runtimeLogs.isEmpty else { return [] }
        let target = directory + "/" + directoryName
        if mkdir(target, 0o700) != 0 && errno != EEXIST {
            let reason = "cannot create \(directoryName)/: \(String(cString: strerror(errno)))"
            return runtimeLogs.map { AttachmentRecord(path: $0.path, error: reason, scope: scope) }
        }
        var names = Set<String>()
        return runtimeLogs.map { log in
            var record = AttachmentRecord(path: log.path, scope: scope)
            var name = uniqueName(for: log.path, taken: &names)
            var fd = open(target + "/" + name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd < 0 && errno == EEXIST {
                name = scope + "-" + name
                fd = open(target + "/" + name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            }
            guard fd >= 0 else {
                record.error = "cannot create the copy: \(String(cString: strerror(errno)))"
                return record
            }
            defer { close(fd) }
            let written = writeAll(fd, log.contents)
            guard written else {
                record.error = "write: \(String(cString: strerror(errno)))"
                return record
            }
            _ = fsync(fd)
            record.file = directoryName + "/" + name
            record.copied = UInt64(log.contents.count)
            if log.truncated {
                record.truncated = true
                record.error = "cut at \(log.contents.count) bytes when it was read"
            }
            return record
        }
    }
}
