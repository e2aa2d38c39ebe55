// The guard over file mappings (CShims' guarded.c, through MappedFile): a file truncated under
// its mapping reads as zeros past its new end, the mapping says it is torn, and the process lives
// on; a SIGBUS or SIGSEGV anywhere else still ends the process as before, through the Swift
// runtime's own handler when it has one.
//
// Each case runs in a child: this test binary run again for the same test alone, with the case in
// CRASHPORT_GUARDED_CHILD (where the test does the case instead), so that a fault the guard does
// not recover ends the child, not the test run. The parent checks how the child ended and what
// it printed.

import BoundedBytes
import Foundation
@testable import ObjectFile
import TestSupport
import XCTest

final class GuardedMappingTests: XCTestCase {
    static let variable = "CRASHPORT_GUARDED_CHILD"

    /// This test binary run again for `test` alone, doing `what` with files in `directory`.
    func child(_ what: String, _ directory: String, backtrace: Bool = false, test: String = #function) throws -> RunResult {
        let binary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let name = test.hasSuffix("()") ? String(test.dropLast(2)) : test
        return try TestSupport.run(
            [binary, "ObjectFileTests.GuardedMappingTests/\(name)"],
            environment: [
                Self.variable: what, "CRASHPORT_GUARDED_DIRECTORY": directory,
                "SWIFT_BACKTRACE": backtrace ? "enable=yes,interactive=no" : "enable=no",
            ], timeout: 120)
    }

    /// A file of `count` bytes of `byte` at `path`.
    static func write(_ path: String, count: Int, byte: UInt8) throws {
        try Data(repeating: byte, count: count).write(to: URL(fileURLWithPath: path))
    }

    func testATruncatedFileReadsAsZerosAndIsTorn() throws {
        if try inChild() { return }
        let directory = TestSupport.temporaryDirectory("guarded")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try child("truncated", directory)
        XCTAssertEqual(result.status, .exited(0), result.stdout + result.stderr)
        XCTAssertTrue(result.stdout.contains("before the end: 171"), result.stdout)
        XCTAssertTrue(result.stdout.contains("past the end: 0 0"), result.stdout)
        XCTAssertTrue(result.stdout.contains("torn: true"), result.stdout)
        XCTAssertTrue(result.stdout.contains("the other file: 205 torn: false"), result.stdout)
    }

    /// A fault outside every guarded mapping ends the process with its signal, as it did before
    /// the guard: a SIGBUS (a file truncated under a mapping the guard does not know of), and a
    /// SIGSEGV; with Swift's backtracer on, it still runs first.
    func testAFaultElsewhereStillEndsTheProcess() throws {
        if try inChild() { return }
        let directory = TestSupport.temporaryDirectory("guarded")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let bus = try child("unguarded", directory)
        XCTAssertEqual(bus.status, .signaled(SIGBUS), bus.stdout + bus.stderr)
        XCTAssertTrue(bus.stdout.contains("guarded first"), bus.stdout)
        let segv = try child("segv", directory)
        XCTAssertEqual(segv.status, .signaled(SIGSEGV), segv.stdout + segv.stderr)
        let traced = try child("unguarded", directory, backtrace: true)
        XCTAssertEqual(traced.status, .signaled(SIGBUS), traced.stdout + traced.stderr)
        if traced.stdout.contains("runtime handler: yes") {
            // The runtime's handler ran (its message names the signal), then the default action.
            XCTAssertTrue((traced.stdout + traced.stderr).contains("Bus error"), traced.stdout + traced.stderr)
        }
    }

    /// In the child (the case in the environment): does it and returns true; else false.
    func inChild() throws -> Bool {
        let environment = ProcessInfo.processInfo.environment
        guard let what = environment[Self.variable], let directory = environment["CRASHPORT_GUARDED_DIRECTORY"] else {
            return false
        }
        func say(_ line: String) {
            print(line)
            fflush(nil)
        }
        var before = sigaction()
        sigaction(SIGBUS, nil, &before)
        say("runtime handler: \(before.__sigaction_handler.sa_handler == nil ? "no" : "yes")")
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let path = directory + "/file"
        try Self.write(path, count: 16 * page, byte: 0xAB)
        let file = try MappedFile(path: path)
        switch what {
        case "truncated":
            try Self.write(directory + "/other", count: 4 * page, byte: 0xCD)
            let other = try MappedFile(path: directory + "/other")
            XCTAssertEqual(truncate(path, off_t(page)), 0)
            let view = ByteView(file.bytes)
            say("before the end: \(view.u8(100) ?? 1)")
            say("past the end: \(view.u8(UInt64(2 * page)) ?? 1) \(view.u8(UInt64(16 * page - 1)) ?? 1)")
            say("torn: \(file.torn)")
            say("the other file: \(ByteView(other.bytes).u8(UInt64(3 * page)) ?? 1) torn: \(other.torn)")
        case "unguarded":
            // The guard is installed (a mapping registered), and this mapping is not its.
            say("guarded first: \(file.bytes.count)")
            let fd = open(path, O_RDONLY)
            let plain = try XCTUnwrap(mmap(nil, 16 * page, PROT_READ, MAP_PRIVATE, fd, 0))
            close(fd)
            XCTAssertEqual(truncate(path, 0), 0)
            say("read: \(plain.load(fromByteOffset: 8 * page, as: UInt8.self))")
        case "segv":
            say("guarded first: \(file.bytes.count)")
            let nowhere = UnsafeMutablePointer<UInt8>(bitPattern: 8)!
            nowhere.pointee = 1
            say("wrote")
        default:
            XCTFail("no such case \(what)")
        }
        return true
    }
}
