// Attachments: the files a crashed program named with crashport_attach_file, and a handled
// error's own (crashport_report_error_with), copied into its report's attachments/ directory.
//
// Called inside ReportStore.commit, so with the crashed process's owner's filesystem ids: a root
// watcher opens each file as that user would, and a file (or a symlink to one) the user cannot
// read is refused by the kernel, never read. Only regular files are copied (a FIFO or a device
// is opened non-blocking and refused); each copy stops at 7 MiB (App Center's limit) and all of
// them at 20 MiB, and a file that grows or shrinks while it is copied is copied as far as it
// goes, up to the cap. What was left out, and why, is in each file's record.
//
// /proc/self and /proc/thread-self name the process that opens them: here the watcher, not the
// crashed program, and the kernel lets a process read its own /proc files whatever its
// filesystem ids. So a path that names the watcher's own /proc entry (/proc/self/…,
// /proc/thread-self/…, /proc/<the watcher's pid or one of its threads>/…, however spelled) is
// refused before it is opened, and so is a file that turns out, once opened, to be one of the
// watcher's /proc files (a symlink to /proc/self/maps resolves in the opener's context). The
// program can attach /proc/<its pid>/… instead, which is read as its user may.

import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public enum Attachments {
    static let perFileCap: UInt64 = 7 << 20
    static let totalCap: UInt64 = 20 << 20
    static let directoryName = "attachments"
    /// Names the watcher's own files take in attachments/, whenever they are written (the
    /// system's log comes in a report's second step): a program's file or memory attachment of
    /// the same name is written as "2-NAME", so that attachments/system.log is always the
    /// watcher's, never one the program forged.
    public static let reservedNames: Set<String> = ["system.log"]

    /// Copies a handled error's own files (`errorFiles`, crashport_report_error_with: marked
    /// with the error's scope) and the program's (`programFiles`, crashport_attach_file) into
    /// `directory`/attachments/: the error's first, so that the caps leave them whole, and a
    /// file named by both once, as the error's. `reserved`: bytes of the 20 MiB already taken
    /// (the program's attachments from memory, which come first: they die with the process).
    public static func copy(
        errorFiles: [String], programFiles: [String], reserved: UInt64 = 0, into directory: String
    ) -> [AttachmentRecord] {
        var records = copy(errorFiles + programFiles.filter { !errorFiles.contains($0) }, reserved: reserved, into: directory)
        for index in records.indices.prefix(errorFiles.count) { records[index].scope = AttachmentRecord.errorScope }
        return records
    }

    /// Copies `paths` into `directory`/attachments/ and says what each copy holds.
    public static func copy(_ paths: [String], reserved: UInt64 = 0, into directory: String) -> [AttachmentRecord] {
        guard !paths.isEmpty else { return [] }
        let target = directory + "/" + directoryName
        guard mkdir(target, 0o700) == 0 else {
            let reason = "cannot create \(directoryName)/: \(String(cString: strerror(errno)))"
            return paths.map { AttachmentRecord(path: $0, error: reason) }
        }
        var remaining = totalCap - min(totalCap, reserved)
        var names = reservedNames
        return paths.map { path in
            var record = AttachmentRecord(path: path)
            let name = uniqueName(for: path, taken: &names)
            do {
                let (size, copied, cut) = try copyFile(path, to: target + "/" + name, cap: min(perFileCap, remaining))
                remaining -= copied
                record.file = directoryName + "/" + name
                record.size = size
                record.copied = copied
                if cut {
                    record.truncated = true
                    record.error = copied == perFileCap ? "cut at 7 MiB per file" : "cut at 20 MiB for all attachments"
                }
            } catch {
                record.error = "\(error)"
            }
            return record
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// What a record says of a path that names the watcher's own /proc files.
    static let ownProcFiles = Failure(
        description: "refused: it names crashport's own /proc files when crashport opens it (attach /proc/<pid>/… instead)")

    /// Whether `path`, spelled however (//, ., ..), names /proc/self, /proc/thread-self or the
    /// /proc entry of this process or one of its threads. Lexical: symlinks are judged after the
    /// open (`isOwnProcFile`).
    static func namesOwnProcFiles(_ path: String) -> Bool {
        var components: [Substring] = []
        for component in path.split(separator: "/") where component != "." {
            if component == ".." { _ = components.popLast() } else { components.append(component) }
        }
        guard path.hasPrefix("/"), components.count >= 2, components[0] == "proc" else { return false }
        return components[1] == "self" || components[1] == "thread-self" || isOwnProcessEntry(components[1])
    }

    /// Whether a /proc entry name is this process's pid or one of its threads' ids.
    static func isOwnProcessEntry(_ name: Substring) -> Bool {
        guard let id = Int32(name), id > 0 else { return false }
        return id == getpid() || access("/proc/self/task/\(id)", F_OK) == 0
    }

    /// Whether an open descriptor is a file of this process's own /proc entry: on the /proc
    /// mount (the device of /proc/self), and its path (/proc/self/fd/N's target) is
    /// /proc/<our pid or thread>/….
    static func isOwnProcFile(_ fd: Int32) -> Bool {
        var file = stat()
        var proc = stat()
        guard fstat(fd, &file) == 0, stat("/proc/self", &proc) == 0, file.st_dev == proc.st_dev else { return false }
        var target = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/fd/\(fd)", &target, target.count - 1)
        // Unreadable: refused, to be safe (procfs answers for its own files).
        guard count > 0 else { return true }
        let path = String(decoding: target[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let components = path.split(separator: "/")
        return components.count >= 2 && components[0] == "proc" && isOwnProcessEntry(components[1])
    }

    /// The file's last component, made safe and unique in the directory ("2-app.log" for a
    /// second "app.log"; never "", "." or ".." or a dot file).
    static func uniqueName(for path: String, taken: inout Set<String>) -> String {
        var base = String(path.split(separator: "/").last ?? "")
        if base.isEmpty || base.hasPrefix(".") { base = "file" + base }
        var name = base
        var index = 2
        while taken.contains(name) {
            name = "\(index)-\(base)"
            index += 1
        }
        taken.insert(name)
        return name
    }

    /// Copies at most `cap` bytes; returns the size the file had, the bytes copied and whether
    /// it was cut.
    static func copyFile(_ path: String, to destination: String, cap: UInt64) throws -> (UInt64, UInt64, Bool) {
        if namesOwnProcFiles(path) { throw ownProcFiles }
        let source = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard source >= 0 else { throw Failure(description: String(cString: strerror(errno))) }
        defer { close(source) }
        if isOwnProcFile(source) { throw ownProcFiles }
        var info = stat()
        guard fstat(source, &info) == 0 else { throw Failure(description: String(cString: strerror(errno))) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw Failure(description: "not a regular file") }
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else {
            throw Failure(description: "cannot create the copy: \(String(cString: strerror(errno)))")
        }
        defer { close(output) }
        var copied: UInt64 = 0
        var cut = false
        try withUnsafeTemporaryAllocation(byteCount: 64 << 10, alignment: 16) { buffer in
            while true {
                let wanted = Int(min(UInt64(buffer.count), cap - copied))
                if wanted == 0 {
                    // At the cap: cut if anything is left to read.
                    var probe: UInt8 = 0
                    cut = read(source, &probe, 1) > 0
                    return
                }
                let got = read(source, buffer.baseAddress, wanted)
                if got < 0 && errno == EINTR { continue }
                guard got >= 0 else { throw Failure(description: "read: \(String(cString: strerror(errno)))") }
                if got == 0 { return }
                var offset = 0
                while offset < got {
                    let written = write(output, buffer.baseAddress! + offset, got - offset)
                    if written < 0 && errno == EINTR { continue }
                    guard written > 0 else { throw Failure(description: "write: \(String(cString: strerror(errno)))") }
                    offset += written
                }
                copied += UInt64(got)
            }
        }
        _ = fsync(output)
        return (UInt64(info.st_size), copied, cut)
    }
}
