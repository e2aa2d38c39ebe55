// End-to-end: what a user may do to a root sidecar's serving thread through their own reports
// directory, its configuration and their attachments (issue 30, items 3 and 6). Each test runs a
// real `crashport watch` as root and, where the attack is a user's, a throwaway user made for
// the test (skipped, with the reason, when not root): a lock held on the user's run history
// while their program sends a setting; a 1.5 GB sparse consent file; a consent file that is a
// symlink to a root-only file; a configuration with an out-of-range value or bytes that are not
// UTF-8; attachments naming /proc/self. Each asserts that the sidecar stays alive and, where a
// user attacks, that root's crash during the attack is still reported within a bound.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class ServingTrustTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("serving-trust")

    func fresh(_ name: String) -> String {
        let path = TestSupport.freshDirectory(in: Self.directory, name)
        chmod(path, 0o755)
        return path
    }

    /// A root sidecar, a throwaway user whose reports directory exists, and copies of the stub,
    /// the waiter and the trust program that the user may run.
    struct Setup {
        let user: SidecarTests.ThrowawayUser
        let work: String
        let sidecar: SidecarProcess
        let stub: String
        let waiter: String
        let trust: String

        init(_ work: String, arguments: [String] = []) throws {
            guard getuid() == 0 else {
                print("ServingTrustTests: skipped: the attacks are a user's against a root sidecar; this is uid \(getuid())")
                throw XCTSkip("needs root (a root sidecar and a throwaway user)")
            }
            self.work = work
            stub = work + "/libcrashport.so"
            try FileManager.default.copyItem(atPath: try TestSupport.stub(), toPath: stub)
            chmod(stub, 0o755)
            waiter = try Waiter.build(in: work)
            trust = try TestSupport.compile(
                [TestSupport.fixture("sidecar/trust.c")], output: work + "/trust",
                flags: ["-O1", "-g", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
                linkFlags: ["-L", work, "-Wl,-rpath," + work, "-lcrashport"])
            chmod(waiter, 0o755)
            chmod(trust, 0o755)
            user = try SidecarTests.ThrowawayUser()
            do {
                sidecar = try SidecarProcess(directory: work, arguments: arguments)
            } catch {
                user.remove()
                throw error
            }
            chmod(sidecar.reports, 0o711)
            let theirs = sidecar.reportsDirectory(uid: user.uid)
            mkdir(theirs, 0o700)
            chown(theirs, user.uid, user.uid)
        }

        var theirDirectory: String { sidecar.reportsDirectory(uid: user.uid) }

        /// `command` run as the user, with CRASHPORT_SOCKET set.
        func asUser(_ command: [String], timeout: TimeInterval = 60) throws -> RunResult {
            try TestSupport.run(
                ["/usr/sbin/runuser", "-u", user.name, "--", "env", "CRASHPORT_SOCKET=" + sidecar.socket] + command,
                timeout: timeout)
        }

        /// Root's program, connected to the sidecar and waiting for the line that crashes it.
        func rootWaiter() throws -> Waiter {
            try Waiter(waiter, environment: ["LD_PRELOAD": stub, "CRASHPORT_SOCKET": sidecar.socket])
        }

        /// Root's crash during the attack is reported, in at most `seconds` (a bound on a stall,
        /// well under the stub's wait and the attack's length), and the sidecar is alive.
        func assertRootCrashReported(
            _ waiter: Waiter, within seconds: TimeInterval, file: StaticString = #filePath, line: UInt = #line
        )
            throws
        {
            XCTAssertEqual(try waiter.crash().status, .signaled(SIGSEGV), file: file, line: line)
            XCTAssertNoThrow(try sidecar.waitForReports(1, uid: 0, timeout: seconds), file: file, line: line)
            XCTAssertTrue(sidecar.isRunning, "the sidecar is alive:\n\(sidecar.log)", file: file, line: line)
        }

        func finish() {
            sidecar.stop()
            user.remove()
        }
    }

    /// VmHWM of a process, in KiB (its peak resident memory).
    func peakResidentKiB(_ pid: pid_t) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    // MARK: Every wait bounded

    /// Attack 4: the user holds flock on the run history's lock in their own reports directory
    /// and their program sends a SETTING (crashport_set_enabled). The sidecar gives up on the
    /// lock after its short bound and says so; root's crash meanwhile is reported.
    func testHeldRunsLockDoesNotStallTheSidecar() throws {
        let setup = try Setup(fresh("flock"))
        defer { setup.finish() }
        let root = try setup.rootWaiter()
        let lock = setup.theirDirectory + "/.crashport-runs.lock"
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        holder.arguments = ["-u", setup.user.name, "--", "/usr/bin/flock", lock, "-c", "echo locked; read ended"]
        let output = Pipe()
        let input = Pipe()
        holder.standardOutput = output
        holder.standardInput = input
        try holder.run()
        defer {
            // EOF on its stdin ends the holder, and the lock with it.
            try? input.fileHandleForWriting.close()
            holder.waitUntilExit()
        }
        let said = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        XCTAssertEqual(said, "locked\n")

        let setting = try setup.asUser([setup.trust, "setting"])
        XCTAssertEqual(setting.status, .exited(0), setting.stderr)
        usleep(300_000)  // the setting is read and handled by now
        try setup.assertRootCrashReported(root, within: 10)
        try waitUntil("the log says the lock was not taken:\n\(setup.sidecar.log)", timeout: 10) {
            setup.sidecar.log.contains(".crashport-runs.lock")
        }
    }

    // MARK: A user's files read as that user, bounded

    /// Attack 7: a 1.5 GB sparse .crashport-consent.json in the user's reports directory is
    /// refused at their program's HELLO without being read: the sidecar's peak resident memory
    /// stays far below the file's size, the log names the file, and root's crash is reported.
    func testSparseConsentFileIsRefusedUnread() throws {
        let setup = try Setup(fresh("sparse"))
        defer { setup.finish() }
        let root = try setup.rootWaiter()
        let consent = setup.theirDirectory + "/.crashport-consent.json"
        let made = try setup.asUser(["/usr/bin/truncate", "-s", "1500M", consent])
        XCTAssertEqual(made.status, .exited(0), made.stderr)
        let before = peakResidentKiB(setup.sidecar.pid)
        let hello = try setup.asUser([setup.trust, "pending"])
        XCTAssertTrue(hello.stdout.contains("pending 0"), "\(hello.stdout)\n\(hello.stderr)")
        try setup.assertRootCrashReported(root, within: 10)
        let after = peakResidentKiB(setup.sidecar.pid)
        XCTAssertLessThan(after - before, 128 << 10, "peak RSS \(before) -> \(after) KiB: the file was read")
        XCTAssertTrue(setup.sidecar.log.contains(".crashport-consent.json"), setup.sidecar.log)
    }

    /// A consent file that is the user's symlink to a root-only file (whose content would make
    /// the user's report await a decision) is not followed: the program's HELLO reply says no
    /// report awaits one, and the log says why.
    func testSymlinkedConsentFileIsNotFollowed() throws {
        let setup = try Setup(fresh("symlink"))
        defer { setup.finish() }
        let secrets = setup.work + "/secrets"
        mkdir(secrets, 0o700)
        let secret = secrets + "/consent.json"
        try #"{"choice": "ask", "programs": {}}"#.write(toFile: secret, atomically: true, encoding: .utf8)
        chmod(secret, 0o600)

        let crashed = try setup.asUser([setup.trust, "crash"])
        XCTAssertNotEqual(crashed.status, .exited(0))
        _ = try setup.sidecar.waitForReports(1, uid: setup.user.uid)
        let linked = try setup.asUser(["/bin/ln", "-s", secret, setup.theirDirectory + "/.crashport-consent.json"])
        XCTAssertEqual(linked.status, .exited(0), linked.stderr)

        let root = try setup.rootWaiter()
        let hello = try setup.asUser([setup.trust, "pending"])
        XCTAssertTrue(hello.stdout.contains("pending 0"), "root's file was read: \(hello.stdout)\n\(setup.sidecar.log)")
        XCTAssertTrue(setup.sidecar.log.contains("symbolic link"), setup.sidecar.log)
        try setup.assertRootCrashReported(root, within: 10)
    }

    // MARK: Configuration checked

    /// The sidecar started with `config`: its exit status when it refused to start, nil when it
    /// is watching.
    func start(config: String, in directory: String) throws -> (SidecarProcess, Int32?) {
        let sidecar = try SidecarProcess(directory: directory, arguments: ["--config", config], waitUntilWatching: false)
        try waitUntil("the sidecar starts or refuses to:\n\(sidecar.log)", timeout: 30) {
            !sidecar.isRunning || sidecar.log.contains("watching ")
        }
        return (sidecar, sidecar.isRunning ? nil : sidecar.stop())
    }

    /// hang-ms = 2^64-1 (a root-owned --config): refused at start with the key and the file
    /// named; reread on SIGHUP, it is refused and the previous configuration kept, and a
    /// client's HELLO (which would start its hang watch) leaves the sidecar alive.
    func testHugeHangMillisecondsAreRefused() throws {
        let work = fresh("hangms")
        let config = work + "/watch.conf"
        try "hang-ms = 18446744073709551615\n".write(toFile: config, atomically: true, encoding: .utf8)
        let (refused, status) = try start(config: config, in: work)
        if let status {
            XCTAssertNotEqual(status, 0)
            XCTAssertTrue(refused.log.contains("hang-ms") && refused.log.contains(config), refused.log)
        } else {
            // Started: a client's HELLO must not end it.
            let client = try TestSupport.run(
                [try trustProgram(work), "pending"], environment: ["CRASHPORT_SOCKET": refused.socket])
            XCTAssertTrue(client.stdout.hasPrefix("pending"), client.stderr)
            usleep(500_000)
            XCTAssertTrue(refused.isRunning, "the sidecar died at a HELLO:\n\(refused.log)")
            refused.stop()
        }

        try "hang-ms = 1000\n".write(toFile: config, atomically: true, encoding: .utf8)
        let (sidecar, none) = try start(config: config, in: fresh("hangms-hup"))
        XCTAssertNil(none, sidecar.log)
        defer { sidecar.stop() }
        try "hang-ms = 18446744073709551615\n".write(toFile: config, atomically: true, encoding: .utf8)
        kill(sidecar.pid, SIGHUP)
        try waitUntil("the reread is logged:\n\(sidecar.log)", timeout: 10) { sidecar.log.contains("SIGHUP") }
        XCTAssertTrue(sidecar.log.contains("keeping the configuration in effect"), sidecar.log)
        XCTAssertTrue(sidecar.log.contains("hang-ms"), sidecar.log)
        let client = try TestSupport.run(
            [try trustProgram(work), "pending"], environment: ["CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertTrue(client.stdout.hasPrefix("pending"), client.stderr)
        usleep(500_000)
        XCTAssertTrue(sidecar.isRunning, "the sidecar died at a HELLO:\n\(sidecar.log)")
    }

    /// A configuration file that is not UTF-8 is refused with a message that says so and names
    /// the file (not "CocoaError 259"): at start the sidecar exits non-zero; on SIGHUP it keeps
    /// what it had.
    func testNonUTF8ConfigurationIsRefusedReadably() throws {
        let work = fresh("utf8")
        let config = work + "/watch.conf"
        let bytes: [UInt8] = Array("jobs = ".utf8) + [0xFF, 0xFE, 0x0A]
        XCTAssertTrue(FileManager.default.createFile(atPath: config, contents: Data(bytes)))
        let (refused, status) = try start(config: config, in: work)
        XCTAssertNotNil(status, "started with a file that is not UTF-8:\n\(refused.log)")
        XCTAssertNotEqual(status ?? 0, 0)
        XCTAssertTrue(refused.log.contains(config) && refused.log.contains("UTF-8"), refused.log)
        XCTAssertFalse(refused.log.contains("CocoaError"), refused.log)

        try "jobs = 2\n".write(toFile: config, atomically: true, encoding: .utf8)
        let (sidecar, none) = try start(config: config, in: fresh("utf8-hup"))
        XCTAssertNil(none, sidecar.log)
        defer { sidecar.stop() }
        XCTAssertTrue(FileManager.default.createFile(atPath: config, contents: Data(bytes)))
        kill(sidecar.pid, SIGHUP)
        try waitUntil("the reread is logged:\n\(sidecar.log)", timeout: 10) { sidecar.log.contains("SIGHUP") }
        XCTAssertTrue(sidecar.log.contains("UTF-8") && sidecar.log.contains("keeping the configuration"), sidecar.log)
        XCTAssertTrue(sidecar.isRunning)
    }

    func trustProgram(_ work: String) throws -> String {
        let libraries = (try TestSupport.stub() as NSString).deletingLastPathComponent
        return try TestSupport.compile(
            [TestSupport.fixture("sidecar/trust.c")], output: work + "/trust",
            flags: ["-O1", "-g", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
    }

    // MARK: Attachments

    /// /proc/self and /proc/thread-self name the sidecar's own files when it copies them (and so
    /// does a symlink to them): they are refused, with a reason in the report; the program's own
    /// file is still copied.
    func testProcSelfAttachmentsAreRefused() throws {
        let work = fresh("procself")
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let own = work + "/app.log"
        try "mine\n".write(toFile: own, atomically: true, encoding: .utf8)
        let link = work + "/maps-link"
        XCTAssertEqual(symlink("/proc/self/maps", link), 0)
        let named = ["/proc/self/maps", "/proc/thread-self/status", "//proc/./self/environ", link]
        let result = try TestSupport.run(
            [try trustProgram(work), "attach", own] + named, environment: ["CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(result.status, .signaled(SIGSEGV), result.stderr)
        let event = try XCTUnwrap(try sidecar.waitForReports(1).first)
        let records = Dictionary(
            (event.attachments ?? []).map { ($0.path ?? "", $0) }, uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(records[own]?.copied, 5, "\(event.attachments ?? [])")
        for path in named {
            let record = try XCTUnwrap(records[path], "\(path): \(event.attachments ?? [])")
            XCTAssertNil(record.file, "\(path) was copied: \(record)")
            XCTAssertTrue(record.error?.contains("crashport's own") == true, "\(path): \(record)")
        }
        let copies = sidecar.reportsDirectory() + "/" + sidecar.reportIDs()[0] + "/attachments"
        // The program's own file, and the system's log around the crash (the watcher's, not a
        // file the program named).
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: copies).filter { $0 != "system.log" }, ["app.log"])
    }

    /// Attack: a user runs the very program whose crash root's consent holds (the same executable,
    /// so the same program to the history), lists its pending reports and sends and discards
    /// root's report by id. The list is the user's own (none), both decisions are refused and
    /// logged, and root's report still awaits its own consent.
    func testAUserCannotDecideAnotherUsersPendingReport() throws {
        let work = fresh("consent-user")
        let setup = try Setup(work)
        defer { setup.finish() }
        let app = try TestSupport.compile(
            [TestSupport.fixture("api/app.c")], output: work + "/app",
            flags: ["-O1", "-g", "-pthread", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", work, "-Wl,-rpath," + work, "-lcrashport"])
        chmod(app, 0o755)
        let roots = setup.sidecar.reportsDirectory(uid: 0)
        try FileManager.default.createDirectory(atPath: roots, withIntermediateDirectories: true)
        XCTAssertEqual(try TestSupport.run([TestSupport.crashport, "consent", "ask", "--reports", roots]).status, .exited(0))
        _ = try TestSupport.run([app, "consent", "crash"], environment: ["CRASHPORT_SOCKET": setup.sidecar.socket])
        let id = try XCTUnwrap(try setup.sidecar.waitForReports(1, uid: 0).first?.id)
        func consent() -> String {
            let data = FileManager.default.contents(atPath: roots + "/" + id + "/upload.json") ?? Data("{}".utf8)
            return ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any])?["consent"] as? String ?? "-"
        }
        let awaiting = consent()

        let attack = try setup.asUser([app, "dialog", "send", id, "discard", id])
        XCTAssertTrue(attack.stdout.hasPrefix("pending 0\nlisted 0\n"), "only the user's own: \(attack.stdout)")
        try waitUntil("both decisions refused:\n\(setup.sidecar.log)", timeout: 30) {
            setup.sidecar.log.components(separatedBy: "awaiting consent here; refused").count - 1 >= 2
        }
        XCTAssertEqual(consent(), awaiting, "root's report still awaits root's decision")
        XCTAssertTrue(setup.sidecar.isRunning)
    }
}
