// End-to-end: the deaths no signal handler sees and hangs (issue 15), under the real watcher:
// `crashport run --trace-exit` with a program SIGKILLed from outside and one OOM-killed in a
// memory cgroup made here; everything else the program does (its own signals, SIGSTOP and
// SIGCONT, fork and exec, exit codes) unchanged while traced; `--hang-ms` with a deadlock (and
// `--hang-kill`) and with a stall the program recovers from. ptrace works on these machines
// (no Yama); where it does not, the tracing tests would say so in crashport's own message.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class TraceExitTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("trace-exit")
    func program() throws -> String {
        let output = Self.directory + "/trace"
        if FileManager.default.isExecutableFile(atPath: output) { return output }
        return try TestSupport.compile(
            [TestSupport.fixture("trace/trace.c")], output: output, flags: ["-O1", "-g", "-pthread"])
    }

    func frames(_ thread: ThreadRecord?) -> [String] { thread?.frames?.compactMap(\.function) ?? [] }

    /// SIGKILL from another process while main waits in a known function: a termination report
    /// with every thread where it was, and the exit status of a SIGKILL (137 from a shell).
    func testSIGKILLFromOutsideIsReportedWithEveryThread() throws {
        let run = try TestSupport.crashportRun([try program(), "kill"], options: ["--trace-exit"])
        XCTAssertEqual(run.result.status, .signaled(SIGKILL), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let event = try run.event()
        XCTAssertEqual(event.kind, .termination)
        XCTAssertEqual(event.cause, "SIGKILL")
        XCTAssertEqual(event.signal?.name, "SIGKILL")
        XCTAssertEqual(event.crashedThread, event.process?.pid.map { ThreadID($0.rawValue) }, "main, the leader, first")
        XCTAssertTrue(frames(event.crashedThreadRecord).contains("wait_for_kill"), "\(frames(event.crashedThreadRecord))")
        let worker = event.threads?.first { $0.crashed != true }
        XCTAssertTrue(frames(worker).contains("park_worker"), "\(frames(worker))")
        XCTAssertEqual(event.title, "killed by SIGKILL in wait_for_kill (trace.c:53)")
        XCTAssertTrue(run.result.stderr.contains("was killed by SIGKILL in wait_for_kill (trace.c:53)"), run.result.stderr)
        // A minidump too, that other tools read.
        XCTAssertTrue(FileManager.default.fileExists(atPath: run.minidumpPath()))
    }

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

    func write(_ text: String, to path: String) throws {
        try text.write(toFile: path, atomically: false, encoding: .utf8)
    }

    /// The OOM killer, inside a memory cgroup made here: cause oom-kill and the allocating frame.
    func testOOMKillInAMemoryCgroupNamesTheAllocatingFrame() throws {
        let parent = try memoryCgroup()
        let cgroup = parent.path + "/crashport-oom-\(getpid())"
        do {
            try FileManager.default.createDirectory(atPath: cgroup, withIntermediateDirectories: false)
        } catch {
            throw XCTSkip("a memory cgroup cannot be made under \(parent.path) (\(error)): the OOM test needs one")
        }
        defer { rmdir(cgroup) }
        if parent.v2 {
            try write("64M", to: cgroup + "/memory.max")
            try? write("0", to: cgroup + "/memory.swap.max")
        } else {
            try write("67108864", to: cgroup + "/memory.limit_in_bytes")
            try? write("67108864", to: cgroup + "/memory.memsw.limit_in_bytes")
        }
        let run = try TestSupport.crashportRun([try program(), "oom", cgroup], options: ["--trace-exit"], timeout: 120)
        XCTAssertEqual(run.result.status, .signaled(SIGKILL), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let event = try run.event()
        XCTAssertEqual(event.kind, .termination)
        XCTAssertEqual(event.cause, "oom-kill")
        XCTAssertTrue(frames(event.crashedThreadRecord).contains("fill_ledger"), "\(frames(event.crashedThreadRecord))")
        XCTAssertEqual(event.culprit?.function, "fill_ledger")
        XCTAssertTrue(
            event.title?.hasPrefix("killed by the OOM killer (SIGKILL) in fill_ledger (trace.c:") == true, event.title ?? "-")
    }

    /// Under --trace-exit the program's own signals, stops, forks, execs and exit codes are as
    /// without crashport, and an ordinary exit writes no report.
    func testTracedProgramBehavesAsUntraced() throws {
        let cases: [(mode: String, status: Int32, output: String?)] = [
            ("exit", 3, nil), ("stop", 4, "continued"), ("signal", 5, "handled 2"), ("fork", 6, "child exited 7"),
            ("exec", 8, nil),
        ]
        for (mode, status, output) in cases {
            let run = try TestSupport.crashportRun([try program(), mode], options: ["--trace-exit"])
            XCTAssertEqual(run.result.status, .exited(status), "\(mode): \(run.result.stderr)")
            if let output { XCTAssertTrue(run.result.stdout.contains(output), "\(mode): \(run.result.stdout)") }
            XCTAssertEqual(run.reportIDs, [], "\(mode): \(run.result.stderr)")
        }
        // A crash the stub reports is reported once, and the program dies by its signal.
        let crash = try TestSupport.crashportRun(
            [try TestSupport.compile([TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/crash"), "null"],
            options: ["--trace-exit"])
        XCTAssertEqual(crash.result.status, .signaled(SIGSEGV), crash.result.stderr)
        XCTAssertEqual(crash.reportIDs.count, 1, crash.result.stderr)
        XCTAssertEqual(try crash.event().kind, .crash)
        // With --trace-exit-codes, exit(3) is reported, from the frame that called exit.
        let exited = try TestSupport.crashportRun([try program(), "exit"], options: ["--trace-exit", "--trace-exit-codes"])
        XCTAssertEqual(exited.result.status, .exited(3), exited.result.stderr)
        XCTAssertEqual(exited.reportIDs.count, 1, exited.result.stderr)
        guard exited.reportIDs.count == 1 else { return }
        let event = try exited.event()
        XCTAssertEqual(event.cause, "exit")
        XCTAssertEqual(event.reason, "exited with status 3")
        XCTAssertEqual(event.culprit?.function, "leave_with_three")
    }

    /// A deadlock: one hang report with both threads in pthread_mutex_lock under the functions
    /// that took the locks; --hang-kill then ends it with SIGABRT, reported as the watchdog's
    /// kill that follows the hang report.
    func testDeadlockIsReportedAsAHangThenKilled() throws {
        let run = try TestSupport.crashportRun([try program(), "deadlock"], options: ["--hang-ms", "1000", "--hang-kill"])
        XCTAssertEqual(run.result.status, .signaled(SIGABRT), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 2, run.result.stderr)
        let hang = try run.event(0)
        XCTAssertEqual(hang.kind, .hang)
        XCTAssertEqual(hang.cause, "hang")
        XCTAssertGreaterThanOrEqual(hang.hangMilliseconds ?? 0, 1000)
        for function in ["post_entry", "audit_journal"] {
            let thread = hang.threads?.first { frames($0).contains(function) }
            let names = frames(thread)
            XCTAssertTrue(
                names.firstIndex(of: "__pthread_mutex_lock").map { $0 < names.firstIndex(of: function)! } == true,
                "\(function): \(names)")
        }
        XCTAssertEqual(hang.culprit?.function, "post_entry", "main beat last")
        let killed = try run.event(1)
        XCTAssertEqual(killed.kind, .crash)
        XCTAssertEqual(killed.cause, "watchdog")
        XCTAssertEqual(killed.related, hang.id)
        XCTAssertEqual(killed.signal?.name, "SIGABRT")
        XCTAssertTrue(killed.title?.contains("killed by crashport's hang watchdog") == true, killed.title ?? "-")
    }

    /// A 2 s stall the program recovers from: one hang report, and the program goes on to exit 0.
    /// Also under --trace-exit, where the hang capture goes through the tracer.
    func testRecoveredStallGivesOneHangReport() throws {
        for options in [["--hang-ms", "500"], ["--hang-ms", "500", "--trace-exit"]] {
            let run = try TestSupport.crashportRun([try program(), "stall"], options: options)
            XCTAssertEqual(run.result.status, .exited(0), run.result.stderr)
            XCTAssertTrue(run.result.stdout.contains("recovered"))
            XCTAssertEqual(run.reportIDs.count, 1, "\(options): \(run.result.stderr)")
            let event = try run.event()
            XCTAssertEqual(event.kind, .hang)
            XCTAssertEqual(event.culprit?.function, "stall_for_a_while")
            XCTAssertTrue(run.result.stderr.contains("the heartbeat resumed"), run.result.stderr)
        }
    }

    /// Flags that need another say so.
    func testHangAndTraceFlagsNeedTheirPartners() throws {
        for (options, message) in [
            (["--hang-kill"], "--hang-kill needs --hang-ms"), (["--trace-exit-codes"], "--trace-exit-codes needs --trace-exit"),
            (["--hang-ms", "3"], "--hang-ms must be at least 10"),
        ] {
            let run = try TestSupport.crashportRun(["/bin/true"], options: options)
            XCTAssertEqual(run.result.status, .exited(64), run.result.stderr)
            XCTAssertTrue(run.result.stderr.contains(message), run.result.stderr)
        }
    }
}
