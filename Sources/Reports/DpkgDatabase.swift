// DpkgDatabase: which Debian package installed a file, from dpkg's own database, for a module
// whose file has no package note (ModulePackages). Opt-in: the watcher asks it for the modules of
// a crash on this machine; an offline symbolication on another machine must not.
//
// dpkg lists each package's files in /var/lib/dpkg/info/PACKAGE[:ARCH].list and its version and
// architecture in /var/lib/dpkg/status. `dpkg-query -S` with ten paths took 0.67 s on a Debian
// 12 machine (874 packages, 8 MB of lists; it loads the whole database), reading the lists here
// 0.17 s for five paths (a debug build, both on the same busy 2-core machine), and a path asked
// again 0.1 ms: so the lists are read here, in one pass that looks for the
// wanted paths only (no index of every file on the machine is kept: the watcher's memory budget
// is a few MB), and each answer, found or not, is kept until the database changes (the info
// directory's or the status file's modification time).
//
// Bounded: each file is read with BoundedFile (root's own, not a FIFO, not a link), at most
// 16 MiB a list and 64 MiB in all, the status file at most 64 MiB, and the whole pass stops at
// its deadline (1 s); what it could not finish is said, not cached. A path is looked for as
// given and in its other merged-/usr spelling (/lib/x86_64-linux-gnu/libc.so.6 and
// /usr/lib/x86_64-linux-gnu/libc.so.6): a merged-/usr system maps one, dpkg may list the other.

import BoundedBytes
import ObjectFile
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

public final class DpkgDatabase: Sendable {
    /// The machine's database, shared by every report of this process.
    public static let shared = DpkgDatabase()

    /// dpkg's administrative directory.
    public let root: String
    /// Whose files are read (nil: anyone's, for a test's database).
    let owners: Set<UInt32>?
    let deadlineNanoseconds: UInt64
    static let maximumListBytes = 16 << 20
    static let maximumTotalBytes = 64 << 20
    static let maximumStatusBytes = 64 << 20
    static let maximumAnswers = 4096

    private struct Cache {
        var version: [Int64] = []
        var answers: [String: PackageMetadata?] = [:]
    }

    private let cache = Mutex(Cache())

    public init(root: String = "/var/lib/dpkg", owners: Set<UInt32>? = [0], deadlineNanoseconds: UInt64 = 1_000_000_000) {
        self.root = root
        self.owners = owners
        self.deadlineNanoseconds = deadlineNanoseconds
    }

    /// The packages that own `paths`, by path (a path no package owns is absent), and why
    /// the answer is incomplete when it is (a note for the report).
    public struct Lookup: Sendable, Equatable {
        public var packages: [String: PackageMetadata] = [:]
        public var note: String?
    }

    public func packages(owning paths: [String]) -> Lookup {
        var lookup = Lookup()
        // No dpkg here (another distribution, a minimal container): nothing to say.
        guard let version = databaseVersion() else { return lookup }
        var wanted: [String] = []
        cache.withLock { cache in
            if cache.version != version { cache = Cache(version: version) }
            for path in Set(paths) {
                if let answer = cache.answers[path] {
                    if let answer { lookup.packages[path] = answer }
                } else {
                    wanted.append(path)
                }
            }
        }
        guard !wanted.isEmpty else { return lookup }
        let (owners, complete, problem) = listOwners(of: wanted)
        var found: [String: PackageMetadata] = [:]
        var statusProblem: String?
        if !owners.isEmpty {
            let packages: [Owner: PackageMetadata]
            (packages, statusProblem) = status(of: Set(owners.values))
            for (path, owner) in owners {
                found[path] =
                    packages[owner] ?? PackageMetadata(name: owner.name, architecture: owner.architecture, source: .dpkg)
            }
        }
        lookup.packages.merge(found) { first, _ in first }
        lookup.note = [problem, statusProblem].compactMap { $0 }.first.map { "dpkg's database: \($0)" }
        if complete && statusProblem == nil {
            cache.withLock { cache in
                guard cache.version == version else { return }
                if cache.answers.count > Self.maximumAnswers { cache.answers.removeAll() }
                for path in wanted { cache.answers[path] = .some(found[path]) }
            }
        }
        return lookup
    }

    /// A package as a list file names it: `libc6:amd64.list` (multi-arch) or `coreutils.list`.
    struct Owner: Hashable {
        var name: String
        var architecture: String?
    }

    /// The modification times of the info directory and the status file: what an install,
    /// upgrade or removal changes. nil when there is no database.
    func databaseVersion() -> [Int64]? {
        var info = stat()
        var status = stat()
        guard stat(root + "/info", &info) == 0, info.st_mode & S_IFMT == S_IFDIR, stat(root + "/status", &status) == 0
        else { return nil }
        return [
            Int64(info.st_mtim.tv_sec), Int64(info.st_mtim.tv_nsec), Int64(status.st_mtim.tv_sec),
            Int64(status.st_mtim.tv_nsec),
        ]
    }

    /// Whether dpkg could have installed a file at `path`: Debian's packages install under
    /// /usr (never /usr/local, which policy leaves to the machine's own), /lib*, /bin, /sbin and
    /// /opt. A program built in a home directory, /tmp or /srv is nobody's package, and is not
    /// looked for: its lookup would read every list to the end (or to the deadline, on a busy
    /// machine, uncached) for every report.
    public static func mayOwn(_ path: String) -> Bool {
        if path.hasPrefix("/usr/local/") { return false }
        return ["/usr/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/bin/", "/sbin/", "/opt/"].contains {
            path.hasPrefix($0)
        }
    }

    /// The merged-/usr spellings of a path: itself, and /usr/lib/… for /lib/… (bin, sbin,
    /// lib, lib32, lib64, libx32) or the other way round.
    static func spellings(of path: String) -> [String] {
        let merged = ["bin", "sbin", "lib", "lib32", "lib64", "libx32"]
        for directory in merged {
            if path.hasPrefix("/usr/\(directory)/") { return [path, String(path.dropFirst(4))] }
            if path.hasPrefix("/\(directory)/") { return [path, "/usr" + path] }
        }
        return [path]
    }

    /// The list files' names, sorted (the first package that lists a path owns it).
    func listFiles() -> [String]? {
        guard let directory = opendir(root + "/info") else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory), names.count < 1_000_000 {
            let name = directoryEntryName(entry)
            if name.hasSuffix(".list") && !name.hasPrefix(".") { names.append(name) }
        }
        return names.sorted()
    }

    /// Which package lists each wanted path (in any of its spellings), whether every list was
    /// read, and why not when one was not.
    func listOwners(of paths: [String]) -> (owners: [String: Owner], complete: Bool, problem: String?) {
        let started = monotonicNanoseconds()
        // Each spelling, and the wanted paths it answers (/bin/sleep and /usr/bin/sleep may
        // both be wanted, each the other's spelling).
        var byLine: [[UInt8]: [String]] = [:]
        for path in Set(paths) {
            for spelling in Self.spellings(of: path) { byLine[Array(spelling.utf8), default: []].append(path) }
        }
        let lengths = Set(byLine.keys.map(\.count))
        guard let names = listFiles() else { return ([:], false, "\(root)/info could not be read") }
        var owners: [String: Owner] = [:]
        var total = 0
        var problem: String?
        for name in names {
            if monotonicNanoseconds() - started > deadlineNanoseconds {
                return (
                    owners, false,
                    "not every package's file list was read within \(deadlineNanoseconds / 1_000_000) ms: some modules may lack their package"
                )
            }
            let contents: BoundedFile.Contents?
            do {
                contents = try BoundedFile.read(
                    root + "/info/" + name, limit: Self.maximumListBytes, longer: .refuse, owners: self.owners,
                    whose: "root's")
            } catch {
                problem = problem ?? "\(error)"
                continue
            }
            guard let bytes = contents?.bytes else { continue }
            total += bytes.count
            if total > Self.maximumTotalBytes {
                return (owners, false, "its file lists hold more than \(Self.maximumTotalBytes >> 20) MiB: not all read")
            }
            let base = String(name.dropLast(5))
            let parts = base.split(separator: ":", maxSplits: 1).map(String.init)
            let owner = Owner(name: parts[0], architecture: parts.count > 1 ? parts[1] : nil)
            bytes.withUnsafeBytes { buffer in
                guard let base = buffer.baseAddress else { return }
                var start = 0
                while start < buffer.count {
                    let newline: UnsafeMutableRawPointer? = memchr(base + start, 0x0A, buffer.count - start)
                    let end: Int = newline.map { base.distance(to: UnsafeRawPointer($0)) } ?? buffer.count
                    if lengths.contains(end - start), let wanted = byLine[Array(buffer[start..<end])] {
                        for path in wanted where owners[path] == nil { owners[path] = owner }
                    }
                    start = end + 1
                }
            }
            if owners.count == Set(paths).count { return (owners, true, problem) }
        }
        return (owners, problem == nil, problem)
    }

    /// Each package's version and architecture from the status file: the stanza of its name
    /// (and its architecture, when the list file named one).
    func status(of wanted: Set<Owner>) -> ([Owner: PackageMetadata], String?) {
        let contents: BoundedFile.Contents?
        do {
            contents = try BoundedFile.read(
                root + "/status", limit: Self.maximumStatusBytes, longer: .refuse, owners: owners, whose: "root's")
        } catch {
            return ([:], "\(error)")
        }
        guard let bytes = contents?.bytes else { return ([:], "\(root)/status is missing") }
        let names = Set(wanted.map(\.name))
        var found: [Owner: PackageMetadata] = [:]
        var fields: [String: String] = [:]
        func finish() {
            defer { fields = [:] }
            guard let name = fields["Package"], names.contains(name) else { return }
            let architecture = fields["Architecture"]
            let metadata = PackageMetadata(
                name: name, version: fields["Version"], architecture: architecture, source: .dpkg)
            for owner in [Owner(name: name, architecture: architecture), Owner(name: name, architecture: nil)]
            where wanted.contains(owner) && found[owner] == nil {
                found[owner] = metadata
            }
        }
        for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            if line.isEmpty {
                finish()
                continue
            }
            // Only the few fields wanted; continuation lines (a leading space) are not.
            guard line.first != UInt8(ascii: " "), let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let key = String(decoding: line[line.startIndex..<colon], as: UTF8.self)
            guard key == "Package" || key == "Version" || key == "Architecture" else { continue }
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmed
            fields[key] = PackageNote.clean(value)
        }
        finish()
        return (found, nil)
    }
}
