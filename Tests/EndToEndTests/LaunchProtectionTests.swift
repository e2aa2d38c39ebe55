// End-to-end: launch protection and the last run in full. The README's example
// (examples/c/safe-mode.c) crashes at launch three times on a corrupt cache, and its fourth
// launch runs the protect work and then the launch work in one process, under `crashport run`
// and under a sidecar; a clean run resets the count. Tests/Fixtures/api/lastrun.c prints
// crashport_last_run_detail after a crash, a SIGKILL, an OOM kill in a memory cgroup made here,
// a handled error, an exit code and a clean run.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class LaunchProtectionTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("launch-protection")

    func fresh(_ name: String) -> String {
        TestSupport.freshDirectory(in: Self.directory, name)
    }

    /// A C source linked with the stub the tests preload (one library, loaded once).
    func build(_ source: String, in directory: String, name: String) throws -> String {
        let libraries = (try TestSupport.stub() as NSString).deletingLastPathComponent
        return try TestSupport.compile(
            [source], output: directory + "/" + name,
            flags: ["-O1", "-g", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
    }

    /// The example's five starts: three launch crashes, the protected fourth, a normal fifth.
    /// `start` runs the program once, returning its result and its new reports' paths.
    func assertSafeMode(
        work: String, signal: Int32 = SIGSEGV, function: String = "load_cache",
        start: () throws -> (result: RunResult, reports: [String]), file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let name = signal == SIGSEGV ? "SIGSEGV" : "SIGILL"
        let cache = work + "/cache"
        try "corrupt\n".write(toFile: cache, atomically: true, encoding: .utf8)
        for launch in 1...3 {
            let (result, reports) = try start()
            XCTAssertEqual(result.status, .signaled(signal), "launch \(launch): \(result.stderr)", file: file, line: line)
            XCTAssertFalse(result.stdout.contains("safe mode"), result.stdout, file: file, line: line)
            XCTAssertEqual(reports.count, 1, result.stderr, file: file, line: line)
            if launch > 1 {
                XCTAssertTrue(
                    result.stdout.contains("last run: crash by \(name), \(launch - 1) launch crash(es) in a row: "),
                    result.stdout, file: file, line: line)
                XCTAssertTrue(
                    result.stdout.contains(function), "the title names it: \(result.stdout)", file: file, line: line)
            }
        }
        let (fourth, none) = try start()
        XCTAssertEqual(fourth.status, .exited(0), fourth.stderr, file: file, line: line)
        XCTAssertTrue(none.isEmpty, "\(none)", file: file, line: line)
        let said = fourth.stdout.split(separator: "\n").map(String.init)
        let expected = [
            "last run: crash by \(name), 3 launch crash(es) in a row", "safe mode: removing \(cache)", "task: settings reset",
            "launched: serving", "launched after the protect work",
        ]
        let positions = expected.map { line in said.firstIndex { $0.hasPrefix(line) } }
        XCTAssertFalse(positions.contains(nil), "\(said)", file: file, line: line)
        XCTAssertEqual(
            positions.compactMap { $0 }, positions.compactMap { $0 }.sorted(), "in order: \(said)", file: file, line: line)
        XCTAssertTrue(
            said.contains {
                $0.hasPrefix("its report: ") && FileManager.default.fileExists(atPath: $0.dropFirst(12) + "/event.json")
            },
            "the last report's path: \(said)", file: file, line: line)
        XCTAssertFalse(FileManager.default.fileExists(atPath: cache), "the protect work ran", file: file, line: line)

        let (fifth, _) = try start()
        XCTAssertEqual(fifth.status, .exited(0), fifth.stderr, file: file, line: line)
        XCTAssertTrue(fifth.stdout.contains("last run: clean, 0 launch crash(es) in a row"), fifth.stdout, file: file, line: line)
        XCTAssertFalse(fifth.stdout.contains("safe mode"), fifth.stdout, file: file, line: line)
        XCTAssertTrue(fifth.stdout.contains("launched normally"), fifth.stdout, file: file, line: line)
    }

    /// The session that ran the protect work says so (a session attribute), once.
    func assertProtectedSession(reports: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let sessions = try String(contentsOfFile: reports + "/.crashport-sessions.jsonl", encoding: .utf8)
            .split(separator: "\n")
        XCTAssertEqual(sessions.count, 5, "\(sessions)", file: file, line: line)
        XCTAssertEqual(
            sessions.map { $0.contains("\"launch_protected\":true") }, [false, false, false, true, false], "\(sessions)",
            file: file, line: line)
    }

    func testSafeModeAfterThreeLaunchCrashesUnderRun() throws {
        let work = fresh("run")
        let program = try build(TestSupport.repositoryRoot + "/examples/c/safe-mode.c", in: work, name: "safe-mode")
        let reports = work + "/reports"
        var seen: Set<String> = []
        try assertSafeMode(work: work) {
            let run = try TestSupport.crashportRun([program, work + "/cache"], reports: reports)
            defer { seen.formUnion(run.reportIDs) }
            return (run.result, Set(run.reportIDs).subtracting(seen).map { reports + "/" + $0 })
        }
        try assertProtectedSession(reports: reports)
        let stats = try TestSupport.run([TestSupport.crashport, "stats", "--reports", reports])
        XCTAssertTrue(stats.stdout.contains("1 protected launch"), stats.stdout)
    }

    func testSafeModeAfterThreeLaunchCrashesUnderTheSidecar() throws {
        let work = fresh("sidecar")
        let program = try build(TestSupport.repositoryRoot + "/examples/c/safe-mode.c", in: work, name: "safe-mode")
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        var count = 0
        try assertSafeMode(work: work) {
            let result = try TestSupport.run([program, work + "/cache"], environment: ["CRASHPORT_SOCKET": sidecar.socket])
            let crashed = result.status == .signaled(SIGSEGV)
            if crashed {
                count += 1
                _ = try sidecar.waitForReports(count)
                // Its history is written after its report: the next start reads both.
                try waitUntil("the run history names report \(count)", timeout: 30) {
                    let runs =
                        (try? String(contentsOfFile: sidecar.reportsDirectory() + "/.crashport-runs.json", encoding: .utf8)) ?? ""
                    return runs.contains("\"title\"") && runs.contains(sidecar.reportIDs().sorted().last ?? "-")
                }
            }
            return (result, crashed ? [sidecar.reportIDs().sorted().last!] : [])
        }
        try waitUntil("five sessions", timeout: 30) {
            ((try? String(contentsOfFile: sidecar.reportsDirectory() + "/.crashport-sessions.jsonl", encoding: .utf8)) ?? "")
                .split(separator: "\n").count == 5
        }
        try assertProtectedSession(reports: sidecar.reportsDirectory())
    }

    /// The Swift example (examples/swift-api, SafeMode), built with `swift build` alone: the
    /// same five starts under `crashport run`; its launch crash is Swift's trap (SIGILL).
    func testSafeModeInSwift() throws {
        let program = try AppAPITests.swiftExample() + "/SafeMode"
        let work = fresh("swift")
        let reports = work + "/reports"
        var seen: Set<String> = []
        try assertSafeMode(work: work, signal: SIGILL, function: "loadCache") {
            let run = try TestSupport.crashportRun(
                [program, work + "/cache"], reports: reports, environment: ["SWIFT_BACKTRACE": "enable=no"])
            defer { seen.formUnion(run.reportIDs) }
            return (run.result, Set(run.reportIDs).subtracting(seen).map { reports + "/" + $0 })
        }
        try assertProtectedSession(reports: reports)
    }

    /// One start of the fixture under `crashport run`: what crashport_last_run_detail said, and the run.
    func start(
        _ program: String, _ arguments: [String], reports: String, options: [String] = []
    ) throws -> (detail: [String: String], title: String, reason: String, run: CrashportRun) {
        let run = try TestSupport.crashportRun([program] + arguments, options: options, reports: reports, timeout: 120)
        let lines = run.result.stdout.split(separator: "\n").map(String.init)
        var words = (lines.first { $0.hasPrefix("detail ") } ?? "").split(separator: " ").map(String.init)
        var detail: [String: String] = [:]
        // "signal N NAME": the name is a word of its own.
        if let signal = words.firstIndex(of: "signal"), signal + 2 < words.count { detail["name"] = words.remove(at: signal + 2) }
        for index in stride(from: 0, to: words.count - 1, by: 2) { detail[words[index]] = words[index + 1] }
        detail["older"] = lines.first { $0.hasPrefix("older ") }
        func text(_ prefix: String) -> String { String(lines.first { $0.hasPrefix(prefix) }?.dropFirst(prefix.count) ?? "") }
        return (detail, text("title "), text("reason "), run)
    }

    func testTheLastRunInFull() throws {
        let work = fresh("last-run")
        let program = try build(TestSupport.fixture("api/lastrun.c"), in: work, name: "lastrun")
        let reports = work + "/reports"

        var (detail, _, _, run) = try start(program, ["crash"], reports: reports)
        XCTAssertEqual(detail["detail"], "-2", "nothing on record: \(run.result.stdout)")
        XCTAssertEqual(detail["older"], "older known 0 kind 0 guard 5a5a")
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV))
        let crash = try XCTUnwrap(run.reportIDs.first)

        var (title, reason) = ("", "")
        (detail, title, reason, run) = try start(program, ["sigkill"], reports: reports)
        XCTAssertEqual(detail["detail"], "0", run.result.stdout)
        XCTAssertEqual(detail["kind"], "2", "a crash: \(run.result.stdout)")
        XCTAssertEqual(detail["crashed"], "1")
        XCTAssertEqual(detail["abnormal"], "1")
        XCTAssertEqual(detail["launch"], "0", "after crashport_launch_completed")
        XCTAssertEqual(detail["signal"], "11")
        XCTAssertEqual(detail["name"], "SIGSEGV")
        XCTAssertEqual(detail["exit"], "-1")
        XCTAssertEqual(detail["started"], "1")
        XCTAssertEqual(detail["id"], crash)
        XCTAssertEqual(detail["path"], reports + "/" + crash)
        XCTAssertTrue(title.contains("SIGSEGV") && title.contains("parse_header"), title)
        XCTAssertFalse(reason.isEmpty, "the fault in words")
        XCTAssertEqual(detail["older"], "older known 1 kind 2 guard 5a5a", "only what the older struct holds")
        XCTAssertEqual(run.result.status, .signaled(SIGKILL))

        (detail, title, _, run) = try start(program, ["errors"], reports: reports)
        XCTAssertEqual(detail["kind"], "3", "a termination: \(run.result.stdout)")
        XCTAssertEqual(detail["abnormal"], "1")
        XCTAssertEqual(detail["signal"], "9")
        XCTAssertEqual(detail["name"], "SIGKILL")
        XCTAssertEqual(detail["oom"], "0")
        XCTAssertEqual(run.result.status, .exited(0))

        (detail, _, _, run) = try start(program, ["exit3"], reports: reports)
        XCTAssertEqual(detail["kind"], "5", "handled errors: \(run.result.stdout)")
        XCTAssertEqual(detail["errors"], "1")
        XCTAssertEqual(detail["abnormal"], "0")
        XCTAssertEqual(detail["exit"], "0")
        XCTAssertEqual(detail["signal"], "0")
        XCTAssertEqual(run.result.status, .exited(3))

        (detail, _, _, run) = try start(program, ["clean"], reports: reports)
        XCTAssertEqual(detail["kind"], "1", "clean, though its code was 3: \(run.result.stdout)")
        XCTAssertEqual(detail["exit"], "3")
        XCTAssertEqual(detail["id"], "-")
        XCTAssertEqual(detail["path"], "-")

        (detail, _, _, run) = try start(program, ["clean"], reports: reports)
        XCTAssertEqual(detail["kind"], "1")
        XCTAssertEqual(detail["exit"], "0")
        XCTAssertEqual(detail["crashed"], "0")
    }

    /// Under --trace-exit, an OOM kill in a memory cgroup: the next start learns it was
    /// OOM-killed, under memory pressure, and where (its report's title names the function).
    func testTheLastRunWasOOMKilled() throws {
        let cgroup = try makeMemoryCgroup("last-run-oom")
        defer { rmdir(cgroup) }
        let work = fresh("oom")
        let program = try build(TestSupport.fixture("api/lastrun.c"), in: work, name: "lastrun")
        let reports = work + "/reports"
        var (_, _, _, run) = try start(program, ["oom", cgroup], reports: reports, options: ["--trace-exit"])
        XCTAssertEqual(run.result.status, .signaled(SIGKILL), run.result.stderr)
        let killed = try XCTUnwrap(run.reportIDs.first, run.result.stderr)
        // The command line says the same.
        let listed = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports, "--program", program])
        XCTAssertTrue(
            listed.stdout.contains(
                "ended abnormally, report \(killed) (killed by the OOM killer (SIGKILL) in grow_forever"),
            listed.stdout)
        XCTAssertTrue(listed.stdout.contains("; the OOM killer ended it"), listed.stdout)
        var (detail, title, _) = ([String: String](), "", "")
        (detail, title, _, run) = try start(program, ["clean"], reports: reports)
        XCTAssertEqual(detail["kind"], "3", run.result.stdout)
        XCTAssertEqual(detail["oom"], "1", run.result.stdout)
        XCTAssertEqual(detail["pressure"], "1", run.result.stdout)
        XCTAssertEqual(detail["name"], "SIGKILL")
        XCTAssertEqual(detail["id"], killed)
        XCTAssertTrue(title.hasPrefix("killed by the OOM killer (SIGKILL) in grow_forever"), title)
    }

    /// Through a sidecar, a client in a memory cgroup made here, OOM-killed: its session has its
    /// memory (the limit, the OOM kill, under pressure), and its next start learns it.
    func testTheLastRunWasOOMKilledUnderTheSidecar() throws {
        let cgroup = try makeMemoryCgroup("sidecar-oom")
        defer { rmdir(cgroup) }
        let work = fresh("sidecar-oom")
        let program = try build(TestSupport.fixture("api/lastrun.c"), in: work, name: "lastrun")
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let environment = ["CRASHPORT_SOCKET": sidecar.socket]
        // In the cgroup from its start, so that its HELLO finds it there.
        let killed = try TestSupport.run(
            ["/bin/sh", "-c", "echo $$ > \"$1/cgroup.procs\" && shift && exec \"$@\"", "sh", cgroup, program, "oom", cgroup],
            environment: environment, timeout: 120)
        XCTAssertEqual(killed.status, .signaled(SIGKILL), killed.stderr)
        let sessions = sidecar.reportsDirectory() + "/.crashport-sessions.jsonl"
        try waitUntil("the session is written", timeout: 30) {
            ((try? String(contentsOfFile: sessions, encoding: .utf8)) ?? "").contains("\"oom_killed\":true")
        }
        let written = try String(contentsOfFile: sessions, encoding: .utf8)
        XCTAssertTrue(written.contains("\"under_pressure\":true"), written)
        XCTAssertTrue(written.contains("\"limit\":67108864"), written)
        let next = try TestSupport.run([program, "clean"], environment: environment)
        XCTAssertTrue(next.stdout.contains(" oom 1 pressure 1 "), next.stdout)
    }

    /// Through a sidecar: the detail comes in its HELLO_REPLY.
    func testTheLastRunInFullThroughTheSidecar() throws {
        let work = fresh("last-run-sidecar")
        let program = try build(TestSupport.fixture("api/lastrun.c"), in: work, name: "lastrun")
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let environment = ["CRASHPORT_SOCKET": sidecar.socket]
        let crashed = try TestSupport.run([program, "crash"], environment: environment)
        XCTAssertEqual(crashed.status, .signaled(SIGSEGV), crashed.stderr)
        let id = try XCTUnwrap(try sidecar.waitForReports(1).first?.id)
        try waitUntil("the run history names the report", timeout: 30) {
            ((try? String(contentsOfFile: sidecar.reportsDirectory() + "/.crashport-runs.json", encoding: .utf8)) ?? "")
                .contains("\"title\"")
        }
        let next = try TestSupport.run([program, "clean"], environment: environment)
        XCTAssertTrue(
            next.stdout.contains("detail 0 known 1 kind 2 crashed 1 abnormal 1 launch 0 consecutive 0 signal 11 SIGSEGV exit -1"),
            next.stdout)
        XCTAssertTrue(next.stdout.contains("id \(id) path \(sidecar.reportsDirectory())/\(id)\n"), next.stdout)
        XCTAssertTrue(next.stdout.contains("title ") && next.stdout.contains("parse_header"), next.stdout)
    }

    /// crashport_launch_with (Tests/Fixtures/api/launch_async.c): the program's own predicate
    /// protects after 2 launch crashes (not the threshold's 3), the protect work finishes 300 ms
    /// later on a thread of its own, and the launch waits for it; a keyed task runs once. `start`
    /// runs the fixture once in a mode, returning its result and whether it made a report.
    func assertAsynchronousProtect(
        work: String, start: (String) throws -> (result: RunResult, reported: Bool), file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        try "corrupt\n".write(toFile: work + "/cache", atomically: true, encoding: .utf8)
        for launch in 1...2 {
            let (result, reported) = try start("normal")
            XCTAssertEqual(result.status, .signaled(SIGSEGV), "launch \(launch): \(result.stdout)", file: file, line: line)
            XCTAssertTrue(reported, file: file, line: line)
            XCTAssertTrue(
                result.stdout.contains("predicate: known \(launch == 1 ? 0 : 1), \(launch - 1) launch crash(es) in a row"),
                result.stdout, file: file, line: line)
        }
        let (third, reported) = try start("normal")
        XCTAssertEqual(third.status, .exited(0), third.stdout + third.stderr, file: file, line: line)
        XCTAssertFalse(reported, file: file, line: line)
        let said = third.stdout.split(separator: "\n").map(String.init)
        let expected = [
            "predicate: known 1, 2 launch crash(es) in a row", "protect: started", "safe mode: removing",
            "task: settings reset", "task again: gone (one-shot)", "launch: ", "launched: serving", "result: protected",
        ]
        let positions = expected.map { line in said.firstIndex { $0.hasPrefix(line) } }
        XCTAssertFalse(positions.contains(nil), "\(said)", file: file, line: line)
        XCTAssertEqual(
            positions.compactMap { $0 }, positions.compactMap { $0 }.sorted(), "in order: \(said)", file: file, line: line)
        XCTAssertEqual(said.filter { $0 == "task: settings reset" }.count, 1, "\(said)", file: file, line: line)
        // The launch waited for crashport_protect_finished, 300 ms after the protect started.
        let waited = said.first { $0.hasPrefix("launch: ") }.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        XCTAssertGreaterThanOrEqual(waited, 300, "\(said)", file: file, line: line)
        let (fourth, _) = try start("normal")
        XCTAssertTrue(
            fourth.stdout.contains("last run: kind 1, 0 launch crash(es) in a row, protected 1, protect timed out 0"),
            fourth.stdout, file: file, line: line)
        XCTAssertTrue(fourth.stdout.contains("result: normal"), fourth.stdout, file: file, line: line)
    }

    /// A protect that never finishes (its timeout 500 ms): the launch goes on, and the next start
    /// knows. Then a predicate that crashes: a launch crash like any other, its report's
    /// breadcrumbs say where it came.
    func assertProtectThatNeverFinishes(
        work: String, start: (String) throws -> (result: RunResult, reported: Bool), file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        try "corrupt\n".write(toFile: work + "/cache", atomically: true, encoding: .utf8)
        for _ in 1...2 { _ = try start("normal") }
        let (never, _) = try start("never")
        XCTAssertEqual(never.status, .exited(0), never.stdout + never.stderr, file: file, line: line)
        XCTAssertTrue(never.stdout.contains("protect: started"), never.stdout, file: file, line: line)
        XCTAssertTrue(never.stdout.contains("launched: serving"), never.stdout, file: file, line: line)
        XCTAssertTrue(never.stdout.contains("result: protect timed out"), never.stdout, file: file, line: line)
        let (crashed, reported) = try start("predicate-crash")
        XCTAssertTrue(
            crashed.stdout.contains("last run: kind 1, 0 launch crash(es) in a row, protected 1, protect timed out 1"),
            crashed.stdout, file: file, line: line)
        XCTAssertEqual(crashed.status, .signaled(SIGSEGV), crashed.stdout, file: file, line: line)
        XCTAssertTrue(reported, file: file, line: line)
        let (after, _) = try start("never")
        XCTAssertTrue(
            after.stdout.contains("1 launch crash(es) in a row"), "the predicate's crash counts: \(after.stdout)", file: file,
            line: line)
    }

    func testAsynchronousLaunchProtectionUnderRun() throws {
        let work = fresh("async-run")
        let program = try build(TestSupport.fixture("api/launch_async.c"), in: work, name: "launch_async")
        for (name, check) in [("protect", assertAsynchronousProtect), ("never", assertProtectThatNeverFinishes)] {
            let reports = work + "/reports-" + name
            var seen: Set<String> = []
            try check(
                work,
                { mode in
                    let run = try TestSupport.crashportRun([program, mode, work + "/cache"], reports: reports)
                    defer { seen.formUnion(run.reportIDs) }
                    return (run.result, !Set(run.reportIDs).subtracting(seen).isEmpty)
                }, #filePath, #line)
        }
        // The predicate's crash: its report names it, and its breadcrumbs say where it came.
        let reports = work + "/reports-never"
        let events = try FileManager.default.contentsOfDirectory(atPath: reports).compactMap { id in
            FileManager.default.contents(atPath: reports + "/" + id + "/event.json").flatMap { try? Event.decode($0) }
        }
        let crash = try XCTUnwrap(
            events.first { ($0.title ?? "").contains("should_protect") }, "\(events.map { $0.title ?? "" })")
        let crumbs = (crash.breadcrumbs ?? []).compactMap(\.message)
        XCTAssertEqual(crumbs.last, "launch protection: asking the program whether to protect", "\(crumbs)")
        XCTAssertEqual(crash.launch?.crashedDuringLaunch, true)
    }

    func testAsynchronousLaunchProtectionUnderTheSidecar() throws {
        let work = fresh("async-sidecar")
        let program = try build(TestSupport.fixture("api/launch_async.c"), in: work, name: "launch_async")
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        var (count, crashes) = (0, 0)
        try assertProtectThatNeverFinishes(work: work) { mode in
            let result = try TestSupport.run(
                [program, mode, work + "/cache"], environment: ["CRASHPORT_SOCKET": sidecar.socket], timeout: 60)
            let sessions = sidecar.reportsDirectory() + "/.crashport-sessions.jsonl"
            count += 1
            // Its run is on record before the next start reads it.
            try waitUntil("run \(count)'s session", timeout: 30) {
                ((try? String(contentsOfFile: sessions, encoding: .utf8)) ?? "").split(separator: "\n").count == count
            }
            if result.status == .signaled(SIGSEGV) {
                crashes += 1
                _ = try sidecar.waitForReports(crashes)
                let newest = try XCTUnwrap(sidecar.reportIDs().sorted().last)
                try waitUntil("the run history names report \(newest)", timeout: 30) {
                    ((try? String(contentsOfFile: sidecar.reportsDirectory() + "/.crashport-runs.json", encoding: .utf8)) ?? "")
                        .contains(newest)
                }
            }
            return (result, result.status == .signaled(SIGSEGV))
        }
    }

    /// The Swift example (examples/swift-api, SafeModeAsync), built with `swift build` alone:
    /// its predicate protects after two launch crashes, its async repair takes 300 ms and the
    /// launch waits for it; the keyed task runs once.
    func testAsynchronousLaunchProtectionInSwift() throws {
        let program = try AppAPITests.swiftExample() + "/SafeModeAsync"
        let work = fresh("async-swift")
        let reports = work + "/reports"
        try "corrupt\n".write(toFile: work + "/cache", atomically: true, encoding: .utf8)
        func start() throws -> CrashportRun {
            try TestSupport.crashportRun(
                [program, work + "/cache"], reports: reports, environment: ["SWIFT_BACKTRACE": "enable=no"])
        }
        for launch in 1...2 {
            let run = try start()
            XCTAssertEqual(run.result.status, .signaled(SIGILL), "launch \(launch): \(run.result.stdout)")
        }
        let third = try start()
        XCTAssertEqual(third.result.status, .exited(0), third.result.stdout + third.result.stderr)
        let said = third.result.stdout.split(separator: "\n").map(String.init)
        let expected = [
            "last run: 2 launch crash(es) in a row", "safe mode: fetching a configuration", "task: settings reset",
            "task again: gone (one-shot)", "launch: ", "launched: serving", "result: protected",
        ]
        let positions = expected.map { line in said.firstIndex { $0.hasPrefix(line) } }
        XCTAssertFalse(positions.contains(nil), "\(said)")
        XCTAssertEqual(positions.compactMap { $0 }, positions.compactMap { $0 }.sorted(), "in order: \(said)")
        let waited = said.first { $0.hasPrefix("launch: ") }.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
        XCTAssertGreaterThanOrEqual(waited, 300, "the launch waited for the repair: \(said)")
        let fourth = try start()
        XCTAssertTrue(fourth.result.stdout.contains("protected true, protect timed out false"), fourth.result.stdout)
        XCTAssertTrue(fourth.result.stdout.contains("result: normal"), fourth.result.stdout)
    }
}
