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

    func testFirstUTF8Range() {
        func found(_ text: String, _ needle: String) -> String? {
            text.firstUTF8Range(of: needle).map {
                String(text[$0]) + "@" + String(text.utf8.distance(from: text.startIndex, to: $0.lowerBound))
            }
        }
        XCTAssertEqual(found("libfoo.so.1.2", ".so."), ".so.@6")
        XCTAssertEqual(found("aaab", "aab"), "aab@1", "a partial match restarts one byte on")
        XCTAssertEqual(found("std::vector", "::"), "::@3")
        XCTAssertEqual(found("ends with ::", "::"), "::@10")
        XCTAssertNil(found("ab", "abc"), "a needle longer than the text")
        XCTAssertNil(found("a:b", "::"))
        XCTAssertEqual(found("x", ""), "@0")
        XCTAssertEqual(found("café::f", "::"), "::@5", "after a two-byte character")
        XCTAssertEqual(found("Fatal error: Index out of range", "Fatal error: "), "Fatal error: @0")
        XCTAssertTrue("operator()(int)".containsUTF8("("))
        XCTAssertFalse("main".containsUTF8(" in "))
        let substring = "xx::yy".dropFirst()
        XCTAssertTrue(substring.containsUTF8("::"))
        XCTAssertEqual(substring.firstUTF8Range(of: "yy").map { String(substring[$0]) }, "yy")
    }
}
