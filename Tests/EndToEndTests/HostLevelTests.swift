// End-to-end: the host level (`crashport watch --host`), the machine's core handler, with the
// real kernel. Each test saves /proc/sys/kernel/core_pattern and core_pipe_limit and puts them
// back when it ends, failed or not; it starts a real root sidecar with its own host directory,
// crashes programs that load no stub (Tests/Fixtures/host: dynamic and static, a daemon's child
// whose parent has exited, a library constructor before main, Rust with panic = "abort"), and
// reads the reports the sidecar wrote from the core streams.
//
// Runs only as root with a writable core_pattern; skipped with the reason otherwise.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// What every host-level test does: the pattern reserved and put back, a root sidecar with the
/// host level in a host directory of the test's own, the fixture programs.
class HostLevelTestCase: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("host")
    static let patternFile = CorePattern.patternFile

    func fresh(_ name: String) -> String {
        let path = TestSupport.freshDirectory(in: Self.directory, name)
        chmod(path, 0o755)
        return path
    }

    static func read(_ file: String) -> String {
        ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").trimmingCharacters(in: .newlines)
    }

    static func write(_ text: String, to file: String) {
        try? (text + "\n").write(toFile: file, atomically: false, encoding: .utf8)
    }

    /// The pattern as the test found it (put back however the test ends).
    var savedPattern = ""
    /// Each test directory's host directory.
    var hostDirectories: [String: String] = [:]

    override func setUpWithError() throws {
        if let why = CorePattern.unavailable { throw XCTSkip("the host level cannot be installed: \(why)") }
        let reservation = try CorePattern.Reservation()
        savedPattern = reservation.pattern
        addTeardownBlock { reservation.release() }
    }

    /// A root sidecar with the host level, its sockets and records in `directory`/host.
    /// (The host directory is short: the pipe mode's pattern names it, and the kernel keeps 127 bytes.)
    func hostSidecar(_ directory: String, mode: String? = nil, arguments: [String] = []) throws -> SidecarProcess {
        let host = hostDirectories[directory] ?? "/tmp/cph-" + UUID().uuidString.prefix(6)
        if hostDirectories[directory] == nil {
            hostDirectories[directory] = host
            addTeardownBlock { try? FileManager.default.removeItem(atPath: host) }
        }
        let sidecar = try SidecarProcess(
            directory: directory,
            arguments: ["--host", "--host-directory", host] + (mode.map { ["--host-mode", $0] } ?? []) + arguments)
        try waitUntil("the sidecar installs the host level; log:\n\(sidecar.log)", timeout: 30) {
            sidecar.log.contains("host: the machine's core handler")
        }
        return sidecar
    }

    /// Tests/Fixtures/host/host.c, dynamic or static, in `directory` (which a throwaway user can read).
    func hostProgram(_ directory: String, static isStatic: Bool = false) throws -> String {
        let output = directory + (isStatic ? "/crasher-static" : "/crasher")
        return try TestSupport.compile(
            [TestSupport.fixture("host/host.c")], output: output,
            flags: ["-O2", "-g", "-pthread"] + (isStatic ? ["-static"] : []))
    }

    /// The names of the crashed thread's frames, innermost first.
    func crashedFrames(_ event: Event) -> [String] {
        (event.crashedThreadRecord?.frames ?? []).map { $0.function ?? "?" }
    }
}

final class HostLevelTests: HostLevelTestCase {

    /// A stubless program, crashed as root with several threads under the best socket mode the
    /// kernel has: reported once, by the host level, with every thread and the frames `crashport
    /// run` gives for the same program.
    func testStublessCrashIsReportedWithRunsFrames() throws {
        let directory = fresh("socket")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory, arguments: ["--keep-core"])
        XCTAssertTrue(Self.read(Self.patternFile).hasPrefix("@"), Self.read(Self.patternFile))
        let crashed = try TestSupport.run([program, "threads", "3"])
        XCTAssertEqual(crashed.status, .signaled(SIGSEGV))
        let events = try sidecar.waitForReports(1, uid: 0)
        XCTAssertEqual(events.count, 1, sidecar.log)
        let event = try XCTUnwrap(events.first)
        XCTAssertEqual(event.source, "host")
        XCTAssertEqual(event.kind, .crash)
        XCTAssertEqual(event.signal?.number, SIGSEGV)
        XCTAssertEqual(event.signal?.faultAddress?.value, 0)
        XCTAssertEqual(event.threads?.count, 4, "every thread of the core")
        XCTAssertTrue(containsInOrder(crashedFrames(event), ["crash_here", "call_crash", "main"]), "\(crashedFrames(event))")
        // The same program under crashport run (the task level): the same crashed-thread frames.
        let reports = directory + "/run-reports"
        _ = try TestSupport.run([TestSupport.crashport, "run", "--reports", reports, "--", program, "threads", "3"])
        let runEvents = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }
        let runEvent = try Event.decode(
            try XCTUnwrap(FileManager.default.contents(atPath: reports + "/" + XCTUnwrap(runEvents.first) + "/event.json")))
        XCTAssertEqual(
            crashedFrames(event).prefix(3), crashedFrames(runEvent).prefix(3), "host level and crashport run differ")
        // The fault explained from the core stream as from a live capture: the same instruction
        // and verdict, and the crashed frame's variables.
        XCTAssertNotNil(event.fault?.diagnosis?.rule, "\(String(describing: event.fault))")
        XCTAssertEqual(event.fault?.instruction?.text, runEvent.fault?.instruction?.text)
        XCTAssertEqual(event.fault?.diagnosis?.rule, runEvent.fault?.diagnosis?.rule)
        XCTAssertEqual(
            event.crashedThreadRecord?.frames?.first?.vars?.map(\.name),
            runEvent.crashedThreadRecord?.frames?.first?.vars?.map(\.name))
        // --keep-core kept the stream: gdb on that core shows the frames the report names.
        let report = sidecar.reportsDirectory(uid: 0) + "/" + (try XCTUnwrap(sidecar.reportIDs(uid: 0).first))
        let core = directory + "/core"
        XCTAssertEqual(
            try TestSupport.run(["/bin/sh", "-c", "zstd -q -d -c '\(report)/core.zst' > '\(core)'"]).status, .exited(0))
        if let gdb = TestSupport.which("gdb") {
            let result = try TestSupport.run([gdb, "-q", "-batch", "-nx", "-ex", "bt", program, core], timeout: 120)
            // gdb shows frame #0 as it loads the core, then the backtrace: from the last #0.
            let lines = result.stdout.split(separator: "\n").filter { $0.hasPrefix("#") }
            let backtrace = lines[(lines.lastIndex { $0.hasPrefix("#0 ") } ?? 0)...]
            let frames = backtrace.compactMap { line in
                line.split(separator: " ").first { word in
                    ["crash_here", "call_crash", "main"].contains(String(word))
                }.map(String.init)
            }
            XCTAssertEqual(frames, ["crash_here", "call_crash", "main"], result.stdout)
        }
        XCTAssertEqual(sidecar.stop(), 0)
        XCTAssertEqual(Self.read(Self.patternFile), savedPattern, "the pattern is put back at SIGTERM")
    }

    /// Pipe mode, a static program (no stub can be preloaded into it), crashed by a throwaway
    /// user: reported into that user's directory, as that user's, by the pipe helper through the
    /// sidecar.
    func testPipeModeReportsAStaticProgramToItsUser() throws {
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("pipe")
        let program = try hostProgram(directory, static: true)
        let sidecar = try hostSidecar(directory, mode: "pipe")
        XCTAssertTrue(Self.read(Self.patternFile).hasPrefix("|"), Self.read(Self.patternFile))
        let crashed = try TestSupport.run(["/usr/sbin/runuser", "-u", user.name, "--", program, "segv"])
        XCTAssertNotEqual(crashed.status, .exited(0))
        let event = try XCTUnwrap(sidecar.waitForReports(1, uid: user.uid).first)
        XCTAssertEqual(event.source, "host")
        XCTAssertTrue(containsInOrder(crashedFrames(event), ["crash_here", "call_crash", "main"]), "\(crashedFrames(event))")
        // The kernel held the process while its /proc was read (until the helper was told).
        XCTAssertFalse((event.notes ?? []).contains { $0.contains("unreadable") }, "\(event.notes ?? [])")
        var info = stat()
        XCTAssertEqual(stat(sidecar.reportsDirectory(uid: user.uid), &info), 0)
        XCTAssertEqual(info.st_uid, user.uid, "the user's reports are the user's")
        XCTAssertTrue(sidecar.reportIDs(uid: 0).isEmpty, "nothing in root's reports")
        XCTAssertEqual(sidecar.stop(), 0)
        XCTAssertEqual(Self.read(Self.patternFile), savedPattern)
    }

    /// A daemon's child, crashing after its parent has exited (no `crashport run` could still be
    /// there), and a crash in a library constructor before main: both reported by the host level.
    func testDaemonChildAndConstructorCrashesAreReported() throws {
        let directory = fresh("daemon")
        let program = try hostProgram(directory)
        let library = try TestSupport.compile(
            [TestSupport.fixture("host/ctor.c")], output: directory + "/libctor.so", flags: ["-O2", "-g", "-shared", "-fPIC"])
        let early = try TestSupport.compile(
            [TestSupport.fixture("host/ctor-main.c")], output: directory + "/early", flags: ["-O2", "-g"],
            linkFlags: [library, "-Wl,-rpath," + directory])
        let sidecar = try hostSidecar(directory)
        let pidFile = directory + "/daemon.pid"
        XCTAssertEqual(try TestSupport.run([program, "daemon", pidFile]).status, .exited(0))
        var events = try sidecar.waitForReports(1, uid: 0)
        let daemonPID = Int32(Self.read(pidFile))
        XCTAssertEqual(events.first?.process?.pid?.rawValue, daemonPID)
        XCTAssertTrue(containsInOrder(crashedFrames(events[0]), ["crash_here", "call_crash", "main"]))
        XCTAssertEqual(try TestSupport.run([early]).status, .signaled(SIGSEGV))
        events = try sidecar.waitForReports(2, uid: 0)
        let constructor = try XCTUnwrap(events.first { $0.process?.pid?.rawValue != daemonPID })
        XCTAssertEqual(constructor.source, "host")
        XCTAssertEqual(crashedFrames(constructor).first, "crash_in_constructor", "\(crashedFrames(constructor))")
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// A program that loads the stub and reports through this sidecar is reported once, by its
    /// stub: the host level answers its core with no core at all.
    func testStubCrashIsReportedOnceByTheStub() throws {
        let directory = fresh("stub")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory)
        let crashed = try TestSupport.run(
            [program, "segv"], environment: ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(crashed.status, .signaled(SIGSEGV))
        _ = try sidecar.waitForReports(1, uid: 0)
        try waitUntil("the host level declines the stub's crash; log:\n\(sidecar.log)", timeout: 30) {
            sidecar.log.contains("reported by its stub; not again")
        }
        let events = try sidecar.events(uid: 0)
        XCTAssertEqual(events.count, 1, sidecar.log)
        XCTAssertEqual(events.first?.source, "stub")
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// A sidecar killed with SIGKILL cannot put its pattern back; `crashport host restore` does,
    /// from its record (what the Debian package's removal runs), and refuses while a sidecar
    /// holds the pattern.
    func testHostRestorePutsBackWhatAKilledSidecarLeft() throws {
        let directory = fresh("restore")
        let sidecar = try hostSidecar(directory)
        let host = try XCTUnwrap(hostDirectories[directory])
        let held = try TestSupport.run([TestSupport.crashport, "host", "restore", "--host-directory", host])
        XCTAssertEqual(held.status, .exited(1), held.stdout)
        XCTAssertTrue(held.stdout.contains("held by the running sidecar, pid \(sidecar.pid)"), held.stdout)
        XCTAssertNotEqual(Self.read(Self.patternFile), savedPattern)
        _ = sidecar.stop(SIGKILL)
        XCTAssertNotEqual(Self.read(Self.patternFile), savedPattern, "a killed sidecar leaves its pattern")
        // As CRASHPORT_HOST_DIRECTORY names it too, as every command that looks for the machine's.
        let restored = try TestSupport.run(
            [TestSupport.crashport, "host", "restore"], environment: ["CRASHPORT_HOST_DIRECTORY": host])
        XCTAssertEqual(restored.status, .exited(0), restored.stdout + restored.stderr)
        XCTAssertEqual(Self.read(Self.patternFile), savedPattern, restored.stdout)
        let again = try TestSupport.run([TestSupport.crashport, "host", "restore", "--host-directory", host])
        XCTAssertEqual(again.status, .exited(0))
        XCTAssertTrue(again.stdout.contains("nothing to put back"), again.stdout)
    }

    /// Launch protection holds at the host level: a program linked with the stub but run without
    /// a watcher crashes at launch three times, each seen only by the host level (the kernel's
    /// core); its fourth start, connected to the same sidecar, hears the three and runs its
    /// protect work before its launch work (examples/c/safe-mode.c).
    func testLaunchCrashesSeenByTheHostLevelProtectTheNextLaunch() throws {
        let directory = fresh("protect")
        let libraries = (try TestSupport.stub() as NSString).deletingLastPathComponent
        let program = try TestSupport.compile(
            [TestSupport.repositoryRoot + "/examples/c/safe-mode.c"], output: directory + "/safe-mode",
            flags: ["-O1", "-g", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
        let sidecar = try hostSidecar(directory)
        let cache = directory + "/cache"
        try "corrupt\n".write(toFile: cache, atomically: true, encoding: .utf8)
        for launch in 1...3 {
            let crashed = try TestSupport.run([program, cache])
            XCTAssertEqual(crashed.status, .signaled(SIGSEGV), crashed.stderr)
            XCTAssertTrue(crashed.stderr.contains("crash reporting is off"), "no watcher: \(crashed.stderr)")
            let events = try sidecar.waitForReports(launch, uid: 0)
            XCTAssertTrue(events.allSatisfy { $0.source == "host" }, sidecar.log)
        }
        try waitUntil("three launch crashes on record", timeout: 30) {
            Self.read(sidecar.reportsDirectory(uid: 0) + "/.crashport-runs.json").contains("\"consecutive_launch_crashes\" : 3")
        }
        let fourth = try TestSupport.run([program, cache], environment: ["CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(fourth.status, .exited(0), fourth.stderr)
        XCTAssertTrue(fourth.stdout.contains("last run: crash by SIGSEGV, 3 launch crash(es) in a row"), fourth.stdout)
        XCTAssertTrue(fourth.stdout.contains("safe mode: removing \(cache)"), fourth.stdout)
        XCTAssertTrue(fourth.stdout.contains("launched after the protect work"), fourth.stdout)
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// Under `crashport run` the levels cooperate too: a static program (no stub) is reported by
    /// the host level alone (the launcher writes no stackless report of the same crash), and a
    /// program whose stub reported to the launcher is not reported again by the host level (the
    /// launcher's mark).
    func testCrashportRunAndTheHostLevelReportEachCrashOnce() throws {
        let directory = fresh("run")
        let dynamic = try hostProgram(directory)
        let staticProgram = try hostProgram(directory, static: true)
        let sidecar = try hostSidecar(directory)
        let environment = ["CRASHPORT_HOST_DIRECTORY": try XCTUnwrap(hostDirectories[directory])]
        let runReports = directory + "/run-reports"
        let plain = try TestSupport.run(
            [TestSupport.crashport, "run", "--reports", runReports, "--", staticProgram, "segv"], environment: environment)
        XCTAssertEqual(plain.status, .signaled(SIGSEGV))
        XCTAssertTrue(plain.stderr.contains("was reported by the host level"), plain.stderr)
        let hostEvent = try XCTUnwrap(sidecar.waitForReports(1, uid: 0).first)
        XCTAssertEqual(hostEvent.source, "host")
        func runReportCount() -> Int {
            ((try? FileManager.default.contentsOfDirectory(atPath: runReports)) ?? []).filter { !$0.hasPrefix(".") }.count
        }
        XCTAssertEqual(runReportCount(), 0, "no second, stackless report of the same crash")

        let stubbed = try TestSupport.run(
            [TestSupport.crashport, "run", "--reports", runReports, "--", dynamic, "segv"], environment: environment)
        XCTAssertEqual(stubbed.status, .signaled(SIGSEGV))
        XCTAssertEqual(runReportCount(), 1, stubbed.stderr)
        try waitUntil("the host level declines the launcher's crash; log:\n\(sidecar.log)", timeout: 30) {
            sidecar.log.contains("reported by its stub; not again")
        }
        XCTAssertEqual(sidecar.reportIDs(uid: 0).count, 1, sidecar.log)
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// --host-previous chain: the pipe handler crashport replaced (here a script standing in for
    /// systemd-coredump) still gets every core, whole and with its pattern's arguments, while the
    /// process is held: the one crashport reports, and the one a stub reported; stopping puts that
    /// handler's pattern back.
    func testPreviousPipeHandlerIsHandedEachCore() throws {
        let directory = fresh("chain")
        let program = try hostProgram(directory)
        let previous = "/tmp/cphp-" + UUID().uuidString.prefix(6)
        try FileManager.default.createDirectory(atPath: previous, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: previous) }
        try "cat > \"$(dirname \"$0\")/core.$1\"; echo \"$@\" > \"$(dirname \"$0\")/args.$1\"\n".write(
            toFile: previous + "/prev.sh", atomically: true, encoding: .utf8)
        let pattern = "|/bin/sh \(previous)/prev.sh %P %s %e %u"
        Self.write(pattern, to: Self.patternFile)
        let sidecar = try hostSidecar(directory, arguments: ["--host-previous", "chain"])
        XCTAssertTrue(sidecar.log.contains("to which each core is handed on"), sidecar.log)
        let crasher = Process()
        crasher.executableURL = URL(fileURLWithPath: program)
        crasher.arguments = ["segv"]
        try crasher.run()
        crasher.waitUntilExit()
        let pid = crasher.processIdentifier
        let event = try XCTUnwrap(sidecar.waitForReports(1, uid: 0).first)
        XCTAssertEqual(event.source, "host")
        XCTAssertEqual(Self.read(previous + "/args.\(pid)"), "\(pid) 11 crasher 0")
        let core = try XCTUnwrap(FileManager.default.contents(atPath: previous + "/core.\(pid)"))
        XCTAssertEqual(Array(core.prefix(4)), [0x7F, 0x45, 0x4C, 0x46])
        if let gdb = TestSupport.which("gdb") {
            let result = try TestSupport.run(
                [gdb, "-q", "-batch", "-nx", "-ex", "bt", program, previous + "/core.\(pid)"], timeout: 120)
            XCTAssertTrue(result.stdout.contains("crash_here"), "the handed-on core is whole:\n\(result.stdout)")
        }
        // A crash the stub reports is not reported again, but its core is still handed on.
        let stubbed = Process()
        stubbed.executableURL = URL(fileURLWithPath: program)
        stubbed.arguments = ["segv"]
        stubbed.environment = ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket]
        try stubbed.run()
        stubbed.waitUntilExit()
        try waitUntil("the stub's crash is handed on; log:\n\(sidecar.log)", timeout: 30) {
            FileManager.default.fileExists(atPath: previous + "/args.\(stubbed.processIdentifier)")
        }
        // The stub's report is written after its capture, the core handed on after the death:
        // either may come first.
        try waitUntil("one report each, the second the stub's; log:\n\(sidecar.log)", timeout: 30) {
            sidecar.reportIDs(uid: 0).count >= 2
        }
        XCTAssertEqual(sidecar.reportIDs(uid: 0).count, 2, "one report each, the second the stub's")
        XCTAssertEqual(sidecar.stop(), 0)
        XCTAssertEqual(Self.read(Self.patternFile), pattern)
    }

    /// Pipe mode with its sidecar gone (SIGKILL: the pattern stays): the helper the kernel starts
    /// finds no sidecar and writes the report itself, where the sidecar wrote (its record says).
    func testPipeHelperReportsWhenNoSidecarAnswers() throws {
        let directory = fresh("alone")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory, mode: "pipe")
        sidecar.stop(SIGKILL)
        XCTAssertTrue(Self.read(Self.patternFile).hasPrefix("|"), "a killed sidecar leaves its pattern")
        XCTAssertEqual(try TestSupport.run([program, "segv"]).status, .signaled(SIGSEGV))
        let event = try XCTUnwrap(sidecar.waitForReports(1, uid: 0).first)
        XCTAssertEqual(event.source, "host")
        XCTAssertTrue(containsInOrder(crashedFrames(event), ["crash_here", "call_crash", "main"]), "\(crashedFrames(event))")
    }

    /// A Rust program built with panic = "abort": its abort is reported by the host level.
    func testRustPanicAbortIsReported() throws {
        let home = ProcessInfo.processInfo.environment["HOME"] ?? "/root"
        guard let rustc = TestSupport.which("rustc", also: [home + "/.cargo/bin", "/root/.cargo/bin"]) else {
            throw XCTSkip("rustc not found: the Rust fixture cannot be built")
        }
        let directory = fresh("rust")
        let program = directory + "/panic"
        let built = try TestSupport.run(
            [rustc, "-g", "-C", "panic=abort", "-o", program, TestSupport.fixture("rust/panic.rs")])
        guard built.status == .exited(0) else { throw TestFailure("rustc panic.rs failed:\n\(built.stderr)") }
        let sidecar = try hostSidecar(directory)
        XCTAssertEqual(try TestSupport.run([program]).status, .signaled(SIGABRT))
        let event = try XCTUnwrap(sidecar.waitForReports(1, uid: 0).first)
        XCTAssertEqual(event.source, "host")
        XCTAssertEqual(event.signal?.number, SIGABRT)
        XCTAssertTrue(crashedFrames(event).contains { $0.contains("balance") }, "\(crashedFrames(event))")
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// A sidecar killed with SIGKILL leaves its pattern; the next start notices it is its own,
    /// takes what it replaced from its record, and a SIGTERM puts back the pattern found first.
    /// A pattern someone else sets while it runs is never overwritten back.
    func testStalePatternAndAnotherToolsPattern() throws {
        let directory = fresh("stale")
        let first = try hostSidecar(directory)
        let ours = Self.read(Self.patternFile)
        XCTAssertNotEqual(ours, savedPattern)
        first.stop(SIGKILL)
        XCTAssertEqual(Self.read(Self.patternFile), ours, "a killed sidecar cannot put it back")
        // The machine's host directory from CRASHPORT_HOST_DIRECTORY, as `crashport run` finds it.
        let status = try TestSupport.run(
            [TestSupport.crashport, "host", "status"],
            environment: ["CRASHPORT_HOST_DIRECTORY": try XCTUnwrap(hostDirectories[directory])])
        XCTAssertTrue(status.stdout.contains("not running"), status.stdout)
        let second = try hostSidecar(directory)
        XCTAssertTrue(second.log.contains("found its own pattern left by pid \(first.pid)"), second.log)
        XCTAssertEqual(second.stop(), 0)
        XCTAssertEqual(Self.read(Self.patternFile), savedPattern)

        let third = try hostSidecar(directory)
        Self.write("core.other-tool", to: Self.patternFile)
        try waitUntil("the sidecar notices the other pattern; log:\n\(third.log)", timeout: 30) {
            third.log.contains("changed to \"core.other-tool\" by someone else")
        }
        let doctor = try TestSupport.run([
            TestSupport.crashport, "host", "status", "--host-directory", hostDirectories[directory]!,
        ])
        XCTAssertTrue(doctor.stdout.contains("another tool has set core_pattern"), doctor.stdout)
        let checkup = try TestSupport.run(
            [TestSupport.crashport, "doctor", "--host-directory", try XCTUnwrap(hostDirectories[directory])])
        XCTAssertTrue(checkup.stdout.contains("host level: another tool set core_pattern"), checkup.stdout)
        XCTAssertEqual(third.stop(), 0)
        XCTAssertEqual(Self.read(Self.patternFile), "core.other-tool", "never overwritten back")
    }

    /// A host directory another user owns, or one others may write to (CRASHPORT_HOST_DIRECTORY
    /// kept from a user's environment, say), is refused before anything is put in it or in
    /// core_pattern.
    func testAHostDirectoryNotRootsOwnIsRefused() throws {
        let directory = fresh("notroots")
        for (owner, mode) in [(uid_t(65534), mode_t(0o755)), (uid_t(0), mode_t(0o777))] {
            let host = "/tmp/cph-" + UUID().uuidString.prefix(6)
            XCTAssertEqual(mkdir(host, 0o700), 0)
            defer { try? FileManager.default.removeItem(atPath: host) }
            XCTAssertEqual(chown(host, owner, owner), 0)
            XCTAssertEqual(chmod(host, mode), 0)
            let result = try TestSupport.run(
                [
                    TestSupport.crashport, "watch", "--host", "--socket", directory + "/crashport.sock", "--reports",
                    directory + "/reports",
                ], environment: ["CRASHPORT_HOST_DIRECTORY": host], timeout: 30)
            XCTAssertNotEqual(result.status, .exited(0), result.stderr)
            XCTAssertTrue(
                result.stderr.contains("is not a directory of root's that only root may write to"), result.stderr)
            XCTAssertEqual(Self.read(Self.patternFile), savedPattern)
            XCTAssertFalse(FileManager.default.fileExists(atPath: host + "/core.sock"))
            XCTAssertFalse(FileManager.default.fileExists(atPath: host + "/host.json"))
        }
    }

    /// A crash loop of 30 crashes of one program gives HostLevelLimits.reportsPerWindow (5) full
    /// reports; the rest are counted and logged.
    func testCrashLoopIsRateLimited() throws {
        let directory = fresh("loop")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory)
        for _ in 0..<30 { _ = try TestSupport.run([program, "segv"]) }
        _ = try sidecar.waitForReports(5, uid: 0)
        try waitUntil("25 crashes are counted; log:\n\(sidecar.log)", timeout: 60) {
            sidecar.log.components(separatedBy: "counted, not reported").count - 1 >= 25
        }
        XCTAssertEqual(sidecar.reportIDs(uid: 0).count, 5, sidecar.log)
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// A sidecar killed mid-dump lets the dying process end (its connection closes, the kernel
    /// ends the dump), and the next sidecar starts cleanly over its stale pattern and reports the
    /// next crash. Fifty processes crashing at once all end too: ten copies of one program, so
    /// one program to the rate limit (its build-id), each crash reported or counted.
    func testKilledSidecarAndFiftyCrashesAtOnceNeverKeepAProcess() throws {
        let directory = fresh("storm")
        let program = try hostProgram(directory)
        let first = try hostSidecar(directory)
        let started = Date()
        let large = Process()
        large.executableURL = URL(fileURLWithPath: program)
        large.arguments = ["heap", "1024"]
        try large.run()
        try waitUntil("the large process is being dumped; log:\n\(first.log)", timeout: 60) {
            !large.isRunning || Self.read("/proc/\(large.processIdentifier)/stat").contains(") D ")
                || (try? String(contentsOfFile: "/proc/\(large.processIdentifier)/status", encoding: .utf8))?.contains(
                    "CoreDumping:\t1") == true
        }
        first.stop(SIGKILL)
        large.waitUntilExit()
        XCTAssertEqual(large.terminationReason, .uncaughtSignal, "it died of its fault")
        XCTAssertLessThan(Date().timeIntervalSince(started), 120, "not held past the hold bound")

        let second = try hostSidecar(directory)
        var crashers: [Process] = []
        for index in 0..<50 {
            let copy = directory + "/storm-\(index % 10)"
            if index < 10 { try FileManager.default.copyItem(atPath: program, toPath: copy) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: copy)
            process.arguments = ["segv"]
            crashers.append(process)
        }
        for process in crashers { try process.run() }
        for process in crashers { process.waitUntilExit() }
        XCTAssertTrue(crashers.allSatisfy { $0.terminationReason == .uncaughtSignal && $0.terminationStatus == SIGSEGV })
        try waitUntil("every one of the 50 crashes is reported or counted; log:\n\(second.log)", timeout: 120) {
            second.reportIDs(uid: 0).count
                + second.log.components(separatedBy: "counted, not reported").count - 1 >= 50
        }
        XCTAssertTrue(second.isRunning)
        XCTAssertLessThanOrEqual(second.reportIDs(uid: 0).count, 50)
        XCTAssertGreaterThan(second.reportIDs(uid: 0).count, 0)
        XCTAssertEqual(second.stop(), 0)
        XCTAssertEqual(Self.read(Self.patternFile), savedPattern)
    }

    /// A setuid program crashed by a throwaway user under fs.suid_dumpable = 2: the kernel dumps
    /// it as root only, and the host level reports it into root's reports, never the user's.
    func testRootOnlyDumpIsReportedToRootAlone() throws {
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("suid")
        var filesystem = statvfs()
        if statvfs(directory, &filesystem) == 0, filesystem.f_flag & UInt(ST_NOSUID) != 0 {
            throw XCTSkip("\(directory) is on a file system mounted nosuid: no setuid program runs there")
        }
        let program = try hostProgram(directory)
        chown(program, 0, 0)
        chmod(program, 0o4755)
        let dumpable = "/proc/sys/fs/suid_dumpable"
        let saved = Self.read(dumpable)
        Self.write("2", to: dumpable)
        defer { Self.write(saved, to: dumpable) }
        let sidecar = try hostSidecar(directory)
        let crashed = try TestSupport.run(["/usr/sbin/runuser", "-u", user.name, "--", program, "segv"])
        XCTAssertNotEqual(crashed.status, .exited(0))
        let event = try XCTUnwrap(sidecar.waitForReports(1, uid: 0).first)
        XCTAssertEqual(event.source, "host")
        XCTAssertTrue((event.notes ?? []).contains { $0.contains("dumped as root only") }, "\(event.notes ?? [])")
        XCTAssertTrue(sidecar.reportIDs(uid: user.uid).isEmpty, "nothing in the user's reports")
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// A process with 2 GB of touched heap streams 2 GB of core: the sidecar keeps what a report
    /// needs, and its own peak memory stays far below the process's.
    func testLargeProcessIsReadWithBoundedMemory() throws {
        let directory = fresh("large")
        let program = try hostProgram(directory)
        let sidecar = try hostSidecar(directory)
        XCTAssertEqual(try TestSupport.run([program, "heap", "2048"], timeout: 120).status, .signaled(SIGSEGV))
        let event = try XCTUnwrap(sidecar.waitForReports(1, uid: 0, timeout: 120).first)
        XCTAssertTrue(containsInOrder(crashedFrames(event), ["crash_here", "call_crash", "main"]))
        let status = Self.read("/proc/\(sidecar.pid)/status")
        let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }.flatMap {
            Int($0.split(whereSeparator: { $0 == " " || $0 == "\t" })[1])
        }
        let kilobytes = try XCTUnwrap(peak)
        XCTAssertLessThan(kilobytes, 512 << 10, "the sidecar's peak resident memory (\(kilobytes) kB) for a 2 GB core")
        XCTAssertEqual(sidecar.stop(), 0)
    }
}

/// The host level's systemd drop-in, over the unit tools/install puts in lib/systemd/system,
/// passes systemd's own check (and is read: a key systemd does not know would be named).
final class HostUnitFileTests: XCTestCase {
    func testHostDropInVerifies() throws {
        guard let analyze = TestSupport.which("systemd-analyze", also: ["/usr/bin"]) else {
            throw XCTSkip("no systemd-analyze (Debian: systemd)")
        }
        let directory = TestSupport.temporaryDirectory("host-units") + "/" + UUID().uuidString.prefix(6)
        try FileManager.default.createDirectory(atPath: directory + "/crashport.service.d", withIntermediateDirectories: true)
        let bin = (TestSupport.crashport as NSString).deletingLastPathComponent
        let root = TestSupport.repositoryRoot + "/packaging/systemd/system/"
        func filled(_ name: String) throws -> String {
            try String(contentsOfFile: root + name, encoding: .utf8).replacingOccurrences(of: "@bindir@", with: bin)
                .replacingOccurrences(of: "@prefix@", with: "/usr/local")
        }
        try filled("crashport.service.in").write(toFile: directory + "/crashport.service", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: root + "crashport.socket", toPath: directory + "/crashport.socket")
        try filled("crashport-host.conf.in").write(
            toFile: directory + "/crashport.service.d/host.conf", atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["SYSTEMD_UNIT_PATH"] = directory + ":"
        let result = try TestSupport.run([analyze, "verify", directory + "/crashport.service"], environment: environment)
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        XCTAssertEqual(result.stderr.trimmingCharacters(in: .whitespacesAndNewlines), "", result.stderr)
    }
}
