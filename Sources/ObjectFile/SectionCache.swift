// SectionCache: large compressed debug sections kept decompressed on disk, by build-id, so that
// the first report of a fresh watcher (a new sidecar, and every `crashport run`, whose watcher is
// new each time) maps them instead of inflating them. libc6-dbg's compressed .debug_info alone is
// 5.8 MB of zlib: inflating it was most of a first report's time (docs/measuring.md, issue 36).
//
// Where: CRASHPORT_SECTION_CACHE (a directory; "" turns the cache off), else, for root,
// /var/cache/crashport/sections, for a user $XDG_CACHE_HOME/crashport/sections (~/.cache/...).
// The directory is made 0700 and used only while it is a directory of this effective user with
// no group or other access (lstat: never a symlink); each file in it is used only when it is a
// regular file of this user, read without following a link, of exactly the section's declared
// size. Files are written whole under a temporary name (O_EXCL), fsynced, then renamed, so a
// reader sees a complete file or none.
//
// What is kept: only sections of files owned by root or by this user and writable by no one else
// (MappedFile.ownedWithoutOthersWriting), so that another user cannot plant DWARF under a
// build-id that later names a system library's frames. The name is the build-id, the section
// (a DWARF section's name: a dot and lowercase letters or underscores, nothing else) and its
// declared size. The directory holds at most `budget` bytes: a new file is written only after
// the oldest are removed to make room.
//
// A root sidecar reads a client's files with the client's credentials (Credentials.perform):
// the cache is root's, in root's 0700 directory, so its own files are opened, written, renamed
// and removed with the thread's own identity for that moment (`asWatcher`: WatcherIdentity's
// cp_thread_step_out, cp_thread_step_in), under names made here, and nothing else is done meanwhile. What a client
// gets from it is only ever a section of a file it opened itself (the kernel's check, as that
// user) that is root's and writable by no one else, as kept from a root file of the same build-id,
// section and size: what that user could have inflated from the file it opened.

import BoundedBytes
import CShims
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

public enum SectionCache {
    /// The most the cache directory holds (512 MiB: libc6-dbg's three large sections are 8 MB).
    public static let budget = 512 << 20

    /// The directory in use, nil when the cache is off or the directory cannot be trusted.
    /// Looked up once: the watchers look at start, with their own credentials.
    public static var directory: String? {
        found.withLock { found in
            if let known = found { return known }
            let located = locate()
            found = .some(located)
            return located
        }
    }
    /// Looked up once, what it found or not (an unusable directory is not looked at again).
    private static let found = Mutex<String??>(nil)

    private static func locate() -> String? {
        func variable(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
        let path: String
        if let chosen = variable("CRASHPORT_SECTION_CACHE") {
            guard !chosen.isEmpty else { return nil }
            path = chosen
        } else if geteuid() == 0 {
            path = "/var/cache/crashport/sections"
        } else {
            let cache =
                variable("XDG_CACHE_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil }
                ?? variable("HOME").map { $0 + "/.cache" }
            guard let cache else { return nil }
            path = cache + "/crashport/sections"
        }
        _ = makeDirectories(path, mode: 0o700)
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid(),
            info.st_mode & 0o077 == 0
        else { return nil }
        return path
    }

    /// A cached section's file name; nil for a section name that is not a DWARF section's
    /// shape (a hostile file names its sections as it likes: never a path).
    static func name(buildID: BuildID, section: String, size: Int) -> String? {
        let bytes = Array(section.utf8)
        guard bytes.count >= 2, bytes.count <= 32, bytes[0] == UInt8(ascii: "."),
            bytes.dropFirst().allSatisfy({ (0x61...0x7A).contains($0) || $0 == UInt8(ascii: "_") })
        else { return nil }
        return "\(buildID.hex)\(section)-\(size)"
    }

    /// Runs `body` with the thread's own credentials (WatcherIdentity.run).
    static func asWatcher<T>(_ body: () -> T?) -> T? { WatcherIdentity.run(body) }

    /// The cached bytes of `section` of the file whose build-id is `buildID`, mapped read-only
    /// (a MappedFile: guarded, so a cache file that shrinks or fails a read under us reads as
    /// zeros and is `torn`); nil when there are none (or they are not exactly `size` bytes of a
    /// file of this user's).
    /// `scan`, when given, sees every byte once, in order, in chunks of at most 64 KB, before
    /// this returns: read into a buffer, not through the mapping, whose pages would each stay in
    /// the resident set once touched (the kernel maps 64 KB around each, a large folio whole),
    /// so that a scan of libc6-dbg's .debug_info adds 64 KB to a watcher's peak, not 5.8 MB.
    static func mapped(
        buildID: BuildID, section: String, size: Int, scan: ((_ chunk: UnsafeRawBufferPointer, _ offset: Int) -> Void)? = nil
    ) -> MappedFile? {
        guard let directory, size > 0, let name = name(buildID: buildID, section: section, size: size) else { return nil }
        let path = directory + "/" + name
        let fd = asWatcher { () -> Int32? in open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) } ?? -1
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(), info.st_size == size,
            let file = MappedFile(descriptor: fd, size: size, name: path)
        else { return nil }
        guard let scan else { return file }
        let mapping = file.bytes
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        defer { buffer.deallocate() }
        var offset = 0
        while offset < size {
            let count = min(buffer.count, size - offset)
            let read = readAll(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), at: offset)
            // A failed read of our own file (an I/O error): that chunk through the mapping.
            let chunk =
                read
                ? UnsafeRawBufferPointer(rebasing: buffer[0..<count])
                : UnsafeRawBufferPointer(rebasing: mapping[offset..<offset + count])
            scan(chunk, offset)
            offset += count
        }
        return file
    }

    /// Removes the cache's file `file` maps once it was found torn (it shrank or failed a read
    /// while mapped), unless another file has taken its name since: the next watcher inflates
    /// the section again rather than map it.
    static func discard(_ file: MappedFile) {
        guard file.torn, let inode = file.inode else { return }
        let path = file.path
        _ = asWatcher { () -> Bool? in
            var info = stat()
            guard lstat(path, &info) == 0, UInt64(info.st_ino) == inode else { return false }
            return unlink(path) == 0
        }
    }

    /// A section being written as it is inflated; `finish` publishes it, and a writer dropped
    /// unfinished leaves nothing.
    final class Writer {
        private var fd: Int32
        private let temporary: String
        private let final: String
        private let size: Int
        private var written = 0

        /// Nil when the cache is off or there is no room for `size` bytes.
        init?(buildID: BuildID, section: String, size: Int) {
            guard let directory = SectionCache.directory, size > 0, size <= SectionCache.budget,
                let name = SectionCache.name(buildID: buildID, section: section, size: size)
            else { return nil }
            final = directory + "/" + name
            temporary = final + ".tmp-\(getpid())-\(UInt64(bitPattern: Int64(Int(bitPattern: pthread_self()))))"
            self.size = size
            let temporary = temporary
            fd =
                SectionCache.asWatcher { () -> Int32? in
                    SectionCache.makeRoom(for: size, in: directory)
                    return open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                } ?? -1
            guard fd >= 0 else { return nil }
        }

        /// Appends the next inflated bytes (a failed write abandons the file).
        func write(_ chunk: ByteView) {
            guard fd >= 0, chunk.count > 0 else { return }
            guard writeAll(fd, chunk.bytes) else {
                abandon()
                return
            }
            written += chunk.count
        }

        /// Publishes the file when all of the section was written.
        func finish() {
            guard fd >= 0 else { return }
            let complete = written == size && fsync(fd) == 0
            close(fd)
            fd = -1
            let (temporary, final) = (temporary, final)
            _ = SectionCache.asWatcher { () -> Bool? in
                if !complete || rename(temporary, final) != 0 { unlink(temporary) }
                return true
            }
        }

        private func abandon() {
            close(fd)
            fd = -1
            let temporary = temporary
            _ = SectionCache.asWatcher { () -> Bool? in unlink(temporary) == 0 }
        }

        deinit { if fd >= 0 { abandon() } }
    }

    /// Removes the oldest files (by modification time) until `size` more bytes fit the budget.
    static func makeRoom(for size: Int, in directory: String) {
        guard let handle = opendir(directory) else { return }
        var files: [(path: String, size: Int, time: Int)] = []
        while let entry = readdir(handle) {
            let name = directoryEntryName(entry)
            guard name != ".", name != ".." else { continue }
            var info = stat()
            guard lstat(directory + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            files.append((directory + "/" + name, Int(info.st_size), Int(info.st_mtim.tv_sec)))
        }
        closedir(handle)
        var total = files.reduce(0) { $0 + $1.size }
        for file in files.sorted(by: { $0.time < $1.time }) where total + size > budget {
            if unlink(file.path) == 0 { total -= file.size }
        }
    }
}
