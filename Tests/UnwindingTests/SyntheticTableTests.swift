// The unwinder serves the tables it builds (from .eh_frame, from .debug_frame) at synthetic
// addresses, 4 GiB per module by its index. A process makes its own maps: one that maps an ELF
// file 13,000 times has module indexes whose synthetic address would pass 2^64. Those modules
// get no synthetic table; the unwinder does not trap.

import BoundedBytes
import ObjectFile
@testable import Unwinding
import XCTest

final class SyntheticTableTests: XCTestCase {
    func testModulesPastTheSyntheticSlotsGetNoTableAndNoTrap() throws {
        let path = "/usr/lib/x86_64-linux-gnu/libc.so.6"
        guard let elf = try? ELFFile(path: path) else { throw XCTSkip("no \(path)") }
        let module = LoadedModule(path: path, base: 0x7F00_0000_0000, size: 0x20_0000, buildID: elf.buildID, object: elf)
        let unwinder = Unwinder(memory: RegionMemory(regions: []), modules: [module])
        for index in [Unwinder.syntheticSlots, 0x3000, 0x4000, Int(Int32.max)] {
            XCTAssertNil(unwinder.builtTable(moduleIndex: index, object: elf))
            XCTAssertNil(unwinder.debugFrameTable(moduleIndex: index, object: elf, start: 0, end: 0))
        }
        XCTAssertNotNil(unwinder.builtTable(moduleIndex: 0, object: elf), "libc's .eh_frame indexed at the first slot")
    }
}
