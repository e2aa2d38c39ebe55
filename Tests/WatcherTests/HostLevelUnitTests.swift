// The host level's parts that need no kernel: the mode a kernel release gets, the pattern's
// install and restore against a stand-in core_pattern file (never the machine's), the rate
// limit's window and count, the pipe helper's handoff message, and the unit or container a
// cgroup path names. HostLevelTests (end to end) runs them against the real kernel.

import BoundedBytes
import Foundation
import LiveProcess
import ReportModel
import Store
import Synchronization
import TestSupport
import XCTest

@testable import Watcher

final class HostLevelUnitTests: XCTestCase {
    func temporary() -> String {
        let path = TestSupport.temporaryDirectory("host-unit") + "/" + UUID().uuidString.prefix(8)
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A core stream that ends before any thread's registers (a process killed as its dump
    /// began: the kernel writes nothing), or one that stops inside the notes, is not reported,
    /// and does not stop the sidecar (it trapped on the missing crashed thread before).
    func testAStreamWithNoRegistersIsNotReportedAndHarmsNothing() throws {
        let directory = temporary()
        let writer = ReportWriter(options: CaptureOptions(), log: { _ in }, announcement: .logLine, keepsReports: false)
        let said = Mutex<[String]>([])
        let dumps = HostDumps(
            paths: HostPaths(directory: directory), writer: writer, cache: ELFCache(),
            storeFor: { _ in ReportStore(root: directory + "/reports") }, stubReported: { _, _ in false },
            say: { line, _ in said.withLock { $0.append(line) } })
        // Nothing at all; a header cut short; a whole core whose notes name no thread.
        let streams: [[UInt8]] = [[], Array(CoreBytes().bytes().prefix(40)), CoreBytes().bytes()]
        for bytes in streams {
            var ends: [Int32] = [-1, -1]
            XCTAssertEqual(pipe(&ends), 0)
            _ = bytes.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) }
            close(ends[1])
            let arrival = CoreArrival(
                channel: .pipe, stream: ends[0], pidfd: -1, pid: ProcessID(getpid()), uid: getuid(), gid: getgid(),
                rootOnly: false)
            XCTAssertNil(dumps.handle(arrival, deadline: monotonicNanoseconds() + 5_000_000_000))
        }
        let lines = said.withLock { $0 }
        XCTAssertEqual(lines.filter { $0.contains("ended before any thread's registers") }.count, 3, "\(lines)")
    }

    func testModeFollowsTheKernelRelease() {
        XCTAssertEqual(HostMode.best(kernelRelease: "6.18.44-fc-v657"), .socketRequest)
        XCTAssertEqual(HostMode.best(kernelRelease: "6.17.0"), .socketRequest)
        XCTAssertEqual(HostMode.best(kernelRelease: "6.16.3-arch1"), .socket)
        XCTAssertEqual(HostMode.best(kernelRelease: "6.1.0-28-amd64"), .pipe)
        XCTAssertEqual(HostMode.best(kernelRelease: "5.19.0"), .pipe)
        XCTAssertEqual(HostMode.best(kernelRelease: "7.0.1"), .socketRequest)
        XCTAssertEqual(HostMode.best(kernelRelease: "garbage"), .pipe)
        XCTAssertEqual(HostMode.best(kernelRelease: ""), .pipe)
    }

    /// A HostPattern over stand-in files for core_pattern and core_pipe_limit.
    func pattern(found: String, limit: String = "0") throws -> HostPattern {
        let directory = temporary()
        var paths = HostPaths(directory: directory)
        paths.corePattern = directory + "/core_pattern"
        paths.corePipeLimit = directory + "/core_pipe_limit"
        try Data((found + "\n").utf8).write(to: URL(fileURLWithPath: paths.corePattern))
        try Data((limit + "\n").utf8).write(to: URL(fileURLWithPath: paths.corePipeLimit))
        return HostPattern(paths: paths)
    }

    func testInstallRecordsWhatItFoundAndRestorePutsItBack() throws {
        try XCTSkipUnless(geteuid() == 0, "install refuses anyone but root")
        let found = "|/lib/systemd/systemd-coredump %P %u %g %s %t %c %h"
        let host = try pattern(found: found)
        let installed = try host.install(mode: .pipe, executable: "/usr/bin/crashport", handOn: false) { _ in }
        XCTAssertEqual(installed.replaced, found)
        XCTAssertEqual(try host.current(), installed.pattern)
        XCTAssertTrue(installed.pattern.hasPrefix("|/usr/bin/crashport core-handler \(host.paths.directory) %P %u %g %d"))
        XCTAssertTrue(host.isOurs(installed.pattern))
        XCTAssertEqual(host.recorded(), installed)
        XCTAssertNotEqual(host.pipeLimit(), 0, "the kernel keeps /proc for the helper only with a limit")
        XCTAssertTrue(host.restore(installed).contains("put back"))
        XCTAssertEqual(try host.current(), found)
        XCTAssertEqual(host.pipeLimit(), 0)
        XCTAssertNil(host.recorded())
    }

    /// A record that is not a regular file (a FIFO in a directory a command was pointed at) reads
    /// as none at once: `host status`, `host restore` and `doctor` never wait on it.
    func testARecordThatIsAFIFOReadsAsNone() throws {
        let host = try pattern(found: "core")
        XCTAssertEqual(mkfifo(host.paths.state, 0o600), 0)
        let done = DispatchSemaphore(value: 0)
        let read = Mutex<HostInstallation??>(nil)
        Thread.detachNewThread {
            let record = host.recorded()
            read.withLock { $0 = .some(record) }
            done.signal()
        }
        if done.wait(timeout: .now() + 10) == .timedOut {
            // Waiting on the FIFO: a writer's open lets it go on (and end) before the test fails.
            let writer = open(host.paths.state, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
            XCTFail("the record's read waited on a FIFO")
            return
        }
        XCTAssertEqual(read.withLock { $0 }, .some(nil))
        XCTAssertTrue(host.status().text.contains("not installed"), host.status().text)
    }

    /// Only root's own record counts (a root `host restore` puts its pattern into core_pattern):
    /// one of another user's, or one others may write, reads as none.
    func testARecordThatIsNotRootsOwnReadsAsNone() throws {
        try XCTSkipUnless(geteuid() == 0, "only root can give a file to another user")
        let host = try pattern(found: "core")
        let installation = HostInstallation(
            mode: .pipe, pattern: "|/usr/bin/crashport core-handler \(host.paths.directory) %P", replaced: "|/tmp/x",
            since: "2026-11-27T00:00:00Z", pid: 1, handOn: false, reports: "/tmp")
        try host.record(installation)
        XCTAssertEqual(host.recorded(), installation)
        XCTAssertEqual(chmod(host.paths.state, 0o666), 0)
        XCTAssertNil(host.recorded(), "others may write it")
        XCTAssertEqual(chmod(host.paths.state, 0o644), 0)
        XCTAssertEqual(chown(host.paths.state, 65534, 65534), 0)
        XCTAssertNil(host.recorded(), "another user's")
    }

    /// The host level's directory must be root's alone, and so must every directory above it
    /// (or be sticky, as /tmp): no other user can rename it away and put their own in its place.
    func testAHostDirectoryMustBeRootsAlone() throws {
        try XCTSkipUnless(geteuid() == 0, "only root can give a directory to another user")
        let base = temporary()
        XCTAssertEqual(chmod(base, 0o755), 0)
        XCTAssertTrue(SidecarHostLevel.isRootsAlone(base))
        XCTAssertFalse(SidecarHostLevel.isRootsAlone("/tmp"), "others may write to it (above one, its sticky bit will do)")
        XCTAssertFalse(SidecarHostLevel.isRootsAlone("relative/host"))
        XCTAssertEqual(chmod(base, 0o775), 0)
        XCTAssertFalse(SidecarHostLevel.isRootsAlone(base), "its group may write to it")
        XCTAssertEqual(chmod(base, 0o755), 0)
        let users = base + "/users", host = base + "/users/host"
        XCTAssertEqual(mkdir(users, 0o755), 0)
        XCTAssertEqual(mkdir(host, 0o755), 0)
        XCTAssertTrue(SidecarHostLevel.isRootsAlone(host))
        XCTAssertEqual(chown(users, 65534, 65534), 0)
        XCTAssertFalse(SidecarHostLevel.isRootsAlone(host), "under a directory another user owns")
        XCTAssertEqual(symlink(base, base + "/link"), 0)
        XCTAssertFalse(SidecarHostLevel.isRootsAlone(base + "/link"), "a link")
    }

    /// CRASHPORT_HOST_DIRECTORY names the machine's host directory only as an absolute path.
    func testTheSystemDirectoryFromTheEnvironment() {
        XCTAssertEqual(HostPaths.systemDirectory(environment: [:]), "/run/crashport")
        XCTAssertEqual(HostPaths.systemDirectory(environment: ["CRASHPORT_HOST_DIRECTORY": "/srv/host"]), "/srv/host")
        XCTAssertEqual(HostPaths.systemDirectory(environment: ["CRASHPORT_HOST_DIRECTORY": "relative"]), "/run/crashport")
        XCTAssertEqual(HostPaths.systemDirectory(environment: ["CRASHPORT_HOST_DIRECTORY": ""]), "/run/crashport")
    }

    func testAStalePatternIsReplacedByWhatItHadReplaced() throws {
        try XCTSkipUnless(geteuid() == 0, "install refuses anyone but root")
        let host = try pattern(found: "core.%p")
        var first = try host.install(mode: .socketRequest, executable: "/x/crashport", handOn: false) { _ in }
        // A sidecar that died: its record names a pid that is no crashport.
        first.pid = 999_999_999
        try host.record(first)
        var said: [String] = []
        let second = try host.install(mode: .socketRequest, executable: "/x/crashport", handOn: false) { said.append($0) }
        XCTAssertEqual(second.replaced, "core.%p", "not its own stale pattern")
        XCTAssertTrue(said.joined().contains("found its own pattern left by pid 999999999"), "\(said)")
        host.restore(second)
        XCTAssertEqual(try host.current(), "core.%p")
    }

    func testAPatternSetByAnotherToolIsNeverOverwrittenBack() throws {
        try XCTSkipUnless(geteuid() == 0, "install refuses anyone but root")
        let host = try pattern(found: "core")
        let installed = try host.install(mode: .socket, executable: "/x/crashport", handOn: false) { _ in }
        try Data("|/usr/share/apport/apport -p%p\n".utf8).write(to: URL(fileURLWithPath: host.paths.corePattern))
        XCTAssertEqual(host.replacedSince(installed), "|/usr/share/apport/apport -p%p")
        XCTAssertFalse(host.status().installed)
        XCTAssertTrue(host.restore(installed).contains("left as it is"))
        XCTAssertEqual(try host.current(), "|/usr/share/apport/apport -p%p")
    }

    func testAPatternTheKernelWouldCutIsRefused() throws {
        let host = HostPattern(paths: HostPaths(directory: "/" + String(repeating: "d", count: 120)))
        XCTAssertThrowsError(try host.pattern(for: .socketRequest, executable: "/usr/bin/crashport"))
    }

    func testRateLimitReportsFiveThenCountsAndSaysHowMany() {
        let limiter = HostRateLimit(directory: temporary() + "/rate")
        let start = 1_800_000_000
        for second in 0..<5 {
            XCTAssertEqual(
                limiter.admit(program: "build-id:ab", uid: 7, id: "r\(second)", now: start + second), .report(counted: 0))
        }
        // Past the limit: counted, with the last full report, which the counted crash repeats.
        for second in 5..<30 {
            XCTAssertEqual(
                limiter.admit(program: "build-id:ab", uid: 7, id: "x\(second)", now: start + second),
                .count(total: 5, last: "r4"))
        }
        // Another program, or another user's, has a window of its own.
        XCTAssertEqual(limiter.admit(program: "build-id:cd", uid: 7, now: start + 30), .report(counted: 0))
        XCTAssertEqual(limiter.admit(program: "build-id:ab", uid: 8, now: start + 30), .report(counted: 0))
        // Once the window has moved past the first reports, the next one says how many were counted.
        XCTAssertEqual(
            limiter.admit(program: "build-id:ab", uid: 7, id: "r5", now: start + HostLevelLimits.windowSeconds),
            .report(counted: 25))
        XCTAssertEqual(
            limiter.admit(program: "build-id:ab", uid: 7, now: start + HostLevelLimits.windowSeconds + 1), .report(counted: 0))
    }

    func testRateRecordThatIsNotOneReadsAsEmpty() {
        XCTAssertEqual(HostRateLimit.parse(Array("garbage".utf8)), HostRateLimit.State())
        XCTAssertEqual(HostRateLimit.parse(Array("-4\n1 2\n".utf8)), HostRateLimit.State())
        XCTAssertEqual(HostRateLimit.parse(Array("3\n1 2 x 4\n".utf8)), HostRateLimit.State(counted: 3, times: [1, 2, 4]))
        XCTAssertEqual(
            HostRateLimit.parse(Array("3\n1 2\nabc\n".utf8)), HostRateLimit.State(counted: 3, times: [1, 2], last: "abc"))
        XCTAssertEqual(
            HostRateLimit.parse(Array("0\n1\n\(String(repeating: "z", count: 200))\n".utf8)),
            HostRateLimit.State(counted: 0, times: [1]), "an id longer than any report's is no id")
        XCTAssertEqual(HostRateLimit.parse([]), HostRateLimit.State())
    }

    func testHandoffMessageRoundTripsAndRefusesOthers() {
        let handoff = CoreHandoff(pid: 4242, uid: 1000, gid: 1000, dumpMode: 1)
        XCTAssertEqual(CoreHandoff.parse(handoff.encoded), handoff)
        XCTAssertNil(CoreHandoff.parse(Array("CPHOST1 0 1 1 1".utf8)), "no pid 0")
        XCTAssertNil(CoreHandoff.parse(Array("CPHOST1 -5 1 1 1".utf8)))
        XCTAssertNil(CoreHandoff.parse(Array("CPHOST2 5 1 1 1".utf8)))
        XCTAssertNil(CoreHandoff.parse(Array("CPHOST1 5 1 1".utf8)))
        XCTAssertNil(CoreHandoff.parse([0xFF, 0xFE]))
        XCTAssertTrue(handoff.arrival(stream: -1, pidfd: -1).rootOnly == false)
        XCTAssertTrue(CoreHandoff(pid: 1, uid: 0, gid: 0, dumpMode: 2).arrival(stream: -1, pidfd: -1).rootOnly)
    }
}
