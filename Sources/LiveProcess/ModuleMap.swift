// ModuleMap: the ELF images mapped into a process, from /proc/PID/maps.
//
// A module starts at the mapping of its file at offset 0 (the ELF header) and spans the
// following mappings of the same file (same path and inode); it is kept when one of them is
// executable. The main executable comes first. Files are opened with the credentials of the
// process's user (ProcessAccess): by their path inside the process's root (/proc/PID/root, so a
// container's files are found), kept only when that is the inode mapped; else, for a file
// replaced or deleted since, through /proc/PID/map_files/START-END (root's: the kernel wants
// CAP_CHECKPOINT_RESTORE there), and only when the inode's own mode lets that user read it. With the process's memory at hand, the build-id is
// read from the mapped image itself, and a file on disk whose build-id differs is not used: it is
// not the code that ran; the package note is read with it (the package of a module whose file is
// not used). The vDSO is read from memory. Two phases, so that the process is held
// only for the system calls: `pending` while it is stopped (maps, build-ids, files mapped),
// `open` after it is released (libelf parses the files).

import BoundedBytes
import ObjectFile
import Processes
import Synchronization
import ReportModel

/// ELF files opened for earlier captures, reused while their identity (path, inode) holds and
/// they are whole: a file that changed while it was read (ELFFile.torn: truncated under its
/// mapping, or a read its file system failed) is opened again by the next capture, never served
/// with the zeros that stood in for it. Safe to share between threads.
public final class ELFCache: Sendable {
    private let files = Mutex<[String: ELFFile]>([:])

    public init() {}

    /// Whether a whole file is cached under `key`.
    func contains(_ key: String) -> Bool { files.withLock { $0[key].map { !$0.torn } ?? false } }

    /// The cached file for `key` when it is whole, else `open()`'s (called outside the lock),
    /// which takes its place.
    func file(key: String, open: () throws -> ELFFile) throws -> ELFFile {
        if let cached = files.withLock({ $0[key] }), !cached.torn { return cached }
        let file = try open()
        files.withLock { files in
            if files.count > 512 { files.removeAll() }
            files[key] = file
        }
        return file
    }
}

/// What capture takes from a module while the process is held: its place, the build-id read from
/// the mapped image, and its file mapped (through /proc/PID/map_files, which exists only while the
/// process does). Parsing the file with libelf waits until the process is released (`open`).
struct PendingModule {
    var module: LoadedModule
    /// The ELF cache's key (path and inode); nil for the vDSO, which is not a file.
    var key: String?
    /// nil when the cache already holds the file.
    var file: Result<MappedFile, Error>?
}

enum ModuleMap {
    /// While the process is held: every module's mapping, build-id and file. Cheap: a few
    /// system calls per module, no parsing. Without a pid (a spooled crash, its process long
    /// gone) files are opened by path only, never through another process's /proc.
    static func pending(
        access: ProcessAccess?, mappings: [MemoryMapping], executable: String?, memory: (any MemoryReader)?, cache: ELFCache
    ) -> [PendingModule] {
        var modules: [PendingModule] = []
        // The modules whose files are not cached yet: opened together below.
        var wanted: [(position: Int, mapping: MemoryMapping)] = []
        var index = 0
        while index < mappings.count {
            let first = mappings[index]
            index += 1
            if first.path == "[vdso]" {
                modules.append(vdso(first, memory: memory))
                continue
            }
            guard first.path.hasPrefix("/"), first.offset == 0 else { continue }
            var last = first
            var executable = first.executable
            while index < mappings.count, mappings[index].path == first.path, mappings[index].inode == first.inode,
                mappings[index].offset >= last.offset
            {
                last = mappings[index]
                executable = executable || last.executable
                index += 1
            }
            guard executable, let size = last.end.checkedSubtracting(first.start) else { continue }
            let mapped = memory.map { ELFFile.imageNotes(ofImageAt: first.start, in: $0) }
            // A file parsed for one user is never handed to another: a user who can make a path
            // and inode look alike in a mount namespace of their own gets their own parse.
            let key = (access?.credentials.map { "uid \($0.uid)|" } ?? "") + "\(first.path)|\(first.inode)"
            var pending = PendingModule(
                module: LoadedModule(path: first.path, base: first.start, size: size, buildID: mapped?.buildID), key: key)
            pending.module.imagePackageNote = mapped?.package
            if !cache.contains(key) { wanted.append((modules.count, first)) }
            modules.append(pending)
        }
        for (position, file) in zip(wanted.map(\.position), files(of: wanted.map(\.mapping), access: access)) {
            modules[position].file = file
        }
        // The main executable first.
        if let executable, let position = modules.firstIndex(where: { $0.module.path == executable }), position > 0 {
            modules.insert(modules.remove(at: position), at: 0)
        }
        return modules
    }

    /// After the process is released: each module's object file, parsed (or from the cache),
    /// kept only when it is the code that ran (same build-id as the mapped image).
    static func open(_ pending: [PendingModule], access: ProcessAccess?, cache: ELFCache) -> [LoadedModule] {
        pending.map { pending in
            var module = pending.module
            guard let key = pending.key else {  // the vDSO: the watcher's parse, or one of the copy of its memory
                if module.object == nil, case .success(let file)? = pending.file, let object = try? ELFFile(file: file) {
                    module.object = object
                    module.buildID = object.buildID
                }
                return module
            }
            do {
                let object = try cache.file(key: key) {
                    // Evicted since `pending` looked: the path is all that is left.
                    guard let file = pending.file else {
                        return try (access ?? .own(ProcessID(0))).perform { try ELFFile(path: Self.filePath(module.path)) }
                    }
                    return try ELFFile(file: file.get())
                }
                let onDisk = object.buildID
                if object.torn {
                    // Truncated while it was read (or its file system failed a read): its headers
                    // may be zeros; nothing of it is believed.
                    module.problem = ELFFile.tornDescription + "; not symbolicated from it"
                } else if let mapped = module.buildID, mapped != onDisk {
                    // The file was replaced since it was mapped: do not symbolicate with a file
                    // that is not the code that ran.
                    module.problem =
                        "the file on disk (build-id \(onDisk?.hex ?? "none")) is not what was mapped (build-id \(mapped.hex)); not symbolicated from it"
                } else {
                    module.object = object
                    module.buildID = onDisk
                }
            } catch {
                // A file truncated under its mapping reads as zeros: not an ELF file any more.
                if case .success(let file)? = pending.file, file.torn {
                    module.problem = ELFFile.tornDescription + "; not symbolicated from it"
                } else {
                    module.problem = "\(error)"
                }
            }
            return module
        }
    }

    /// The files of modules' first mappings, opened as the process's user may open them (see the
    /// file's comment): by path inside its root, all with one change of credentials; through
    /// map_files (root's) only those that were not the inode mapped, and only when its mode lets
    /// that user read it. Without a process (a spooled crash, long gone), by path, as the caller's
    /// credentials allow; a process gone since (a core read after its end) by path, as its
    /// user's.
    static func files(of mappings: [MemoryMapping], access: ProcessAccess?) -> [Result<MappedFile, Error>] {
        guard let access else { return mappings.map { mapping in Result { try MappedFile(path: filePath(mapping.path)) } } }
        let pid = access.pid
        // Gone, or a zombie (whose maps is empty): its root and map_files are gone with it.
        if access.read("maps", limit: 1)?.isEmpty ?? true {
            return mappings.map { mapping in Result { try access.perform { try MappedFile(path: filePath(mapping.path)) } } }
        }
        let inRoot: [MappedFile?] =
            (try? access.perform {
                mappings.map { mapping -> MappedFile? in
                    let path = filePath(mapping.path)
                    let file = try? MappedFile(path: "/proc/\(pid)/root" + path, name: path)
                    return file?.inode == mapping.inode ? file : nil
                }
            }) ?? mappings.map { _ in nil }
        return zip(mappings, inRoot).map { mapping, opened in
            Result {
                if let opened { return opened }
                let path = filePath(mapping.path)
                let mapFile = "/proc/\(pid)/map_files/\(String(mapping.start, radix: 16))-\(String(mapping.end, radix: 16))"
                let mapped = try MappedFile(path: mapFile, name: path)
                if let credentials = access.credentials, !mapped.readable(by: credentials.uid, gid: credentials.gid) {
                    throw InspectionError.malformed(
                        "\(path) (inode \(mapping.inode)) is not readable by uid \(credentials.uid): not opened for its report")
                }
                return mapped
            }
        }
    }

    /// A mapped path without the " (deleted)" maps appends to a file removed since.
    static func filePath(_ mapped: String) -> String {
        mapped.hasSuffix(" (deleted)") ? String(mapped.dropLast(10)) : mapped
    }

    /// The vDSO, from a copy of its memory. The processes of a boot map the same one as the
    /// watcher: a capture whose vDSO has exactly the watcher's bytes shares the watcher's one
    /// parse of it (`ownVDSO`) instead of holding a copy until its report is built (a 100-crash
    /// storm held 0.8 MB of them). Other bytes (a process that wrote to its own) are kept and
    /// parsed after the release, as before. Nothing is parsed here, while the process waits.
    static func vdso(_ mapping: MemoryMapping, memory: (any MemoryReader)?) -> PendingModule {
        let size = mapping.end.checkedSubtracting(mapping.start) ?? 0
        var pending = PendingModule(
            module: LoadedModule(path: "[vdso]", base: mapping.start, size: size, buildID: nil), key: nil)
        guard let memory, size > 0, size <= 1 << 20 else { return pending }
        let bytes = memory.bytes(at: mapping.start, count: Int(size))
        if let own = ownVDSO, bytes.elementsEqual(own.file.bytes) {
            pending.module.object = own
            pending.module.buildID = own.buildID
            return pending
        }
        pending.file = .success(MappedFile(bytes: bytes, name: "[vdso]"))
        return pending
    }

    /// The watcher's own vDSO (its mapping in /proc/self/maps), parsed once: at start
    /// (CaptureSession.prepareSharedVDSO), else at first use.
    static let ownVDSO: ELFFile? = {
        guard let mapping = MemoryMapping.parse(ProcFiles.read("/proc/self/maps") ?? []).first(where: { $0.path == "[vdso]" }),
            let size = mapping.end.checkedSubtracting(mapping.start), size > 0, size <= 1 << 20,
            let start = UnsafeRawPointer(bitPattern: UInt(mapping.start))
        else { return nil }
        return try? ELFFile(
            file: MappedFile(bytes: Array(UnsafeRawBufferPointer(start: start, count: Int(size))), name: "[vdso]"))
    }()
}
