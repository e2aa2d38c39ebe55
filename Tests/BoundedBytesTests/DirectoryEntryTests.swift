// directoryEntryName reads a readdir record within its d_reclen bytes: a short record that ends a
// mapping (a guard page after it) is read without a fault, where copying `struct dirent` (280
// bytes) would have faulted; and the names of a real directory, up to 255 bytes, come out whole.

import BoundedBytes
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class DirectoryEntryTests: XCTestCase {
    func testARecordEndingAMappingIsReadWithinIt() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let memory = try XCTUnwrap(
            mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0).flatMap {
                $0 == MAP_FAILED ? nil : $0
            })
        defer { munmap(memory, 2 * page) }
        XCTAssertEqual(mprotect(memory + page, page, PROT_NONE), 0)
        // A 24-byte record (8 + 8 + 2 + 1 + "abc\0", padded) ending the first page.
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        let recordLength = 24
        let record = memory + page - recordLength
        record.storeBytes(
            of: UInt16(recordLength), toByteOffset: MemoryLayout<dirent>.offset(of: \dirent.d_reclen)!, as: UInt16.self)
        for (index, byte) in Array("abc".utf8).enumerated() {
            record.storeBytes(of: byte, toByteOffset: nameOffset + index, as: UInt8.self)
        }
        record.storeBytes(of: 0, toByteOffset: nameOffset + 3, as: UInt8.self)
        XCTAssertEqual(directoryEntryName(record.assumingMemoryBound(to: dirent.self)), "abc")
    }

    func testARealDirectorysNames() throws {
        let directory = NSTemporaryDirectory() + "dirent-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var expected: Set<String> = []
        for length in [1, 2, 7, 8, 13, 64, 200, 255] {
            let name = String(repeating: "n", count: length - 1) + "\(length % 10)"
            FileManager.default.createFile(atPath: directory + "/" + name, contents: nil)
            expected.insert(name)
        }
        let stream = try XCTUnwrap(opendir(directory))
        defer { closedir(stream) }
        var names: Set<String> = []
        while let entry = readdir(stream) {
            let name = directoryEntryName(entry)
            if name != "." && name != ".." { names.insert(name) }
        }
        XCTAssertEqual(names, expected)
    }
}
