// OOMCounters: how many processes the kernel's OOM killer has killed, for one process's memory
// cgroup (what tells an OOM kill from any other SIGKILL) and for the whole machine.
//
// Per cgroup: the v1 memory controller's memory.oom_control (its `oom_kill` line, Linux 4.13),
// else the v2 cgroup's memory.events (`oom_kill`, counting its descendants too). The process's
// cgroup comes from /proc/PID/cgroup (paths relative to the reader's cgroup namespace), the
// file's directory from /proc/self/mountinfo (where that hierarchy is mounted, and which of its
// paths the mount shows). Machine-wide: /proc/vmstat's oom_kill. Every file is read as hostile
// text: a line that does not parse is skipped, and a path with a ".." never leaves the mount.

import BoundedBytes
import Processes
import ReportModel
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

public enum OOMCounters {
    /// One counter read: the file it came from (which also names the cgroup) and its value.
    public struct Reading: Sendable, Equatable {
        public var file: String
        public var kills: UInt64

        public init(file: String, kills: UInt64) {
            self.file = file
            self.kills = kills
        }

        /// The cgroup's directory, for messages ("/sys/fs/cgroup/memory/app").
        public var cgroup: String {
            guard let slash = file.lastIndex(of: "/") else { return file }
            return String(file[..<slash])
        }
    }

    /// The OOM-kill counter of `pid`'s memory cgroup now; nil when the process is gone, its
    /// cgroup has no memory controller, or the hierarchy is not mounted here.
    public static func reading(of pid: ProcessID) -> Reading? {
        guard let file = counterFile(of: pid), let kills = kills(inFile: file) else { return nil }
        return Reading(file: file, kills: kills)
    }

    /// The counter in `file` now (memory.oom_control or memory.events), nil when unreadable.
    public static func kills(inFile file: String) -> UInt64? {
        guard let text = ProcFiles.readText(file) else { return nil }
        return counter(named: "oom_kill", in: text)
    }

    /// The kernel's count of OOM kills since boot, machine-wide (/proc/vmstat oom_kill).
    public static func systemWide() -> UInt64? {
        ProcFiles.readText("/proc/vmstat").flatMap { counter(named: "oom_kill", in: $0) }
    }

    /// The file holding `pid`'s cgroup's OOM-kill counter: the v1 memory controller's
    /// memory.oom_control when that hierarchy is mounted, else the v2 memory.events.
    public static func counterFile(of pid: ProcessID) -> String? {
        ProcFiles.readText("/proc/\(pid)/cgroup").flatMap(counterFile(cgroups:))
    }

    /// The same from a /proc/PID/cgroup text already read.
    public static func counterFile(cgroups: String) -> String? {
        let memberships = parseCgroups(cgroups)
        for attempt in 0..<2 {
            let mounts = attempt == 0 ? cachedMounts() : refreshedMounts()
            // A hierarchy may be mounted more than once (bind mounts in containers): the first
            // mount that shows the cgroup and has the file.
            if let v1 = memberships.memoryV1 {
                for mount in mounts where mount.isMemoryV1 {
                    guard let directory = mount.directory(for: v1) else { continue }
                    if access(directory + "/memory.oom_control", R_OK) == 0 { return directory + "/memory.oom_control" }
                }
            }
            if let v2 = memberships.unified {
                for mount in mounts where mount.isUnified {
                    guard let directory = mount.directory(for: v2) else { continue }
                    if access(directory + "/memory.events", R_OK) == 0 { return directory + "/memory.events" }
                }
            }
        }
        return nil
    }

    // MARK: - Parsing

    /// `name value` lines (memory.oom_control, memory.events, /proc/vmstat): the value of the
    /// first line named `name`.
    public static func counter(named name: String, in text: String) -> UInt64? {
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count == 2, fields[0] == name { return UInt64(fields[1]) }
        }
        return nil
    }

    /// The cgroups a /proc/PID/cgroup names: the v1 memory controller's path and the v2
    /// (unified) path, each relative to the reader's cgroup namespace.
    public static func parseCgroups(_ text: String) -> (memoryV1: String?, unified: String?) {
        let paths = cgroupPaths(text)
        return (paths.memoryV1, paths.unified)
    }

    /// Every path a /proc/PID/cgroup names: the v2 (unified) one, the v1 memory controller's,
    /// and the other v1 controllers', in the file's order.
    public static func cgroupPaths(_ text: String) -> (unified: String?, memoryV1: String?, others: [String]) {
        var memory: String?, unified: String?, others: [String] = []
        for line in text.split(separator: "\n") {
            // hierarchy-ID:controller-list:path (the path may itself hold colons).
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, parts[2].hasPrefix("/") else { continue }
            if parts[0] == "0" && parts[1].isEmpty {
                unified = String(parts[2])
            } else if parts[1].split(separator: ",").contains("memory") {
                memory = String(parts[2])
            } else {
                others.append(String(parts[2]))
            }
        }
        return (unified, memory, others)
    }

    /// A cgroup hierarchy mounted here (a line of /proc/self/mountinfo).
    public struct Mount: Sendable, Equatable {
        /// The cgroup path the mount shows at its mount point (its "root" field).
        public var root: String
        public var mountPoint: String
        public var isMemoryV1: Bool
        public var isUnified: Bool

        /// The directory of the cgroup at `path` (relative to the namespace's root), when this
        /// mount shows it.
        public func directory(for path: String) -> String? {
            guard !path.split(separator: "/").contains(".."), !root.split(separator: "/").contains("..") else {
                return nil
            }
            let base = root == "/" ? "" : root
            guard path == root || path.hasPrefix(base + "/") else { return nil }
            let rest = String(path.dropFirst(base.count))
            return rest == "/" || rest.isEmpty ? mountPoint : mountPoint + rest
        }
    }

    /// The cgroup mounts in /proc/self/mountinfo text: fields 4 (root) and 5 (mount point),
    /// then after the "-" separator the file system type and the super options (the v1
    /// controllers). Octal escapes (\040 for a space) are decoded.
    public static func parseMounts(_ text: String) -> [Mount] {
        var mounts: [Mount] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let separator = fields.firstIndex(of: "-"), separator >= 6, fields.count > separator + 3 else { continue }
            let type = fields[separator + 1]
            guard type == "cgroup" || type == "cgroup2" else { continue }
            let options = fields[separator + 3].split(separator: ",")
            mounts.append(
                Mount(
                    root: unescape(fields[3]), mountPoint: unescape(fields[4]),
                    isMemoryV1: type == "cgroup" && options.contains("memory"), isUnified: type == "cgroup2"))
        }
        return mounts
    }

    /// mountinfo's escapes: \ooo (three octal digits) for space, tab, newline and backslash.
    static func unescape(_ field: Substring) -> String {
        guard field.contains("\\") else { return String(field) }
        let utf8 = Array(field.utf8)
        var bytes: [UInt8] = []
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "\\"), index + 3 < utf8.count,
                let value = UInt8(String(decoding: utf8[(index + 1)...(index + 3)], as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The cgroup mounts, read once, and again (at most every 10 s) when a lookup finds
    /// nothing: mounts change rarely, and the sidecar looks one up at every client's HELLO.
    static let mounts = Mutex<(mounts: [Mount], read: UInt64)?>(nil)

    static func cachedMounts() -> [Mount] {
        if let known = mounts.withLock({ $0 }) { return known.mounts }
        return refreshedMounts()
    }

    static func refreshedMounts() -> [Mount] {
        let now = monotonicNanoseconds()
        if let known = mounts.withLock({ $0 }), now &- known.read < 10_000_000_000 { return known.mounts }
        let read = ProcFiles.readText("/proc/self/mountinfo").map(parseMounts) ?? []
        mounts.withLock { $0 = (read, now) }
        return read
    }
}
