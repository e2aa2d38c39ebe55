// End-to-end: the host level as the machine's only core handler, under what would make it lose a
// crash or hold a dying process: a storm of distinct programs, one user's huge dumps beside
// another user's crash, a stopped or killed sidecar, a crash loop under many names, the reports
// directory removed under it. Real sidecars, the real kernel, throwaway users; core_pattern is
// saved and put back by each test (HostLevelTestCase).

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class HostLevelReliabilityTests: HostLevelTestCase {
    /// `count` copies of the host fixture, each linked with a build-id of its own: distinct
    /// programs, as far as the rate limit (and anyone) can tell.
    func distinctPrograms(_ directory: String, count: Int) throws -> [String] {
        let object = directory + "/host.o"
        _ = try TestSupport.compile(
            [TestSupport.fixture("host/host.c")], output: object, flags: ["-O2", "-g", "-pthread", "-c"])
        return try (0..<count).map { index in
            let output = directory + "/distinct-\(index)"
            let linked = try TestSupport.run([
                "cc", "-pthread", object, "-o", output, "-Wl,--build-id=0x" + String(format: "%040x", index + 1),
            ])
            guard linked.status == .exited(0) else { throw TestFailure("link \(output): \(linked.stderr)") }
            return output
        }
    }

    /// Starts `program` with `arguments` (as `user`, when given) without waiting for it.
    func start(_ program: String, _ arguments: [String], as user: String? = nil) throws -> Process {
        let process = Process()
        if let user {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", user, "--", program] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = arguments
        }
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// 64 distinct programs crash at once: every one is reported in full (its own frames), none
    /// only counted, and every process ends.
    func testSixtyFourDistinctProgramsCrashingAtOnceAreAllReported() throws {
        let directory = fresh("storm64")
        let programs = try distinctPrograms(directory, count: 64)
        let sidecar = try hostSidecar(directory)
        let crashers = try programs.map { try start($0, ["segv"]) }
        try Self.waitForExit(crashers)
        XCTAssertTrue(crashers.allSatisfy { $0.terminationReason == .uncaughtSignal && $0.terminationStatus == SIGSEGV })
        let events = try sidecar.waitForReports(64, uid: 0, timeout: 300)
        let mine = events.filter { ($0.process?.executable ?? "").hasPrefix(directory + "/distinct-") }
        XCTAssertEqual(Set(mine.compactMap(\.process?.executable)).count, 64, sidecar.log)
        for event in mine {
            XCTAssertTrue(
                containsInOrder(crashedFrames(event), ["crash_here", "call_crash", "main"]),
                "\(event.process?.executable ?? "?"): \(crashedFrames(event))")
        }
        XCTAssertFalse(sidecar.log.contains("counted, not reported"), sidecar.log)
        XCTAssertFalse(sidecar.log.contains("let go unread"), sidecar.log)
        XCTAssertEqual(sidecar.stop(), 0)
        XCTAssertEqual(Self.read(Self.patternFile), savedPattern)
    }

    /// One user's four crashes of processes with a 256 GiB mapping (each streams 256 GiB, mostly
    /// zeros, far past the deadline) and another user's crash at the same moment: the other user's
    /// crash is reported while the first user's four are still being read, and those four end
    /// by their deadline, reported with what was read.
    func testOneUsersHugeDumpsDoNotDelayAnotherUsersCrash() throws {
        let slow = try SidecarTests.ThrowawayUser()
        defer { slow.remove() }
        let other = try SidecarTests.ThrowawayUser()
        defer { other.remove() }
        let directory = fresh("fair")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory)
        let pids = directory + "/pids"
        try FileManager.default.createDirectory(atPath: pids, withIntermediateDirectories: true)
        chmod(pids, 0o1777)
        var huge: [Process] = []
        for index in 0..<4 {
            let pidFile = pids + "/huge-\(index)"
            huge.append(try start(program, ["sparse", "256", pidFile], as: slow.name))
            try waitUntil("huge process \(index) is dumping", timeout: 60) {
                guard let pid = Int32(Self.read(pidFile)) else { return false }
                return Self.read("/proc/\(pid)/status").contains("CoreDumping:\t1")
            }
        }
        let crashed = try TestSupport.run(["/usr/sbin/runuser", "-u", other.name, "--", program, "segv"])
        XCTAssertEqual(crashed.status, .exited(128 + SIGSEGV), "runuser says how its child ended")
        let event = try XCTUnwrap(sidecar.waitForReports(1, uid: other.uid, timeout: 60).first)
        XCTAssertTrue(containsInOrder(crashedFrames(event), ["crash_here", "call_crash", "main"]))
        XCTAssertTrue(
            huge.allSatisfy(\.isRunning), "the other user's crash was reported while the four huge dumps were still read")
        try Self.waitForExit(huge)
        let slowReports = try sidecar.waitForReports(4, uid: slow.uid, timeout: 120)
        for report in slowReports {
            XCTAssertTrue(
                (report.notes ?? []).contains { $0.contains("not read whole by its deadline") }, "\(report.notes ?? [])")
            XCTAssertEqual(report.signal?.number, SIGSEGV, "the registers and signal come first in the stream")
        }
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// One user's flood of 300 processes crashing at the same moment (past its queue, let go at
    /// once) and another user's crash beside it: every one of the flood ends, and the other
    /// user's crash is reported.
    func testOneUsersFloodOfCrashesHoldsNothingOfAnothers() throws {
        let flooder = try SidecarTests.ThrowawayUser()
        defer { flooder.remove() }
        let other = try SidecarTests.ThrowawayUser()
        defer { other.remove() }
        let directory = fresh("flood")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory)
        let flood = try start(program, ["flood", "300"], as: flooder.name)
        let crashed = try TestSupport.run(["/usr/sbin/runuser", "-u", other.name, "--", program, "segv"])
        XCTAssertEqual(crashed.status, .exited(128 + SIGSEGV))
        XCTAssertTrue(
            containsInOrder(
                crashedFrames(try XCTUnwrap(sidecar.waitForReports(1, uid: other.uid).first)), ["crash_here", "main"]))
        try Self.waitForExit([flood])
        XCTAssertEqual(flood.terminationStatus, 0, "every child of the flood ended")
        XCTAssertTrue(sidecar.isRunning)
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// A stopped sidecar (SIGSTOP: a debugger or a deadlock would do the same) holds no dying
    /// process: two crashes end while it is still stopped, let go by the guard; after SIGCONT the
    /// host level serves again. Then SIGKILL: crashes end at once, the guard goes with it, and
    /// the next start puts the pattern back as it was.
    func testStoppedOrKilledSidecarHoldsNoDyingProcess() throws {
        let directory = fresh("stopped")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory)
        let guardians = Self.guardians(of: sidecar.pid)
        XCTAssertEqual(guardians.count, 1, "one guard process")
        kill(sidecar.pid, SIGSTOP)
        defer { kill(sidecar.pid, SIGCONT) }
        let crashers = try [start(program, ["segv"]), start(program, ["threads", "2"])]
        try Self.waitForExit(crashers)
        XCTAssertTrue(Self.read("/proc/\(sidecar.pid)/stat").contains(") T "), "both ended while the sidecar was stopped")
        XCTAssertTrue(crashers.allSatisfy { $0.terminationReason == .uncaughtSignal && $0.terminationStatus == SIGSEGV })
        kill(sidecar.pid, SIGCONT)
        try waitUntil("the guard's word is logged; log:\n\(sidecar.log)", timeout: 30) {
            sidecar.log.components(separatedBy: "the sidecar did not take it").count - 1 >= 2
        }
        XCTAssertEqual(try TestSupport.run([program, "segv"]).status, .signaled(SIGSEGV))
        let event = try XCTUnwrap(sidecar.waitForReports(1, uid: 0).first)
        XCTAssertTrue(containsInOrder(crashedFrames(event), ["crash_here", "call_crash", "main"]))

        XCTAssertEqual(sidecar.stop(SIGKILL), 128 + SIGKILL)
        try waitUntil("the guard ends with the sidecar", timeout: 30) { !Self.isAlive(guardians[0]) }
        // Nobody listens on the coredump socket: the kernel's connection is refused, and the
        // next crash ends at once, held by nothing.
        let socket = String(Self.read(Self.patternFile).drop { $0 == "@" })
        XCTAssertEqual(Self.connectError(socket), ECONNREFUSED, socket)
        XCTAssertEqual(try TestSupport.run([program, "segv"]).status, .signaled(SIGSEGV))
        let next = try hostSidecar(directory)
        XCTAssertEqual(next.stop(), 0)
        XCTAssertEqual(Self.read(Self.patternFile), savedPattern)
    }

    /// The guard killed (by root: nobody else may): the sidecar accepts the kernel's
    /// connections itself meanwhile, so the next crash is reported, and starts another guard.
    func testAKilledGuardIsReplaced() throws {
        let directory = fresh("guard")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory)
        let first = try XCTUnwrap(Self.guardians(of: sidecar.pid).first)
        kill(first, SIGKILL)
        try waitUntil("the sidecar sees the guard gone; log:\n\(sidecar.log)", timeout: 30) {
            sidecar.log.contains("the guard has gone")
        }
        XCTAssertEqual(try TestSupport.run([program, "segv"]).status, .signaled(SIGSEGV))
        _ = try sidecar.waitForReports(1, uid: 0)
        try waitUntil("another guard starts; log:\n\(sidecar.log)", timeout: 60) {
            Self.guardians(of: sidecar.pid).contains { $0 != first }
        }
        XCTAssertEqual(try TestSupport.run([program, "threads", "1"]).status, .signaled(SIGSEGV))
        _ = try sidecar.waitForReports(2, uid: 0)
        XCTAssertEqual(sidecar.stop(), 0)
        XCTAssertTrue(Self.guardians(of: sidecar.pid).isEmpty, "the guard ends with the sidecar")
    }

    /// Pipe mode with the sidecar stopped: the kernel's helper holds the process only until it
    /// sees the sidecar does not take the core, then reports the core itself.
    func testPipeHelperReportsWhatAStoppedSidecarDoesNotTake() throws {
        let directory = fresh("pipestop")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory, mode: "pipe")
        kill(sidecar.pid, SIGSTOP)
        defer { kill(sidecar.pid, SIGCONT) }
        XCTAssertEqual(try TestSupport.run([program, "segv"], timeout: 60).status, .signaled(SIGSEGV))
        XCTAssertTrue(Self.read("/proc/\(sidecar.pid)/stat").contains(") T "), "it ended while the sidecar was stopped")
        let event = try XCTUnwrap(sidecar.waitForReports(1, uid: 0).first)
        XCTAssertEqual(event.source, "host")
        XCTAssertTrue(containsInOrder(crashedFrames(event), ["crash_here", "call_crash", "main"]))
        kill(sidecar.pid, SIGCONT)
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// Ten copies of one program under other names, each crashing three times: one program to
    /// the rate limit (its build-id), so five full reports and 25 counted; `list --group` and
    /// `stats` show the counted crashes with the bug they repeat.
    func testCopiesUnderOtherNamesShareOneRateLimitAndCountedCrashesShow() throws {
        let directory = fresh("copies")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory)
        let copies = try (0..<10).map { index -> String in
            let copy = directory + "/copy-\(index)"
            try FileManager.default.copyItem(atPath: program, toPath: copy)
            return copy
        }
        for round in 0..<3 {
            for copy in copies { XCTAssertEqual(try TestSupport.run([copy, "segv"]).status, .signaled(SIGSEGV), "\(round)") }
        }
        _ = try sidecar.waitForReports(5, uid: 0)
        try waitUntil("25 crashes are counted; log:\n\(sidecar.log)", timeout: 60) {
            sidecar.log.components(separatedBy: "counted, not reported").count - 1 >= 25
        }
        XCTAssertEqual(sidecar.reportIDs(uid: 0).count, 5, sidecar.log)
        let reports = sidecar.reportsDirectory(uid: 0)
        try waitUntil("the counted crashes are in the run history", timeout: 30) {
            sidecar.sessions().filter { $0["counted_with"] != nil }.count >= 25
        }
        // The copies are five bugs by name (a signature names the culprit's module); the counted
        // crashes repeat the last full report.
        let groups = try TestSupport.run([TestSupport.crashport, "list", "--group", "--reports", reports])
        XCTAssertEqual(groups.stdout.components(separatedBy: "(+25 counted)").count - 1, 1, groups.stdout)
        let stats = try TestSupport.run([TestSupport.crashport, "stats", "--reports", reports])
        let counted = stats.stdout.split(separator: "\n").filter { $0.hasPrefix("only counted") }
        XCTAssertEqual(
            counted.map { $0.split(separator: ":")[1].split(separator: " ")[0] }.reduce(0) { $0 + Int($1)! }, 25, stats.stdout)
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// The reports directory removed while the host level runs (an administrator clearing space):
    /// the next crash is reported all the same, into a directory made again.
    func testRemovedReportsDirectoryIsMadeAgain() throws {
        let directory = fresh("removed")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory)
        XCTAssertEqual(try TestSupport.run([program, "segv"]).status, .signaled(SIGSEGV))
        _ = try sidecar.waitForReports(1, uid: 0)
        // The run history is written after the report appears: a removal that meets its
        // temporary file as it is renamed away is tried again.
        try waitUntil("the reports directory is removed", timeout: 30) {
            (try? FileManager.default.removeItem(atPath: sidecar.reports)) != nil
                || !FileManager.default.fileExists(atPath: sidecar.reports)
        }
        XCTAssertEqual(try TestSupport.run([program, "threads", "1"]).status, .signaled(SIGSEGV))
        let event = try XCTUnwrap(sidecar.waitForReports(1, uid: 0).first, sidecar.log)
        XCTAssertTrue(containsInOrder(crashedFrames(event), ["crash_here", "call_crash", "main"]))
        XCTAssertFalse(sidecar.log.contains("cannot create"), sidecar.log)
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// A report that cannot be written (the user's reports directory made immutable) is kept in
    /// the spool, and reported from there, as the host level's, once the directory takes it.
    func testAReportThatCannotBeWrittenIsSpooled() throws {
        let directory = fresh("spooled")
        let program = try hostProgram(directory)
        var sidecar = try hostSidecar(directory)
        XCTAssertEqual(try TestSupport.run([program, "segv"]).status, .signaled(SIGSEGV))
        _ = try sidecar.waitForReports(1, uid: 0)
        let mine = sidecar.reportsDirectory(uid: 0)
        guard try TestSupport.run(["chattr", "+i", mine]).status == .exited(0) else {
            throw XCTSkip("chattr +i does not work on \(mine)'s file system")
        }
        defer { _ = try? TestSupport.run(["chattr", "-i", mine]) }
        XCTAssertEqual(try TestSupport.run([program, "threads", "1"]).status, .signaled(SIGSEGV))
        try waitUntil("the report is kept in the spool; log:\n\(sidecar.log)", timeout: 60) {
            sidecar.log.contains("is kept in the spool")
        }
        XCTAssertEqual(try TestSupport.run(["chattr", "-i", mine]).status, .exited(0))
        XCTAssertEqual(sidecar.stop(), 0)
        // The next start takes the spool in.
        sidecar = try hostSidecar(directory)
        let events = try sidecar.waitForReports(2, uid: 0)
        let spooled = try XCTUnwrap(events.first { $0.capturedFrom == "spool" }, sidecar.log)
        XCTAssertEqual(spooled.source, "host")
        XCTAssertTrue(containsInOrder(crashedFrames(spooled), ["crash_here", "call_crash", "main"]), "\(crashedFrames(spooled))")
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// Waits for every process to end; one still held after `timeout` (a dying process the host
    /// level failed to let go) is killed and the test fails, rather than waiting for ever.
    static func waitForExit(_ processes: [Process], timeout: TimeInterval = 120) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while processes.contains(where: \.isRunning) && Date() < deadline { usleep(20_000) }
        let held = processes.filter(\.isRunning)
        for process in held { kill(process.processIdentifier, SIGKILL) }
        for process in processes { process.waitUntilExit() }
        if !held.isEmpty { throw TestFailure("\(held.count) process(es) still held after \(Int(timeout)) s") }
    }

    /// The guard processes whose parent is `pid`.
    static func guardians(of pid: pid_t) -> [pid_t] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }.filter { child in
            let stat = read("/proc/\(child)/stat")
            guard let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == pid && read("/proc/\(child)/comm") == "crashport-guard"
        }
    }

    /// The errno of connecting to the stream socket at `path` (0: it connected).
    static func connectError(_ path: String) -> Int32 {
        switch UnixSockets.open(path, type: Int32(SOCK_STREAM.rawValue)) {
        case .success(let fd):
            close(fd)
            return 0
        case .failure(let error): return error.code
        }
    }

    static func isAlive(_ pid: pid_t) -> Bool {
        let stat = read("/proc/\(pid)/stat")
        return !stat.isEmpty && !stat.contains(") Z ")
    }
}
