// End-to-end: the system's log around a death, attached to its report as system.log. A program
// OOM-killed in a memory cgroup made here, under `crashport run` untraced (a termination report
// from its parent's view) and traced (captured at its exit): its report carries the kernel's OOM
// report, from `invoked oom-killer` through `Killed process PID`, which the kernel always prints
// (under a sidecar: AbnormalEndTests.testOOMKilledClientIsReportedAsOOMKill). A segfault's line where this kernel prints it (debug.exception-trace 1,
// and not dropped by its rate limit: the test says which when it skips).

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class SystemLogReportTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("system-log")

    /// The report's system.log and its record in event.json.
    static func systemLog(_ event: Event, in reportDirectory: String) throws -> (AttachmentRecord, String) {
        let record = try XCTUnwrap(
            event.attachments?.first { $0.scope == AttachmentRecord.systemScope }, "\(event.attachments ?? [])")
        XCTAssertEqual(record.file, "attachments/system.log")
        XCTAssertNil(record.error)
        let text = try String(contentsOfFile: reportDirectory + "/" + (record.file ?? ""), encoding: .utf8)
        XCTAssertEqual(record.copied, UInt64(text.utf8.count))
        return (record, text)
    }

    static func checkOOMReport(_ text: String, pid: Int32, name: String) {
        XCTAssertTrue(text.contains("== the kernel's log (/dev/kmsg) about pid \(pid) =="), text)
        XCTAssertTrue(text.contains("the report is root's"), text)
        XCTAssertTrue(text.contains(" invoked oom-killer: "), text)
        XCTAssertTrue(text.contains("Tasks state (memory values in pages):"), text)
        XCTAssertTrue(text.contains("Killed process \(pid) (\(name))"), text)
    }

    /// `crashport run`, untraced and traced, started in a 64 MiB memory cgroup (so that the
    /// child's cgroup counter is known from its start) with a program that fills it.
    func testAnOOMKillUnderCrashportRunCarriesTheKernelsOOMReport() throws {
        guard geteuid() == 0 else { throw XCTSkip("/dev/kmsg is root's here (kernel.dmesg_restrict)") }
        for traced in [false, true] {
            let cgroup = try makeMemoryCgroup("syslog-oom")
            defer { rmdir(cgroup) }
            let reports = TestSupport.freshDirectory(in: Self.directory, "oom")
            let run = try TestSupport.run(
                [
                    "/bin/sh", "-c", "echo $$ > \"$1/cgroup.procs\" && shift && exec \"$@\"", "sh", cgroup,
                    TestSupport.crashport, "run", "--reports", reports,
                ] + (traced ? ["--trace-exit"] : []) + ["--", try TraceExitTests.fixture(), "grow"],
                environment: ["CRASHPORT_STUB": try TestSupport.stub()], timeout: 120)
            XCTAssertEqual(run.status, .signaled(SIGKILL), run.stderr)
            let ids = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }
            XCTAssertEqual(ids.count, 1, run.stderr)
            guard ids.count == 1, let data = FileManager.default.contents(atPath: reports + "/" + ids[0] + "/event.json")
            else { continue }
            let event = try Event.decode(data)
            XCTAssertEqual(event.cause, "oom-kill", "traced: \(traced)")
            let pid = try XCTUnwrap(event.process?.pid?.rawValue)
            let (_, text) = try Self.systemLog(event, in: reports + "/" + ids[0])
            Self.checkOOMReport(text, pid: pid, name: "trace")
            let shown = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, ids[0]])
            XCTAssertTrue(shown.stdout.contains("[the system's log around the crash]"), shown.stdout)
        }
    }

    /// A segfault under `crashport run`: the kernel's fault line (and its Code line) in
    /// system.log, wherever the kernel printed one for it.
    func testASegfaultCarriesTheKernelsFaultLine() throws {
        guard geteuid() == 0 else { throw XCTSkip("/dev/kmsg is root's here (kernel.dmesg_restrict)") }
        let trace = (try? String(contentsOfFile: "/proc/sys/debug/exception-trace", encoding: .utf8))?.trimmingCharacters(
            in: .whitespacesAndNewlines)
        guard trace == "1" else {
            throw XCTSkip("debug.exception-trace is \(trace ?? "unreadable"): the kernel prints no fault lines")
        }
        let waiter = try Waiter.build(in: Self.directory)
        let run = try TestSupport.crashportRun([waiter], input: "crash\n")
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        let event = try run.event()
        let pid = try XCTUnwrap(event.process?.pid?.rawValue)
        let printed = try TestSupport.run(["/bin/dmesg"]).stdout.contains("[\(pid)]: segfault at ")
        guard printed else { throw XCTSkip("the kernel's rate limit (10 fault lines in 5 s) left pid \(pid)'s out") }
        let (_, text) = try Self.systemLog(event, in: run.reportsDirectory + "/" + run.reportIDs[0])
        XCTAssertTrue(text.contains("[\(pid)]: segfault at "), text)
        XCTAssertTrue(text.contains("] Code: "), text)
    }
}
