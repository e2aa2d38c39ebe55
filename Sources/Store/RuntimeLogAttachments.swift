// RuntimeLogAttachments: bytes read at capture time, written into the report's attachments/
// directory beside the program's files: the crash logs the process's runtime wrote (the JVM's
// hs_err file, Node's report), the system's log around the crash (Watcher's
// SystemLogAttachment) and the program's attachments from memory (crashport_attach_bytes,
// crashport_attach_ring).
//
// Their bytes were read while the process was held, as the process's user and bounded
// (LiveProcess' RuntimeFiles, AppArea.readMemoryAttachments): nothing is opened here but the
// copy, which is created like every attachment (O_EXCL, mode 0600, inside ReportStore.commit
// with the owner's filesystem ids).

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
        writeCaptured(
            runtimeLogs.map { log in
                var record = AttachmentRecord(path: log.path, scope: scope)
                if log.truncated { record.error = "cut at \(log.contents.count) bytes when it was read" }
                record.truncated = log.truncated ? true : nil
                return (record, log.path, log.contents)
            }, prefix: scope + "-", into: directory)
    }

    /// Writes the program's attachments from memory into `directory`/attachments/, each named
    /// after the name the program gave it ("memory-" before it when that name is taken), with
    /// its content type in its record (scope `memory`).
    public static func writeMemoryAttachments(_ attachments: [MemoryAttachment], into directory: String) -> [AttachmentRecord] {
        writeCaptured(
            attachments.map { attachment in
                var record = AttachmentRecord(scope: AttachmentRecord.memoryScope)
                record.name = attachment.name
                record.contentType = attachment.contentType
                record.size = UInt64(attachment.contents.count) + attachment.dropped
                record.truncated = attachment.truncated || attachment.dropped > 0 ? true : nil
                record.partial = attachment.partial ? true : nil
                record.error =
                    attachment.note
                    ?? (attachment.ring && attachment.dropped > 0
                        ? "a ring: its last \(attachment.contents.count) of \(record.size ?? 0) bytes appended"
                        : attachment.truncated ? "cut at 7 MiB when it was set" : nil)
                return (record, attachment.name, attachment.contents)
            }, prefix: "memory-", into: directory)
    }

    /// Bytes attached at memory's or a runtime's behalf: the memory attachments' total, which
    /// the program's files' copies leave room for (MemoryAttachment.budget in all).
    public static func bytesHeld(by attachments: [MemoryAttachment]) -> UInt64 {
        attachments.reduce(0) { $0 + UInt64($1.contents.count) }
    }

    /// Writes each item's bytes as attachments/NAME (`prefix` + NAME when NAME is taken) and
    /// completes its record: the copy's path and size, or why there is none.
    static func writeCaptured(
        _ items: [(record: AttachmentRecord, name: String, contents: [UInt8])], prefix: String, into directory: String
    ) -> [AttachmentRecord] {
        guard !items.isEmpty else { return [] }
        let target = directory + "/" + directoryName
        if mkdir(target, 0o700) != 0 && errno != EEXIST {
            let reason = "cannot create \(directoryName)/: \(String(cString: strerror(errno)))"
            return items.map { item in
                var record = item.record
                record.error = reason
                return record
            }
        }
        // The watcher's own file (the system's log) may take a reserved name; nothing else may.
        var names = prefix == AttachmentRecord.systemScope + "-" ? Set<String>() : reservedNames
        return items.map { item in
            var record = item.record
            var name = uniqueName(for: item.name, taken: &names)
            var fd = open(target + "/" + name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd < 0 && errno == EEXIST {
                name = prefix + name
                fd = open(target + "/" + name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            }
            guard fd >= 0 else {
                record.error = "cannot create the copy: \(String(cString: strerror(errno)))"
                return record
            }
            defer { close(fd) }
            guard writeAll(fd, item.contents) else {
                record.error = "write: \(String(cString: strerror(errno)))"
                return record
            }
            _ = fsync(fd)
            record.file = directoryName + "/" + name
            record.copied = UInt64(item.contents.count)
            return record
        }
    }
}
