// The memory cgroups the tests make (and remove): a 64 MiB one under the cgroup the test runs in,
// cgroup v2 or v1, with no swap.

import Foundation
import XCTest

/// The memory cgroup the test runs in (v1's memory controller, or v2's unified tree), for a
/// child cgroup of its own.
func memoryCgroup() throws -> (path: String, v2: Bool) {
    let lines = (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8))?.split(separator: "\n") ?? []
    if let line = lines.first(where: { $0.split(separator: ":")[1].split(separator: ",").contains("memory") }) {
        let relative = line.split(separator: ":", maxSplits: 2)[2]
        let path = "/sys/fs/cgroup/memory" + relative
        if FileManager.default.fileExists(atPath: path + "/memory.limit_in_bytes") { return (path, false) }
    }
    if let line = lines.first(where: { $0.hasPrefix("0::") }) {
        let path = "/sys/fs/cgroup" + line.dropFirst(3)
        if FileManager.default.fileExists(atPath: "/sys/fs/cgroup/cgroup.controllers") { return (path, true) }
    }
    throw XCTSkip("no memory cgroup (v1 or v2) is mounted here: the OOM test cannot make one")
}

/// A memory cgroup of 64 MiB (no swap) made here, under the one the test runs in; the
/// caller removes it. Skips, saying why, where none can be made.
func makeMemoryCgroup(_ name: String) throws -> String {
    let parent = try memoryCgroup()
    let cgroup = parent.path + "/crashport-\(name)-\(getpid())"
    do {
        try FileManager.default.createDirectory(atPath: cgroup, withIntermediateDirectories: false)
    } catch {
        throw XCTSkip("a memory cgroup cannot be made under \(parent.path) (\(error)): the test needs one")
    }
    if parent.v2 {
        try writeCgroupFile("64M", to: cgroup + "/memory.max")
        try? writeCgroupFile("0", to: cgroup + "/memory.swap.max")
    } else {
        try writeCgroupFile("67108864", to: cgroup + "/memory.limit_in_bytes")
        try? writeCgroupFile("67108864", to: cgroup + "/memory.memsw.limit_in_bytes")
    }
    return cgroup
}

func writeCgroupFile(_ text: String, to path: String) throws {
    try text.write(toFile: path, atomically: false, encoding: .utf8)
}
