// A module's file truncated under the watcher's mapping of it (MappedFile.torn): the ELF cache
// opens it again for the next capture instead of serving the zeros that stood in for its bytes.

import BoundedBytes
import Foundation
@testable import LiveProcess
import ObjectFile
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class TornFileCacheTests: XCTestCase {
    func testATornFileIsOpenedAgain() throws {
        let directory = TestSupport.temporaryDirectory("torn-cache")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "int f(int x) { return x * 3; }\n".write(toFile: directory + "/f.c", atomically: true, encoding: .utf8)
        let path = try TestSupport.compile(
            [directory + "/f.c"], output: directory + "/libf.so", flags: ["-O1", "-g", "-shared", "-fPIC"])
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        let cache = ELFCache()
        let first = try cache.file(key: "k") { try ELFFile(path: path) }
        XCTAssertTrue(cache.contains("k"))
        XCTAssertFalse(first.torn)
        // Truncated under the mapping; a read past the new end reads zeros (not a SIGBUS).
        XCTAssertEqual(truncate(path, 0), 0)
        XCTAssertEqual(ByteView(first.file.bytes).u8(UInt64(original.count - 1)), 0)
        XCTAssertTrue(first.torn)
        XCTAssertFalse(cache.contains("k"), "a torn file is not served")
        // Whole again, in place (the same path and inode): the next capture's file is a new parse.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.write(contentsOf: original)
        try handle.close()
        let second = try cache.file(key: "k") { try ELFFile(path: path) }
        XCTAssertFalse(second === first)
        XCTAssertFalse(second.torn)
        XCTAssertTrue(cache.contains("k"))
        XCTAssertTrue(
            try cache.file(key: "k") {
                XCTFail("opened again"); return try ELFFile(path: path)
            } === second)
    }
}
