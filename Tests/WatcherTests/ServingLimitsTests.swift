// The serving thread's limits, unit by unit: configuration values out of range and files that
// are not UTF-8, a user's file that is a FIFO, a symlink or too large, the runs lock held by
// someone else, the log's per-user flood limit, and the environment an upload child gets.
// (ServingTrustTests runs the same attacks end to end against a root sidecar.)

import FoundationEssentials
import ReportModel
import XCTest

@testable import Store
@testable import Upload
@testable import Watcher

#if canImport(Glibc)
import Glibc
#endif

final class ServingLimitsTests: XCTestCase {
    var directory = ""

    override func setUp() {
        directory = "/tmp/serving-limits-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(directory, 0o700)
    }

    override func tearDown() {
        // Only what these tests made: a handful of files in one directory.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
            unlink(directory + "/" + name)
        }
        rmdir(directory)
    }

    func problem(_ text: String) -> String? {
        var configuration = SidecarConfiguration.defaults(environment: [:], uid: 0)
        do {
            try configuration.apply(configFile: text, file: "/etc/crashport/watch.conf")
            return nil
        } catch {
            return "\(error)"
        }
    }

    func testNumbersOutOfRangeNameTheKeyAndTheFile() {
        for (line, key) in [
            ("hang-ms = 18446744073709551615", "hang-ms"), ("hang-ms = 86400001", "hang-ms"), ("hang-ms = 9", "hang-ms"),
            ("max-size = 9223372036854775808", "max-size"), ("max-size = 16777217", "max-size"),
            ("max-reports = 0", "max-reports"), ("max-reports = 99999999999", "max-reports"), ("jobs = 65", "jobs"),
        ] {
            let said = problem(line)
            XCTAssertTrue(said?.hasPrefix("/etc/crashport/watch.conf:1: \(key): ") == true, "\(line): \(said ?? "accepted")")
        }
        XCTAssertNil(problem("hang-ms = 86400000\nmax-size = 16777216\nmax-reports = 1000000\njobs = 64"))
        XCTAssertEqual(HangMonitor(milliseconds: .max).limitNanoseconds, .max, "saturates, never traps")
    }

    func testConfigurationThatIsNotUTF8OrNotAFileIsRefusedReadably() throws {
        let text = directory + "/watch.conf"
        XCTAssertTrue(FileManager.default.createFile(atPath: text, contents: Data("jobs = 2\n# caf\u{e9}\n".utf8)))
        XCTAssertEqual(try SidecarConfiguration.read(file: text), "jobs = 2\n# caf\u{e9}\n")
        XCTAssertTrue(FileManager.default.createFile(atPath: text, contents: Data([0x6A, 0x0A, 0x23, 0xFF, 0x0A])))
        XCTAssertThrowsError(try SidecarConfiguration.read(file: text)) {
            XCTAssertEqual("\($0)", "\(text):2: not UTF-8 text; the file is not read")
        }
        let fifo = directory + "/fifo.conf"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        XCTAssertThrowsError(try SidecarConfiguration.read(file: fifo)) {
            XCTAssertEqual("\($0)", "\(fifo): not a regular file")
        }
    }

    func testUserFilesAreCheckedBeforeTheyAreRead() throws {
        let fifo = directory + "/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        XCTAssertThrowsError(try UserFile.read(fifo, limit: 10)) { XCTAssertTrue("\($0)".hasSuffix("not a regular file")) }
        let large = directory + "/large"
        XCTAssertTrue(FileManager.default.createFile(atPath: large, contents: nil))
        XCTAssertEqual(truncate(large, 1 << 40), 0, "a sparse terabyte")
        XCTAssertThrowsError(try UserFile.read(large, limit: 1 << 20)) { XCTAssertTrue("\($0)".contains("not read"), "\($0)") }
        let link = directory + "/link"
        XCTAssertEqual(symlink(large, link), 0)
        XCTAssertThrowsError(try UserFile.read(link, limit: 1 << 20)) {
            XCTAssertTrue("\($0)".hasSuffix("a symbolic link, not followed"), "\($0)")
        }
        XCTAssertNil(try UserFile.read(directory + "/missing", limit: 10))
        let small = directory + "/small"
        XCTAssertTrue(FileManager.default.createFile(atPath: small, contents: Data("{}".utf8)))
        XCTAssertEqual(try UserFile.read(small, limit: 2), Array("{}".utf8))
    }

    func testAHeldRunsLockIsGivenUpOnWithinItsBound() throws {
        let lock = directory + "/" + RunHistory.lockName
        let holder = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        defer { close(holder) }
        XCTAssertEqual(flock(holder, LOCK_EX), 0)
        // flock belongs to the open file description: this process's second open conflicts too.
        var ran = false
        XCTAssertThrowsError(try RunHistory.locked(root: directory) { ran = true }) {
            XCTAssertTrue($0 is RunHistory.LockBusy, "\($0)")
        }
        XCTAssertFalse(ran)
        flock(holder, LOCK_UN)
        XCTAssertNoThrow(try RunHistory.locked(root: directory) { ran = true })
        XCTAssertTrue(ran)
    }

    func testOneUsersFloodDoesNotHideAnothersLines() throws {
        let path = directory + "/watch.log"
        let log = WatcherLog(path: path, perSecond: 0.001, burst: 3)
        for index in 0..<50 { log.say("flood \(index)", uid: 1000) }
        log.say("victim", uid: 1001)
        log.say("no client")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertTrue(text.contains("crashport: victim\n"), text)
        XCTAssertTrue(text.contains("crashport: no client\n"), text)
        XCTAssertEqual(text.components(separatedBy: "flood ").count - 1, 3, "the flooder's burst only")
    }

    func testUploadChildGetsAMinimalEnvironment() {
        let sidecar = [
            "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_TIME": "en_GB.UTF-8", "TZ": "UTC",
            "CRASHPORT_SENTRY_DSN": "https://key@example.com/1", "https_proxy": "http://proxy:3128",
            "NO_PROXY": "localhost", "AWS_SECRET_ACCESS_KEY": "secret", "NOTIFY_SOCKET": "/run/systemd/notify",
            "LISTEN_FDS": "1", "HOME": "/root", "LD_PRELOAD": "/tmp/evil.so",
        ]
        let child = UploadSpawner.environment(for: ReportStore.Owner(uid: 0, gid: 0), from: sidecar)
        XCTAssertEqual(
            Set(child.keys),
            [
                "PATH", "LANG", "LC_TIME", "TZ", "CRASHPORT_SENTRY_DSN", "https_proxy", "NO_PROXY", "HOME", "USER",
                "LOGNAME",
            ])
        XCTAssertEqual(child["USER"], "root")
        XCTAssertEqual(child["HOME"], String(cString: getpwuid(0).pointee.pw_dir))
        XCTAssertEqual(
            UploadSpawner.environment(for: ReportStore.Owner(uid: 0, gid: 0), from: [:])["PATH"], "/usr/local/bin:/usr/bin:/bin")
    }
}
