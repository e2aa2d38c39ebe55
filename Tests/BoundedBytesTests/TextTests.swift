// The text helpers crashport has instead of Foundation's.

import XCTest

@testable import BoundedBytes

final class TextTests: XCTestCase {
    func testTrimmed() {
        XCTAssertEqual("  a b \t\r\n".trimmed, "a b")
        XCTAssertEqual("x".trimmed, "x")
        XCTAssertEqual(" \n ".trimmed, "")
        XCTAssertEqual("".trimmed, "")
        XCTAssertEqual("TracerPid:\t 42"[...].dropFirst("TracerPid:".count).trimmed, "42")
    }

    func testPathBaseNameIsNSStringsLastPathComponent() {
        for (path, name) in [
            ("/usr/lib/libc.so.6", "libc.so.6"), ("libc.so.6", "libc.so.6"), ("/a/b/", "b"), ("/a//b//", "b"), ("/", "/"),
            ("//", "/"), ("", ""), ("a", "a"),
        ] {
            XCTAssertEqual(path.pathBaseName, name, path)
        }
    }
}
