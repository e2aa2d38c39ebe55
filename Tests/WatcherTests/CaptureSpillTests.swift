// CaptureSpill: a waiting second step's capture goes into an unlinked file and comes back the
// same; the file is emptied once no spilled capture is left; a place past what the file holds
// is refused (the report stays as captured), and where no such file can be made there is no
// spill. The storm that spills for real: SidecarTests.testTwentySimultaneousCrashes.

import BoundedBytes
import Foundation
import ReportModel
import TestSupport
import XCTest

@testable import Watcher

final class CaptureSpillTests: XCTestCase {
    func capture(stackBytes: Int) throws -> Capture {
        let recordBytes = WireBytes.crashRecord(
            pid: 1234, signal: 11, code: 1, faultAddress: 0xdead, appArea: 0, stackStart: 0x7000_0000,
            stack: [1, 2, 3, 4])
        let record = try CrashRecord(bytes: recordBytes)
        var files = LinuxFiles()
        files.maps = Array("00400000-00401000 r-xp 00000000 08:01 1 /bin/x\n".utf8)
        files.procStatus = Array("Name:\tx\nState:\tR\n".utf8)
        files.cmdLine = Array("/bin/x\u{0}".utf8)
        files.cpuInfo = Array("the machine's, not spilled".utf8)
        let stack = MemoryRegion(start: 0x7000_0000, bytes: (0..<stackBytes).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let snapshot = ProcessSnapshot(
            pid: 1234, crashedThreadID: 1234, exception: ExceptionInfo(signal: 11, code: 1, faultAddress: 0xdead),
            threads: [
                ThreadSnapshot(tid: 1234, name: "main", registers: record.registers, stack: stack),
                ThreadSnapshot(tid: 1235, name: "no stack", registers: record.registers, stack: nil),
            ],
            modules: [], extraMemory: [MemoryRegion(start: 0x40_0000, bytes: [0x0f, 0x0b])], linuxFiles: files,
            captureTime: 0)
        return Capture(
            snapshot: snapshot, executable: "/bin/x", arguments: [], notes: [], record: record,
            suspendedNanoseconds: 0, heldNanoseconds: 0)
    }

    func fileSize(_ spill: CaptureSpill) -> Int {
        var info = stat()
        XCTAssertEqual(fstat(spill.fd, &info), 0)
        return Int(info.st_size)
    }

    /// Bytes of the file system the file holds (its blocks).
    func fileBlocks(_ spill: CaptureSpill) -> Int {
        var info = stat()
        XCTAssertEqual(fstat(spill.fd, &info), 0)
        return Int(info.st_blocks) * 512
    }

    func testACaptureComesBackAsItWentAndTheFileEmptiesWhenNoneIsLeft() throws {
        let spill = try XCTUnwrap(CaptureSpill(directory: TestSupport.freshDirectory(in: NSTemporaryDirectory(), "spill")))
        let original = try capture(stackBytes: 9000)
        var first = original, second = try capture(stackBytes: 100)
        let firstPlace = try XCTUnwrap(spill.spill(&first))
        let secondPlace = try XCTUnwrap(spill.spill(&second))
        XCTAssertEqual(first.snapshot.threads[0].stack?.bytes, [], "the stack left memory")
        XCTAssertNil(first.snapshot.threads[1].stack)
        XCTAssertEqual(first.snapshot.extraMemory[0].bytes, [])
        XCTAssertEqual(first.snapshot.linuxFiles.maps, [])
        XCTAssertEqual(first.snapshot.linuxFiles.cpuInfo, original.snapshot.linuxFiles.cpuInfo, "shared, kept")
        XCTAssertNil(first.snapshot.linuxFiles.environ, "a file not read stays unread")
        let files = original.snapshot.linuxFiles
        let perCapture = 2 + [files.maps, files.procStatus, files.cmdLine].reduce(0) { $0 + ($1?.count ?? 0) }
        XCTAssertEqual(fileSize(spill), 9000 + 100 + 2 * perCapture)

        let blocks = fileBlocks(spill)
        XCTAssertTrue(spill.restore(&first, from: firstPlace))
        XCTAssertEqual(first.snapshot, original.snapshot)
        XCTAssertGreaterThan(fileSize(spill), 0, "the second capture is still there")
        XCTAssertLessThan(fileBlocks(spill), blocks, "the first one's blocks went back")
        XCTAssertTrue(spill.restore(&second, from: secondPlace))
        XCTAssertEqual(second.snapshot.threads[0].stack?.bytes.count, 100)
        XCTAssertEqual(fileSize(spill), 0, "emptied once none is left")
        XCTAssertEqual(spill.takeSpilled(), 2)
        XCTAssertEqual(spill.takeSpilled(), 0)
    }

    func testAPlacePastTheFileIsRefused() throws {
        let spill = try XCTUnwrap(CaptureSpill(directory: TestSupport.freshDirectory(in: NSTemporaryDirectory(), "spill")))
        var spilled = try capture(stackBytes: 64)
        let place = try XCTUnwrap(spill.spill(&spilled))
        var other = try capture(stackBytes: 64)
        _ = try XCTUnwrap(spill.spill(&other))
        let past = CaptureSpill.Place(offset: place.offset + 1 << 20, lengths: place.lengths)
        XCTAssertFalse(spill.restore(&spilled, from: past), "bytes the file does not hold")
        XCTAssertEqual(spilled.snapshot.threads[0].stack?.bytes, [], "left empty: the report stays as captured")
    }

    /// A file that never empties (a steady stream of crashes) stops taking captures at its
    /// bound: they wait in memory instead.
    func testAFileAtItsBoundTakesNoMore() throws {
        let spill = try XCTUnwrap(
            CaptureSpill(directory: TestSupport.freshDirectory(in: NSTemporaryDirectory(), "spill"), maximumEnd: 20_000))
        var first = try capture(stackBytes: 9000), second = try capture(stackBytes: 9000)
        let place = try XCTUnwrap(spill.spill(&first))
        let original = try capture(stackBytes: 9000)
        var third = original
        XCTAssertNotNil(spill.spill(&second))
        XCTAssertNil(spill.spill(&third), "past 20,000 bytes of offsets")
        XCTAssertEqual(third.snapshot, original.snapshot, "left as it was")
        XCTAssertTrue(spill.restore(&first, from: place))
        XCTAssertNil(spill.spill(&third), "offsets are reused only once the file is empty")
    }

    func testNoFileWhereNoneCanBeMade() {
        XCTAssertNil(CaptureSpill(directory: "/proc"), "no O_TMPFILE in /proc")
        XCTAssertNil(CaptureSpill(directory: "/nonexistent-crashport-directory"))
    }
}
