// HostRateLimit: at most HostLevelLimits.reportsPerWindow full host-level reports per program
// and user in HostLevelLimits.windowSeconds; past that a crash is only counted, and the next full
// report says how many were. The program is its build-id, read from the dying process's own image
// (HostProgram): copies of one binary under other names are one program; a binary without a
// build-id is its path. A crash loop (a service restarted by systemd every 100 ms) costs a
// few reports and a counter, not a disk of them: systemd-coredump has no such limit
// (systemd#17672).
//
// One small file per program and user under the host directory's `rate/` (root's, 0700), locked
// with flock while it is read and rewritten, so the sidecar and a pipe helper that reports on
// its own (no sidecar answered) count the same crashes. It keeps the id of the program's last
// full report too: a counted crash repeats it (in the run history, for `list --group` and `stats`).

import BoundedBytes
import FoundationEssentials
import LiveProcess
import ObjectFile
import ReportModel
import Store
#if canImport(Glibc)
import Glibc
#endif

public struct HostRateLimit: Sendable {
    public var directory: String
    public var perWindow = HostLevelLimits.reportsPerWindow
    public var windowSeconds = HostLevelLimits.windowSeconds

    public init(directory: String) { self.directory = directory }

    public enum Decision: Equatable, Sendable {
        /// Write a full report; `counted` crashes since the last one were only counted.
        case report(counted: Int)
        /// Count it only: this many full reports are in the window already; `last` is the newest.
        case count(total: Int, last: String?)
    }

    /// What the record says of one more crash of `program` by `uid` at `now` (Unix seconds),
    /// and the record updated; a full report is to be written as `id`. A record that cannot be
    /// kept lets the report through.
    public func admit(program: String, uid: UInt32, id: String = "", now: Int = Int(time(nil))) -> Decision {
        guard ReportStore.makeDirectories(directory, mode: 0o700) == nil else { return .report(counted: 0) }
        let path = directory + "/" + Self.fileName(program: program, uid: uid)
        // Root's directory; still opened as every file crashport keeps: no link followed, no
        // FIFO waited on, a regular file or none.
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return .report(counted: 0) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return .report(counted: 0) }
        guard flock(fd, LOCK_EX) == 0 else { return .report(counted: 0) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = pread(fd, &buffer, buffer.count, 0)
        var state = Self.parse(Array(buffer.prefix(max(0, count))))
        state.times = state.times.filter { now - $0 < windowSeconds && $0 <= now }
        let decision: Decision
        if state.times.count >= perWindow {
            state.counted += 1
            decision = .count(total: state.times.count, last: state.last)
        } else {
            decision = .report(counted: state.counted)
            state.counted = 0
            state.times.append(now)
            state.last = id.isEmpty ? nil : id
        }
        let text = "\(state.counted)\n" + state.times.map(String.init).joined(separator: " ") + "\n" + (state.last ?? "") + "\n"
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, text, text.utf8.count, 0)
        return decision
    }

    struct State: Equatable {
        var counted = 0
        var times: [Int] = []
        /// The id of the program's last full report.
        var last: String?
    }

    /// Line 1: crashes counted since the last report; line 2: the times of the reports in the
    /// window; line 3: the last report's id. Anything else reads as an empty record (the file is
    /// root's, but a torn write must not wedge the limit).
    static func parse(_ bytes: [UInt8]) -> State {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count >= 2, let counted = Int(lines[0]), counted >= 0 else { return State() }
        let times = lines[1].split(separator: " ").prefix(64).compactMap { Int($0) }
        let last = lines.count > 2 && !lines[2].isEmpty && lines[2].count <= 128 ? String(lines[2]) : nil
        return State(counted: counted, times: times, last: last)
    }

    /// The program's file: its uid and a hash of its path (paths are long and hold slashes).
    static func fileName(program: String, uid: UInt32) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in program.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return "\(uid)-" + String(hash, radix: 16)
    }
}

/// Which program a dying process is, for the rate limit: the build-id of its main executable's
/// image, read from the process's own memory as its user may read it (no file opened), else
/// the executable's path.
enum HostProgram {
    static func key(of access: ProcessAccess, executable: String) -> String {
        if let buildID = buildID(of: access, executable: executable) { return "build-id:\(buildID)" }
        return "path:" + executable
    }

    static func buildID(of access: ProcessAccess, executable: String) -> BuildID? {
        guard executable.hasPrefix("/"), let maps = access.read("maps", limit: 1 << 20),
            let image = MemoryMapping.parse(String(decoding: maps, as: UTF8.self)).first(where: {
                $0.offset == 0 && undeleted($0.path) == undeleted(executable)
            }),
            case .success(let memory) = access.openMemory()
        else { return nil }
        return ELFFile.buildID(ofImageAt: image.start, in: memory)
    }

    /// A path as the maps and /proc/PID/exe give it, without " (deleted)".
    static func undeleted(_ path: String) -> String {
        path.hasSuffix(" (deleted)") ? String(path.dropLast(10)) : path
    }
}
