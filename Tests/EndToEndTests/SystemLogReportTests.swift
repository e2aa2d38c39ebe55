// End-to-end: the system's log around a death, attached to its report as system.log. A program
// OOM-killed in a memory cgroup made here, under `crashport run` untraced (a termination report
// from its parent's view) and traced (captured at its exit): its report carries the kernel's OOM
// report, from `invoked oom-killer` through `Killed process PID`, which the kernel always prints
// (under a sidecar: AbnormalEndTests.testOOMKilledClientIsReportedAsOOMKill). A segfault's line where this kernel prints it (debug.exception-trace 1,
// and not dropped by its rate limit: the test says which when it skips).
//
// The journal half against a real systemd-journald that the test starts in mount and PID
// namespaces of its own (Tests/Fixtures/journal/with-journald), so that the machine's
// /run/systemd and /var/log are never touched and journald cannot outlive the test: a program
// logs lines through journald's native socket and crashes under `crashport run`, as root and as
// a throwaway user; each report has the crashed process's last lines and no other process's
// or user's; a system user, who has no journal of their own, gets a note instead.

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

    /// journald run by the test (root, in namespaces of its own); a program that logs two
    /// lines to the journal and segfaults, under `crashport run` as root and as a regular
    /// throwaway user; another process's line and another user's line logged before. A system
    /// user has no journal of their own: their report says journalctl could not read one.
    func testTheJournalsLastLinesOfTheCrashedProcessAndNoOneElses() throws {
        guard geteuid() == 0 else { throw XCTSkip("journald in namespaces of its own needs root") }
        let journald = ["/lib/systemd/systemd-journald", "/usr/lib/systemd/systemd-journald"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        guard let journald else { throw XCTSkip("systemd-journald is not installed") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/journalctl") else {
            throw XCTSkip("journalctl is not installed at /usr/bin/journalctl, where crashport runs it")
        }
        guard let unshare = TestSupport.which("unshare"), let runuser = TestSupport.which("runuser", also: ["/usr/sbin"])
        else { throw XCTSkip("unshare or runuser (util-linux) is not installed") }
        let namespaces = [unshare, "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc", "--kill-child"]
        let probe = try TestSupport.run(namespaces + ["/bin/true"], timeout: 10)
        guard probe.status == .exited(0) else {
            throw XCTSkip("new mount and PID namespaces cannot be made here: \(probe.stderr)")
        }
        // Regular users (uid >= 1000): journald keeps each one's lines in user-UID.journal,
        // which that user may read through an ACL; a system user's go to the system journal.
        let user = try SidecarTests.ThrowawayUser(system: false)
        defer { user.remove() }
        let other = try SidecarTests.ThrowawayUser(system: false)
        defer { other.remove() }
        // A system user's lines go to the system journal: they have no journal to read.
        let systemUser = try SidecarTests.ThrowawayUser()
        defer { systemUser.remove() }

        // The user must reach the program and the stub: copies outside the build tree.
        let directory = TestSupport.freshDirectory(in: Self.directory, "journal")
        chmod(directory, 0o755)
        let program = try TestSupport.compile(
            [TestSupport.fixture("journal/journal-lines.c")], output: directory + "/journal-lines")
        let stub = directory + "/libcrashport.so"
        try FileManager.default.copyItem(atPath: try TestSupport.stub(), toPath: stub)
        chmod(stub, 0o755)
        let rootReports = directory + "/root-reports"
        let userReports = directory + "/user-reports"
        let systemUserReports = directory + "/system-user-reports"
        for (reports, owner) in [(userReports, user), (systemUserReports, systemUser)] {
            try FileManager.default.createDirectory(atPath: reports, withIntermediateDirectories: false)
            chown(reports, owner.uid, UInt32.max)
        }
        let journaldLog = directory + "/journald.log"

        let steps = """
            crashport=$1 program=$2 root_reports=$3 user_reports=$4 user=$5 other=$6 runuser=$7
            system_user_reports=$8 system_user=$9
            timeout 20 "$runuser" -u "$other" -- "$program" exit other-user "a line of another user"
            timeout 20 "$program" exit other-process "a line of another process"
            timeout 60 "$crashport" run --reports "$root_reports" -- "$program" crash crasher "root's first line" "root's last line"
            timeout 60 "$runuser" -u "$user" -- "$crashport" run --reports "$user_reports" -- \\
                "$program" crash crasher "the user's first line" "the user's last line"
            timeout 60 "$runuser" -u "$system_user" -- "$crashport" run --reports "$system_user_reports" -- \\
                "$program" crash crasher "the system user's line"
            echo "== what the user may read"
            timeout 20 "$runuser" -u "$user" -- journalctl --no-pager --quiet --output=cat
            """
        let run = try TestSupport.run(
            namespaces + [
                TestSupport.fixture("journal/with-journald"), journald, journaldLog, "/bin/sh", "-c", steps, "steps",
                TestSupport.crashport, program, rootReports, userReports, user.name, other.name, runuser,
                systemUserReports, systemUser.name,
            ], environment: ["CRASHPORT_STUB": stub], timeout: 240)
        let journaldSaid = (try? String(contentsOfFile: journaldLog, encoding: .utf8)) ?? ""
        let context = "\(run.stdout)\n\(run.stderr)\njournald:\n\(journaldSaid)"
        XCTAssertEqual(run.status, .exited(0), context)

        // What the real journald lets the user read, without crashport: their own lines only.
        let readable = String(run.stdout.split(separator: "== what the user may read\n").last ?? "")
        XCTAssertTrue(readable.contains("the user's last line"), context)
        for line in ["a line of another user", "a line of another process", "root's last line"] {
            XCTAssertFalse(readable.contains(line), "the user reads \(line): \(context)")
        }

        let others = ["a line of another user", "a line of another process"]
        for (reports, mine, theirs) in [
            (rootReports, ["root's first line", "root's last line"], others + ["the user's"]),
            (userReports, ["the user's first line", "the user's last line"], others + ["root's"]),
        ] {
            let ids = ((try? FileManager.default.contentsOfDirectory(atPath: reports)) ?? []).filter { !$0.hasPrefix(".") }
            XCTAssertEqual(ids.count, 1, "\(reports): \(context)")
            guard ids.count == 1, let data = FileManager.default.contents(atPath: reports + "/" + ids[0] + "/event.json")
            else { continue }
            let event = try Event.decode(data)
            let pid = try XCTUnwrap(event.process?.pid?.rawValue)
            let (_, text) = try Self.systemLog(event, in: reports + "/" + ids[0])
            XCTAssertTrue(text.contains("== the journal (journalctl _PID=\(pid), the last lines before the crash) =="), text)
            // The lines in the order logged, each as journalctl prints it: "crasher[PID]: ...".
            let lines = mine.compactMap { line in text.range(of: "crasher[\(pid)]: " + line)?.lowerBound }
            XCTAssertEqual(lines.count, 2, text)
            if lines.count == 2 { XCTAssertLessThan(lines[0], lines[1], text) }
            for line in theirs { XCTAssertFalse(text.contains(line), "\(line) in \(reports)'s system.log:\n\(text)") }
        }

        // The system user's report: a journal section that says journalctl could not read.
        let ids = ((try? FileManager.default.contentsOfDirectory(atPath: systemUserReports)) ?? []).filter {
            !$0.hasPrefix(".")
        }
        XCTAssertEqual(ids.count, 1, context)
        if ids.count == 1, let data = FileManager.default.contents(atPath: systemUserReports + "/" + ids[0] + "/event.json") {
            let (_, text) = try Self.systemLog(try Event.decode(data), in: systemUserReports + "/" + ids[0])
            XCTAssertTrue(text.contains("== the journal (journalctl _PID="), text)
            XCTAssertTrue(text.contains("(the journal could not be read as the report's owner)]"), text)
            for line in others + ["the system user's line", "root's", "the user's"] {
                XCTAssertFalse(text.contains(line), "\(line) in the system user's system.log:\n\(text)")
            }
        }
    }
}
