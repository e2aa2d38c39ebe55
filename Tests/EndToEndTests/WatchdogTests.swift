// End-to-end: systemd's watchdog, inferred. Without systemd: a new pid namespace (unshare
// --pid --fork --mount-proc) whose pid 1 is a tiny init (a shell) that starts `crashport run`
// on a hanging service, reads the service's pid, and sends it SIGABRT, as systemd's
// WatchdogSec= does from pid 1. The stub records the sender as the service sees it: pid 1.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class WatchdogTests: XCTestCase {
    func testSIGABRTFromPidOneIsAWatchdogKill() throws {
        guard getuid() == 0 else { throw XCTSkip("a new pid namespace with its own /proc needs root here") }
        guard let unshare = TestSupport.which("unshare", also: ["/usr/bin"]) else { throw XCTSkip("no unshare (util-linux)") }
        let directory = TestSupport.temporaryDirectory("watchdog")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = try TestSupport.compile(
            [TestSupport.fixture("ends/watchdog.c")], output: directory + "/service", flags: ["-O1", "-g"])
        let reports = directory + "/reports"
        let fifo = directory + "/ready"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        // pid 1: starts crashport run, waits for the service's "ready PID" line, aborts it,
        // then waits for crashport run (which ends as the service did).
        let initScript = """
            "$0" run --reports "$1" -- "$2" > "$3" &
            read word pid < "$3"
            kill -s ABRT "$pid"
            wait $!
            """
        let result = try TestSupport.run(
            [
                unshare, "--pid", "--fork", "--mount-proc", "/bin/sh", "-c", initScript, TestSupport.crashport, reports,
                service, fifo,
            ],
            environment: ["CRASHPORT_STUB": try TestSupport.stub()], timeout: 120)
        guard !result.stderr.contains("unshare failed"), !result.stderr.contains("unshare: ") else {
            throw XCTSkip("cannot make a pid namespace here: \(result.stderr)")
        }
        let ids = ((try? FileManager.default.contentsOfDirectory(atPath: reports)) ?? []).filter { !$0.hasPrefix(".") }
        XCTAssertEqual(ids.count, 1, "\(result.status) \(result.stderr)")
        guard let id = ids.first, let data = FileManager.default.contents(atPath: reports + "/" + id + "/event.json") else {
            return
        }
        let event = try Event.decode(data)
        XCTAssertEqual(event.signal?.name, "SIGABRT")
        XCTAssertEqual(event.signal?.senderPID, 1, "the sender as the service saw it")
        XCTAssertEqual(event.signal?.codeName, "SI_USER")
        XCTAssertEqual(event.cause, "watchdog")
        XCTAssertTrue((event.notes ?? []).contains { $0.hasPrefix("watchdog (inferred): the signal was sent by pid 1") })
        XCTAssertTrue(
            event.title?.hasPrefix("SIGABRT: killed by the watchdog (inferred) in serve_forever (watchdog.c:") == true,
            event.title ?? "no title")
        XCTAssertTrue(result.stderr.contains("SIGABRT: killed by the watchdog (inferred) in serve_forever"), result.stderr)
    }

    /// `crashport run` as the service's main process, as in `ExecStart=crashport run -- ./server`:
    /// pid 1 sends its SIGABRT to crashport, which passes it on to the program, a deadlocked one
    /// under --hang-ms that already has a hang report. The program's report is the watchdog's
    /// kill (inferred, relayed), linked to the hang report, and crashport ends as it did.
    func testWatchdogSIGABRTToCrashportRunIsPassedOnAndLinked() throws {
        guard getuid() == 0 else { throw XCTSkip("a new pid namespace with its own /proc needs root here") }
        guard let unshare = TestSupport.which("unshare", also: ["/usr/bin"]) else { throw XCTSkip("no unshare (util-linux)") }
        let directory = TestSupport.temporaryDirectory("watchdog-run")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = try TestSupport.compile(
            [TestSupport.fixture("trace/trace.c")], output: directory + "/service", flags: ["-O1", "-g", "-pthread"])
        let reports = directory + "/reports"
        let log = directory + "/run.log"
        // Every wait is bounded (30 s).
        let initScript = """
            "$0" run --reports "$1" --hang-ms 300 -- "$2" deadlock 2> "$3" &
            crashport=$!
            i=0; while ! grep -q "no heartbeat for" "$3" && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
            kill -s ABRT $crashport
            wait $crashport
            echo "crashport ended $?"
            """
        let result = try TestSupport.run(
            [
                unshare, "--pid", "--fork", "--mount-proc", "/bin/sh", "-c", initScript, TestSupport.crashport, reports, service,
                log,
            ],
            environment: ["CRASHPORT_STUB": try TestSupport.stub()], timeout: 120)
        guard !result.stderr.contains("unshare failed"), !result.stderr.contains("unshare: ") else {
            throw XCTSkip("cannot make a pid namespace here: \(result.stderr)")
        }
        let stderr = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        XCTAssertTrue(result.stdout.contains("crashport ended 134"), "ended as the program did (SIGABRT): \(result.stdout)")
        let events = ((try? FileManager.default.contentsOfDirectory(atPath: reports)) ?? []).filter { !$0.hasPrefix(".") }
            .compactMap { FileManager.default.contents(atPath: reports + "/" + $0 + "/event.json") }
            .compactMap { try? Event.decode($0) }
        guard let hang = events.first(where: { $0.kind == .hang }), let killed = events.first(where: { $0.kind == .crash })
        else { return XCTFail("\(events.map(\.kind)):\n\(stderr)") }
        XCTAssertEqual(killed.signal?.name, "SIGABRT")
        XCTAssertEqual(killed.cause, "watchdog")
        XCTAssertEqual(killed.related, hang.id)
        let notes = killed.notes ?? []
        XCTAssertTrue(
            notes.contains { $0.hasPrefix("watchdog (inferred): crashport run received this SIGABRT from pid 1") }, "\(notes)")
        XCTAssertTrue(notes.contains("the process had hung before: hang report \(hang.id ?? "")"), "\(notes)")
        XCTAssertTrue(killed.title?.hasPrefix("SIGABRT: killed by the watchdog (inferred) in ") == true, killed.title ?? "-")
    }
}
