// Demangling: Swift (the runtime's own simplified form), C++ (Itanium), Rust legacy and v0;
// names that are not mangled, or cannot be demangled, stay as they are.
//
// The Rust names are real: rustc 1.95 built Tests/Fixtures/rust/names.rs once with
// `-C symbol-mangling-version=legacy` and once with `=v0`, and the expected strings are what
// rustc-demangle prints in its alternate form ("{:#}", Rust's own backtraces: no legacy hash, no
// v0 crate disambiguators), checked against rustc-demangle itself when they were written.
// testRustFixture builds names.rs again with the rustc on the machine, where there is one.

import Foundation
import ObjectFile
@testable import Symbolication
import TestSupport
import XCTest

final class DemanglerTests: XCTestCase {
    func testTable() {
        let rows: [(String, String?)] = [
            ("$s9inventory9InventoryV4item2atSSSi_tFTf4nn_g", "specialized Inventory.item(at:)"),
            ("_ZSt9terminatev", "std::terminate()"),
            ("_Z12parse_configi", "parse_config(int)"),
            ("_ZN4main9inventory5Store4item17h1c02fb222862aa91E", "main::inventory::Store::item"),
            ("_RNvMNtCs32gj3y4fnmh_4main9inventoryNtB2_5Store4item", "<main::inventory::Store>::item"),
            ("_RNvCs32gj3y4fnmh_4main4main", "main::main"),
            ("main", nil),
            ("_Znotmangled", nil),
            ("$snot-swift", nil),
            ("_R", nil),
        ]
        for (mangled, expected) in rows {
            XCTAssertEqual(Demangler.demangle(mangled), expected, mangled)
            XCTAssertEqual(Demangler.readable(mangled), expected ?? mangled, mangled)
        }
    }

    func check(_ rows: [(String, String?)], file: StaticString = #filePath, line: UInt = #line) {
        for (mangled, expected) in rows {
            XCTAssertEqual(Demangler.demangle(mangled), expected, mangled, file: file, line: line)
            XCTAssertEqual(Demangler.readable(mangled), expected ?? mangled, mangled, file: file, line: line)
        }
    }

    /// Legacy names: Rust's escapes decoded, ".." read as "::", the hash segment dropped.
    func testRustLegacy() {
        check([
            ("_ZN5names4main28_$u7b$$u7b$closure$u7d$$u7d$17hafc119680456a49aE", "names::main::{{closure}}"),
            ("_ZN5names16Wrapper$LT$T$GT$5apply17h0b6d478a55cf3c58E", "names::Wrapper<T>::apply"),
            (
                "_ZN49_$LT$names..Foo$u20$as$u20$core..fmt..Display$GT$3fmt17he48538d265ed725dE",
                "<names::Foo as core::fmt::Display>::fmt"
            ),
            ("_ZN5names4main17hd52b26720289402dE", "names::main"),
            // Every escape rustc's legacy mangling writes, and a leading "_$" read as "$".
            ("_ZN4main28$SP$$BP$$RF$$LP$$RP$$C$$u7e$17h0123456789abcdefE", "main::@*&(),~"),
            ("_ZN4main2_$17h0123456789abcdefE", "main::$"),
            // rustc-demangle's own test: a trait impl with a lifetime and nested generics.
            (
                "_ZN71_$LT$Test$u20$$u2b$$u20$$u27$static$u20$as$u20$foo..Bar$LT$Test$GT$$GT$3bar17h930b740aa94f1d3aE",
                "<Test + 'static as foo::Bar<Test>>::bar"
            ),
            // Non-ASCII identifiers (rustc 1.95's own symbols for `fn café` and `fn 計算`), which
            // libiberty leaves escaped and rustc-demangle decodes; a bad scalar stays escaped.
            ("_ZN3uni8caf$ue9$17h33eed65aca7387deE", "uni::café"),
            ("_ZN3uni15_$u8a08$$u7b97$17h079d078235b4ff98E", "uni::計算"),
            ("_ZN3uni9a$ud800$b17h33eed65aca7387deE", "uni::a$ud800$b"),
            // ThinLTO's ".llvm." suffix, as rustc-demangle drops it.
            ("_ZN5names4main17hd52b26720289402dE.llvm.9D1C9369", "names::main"),
        ])
    }

    /// v0 names: generic arguments, closures with their index, trait impls; no disambiguators.
    func testRustV0() {
        check([
            ("_RNCNvCs4T4zK9Otvt5_5names4main0B3_", "names::main::{closure#0}"),
            ("_RNvMCs4T4zK9Otvt5_5namesINtB2_7WrappermE5applyB2_", "<names::Wrapper<u32>>::apply"),
            (
                "_RNvXs_Cs4T4zK9Otvt5_5namesNtB4_3FooNtNtCsgEmfK2I1SDS_4core3fmt7Display3fmt",
                "<names::Foo as core::fmt::Display>::fmt"
            ),
            ("_RNvCs4T4zK9Otvt5_5names4main", "names::main"),
            ("_RNCINvNtCsjrHSEGnQ3l9_3std2rt10lang_startuE0Cs4T4zK9Otvt5_5names", "std::rt::lang_start::<()>::{closure#0}"),
            (
                "_RINvMs2_NtCsgEmfK2I1SDS_4core3fmtNtB6_9Arguments3newKj7_Kj2_ECs4T4zK9Otvt5_5names",
                "<core::fmt::Arguments>::new::<7, 2>"
            ),
        ])
    }

    /// Names are untrusted bytes: malformed Rust names come back unchanged or partly decoded
    /// (rustc-demangle prints a segment's rest verbatim from a bad escape on), and never trap.
    func testHostileRustNames() {
        check([
            // Truncated and non-hex "$u" escapes: the segment's rest verbatim, as rustc-demangle.
            ("_ZN4main3$u717h0123456789abcdefE", "main::$u7"),
            ("_ZN4main6$uZZZ$17h0123456789abcdefE", "main::$uZZZ$"),
            ("_ZN4main5a$u7e17h0123456789abcdefE", "main::a$u7e"),
            ("_ZN4main5$XY$a17h0123456789abcdefE", "main::$XY$a"),
            // A control character is not decoded (rustc-demangle's rule too).
            ("_ZN4main4$u0$17h0123456789abcdefE", "main::$u0$"),
            // A surrogate, which no char is: refused by libiberty, and by __cxa_demangle.
            ("_ZN4main6$ud800$17h0123456789abcdefE", nil),
            // A length past the end, no "E", a short hash, nothing after the prefix.
            ("_ZN4main99999999999999999999999foo17h0123456789abcdefE", nil),
            ("_ZN4main3foo17h0123456789abcdef", nil),
            ("_ZN4main4$u7b", nil),
            ("_ZN", nil),
            ("_RNvC", nil),
            ("_RNvB_1a", nil),
        ])
        // Deep nesting and long repetitions (rustc-demangle's recursion-limit tests are of this
        // kind): libiberty limits its recursion; these must return, decoded or not.
        let deep = [
            "_R" + String(repeating: "Nv", count: 100_000) + "C1a" + String(repeating: "1a", count: 100_000),
            "_R" + String(repeating: "A", count: 50_000) + "hj1_" + String(repeating: "j1_", count: 50_000),
            "_RINvC1a1b" + String(repeating: "B_", count: 10_000) + "E",
            "_ZN4main" + String(repeating: "$u7b$", count: 20_000) + "17h0123456789abcdefE",
        ]
        for name in deep {
            let text = Demangler.readable(name)
            XCTAssertFalse(text.isEmpty, String(name.prefix(40)))
        }
        // A legacy name of 100,000 segments decodes in full.
        let long = "_ZN" + String(repeating: "1a", count: 100_000) + "17h0123456789abcdefE"
        XCTAssertEqual(Demangler.demangle(long), Array(repeating: "a", count: 100_000).joined(separator: "::"))
    }

    /// names.rs built here with each mangling: its functions demangle to what Rust prints, and no
    /// Rust name of the binary keeps an escape or a hash. Skipped where rustc or nm is missing.
    func testRustFixture() throws {
        let home = ProcessInfo.processInfo.environment["HOME"] ?? "/root"
        guard let rustc = TestSupport.which("rustc", also: [home + "/.cargo/bin"]) else {
            throw XCTSkip("rustc not found (looked in PATH and ~/.cargo/bin): names.rs cannot be built")
        }
        guard let nm = TestSupport.which("nm") else { throw XCTSkip("nm not found: the symbols cannot be listed") }
        let directory = TestSupport.temporaryDirectory("demangle")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let expected = [
            "legacy": [
                "names::main", "names::main::{{closure}}", "names::Wrapper<T>::apply",
                "<names::Foo as core::fmt::Display>::fmt",
            ],
            "v0": [
                "names::main", "names::main::{closure#0}", "<names::Wrapper<u32>>::apply",
                "<names::Foo as core::fmt::Display>::fmt",
            ],
        ]
        for (mangling, functions) in expected {
            let output = directory + "/names-" + mangling
            let command = [
                rustc, "-C", "opt-level=0", "-C", "symbol-mangling-version=" + mangling, "-o", output,
                TestSupport.fixture("rust/names.rs"),
            ]
            var result = try TestSupport.run(command)
            if result.status != .exited(0), mangling == "legacy" {
                // Since Rust 1.95 (v0 the default) choosing legacy takes -Z unstable-options.
                result = try TestSupport.run(
                    Array(command[...0]) + ["-Z", "unstable-options"] + command[1...], environment: ["RUSTC_BOOTSTRAP": "1"])
            }
            guard result.status == .exited(0) else {
                XCTFail("rustc \(mangling) names.rs failed:\n\(result.stderr)")
                continue
            }
            let listing = try TestSupport.run([nm, "--defined-only", output])
            XCTAssertEqual(listing.status, .exited(0), listing.stderr)
            let names = listing.stdout.split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) }
            let rust = names.filter { $0.hasPrefix(mangling == "v0" ? "_R" : "_ZN") && $0.contains("names") }
            let readable = Set(rust.map(Demangler.readable))
            for function in functions {
                XCTAssertTrue(readable.contains(function), "\(mangling): \(function) in \(readable.sorted())")
            }
            for (name, text) in zip(rust, rust.map(Demangler.readable)) {
                XCTAssertNotEqual(name, text, "\(mangling): not demangled")
                for leftover in ["$LT$", "$GT$", "$u", "..", "17h"] {
                    XCTAssertFalse(text.contains(leftover), "\(mangling): \(name) → \(text)")
                }
                XCTAssertNil(text.range(of: "::h[0-9a-f]{16}$", options: .regularExpression), "\(mangling): \(name) → \(text)")
            }
        }
    }
}
