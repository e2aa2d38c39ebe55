// End-to-end: `crashport watch`, the sidecar, with real programs that load the stub (preloaded,
// or linked with pkg-config) and connect to it through CRASHPORT_SOCKET. The sidecar is a real
// process started by each test; it is killed, restarted, flooded by hostile clients, started
// by systemd-socket-activate, and stopped with SIGTERM while reports are written. (ptrace works
// on these machines, with no Yama; capture needs it.)

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A running `crashport watch`, its log in a file. Spawned with posix_spawn, not Foundation's
/// Process, whose monitor thread blocks in wait4 on a child that only execs (as
/// systemd-socket-activate does) and stalls every other Process meanwhile.
final class SidecarProcess {
    let directory: String
    let socket: String
    let reports: String
    let spool: String
    let logPath: String
    let pid: pid_t
    private var status: Int32?

    init(
        directory: String, socket: String? = nil, spool: String? = nil, arguments: [String] = [],
        launcher: [String] = [], environment: [String: String] = [:], waitUntilWatching: Bool = true
    ) throws {
        self.directory = directory
        self.socket = socket ?? directory + "/crashport.sock"
        reports = directory + "/reports"
        self.spool = spool ?? directory + "/spool"
        logPath = directory + "/watch-\(UUID().uuidString.prefix(6)).log"
        let command =
            launcher + [
                TestSupport.crashport, "watch", "--socket", self.socket, "--reports", reports, "--spool", self.spool,
            ] + arguments
        var merged = ProcessInfo.processInfo.environment
        for (key, value) in environment { merged[key] = value }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        let argv = command.map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, command[0], &actions, nil, argv, envp)
        guard spawned == 0 else { throw TestFailure("posix_spawn \(command[0]): \(String(cString: strerror(spawned)))") }
        pid = child
        if waitUntilWatching { try waitForWatching() }
    }

    func waitForWatching() throws {
        try waitUntil("the sidecar logs that it is watching:\n\(log)", timeout: 30) {
            guard isRunning else { throw TestFailure("the sidecar exited (\(status ?? -1)):\n\(log)") }
            return log.contains("watching ")
        }
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    var isRunning: Bool {
        if status != nil { return false }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return true }
        status = raw
        return false
    }

    /// Signals the sidecar and waits for it to exit; its exit code (128 + the signal when a
    /// signal ended it).
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM, timeout: TimeInterval = 60) -> Int32 {
        if isRunning { kill(pid, signal) }
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning && Date() < deadline { usleep(20_000) }
        if isRunning {
            kill(pid, SIGKILL)
            while isRunning { usleep(20_000) }
        }
        let raw = status ?? 0
        return (raw & 0x7F) == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
    }

    /// The report directories in the reports directory of `uid` (as root the sidecar keeps one
    /// directory per uid) whose second step is done (a crash's report is on disk first with its
    /// captured event, Event.stage; `capturedReportIDs` has those).
    func reportIDs(uid: UInt32 = getuid()) -> [String] {
        capturedReportIDs(uid: uid).filter { !isCaptured(reportsDirectory(uid: uid) + "/" + $0) }
    }

    /// Every report directory of `uid`, whole ones and those still at their first step.
    func capturedReportIDs(uid: UInt32 = getuid()) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: reportsDirectory(uid: uid))) ?? []).filter {
            !$0.hasPrefix(".")
        }.sorted()
    }

    /// Whether a report's event.json is still the one its first step wrote.
    func isCaptured(_ report: String) -> Bool {
        guard let data = FileManager.default.contents(atPath: report + "/event.json"), let event = try? Event.decode(data)
        else { return false }
        return event.stage == Event.capturedStage
    }

    func reportsDirectory(uid: UInt32 = getuid()) -> String { getuid() == 0 ? reports + "/\(uid)" : reports }

    func events(uid: UInt32 = getuid()) throws -> [Event] {
        try reportIDs(uid: uid).map { id in
            let path = reportsDirectory(uid: uid) + "/" + id + "/event.json"
            guard let data = FileManager.default.contents(atPath: path) else { throw TestFailure("no \(path)") }
            return try Event.decode(data)
        }
    }

    /// Waits until `count` reports of `uid` exist; their events.
    func waitForReports(_ count: Int, uid: UInt32 = getuid(), timeout: TimeInterval = 60) throws -> [Event] {
        try waitUntil("\(count) report(s) in \(reportsDirectory(uid: uid)); log:\n\(log)", timeout: timeout) {
            reportIDs(uid: uid).count >= count
        }
        return try events(uid: uid)
    }

    /// The session records of the reports directory (one JSON object per line).
    func sessions() -> [[String: Any]] {
        let text = (try? String(contentsOfFile: reportsDirectory() + "/.crashport-sessions.jsonl", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Waits for the session of `pid` running `executable` to be recorded; returns it. (A
    /// shell that execs the program has a session of its own first: same pid, the shell's path.)
    func session(of pid: Int32, executable: String? = nil) throws -> [String: Any] {
        var found: [String: Any]?
        try waitUntil("the session of pid \(pid) is recorded; log:\n\(log)", timeout: 60) {
            found = sessions().first {
                ($0["pid"] as? Int).map(Int32.init) == pid && (executable == nil || $0["executable"] as? String == executable)
            }
            return found != nil
        }
        return found!
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            while isRunning { usleep(20_000) }
        }
    }
}

/// Polls `condition` every 20 ms until it holds; fails after `timeout` (a bound on a hang, not
/// a timing assertion).
func waitUntil(_ what: String, timeout: TimeInterval, _ condition: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while try !condition() {
        guard Date() < deadline else { throw TestFailure("timed out waiting until \(what)") }
        usleep(20_000)
    }
}

extension Process {
    /// Sets the command, run as `user` through runuser when given, with this process's
    /// environment, Swift's backtracer off and `environment` on top.
    func prepare(_ command: [String], user: String?, environment: [String: String]) {
        let full = (user.map { ["/usr/sbin/runuser", "-u", $0, "--"] } ?? []) + command
        executableURL = URL(fileURLWithPath: full[0])
        arguments = Array(full.dropFirst())
        var merged = ProcessInfo.processInfo.environment
        merged["SWIFT_BACKTRACE"] = "enable=no"
        for (key, value) in environment { merged[key] = value }
        self.environment = merged
    }
}

/// A program that waits for a line on stdin before it crashes (Tests/Fixtures/sidecar/waiter.c).
final class Waiter {
    /// Tests/Fixtures/sidecar/waiter.c built into `directory` (-O1 -g): the program a Waiter runs.
    static func build(in directory: String) throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("sidecar/waiter.c")], output: directory + "/waiter", flags: ["-O1", "-g"])
    }

    let process = Process()
    let input = Pipe()
    let output = Pipe()
    let errors = Pipe()
    let pid: Int32

    init(_ executable: String, arguments: [String] = [], environment: [String: String], user: String? = nil) throws {
        process.prepare([executable] + arguments, user: user, environment: environment)
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard line.hasPrefix("ready "), let pid = Int32(line.dropFirst(6).trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw TestFailure("the waiter did not start: \(line)") }
        self.pid = pid
    }

    /// Lets it crash; its termination (signal, or exit status).
    func crash(timeout: TimeInterval = 60) throws -> (status: ExitStatus, stderr: String) {
        trigger()
        return try wait(timeout: timeout)
    }

    /// Sends the line it waits for.
    func trigger() {
        input.fileHandleForWriting.write(Data("crash\n".utf8))
    }

    /// Its termination (signal, or exit status).
    func wait(timeout: TimeInterval = 60) throws -> (status: ExitStatus, stderr: String) {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        guard !process.isRunning else {
            process.terminate()
            return (.timedOut, "")
        }
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let status: ExitStatus =
            process.terminationReason == .uncaughtSignal
            ? .signaled(process.terminationStatus) : .exited(process.terminationStatus)
        return (status, stderr)
    }
}

final class SidecarTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("sidecar")

    var waiter: String {
        get throws {
            try Waiter.build(in: Self.directory)
        }
    }

    func fresh(_ name: String) -> String {
        TestSupport.freshDirectory(in: Self.directory, name)
    }

    func preloaded(_ sidecar: SidecarProcess, _ extra: [String: String] = [:]) throws -> [String: String] {
        var environment = ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket]
        for (key, value) in extra { environment[key] = value }
        return environment
    }

    func crashFrames(_ event: Event) -> [String] {
        event.crashedThreadRecord?.frames?.compactMap(\.function) ?? []
    }

    // MARK: Reported through the sidecar

    /// A preloaded program connects (HELLO, the sidecar's reply), crashes, dies with its own
    /// SIGSEGV, and its report (all threads, through ptrace) appears in the sidecar's reports,
    /// with one log line for the client and one for the report.
    func testPreloadedProgramIsReported() throws {
        let sidecar = try SidecarProcess(directory: fresh("preload"))
        let program = try Waiter(waiter, environment: preloaded(sidecar))
        let ended = try program.crash()
        XCTAssertEqual(ended.status, .signaled(SIGSEGV), ended.stderr)
        let events = try sidecar.waitForReports(1)
        XCTAssertEqual(events[0].process?.pid?.rawValue, program.pid)
        XCTAssertEqual(events[0].signal?.name, "SIGSEGV")
        XCTAssertEqual(crashFrames(events[0]).first, "crash_after_input")
        XCTAssertTrue(crashFrames(events[0]).contains("main"))
        XCTAssertNil(events[0].capturedFrom, "a live capture")
        XCTAssertTrue(sidecar.log.contains("client pid \(program.pid)"), sidecar.log)
        // The report's log line follows its files: give the writing thread a moment (bounded).
        for _ in 0..<200 where !sidecar.log.contains("report: ") { usleep(25_000) }
        XCTAssertTrue(sidecar.log.contains("report: "), sidecar.log)
        let doctor = try TestSupport.run(
            [TestSupport.crashport, "doctor", "--socket", sidecar.socket, "--reports", sidecar.directory + "/doctor"])
        XCTAssertTrue(doctor.stdout.contains("sidecar: listening on \(sidecar.socket), pid \(sidecar.pid)"), doctor.stdout)
        XCTAssertTrue(doctor.stdout.contains("sidecar: serves you"), doctor.stdout)
        XCTAssertEqual(sidecar.stop(), 0)
        let none = try TestSupport.run(
            [TestSupport.crashport, "doctor", "--socket", sidecar.socket, "--reports", sidecar.directory + "/doctor"])
        XCTAssertTrue(none.stdout.contains("sidecar: none listening"), none.stdout)
    }

    /// A program rebuilt at the same path between two crashes: the sidecar keeps what it parsed
    /// of a module by build-id (and, for a file without one, only for that very file), so the
    /// second report names the second build's function, with and without a build-id.
    func testRebuiltProgramIsSymbolicatedAnew() throws {
        let sidecar = try SidecarProcess(directory: fresh("rebuilt"))
        defer { _ = sidecar.stop() }
        var expected: [String] = []
        for (index, (name, linkFlags)) in [
            ("first_build", []), ("second_build", []), ("third_build", ["-Wl,--build-id=none"]),
            ("fourth_build", ["-Wl,--build-id=none"]),
        ].enumerated() {
            let program = try TestSupport.compile(
                [TestSupport.fixture("sidecar/rebuilt.c")], output: sidecar.directory + "/rebuilt",
                flags: ["-O1", "-g", "-DBUILD=\(name)"], linkFlags: linkFlags)
            let run = try TestSupport.run([program], environment: preloaded(sidecar))
            XCTAssertEqual(run.status, .signaled(SIGSEGV), run.stderr)
            expected.append(name)
            let events = try sidecar.waitForReports(index + 1)
            let names = events.compactMap { crashFrames($0).first }
            XCTAssertEqual(Set(names), Set(expected), "report \(index + 1)")
        }
    }

    /// A program in a pid namespace of its own (as in a container) connects to a sidecar outside
    /// it: its record names its pid and thread as it sees them (2 or so there), the kernel gives
    /// its pid here, and NSpid ties the two; it is reported under its pid here, with its frames.
    func testProgramInItsOwnPidNamespaceIsReported() throws {
        guard getuid() == 0 else { throw XCTSkip("a new pid namespace with its own /proc needs root here") }
        guard let unshare = TestSupport.which("unshare", also: ["/usr/bin"]) else { throw XCTSkip("no unshare (util-linux)") }
        let sidecar = try SidecarProcess(directory: fresh("namespace"))
        let script = "echo inside $$; echo go | \"$0\"; echo status $?"
        var environment = try preloaded(sidecar)
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let result = try TestSupport.run(
            [unshare, "--pid", "--fork", "--mount-proc", "/bin/sh", "-c", script, try waiter], environment: environment,
            timeout: 120)
        guard !result.stderr.contains("unshare failed"), !result.stderr.contains("unshare: ") else {
            throw XCTSkip("cannot make a pid namespace here: \(result.stderr)")
        }
        XCTAssertTrue(result.stdout.contains("inside 1"), result.stdout)
        XCTAssertTrue(result.stdout.contains("status 139"), "its own SIGSEGV: \(result.stdout)")
        let events = try sidecar.waitForReports(1)
        let pid = events[0].process?.pid?.rawValue ?? 0
        XCTAssertGreaterThan(pid, 1, "its pid outside, not the one it has inside")
        XCTAssertEqual(events[0].signal?.name, "SIGSEGV")
        XCTAssertEqual(crashFrames(events[0]).first, "crash_after_input")
        XCTAssertFalse(sidecar.log.contains("rejected"), sidecar.log)
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// A forked child shares its parent's connection: the kernel's credentials name the child,
    /// and the child is what is captured.
    func testForkedChildIsReportedOnItsParentsConnection() throws {
        let sidecar = try SidecarProcess(directory: fresh("fork"))
        let program = try Waiter(waiter, arguments: ["fork"], environment: preloaded(sidecar))
        let ended = try program.crash()
        XCTAssertEqual(ended.status, .exited(128 + SIGSEGV), ended.stderr)
        let events = try sidecar.waitForReports(1)
        XCTAssertNotEqual(events[0].process?.pid?.rawValue, program.pid, "the child crashed, not the parent")
        XCTAssertEqual(crashFrames(events[0]).first, "crash_after_input")
        sidecar.stop()
    }

    /// A C program linked with `pkg-config --cflags --libs crashport` (the .pc tools/install
    /// writes, pointing at this tree's stub) is reported with no LD_PRELOAD: one that calls
    /// crashport_install(NULL), and one that only links the library (its constructor installs).
    func testLinkedWithPkgConfigIsReported() throws {
        let directory = fresh("linked")
        let stub = try TestSupport.stub()
        let libdir = (stub as NSString).deletingLastPathComponent
        let template = try String(contentsOfFile: TestSupport.repositoryRoot + "/packaging/crashport.pc.in", encoding: .utf8)
        try FileManager.default.createDirectory(atPath: directory + "/pkgconfig", withIntermediateDirectories: true)
        let pc =
            template.replacingOccurrences(of: "@prefix@", with: directory).replacingOccurrences(of: "@version@", with: "0")
            .replacingOccurrences(of: "libdir=${exec_prefix}/lib", with: "libdir=\(libdir)")
            .replacingOccurrences(
                of: "includedir=${prefix}/include", with: "includedir=\(TestSupport.repositoryRoot)/CSupport/stub/include")
        try pc.write(toFile: directory + "/pkgconfig/crashport.pc", atomically: true, encoding: .utf8)
        let flags = try TestSupport.run(
            ["pkg-config", "--cflags", "--libs", "crashport"], environment: ["PKG_CONFIG_PATH": directory + "/pkgconfig"])
        XCTAssertEqual(flags.status, .exited(0), flags.stderr)
        let words = flags.stdout.split(whereSeparator: \.isWhitespace).map(String.init)

        let sidecar = try SidecarProcess(directory: directory)
        for example in ["app", "linked-only"] {
            let binary = try TestSupport.compile(
                [TestSupport.repositoryRoot + "/examples/c/\(example).c"], output: directory + "/" + example,
                flags: ["-O0", "-g"], linkFlags: words)
            let needed = try TestSupport.run(["readelf", "-d", binary]).stdout
            XCTAssertTrue(needed.contains("libcrashport.so"), "\(example) links the stub")
            let before = sidecar.reportIDs().count
            let result = try TestSupport.run([binary], environment: ["CRASHPORT_SOCKET": sidecar.socket])
            guard case .signaled = result.status else {
                XCTFail("\(example) should die of its signal: \(result.status) \(result.stderr)")
                continue
            }
            let events = try sidecar.waitForReports(before + 1)
            let event = try XCTUnwrap(events.first { $0.process?.executable == binary })
            XCTAssertNil(event.capturedFrom)
            XCTAssertFalse(crashFrames(event).isEmpty)
        }
        sidecar.stop()
    }

    // MARK: Never losing a crash

    /// The sidecar is killed (SIGKILL: no cleanup, its socket file left behind) and a new one
    /// started on the same socket between the program's start and its crash: the stub
    /// reconnects from its signal handler and the new sidecar reports the crash live.
    func testSidecarRestartedBetweenStartAndCrash() throws {
        let directory = fresh("restart")
        let first = try SidecarProcess(directory: directory)
        let program = try Waiter(waiter, environment: preloaded(first))
        try waitUntil("the program connected", timeout: 30) { first.log.contains("client pid \(program.pid)") }
        first.stop(SIGKILL)
        XCTAssertTrue(FileManager.default.fileExists(atPath: first.socket), "a stale socket file is left")
        let second = try SidecarProcess(directory: directory)
        let ended = try program.crash()
        XCTAssertEqual(ended.status, .signaled(SIGSEGV), ended.stderr)
        let events = try second.waitForReports(1)
        XCTAssertEqual(events[0].process?.pid?.rawValue, program.pid)
        XCTAssertNil(events[0].capturedFrom, "reported live after reconnecting, not from the spool")
        XCTAssertEqual(crashFrames(events[0]).first, "crash_after_input")
        second.stop()
    }

    /// No sidecar at all: the program dies as it would (SIGSEGV) without waiting, its record is
    /// spooled, and the next `crashport watch` reports it from the spool, marked as such, dated
    /// when it crashed (not when it was picked up) and with its command line, and removes the
    /// spool file.
    func testNoSidecarSpoolsAndTheNextSidecarReports() throws {
        let directory = fresh("spool")
        let spool = directory + "/spool"
        try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: true)
        let program = try Waiter(
            waiter, arguments: ["spooled", "two words"],
            environment: [
                "LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": directory + "/crashport.sock",
                "CRASHPORT_SPOOL": spool,
            ])
        let ended = try program.crash(timeout: 30)
        XCTAssertEqual(ended.status, .signaled(SIGSEGV), ended.stderr)
        XCTAssertTrue(ended.stderr.contains("spooled"), ended.stderr)
        let files = try FileManager.default.contentsOfDirectory(atPath: spool)
        XCTAssertEqual(files.filter { $0.hasSuffix(".crash") }.count, 1, "\(files)")
        XCTAssertFalse(files.contains { $0.hasPrefix(".tmp-") }, "\(files)")

        let beforeSidecar = Event.timestamp()
        let sidecar = try SidecarProcess(directory: directory, spool: spool)
        let events = try sidecar.waitForReports(1)
        XCTAssertEqual(events[0].capturedFrom, "spool")
        XCTAssertEqual(events[0].process?.pid?.rawValue, program.pid)
        XCTAssertEqual(events[0].process?.arguments, [try waiter, "spooled", "two words"], "the stub's /proc/self/cmdline")
        // Dated by the crash (the record's time, in the spool file's name), id included.
        let timestamp = try XCTUnwrap(events[0].timestamp)
        XCTAssertLessThanOrEqual(timestamp, beforeSidecar, "the crash's time, not the pickup's")
        let crashed = try XCTUnwrap(files.first { $0.hasSuffix(".crash") }?.dropLast(6).split(separator: "-").last)
        let second = try XCTUnwrap(UInt64(crashed)) / 1_000_000_000
        XCTAssertEqual(timestamp.prefix(19), Event.timestamp(Date(timeIntervalSince1970: Double(second))).prefix(19))
        XCTAssertEqual(
            events[0].id?.prefix(15), timestamp.prefix(19).filter { $0 != "-" && $0 != ":" }.prefix(15),
            "the id begins with the same moment")
        XCTAssertEqual(events[0].signal?.name, "SIGSEGV")
        XCTAssertEqual(crashFrames(events[0]).first, "crash_after_input", "unwound from the stack copy")
        XCTAssertTrue(crashFrames(events[0]).contains("main"))
        try waitUntil("the spool file is removed", timeout: 30) {
            try FileManager.default.contentsOfDirectory(atPath: spool).filter { $0.hasSuffix(".crash") }.isEmpty
        }
        sidecar.stop()
    }

    /// Twenty processes crash at once: twenty reports, nothing lost, each program's status its
    /// own. The second steps that waited kept their captures on disk (CaptureSpill), and read
    /// them back whole: every report is unwound from its own stack.
    func testTwentySimultaneousCrashes() throws {
        let sidecar = try SidecarProcess(directory: fresh("storm"))
        let programs = try (0..<20).map { _ in try Waiter(waiter, environment: preloaded(sidecar)) }
        for program in programs { program.trigger() }
        for program in programs {
            let ended = try program.wait(timeout: 120)
            XCTAssertEqual(ended.status, .signaled(SIGSEGV), ended.stderr)
        }
        let events = try sidecar.waitForReports(20, timeout: 180)
        XCTAssertEqual(Set(events.compactMap { $0.process?.pid?.rawValue }), Set(programs.map(\.pid)))
        XCTAssertTrue(events.allSatisfy { crashFrames($0).first == "crash_after_input" })
        XCTAssertTrue(events.allSatisfy { crashFrames($0).contains("main") })
        XCTAssertTrue(events.allSatisfy { $0.stage == nil }, "every report whole")
        try waitUntil("the storm's spilled captures logged", timeout: 30) {
            sidecar.log.contains("waited for their second step with their capture on disk")
        }
        XCTAssertEqual(sidecar.stop(), 0)
    }

    /// The sidecar executes itself once more with LD_BIND_NOW set (EagerBinding), so that its
    /// libraries' calls are bound at start, not by the loader in the middle of a first report:
    /// the same pid, serving as usual. Where the user set LD_BIND_NOW already, it does not.
    func testTheSidecarRunsWithItsLibrariesBoundAtStart() throws {
        func environment(of pid: pid_t) throws -> [String] {
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/environ"))
            defer { try? handle.close() }
            return String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self).split(separator: "\0").map(String.init)
        }
        let sidecar = try SidecarProcess(directory: fresh("bind-now"))
        let started = try environment(of: sidecar.pid)
        XCTAssertTrue(started.contains("LD_BIND_NOW=1"), "\(started)")
        XCTAssertTrue(started.contains("CRASHPORT_BIND_NOW=set"), "\(started)")
        let program = try Waiter(waiter, environment: preloaded(sidecar))
        XCTAssertEqual(try program.crash().status, .signaled(SIGSEGV))
        XCTAssertEqual(try sidecar.waitForReports(1).count, 1)
        XCTAssertEqual(sidecar.stop(), 0)

        let already = try SidecarProcess(directory: fresh("bind-now-set"), environment: ["LD_BIND_NOW": "1"])
        XCTAssertFalse(try environment(of: already.pid).contains("CRASHPORT_BIND_NOW=set"), "not executed again")
        XCTAssertEqual(already.stop(), 0)
    }

    /// SIGTERM right after a crash was captured: the report being written is finished, then
    /// the sidecar exits 0 and removes its socket.
    func testSIGTERMFinishesTheReportInFlight() throws {
        let sidecar = try SidecarProcess(directory: fresh("sigterm"))
        let program = try Waiter(waiter, environment: preloaded(sidecar))
        let ended = try program.crash()
        XCTAssertEqual(ended.status, .signaled(SIGSEGV))
        XCTAssertEqual(sidecar.stop(SIGTERM), 0, sidecar.log)
        XCTAssertEqual(sidecar.reportIDs().count, 1, sidecar.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sidecar.socket))
        XCTAssertTrue(sidecar.log.contains("stopped"), sidecar.log)
    }

    /// A second sidecar on the same socket refuses to start, and says who holds it.
    func testSecondSidecarOnTheSameSocketRefuses() throws {
        let directory = fresh("second")
        let first = try SidecarProcess(directory: directory)
        let second = try TestSupport.run(
            [
                TestSupport.crashport, "watch", "--socket", first.socket, "--reports", directory + "/r2", "--spool",
                directory + "/s2",
            ],
            timeout: 30)
        XCTAssertEqual(second.status, .exited(1))
        XCTAssertTrue(second.stderr.contains("already listening"), second.stderr)
        XCTAssertEqual(first.stop(), 0)
    }

    // MARK: Hostile clients and other users

    /// The open descriptors of a process.
    func descriptorCount(_ pid: Int32) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count
    }

    /// While a hostile client sends garbage, a wrong version and size, a HELLO then nothing,
    /// crash records naming another pid or a thread not its own, a pipe instead of a reply
    /// socket, ten descriptors, and opens a thousand idle connections, a real program's crash is
    /// still reported; every rejection is logged, the per-user connection limit holds, and once
    /// the client is gone the sidecar holds no more descriptors than before.
    func testHostileClientsDoNotStopARealCrashReport() throws {
        let sidecar = try SidecarProcess(directory: fresh("hostile"))
        let program = try Waiter(waiter, environment: preloaded(sidecar))
        try waitUntil("the program connected", timeout: 30) { sidecar.log.contains("client pid \(program.pid)") }
        let baseline = descriptorCount(sidecar.pid)

        let hostile = Process()
        hostile.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        hostile.arguments = [TestSupport.fixture("sidecar/hostile.py"), sidecar.socket]
        let toHostile = Pipe(), fromHostile = Pipe()
        hostile.standardInput = toHostile
        hostile.standardOutput = fromHostile
        try hostile.run()
        let ready = String(decoding: fromHostile.fileHandleForReading.availableData, as: UTF8.self)
        XCTAssertTrue(ready.hasPrefix("ready"), ready)

        let ended = try program.crash()
        XCTAssertEqual(ended.status, .signaled(SIGSEGV), ended.stderr)
        let events = try sidecar.waitForReports(1)
        XCTAssertTrue(events.contains { $0.process?.pid?.rawValue == program.pid })
        let log = sidecar.log
        for reason in [
            "bad magic", "unsupported protocol version 99", "declared size 1000", "it names pid 1",
            "not a socket", "more than 4 descriptors", "is not one of its threads", "per user",
        ] {
            XCTAssertTrue(log.contains(reason), "the log says \(reason):\n\(log.suffix(3000))")
        }
        let connections = descriptorCount(sidecar.pid)
        XCTAssertLessThanOrEqual(connections, baseline + 520, "at most 512 connections of one user are held")

        toHostile.fileHandleForWriting.write(Data("done\n".utf8))
        hostile.waitUntilExit()
        // What the report itself keeps open (cached debug files) may stay; the connections go.
        try waitUntil(
            "the sidecar closed every hostile connection (\(descriptorCount(sidecar.pid)) descriptors, \(baseline) before)",
            timeout: 30
        ) {
            descriptorCount(sidecar.pid) <= baseline + 16
        }
        XCTAssertEqual(sidecar.stop(), 0, "the sidecar survived")
    }

    /// A throwaway user made for this test (removed after it): a system user (uid below 1000),
    /// or with `system` false a regular one, whom journald gives a journal file of their own.
    struct ThrowawayUser {
        let name: String
        let uid: UInt32

        init(system: Bool = true) throws {
            guard getuid() == 0 else { throw XCTSkip("creating a throwaway user needs root") }
            guard let useradd = TestSupport.which("useradd", also: ["/usr/sbin"]) else { throw XCTSkip("no useradd") }
            name = "cpt\(getpid() % 100000)\(UInt16.random(in: 0...999))"
            let made = try TestSupport.run(
                [useradd] + (system ? ["--system"] : []) + ["--no-create-home", "--shell", "/usr/sbin/nologin", name])
            guard made.status == .exited(0), let entry = getpwnam(name) else {
                throw XCTSkip("useradd \(name) failed: \(made.stderr)")
            }
            uid = entry.pointee.pw_uid
        }

        func remove() {
            _ = try? TestSupport.run(["/usr/sbin/userdel", name])
        }
    }

    /// Running as root the sidecar serves every user, each into a 0700 directory owned by that
    /// user with files the user owns: a second user's crash is reported there, and that user
    /// can neither list nor read the first user's reports.
    func testAnotherUsersReportsAreTheirsAlone() throws {
        let user = try ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("users")
        chmod(directory, 0o755)
        // The user must reach the program and the stub: copies outside the build tree.
        let program = directory + "/waiter"
        let stub = directory + "/libcrashport.so"
        try FileManager.default.copyItem(atPath: try waiter, toPath: program)
        try FileManager.default.copyItem(atPath: try TestSupport.stub(), toPath: stub)
        chmod(stub, 0o755)
        let sidecar = try SidecarProcess(directory: directory)
        chmod(sidecar.reports, 0o711)

        let mine = try Waiter(program, environment: ["LD_PRELOAD": stub, "CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(try mine.crash().status, .signaled(SIGSEGV))
        _ = try sidecar.waitForReports(1, uid: 0)
        // The readers, given the sidecar's directory, find what the caller may read, as
        // coredumpctl does; another user's directory is named, never read.
        func asUser(_ arguments: [String]) throws -> RunResult {
            try TestSupport.run(["/usr/sbin/runuser", "-u", user.name, "--", TestSupport.crashport] + arguments)
        }
        let nothingYet = try asUser(["list", "--reports", sidecar.reports])
        XCTAssertEqual(nothingYet.status, .exited(0), nothingYet.stderr)
        XCTAssertEqual(nothingYet.stdout, "", "root's report is not the user's to list")
        // Where the user may list the directory (the sidecar makes it 0711: then not even
        // that), the directories they may not read are named.
        chmod(sidecar.reports, 0o755)
        let hinted = try asUser(["list", "--reports", sidecar.reports])
        chmod(sidecar.reports, 0o711)
        XCTAssertEqual(hinted.stdout, "")
        XCTAssertTrue(
            hinted.stderr.contains("reports of uid 0 are in \(sidecar.reports)/0, which only that user or root may read"),
            hinted.stderr)

        let theirs = try Waiter(
            program, environment: ["LD_PRELOAD": stub, "CRASHPORT_SOCKET": sidecar.socket], user: user.name)
        let ended = try theirs.crash()
        // runuser reports its child's death by a signal as 128 + the signal.
        XCTAssertTrue([.signaled(SIGSEGV), .exited(128 + SIGSEGV)].contains(ended.status), "\(ended)")
        let events = try sidecar.waitForReports(1, uid: user.uid)
        XCTAssertEqual(events[0].process?.pid?.rawValue, theirs.pid)
        XCTAssertEqual(crashFrames(events[0]).first, "crash_after_input")

        var info = stat()
        let theirDirectory = sidecar.reportsDirectory(uid: user.uid)
        XCTAssertEqual(stat(theirDirectory, &info), 0)
        XCTAssertEqual(info.st_uid, user.uid)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        let report = theirDirectory + "/" + sidecar.reportIDs(uid: user.uid)[0] + "/event.json"
        XCTAssertEqual(stat(report, &info), 0)
        XCTAssertEqual(info.st_uid, user.uid, "written with the user's filesystem ids")

        let root = sidecar.reportsDirectory(uid: 0)
        let listing = try TestSupport.run(["/usr/sbin/runuser", "-u", user.name, "--", "ls", root])
        XCTAssertNotEqual(listing.status, .exited(0), "the second user cannot list root's reports")
        let reading = try TestSupport.run(
            ["/usr/sbin/runuser", "-u", user.name, "--", "cat", root + "/" + sidecar.reportIDs(uid: 0)[0] + "/event.json"])
        XCTAssertNotEqual(reading.status, .exited(0), "nor read them")
        let own = try TestSupport.run(["/usr/sbin/runuser", "-u", user.name, "--", "ls", theirDirectory])
        XCTAssertEqual(own.status, .exited(0), "but lists its own: \(own.stderr)")

        let (rootID, userID) = (sidecar.reportIDs(uid: 0)[0], sidecar.reportIDs(uid: user.uid)[0])
        let theirList = try asUser(["list", "--reports", sidecar.reports])
        XCTAssertEqual(theirList.status, .exited(0), theirList.stderr)
        XCTAssertTrue(theirList.stdout.contains(userID), theirList.stdout)
        XCTAssertFalse(theirList.stdout.contains(rootID), theirList.stdout)
        let theirShow = try asUser(["show", "--reports", sidecar.reports, "latest"])
        XCTAssertEqual(theirShow.status, .exited(0), theirShow.stderr)
        XCTAssertTrue(theirShow.stdout.contains("Report:    \(userID)"), theirShow.stdout)
        let notTheirs = try asUser(["show", "--reports", sidecar.reports, rootID])
        XCTAssertEqual(notTheirs.status, .exited(1), notTheirs.stderr)
        XCTAssertTrue(notTheirs.stderr.contains("no report '\(rootID)'"), notTheirs.stderr)
        let rootList = try TestSupport.run([TestSupport.crashport, "list", "--reports", sidecar.reports])
        XCTAssertEqual(rootList.status, .exited(0), rootList.stderr)
        XCTAssertTrue(rootList.stdout.contains(rootID) && rootList.stdout.contains(userID), "root reads all: \(rootList.stdout)")
        let rootShow = try TestSupport.run([TestSupport.crashport, "show", "--reports", sidecar.reports, userID])
        XCTAssertEqual(rootShow.status, .exited(0), rootShow.stderr)
        let rootStats = try TestSupport.run([TestSupport.crashport, "stats", "--reports", sidecar.reports])
        XCTAssertEqual(rootStats.status, .exited(0), rootStats.stderr)
        XCTAssertTrue(rootStats.stdout.contains(program), "\(rootStats.stdout)\(rootStats.stderr)")
        sidecar.stop()
    }

    /// A sidecar running as a user serves only that user, and a stub never hands its process to
    /// a listener of another user (it says so on stderr). A root sidecar narrowed by --allow-uid
    /// refuses everyone else in its HELLO reply, which the stub reports on stderr too. Neither
    /// crash is captured, and each program still dies of its own SIGSEGV.
    func testSidecarsRefuseWhomTheyDoNotServe() throws {
        let user = try ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("usersidecar")
        chmod(directory, 0o777)
        let userSidecar = try SidecarProcess(
            directory: directory, launcher: ["/usr/sbin/runuser", "-u", user.name, "--"],
            environment: ["HOME": directory])
        XCTAssertTrue(userSidecar.log.contains("serving uid \(user.uid) only"), userSidecar.log)
        let program = try Waiter(waiter, environment: preloaded(userSidecar, ["CRASHPORT_SPOOL": ""]))
        let ended = try program.crash()
        XCTAssertEqual(ended.status, .signaled(SIGSEGV))
        XCTAssertTrue(ended.stderr.contains("neither root nor this process's user"), ended.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: userSidecar.reports + "/0"))
        userSidecar.stop()

        let narrowed = try SidecarProcess(directory: fresh("allowuid"), arguments: ["--allow-uid", user.name])
        let refused = try Waiter(waiter, environment: preloaded(narrowed, ["CRASHPORT_SPOOL": ""]))
        let refusedEnd = try refused.crash()
        XCTAssertEqual(refusedEnd.status, .signaled(SIGSEGV))
        XCTAssertTrue(refusedEnd.stderr.contains("refuses this process"), refusedEnd.stderr)
        XCTAssertTrue(narrowed.log.contains("not in this sidecar's --allow-uid list"), narrowed.log)
        XCTAssertEqual(narrowed.reportIDs(uid: 0).count, 0)
        narrowed.stop()
    }

    /// A full reports directory (a 64 KiB tmpfs mounted over it): the captured crash is kept in
    /// the spool and the log says why; once there is room, the next sidecar reports it.
    func testFullReportsDirectoryKeepsTheCrashInTheSpool() throws {
        let directory = fresh("full")
        let sidecar = try SidecarProcess(directory: directory)
        let target = sidecar.reportsDirectory()
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        let mounted = try TestSupport.run(["mount", "-t", "tmpfs", "-o", "size=64k", "crashport-test", target])
        guard mounted.status == .exited(0) else {
            sidecar.stop()
            throw XCTSkip("cannot mount a tmpfs here: \(mounted.stderr)")
        }
        // Fill it.
        _ = try TestSupport.run(["dd", "if=/dev/zero", "of=\(target)/filler", "bs=4k", "count=64"])
        let program = try Waiter(waiter, environment: preloaded(sidecar))
        XCTAssertEqual(try program.crash().status, .signaled(SIGSEGV))
        try waitUntil("the log says the record is kept in the spool", timeout: 60) {
            sidecar.log.contains("is kept in the spool")
        }
        sidecar.stop()
        _ = try TestSupport.run(["umount", target])
        let next = try SidecarProcess(directory: directory)
        let events = try next.waitForReports(1)
        XCTAssertEqual(events[0].process?.pid?.rawValue, program.pid)
        XCTAssertEqual(events[0].capturedFrom, "spool")
        next.stop()
    }

    // MARK: systemd

    /// Socket activation through systemd's own systemd-socket-activate (fd 3, LISTEN_FDS and
    /// LISTEN_PID), and READY=1 on $NOTIFY_SOCKET: a crash is reported through the passed
    /// socket.
    func testSocketActivation() throws {
        guard let activate = TestSupport.which("systemd-socket-activate") else {
            throw XCTSkip("systemd-socket-activate is not installed (Debian package systemd)")
        }
        let directory = fresh("activate")
        let notify = directory + "/notify"
        let notifications = try Self.notificationSocket(notify)
        defer { close(notifications) }
        let socketPath = directory + "/activated.sock"
        let sidecar = try SidecarProcess(
            directory: directory, socket: socketPath,
            launcher: [activate, "--seqpacket", "-l", socketPath, "-E", "NOTIFY_SOCKET=" + notify],
            waitUntilWatching: false)
        // systemd-socket-activate starts its command at the first connection.
        try waitUntil("the socket exists", timeout: 30) { FileManager.default.fileExists(atPath: socketPath) }
        let first = try Waiter(waiter, environment: preloaded(sidecar))
        try sidecar.waitForWatching()
        var buffer = [UInt8](repeating: 0, count: 512)
        var pollEntry = pollfd(fd: notifications, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&pollEntry, 1, 30_000), 1, "a notification arrives")
        let count = recv(notifications, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        XCTAssertTrue(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self).contains("READY=1"))
        XCTAssertTrue(sidecar.log.contains("passed by systemd"), sidecar.log)

        let ended = try first.crash()
        XCTAssertEqual(ended.status, .signaled(SIGSEGV))
        let events = try sidecar.waitForReports(1)
        XCTAssertEqual(crashFrames(events[0]).first, "crash_after_input")
        XCTAssertEqual(events[0].process?.pid?.rawValue, first.pid)
        XCTAssertEqual(sidecar.stop(), 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: socketPath), "an activated socket is systemd's: never unlinked")
    }

    /// systemd's watchdog (WatchdogSec= gives WATCHDOG_USEC): WATCHDOG=1 comes from the serving
    /// loop every half interval, none while the sidecar is stopped (so systemd would restart
    /// it), and again once it runs; none for another process's WATCHDOG_PID.
    func testWatchdogIsFedByTheServingLoopOnly() throws {
        let directory = fresh("watchdog")
        let notify = directory + "/notify"
        let notifications = try Self.notificationSocket(notify)
        defer { close(notifications) }
        /// The datagrams that arrive within `milliseconds`.
        func received(within milliseconds: Int32) -> [String] {
            var got: [String] = []
            let deadline = Date().addingTimeInterval(Double(milliseconds) / 1000)
            while case let left = deadline.timeIntervalSinceNow, left > 0 {
                var entry = pollfd(fd: notifications, events: Int16(POLLIN), revents: 0)
                guard poll(&entry, 1, Int32(left * 1000) + 1) == 1 else { break }
                var buffer = [UInt8](repeating: 0, count: 512)
                let count = recv(notifications, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if count > 0 { got.append(String(decoding: buffer.prefix(count), as: UTF8.self)) }
            }
            return got
        }
        let sidecar = try SidecarProcess(
            directory: directory, environment: ["NOTIFY_SOCKET": notify, "WATCHDOG_USEC": "200000"])
        XCTAssertGreaterThanOrEqual(received(within: 1500).filter { $0 == "WATCHDOG=1" }.count, 3)
        kill(sidecar.pid, SIGSTOP)
        _ = received(within: 200)  // one sent just before the stop took effect
        XCTAssertEqual(received(within: 1000).filter { $0 == "WATCHDOG=1" }, [], "a stopped sidecar says nothing")
        kill(sidecar.pid, SIGCONT)
        XCTAssertFalse(received(within: 1500).filter { $0 == "WATCHDOG=1" }.isEmpty, "it says it again once it runs")
        XCTAssertEqual(sidecar.stop(), 0)

        let other = try SidecarProcess(
            directory: fresh("watchdog-other"),
            environment: ["NOTIFY_SOCKET": notify, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"])
        XCTAssertEqual(received(within: 1000).filter { $0 == "WATCHDOG=1" }, [], "WATCHDOG_PID names another process")
        XCTAssertEqual(other.stop(), 0)
    }

    /// A datagram socket bound at `path`, as $NOTIFY_SOCKET's listener (systemd's part).
    static func notificationSocket(_ path: String) throws -> Int32 {
        switch UnixSockets.open(path, type: Int32(SOCK_DGRAM.rawValue), bind: true) {
        case .success(let fd): return fd
        case .failure(let error): throw TestFailure("bind \(path): \(error)")
        }
    }
}

/// A daemon (daemon(3): it forks away and its parent exits 0): `crashport run` ends with the
/// parent and says that a descendant with the stub outlives it; the sidecar serves the daemon
/// and reports its crash with gdb's frames.
final class DaemonTests: XCTestCase {
    func testADaemonIsTheSidecarsAndRunSaysSo() throws {
        let directory = TestSupport.temporaryDirectory("daemon")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let program = try TestSupport.compile([TestSupport.fixture("daemon/daemon.c")], output: directory + "/daemon")
        let fifo = directory + "/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        func release() {
            // The daemon reads one line, then crashes (bounded: it may already be gone).
            let fd = open(fifo, O_WRONLY | O_NONBLOCK)
            if fd >= 0 {
                _ = write(fd, "go\n", 3)
                close(fd)
            }
        }

        // Started with no descriptor but the standard three (Foundation's Process watches for
        // its child's end on a socket the daemon would otherwise inherit and keep open).
        let closing = ["python3", "-c", "import os, sys; os.closerange(3, 65536); os.execv(sys.argv[1], sys.argv[1:])"]
        let run = try TestSupport.run(
            closing + [TestSupport.crashport, "run", "--reports", directory + "/run", "--", program, fifo],
            environment: ["CRASHPORT_STUB": try TestSupport.stub()])
        XCTAssertEqual(run.status, .exited(0), run.stderr)
        XCTAssertTrue(run.stderr.contains("still runs with the stub after the program ended"), run.stderr)
        for _ in 0..<200 {
            release()
            usleep(10_000)
        }

        try FileManager.default.createDirectory(atPath: directory + "/sidecar", withIntermediateDirectories: true)
        let sidecar = try SidecarProcess(directory: directory + "/sidecar")
        defer { _ = sidecar.stop() }
        let started = try TestSupport.run(
            closing + [program, fifo], environment: ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(started.status, .exited(0))
        var events: [Event] = []
        for _ in 0..<400 where events.isEmpty {
            release()
            events = (try? sidecar.waitForReports(1, timeout: 0.05)) ?? []
        }
        let event = try XCTUnwrap(events.first, sidecar.log)
        XCTAssertEqual(event.signal?.name, "SIGSEGV")
        let functions = event.crashedThreadRecord?.frames?.compactMap(\.function) ?? []
        XCTAssertEqual(Array(functions.prefix(2)), ["serve_forever", "main"], "\(functions)")
        XCTAssertEqual(event.culprit?.function, "serve_forever")
    }
}
