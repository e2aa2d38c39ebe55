// ResidentMemory: the idle sidecar unmaps the pages of files it maps privately that are still
// the file's own, and never a page it wrote (a private copy), on a real mapping of a real file.

import Foundation
import TestSupport
import Watcher
import XCTest

final class ResidentMemoryTests: XCTestCase {
    /// Which of `count` pages from `base` are mapped, from /proc/self/pagemap (bit 63).
    func mapped(_ base: UnsafeMutableRawPointer, _ count: Int) throws -> [Bool] {
        let pagemap = open("/proc/self/pagemap", O_RDONLY)
        guard pagemap >= 0 else { throw XCTSkip("/proc/self/pagemap cannot be opened here") }
        defer { close(pagemap) }
        var entries = [UInt64](repeating: 0, count: count)
        let offset = off_t(UInt(bitPattern: base) / 4096 * 8)
        let read = entries.withUnsafeMutableBytes { pread(pagemap, $0.baseAddress, $0.count, offset) }
        XCTAssertEqual(read, count * 8)
        return entries.map { $0 & (1 << 63) != 0 }
    }

    func testReleasesTheFilesOwnPagesAndKeepsWhatWasWritten() throws {
        let directory = TestSupport.temporaryDirectory("resident")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/data"
        // Four pages, each filled with its number (1 to 4).
        let contents = (1...4).flatMap { [UInt8](repeating: UInt8($0), count: 4096) }
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(contents)))
        let fd = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        guard let base = mmap(nil, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
            return XCTFail("mmap: \(String(cString: strerror(errno)))")
        }
        defer { munmap(base, 4 * 4096) }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        XCTAssertEqual((0..<4).map { bytes[$0 * 4096] }, [1, 2, 3, 4])  // every page read, so mapped
        bytes[2 * 4096] = 0xAA  // page 2 becomes a private copy
        XCTAssertEqual(try mapped(base, 4), [true, true, true, true])

        XCTAssertGreaterThan(ResidentMemory.releaseCleanFilePages(), 0)

        XCTAssertEqual(try mapped(base, 4), [false, false, true, false], "only the written copy stays mapped")
        XCTAssertEqual(bytes[2 * 4096], 0xAA, "what was written is kept")
        XCTAssertEqual(bytes[2 * 4096 + 1], 3)
        XCTAssertEqual((0..<4).map { bytes[$0 * 4096 + 100] }, [1, 2, 3, 4], "released pages read the file again")
    }
}
