// Termination reports built from what the sidecar learned (no live process: values in, event
// out), their titles and causes, and the watchdog inference.

import ReportModel
import Reports
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class TerminationReportTests: XCTestCase {
    func end(_ exit: ProcessExit?, oom: (UInt64, UInt64)? = nil) -> AbnormalEnd {
        var end = AbnormalEnd(pid: 42, executable: "/srv/app")
        end.exit = exit
        end.exitSource = exit == nil ? nil : "the kernel's pidfd (PIDFD_INFO_EXIT)"
        end.exitUnknown = exit == nil ? "reaped before the sidecar asked" : nil
        end.oomKills = oom.map { AbnormalEnd.OOMCount(cgroup: "/sys/fs/cgroup/memory/app", before: $0.0, after: $0.1) }
        return end
    }

    func event(_ end: AbnormalEnd) -> Event { TerminationReport.event(for: end, id: "id", timestamp: "t") }

    func testCausesAndTitles() {
        let killed = event(end(.signaled(SIGKILL), oom: (3, 3)))
        XCTAssertEqual(killed.cause, "SIGKILL")
        XCTAssertEqual(killed.title, "killed by SIGKILL")
        XCTAssertEqual(CrashLog.oneLine(killed), "/srv/app (pid 42) was killed by SIGKILL")

        let oom = event(end(.signaled(SIGKILL), oom: (3, 4)))
        XCTAssertEqual(oom.cause, "oom-kill")
        XCTAssertEqual(oom.title, "killed by the OOM killer (SIGKILL)")
        XCTAssertTrue(
            (oom.notes ?? []).contains { $0.contains("killed 1 process(es) in its memory cgroup /sys/fs/cgroup/memory/app") })

        let exited = event(end(.exited(3)))
        XCTAssertEqual(exited.cause, "exit")
        XCTAssertEqual(exited.exitCode, 3)
        XCTAssertNil(exited.signal)
        XCTAssertEqual(CrashLog.oneLine(exited), "/srv/app (pid 42) exited with status 3 without saying goodbye")

        let segv = event(end(.signaled(SIGSEGV)))
        XCTAssertEqual(segv.cause, "signal")
        XCTAssertEqual(segv.title, "killed by SIGSEGV")

        let unknown = event(end(nil))
        XCTAssertNil(unknown.cause)
        XCTAssertEqual(unknown.title, "ended without saying goodbye (exit status unknown)")
        XCTAssertTrue((unknown.notes ?? []).contains("exit status unknown: reaped before the sidecar asked"))
        XCTAssertTrue((unknown.notes ?? []).contains { $0.contains("OOM-kill counter could not be read") })
        XCTAssertEqual(event(end(nil, oom: (0, 1))).cause, "oom-kill", "an unknown end while the OOM killer was at work")
    }

    func testOnlyAnEndTheOOMKillerMayHaveMadeHasAnOOMNote() {
        func oomNotes(_ event: Event) -> [String] {
            (event.notes ?? []).filter { $0.contains("OOM killer killed") || $0.contains("OOM-kill counter") }
        }
        // The OOM killer kills with SIGKILL: a SIGSEGV or an exit says nothing about it.
        XCTAssertEqual(oomNotes(event(end(.signaled(SIGSEGV), oom: (3, 3)))), [])
        XCTAssertEqual(oomNotes(event(end(.signaled(SIGSEGV)))), [])
        XCTAssertEqual(oomNotes(event(end(.exited(3)))), [])
        XCTAssertEqual(oomNotes(event(end(.signaled(SIGKILL), oom: (3, 3)))).count, 1, "SIGKILL: whether it was the OOM killer")
        XCTAssertEqual(oomNotes(event(end(.signaled(SIGKILL)))).count, 1, "SIGKILL, the counter unreadable")
        XCTAssertEqual(oomNotes(event(end(nil))).count, 1, "an unknown end")
    }

    func testACrashLogWithoutModulesHasNoModulesHeading() {
        let log = CrashLog.full(event(end(.signaled(SIGSEGV))))
        XCTAssertFalse(log.contains("Modules:"), log)
        XCTAssertFalse(log.hasSuffix("\n"), log)
        var withModules = event(end(.signaled(SIGSEGV)))
        withModules.modules = [ModuleRecord(path: "/srv/app", base: HexAddress(0x1000), size: HexAddress(0x2000), buildID: "ab")]
        XCTAssertTrue(
            CrashLog.full(withModules).hasSuffix("Modules:\n  0x1000             /srv/app  ab"), CrashLog.full(withModules))
    }

    func testBreadcrumbsReadEarlierAreMarked() {
        var end = end(.signaled(SIGKILL))
        var area = AppArea()
        area.breadcrumbs = [Breadcrumb(timeNanoseconds: 1_000_000_000, category: "net", message: "listening")]
        area.annotations = [Annotation(key: "release", value: "app@2")]
        end.app = area
        end.appCheckedBeforeEnd = 0.46
        let event = event(end)
        XCTAssertEqual(event.breadcrumbs?.first?.message, "listening")
        XCTAssertEqual(event.release, "app@2")
        XCTAssertTrue((event.notes ?? []).contains { $0.contains("last checked 0.5 s before it ended") }, "\(event.notes ?? [])")
    }

    func testWatchdogInference() {
        XCTAssertTrue(Watchdog.inferred(signal: SIGABRT, code: 0, sender: 1))
        XCTAssertTrue(Watchdog.inferred(signal: SIGKILL, code: -6, sender: 1))
        XCTAssertFalse(Watchdog.inferred(signal: SIGABRT, code: -6, sender: 77), "abort() of the process itself")
        XCTAssertFalse(Watchdog.inferred(signal: SIGABRT, code: 0x80, sender: 1), "sent by the kernel")
        XCTAssertFalse(Watchdog.inferred(signal: SIGTERM, code: 0, sender: 1), "systemd stopping it")
        XCTAssertFalse(Watchdog.inferred(signal: SIGABRT, code: 0, sender: nil))

        var crash = Event()
        crash.kind = .crash
        crash.signal = SignalRecord(number: SIGABRT, name: "SIGABRT", code: 0, senderPID: 1)
        crash.culprit = CulpritRecord(function: "serve_forever", file: "/src/server.c", line: 42)
        Watchdog.mark(&crash)
        XCTAssertEqual(crash.cause, "watchdog")
        XCTAssertEqual(Culprit.title(crash), "SIGABRT: killed by the watchdog (inferred) in serve_forever (server.c:42)")
        Watchdog.mark(&crash)
        XCTAssertEqual(crash.notes?.count, 1, "marked once")
        crash.kind = .termination
        crash.signal = SignalRecord(number: SIGKILL, name: "SIGKILL", code: 0, senderPID: 1)
        crash.culprit = nil
        XCTAssertEqual(Culprit.title(crash), "killed by the watchdog (inferred, SIGKILL)")
    }

    func testProcessExitFromWaitStatus() {
        XCTAssertEqual(ProcessExit(waitStatus: 9), .signaled(SIGKILL))
        XCTAssertEqual(ProcessExit(waitStatus: 0x86), .signaled(SIGABRT), "with a core dump")
        XCTAssertEqual(ProcessExit(waitStatus: 3 << 8), .exited(3))
        XCTAssertEqual(ProcessExit(waitStatus: 0), .exited(0))
        XCTAssertNil(ProcessExit(waitStatus: 0x137F), "stopped by SIGSTOP")
        XCTAssertNil(ProcessExit(waitStatus: 0xFFFF), "continued")
    }
}
