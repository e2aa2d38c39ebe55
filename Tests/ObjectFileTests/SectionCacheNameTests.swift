// SectionCache's file names: a section's name comes from a hostile file, and a root sidecar
// opens and writes the cache's files with its own credentials, so a name that is not a DWARF
// section's shape (a path, a dot-dot, a NUL, anything but a dot and lowercase letters or
// underscores) makes no file name at all.

import XCTest

@testable import ObjectFile

final class SectionCacheNameTests: XCTestCase {
    let buildID = BuildID([0x93, 0xac, 0x61, 0xec])!

    func testDWARFSectionNamesMakeNames() {
        XCTAssertEqual(SectionCache.name(buildID: buildID, section: ".debug_info", size: 42), "93ac61ec.debug_info-42")
        XCTAssertNotNil(SectionCache.name(buildID: buildID, section: ".debug_line_str", size: 1))
    }

    func testHostileSectionNamesMakeNone() {
        for hostile in [
            "", ".", "debug_info", "./../../etc/passwd", ".debug/../x", ".debug_info\u{0}x", ".DEBUG_INFO", ".debug-info",
            ".debug_info ", "." + String(repeating: "a", count: 40), ".debug_ínfo",
        ] {
            XCTAssertNil(SectionCache.name(buildID: buildID, section: hostile, size: 42), hostile)
        }
    }
}
