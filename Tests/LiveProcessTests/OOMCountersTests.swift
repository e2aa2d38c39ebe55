// OOMCounters' parsers on the files of real machines (a cgroup v1/v2 hybrid, a v2-only host, a
// container's bind mount), hostile lines among them, and the counter of this test process's own
// cgroup when the machine has one.

import LiveProcess
import ReportModel
import XCTest

final class OOMCountersTests: XCTestCase {
    func testCgroupMemberships() {
        let hybrid = """
            9:name=systemd:/
            4:memory:/process_api/f8b4
            2:cpuacct,cpu:/
            0::/
            """
        XCTAssertEqual(OOMCounters.parseCgroups(hybrid).memoryV1, "/process_api/f8b4")
        XCTAssertEqual(OOMCounters.parseCgroups(hybrid).unified, "/")
        let unified = "0::/system.slice/app.service\n"
        XCTAssertNil(OOMCounters.parseCgroups(unified).memoryV1)
        XCTAssertEqual(OOMCounters.parseCgroups(unified).unified, "/system.slice/app.service")
        let hostile = "garbage\n7:memory:relative\n::\n0::/a:b\n"
        XCTAssertNil(OOMCounters.parseCgroups(hostile).memoryV1, "a path must be absolute")
        XCTAssertEqual(OOMCounters.parseCgroups(hostile).unified, "/a:b", "a path may hold colons")
    }

    func testMounts() throws {
        let mountinfo = """
            31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
            35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
            41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
            50 23 0:32 /docker/abc /mnt/with\\040space rw - cgroup cgroup rw,memory
            short line
            """
        let mounts = OOMCounters.parseMounts(mountinfo)
        XCTAssertEqual(mounts.count, 3)
        let memory = try XCTUnwrap(mounts.first { $0.isMemoryV1 })
        XCTAssertEqual(memory.mountPoint, "/sys/fs/cgroup/memory")
        XCTAssertEqual(memory.directory(for: "/process_api/f8b4"), "/sys/fs/cgroup/memory/process_api/f8b4")
        XCTAssertEqual(memory.directory(for: "/"), "/sys/fs/cgroup/memory")
        XCTAssertNil(memory.directory(for: "/a/../../etc"), "never leaves the mount")
        XCTAssertEqual(mounts.first { $0.isUnified }?.directory(for: "/user.slice"), "/sys/fs/cgroup/unified/user.slice")
        let bind = mounts[2]
        XCTAssertEqual(bind.mountPoint, "/mnt/with space")
        XCTAssertEqual(bind.directory(for: "/docker/abc/app"), "/mnt/with space/app")
        XCTAssertEqual(bind.directory(for: "/docker/abc"), "/mnt/with space")
        XCTAssertNil(bind.directory(for: "/docker/abcdef"), "another cgroup that shares a prefix")
        XCTAssertNil(bind.directory(for: "/other"), "not shown by this mount")
    }

    func testCounters() {
        XCTAssertEqual(OOMCounters.counter(named: "oom_kill", in: "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n"), 7)
        XCTAssertEqual(
            OOMCounters.counter(named: "oom_kill", in: "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n"), 2)
        XCTAssertNil(OOMCounters.counter(named: "oom_kill", in: "oom_kill x\noom_kill_disable 0"))
        XCTAssertNil(OOMCounters.counter(named: "oom_kill", in: ""))
    }

    /// On a machine with a memory cgroup, this process's counter is found and readable.
    func testOwnCgroup() throws {
        guard let reading = OOMCounters.reading(of: ProcessID(getpid())) else {
            throw XCTSkip("no memory cgroup counter for this process here")
        }
        XCTAssertTrue(reading.file.hasSuffix("/memory.oom_control") || reading.file.hasSuffix("/memory.events"), reading.file)
        XCTAssertEqual(OOMCounters.kills(inFile: reading.file).map { $0 >= reading.kills }, true)
        XCTAssertNotNil(OOMCounters.systemWide())
    }
}
