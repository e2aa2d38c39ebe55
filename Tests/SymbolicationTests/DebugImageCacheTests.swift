// Debug images are shared by build-id only between files of root's that no one else may write:
// in a root sidecar, a user's library that claims libc's build-id (with DWARF of its own
// making) must not become the image every other user's libc frames are named from.

import Foundation
import ObjectFile
@testable import Symbolication
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class DebugImageCacheTests: XCTestCase {
    func testOnlyTrustedFilesShareAnImageByBuildID() throws {
        guard getuid() == 0 else { throw XCTSkip("a file of root's takes root to make") }
        let directory = TestSupport.temporaryDirectory("debug-image-cache")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "int f(int x) { return x * 3; }\nint main(void) { return f(1); }\n".write(
            toFile: directory + "/p.c", atomically: true, encoding: .utf8)
        let program = try TestSupport.compile([directory + "/p.c"], output: directory + "/p", flags: ["-O1", "-g"])
        for copy in ["a", "b", "hostile"] {
            XCTAssertEqual(try TestSupport.run(["cp", program, directory + "/" + copy]).status, .exited(0))
        }
        XCTAssertEqual(chmod(directory + "/hostile", 0o666), 0)  // anyone may write it
        let cache = DebugImageCache()
        let locator = DebugFileLocator()
        let a = try ELFFile(path: directory + "/a")
        let b = try ELFFile(path: directory + "/b")
        let hostile = try ELFFile(path: directory + "/hostile")
        XCTAssertNotNil(a.buildID)
        XCTAssertEqual(a.buildID, hostile.buildID)
        let first = cache.image(for: hostile, locator: locator)
        XCTAssertTrue(first.elf === hostile)
        let trusted = cache.image(for: a, locator: locator)
        XCTAssertTrue(trusted.elf === a, "a root file got the image of a file anyone may write")
        XCTAssertTrue(cache.image(for: b, locator: locator) === trusted, "root's copies share one image")
        XCTAssertTrue(cache.image(for: hostile, locator: locator) === first, "a file's own image is kept for it")
    }

    /// A shared image one of whose files tore under it (truncated while mapped) is loaded again
    /// for the next whole file of that build-id; a torn file asking keeps it (its report says its
    /// file changed), rather than loading the same zeros again at each lookup.
    func testAnImageWhoseFileToreIsLoadedAgain() throws {
        guard getuid() == 0 else { throw XCTSkip("a file of root's takes root to make") }
        let directory = TestSupport.temporaryDirectory("debug-image-torn")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "int f(int x) { return x * 3; }\nint main(void) { return f(1); }\n".write(
            toFile: directory + "/p.c", atomically: true, encoding: .utf8)
        let program = try TestSupport.compile([directory + "/p.c"], output: directory + "/p", flags: ["-O1", "-g"])
        for copy in ["a", "b"] {
            XCTAssertEqual(try TestSupport.run(["cp", program, directory + "/" + copy]).status, .exited(0))
        }
        let cache = DebugImageCache()
        let locator = DebugFileLocator()
        let a = try ELFFile(path: directory + "/a")
        let image = cache.image(for: a, locator: locator)
        XCTAssertEqual(
            DebugImageCache.key(for: a, locator: locator), DebugImageCache.key(for: try ELFFile(path: program), locator: locator))
        XCTAssertEqual(truncate(directory + "/a", 0), 0)
        _ = a.file.bytes.last  // past the new end: zeros, and the file is torn
        XCTAssertTrue(a.torn)
        XCTAssertTrue(image.torn)
        XCTAssertTrue(cache.image(for: a, locator: locator) === image, "kept for the torn file itself")
        let b = try ELFFile(path: directory + "/b")
        let again = cache.image(for: b, locator: locator)
        XCTAssertFalse(again === image, "a torn image is not served to a whole file")
        XCTAssertTrue(again.elf === b)
        XCTAssertFalse(again.torn)
    }
}
