// End-to-end: the sidecar's --trace-exit and --hang-ms, per client. Real programs under a real
// `crashport watch`: one SIGKILLed from outside, traced because it asked
// (CRASHPORT_TRACE_EXIT=1) or because the sidecar traces every client; a deadlocked one that
// asked for a hang watch and a hang kill; and, in a pid namespace of its own whose pid 1 plays
// systemd, a hung service that pid 1 then aborts, as WatchdogSec= does. ptrace works on these
// machines (no Yama).

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class SidecarTraceTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("sidecar-trace")

    func fresh(_ name: String) -> String {
        TestSupport.freshDirectory(in: Self.directory, name)
    }

    /// Tests/Fixtures/trace/trace.c (the same fixture as TraceExitTests).
    func program() throws -> String { try TraceExitTests.fixture() }

    func frames(_ thread: ThreadRecord?) -> [String] { thread?.frames?.compactMap(\.function) ?? [] }

    func client(_ sidecar: SidecarProcess, _ extra: [String: String]) throws -> [String: String] {
        var environment = ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket]
        for (key, value) in extra { environment[key] = value }
        return environment
    }

    /// SIGKILL from outside, traced by the sidecar: because the client asked, and because the
    /// sidecar traces everyone. One termination report each, with every thread where it was,
    /// and the session ends abnormal with that report (SidecarEnds writes no second one).
    func testTracedClientsSIGKILLIsReportedWithEveryThread() throws {
        for (arguments, asked) in [([String](), ["CRASHPORT_TRACE_EXIT": "1"]), (["--trace-exit"], [:])] {
            let sidecar = try SidecarProcess(directory: fresh("kill"), arguments: arguments)
            let result = try TestSupport.run(
                [try program(), "kill"], environment: try client(sidecar, asked), timeout: 120)
            XCTAssertEqual(result.status, .signaled(SIGKILL), result.stderr)
            let event = try sidecar.waitForReports(1)[0]
            let pid = event.process?.pid?.rawValue ?? -1
            XCTAssertTrue(sidecar.log.contains("tracing pid \(pid) until it exits"), sidecar.log)
            XCTAssertEqual(event.kind, .termination, "\(arguments)")
            XCTAssertEqual(event.cause, "SIGKILL")
            XCTAssertEqual(event.crashedThread, ThreadID(pid), "main, the leader, first")
            XCTAssertTrue(frames(event.crashedThreadRecord).contains("wait_for_kill"), "\(frames(event.crashedThreadRecord))")
            let worker = event.threads?.first { $0.crashed != true }
            XCTAssertTrue(frames(worker).contains("park_worker"), "\(frames(worker))")
            XCTAssertTrue(event.title?.hasPrefix("killed by SIGKILL in wait_for_kill (trace.c:") == true, event.title ?? "-")
            // The report's log line follows its files: wait for it (bounded).
            for _ in 0..<200 where !sidecar.log.contains("was killed by SIGKILL") { usleep(25_000) }
            XCTAssertTrue(sidecar.log.contains("was killed by SIGKILL in wait_for_kill (trace.c:"), sidecar.log)

            let session = try sidecar.session(of: pid)
            XCTAssertEqual(session["status"] as? String, "abnormal")
            XCTAssertEqual(session["report_id"] as? String, event.id)
            XCTAssertEqual(sidecar.reportIDs().count, 1, "one report per death:\n\(sidecar.log)")
            XCTAssertEqual(sidecar.stop(), 0)
        }
    }

    /// Four traced clients SIGKILLed at about the same time: one tracer thread, one waitpid for
    /// all of them, and each death reported with its own threads.
    func testSeveralTracedClientsDieAtOnce() throws {
        let sidecar = try SidecarProcess(directory: fresh("several"), arguments: ["--trace-exit"])
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in try client(sidecar, [:]) { environment[key] = value }
        let programs = try (0..<4).map { _ in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try program())
            process.arguments = ["kill"]
            process.environment = environment
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            return process
        }
        for process in programs {
            process.waitUntilExit()
            XCTAssertEqual(process.terminationReason, .uncaughtSignal)
            XCTAssertEqual(process.terminationStatus, SIGKILL)
        }
        let events = try sidecar.waitForReports(4)
        XCTAssertEqual(Set(events.compactMap { $0.process?.pid?.rawValue }), Set(programs.map(\.processIdentifier)))
        for event in events {
            XCTAssertEqual(event.cause, "SIGKILL")
            XCTAssertEqual(event.threads?.count, 2, "\(event.threads?.count ?? 0) threads")
            XCTAssertTrue(frames(event.crashedThreadRecord).contains("wait_for_kill"), "\(frames(event.crashedThreadRecord))")
        }
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// A client another process already traces (as a debugger would): the sidecar says it
    /// cannot trace it, it runs as before, and its SIGKILL is still reported, without stacks,
    /// saying why.
    func testClientTracedByAnotherIsReportedWithoutStacksSayingWhy() throws {
        let sidecar = try SidecarProcess(directory: fresh("contested"))
        let tracer = try TestSupport.compile(
            [TestSupport.fixture("trace/tracer.c")], output: Self.directory + "/tracer", flags: ["-O1", "-g"])
        let program = try program()
        let result = try TestSupport.run(
            [tracer, program, "kill"], environment: try client(sidecar, ["CRASHPORT_TRACE_EXIT": "1"]), timeout: 120)
        XCTAssertEqual(result.status, .signaled(SIGKILL), result.stderr)
        // The program's report: the tracer is preloaded too, and its own SIGKILL (it ends as the
        // program did) is reported beside it, sometimes first.
        let name = "/" + program.split(separator: "/").last.map(String.init)!
        var found: Event?
        try waitUntil("the program's report; log:\n\(sidecar.log)", timeout: 60) {
            found = try sidecar.events().first { $0.process?.executable?.hasSuffix(name) == true }
            return found != nil
        }
        let event = try XCTUnwrap(found)
        let pid = event.process?.pid?.rawValue ?? -1
        XCTAssertTrue(sidecar.log.contains("cannot trace pid \(pid) ("), sidecar.log)
        XCTAssertEqual(event.kind, .termination)
        XCTAssertEqual(event.cause, "SIGKILL")
        XCTAssertNil(event.threads)
        XCTAssertTrue(
            (event.notes ?? []).contains {
                $0.hasPrefix("no stacks: crashport could not keep it traced (ptrace(PTRACE_SEIZE, \(pid))")
            },
            "\(event.notes ?? [])")
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// A client that asked for a hang watch and a hang kill (and tracing, so that both captures
    /// go through its tracer): a deadlock gives a hang report with both threads in
    /// pthread_mutex_lock under the functions that took the locks, then the sidecar's SIGABRT,
    /// whose crash report is the watchdog's kill, linked to the hang report.
    func testClientsHangIsReportedThenKilled() throws {
        let sidecar = try SidecarProcess(directory: fresh("hang"))
        let result = try TestSupport.run(
            [try program(), "deadlock"],
            environment: try client(
                sidecar, ["CRASHPORT_HANG_MS": "1000", "CRASHPORT_HANG_KILL": "1", "CRASHPORT_TRACE_EXIT": "1"]),
            timeout: 120)
        XCTAssertEqual(result.status, .signaled(SIGABRT), result.stderr)
        let events = try sidecar.waitForReports(2)
        guard let hang = events.first(where: { $0.kind == .hang }), let killed = events.first(where: { $0.kind == .crash })
        else { return XCTFail("\(events.map(\.kind)):\n\(sidecar.log)") }
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
        XCTAssertEqual(killed.signal?.name, "SIGABRT")
        XCTAssertEqual(killed.cause, "watchdog")
        XCTAssertEqual(killed.related, hang.id)
        XCTAssertTrue(
            (killed.notes ?? []).contains("crashport's hang-kill sent SIGABRT after hang report \(hang.id ?? "")"),
            "\(killed.notes ?? [])")
        XCTAssertEqual(events.count, 2, "the traced death after the crash report is not reported again:\n\(sidecar.log)")
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// systemd's watchdog, with the heartbeat API: in a pid namespace whose pid 1 is a shell
    /// that runs the sidecar and a service that beats and then deadlocks (CRASHPORT_HANG_MS),
    /// waits for the hang report, then sends the service SIGABRT as WatchdogSec= would. The
    /// crash report is the watchdog's kill (inferred) and links to the hang report.
    func testWatchdogKillAfterAHangLinksToTheHangReport() throws {
        guard getuid() == 0 else { throw XCTSkip("a new pid namespace with its own /proc needs root here") }
        guard let unshare = TestSupport.which("unshare", also: ["/usr/bin"]) else { throw XCTSkip("no unshare (util-linux)") }
        let directory = fresh("watchdog")
        // Every wait is bounded (30 s); the sidecar's log is the test's to read.
        let initScript = """
            d="$1"
            "$0" watch --socket "$d/s.sock" --reports "$d/reports" --spool "$d/spool" 2> "$d/watch.log" &
            watcher=$!
            i=0; while ! grep -q "watching " "$d/watch.log" && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
            CRASHPORT_SOCKET="$d/s.sock" CRASHPORT_HANG_MS=500 LD_PRELOAD="$3" "$2" deadlock &
            service=$!
            i=0; while ! grep -q "no heartbeat for" "$d/watch.log" && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
            kill -s ABRT $service
            wait $service
            i=0; while [ "$(grep -c "report: " "$d/watch.log")" -lt 2 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
            kill $watcher
            wait $watcher
            """
        let result = try TestSupport.run(
            [
                unshare, "--pid", "--fork", "--mount-proc", "/bin/sh", "-c", initScript, TestSupport.crashport, directory,
                try program(), try TestSupport.stub(),
            ],
            environment: [:], timeout: 180)
        guard !result.stderr.contains("unshare failed"), !result.stderr.contains("unshare: ") else {
            throw XCTSkip("cannot make a pid namespace here: \(result.stderr)")
        }
        let log = (try? String(contentsOfFile: directory + "/watch.log", encoding: .utf8)) ?? ""
        let reports = directory + "/reports/0"
        let events = ((try? FileManager.default.contentsOfDirectory(atPath: reports)) ?? []).filter { !$0.hasPrefix(".") }
            .compactMap { FileManager.default.contents(atPath: reports + "/" + $0 + "/event.json") }
            .compactMap { try? Event.decode($0) }
        guard let hang = events.first(where: { $0.kind == .hang }), let killed = events.first(where: { $0.kind == .crash })
        else { return XCTFail("\(events.map(\.kind)): \(result.stderr)\n\(log)") }
        XCTAssertEqual(killed.signal?.senderPID, 1, "the sender as the service saw it")
        XCTAssertEqual(killed.cause, "watchdog")
        XCTAssertEqual(killed.related, hang.id)
        XCTAssertTrue((killed.notes ?? []).contains { $0.hasPrefix("watchdog (inferred)") }, "\(killed.notes ?? [])")
        XCTAssertTrue(
            (killed.notes ?? []).contains("the process had hung before: hang report \(hang.id ?? "")"), "\(killed.notes ?? [])")
        XCTAssertTrue(log.contains("(pid \(hang.process?.pid?.rawValue ?? 0)) hang: no heartbeat for"), log)
    }
}
