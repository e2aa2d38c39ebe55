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
    /// Tests/Fixtures/trace/trace.c, built once (SidecarTraceTests uses it too).
    static func fixture() throws -> String {
        let output = directory + "/trace"
        if FileManager.default.isExecutableFile(atPath: output) { return output }
        return try TestSupport.compile(
            [TestSupport.fixture("trace/trace.c")], output: output, flags: ["-O1", "-g", "-pthread"])
    }

    func program() throws -> String { try Self.fixture() }

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
        XCTAssertEqual(event.title, "killed by SIGKILL in wait_for_kill (trace.c:70)")
        XCTAssertTrue(run.result.stderr.contains("was killed by SIGKILL in wait_for_kill (trace.c:70)"), run.result.stderr)
        // A minidump too, that other tools read.
        XCTAssertTrue(FileManager.default.fileExists(atPath: run.minidumpPath()))
    }

    /// A program that SIGKILLs itself as main's first statement: seized before its exec, it
    /// is caught at its exit all the same, with main on the stack.
    func testDeathInTheFirstMicrosecondsIsTraced() throws {
        let run = try TestSupport.crashportRun([try program(), "suicide"], options: ["--trace-exit"])
        XCTAssertEqual(run.result.status, .signaled(SIGKILL), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        guard run.reportIDs.count == 1 else { return }
        let event = try run.event()
        XCTAssertEqual(event.kind, .termination)
        XCTAssertEqual(event.cause, "SIGKILL")
        XCTAssertTrue(frames(event.crashedThreadRecord).contains("main"), "\(frames(event.crashedThreadRecord))")
        XCTAssertTrue(event.title?.hasPrefix("killed by SIGKILL in main (trace.c:") == true, event.title ?? "-")
        XCTAssertTrue(
            (event.notes ?? []).contains { $0.contains("OOM killer killed nothing in its memory cgroup") }
                || (event.notes ?? []).contains { $0.contains("machine-wide OOM count used") }, "\(event.notes ?? [])")
    }

    /// A program that looks for a debugger with PTRACE_TRACEME. Under --trace-exit it is traced
    /// from before its exec, so it finds one (EPERM) and its deaths are caught as any other's.
    /// Without it, crashport becomes its tracer; crashport lets it go at its first stop, so a
    /// crash is reported by the stub as usual and nothing hangs.
    func testProgramThatCallsTraceMe() throws {
        let killed = try TestSupport.crashportRun([try program(), "traceme-kill"], options: ["--trace-exit"])
        XCTAssertEqual(killed.result.status, .signaled(SIGKILL), killed.result.stderr)
        XCTAssertTrue(killed.result.stdout.contains("traceme failed: EPERM"), killed.result.stdout)
        XCTAssertEqual(killed.reportIDs.count, 1, killed.result.stderr)
        if killed.reportIDs.count == 1 {
            let event = try killed.event()
            XCTAssertEqual(event.kind, .termination)
            XCTAssertEqual(event.culprit?.function, "after_traceme")
        }
        let exited = try TestSupport.crashportRun([try program(), "traceme-exit"], options: ["--trace-exit"])
        XCTAssertEqual(exited.result.status, .exited(11), exited.result.stderr)
        XCTAssertEqual(exited.reportIDs, [], exited.result.stderr)

        let crashed = try TestSupport.crashportRun([try program(), "traceme-crash"])
        XCTAssertEqual(crashed.result.status, .signaled(SIGSEGV), crashed.result.stderr)
        XCTAssertTrue(crashed.result.stdout.contains("traceme ok"), crashed.result.stdout)
        XCTAssertTrue(crashed.result.stderr.contains("made crashport its tracer (PTRACE_TRACEME)"), crashed.result.stderr)
        XCTAssertEqual(crashed.reportIDs.count, 1, crashed.result.stderr)
        if crashed.reportIDs.count == 1 {
            let event = try crashed.event()
            XCTAssertEqual(event.kind, .crash)
            XCTAssertEqual(event.culprit?.function, "after_traceme")
        }
        let untracedKill = try TestSupport.crashportRun([try program(), "traceme-kill"])
        XCTAssertEqual(untracedKill.result.status, .signaled(SIGKILL), untracedKill.result.stderr)
        XCTAssertEqual(untracedKill.reportIDs.count, 1, untracedKill.result.stderr)
        let untracedExit = try TestSupport.crashportRun([try program(), "traceme-exit"])
        XCTAssertEqual(untracedExit.result.status, .exited(11), untracedExit.result.stderr)
        XCTAssertEqual(untracedExit.reportIDs, [], untracedExit.result.stderr)
    }

    /// crashport itself under `strace -f`: strace takes the child at its fork, so crashport
    /// cannot seize it. It says so, runs it untraced, and the SIGKILL gets the stackless report
    /// that says what is missing; the exit status is the program's.
    func testAlreadyTracedProgramRunsUntraced() throws {
        guard let strace = ["/usr/bin/strace", "/bin/strace"].first(where: FileManager.default.isExecutableFile) else {
            throw XCTSkip("strace is not installed: nothing else here traces crashport's child first")
        }
        let reports = TestSupport.temporaryDirectory("reports")
        let result = try TestSupport.run(
            [strace, "-f", "-o", "/dev/null", TestSupport.crashport, "run", "--reports", reports, "--trace-exit", "--"]
                + [try program(), "kill"],
            environment: ProcessInfo.processInfo.environment.merging(
                ["CRASHPORT_STUB": try TestSupport.stub()]) { $1 })
        XCTAssertEqual(result.status, .signaled(SIGKILL), result.stderr)
        XCTAssertTrue(result.stderr.contains("cannot be traced"), result.stderr)
        XCTAssertTrue(result.stderr.contains("already traced by pid"), result.stderr)
        let ids = ((try? FileManager.default.contentsOfDirectory(atPath: reports)) ?? []).filter { !$0.hasPrefix(".") }
        XCTAssertEqual(ids.count, 1, result.stderr)
        guard ids.count == 1, let data = FileManager.default.contents(atPath: reports + "/" + ids[0] + "/event.json") else {
            return
        }
        let event = try Event.decode(data)
        XCTAssertEqual(event.kind, .termination)
        XCTAssertEqual(event.cause, "SIGKILL")
        XCTAssertEqual(event.threads ?? [], [])
        XCTAssertTrue(
            (event.notes ?? []).contains { $0.hasPrefix("not traced (") && $0.contains("no stacks") }, "\(event.notes ?? [])")
    }

    /// A program that forks 1000 children which exit at once, traced and not: they are its own
    /// (forks are not followed), it reaps every one, and crashport neither hangs nor reports.
    func testThousandShortLivedChildren() throws {
        for options in [["--trace-exit"], []] {
            let run = try TestSupport.crashportRun([try program(), "forks"], options: options, timeout: 120)
            XCTAssertEqual(run.result.status, .exited(10), "\(options): \(run.result.stderr)")
            XCTAssertTrue(run.result.stdout.contains("reaped 1000 sum 49500"), "\(options): \(run.result.stdout)")
            XCTAssertEqual(run.reportIDs, [], "\(options): \(run.result.stderr)")
        }
    }

    /// crashport run --trace-exit under crashport run --trace-exit: the outer one traces the
    /// inner crashport (not its child: forks are not followed), so the inner one can trace the
    /// program and report its SIGKILL with stacks. The inner crashport then ends itself with the
    /// same SIGKILL, which the outer one reports too: two deaths, one report each.
    func testNestedCrashportTracesItsOwnChild() throws {
        let run = try TestSupport.crashportRun(
            [TestSupport.crashport, "run", "--reports", TestSupport.temporaryDirectory("inner"), "--trace-exit", "--"]
                + [try program(), "kill"], options: ["--trace-exit"])
        XCTAssertEqual(run.result.status, .signaled(SIGKILL), run.result.stderr)
        XCTAssertTrue(run.result.stderr.contains("was killed by SIGKILL in wait_for_kill (trace.c:"), run.result.stderr)
        XCTAssertFalse(run.result.stderr.contains("cannot be traced"), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        if run.reportIDs.count == 1 {
            let event = try run.event()
            XCTAssertEqual(event.kind, .termination)
            XCTAssertTrue(
                frames(event.crashedThreadRecord).contains("static Launcher.exit(like:)"), "\(frames(event.crashedThreadRecord))")
        }
    }

    /// The OOM killer, inside a memory cgroup made here: cause oom-kill and the allocating frame.
    func testOOMKillInAMemoryCgroupNamesTheAllocatingFrame() throws {
        let cgroup = try makeMemoryCgroup("oom")
        defer { rmdir(cgroup) }
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
        // The fixture moved itself into the new cgroup, whose count at its start crashport could
        // not know: the machine's count decided, and the notes say so.
        XCTAssertTrue(
            (event.notes ?? []).contains { $0.contains("machine-wide OOM count used: it moved from the memory cgroup") },
            "\(event.notes ?? [])")
    }

    /// The OOM killer with crashport in the same memory cgroup as the program, as a container's
    /// entrypoint runs it: the kernel's OOM reaper frees the program's stacks before the
    /// watcher, itself waiting on the cgroup's reclaim, can read them at the kill; the report
    /// still has grow_forever and main, from the snapshot taken as the limit neared, and says so.
    func testOOMKillWithTheWatcherInTheCgroupKeepsTheStack() throws {
        let cgroup = try makeMemoryCgroup("oom-inside")
        defer { rmdir(cgroup) }
        let reports = TestSupport.temporaryDirectory("oom-inside")
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let run = try TestSupport.run(
            [
                "/bin/sh", "-c", "echo $$ > \"$1/cgroup.procs\" && shift && exec \"$@\"", "sh", cgroup, TestSupport.crashport,
                "run", "--reports", reports, "--trace-exit", "--", try program(), "grow",
            ], environment: ["CRASHPORT_STUB": try TestSupport.stub()], timeout: 120)
        XCTAssertEqual(run.status, .signaled(SIGKILL), run.stderr)
        let ids = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }
        XCTAssertEqual(ids.count, 1, run.stderr)
        guard ids.count == 1, let data = FileManager.default.contents(atPath: reports + "/" + ids[0] + "/event.json") else {
            return
        }
        let event = try Event.decode(data)
        XCTAssertEqual(event.cause, "oom-kill", run.stderr)
        XCTAssertTrue(containsInOrder(event.crashedFunctions, ["grow_forever", "main"]), "\(event.crashedFunctions)")
        let taken = try XCTUnwrap(event.stackTaken, "no stack_taken")
        XCTAssertTrue([StackTaken.atDeath, StackTaken.beforeDeath].contains(taken.when), taken.when)
        XCTAssertEqual(taken.millisecondsBefore != nil, taken.when == StackTaken.beforeDeath, "\(taken)")
        XCTAssertTrue(event.process?.arguments?.last == "grow", "\(event.process?.arguments ?? [])")
        let shown = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, ids[0]])
        XCTAssertTrue(
            shown.stdout.contains("Stack:     at the kill") || shown.stdout.contains(" ms before the kill (a snapshot"),
            shown.stdout)
    }

    /// Issue 46: a program that idles half a second, then goes from nothing to its 64 MiB limit
    /// in tens of milliseconds, with crashport in its memory cgroup. At idle the sampler looks
    /// every 100 ms, and the burst falls between two looks; the kernel's notice (v1's usage
    /// thresholds, v2's memory.events and PSI trigger) wakes crashport as usage crosses half the
    /// limit, and the snapshot it takes into memory prepared beforehand keeps the stack: ten runs
    /// of ten have the program's own frames, from `before_death` (or, a run in twenty or so,
    /// `at_death`: the capture at the kill read the stack itself, needing no new page then).
    func testOOMBurstFromIdleKeepsTheStackInEveryRun() throws {
        let cgroup = try makeMemoryCgroup("oom-burst")
        defer { rmdir(cgroup) }
        var outcomes: [String] = []
        for _ in 1...10 {
            let reports = TestSupport.temporaryDirectory("oom-burst")
            // Report files on a tmpfs stay charged to the cgroup: removed after each run.
            defer { try? FileManager.default.removeItem(atPath: reports) }
            let run = try TestSupport.run(
                [
                    "/bin/sh", "-c", "echo $$ > \"$1/cgroup.procs\" && shift && exec \"$@\"", "sh", cgroup,
                    TestSupport.crashport, "run", "--reports", reports, "--trace-exit", "--", try program(), "burst",
                ], environment: ["CRASHPORT_STUB": try TestSupport.stub()], timeout: 60)
            let ids = (try? FileManager.default.contentsOfDirectory(atPath: reports))?.filter { !$0.hasPrefix(".") } ?? []
            guard run.status == .signaled(SIGKILL), ids.count == 1,
                let data = FileManager.default.contents(atPath: reports + "/" + ids[0] + "/event.json")
            else {
                outcomes.append("\(run.status), \(ids.count) report(s): \(run.stderr.suffix(400))")
                continue
            }
            let event = try Event.decode(data)
            let taken = event.stackTaken
            let kept =
                event.cause == "oom-kill" && [StackTaken.beforeDeath, StackTaken.atDeath].contains(taken?.when)
                && containsInOrder(event.crashedFunctions, ["grow_in_a_burst", "main"])
            outcomes.append(
                (kept ? "kept" : "LOST") + ": \(event.cause ?? "-"), \(taken.map { "\($0)" } ?? "no stack_taken"), "
                    + "\(event.crashedFunctions)")
        }
        let kept = outcomes.filter { $0.hasPrefix("kept") }.count
        XCTAssertEqual(kept, 10, "\(kept) of 10 runs kept the stack:\n" + outcomes.joined(separator: "\n"))
    }

    /// A crash in a memory cgroup near its limit: the report's `memory` section says the limit,
    /// the peak, the process's own peak, and that the memory was under pressure.
    func testMemoryNearTheLimitIsInTheReport() throws {
        let cgroup = try makeMemoryCgroup("pressure")
        defer { rmdir(cgroup) }
        let run = try TestSupport.crashportRun([try program(), "pressure", cgroup], timeout: 120)
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        guard run.reportIDs.count == 1 else { return }
        let event = try run.event()
        XCTAssertEqual(event.culprit?.function, "tally_under_pressure")
        let memory = try XCTUnwrap(event.memory, "no memory section")
        XCTAssertEqual(memory.cgroup, cgroup)
        XCTAssertEqual(memory.limit, 64 << 20)
        XCTAssertGreaterThanOrEqual(memory.peak ?? 0, (64 << 20) / 10 * 9, "\(memory)")
        XCTAssertGreaterThanOrEqual(memory.processPeak ?? 0, 32 << 20, "\(memory)")
        XCTAssertTrue(memory.underPressure, "\(memory)")
        XCTAssertNotNil(memory.pressure, "PSI, the cgroup's or the machine's")
        let shown = try TestSupport.run([TestSupport.crashport, "show", "--reports", run.reportsDirectory, "latest"])
        XCTAssertTrue(shown.stdout.contains("of a 64.0 MB limit"), shown.stdout)

        // The same, ending cleanly, with crashport run in the cgroup too, as a container's
        // entrypoint runs: no report, but the session and the last run say the memory was under
        // pressure; a run that touched little says nothing of it.
        let reports = TestSupport.temporaryDirectory("pressure-runs")
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let inside = try TestSupport.run(
            [
                "/bin/sh", "-c", "echo $$ > \"$1/cgroup.procs\" && shift && exec \"$@\"", "sh", cgroup, TestSupport.crashport,
                "run", "--reports", reports, "--", try program(), "pressure", cgroup,
            ], environment: ["TRACE_PRESSURE_EXIT": "1", "CRASHPORT_STUB": try TestSupport.stub()], timeout: 120)
        XCTAssertEqual(inside.status, .exited(0), inside.stderr)
        let listed = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports, "--program", try program()])
        XCTAssertTrue(listed.stdout.contains("ended without a crash; its memory was under pressure"), listed.stdout)
        let sessions = try String(contentsOfFile: reports + "/.crashport-sessions.jsonl", encoding: .utf8)
        XCTAssertTrue(sessions.contains("\"under_pressure\":true"), sessions)
        XCTAssertTrue(sessions.contains("\"limit\":67108864"), sessions)
        let light = try TestSupport.crashportRun([try program(), "exit"], reports: reports)
        XCTAssertEqual(light.result.status, .exited(3))
        let after = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports, "--program", try program()])
        XCTAssertTrue(after.stdout.contains("last run of"), after.stdout)
        XCTAssertFalse(after.stdout.contains("under pressure"), after.stdout)
    }

    /// Under --trace-exit the program's own signals, stops, forks, clones, execs and exit codes
    /// are as without crashport, and an ordinary exit writes no report (nor the SIGKILL of a
    /// process it clone()d, which TRACECLONE follows).
    func testTracedProgramBehavesAsUntraced() throws {
        let cases: [(mode: String, status: Int32, output: String?)] = [
            ("exit", 3, nil), ("stop", 4, "continued"), ("signal", 5, "handled 2"), ("fork", 6, "child exited 7"),
            ("exec", 8, nil), ("clone", 12, "clone child status 9"),
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
            let records = thread?.frames ?? []
            let lock = try XCTUnwrap(
                records.firstIndex(where: \.isMutexLock),
                "\(function): \(frames(thread))")
            let caller = try XCTUnwrap(records.firstIndex { $0.function == function })
            XCTAssertLessThan(lock, caller, "\(function): \(frames(thread))")
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
            (["--hang-ms", "18446744073709551615"], "--hang-ms must be at most 86400000"),
        ] {
            let run = try TestSupport.crashportRun(["/bin/true"], options: options)
            XCTAssertEqual(run.result.status, .exited(64), run.result.stderr)
            XCTAssertTrue(run.result.stderr.contains(message), run.result.stderr)
        }
    }
}
