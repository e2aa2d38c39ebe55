// The core-stream fuzz target's built seeds (Tests/Fuzz/seeds/core-stream/built-*) are what
// CoreBytes writes: checked here, rewritten with CRASHPORT_WRITE_SEEDS=1 when the builder
// changes. (real-threads-segv-head is the first 20 KiB of a kernel's core of
// Tests/Fixtures/core/threads-segv.c: its headers, its notes and the start of its loads.)

import Foundation
import FuzzTargets
import TestSupport
import XCTest

final class CoreStreamSeedTests: XCTestCase {
    static let directory = TestSupport.repositoryRoot + "/Tests/Fuzz/seeds/core-stream"

    static var seeds: [(String, [UInt8])] {
        var lying = CoreDumpReaderTests.core()
        lying.file = CoreBytes.fileNote([(CoreDumpReaderTests.code, CoreDumpReaderTests.code + 0x1000, 0, "/x")], count: 1 << 40)
        lying.extraNotes = [("LINUX", 0x202, [UInt8](repeating: 1, count: 600)), ("CORE", 1, [1, 2, 3])]
        var numbered = CoreDumpReaderTests.core()
        numbered.loads.removeLast(3)
        var extended = numbered.bytes()
        extended.put(u16: 0xFFFF, at: 56)
        return [
            ("built-two-threads", CoreDumpReaderTests.core().bytes()), ("built-lying-notes", lying.bytes()),
            ("built-extended-numbering", extended),
        ]
    }

    func testTheBuiltSeedsAreTheBuildersStreams() throws {
        let write = ProcessInfo.processInfo.environment["CRASHPORT_WRITE_SEEDS"] == "1"
        for (name, bytes) in Self.seeds {
            let path = Self.directory + "/" + name
            if write { try Data(bytes).write(to: URL(fileURLWithPath: path)) }
            XCTAssertEqual(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))), bytes, name)
            XCTAssertLessThanOrEqual(bytes.count, 65536, "\(name): within the fuzzer's -max_len")
            FuzzTarget.coreStream.run(bytes)
        }
    }
}
