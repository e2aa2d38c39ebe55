// End-to-end: files a user controls cannot stop a root watcher (issue 46, docs/security.md).
//
// The truncation race: a throwaway user's program loads a library of the user's own and
// crashes; a watcher of the user's (inotify on the library, Tests/Fixtures/hostile/
// truncator.c) truncates the library the moment the root sidecar has opened and mapped it, so
// the sidecar reads its mapping past the file's new end. Ten tries, each with a new copy of the
// library, against the host level (socket-request and pipe mode) and against the plain sidecar
// with a preloaded stub client: after each the sidecar is alive and the crash is reported, and a
// last crash with the last copy written whole again names the frame in it (a torn parse is not
// kept). A FIFO the user makes in their own report, where its second step writes: that step
// fails, and holds no other report. The marks: a FIFO, a symlink and a directory planted by the
// user at the name of the mark a root `crashport run` leaves for its crash; it still ends as its
// program did, and leaves its mark.
//
// Runs only as root (a throwaway user; the host level's core_pattern, saved and put back).

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class HostileFileTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("hostile")
    static let tries = 10

    func fresh(_ name: String) -> String {
        let path = TestSupport.freshDirectory(in: Self.directory, name)
        chmod(path, 0o755)
        return path
    }

    /// What the user's side of the race needs in `directory`: the library (in a directory of
    /// the user's, owned by the user), its original bytes, the loader and the truncator.
    struct Attack {
        let directory: String
        let library: String
        let original: [UInt8]
        let loader: String
        let truncator: String
        let user: SidecarTests.ThrowawayUser

        init(in directory: String, user: SidecarTests.ThrowawayUser) throws {
            self.directory = directory
            self.user = user
            let own = directory + "/lib"
            try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
            library = own + "/libvictim.so"
            _ = try TestSupport.compile(
                [TestSupport.fixture("hostile/victim.c")], output: library, flags: ["-O1", "-g", "-shared", "-fPIC"])
            original = try Array(Data(contentsOf: URL(fileURLWithPath: library)))
            loader = try TestSupport.compile(
                [TestSupport.fixture("hostile/loader.c")], output: directory + "/loader.o", flags: ["-O1", "-g", "-c"])
            truncator = try TestSupport.compile(
                [TestSupport.fixture("hostile/truncator.c")], output: directory + "/truncator", flags: ["-O1"])
            chown(own, user.uid, gid_t(user.uid))
            chown(library, user.uid, gid_t(user.uid))
            chmod(own, 0o755)
        }

        /// The library's bytes written anew: in place (the same inode, which the watcher's
        /// cache key holds), or as a new file renamed over it (a new inode, which no watcher
        /// has seen: it opens the file again).
        func restore(inPlace: Bool) throws {
            let target = inPlace ? library : library + ".new"
            let fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o755)
            guard fd >= 0 else { throw TestFailure("cannot open \(target): \(String(cString: strerror(errno)))") }
            let written = original.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            guard written == original.count else { throw TestFailure("cannot write \(target)") }
            guard !inPlace else { return }
            chown(target, user.uid, gid_t(user.uid))
            guard rename(target, library) == 0 else { throw TestFailure("cannot rename \(target)") }
        }

        /// The loader as a program of its own, `name`, with a build-id of its own (the host level
        /// counts a program's crashes by its build-id: more than five in ten minutes are only
        /// counted).
        func loader(_ name: String) throws -> String {
            let program = directory + "/" + name
            guard !FileManager.default.fileExists(atPath: program) else { return program }
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            let linked = try TestSupport.run([
                "cc", loader, "-o", program, library, "-Wl,-rpath," + (library as NSString).deletingLastPathComponent,
                "-Wl,--build-id=0x" + String(hash, radix: 16),
            ])
            guard linked.status == .exited(0) else { throw TestFailure("link \(program): \(linked.stderr)") }
            return program
        }
    }

    /// `tries` crashes of the user's loader under `sidecar`, each with the truncator armed on a
    /// new copy of the library; then one with the last copy written whole again in place.
    /// `environment` is the loader's (a stub client's socket, or nothing for the host level).
    /// Whether a try's reads ran past the new end is the race's to decide (the sidecar may have
    /// read all it needed before the truncation); the tries' reports that say so are returned.
    @discardableResult
    func race(
        _ attack: Attack, user: SidecarTests.ThrowawayUser, sidecar: SidecarProcess, environment: [String: String]
    ) throws -> [Event] {
        var pids: [Int32] = []
        func reportsOfTheTries() throws -> [Event] {
            try waitUntil("\(pids.count) report(s) of uid \(user.uid), the sidecar alive; log:\n\(sidecar.log)", timeout: 90) {
                guard sidecar.isRunning else { throw TestFailure("the sidecar died (\(sidecar.stop())):\n\(sidecar.log)") }
                return sidecar.reportIDs(uid: user.uid).count >= pids.count
            }
            return try sidecar.events(uid: user.uid)
        }
        for attempt in 1...Self.tries {
            try attack.restore(inPlace: false)
            let program = try Waiter(try attack.loader("loader-\(attempt)"), environment: environment, user: user.name)
            let truncator = try Waiter(attack.truncator, arguments: [attack.library, "60"], environment: [:], user: user.name)
            pids.append(program.pid)
            // Its own SIGSEGV, or a SIGBUS: the fault recurs in the library's code, truncated too.
            let ended = try program.crash()
            XCTAssertTrue(
                ended.status != .timedOut && ended.status != .exited(0) && ended.status != .exited(2), "try \(attempt): \(ended)")
            let cut = try truncator.wait(timeout: 90)
            XCTAssertEqual(cut.status, .exited(0), "try \(attempt): the sidecar opened the library, which was truncated")
            _ = try reportsOfTheTries()
        }
        let events = try reportsOfTheTries()
        XCTAssertEqual(Set(events.compactMap { $0.process?.pid?.rawValue }), Set(pids), "each try's crash is reported")
        let torn = events.filter { ($0.notes ?? []).contains { $0.contains("libvictim.so") && $0.contains("changed while") } }

        // The last copy whole again (same path and inode): its crash is named from a read of the
        // file as it is now, not from what a torn read left.
        try attack.restore(inPlace: true)
        let last = try Waiter(try attack.loader("loader-whole"), environment: environment, user: user.name)
        pids.append(last.pid)
        _ = try last.crash()
        let event = try XCTUnwrap(try reportsOfTheTries().first { $0.process?.pid?.rawValue == last.pid })
        XCTAssertEqual(event.crashedThreadRecord?.frames?.first?.function, "victim_crash", "\(event.notes ?? [])")
        XCTAssertTrue(sidecar.isRunning)
        XCTAssertEqual(sidecar.stop(), 0)
        return torn
    }

    /// A root sidecar with the host level in `mode` (nil: the best socket mode), core_pattern
    /// saved and put back when the test ends.
    func hostSidecar(_ directory: String, mode: String?) throws -> SidecarProcess {
        if let why = CorePattern.unavailable { throw XCTSkip("the host level cannot be installed: \(why)") }
        let reservation = try CorePattern.Reservation()
        addTeardownBlock { reservation.release() }
        let host = "/tmp/cph-" + UUID().uuidString.prefix(6)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: host) }
        let sidecar = try SidecarProcess(
            directory: directory, arguments: ["--host", "--host-directory", host] + (mode.map { ["--host-mode", $0] } ?? []))
        try waitUntil("the sidecar installs the host level; log:\n\(sidecar.log)", timeout: 30) {
            sidecar.log.contains("host: the machine's core handler")
        }
        return sidecar
    }

    func testATruncatedLibraryCannotStopTheHostLevel() throws {
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("host-socket")
        let attack = try Attack(in: directory, user: user)
        let sidecar = try hostSidecar(directory, mode: nil)
        try race(attack, user: user, sidecar: sidecar, environment: [:])
    }

    func testATruncatedLibraryCannotStopTheHostLevelsPipeMode() throws {
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("host-pipe")
        let attack = try Attack(in: directory, user: user)
        let sidecar = try hostSidecar(directory, mode: "pipe")
        try race(attack, user: user, sidecar: sidecar, environment: [:])
    }

    func testATruncatedLibraryCannotStopTheSidecar() throws {
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("sidecar")
        let attack = try Attack(in: directory, user: user)
        // The stub where the user can read it.
        let stub = directory + "/libcrashport.so"
        try FileManager.default.copyItem(atPath: try TestSupport.stub(), toPath: stub)
        chmod(stub, 0o755)
        let sidecar = try SidecarProcess(directory: directory)
        let torn = try race(
            attack, user: user, sidecar: sidecar,
            environment: ["LD_PRELOAD": stub, "CRASHPORT_SOCKET": sidecar.socket, "CRASHPORT_SPOOL": ""])
        // A stub client's modules are read after its verdict, well after the truncation: the
        // race is the user's, and the reports say the library changed while it was read.
        XCTAssertFalse(torn.isEmpty, "no report says the library changed while it was read")
    }

    /// A FIFO the user makes in their own report, at the name of the marker its second step
    /// writes last, the moment its first step is renamed into place (Tests/Fixtures/hostile/
    /// planter.c): that second step fails, and the thread that writes every user's second steps
    /// is not held by it: root's next crash is reported whole.
    func testAFIFOInAUsersReportDoesNotHoldOtherReports() throws {
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("marker")
        let waiter = try Waiter.build(in: directory)
        let planter = try TestSupport.compile(
            [TestSupport.fixture("hostile/planter.c")], output: directory + "/planter", flags: ["-O1"])
        let stub = directory + "/libcrashport.so"
        try FileManager.default.copyItem(atPath: try TestSupport.stub(), toPath: stub)
        chmod(stub, 0o755)
        let sidecar = try SidecarProcess(directory: directory)
        let environment = ["LD_PRELOAD": stub, "CRASHPORT_SOCKET": sidecar.socket, "CRASHPORT_SPOOL": ""]
        // The user's first crash makes their reports directory.
        _ = try Waiter(waiter, environment: environment, user: user.name).crash()
        _ = try sidecar.waitForReports(1, uid: user.uid)
        let marker = ".crashport-report"  // ReportStore.markerName
        let plant = try Waiter(
            planter, arguments: [sidecar.reportsDirectory(uid: user.uid), marker, "60"], environment: [:], user: user.name)
        _ = try Waiter(waiter, environment: environment, user: user.name).crash()
        XCTAssertEqual(try plant.wait(timeout: 90).status, .exited(0), "a FIFO was planted in the user's report")
        let mine = try Waiter(waiter, environment: environment)
        XCTAssertEqual(try mine.crash().status, .signaled(SIGSEGV))
        let events = try sidecar.waitForReports(1, uid: 0, timeout: 90)
        XCTAssertEqual(events.first?.process?.pid?.rawValue, mine.pid, "root's crash is reported whole")
        XCTAssertTrue(sidecar.isRunning)
        XCTAssertEqual(sidecar.stop(), 0)
    }

    // MARK: marks

    /// The mark's name for `pid`: PID-START, START its start in Unix seconds (as the watcher
    /// reads it: /proc/PID/stat's start ticks after boot, and /proc/stat's btime).
    static func markName(of pid: Int32) throws -> String {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = try XCTUnwrap(stat.range(of: ")", options: .backwards)).upperBound
        let ticks = try XCTUnwrap(UInt64(stat[fields...].split(separator: " ")[19]))
        let procStat = try String(contentsOfFile: "/proc/stat", encoding: .utf8)
        let boot = try XCTUnwrap(
            procStat.split(separator: "\n").first { $0.hasPrefix("btime ") }.flatMap { UInt64($0.dropFirst(6)) })
        return "\(pid)-\(boot + ticks / UInt64(sysconf(Int32(_SC_CLK_TCK))))"
    }

    /// A FIFO, a symlink and a directory, each planted by a user as the mark of the crash of a
    /// root `crashport run`'s program (its pid and start are public): `crashport run` still ends
    /// at once as its program did, and its own mark is there for the host level.
    func testPlantedMarksDoNotHoldCrashportRun() throws {
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let directory = fresh("marks")
        let waiter = try Waiter.build(in: directory)
        // A host directory as `crashport watch --host` makes it: root's, its marks directory 1733.
        let host = "/tmp/cph-" + UUID().uuidString.prefix(6)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: host) }
        let marks = host + "/reported"
        try FileManager.default.createDirectory(atPath: marks, withIntermediateDirectories: true)
        chmod(host, 0o755)
        chmod(marks, 0o1733)
        let plants: [(String, [String])] = [
            ("a FIFO", ["mkfifo"]), ("a symlink", ["ln", "-s", "/etc/shadow"]), ("a directory", ["mkdir"]),
        ]
        for (what, command) in plants {
            let run = try Waiter(
                TestSupport.crashport, arguments: ["run", "--reports", directory + "/reports", "--", waiter],
                environment: ["CRASHPORT_HOST_DIRECTORY": host])
            let mark = marks + "/" + (try Self.markName(of: run.pid))
            let planted = try TestSupport.run(["/usr/sbin/runuser", "-u", user.name, "--"] + command + [mark])
            XCTAssertEqual(planted.status, .exited(0), "\(what): \(planted.stderr)")
            let ended = try run.crash(timeout: 60)
            if ended.status == .timedOut { kill(run.process.processIdentifier, SIGKILL) }
            XCTAssertEqual(ended.status, .signaled(SIGSEGV), "\(what): crashport run ends as its program did: \(ended)")
            var info = stat()
            XCTAssertEqual(lstat(mark, &info), 0, "\(what): the mark is left")
            XCTAssertEqual(info.st_mode & S_IFMT, S_IFREG, "\(what): the mark is a regular file")
            XCTAssertEqual(info.st_uid, 0, "\(what): root's own")
        }
    }
}
