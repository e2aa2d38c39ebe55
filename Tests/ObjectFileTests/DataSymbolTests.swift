// ELFFile.dataSymbolAddress: a program's globals found by name (how the Python reader finds
// `_PyRuntime`), and nothing found for functions, imports or names that are only a prefix.

import Foundation
import ObjectFile
import TestSupport
import XCTest

final class DataSymbolTests: XCTestCase {
    func testGlobalsAreFoundAndOthersAreNot() throws {
        let directory = TestSupport.temporaryDirectory("data-symbols")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = directory + "/g.c"
        try """
        #include <stdio.h>
        int crashport_counter = 7;
        const char crashport_label[] = "label";
        __attribute__((noinline)) int crashport_function(void) { return crashport_counter; }
        int main(void) { printf("%s %d\\n", crashport_label, crashport_function()); return 0; }
        """.write(toFile: source, atomically: true, encoding: .utf8)
        let program = try TestSupport.compile([source], output: directory + "/g", flags: ["-O1", "-rdynamic"])
        let elf = try ELFFile(path: program)
        let counter = try XCTUnwrap(elf.dataSymbolAddress(named: "crashport_counter"))
        let label = try XCTUnwrap(elf.dataSymbolAddress(named: "crashport_label"))
        XCTAssertNotEqual(counter, label)
        // The address is the variable's: its initial value is in the file there.
        let data = try XCTUnwrap(elf.sections.first { $0.address <= counter && counter < $0.address + $0.size })
        let bytes = try XCTUnwrap(elf.contents(of: data))
        XCTAssertEqual(bytes.u8(counter - data.address), 7)
        XCTAssertNil(elf.dataSymbolAddress(named: "crashport_function"))  // a function
        XCTAssertNil(elf.dataSymbolAddress(named: "crashport_count"))  // a prefix
        XCTAssertNil(elf.dataSymbolAddress(named: "stdout"))  // an import: undefined here
        XCTAssertNil(elf.dataSymbolAddress(named: ""))
    }
}
