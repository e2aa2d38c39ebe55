// Every process of a boot maps the same vDSO: captures of two crashes share one parse of it
// (ModuleMap.vdso) instead of each holding a copy of its bytes until its report is built.
// Against a real live process, captured twice as a sidecar does.

import BoundedBytes
import Foundation
import LiveProcess
import ObjectFile
import ReportModel
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class VDSOShareTests: XCTestCase {
    func testTwoCapturesShareOneParseOfTheVDSO() throws {
        let sleeper = try Sleeper.start()
        defer { sleeper.stop() }
        let (pid, maps) = (sleeper.pid, sleeper.maps)
        let stack = try XCTUnwrap(maps.first { $0.path == "[stack]" })
        let code = try XCTUnwrap(maps.first { $0.executable && $0.path.hasSuffix("sleep") })
        let cache = ELFCache()
        func vdso() throws -> LoadedModule {
            var record = CrashRecord(
                observation: .hang(milliseconds: 0), pid: pid, tid: ThreadID(pid.rawValue), signal: SIGSEGV, appArea: 0,
                timeNanoseconds: 0)
            record.observation = nil
            record.code = 1
            record.registers["rsp"] = stack.end &- 256
            record.registers["rip"] = code.start
            record.stack = MemoryRegion(start: stack.end &- 256, bytes: [UInt8](repeating: 0, count: 64))
            let capture = CaptureSession.hold(record: record, options: CaptureOptions(), cache: cache).finish(cache: cache)
            return try XCTUnwrap(capture.snapshot.modules.first { $0.path == "[vdso]" }, "no [vdso] module")
        }
        let first = try vdso()
        let second = try vdso()
        let object = try XCTUnwrap(first.object, "the vDSO was not parsed")
        XCTAssertTrue(object === second.object, "each capture parsed its own copy of the vDSO")
        XCTAssertNotNil(first.buildID)
        XCTAssertEqual(first.buildID, second.buildID)
        XCTAssertEqual(first.base, second.base)
        XCTAssertTrue(object.sections.contains { $0.name == ".text" })
    }
}
