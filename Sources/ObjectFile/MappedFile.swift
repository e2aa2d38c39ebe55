// MappedFile: a private mmap of a whole file, the byte source every parser here reads from.
//
// Ownership: the mapping lives as long as the object. Reads are bounds-checked and never trap on
// a hostile offset.
//
// A file that shrinks under us (its user truncates it once we have mapped it: inotify tells them
// when), or whose file system fails a read (a network or FUSE mount), would raise SIGBUS on the
// read of a page past its end, and kill the watcher. So every file mapping is registered with
// CShims' guard (guarded.c): such a fault turns the rest of the mapping into zero pages, the read
// goes on and sees zeros (the parsers take a file's bytes as hostile anyway), and `torn` says so,
// for the caches to drop the file and the report to note it. A file is never read through a
// mapping the guard does not cover: when its table is full, the file is read into anonymous
// memory with pread instead (a file that shrinks meanwhile reads as zeros past its new end, and
// is torn too).
//
// Writable, privately: the file is opened O_RDONLY and mapped MAP_PRIVATE with PROT_WRITE,
// because libelf (elf_memory, see ELFFile) updates a section header in place when it inflates a
// compressed section. Such a write copies one page and never reaches the file; nothing in
// crashport writes otherwise. The one ELFFile allowed to hand a mapping to libelf claims it.

import BoundedBytes
import CShims
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

public enum ObjectFileError: Error, CustomStringConvertible, Equatable {
    case cannotOpen(path: String, errno: Int32)
    case notELF(path: String, reason: String)
    case malformed(path: String, reason: String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let errno): return "cannot open \(path): \(String(cString: strerror(errno)))"
        case .notELF(let path, let reason): return "\(path) is not an ELF file: \(reason)"
        case .malformed(let path, let reason): return "\(path) is malformed: \(reason)"
        }
    }
}

/// A mapping it owns, read through a ByteView (libelf's one write is claimed, atomically).
public final class MappedFile: Sendable {
    public let path: String
    /// The mapping, held as a ByteView: the raw pointer's one carrier.
    private let view: ByteView
    public var bytes: UnsafeRawBufferPointer { view.bytes }
    /// The file's inode, owner, group and mode bits when it was opened (nil for an image in
    /// memory): which file was opened, and who may read it.
    public let inode: UInt64?
    private let owner: (uid: UInt32, gid: UInt32, mode: UInt32)?
    /// The file was on a mount without set-user-ID (ST_NOSUID): where users mount media and FUSE
    /// file systems, whose files may read as root's whatever their bytes.
    private let onNosuidMount: Bool

    /// Maps the file at `path`; `name`, when given, is the path it goes by (a module opened
    /// through /proc/PID/map_files is named by its path in the maps), where files that go with
    /// it are looked for (a .gnu_debuglink's) and what reports say.
    public init(path: String, name: String? = nil) throws {
        self.path = name ?? path
        owned = false
        // O_NONBLOCK: a path from a process's maps or a spool file may name a FIFO, whose open
        // would otherwise wait for a writer; it is refused below, as anything not regular is.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw ObjectFileError.cannotOpen(path: path, errno: errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw ObjectFileError.cannotOpen(path: path, errno: errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw ObjectFileError.notELF(path: path, reason: "not a regular file")
        }
        inode = UInt64(info.st_ino)
        owner = (info.st_uid, info.st_gid, info.st_mode)
        var mount = statvfs()
        onNosuidMount = fstatvfs(fd, &mount) != 0 || mount.f_flag & UInt(ST_NOSUID) != 0
        let size = Int(info.st_size)
        if size == 0 {
            view = ByteView(UnsafeRawBufferPointer(start: nil, count: 0))
            (guardSlot, fileBacked, readShort) = (-1, false, false)
            return
        }
        guard let read = Self.read(fd, size: size, writable: true) else {
            throw ObjectFileError.cannotOpen(path: path, errno: errno)
        }
        (view, guardSlot, fileBacked, readShort) = (ByteView(read.bytes), read.slot, read.fileBacked, read.readShort)
    }

    /// The first `size` bytes of the open file `fd` (SectionCache's, which checked it): mapped
    /// read-only and guarded as a file opened by path is.
    init?(descriptor fd: Int32, size: Int, name: String) {
        path = name
        owned = false
        (owner, onNosuidMount) = (nil, false)
        guard size > 0, let read = Self.read(fd, size: size, writable: false) else { return nil }
        (view, guardSlot, fileBacked, readShort) = (ByteView(read.bytes), read.slot, read.fileBacked, read.readShort)
        var info = stat()
        inode = fstat(fd, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    /// `fd`'s first `size` bytes: a private mapping registered with the guard (cp_guard_register),
    /// else, when the guard takes no more, a copy read with pread into anonymous memory (a short
    /// read leaves zeros, `readShort`). Nil when neither can be had (errno set).
    private static func read(
        _ fd: Int32, size: Int, writable: Bool
    ) -> (
        bytes: UnsafeRawBufferPointer, slot: Int32, fileBacked: Bool, readShort: Bool
    )? {
        let protection = PROT_READ | (writable ? PROT_WRITE : 0)
        guard let base = mmap(nil, size, protection, MAP_PRIVATE, fd, 0), base != MAP_FAILED else { return nil }
        let slot = cp_guard_register(base, size, protection)
        if slot >= 0 { return (UnsafeRawBufferPointer(start: base, count: size), slot, true, false) }
        // Never read through a mapping the guard does not cover.
        munmap(base, size)
        guard let copy = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), copy != MAP_FAILED
        else { return nil }
        var done = 0
        while done < size {
            let got = pread(fd, copy + done, size - done, off_t(done))
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { break }
            done += got
        }
        return (UnsafeRawBufferPointer(start: copy, count: size), -1, false, done < size)
    }

    /// The file changed while it was read: a read past its end (it was truncated since it was
    /// mapped) or one its file system failed was recovered as zeros, or the copy read when the
    /// guard was full came up short. What it holds past that point is zeros, not the file.
    /// Never true for an image in memory.
    public var torn: Bool { readShort || (guardSlot >= 0 && cp_guard_torn(guardSlot) != 0) }

    /// Whether the file's mode bits let `uid` (with primary group `gid` and no other) read it:
    /// for a file opened by root on a user's behalf through a path that bypasses the path's
    /// own checks (/proc/PID/map_files). False for an image in memory.
    public func readable(by uid: UInt32, gid: UInt32) -> Bool {
        guard let owner else { return false }
        if owner.uid == uid { return owner.mode & 0o400 != 0 }
        if owner.gid == gid { return owner.mode & 0o040 != 0 }
        return owner.mode & 0o004 != 0
    }

    /// Whether the file, when opened, belonged to `uid` or root, only its owner could write it,
    /// and it was not on a nosuid mount (a user's media or FUSE mount, whose files can read as
    /// root's): its bytes are its owner's word (SectionCache keeps only such files' sections).
    public func ownedWithoutOthersWriting(byRootOr uid: UInt32) -> Bool {
        guard let owner, !onNosuidMount else { return false }
        return (owner.uid == 0 || owner.uid == uid) && owner.mode & 0o022 == 0
    }

    private let owned: Bool
    /// Mapped from a file: a clean page dropped from memory reads back the same bytes.
    private let fileBacked: Bool
    /// The mapping's slot in the guard's table (cp_guard_register), -1 for none.
    private let guardSlot: Int32
    /// Read with pread (the guard was full), and the file ended before its size.
    private let readShort: Bool

    /// Gives back the memory of the whole pages inside `range` (offsets in the file) once their
    /// bytes have been used up, for example a compressed section after it was inflated: on a
    /// file's private mapping MADV_DONTNEED drops the pages, the page cache keeps them, and a
    /// later read faults the same bytes back in. Only for ranges nothing writes (a page written
    /// since mapping would lose the write). A no-op for images held in anonymous memory.
    public func releasePages(in range: Range<Int>) {
        guard fileBacked, let base = bytes.baseAddress, range.lowerBound >= 0, range.upperBound <= bytes.count else { return }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (Int(bitPattern: base) + range.lowerBound + page - 1) / page * page
        let end = (Int(bitPattern: base) + range.upperBound) / page * page
        guard end > start, let first = UnsafeMutableRawPointer(bitPattern: start) else { return }
        _ = madvise(first, end - start, MADV_DONTNEED)
    }
    private let claimed = Atomic<Bool>(false)

    /// True for the first caller only: the ELFFile that may let libelf write into this mapping
    /// (others work on a copy).
    public func claimForLibELF() -> Bool {
        claimed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    /// An image decoded into memory, held once: `fill` writes at most `capacity` bytes into a
    /// fresh anonymous mapping (only the pages it writes cost memory) and returns how many, or
    /// nil to give up; the mapping is trimmed to that count and kept by this object, uncopied.
    public init?(name: String, capacity: Int, fill: (UnsafeMutableRawBufferPointer) -> Int?) {
        path = name
        owned = false
        (guardSlot, fileBacked, readShort) = (-1, false, false)
        (inode, owner, onNosuidMount) = (nil, nil, false)
        guard capacity > 0, let base = mmap(nil, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            base != MAP_FAILED
        else { return nil }
        guard let count = fill(UnsafeMutableRawBufferPointer(start: base, count: capacity)), count > 0, count <= capacity
        else {
            munmap(base, capacity)
            return nil
        }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let kept = (count + page - 1) / page * page
        if kept < capacity { munmap(base + kept, capacity - kept) }
        // Left writable (privately, like a file's mapping): libelf may update a section header.
        view = ByteView(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// An in-memory image (for example the vDSO copied out of a process), kept by this object.
    public init(bytes source: [UInt8], name: String) {
        path = name
        owned = true
        (guardSlot, fileBacked, readShort) = (-1, false, false)
        (inode, owner, onNosuidMount) = (nil, nil, false)
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(source.count, 1), alignment: 16)
        source.withUnsafeBytes { copy.copyMemory(from: $0) }
        view = ByteView(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(copy)[0..<source.count]))
    }

    deinit {
        guard let base = bytes.baseAddress else { return }
        if owned {
            UnsafeMutableRawPointer(mutating: base).deallocate()
        } else {
            // Out of the guard's table first: the range may be another mapping's once unmapped.
            if guardSlot >= 0 { cp_guard_unregister(guardSlot) }
            munmap(UnsafeMutableRawPointer(mutating: base), bytes.count)  // (the tail of its last page goes with it)
        }
    }
}
