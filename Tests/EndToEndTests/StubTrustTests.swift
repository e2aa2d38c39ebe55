// End-to-end: the stub's side of the trust boundary (issue 30). A setuid program that links
// libcrashport hands nothing to a listener its user chose; a process that is not dumpable sends
// and spools no memory of itself and stays not dumpable; a spool name another user squats does
// not stop a crash from being spooled. Real programs, a real setuid bit, throwaway users, a fake
// sidecar (Tests/Fixtures/stubtrust/listener.py) that keeps every byte it is sent.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A fake sidecar run as a user: Tests/Fixtures/stubtrust/listener.py on `socket` (a path, or
/// "@name"), every message it receives appended to `output`.
final class FakeListener {
    let process = Process()
    let output: String
    let pid: Int32

    init(socket: String, output: String, user: String, script: String) throws {
        self.output = output
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        process.arguments = ["-u", user, "--", "/usr/bin/python3", script, socket, output]
        let ready = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = ready
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = ""
        while !line.hasSuffix("\n") {
            let data = ready.fileHandleForReading.availableData
            if data.isEmpty { break }
            line += String(decoding: data, as: UTF8.self)
        }
        guard line.hasPrefix("ready "), let pid = Int32(line.dropFirst(6).trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            process.terminate()
            process.waitUntilExit()
            throw TestFailure("the fake listener did not start: \(line)")
        }
        self.pid = pid
    }

    /// Every message received, in order.
    var messages: [[UInt8]] {
        let bytes = [UInt8](FileManager.default.contents(atPath: output) ?? Data())
        var messages: [[UInt8]] = []
        var offset = 0
        while offset + 4 <= bytes.count {
            let length = bytes[offset..<offset + 4].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
            guard offset + 4 + length <= bytes.count else { break }
            messages.append(Array(bytes[offset + 4..<offset + 4 + length]))
            offset += 4 + length
        }
        return messages
    }

    /// What it saw in /proc of each process that sent it a CRASH record.
    var procNotes: String { (try? String(contentsOfFile: output + ".proc", encoding: .utf8)) ?? "" }

    /// Ends the listener (then runuser, its parent, exits too), so that its user can be removed.
    func stop() {
        kill(pid, SIGKILL)
        process.waitUntilExit()
    }
}

final class StubTrustTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("stubtrust")

    /// A fresh directory every user can reach (the tests run programs as throwaway users).
    func fresh(_ name: String) -> String {
        chmod(Self.directory, 0o755)
        let path = TestSupport.freshDirectory(in: Self.directory, name)
        chmod(path, 0o755)
        return path
    }

    /// A directory owned by `uid` with `mode`.
    func directory(_ path: String, owner uid: UInt32, mode: mode_t) throws -> String {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard chown(path, uid, gid_t(uid == 0 ? 0 : getpwuid(uid).pointee.pw_gid)) == 0, chmod(path, mode) == 0 else {
            throw TestFailure("cannot give \(path) to uid \(uid)")
        }
        return path
    }

    /// A secret only `uid` may read (0600), as the program will find it.
    func secretFile(_ path: String, owner uid: UInt32) throws -> String {
        let secret = "crashport-secret-\(UUID().uuidString)"
        try secret.write(toFile: path, atomically: false, encoding: .utf8)
        guard chown(path, uid, gid_t(uid == 0 ? 0 : getpwuid(uid).pointee.pw_gid)) == 0, chmod(path, 0o600) == 0 else {
            throw TestFailure("cannot give \(path) to uid \(uid)")
        }
        return secret
    }

    /// Tests/Fixtures/stubtrust/secret.c linked with a copy of the stub in `directory`/lib (the
    /// loader of a setuid program takes its libraries from an absolute RUNPATH, never from the
    /// environment), reading `secretPath`.
    func secretProgram(in directory: String, name: String, secretPath: String, defines: [String] = []) throws -> String {
        let lib = directory + "/lib"
        if !FileManager.default.fileExists(atPath: lib + "/libcrashport.so") {
            try FileManager.default.createDirectory(atPath: lib, withIntermediateDirectories: true)
            chmod(lib, 0o755)
            try FileManager.default.copyItem(atPath: try TestSupport.stub(), toPath: lib + "/libcrashport.so")
            chmod(lib + "/libcrashport.so", 0o755)
        }
        return try TestSupport.compile(
            [TestSupport.fixture("stubtrust/secret.c")], output: directory + "/" + name,
            flags: ["-O1", "-g", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include", "-DSECRET_FILE=\"\(secretPath)\""]
                + defines.map { "-D" + $0 },
            linkFlags: ["-L", lib, "-Wl,--no-as-needed", "-lcrashport", "-Wl,-rpath," + lib])
    }

    /// The fake listener's script, copied where the throwaway user can read it.
    func listenerScript(in directory: String) throws -> String {
        let script = directory + "/listener.py"
        if !FileManager.default.fileExists(atPath: script) {
            try FileManager.default.copyItem(atPath: TestSupport.fixture("stubtrust/listener.py"), toPath: script)
            chmod(script, 0o644)
        }
        return script
    }

    /// Every regular file under `path` (read as root), with its bytes.
    func files(under path: String) -> [(String, [UInt8])] {
        let names = (FileManager.default.enumerator(atPath: path)?.allObjects as? [String]) ?? []
        return names.compactMap { name in
            var info = stat()
            guard lstat(path + "/" + name, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
                let data = FileManager.default.contents(atPath: path + "/" + name)
            else { return nil }
            return (name, [UInt8](data))
        }
    }

    func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let pattern = Array(needle.utf8)
        guard haystack.count >= pattern.count else { return false }
        return (0...(haystack.count - pattern.count)).contains { haystack[$0..<$0 + pattern.count].elementsEqual(pattern) }
    }

    /// Issue 30, attack 5: a setuid-root program that links libcrashport and holds a root-only
    /// secret crashes, run by a user who set CRASHPORT_SOCKET, CRASHPORT_SPOOL and
    /// CRASHPORT_TIMEOUT_MS to their own fake sidecar and directory; and a second one that
    /// hard-codes an abstract socket name, which the user bound first. Neither listener
    /// receives a byte of the secret, the user's directory holds none, and each program dies of
    /// its own SIGSEGV.
    func testSetuidProgramHandsNothingToItsUsersListener() throws {
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("setuid")
        let secretPath = directory + "/root-only"
        let secret = try secretFile(secretPath, owner: 0)
        let abstract = "@crashport-stubtrust-\(UUID().uuidString.prefix(8))"
        let fromEnvironment = try secretProgram(in: directory, name: "from-environment", secretPath: secretPath)
        let hardCoded = try secretProgram(
            in: directory, name: "hard-coded", secretPath: secretPath, defines: ["SOCKET_PATH=\"\(abstract)\""])
        for program in [fromEnvironment, hardCoded] {
            guard chown(program, 0, 0) == 0, chmod(program, 0o4755) == 0 else { throw TestFailure("chmod 4755 \(program)") }
        }
        let home = try self.directory(directory + "/user", owner: user.uid, mode: 0o700)
        let spool = try self.directory(home + "/spool", owner: user.uid, mode: 0o700)
        let script = try listenerScript(in: directory)
        let listeners = [
            try FakeListener(socket: home + "/fake.sock", output: home + "/received", user: user.name, script: script),
            try FakeListener(socket: abstract, output: home + "/received-abstract", user: user.name, script: script),
        ]
        defer { listeners.forEach { $0.stop() } }

        for program in [fromEnvironment, hardCoded] {
            // The user's settings; the hard-coded program has its own socket (its user took the name).
            var environment = ["CRASHPORT_SPOOL": spool, "CRASHPORT_TIMEOUT_MS": "2000", "CRASHPORT_TRACE_EXIT": "1"]
            if program == fromEnvironment { environment["CRASHPORT_SOCKET"] = home + "/fake.sock" }
            let victim = try Waiter(program, environment: environment, user: user.name)
            let ended = try victim.crash()
            guard ended.stderr.contains("euid 0 read ") && !ended.stderr.contains("read -1") else {
                throw XCTSkip("the setuid bit is not honoured here (nosuid mount?): \(ended.stderr)")
            }
            XCTAssertTrue([.signaled(SIGSEGV), .exited(128 + SIGSEGV)].contains(ended.status), "\(ended)")
            if program == hardCoded {
                XCTAssertTrue(ended.stderr.contains("not connecting"), "the stub says it refused: \(ended.stderr)")
            }
        }
        for listener in listeners {
            let leaked = listener.messages.filter { contains($0, secret) }
            XCTAssertTrue(
                leaked.isEmpty,
                "\(listener.output): \(leaked.count) of \(listener.messages.count) messages hold the root-only secret")
        }
        for (name, bytes) in files(under: home) {
            XCTAssertFalse(contains(bytes, secret), "\(home)/\(name) holds the root-only secret")
        }
    }

    /// A program that made itself non-dumpable (as ssh-agent does) crashes with a listener of
    /// its own user: the record it sends carries no memory of it (CP_CRASH_NOT_DUMPABLE, no
    /// stack copy, no registers, not the secret its stack held), and it is still not dumpable
    /// while it waits for the answer (/proc/PID is root's, its user cannot open /proc/PID/mem).
    /// With no listener its spool file holds no stack, no registers and no memory map either.
    func testNonDumpableProcessSendsAndSpoolsNoMemory() throws {
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("nondumpable")
        let home = try self.directory(directory + "/user", owner: user.uid, mode: 0o700)
        let secretPath = home + "/secret"
        let secret = try secretFile(secretPath, owner: user.uid)
        let program = try secretProgram(in: directory, name: "hidden", secretPath: secretPath, defines: ["HIDE_MEMORY"])
        let listener = try FakeListener(
            socket: home + "/fake.sock", output: home + "/received", user: user.name, script: try listenerScript(in: directory))
        defer { listener.stop() }

        let live = try Waiter(
            program, environment: ["CRASHPORT_SOCKET": home + "/fake.sock", "CRASHPORT_SPOOL": ""], user: user.name)
        let ended = try live.crash()
        XCTAssertTrue(ended.stderr.contains("read ") && !ended.stderr.contains("read -1"), ended.stderr)
        XCTAssertTrue([.signaled(SIGSEGV), .exited(128 + SIGSEGV)].contains(ended.status), "\(ended)")
        let crashes = listener.messages.compactMap { bytes in (try? CrashRecord(bytes: bytes)).map { (bytes, $0) } }
        XCTAssertEqual(crashes.count, 1, "one CRASH record among \(listener.messages.count) messages")
        for (bytes, record) in crashes {
            XCTAssertFalse(contains(bytes, secret), "the record holds the secret")
            XCTAssertTrue(record.notDumpable, "flags 0x\(String(record.flags, radix: 16))")
            XCTAssertEqual(record.stack.bytes.count, 0, "no stack copy")
            XCTAssertEqual(record.registers, X86_64Registers(gpr: [UInt64](repeating: 0, count: X86_64Registers.gprCount)))
            XCTAssertEqual(record.faultAddress, 0)
            XCTAssertEqual(record.signal, SIGSEGV)
            XCTAssertEqual(record.pid.rawValue, live.pid)
            XCTAssertFalse(record.threadName.isEmpty, "the thread's name is kept")
        }
        let notes = listener.procNotes
        XCTAssertTrue(notes.contains("pid \(live.pid) owner 0 mem error 13"), "still not dumpable at the crash: \(notes)")

        // No listener: the spool.
        let spool = try self.directory(directory + "/spool", owner: 0, mode: 0o1733)
        let spooled = try Waiter(
            program, environment: ["CRASHPORT_SOCKET": home + "/nobody.sock", "CRASHPORT_SPOOL": spool], user: user.name)
        let spooledEnd = try spooled.crash()
        XCTAssertTrue(spooledEnd.stderr.contains("spooled as"), spooledEnd.stderr)
        let spoolFiles = files(under: spool).filter { $0.0.hasSuffix(".crash") }
        XCTAssertEqual(spoolFiles.count, 1, "\(spoolFiles.map(\.0))")
        for (name, bytes) in spoolFiles {
            XCTAssertFalse(contains(bytes, secret), "\(name) holds the secret")
            let file = try SpooledRecord(bytes: bytes)
            XCTAssertEqual(file.maps, "", "\(name) holds no memory map")
            let record = file.record
            XCTAssertTrue(record.notDumpable)
            XCTAssertEqual(record.stack.bytes.count, 0)
            XCTAssertEqual(record.pid.rawValue, spooled.pid)
        }
    }

    /// Spool squatting: before a user's program crashes, the temporary names its stub used to
    /// write its spool file under (".tmp-PID-TID") are taken in the shared 1733 spool directory
    /// by a file and by a symlink it may not remove. Its crash is spooled all the same, nothing
    /// is written through the symlink, and the next sidecar reports the crash from the spool.
    func testSquattedSpoolNamesDoNotStopTheSpool() throws {
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("squat")
        let waiter = directory + "/waiter"
        _ = try TestSupport.compile([TestSupport.fixture("sidecar/waiter.c")], output: waiter, flags: ["-O1", "-g"])
        let stub = directory + "/libcrashport.so"
        try FileManager.default.copyItem(atPath: try TestSupport.stub(), toPath: stub)
        chmod(stub, 0o755)
        let spool = try self.directory(directory + "/spool", owner: 0, mode: 0o1733)
        let target = directory + "/target"
        try "untouched".write(toFile: target, atomically: false, encoding: .utf8)

        var victims: [Waiter] = []
        for squat in ["file", "symlink"] {
            let victim = try Waiter(
                waiter,
                environment: ["LD_PRELOAD": stub, "CRASHPORT_SOCKET": directory + "/nobody.sock", "CRASHPORT_SPOOL": spool],
                user: user.name)
            // The main thread's tid is the pid: the name the stub would take.
            let name = spool + "/.tmp-\(victim.pid)-\(victim.pid)"
            if squat == "file" {
                XCTAssertTrue(FileManager.default.createFile(atPath: name, contents: Data("squatted".utf8)))
            } else {
                XCTAssertEqual(symlink(target, name), 0)
            }
            let ended = try victim.crash()
            XCTAssertTrue([.signaled(SIGSEGV), .exited(128 + SIGSEGV)].contains(ended.status), "\(ended)")
            XCTAssertTrue(ended.stderr.contains("the crash was spooled as"), "squatted by a \(squat): \(ended.stderr)")
            victims.append(victim)
        }
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "untouched")
        let names = try FileManager.default.contentsOfDirectory(atPath: spool)
        XCTAssertEqual(names.filter { $0.hasSuffix(".crash") }.count, 2, "\(names)")

        let sidecar = try SidecarProcess(directory: directory, spool: spool)
        defer { sidecar.stop() }
        let events = try sidecar.waitForReports(2, uid: user.uid)
        XCTAssertEqual(Set(events.compactMap { $0.process?.pid?.rawValue }), Set(victims.map(\.pid)))
        XCTAssertTrue(events.allSatisfy { $0.capturedFrom == "spool" })
    }
}
