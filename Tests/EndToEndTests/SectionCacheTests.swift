// End-to-end: the decompressed-section cache (Sources/ObjectFile/SectionCache.swift). A program
// that aborts inside libc is reported under `crashport run` with libc6-dbg's compressed DWARF:
// the first report fills the cache, the next maps it and names every frame the same; a cache
// file cut short, one of the right size full of garbage, and a cache directory others may write
// are each refused or survived, never a crash of the watcher. A root sidecar fills root's cache
// while it reads another user's crash as that user, and serves that user's next crash from it.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class SectionCacheTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("section-cache")

    func fresh(_ name: String) -> String {
        TestSupport.freshDirectory(in: Self.directory, name)
    }

    /// A program that aborts in libc, and libc's compressed debug file; skips without libc6-dbg.
    func aborting() throws -> String {
        let source = Self.directory + "/abort.c"
        try
            "#include <stdlib.h>\n__attribute__((noinline)) static void give_up(void) { abort(); }\nint main(void) { give_up(); }\n"
            .write(toFile: source, atomically: true, encoding: .utf8)
        let program = try TestSupport.compile([source], output: Self.directory + "/abort", flags: ["-O0", "-g"])
        let libc = try TestSupport.buildID(of: "/lib/x86_64-linux-gnu/libc.so.6")
        let debug = "/usr/lib/debug/.build-id/\(libc.prefix(2))/\(libc.dropFirst(2)).debug"
        guard FileManager.default.fileExists(atPath: debug) else {
            throw XCTSkip("libc's debug file (libc6-dbg) is not here: no compressed DWARF to cache")
        }
        return program
    }

    /// The crashed thread's frames as (function, file, line), and the run.
    func report(_ program: String, cache: String) throws -> [String] {
        let run = try TestSupport.crashportRun([program], environment: ["CRASHPORT_SECTION_CACHE": cache])
        XCTAssertEqual(run.result.status, .signaled(SIGABRT), run.result.stderr)
        let event = try run.event()
        return (event.crashedThreadRecord?.frames ?? []).map { "\($0.function ?? "?") \($0.file ?? "-"):\($0.line ?? 0)" }
    }

    func cached(_ cache: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: cache)) ?? []).sorted()
    }

    func testTheFirstReportFillsTheCacheAndTheNextMapsIt() throws {
        let program = try aborting()
        let cache = fresh("cache")
        chmod(cache, 0o700)
        let first = try report(program, cache: cache)
        XCTAssertTrue(first.contains { $0.contains("stdlib/abort.c:") }, "libc's DWARF names abort's line: \(first)")
        let files = cached(cache)
        XCTAssertTrue(files.contains { $0.contains(".debug_info-") }, "\(files)")
        // The smaller sections read whole (libc6-dbg's strings: 250 KB inflated) are kept too,
        // and mapped rather than inflated onto the heap by the next report.
        XCTAssertTrue(files.contains { $0.contains(".debug_str-") }, "\(files)")
        XCTAssertFalse(files.contains { $0.contains(".tmp-") }, "no temporary left: \(files)")
        XCTAssertEqual(try report(program, cache: cache), first, "the same frames from the mapped sections")
        // The strings kept are read: zeros in their place take the names libc's DWARF gives.
        let strings = try XCTUnwrap(files.first { $0.contains(".debug_str-") })
        let saved = try Data(contentsOf: URL(fileURLWithPath: cache + "/" + strings))
        XCTAssertTrue(FileManager.default.createFile(atPath: cache + "/" + strings, contents: Data(count: saved.count)))
        XCTAssertNotEqual(try report(program, cache: cache), first, "the cached strings were not read")
        XCTAssertTrue(FileManager.default.createFile(atPath: cache + "/" + strings, contents: saved))
        chmod(cache + "/" + strings, 0o600)
        XCTAssertEqual(try report(program, cache: cache), first)

        // Cut short: refused (not its size), written again whole.
        let info = cache + "/" + (try XCTUnwrap(files.first { $0.contains(".debug_info-") }))
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: info)[.size] as? Int)
        XCTAssertEqual(truncate(info, off_t(size / 2)), 0)
        XCTAssertEqual(try report(program, cache: cache), first)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: info)[.size] as? Int, size, "written again")

        // Garbage of the right size (the user's own cache, tampered with): read as hostile DWARF,
        // the report still written, the program's own frames still named.
        let garbage = FileHandle(forWritingAtPath: info)
        garbage?.write(Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }))
        try garbage?.close()
        let survived = try report(program, cache: cache)
        XCTAssertTrue(survived.contains { $0.hasPrefix("give_up ") }, "\(survived)")
    }

    /// A cache directory that others may write is not used: nothing is read from it or written.
    func testACacheDirectoryOthersMayWriteIsNotUsed() throws {
        let program = try aborting()
        let cache = fresh("open-cache")
        chmod(cache, 0o777)
        _ = try report(program, cache: cache)
        XCTAssertEqual(cached(cache), [], "nothing written where others may write")
        // Off: the same report, no cache anywhere.
        XCTAssertFalse(try report(program, cache: "").isEmpty)
    }
}

extension SectionCacheTests {
    /// A root sidecar reads a user's crash with the user's credentials, yet its cache is root's
    /// (0700): the report thread steps out to its own identity for the cache's files only. The
    /// first crash of a throwaway user's program fills the cache with root's files; a second
    /// sidecar serves the user's next crash from them: planted zeros of the same size (root's
    /// own file, so trusted) take libc's DWARF away from that report, which shows the file was
    /// read for the user's crash. Without the step out neither happens (checked: the cache stays
    /// empty and the report keeps its DWARF).
    func testARootSidecarCachesAndServesAnotherUsersCrash() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root (a root sidecar and a throwaway user)") }
        let program = try aborting()
        let user = try SidecarTests.ThrowawayUser()
        defer { user.remove() }
        let work = fresh("users")
        chmod(Self.directory, 0o755)
        chmod(work, 0o755)
        let theirs = work + "/abort"
        let stub = work + "/libcrashport.so"
        try FileManager.default.copyItem(atPath: program, toPath: theirs)
        try FileManager.default.copyItem(atPath: try TestSupport.stub(), toPath: stub)
        chmod(theirs, 0o755)
        chmod(stub, 0o755)
        let cache = fresh("root-cache")
        chmod(cache, 0o700)

        func crash(in directory: String) throws -> [String] {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            chmod(directory, 0o755)
            let sidecar = try SidecarProcess(directory: directory, environment: ["CRASHPORT_SECTION_CACHE": cache])
            defer { _ = sidecar.stop() }
            chmod(sidecar.reports, 0o711)
            let ended = try TestSupport.run([
                "/usr/sbin/runuser", "-u", user.name, "--", "env", "CRASHPORT_SOCKET=" + sidecar.socket, "LD_PRELOAD=" + stub,
                theirs,
            ])
            XCTAssertTrue([.signaled(SIGABRT), .exited(128 + SIGABRT)].contains(ended.status), "\(ended)")
            let event = try XCTUnwrap(try sidecar.waitForReports(1, uid: user.uid).first)
            return (event.crashedThreadRecord?.frames ?? []).map { "\($0.function ?? "?") \($0.file ?? "-"):\($0.line ?? 0)" }
        }

        let first = try crash(in: work + "/first")
        XCTAssertTrue(first.contains { $0.contains("stdlib/abort.c:") }, "libc's DWARF names abort's line: \(first)")
        let files = cached(cache)
        let info = try XCTUnwrap(
            files.first { $0.contains(".debug_info-") }, "root's cache filled for the user's crash: \(files)")
        XCTAssertFalse(files.contains { $0.contains(".tmp-") }, "no temporary left: \(files)")
        var status = stat()
        XCTAssertEqual(stat(cache + "/" + info, &status), 0)
        XCTAssertEqual(status.st_uid, 0, "the cache's files are root's")
        XCTAssertEqual(status.st_mode & 0o777, 0o600)
        XCTAssertNotEqual(
            try TestSupport.run(["/usr/sbin/runuser", "-u", user.name, "--", "cat", cache + "/" + info]).status, .exited(0),
            "the user cannot read root's cache")

        // Zeros of the same size: a .debug_info with no units, so libc's frames lose their lines.
        let size = Int(status.st_size)
        XCTAssertTrue(FileManager.default.createFile(atPath: cache + "/" + info, contents: Data(count: size)))
        chmod(cache + "/" + info, 0o600)
        let second = try crash(in: work + "/second")
        XCTAssertFalse(second.contains { $0.contains("stdlib/abort.c:") }, "read from root's cache: \(second)")
        XCTAssertTrue(second.contains { $0.hasPrefix("give_up ") }, "the program's own frames still named: \(second)")
    }
}
