// JSONObject: loose JSON trees over FoundationEssentials' coders (what JSONSerialization gave
// the uploader and the Sentry shapes before crashport stopped linking full Foundation).

import XCTest

@testable import ReportModel

final class JSONObjectTests: XCTestCase {
    func testWritesSortedCompactJSONWithSlashesAsTheyAre() throws {
        let tree: [String: Any] = [
            "b": [1, 2.5, "x/y", true, JSONObject.null] as [Any], "a": ["nested": "line\nbreak\u{1}"],
            "c": UInt64.max, "d": Int32(-7), "e": Optional<String>.none as Any,
        ]
        let text = String(decoding: try JSONObject.data(tree), as: UTF8.self)
        XCTAssertEqual(
            text, #"{"a":{"nested":"line\nbreak\u0001"},"b":[1,2.5,"x/y",true,null],"c":18446744073709551615,"d":-7,"e":null}"#)
    }

    func testParsesBooleansApartFromNumbers() throws {
        let object = try XCTUnwrap(JSONObject.parseObject(Array(#"{"t":true,"one":1,"half":0.5,"n":null,"s":"é","l":[]}"#.utf8)))
        XCTAssertEqual(object["t"] as? Bool, true)
        XCTAssertNil(object["t"] as? Int, "a boolean is not a number")
        XCTAssertEqual(object["one"] as? Int, 1)
        XCTAssertNil(object["one"] as? Bool, "a number is not a boolean")
        XCTAssertEqual(object["half"] as? Double, 0.5)
        XCTAssertTrue(object["n"] is JSONObject.Null)
        XCTAssertEqual(object["s"] as? String, "é")
        XCTAssertEqual((object["l"] as? [Any])?.count, 0)
    }

    func testRoundTrips() throws {
        let text = #"{"a":[{"b":[1,-2,3.25]},"c"],"d":{"e":false}}"#
        XCTAssertEqual(String(decoding: try JSONObject.data(try JSONObject.parse(Array(text.utf8))), as: UTF8.self), text)
    }

    func testWhatIsNotJSONIsRefused() {
        for text in ["", "{", #"{"a":}"#, #"{"a":1} x"#, "nul"] {
            XCTAssertThrowsError(try JSONObject.parse(Array(text.utf8)), text)
            XCTAssertNil(JSONObject.parseObject(Array(text.utf8)), text)
        }
        XCTAssertNil(JSONObject.parseObject(Array("[1]".utf8)), "an array is not an object")
        // Hostile nesting is refused by the decoder's depth limit, never a stack overflow here.
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        XCTAssertThrowsError(try JSONObject.parse(Array(deep.utf8)))
        XCTAssertThrowsError(try JSONObject.data(["x": Double.nan])) { XCTAssertEqual("\($0)", "not a JSON value: nan") }
        XCTAssertThrowsError(try JSONObject.data(["x": [1: 2]])) { XCTAssertTrue("\($0)".hasPrefix("not a JSON value: a ")) }
    }
}
