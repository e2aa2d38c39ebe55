// Demangling: Swift (the runtime's own simplified form), C++ (Itanium), Rust legacy and v0;
// names that are not mangled, or cannot be demangled, stay as they are.

import ObjectFile
@testable import Symbolication
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
}
