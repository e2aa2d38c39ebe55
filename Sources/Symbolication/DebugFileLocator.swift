// DebugFileLocator: finds the separate debug information of an ELF file, the way gdb and
// elfutils do, and unpacks MiniDebugInfo.
//
// Order of search, first acceptable candidate wins:
//  1. `<dir>/.build-id/<xx>/<rest>.debug` for each debug directory (build-id in hex, split
//     after its first byte);
//  2. any ELF file in a user-given directory (and its subdirectories, bounded) whose build-id
//     matches: for debug files collected flat by name; one scan per directory, cached
//     process-wide and redone when the directory's mtime changes;
//  3. `.gnu_debuglink`: the named file next to the binary, in its `.debug/` subdirectory, and
//     under each debug directory followed by the binary's absolute directory; the file's
//     CRC-32 must equal the one in the link.
// A candidate whose build-id differs from the binary's is always rejected; one that is the
// binary itself is skipped.
//
// MiniDebugInfo (`.gnu_debugdata`, an xz-compressed ELF with a .symtab, as Fedora ships) is
// decompressed into memory, capped at 64 MiB (SectionCompression.miniDebugInfoCap): past that it
// is refused, and the refusal says so.
//
// Thread-safety: the struct is a value; the shared scan cache is locked.

#if canImport(Glibc)
import BoundedBytes
import ObjectFile
import Synchronization
import Glibc
#endif

public struct DebugFileLocator: Sendable {
    public static let systemDebugDirectory = "/usr/lib/debug"

    /// The directories searched, in order: the user's (e.g. --debug-dir), then /usr/lib/debug.
    public var debugDirectories: [String]
    /// Whether a debug file found nowhere here is asked of debuginfod (offline only).
    public var useDebuginfod = false

    public init(debugDirectories: [String] = []) {
        var directories = debugDirectories.filter { !$0.isEmpty }
        if !directories.contains(DebugFileLocator.systemDebugDirectory) {
            directories.append(DebugFileLocator.systemDebugDirectory)
        }
        self.debugDirectories = directories
    }

    /// The separate debug file of `elf`, or nil when none is found or none matches.
    public func debugFile(for elf: ELFFile) -> ELFFile? {
        let buildID = elf.buildID
        let binary = FileIdentity(path: elf.path)

        if let buildID {
            let hex = buildID.hex
            if hex.count > 2 {
                let relative = ".build-id/\(hex.prefix(2))/\(hex.dropFirst(2)).debug"
                for directory in debugDirectories {
                    if let candidate = open(directory + "/" + relative, excluding: binary),
                        candidate.buildID == buildID
                    {
                        return candidate
                    }
                }
            }
            for directory in debugDirectories where directory != DebugFileLocator.systemDebugDirectory {
                for path in DebugDirectoryIndex.shared.paths(forBuildID: hex, in: directory) {
                    if let candidate = open(path, excluding: binary), candidate.buildID == buildID { return candidate }
                }
            }
        }

        if let link = elf.debugLink {
            let directory = DebugFileLocator.directory(of: DebugFileLocator.absolutePath(elf.path))
            var candidates = [directory + "/" + link.name, directory + "/.debug/" + link.name]
            for debugDirectory in debugDirectories { candidates.append(debugDirectory + directory + "/" + link.name) }
            if link.name.hasPrefix("/") { candidates = [link.name] }
            for path in candidates {
                guard let candidate = open(path, excluding: binary) else { continue }
                if let buildID, let candidateID = candidate.buildID, candidateID != buildID { continue }
                if SectionCompression.crc32(candidate.file.bytes) == link.crc { return candidate }
            }
        }
        if useDebuginfod, let buildID, case .success(let fetched) = Debuginfod.fetch(buildID) { return fetched }
        return nil
    }

    /// The ELF image inside `.gnu_debugdata` (MiniDebugInfo), or nil.
    public func miniDebugInfo(for elf: ELFFile) -> ELFFile? {
        try? loadMiniDebugInfo(for: elf)?.get()
    }

    /// The ELF image inside `.gnu_debugdata`: nil when there is none or it is not a valid xz
    /// stream of an ELF file, a refusal when it inflates past the cap (64 MiB).
    public func loadMiniDebugInfo(for elf: ELFFile) -> Result<ELFFile, DebugDataRefusal>? {
        guard let section = elf.section(named: ".gnu_debugdata"), let data = elf.contents(of: section) else {
            return nil
        }
        switch SectionCompression.xzDecompress(data, name: elf.path + "(.gnu_debugdata)") {
        case .success(let image):
            return (try? ELFFile(file: image)).map { .success($0) }
        case .failure(.refused(let reason)):
            return .failure(DebugDataRefusal(module: elf.fileName, section: ".gnu_debugdata", reason: reason))
        case .failure(.corrupt):
            return nil
        }
    }

    // MARK: - Helpers

    private func open(_ path: String, excluding binary: FileIdentity?) -> ELFFile? {
        guard let identity = FileIdentity(path: path), identity != binary else { return nil }
        return try? ELFFile(path: path)
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "" : String(path[..<slash])
    }

    /// realpath(3) of `path`, or `path` itself when it cannot be resolved.
    static func absolutePath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// Device and inode of a regular file (stat(2)), to recognize the same file under two names.
struct FileIdentity: Equatable {
    var device: UInt64
    var inode: UInt64
    var modified: Int

    init?(path: String, requireRegular: Bool = true) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        if requireRegular && (info.st_mode & S_IFMT) != S_IFREG { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        modified = Int(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int(info.st_mtim.tv_nsec)
    }

    static func == (lhs: FileIdentity, rhs: FileIdentity) -> Bool {
        lhs.device == rhs.device && lhs.inode == rhs.inode
    }
}

/// Build-id → paths of the ELF files under a debug directory, scanned once per directory
/// (and again when the directory's mtime changes). Bounded: depth 4, 50,000 entries.
final class DebugDirectoryIndex: Sendable {
    static let shared = DebugDirectoryIndex()

    private let scans = Mutex<[String: (modified: Int, paths: [String: [String]])]>([:])

    func paths(forBuildID hex: String, in directory: String) -> [String] {
        let modified = FileIdentity(path: directory, requireRegular: false)?.modified ?? -1
        if let scan = scans.withLock({ $0[directory] }), scan.modified == modified { return scan.paths[hex] ?? [] }
        // Scanned outside the lock: another thread asking meanwhile scans too, and one result wins.
        var paths: [String: [String]] = [:]
        var budget = 50_000
        DebugDirectoryIndex.scan(directory, depth: 0, budget: &budget, into: &paths)
        scans.withLock { $0[directory] = (modified, paths) }
        return paths[hex] ?? []
    }

    private static func scan(_ directory: String, depth: Int, budget: inout Int, into paths: inout [String: [String]]) {
        guard depth <= 4, let stream = opendir(directory) else { return }
        defer { closedir(stream) }
        while budget > 0, let entry = readdir(stream) {
            budget -= 1
            let name = directoryEntryName(entry)
            if name == "." || name == ".." || name == ".build-id" { continue }
            let path = directory + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR: scan(path, depth: depth + 1, budget: &budget, into: &paths)
            case S_IFREG, S_IFLNK:
                guard let elf = try? ELFFile(path: path), let buildID = elf.buildID else { continue }
                paths[buildID.hex, default: []].append(path)
            default: continue
            }
        }
    }
}
