// RuntimeFile: the checks a runtime's file passes before a byte of it is read, on real files: a
// FIFO (refused without blocking), a symlink to a file the user cannot read, another user's
// perf map, a file older than the process, and the bound.

import Foundation
@testable import LiveProcess
import Processes
import ReportModel
import XCTest

@testable import Runtimes

final class RuntimeFileTests: XCTestCase {
    var directory = ""
    /// nobody: a user that is not root and owns nothing here.
    let nobody = Credentials(uid: 65534, gid: 65534)

    override func setUpWithError() throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("runtimefile-\(getpid())-\(name.hashValue)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func write(_ name: String, _ text: String, mode: mode_t = 0o644, owner: uid_t? = nil) -> String {
        let path = directory + "/" + name
        FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        chmod(path, mode)
        if let owner { chown(path, owner, owner) }
        return path
    }

    func refusal(_ body: () throws -> RuntimeFile.Contents?) -> RuntimeFile.Refused? {
        do {
            _ = try body()
            return nil
        } catch {
            return error as? RuntimeFile.Refused
        }
    }

    func testARegularFileOfItsOwnerIsReadWithinTheBound() throws {
        let path = write("hs_err_pid1.log", "0123456789")
        let head = try XCTUnwrap(RuntimeFile.read(path, limit: 4, owners: [getuid()]))
        XCTAssertEqual(head.bytes, Array("0123".utf8))
        XCTAssertTrue(head.truncated)
        XCTAssertEqual(try RuntimeFile.read(path, limit: 4, keep: .tail)?.bytes, Array("6789".utf8))
        XCTAssertNil(try RuntimeFile.read(directory + "/missing", limit: 4))
    }

    func testAFIFOIsRefusedWithoutBlocking() throws {
        let path = directory + "/perf-1.map"
        XCTAssertEqual(mkfifo(path, 0o644), 0)
        let started = Date()
        let refused = refusal { try RuntimeFile.read(path, limit: 1 << 20, keep: .tail) }
        XCTAssertEqual(refused?.reason, "not a regular file")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "no writer ever opens it: a blocking open would hang")
    }

    func testASymlinkIsNotFollowedAndAFileTheUserCannotReadIsNotRead() throws {
        try XCTSkipUnless(getuid() == 0, "needs root, to read as another user")
        let secret = write("secret", "root's own", mode: 0o600)
        let link = directory + "/hs_err_pid1.log"
        XCTAssertEqual(symlink(secret, link), 0)
        // As the process's user (nobody), as capture reads it.
        let access = ProcessAccess(pid: ProcessID(getpid()), as: nobody)
        let throughLink = try access.perform { refusal { try RuntimeFile.read(link, limit: 1 << 20) } }
        XCTAssertEqual(throughLink?.reason, "a symbolic link, not followed")
        let direct = try access.perform { refusal { try RuntimeFile.read(secret, limit: 1 << 20) } }
        XCTAssertEqual(direct?.reason, String(cString: strerror(EACCES)), "the kernel refuses it to the user")
    }

    func testAnotherUsersPerfMapIsRefused() throws {
        try XCTSkipUnless(getuid() == 0, "needs root, to give the file to another user")
        // Planted in advance by another user to name a process's frames: not read.
        let path = write("perf-1.map", "1000 10 lies\n", owner: 4242)
        let refused = refusal { try RuntimeFile.read(path, limit: 1 << 20, keep: .tail, owners: [65534]) }
        XCTAssertEqual(
            refused?.reason.hasPrefix("not the process's user's own (owner 4242"), true, "\(String(describing: refused))")
        // Its own, but others may write it: refused too.
        let writable = write("perf-2.map", "1000 10 lies\n", mode: 0o666, owner: 65534)
        XCTAssertNotNil(refusal { try RuntimeFile.read(writable, limit: 1 << 20, owners: [65534]) })
        let own = write("perf-3.map", "1000 10 true\n", owner: 65534)
        XCTAssertEqual(try RuntimeFile.read(own, limit: 1 << 20, owners: [65534])?.bytes, Array("1000 10 true\n".utf8))
    }

    func testAFileFromBeforeTheProcessIsStale() throws {
        let path = write("hs_err_pid1.log", "old crash")
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
        let now = Int64(time(nil))
        let refused = refusal { try RuntimeFile.read(path, limit: 100, modified: (now - 60)...(now + 60)) }
        XCTAssertEqual(refused?.stale, true)
    }

    func testADirectoryListingIsBounded() throws {
        for index in 0..<20 { _ = write("f\(index)", "") }
        let listed = try XCTUnwrap(RuntimeFile.names(in: directory, limit: 5))
        XCTAssertEqual(listed.names.count, 5)
        XCTAssertFalse(listed.complete)
        XCTAssertEqual(RuntimeFile.names(in: directory, limit: 100)?.names.count, 20)
    }

    func testUIDsOfAProcessStatus() {
        let status = Array("Name:\tx\nUid:\t1000\t1001\t1000\t1002\nGid:\t5\t5\t5\t5\n".utf8)
        XCTAssertEqual(RuntimeFiles.uids(status: status), [1000, 1001, 1002])
        XCTAssertNil(RuntimeFiles.uids(status: Array("Name:\tx\n".utf8)))
    }
}
