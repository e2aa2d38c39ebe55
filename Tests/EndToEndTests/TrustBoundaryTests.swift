// End-to-end: the trust boundary of a root sidecar (issue 30). Each test makes a throwaway user,
// attacks a real `crashport watch` running as root the way that user could, and checks that the
// secret the test put where only root may read it is in no file the user's reports hold, that
// the sidecar is still alive, and that it still reports another user's crash. The secret is read
// by a program the test builds: setuid root (attacks 1 and 2), or one that made itself not
// dumpable; or it sits in a file only root's group may read (attack 6).
//
// Runs only as root (users, setuid files); skipped with the reason otherwise.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A process started as another user (runuser), whose stdout is read line by line.
final class UserProcess {
    let process = Process()
    let input = Pipe()
    let output = Pipe()
    private var buffered: [UInt8] = []

    init(_ command: [String], user: String?, environment: [String: String] = [:]) throws {
        process.prepare(command, user: user, environment: environment)
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
    }

    /// The next line on its stdout (without the newline); nil at its end or after `timeout`.
    func line(timeout: TimeInterval = 30) -> String? {
        let fd = output.fileHandleForReading.fileDescriptor
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let newline = buffered.firstIndex(of: 10) {
                let line = String(decoding: buffered[..<newline], as: UTF8.self)
                buffered.removeSubrange(...newline)
                return line
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left * 1000) + 1) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(fd, &chunk, chunk.count)
            guard count > 0 else { return nil }
            buffered += chunk[0..<count]
        }
    }

    /// Reads lines until one starts with `prefix`; its words after the prefix.
    func expect(_ prefix: String, timeout: TimeInterval = 30) throws -> [String] {
        while let line = line(timeout: timeout) {
            if line.hasPrefix(prefix + " ") { return line.split(separator: " ").dropFirst().map(String.init) }
        }
        throw TestFailure("no line starting with '\(prefix)' from \(process.arguments ?? [])")
    }

    func finish() {
        try? input.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate() }
    }
}

final class TrustBoundaryTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("trust")

    /// A throwaway user, a directory both root and the user can reach, and a secret only root
    /// may read there.
    struct Scene {
        let user: SidecarTests.ThrowawayUser
        let directory: String
        let secret: String
        let secretFile: String

        init(_ name: String, secretMode: mode_t = 0o600) throws {
            user = try SidecarTests.ThrowawayUser()
            directory = TrustBoundaryTests.directory + "/" + name + "-" + UUID().uuidString.prefix(6)
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            // Every directory above must let the user through.
            var path = directory
            while path != "/" && !path.isEmpty {
                var info = stat()
                if stat(path, &info) == 0 { chmod(path, info.st_mode & 0o7777 | 0o011) }
                path = (path as NSString).deletingLastPathComponent
            }
            chmod(directory, 0o755)
            secret = "CRASHPORT-ROOT-SECRET-" + UUID().uuidString
            secretFile = directory + "/secret.txt"
            try Data((secret + "\n").utf8).write(to: URL(fileURLWithPath: secretFile))
            chown(secretFile, 0, 0)
            chmod(secretFile, secretMode)
        }

        /// Whether the user can read `file` themselves.
        func userCanRead(_ file: String) throws -> Bool {
            try TestSupport.run(["/usr/sbin/runuser", "-u", user.name, "--", "cat", file]).status == .exited(0)
        }

        /// A copy of the stub the user can load.
        func stub() throws -> String {
            let copy = directory + "/libcrashport.so"
            if !FileManager.default.fileExists(atPath: copy) {
                try FileManager.default.copyItem(atPath: try TestSupport.stub(), toPath: copy)
                chmod(copy, 0o755)
            }
            return copy
        }

        /// Tests/Fixtures/trust/secret.c, built without PIE, installed setuid root.
        func setuidProgram() throws -> String {
            var filesystem = statvfs()
            if statvfs(directory, &filesystem) == 0, filesystem.f_flag & UInt(ST_NOSUID) != 0 {
                throw XCTSkip("\(directory) is on a file system mounted nosuid: no setuid program runs there")
            }
            let program = try TestSupport.compile(
                [TestSupport.fixture("trust/secret.c")], output: directory + "/secret-reader",
                flags: ["-O0", "-g", "-fno-pie", "-no-pie"])
            chown(program, 0, 0)
            chmod(program, 0o4755)
            return program
        }
    }

    func sidecar(in scene: Scene, launcher: [String] = []) throws -> SidecarProcess {
        let sidecar = try SidecarProcess(directory: scene.directory, launcher: launcher)
        chmod(sidecar.reports, 0o711)
        return sidecar
    }

    /// Every file under `root` (the user's reports), none of which may hold the secret.
    func assertNoFileHolds(_ secret: String, under root: String, file: StaticString = #filePath, line: UInt = #line) {
        let needle = Data(secret.utf8)
        var checked = 0
        let walker = FileManager.default.enumerator(atPath: root)
        while let relative = walker?.nextObject() as? String {
            let path = root + "/" + relative
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
                let bytes = FileManager.default.contents(atPath: path)
            else { continue }
            checked += 1
            XCTAssertNil(bytes.range(of: needle), "\(path) holds the root-only secret", file: file, line: line)
        }
        XCTAssertGreaterThan(checked, 0, "the user's reports hold files to check (\(root))", file: file, line: line)
    }

    /// The sidecar survived the attack and still reports a crash of root's own.
    func assertStillServes(_ sidecar: SidecarProcess, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertTrue(sidecar.isRunning, "the sidecar is alive:\n\(sidecar.log.suffix(3000))", file: file, line: line)
        let before = sidecar.reportIDs(uid: 0).count
        let waiter = try Waiter.build(in: Self.directory)
        let other = try Waiter(waiter, environment: ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(try other.crash().status, .signaled(SIGSEGV), file: file, line: line)
        let events = try sidecar.waitForReports(before + 1, uid: 0)
        XCTAssertTrue(events.contains { $0.process?.pid?.rawValue == other.pid }, file: file, line: line)
    }

    /// The user's report says `note`, no file of theirs holds the secret, and the sidecar still
    /// serves; then it is stopped.
    func assertReportedSafely(
        _ event: Event, note: String, scene: Scene, sidecar: SidecarProcess, file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        XCTAssertTrue((event.notes ?? []).contains { $0.contains(note) }, "\(event.notes ?? [])", file: file, line: line)
        assertNoFileHolds(scene.secret, under: sidecar.reportsDirectory(uid: scene.user.uid), file: file, line: line)
        try assertStillServes(sidecar, file: file, line: line)
        sidecar.stop()
    }

    /// Attack 1: a client asks to be traced for its whole life, keeps its connection across an
    /// exec of a setuid-root program, and SIGKILLs it. Traced by root, the exec would keep its
    /// privileges and the capture at its exit stops would hand the user root's memory. The
    /// sidecar lets it go at the exec's stop instead (the program runs with its privileges, as
    /// untraced), and its end is reported without stacks.
    func testTracedClientExecingASetuidProgramIsLetGoAtTheExec() throws {
        let scene = try Scene("trace")
        defer { scene.user.remove() }
        let program = try scene.setuidProgram()
        XCTAssertFalse(try scene.userCanRead(scene.secretFile))
        let sidecar = try sidecar(in: scene)
        let attack = try UserProcess(
            ["/usr/bin/python3", TestSupport.fixture("trust/attacker.py"), "trace", sidecar.socket, program, scene.secretFile],
            user: scene.user.name)
        defer { attack.finish() }
        _ = try attack.expect("hello")
        let ready = try attack.expect("ready")
        let pid = try XCTUnwrap(Int32(ready[0]))
        XCTAssertGreaterThan(Int(ready[1]) ?? 0, 0, "the program read the secret: it ran with its privileges")
        // (Bounded, and not fatal: without the fix the line never comes, and the leak below is
        // what the test shows.)
        try? waitUntil("the sidecar lets pid \(pid) go at its exec", timeout: 10) {
            sidecar.log.contains("pid \(pid): no longer traced")
        }
        XCTAssertTrue(sidecar.log.contains("pid \(pid): no longer traced"), sidecar.log)
        kill(pid, SIGKILL)
        let events = try sidecar.waitForReports(1, uid: scene.user.uid)
        XCTAssertEqual(events[0].kind, .termination)
        try assertReportedSafely(events[0], note: "which its user may not read", scene: scene, sidecar: sidecar)
    }

    /// Attack 2: a crash record about the client itself, with a chosen stack pointer, sent just
    /// before it execs a setuid-root program; the record's checks (pid from the kernel, tid,
    /// real uid) all still pass afterwards. The test holds the sidecar until the program has
    /// read its secret, so the race is always won: the kernel, asked as the user, refuses the
    /// process's memory, and the report says so, with none of it.
    func testCrashRecordRacedWithASetuidExecIsReportedWithoutMemory() throws {
        let scene = try Scene("race")
        defer { scene.user.remove() }
        let program = try scene.setuidProgram()
        let symbols = try TestSupport.run(["nm", "-P", program]).stdout
        let line = try XCTUnwrap(symbols.split(separator: "\n").first { $0.hasPrefix("secret_global ") })
        let address = String(line.split(separator: " ")[2])
        let sidecar = try sidecar(in: scene)
        kill(sidecar.pid, SIGSTOP)
        var resumed = false
        defer { if !resumed { kill(sidecar.pid, SIGCONT) } }
        let attack = try UserProcess(
            [
                "/usr/bin/python3", TestSupport.fixture("trust/attacker.py"), "race", sidecar.socket, address, program,
                scene.secretFile,
            ], user: scene.user.name)
        defer { attack.finish() }
        _ = try attack.expect("ready")
        kill(sidecar.pid, SIGCONT)
        resumed = true
        let events = try sidecar.waitForReports(1, uid: scene.user.uid)
        try assertReportedSafely(events[0], note: "reported without its memory", scene: scene, sidecar: sidecar)
    }

    /// A process that made itself not dumpable (PR_SET_DUMPABLE 0) keeps its memory from its
    /// own user; its crash is reported with what that user may see, none of its memory.
    func testNotDumpableProcessIsReportedWithoutItsMemory() throws {
        let scene = try Scene("nodump", secretMode: 0o644)
        defer { scene.user.remove() }
        let program = try TestSupport.compile(
            [TestSupport.fixture("trust/nodump.c")], output: scene.directory + "/nodump", flags: ["-O0", "-g"])
        let sidecar = try sidecar(in: scene)
        let victim = try UserProcess(
            [program, scene.secretFile], user: scene.user.name,
            environment: ["LD_PRELOAD": try scene.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        defer { victim.finish() }
        _ = try victim.expect("ready")
        try victim.input.fileHandleForWriting.write(contentsOf: Data("crash\n".utf8))
        let events = try sidecar.waitForReports(1, uid: scene.user.uid)
        XCTAssertEqual(events[0].signal?.name, "SIGSEGV")
        try assertReportedSafely(events[0], note: "reported without its memory", scene: scene, sidecar: sidecar)
    }

    /// Attack 6: a sidecar started from a root login shell keeps group 0 among its
    /// supplementary groups. An attachment only root's group may read (0640 root:root) is not
    /// copied into the user's report: files are read with the user's uid and primary group only.
    func testAttachmentOnlyRootsGroupMayReadIsNotCopied() throws {
        let scene = try Scene("groups", secretMode: 0o640)
        defer { scene.user.remove() }
        XCTAssertFalse(try scene.userCanRead(scene.secretFile))
        let libraries = (try scene.stub() as NSString).deletingLastPathComponent
        let program = try TestSupport.compile(
            [TestSupport.fixture("trust/attach.c")], output: scene.directory + "/attach",
            flags: ["-O1", "-g", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
        let sidecar = try sidecar(in: scene, launcher: ["/usr/bin/setpriv", "--groups", "0", "--"])
        let groups = (try? String(contentsOfFile: "/proc/\(sidecar.pid)/status", encoding: .utf8)) ?? ""
        XCTAssertTrue(
            groups.split(separator: "\n").contains {
                $0.hasPrefix("Groups:") && $0.dropFirst(7).split(whereSeparator: { $0 == " " || $0 == "\t" }).contains("0")
            },
            "the sidecar runs with group 0 among its supplementary groups")
        let victim = try UserProcess(
            [program, scene.secretFile], user: scene.user.name, environment: ["CRASHPORT_SOCKET": sidecar.socket])
        defer { victim.finish() }
        _ = try victim.expect("ready")
        try victim.input.fileHandleForWriting.write(contentsOf: Data("crash\n".utf8))
        let events = try sidecar.waitForReports(1, uid: scene.user.uid)
        XCTAssertEqual(events[0].signal?.name, "SIGSEGV")
        XCTAssertFalse(
            (events[0].crashedThreadRecord?.frames ?? []).isEmpty, "the user's own process is still read whole")
        assertNoFileHolds(scene.secret, under: sidecar.reportsDirectory(uid: scene.user.uid))
        try assertStillServes(sidecar)
        sidecar.stop()
    }

    /// A user's own process with many threads, under a root sidecar: every thread captured and
    /// unwound (held by ptrace, its memory opened as the user, then read while it is frozen).
    func testAUsersOwnThreadsAreAllCaptured() throws {
        let scene = try Scene("threads")
        defer { scene.user.remove() }
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/threads.c")], output: scene.directory + "/threads",
            flags: ["-O1", "-g", "-pthread"])
        let sidecar = try sidecar(in: scene)
        let run = try TestSupport.run(
            [
                "/usr/sbin/runuser", "-u", scene.user.name, "--", "env", "LD_PRELOAD=\(try scene.stub())",
                "CRASHPORT_SOCKET=\(sidecar.socket)", program, "8",
            ])
        XCTAssertNotEqual(run.status, .exited(0))
        let events = try sidecar.waitForReports(1, uid: scene.user.uid)
        let threads = events[0].threads ?? []
        XCTAssertEqual(threads.count, 9, sidecar.log)
        let parked = threads.filter { ($0.frames ?? []).contains { $0.function == "park_here" } }
        XCTAssertEqual(parked.count, 8, "every parked thread unwound to park_here")
        XCTAssertFalse((events[0].notes ?? []).contains { $0.contains("without its memory") })
        sidecar.stop()
    }

    /// The other side of the boundary: a process its user may read is still captured whole for
    /// that user, traced to its SIGKILL (stacks at the exit stops) and at a crash.
    func testAUsersOwnTracedProcessKeepsItsStacks() throws {
        let scene = try Scene("own")
        defer { scene.user.remove() }
        let program = scene.directory + "/waiter"
        try FileManager.default.copyItem(
            atPath: try Waiter.build(in: Self.directory),
            toPath: program)
        let sidecar = try sidecar(in: scene)
        let traced = try Waiter(
            program,
            environment: ["LD_PRELOAD": try scene.stub(), "CRASHPORT_SOCKET": sidecar.socket, "CRASHPORT_TRACE_EXIT": "1"],
            user: scene.user.name)
        try waitUntil("pid \(traced.pid) is traced:\n\(sidecar.log)", timeout: 30) {
            sidecar.log.contains("tracing pid \(traced.pid)")
        }
        kill(traced.pid, SIGKILL)
        _ = try traced.wait()
        let events = try sidecar.waitForReports(1, uid: scene.user.uid)
        XCTAssertEqual(events[0].kind, .termination)
        let frames = events[0].crashedThreadRecord?.frames?.compactMap(\.function) ?? []
        XCTAssertTrue(frames.contains("main"), "stacks captured at the exit stops: \(frames)")
        sidecar.stop()
    }
}
