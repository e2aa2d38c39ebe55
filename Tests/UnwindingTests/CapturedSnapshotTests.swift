// Unwinding a real captured snapshot through the public API: registers and stack a -O2 program
// took of itself, its modules opened from disk, frames named by the Symbolizer. Once with the
// ordinary .eh_frame_hdr, once linked without it so EHFrameIndex builds the FDE table.

import Symbolication
import TestSupport
import Unwinding
import XCTest

final class CapturedSnapshotTests: XCTestCase {
    func check(_ snapshot: CapturedSnapshot, file: StaticString = #filePath, line: UInt = #line) {
        let unwinder = Unwinder(memory: RegionMemory(regions: [snapshot.stack]), modules: snapshot.unwindModules())
        let stack = unwinder.unwind(registers: snapshot.registers)
        let names = snapshot.functionNames(of: stack)
        XCTAssertEqual(Array(names.prefix(4)), ["inner", "middle", "outer", "main"], "\(names)", file: file, line: line)
        XCTAssertEqual(stack.frames.first?.method, .context, file: file, line: line)
        for frame in stack.frames.dropFirst().prefix(3) {
            XCTAssertEqual(frame.method, .cfi, "\(names) \(stack.frames)", file: file, line: line)
            XCTAssertFalse(frame.isSignalFrame, file: file, line: line)
        }
    }

    func testUnwindsACapturedStackThroughEHFrameHdr() throws {
        check(try CapturedSnapshot.take(label: "unwind-hdr"))
    }

    func testUnwindsACapturedStackThroughEHFrameAlone() throws {
        let snapshot = try CapturedSnapshot.take(label: "unwind-nohdr", linkFlags: ["-Wl,--no-eh-frame-hdr"])
        XCTAssertNil(try ELFFile(path: snapshot.executable).ehFrameTable, "linked without .eh_frame_hdr")
        check(snapshot)
    }
}
