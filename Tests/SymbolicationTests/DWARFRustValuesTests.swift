// DWARFRustValuesTests: Rust values as gdb 13 prints them (no pretty printers): structures by
// their qualified names, tuples and tuple structs, fieldless and data-carrying enums, arrays in
// brackets, `&str` as a string and slices through their data_ptr and length, char, bool, unit,
// pointers; and type names as gdb's whatis. A Rust program rustc builds in the test run (at
// opt-level 0 and 2) and explain.rs, run under gdb to their crash, compared value by value
// (DWARFVariablesTests's comparison: gdb's registers, a gcore core as the captured memory).

import Foundation
import Symbolication
import TestSupport
import XCTest

final class DWARFRustValuesTests: XCTestCase, GDBComparing {
    static let source = """
        use std::hint::black_box;

        #[derive(Clone, Copy)]
        #[allow(dead_code)]
        pub enum Color { Red, Green, Blue }

        #[allow(dead_code)]
        pub enum Shape { Circle(f64), Rect { w: i32, h: i32 }, Empty }

        #[allow(dead_code)]
        pub struct Pair(i32, u8);

        pub struct Unit;

        #[allow(dead_code)]
        pub struct Order { id: i32, sku: i64, price: f64, name: &'static str }

        mod inner {
            #[allow(dead_code)]
            pub struct Deep { pub flag: bool, pub c: char }
        }

        #[inline(never)]
        fn crash(o: &Order, p: *const Order, s: &str, sl: &[i32], shape: &Shape, c: char, b: bool, byte: u8) -> i32 {
            let tuple = (1i32, 2.5f64, 'x');
            let pair = Pair(3, 4);
            let unit = ();
            let u = Unit;
            let arr = [1u16, 2, 3];
            let same = [7i32; 20];
            let bytes = *b"hi\\0";
            let deep = inner::Deep { flag: true, c: '\\u{e9}' };
            let quote = '\\'';
            let emoji = '\\u{1f600}';
            let some = Some(5i32);
            let none: Option<i32> = None;
            let boxed: Option<&Order> = Some(o);
            let res: Result<u32, i8> = Err(-3);
            let st = String::from("hey");
            let f32v = 1.1f32;
            let empty: &str = "";
            let ss = &sl[0..1];
            let nothing: &[i32] = &sl[0..0];
            let color = Color::Blue;
            let circle = Shape::Circle(1.5);
            let shape3 = Shape::Empty;
            let nested = [[1u8, 2], [3, 4]];
            let strs = ["a", "bc"];
            let i128v: i128 = -5;
            let refi = &pair.0;
            let mutp: *mut i32 = std::ptr::null_mut();
            black_box((&tuple, &pair, &unit, &u, &arr, &same, &bytes, &deep, &quote, &emoji, &some, &none, &boxed));
            black_box((&res, &st, &f32v, &empty, &ss, &nothing, &color, &circle, &shape3, &nested, &strs, &i128v));
            black_box((&refi, &mutp, o, p, s, sl, shape, c, b, byte));
            unsafe { *(black_box(0usize) as *const i32) }
        }

        fn main() {
            let o = Order { id: 7, sku: 1234, price: 12.5, name: "widget" };
            let data = [10, 20, 30];
            let shape = Shape::Rect { w: 2, h: 3 };
            std::process::exit(crash(&o, &o, "paid", &data, &shape, 'a', true, 200));
        }

        """

    var directory = ""

    override func setUp() {
        directory = TestSupport.temporaryDirectory("dwarf-rust-values")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static var rustc: String? {
        TestSupport.which("rustc", also: [NSHomeDirectory() + "/.cargo/bin", "/root/.cargo/bin"])
    }

    private func compareRust(
        source: String = DWARFRustValuesTests.source, level: Int, output: String, arguments: [String] = [],
        frames: Int = 3, line: UInt = #line
    ) throws -> (matched: Int, entryValues: [String], scopes: [DWARFScopeVariables]) {
        guard let rustc = Self.rustc else { throw XCTSkip("no rustc") }
        let result = try compare(
            source: source, sourceName: "crash.rs", compiler: rustc,
            flags: ["--edition", "2021", "-C", "opt-level=\(level)", "-C", "debug-assertions=off"], output: output,
            arguments: arguments, frames: frames, line: line)
        return (result.matched, result.entryValues, result.first)
    }

    func testMatchesGDBAtOptLevel0() throws {
        let (matched, entryValues, scopes) = try compareRust(level: 0, output: "crash-O0")
        XCTAssertGreaterThanOrEqual(matched, 38)
        XCTAssertEqual(entryValues, [])
        let crash = try XCTUnwrap(scopes.first)
        let types = Dictionary(uniqueKeysWithValues: crash.variables.map { ($0.name, $0.typeName ?? "") })
        // As gdb's whatis: a reference and a raw pointer alike are `*mut T`.
        XCTAssertEqual(types["o"], "*mut crash::Order")
        XCTAssertEqual(types["p"], "*mut crash::Order")
        XCTAssertEqual(types["s"], "&str")
        XCTAssertEqual(types["sl"], "&[i32]")
        XCTAssertEqual(types["c"], "char")
        XCTAssertEqual(types["tuple"], "(i32, f64, char)")
        XCTAssertEqual(types["pair"], "crash::Pair")
        XCTAssertEqual(types["unit"], "()")
        XCTAssertEqual(types["arr"], "[u16; 3]")
        XCTAssertEqual(types["nested"], "[[u8; 2]; 2]")
        XCTAssertEqual(types["strs"], "[&str; 2]")
        XCTAssertEqual(types["deep"], "crash::inner::Deep")
        XCTAssertEqual(types["some"], "core::option::Option<i32>")
        XCTAssertEqual(types["st"], "alloc::string::String")
        XCTAssertEqual(types["color"], "crash::Color")
        XCTAssertEqual(types["mutp"], "*mut i32")
    }

    func testMatchesGDBAtOptLevel2() throws {
        let (matched, _, _) = try compareRust(level: 2, output: "crash-O2")
        XCTAssertGreaterThanOrEqual(matched, 10)
    }

    /// The end-to-end fixture: explain.rs's null-field mode, four frames deep.
    func testMatchesGDBForExplainFixture() throws {
        let source = try String(contentsOfFile: TestSupport.fixture("explain/explain.rs"), encoding: .utf8)
        let (matched, _, scopes) = try compareRust(
            source: source, level: 0, output: "explain-O0", arguments: ["null-field"], frames: 4)
        XCTAssertGreaterThanOrEqual(matched, 20)
        XCTAssertEqual(scopes.map(\.function).count, 4)
    }
}
