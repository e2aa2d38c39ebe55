// End-to-end: the ends of sidecar clients that no crash record describes. Real programs under
// a real `crashport watch`: one SIGKILLed from outside after it left breadcrumbs, one
// OOM-killed inside a memory cgroup made for the test, ones that exit (exit, _exit, and the raw
// exit_group system call that the stub never sees), and a client sending malformed GOODBYEs.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class AbnormalEndTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("ends")

    func fresh(_ name: String) -> String {
        TestSupport.freshDirectory(in: Self.directory, name)
    }

    /// Tests/Fixtures/ends/ends.c linked with the stub the tests preload (one library).
    var fixture: String {
        get throws {
            let libraries = try (TestSupport.stub() as NSString).deletingLastPathComponent
            return try TestSupport.compile(
                [TestSupport.fixture("ends/ends.c")], output: Self.directory + "/ends",
                flags: ["-O1", "-g", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
                linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
        }
    }

    func preloaded(_ sidecar: SidecarProcess) throws -> [String: String] {
        ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket]
    }

    /// SIGKILL from outside, after the program added breadcrumbs and an annotation and the
    /// sidecar logged that it read them: the session is abnormal, and a termination report says
    /// killed by SIGKILL (from the kernel, through the pidfd: the test reaps the program right
    /// away), with those breadcrumbs and annotations, marked as read earlier.
    func testSIGKILLedClientIsReportedWithItsBreadcrumbs() throws {
        let sidecar = try SidecarProcess(directory: fresh("sigkill"))
        let program = try Waiter(try fixture, arguments: ["crumbs"], environment: preloaded(sidecar))
        try waitUntil("the sidecar read the program's breadcrumbs:\n\(sidecar.log)", timeout: 60) {
            sidecar.log.contains("read pid \(program.pid)'s app area: 2 breadcrumb(s), 1 annotation(s)")
        }
        XCTAssertEqual(kill(program.pid, SIGKILL), 0)
        XCTAssertEqual(try program.wait().status, .signaled(SIGKILL))

        let events = try sidecar.waitForReports(1)
        let event = events[0]
        XCTAssertEqual(event.kind, .termination)
        XCTAssertEqual(event.process?.pid?.rawValue, program.pid)
        XCTAssertEqual(event.cause, "SIGKILL")
        XCTAssertEqual(event.signal?.name, "SIGKILL")
        XCTAssertEqual(event.title, "killed by SIGKILL")
        XCTAssertEqual(event.breadcrumbs?.map { $0.message ?? "" }, ["config loaded", "listening on :8080"])
        XCTAssertEqual(event.annotations, ["stage": "serving"])
        let notes = event.notes ?? []
        XCTAssertTrue(
            notes.contains { $0.contains("killed by SIGKILL, as the kernel's pidfd (PIDFD_INFO_EXIT) says") }, "\(notes)")
        XCTAssertTrue(notes.contains { $0.contains("as read from the process's memory while it ran, last checked") }, "\(notes)")
        // The summary line is logged once the report is written: just after its directory is there.
        try waitUntil("the sidecar logs the kill:\n\(sidecar.log)", timeout: 30) {
            sidecar.log.contains("(pid \(program.pid)) was killed by SIGKILL")
        }

        let session = try sidecar.session(of: program.pid)
        XCTAssertEqual(session["status"] as? String, "abnormal")
        XCTAssertEqual(session["report_id"] as? String, event.id)
        XCTAssertEqual(event.session, session["sid"] as? String)
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// Fifteen clients of one program SIGKILLed at once (a fork bomb's end, in small): every
    /// session is abnormal, but at most ten termination reports a minute are written for one
    /// program, and the log says why the others were not.
    func testTerminationReportsAreRateLimited() throws {
        let sidecar = try SidecarProcess(directory: fresh("storm"))
        let program = try fixture
        let clients = try (0..<15).map { _ in try Waiter(program, arguments: ["crumbs"], environment: preloaded(sidecar)) }
        try waitUntil("every client connected:\n\(sidecar.log)", timeout: 60) {
            clients.allSatisfy { sidecar.log.contains("client pid \($0.pid) ") }
        }
        for client in clients { kill(client.pid, SIGKILL) }
        for client in clients { XCTAssertEqual(try client.wait().status, .signaled(SIGKILL)) }
        for client in clients {
            XCTAssertEqual(try sidecar.session(of: client.pid)["status"] as? String, "abnormal")
        }
        let reports = sidecar.reportIDs()
        XCTAssertLessThanOrEqual(reports.count, 10, sidecar.log)
        XCTAssertGreaterThan(reports.count, 0, sidecar.log)
        XCTAssertTrue(sidecar.log.contains("not reported: more than 10 termination reports a minute for \(program)"), sidecar.log)
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// The memory cgroup (v1 or v2) this test process is in, as a directory, and which files
    /// set a limit there; nil when there is none to make a child of.
    func memoryCgroup() -> (directory: String, limits: [String])? {
        guard let text = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { continue }
            if parts[1].split(separator: ",").contains("memory") {
                return ("/sys/fs/cgroup/memory" + parts[2], ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"])
            }
        }
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            let directory = "/sys/fs/cgroup" + line.dropFirst(3)
            if FileManager.default.fileExists(atPath: "/sys/fs/cgroup/cgroup.controllers") {
                return (directory, ["memory.max", "memory.swap.max"])
            }
        }
        return nil
    }

    /// A client OOM-killed in a memory cgroup of 64 MiB made for the test (a child of this
    /// process's own; skipped, saying why, where none can be made): the report's cause is
    /// oom-kill, from the cgroup's own counter; traced, the report names the allocating frame.
    func testOOMKilledClientIsReportedAsOOMKill() throws {
        guard let parent = memoryCgroup() else { throw XCTSkip("no memory cgroup in /proc/self/cgroup") }
        let cgroup = parent.directory + "/crashport-oom-\(getpid())-\(UUID().uuidString.prefix(6))"
        guard mkdir(cgroup, 0o755) == 0 else {
            throw XCTSkip("cannot make a memory cgroup under \(parent.directory): \(String(cString: strerror(errno)))")
        }
        defer { rmdir(cgroup) }
        let limit = String(64 << 20)
        guard (try? limit.write(toFile: cgroup + "/" + parent.limits[0], atomically: false, encoding: .utf8)) != nil else {
            throw XCTSkip("cannot set \(parent.limits[0]) in \(cgroup)")
        }
        // No swap to escape to, where the hierarchy can say so.
        try? (parent.limits[1].hasPrefix("memory.swap") ? "0" : limit).write(
            toFile: cgroup + "/" + parent.limits[1], atomically: false, encoding: .utf8)

        // Untraced, then traced (CRASHPORT_TRACE_EXIT=1: captured at its exit stops, with the
        // allocating frame).
        for traced in [false, true] {
            let sidecar = try SidecarProcess(directory: fresh("oom"))
            // Moved into the cgroup before it runs the program: the sidecar reads the cgroup's
            // counter at the program's HELLO.
            var environment = try preloaded(sidecar)
            if traced { environment["CRASHPORT_TRACE_EXIT"] = "1" }
            let program = try Waiter(
                "/bin/sh", arguments: ["-c", "echo $$ > \"$1\"/cgroup.procs && exec \"$0\" hog", try fixture, cgroup],
                environment: environment)
            try waitUntil("the program connected:\n\(sidecar.log)", timeout: 30) {
                sidecar.log.contains("client pid \(program.pid) ")
            }
            program.trigger()
            XCTAssertEqual(try program.wait(timeout: 120).status, .signaled(SIGKILL))

            let event = try sidecar.waitForReports(1)[0]
            XCTAssertEqual(event.kind, .termination)
            XCTAssertEqual(event.cause, "oom-kill", "traced: \(traced)")
            XCTAssertEqual(event.signal?.name, "SIGKILL")
            if traced {
                XCTAssertEqual(event.culprit?.function, "hog", "\(event.crashedThreadRecord?.frames?.map(\.function) ?? [])")
                XCTAssertTrue(
                    event.title?.hasPrefix("killed by the OOM killer (SIGKILL) in hog (ends.c:") == true, event.title ?? "-")
            } else {
                XCTAssertEqual(event.title, "killed by the OOM killer (SIGKILL)")
                XCTAssertTrue(
                    (event.notes ?? []).contains {
                        $0.contains("OOM killer killed 1 process(es) in its memory cgroup \(cgroup)")
                    },
                    "\(event.notes ?? [])")
            }
            // The kernel's OOM report that killed it, beside the report (the sidecar is root here).
            if geteuid() == 0 {
                let (_, text) = try SystemLogReportTests.systemLog(
                    event, in: sidecar.reportsDirectory() + "/" + (event.id ?? ""))
                SystemLogReportTests.checkOOMReport(text, pid: program.pid, name: "ends")
            }
            let session = try sidecar.session(of: program.pid, executable: event.process?.executable)
            XCTAssertEqual(session["status"] as? String, "abnormal")
            XCTAssertEqual(session["report_id"] as? String, event.id)
            XCTAssertEqual(sidecar.reportIDs().count, 1, "one report per death:\n\(sidecar.log)")
            XCTAssertEqual(sidecar.stop(), 0)
        }
    }

    /// exit(3) and _exit(4) say GOODBYE: no report, sessions exited. An exec closes the
    /// connection of a process that lives on: that run's session ends as exited too, and the new
    /// image has a session of its own. The raw exit_group system call says nothing: its non-zero
    /// exit is an abnormal end, reported with cause exit and its code.
    func testExitsSayGoodbyeAndARawExitDoesNot() throws {
        let sidecar = try SidecarProcess(directory: fresh("exit"))
        let program = try fixture
        for (mode, code) in [("exit", Int32(3)), ("_exit", Int32(4)), ("exec", Int32(0))] {
            let client = try Waiter(program, arguments: [mode, String(code)], environment: preloaded(sidecar))
            XCTAssertEqual(try client.crash().status, .exited(code), mode)
            XCTAssertEqual(try sidecar.session(of: client.pid)["status"] as? String, "exited", "\(mode):\n\(sidecar.log)")
            if mode == "exec" {
                try waitUntil("both runs of pid \(client.pid) have a session:\n\(sidecar.log)", timeout: 60) {
                    sidecar.sessions().filter { ($0["pid"] as? Int).map(Int32.init) == client.pid }.count == 2
                }
                let statuses = sidecar.sessions().filter { ($0["pid"] as? Int).map(Int32.init) == client.pid }.map {
                    $0["status"] as? String
                }
                XCTAssertEqual(statuses, ["exited", "exited"])
            }
        }
        XCTAssertEqual(sidecar.reportIDs(), [], sidecar.log)

        let raw = try Waiter(program, arguments: ["raw", "5"], environment: preloaded(sidecar))
        XCTAssertEqual(try raw.crash().status, .exited(5))
        let event = try sidecar.waitForReports(1)[0]
        XCTAssertEqual(event.process?.pid?.rawValue, raw.pid)
        XCTAssertEqual(event.kind, .termination)
        XCTAssertEqual(event.cause, "exit")
        XCTAssertEqual(event.exitCode, 5)
        XCTAssertNil(event.signal)
        XCTAssertEqual(event.title, "exited with status 5 without saying goodbye", "\(event.notes ?? [])\n\(sidecar.log)")
        XCTAssertEqual(try sidecar.session(of: raw.pid)["status"] as? String, "abnormal")
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// Sends raw bytes on a new connection to the sidecar (the kernel's credentials name this
    /// test process); the connection is returned open.
    func connect(_ sidecar: SidecarProcess) throws -> Int32 {
        switch UnixSockets.open(sidecar.socket, type: Int32(SOCK_SEQPACKET.rawValue)) {
        case .success(let fd): return fd
        case .failure(let error): throw TestFailure("connect: \(error)")
        }
    }

    /// A GOODBYE that is short, of another protocol version, or with its reserved field set is
    /// rejected with a log line naming it and why; the sidecar serves on (a real crash after
    /// them is still reported).
    func testMalformedGoodbyesAreRejected() throws {
        let sidecar = try SidecarProcess(directory: fresh("goodbye"))
        let valid = GoodbyeMessage.encode(exitStatus: 0)
        var short = Array(valid.prefix(20))
        short[8] = 20  // its size field says 20, as many bytes as arrive
        var version = valid
        version[4] = 99
        var reserved = valid
        reserved[20] = 1
        for bytes in [short, version, reserved] {
            let fd = try connect(sidecar)
            defer { close(fd) }
            XCTAssertEqual(send(fd, bytes, bytes.count, 0), bytes.count)
        }
        for reason in [
            "rejected a GOODBYE from pid \(getpid()): a goodbye of 20 bytes (expected 24)",
            "rejected a GOODBYE from pid \(getpid()): unsupported protocol version 99",
            "rejected a GOODBYE from pid \(getpid()): a goodbye with reserved = 1",
        ] {
            try waitUntil("the log says \(reason):\n\(sidecar.log)", timeout: 30) { sidecar.log.contains(reason) }
        }
        let waiter = try Waiter.build(in: Self.directory)
        let program = try Waiter(waiter, environment: preloaded(sidecar))
        XCTAssertEqual(try program.crash().status, .signaled(SIGSEGV))
        XCTAssertEqual(try sidecar.waitForReports(1)[0].kind, .crash)
        XCTAssertEqual(sidecar.stop(), 0)
    }
}
