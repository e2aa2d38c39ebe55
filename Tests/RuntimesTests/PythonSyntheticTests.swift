// PythonStackReader over synthetic interpreters (TestSupport's PythonImage): the 3.11 layout the
// reader knows built in and a 3.13 image that describes itself with `_Py_DebugOffsets`, read
// whole; then each kind of hostile memory, where the reader must return what it could, say what
// it could not, and be quick about it: lists that loop, a million frames, names that are not
// str or not there, strings that are not text or claim to be huge, line tables that lie, offsets
// that do not fit, a byte budget spent. And the `python` fuzz target's seeds, which are these
// images.

import BoundedBytes
import Foundation
import FuzzTargets
import ReportModel
import Runtimes
import TestSupport
import XCTest

final class PythonSyntheticTests: XCTestCase {
    /// Lines 10 (units 0-1), 13 (2-5), 12 (6-13), then no location (14-17).
    static let table = PythonImage.lineTable([(2, 0), (4, 3), (8, -1), (4, nil)])

    /// An interpreter with two threads: the main one in parse_row ← load ← <module> (parse_row
    /// called from C), holding the GIL; a worker in one frame, with names of every str kind.
    static func interpreter(_ flavor: PythonImage.Flavor) -> (image: PythonImage, main: UInt64, worker: UInt64) {
        var image = PythonImage(flavor)
        let module = image.code(
            name: "<module>", qualifiedName: "<module>", file: "/app/main.py", firstLine: 10, lineTable: table)
        let load = image.code(name: "load", qualifiedName: "Loader.load", file: "/app/main.py", firstLine: 10, lineTable: table)
        let parse = image.code(
            name: "parse_row", qualifiedName: "Loader.parse_row", file: "/app/main.py", firstLine: 10, lineTable: table)
        var outer = image.frame(code: module, unit: 3, entry: true)
        if flavor == .python313 { outer = image.frame(code: module, unit: 3, previous: image.shim(previous: 0)) }
        let middle = image.frame(code: load, unit: 7, previous: outer)
        let inner =
            flavor == .python313
            ? image.frame(code: parse, unit: 15, previous: image.shim(previous: middle))
            : image.frame(code: parse, unit: 15, previous: middle, entry: true)
        // Latin-1, UCS-2 and UCS-4 names.
        let worker = image.code(name: "grüße", qualifiedName: "名前.𝔣𝔫", file: "/app/wörk.py", firstLine: 10, lineTable: table)
        let workerFrame =
            flavor == .python313
            ? image.frame(code: worker, unit: 2, previous: image.shim(previous: 0))
            : image.frame(code: worker, unit: 2, entry: true)
        let workerState = image.thread(nativeID: 4242, frame: workerFrame)
        // Patch the qualified name to UCS-2 and UCS-4 objects (str() picks latin-1 only for ASCII).
        image.put(image.str("名前", kind: 2), at: worker + image.offsets.codeQualname)
        image.put(image.str("𝔣𝔫", kind: 4), at: worker + image.offsets.codeName)
        let mainState = image.thread(nativeID: 4241, frame: inner)
        image.holdGIL(mainState)
        return (image, mainState, workerState)
    }

    static func read(_ image: PythonImage, version: UInt32? = nil, limits: PythonStackReader.Limits = .init()) -> PythonStacks {
        PythonStackReader.read(
            memory: image.memory, runtimeAddress: image.runtime, versionHex: version ?? image.versionHex, limits: limits)
    }

    func checkHappyPath(_ flavor: PythonImage.Flavor, version: String, layout: String) throws {
        let stacks = Self.read(Self.interpreter(flavor).image)
        XCTAssertEqual(stacks.version, version)
        XCTAssertEqual(stacks.layout, layout)
        XCTAssertEqual(stacks.notes, [])
        XCTAssertEqual(stacks.threads.count, 2)
        // New thread states go first in CPython's list, as here.
        let main = stacks.threads[0], worker = stacks.threads[1]
        XCTAssertEqual(main.threadID, ThreadID(rawValue: 4241))
        XCTAssertTrue(main.holdsGIL)
        XCTAssertNil(main.problem)
        XCTAssertEqual(
            main.frames,
            [
                PythonFrame(
                    function: "parse_row", qualifiedName: "Loader.parse_row", file: "/app/main.py", line: nil, entry: true),
                PythonFrame(function: "load", qualifiedName: "Loader.load", file: "/app/main.py", line: 12, entry: false),
                PythonFrame(function: "<module>", qualifiedName: "<module>", file: "/app/main.py", line: 13, entry: true),
            ])
        XCTAssertEqual(worker.threadID, ThreadID(rawValue: 4242))
        XCTAssertFalse(worker.holdsGIL)
        XCTAssertEqual(
            worker.frames,
            [PythonFrame(function: "𝔣𝔫", qualifiedName: "名前", file: "/app/wörk.py", line: 13, entry: true)])
    }

    func testPython311FromBuiltInOffsets() throws {
        try checkHappyPath(.python311, version: "3.11.7", layout: "built-in 3.11 offsets")
    }

    func testPython313FromDebugOffsets() throws {
        try checkHappyPath(.python313, version: "3.13.0", layout: "_Py_DebugOffsets")
        // The version comes from the table when the process has no Py_Version symbol found.
        XCTAssertEqual(Self.read(Self.interpreter(.python313).image, version: nil).version, "3.13.0")
    }

    func testVersionsItDoesNotRead() {
        let image = Self.interpreter(.python311).image
        let none = PythonStackReader.read(memory: image.memory, runtimeAddress: image.runtime, versionHex: nil)
        XCTAssertEqual(none.threads, [])
        XCTAssertEqual(none.layout, "none")
        XCTAssertTrue(none.notes.first?.contains("before 3.11") == true, "\(none.notes)")
        let old = Self.read(image, version: 0x030A_0DF0)
        XCTAssertEqual(old.version, "3.10.13")
        XCTAssertTrue(old.notes.first?.contains("3.11 and later") == true, "\(old.notes)")
        // 3.13 claimed, but no _Py_DebugOffsets at the runtime: nothing guessed.
        let unmarked = Self.read(image, version: 0x030D_00C2)
        XCTAssertEqual(unmarked.version, "3.13.0rc2")
        XCTAssertEqual(unmarked.notes, ["no _Py_DebugOffsets at _PyRuntime"])
    }

    /// Built-in offsets applied to an interpreter they do not fit are refused by the
    /// back-pointer check, not read as frames; 3.12's on a 3.11 image find no thread at all.
    func testBuiltInOffsetsThatDoNotFitAreRefused() {
        var (image, main, _) = Self.interpreter(.python311)
        image.put(image.interpreter + 8, at: main + image.offsets.threadInterp)
        let stacks = Self.read(image)
        XCTAssertEqual(stacks.threads, [])
        XCTAssertTrue(stacks.notes.first?.contains("built-in 3.11 offsets do not fit") == true, "\(stacks.notes)")
        let other = Self.read(Self.interpreter(.python311).image, version: 0x030C_01F0)
        XCTAssertEqual(other.threads, [])
        XCTAssertEqual(other.notes, ["no thread state in the interpreter's list"])
    }

    // MARK: Hostile lists

    func testThreadListThatLoops() {
        var (image, main, worker) = Self.interpreter(.python311)
        image.put(main, at: worker + image.offsets.threadNext)
        let stacks = Self.read(image)
        XCTAssertEqual(stacks.threads.count, 2)
        XCTAssertTrue(stacks.notes.contains { $0.contains("loops") }, "\(stacks.notes)")
    }

    func testFrameChainThatLoops() throws {
        for flavor in [PythonImage.Flavor.python311, .python313] {
            var image = PythonImage(flavor)
            let code = image.code(name: "f", qualifiedName: "f", file: "/f.py", firstLine: 1, lineTable: Self.table)
            let first = image.frame(code: code, unit: 3)
            let second = image.frame(code: code, unit: 3, previous: first)
            image.put(second, at: first + image.offsets.framePrevious)
            image.thread(nativeID: 1, frame: second)
            let thread = try XCTUnwrap(Self.read(image).threads.first)
            XCTAssertEqual(thread.frames.count, 2)
            XCTAssertTrue(thread.problem?.contains("loops") == true, "\(String(describing: thread.problem))")
        }
    }

    /// A chain of a million distinct frames (made up by a reader as they are asked for) stops at
    /// the per-thread limit, and says so, in well under a second.
    func testMillionFrameChainStopsAtTheLimit() throws {
        var image = PythonImage(.python311)
        let code = image.code(name: "deep", qualifiedName: "deep", file: "/deep.py", firstLine: 1, lineTable: Self.table)
        let chain = FrameChain(start: 0x1_0000_0000, count: 1_000_000, code: code, offsets: image.offsets)
        image.thread(nativeID: 7, frame: chain.start)
        let memory = LayeredMemory([image.memory, chain])
        let started = Date()
        let stacks = PythonStackReader.read(memory: memory, runtimeAddress: image.runtime, versionHex: image.versionHex)
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        let thread = try XCTUnwrap(stacks.threads.first)
        XCTAssertEqual(thread.frames.count, PythonStackReader.Limits().framesPerThread)
        XCTAssertEqual(thread.frames.first?.line, 4)
        XCTAssertTrue(thread.problem?.contains("more than 4096 frames") == true, "\(String(describing: thread.problem))")
        // The limit over all threads holds too.
        var limits = PythonStackReader.Limits()
        limits.totalFrames = 100
        let capped = PythonStackReader.read(
            memory: memory, runtimeAddress: image.runtime, versionHex: image.versionHex, limits: limits)
        XCTAssertEqual(capped.threads.first?.frames.count, 100)
    }

    // MARK: Hostile objects

    func testNamesThatAreNotStrOrNotThere() throws {
        var image = PythonImage(.python311)
        let code = image.code(name: "f", qualifiedName: "q", file: "/f.py", firstLine: 1, lineTable: Self.table)
        image.put(image.str("7", type: image.intType), at: code + image.offsets.codeName)
        image.put(0xDEAD_0000, at: code + image.offsets.codeFilename)
        let notText = image.str("q")
        image.put(3 << 2 | 1 << 5, at: notText + 32, size: 4)  // kind 3: no such kind
        image.put(notText, at: code + image.offsets.codeQualname)
        image.thread(nativeID: 1, frame: image.frame(code: code, unit: 3))
        let thread = try XCTUnwrap(Self.read(image).threads.first)
        XCTAssertEqual(
            thread.frames,
            [PythonFrame(function: "<unreadable>", qualifiedName: nil, file: "<unreadable>", line: 4, entry: false)])
        let problem = try XCTUnwrap(thread.problem)
        XCTAssertTrue(problem.contains("co_name is a 'int', not a str"), problem)
        XCTAssertTrue(problem.contains("co_filename unreadable at 0xdead0000"), problem)
        XCTAssertTrue(problem.contains("co_qualname is not text"), problem)
    }

    func testCodeThatIsNotCodeAndFramesThatAreCut() throws {
        var image = PythonImage(.python311)
        let fake = image.str("not code")
        let code = image.code(name: "f", qualifiedName: "f", file: "/f.py", firstLine: 1, lineTable: Self.table)
        // The innermost frame's code is a str; the next frame is cut by the end of memory.
        let outer = image.frame(code: code, unit: 3)
        image.thread(nativeID: 1, frame: image.frame(code: fake, unit: 3, previous: outer))
        image.put(PythonImage.base + UInt64(image.bytes.count) - 8, at: outer + image.offsets.framePrevious)
        let thread = try XCTUnwrap(Self.read(image).threads.first)
        XCTAssertEqual(thread.frames.map(\.function), ["<unreadable>", "f"])
        let problem = try XCTUnwrap(thread.problem)
        XCTAssertTrue(problem.contains("is not a code object"), problem)
        XCTAssertTrue(problem.contains("unreadable"), problem)
    }

    func testStringsAreBounded() throws {
        var image = PythonImage(.python311)
        let long = String(repeating: "x", count: 5000)
        let code = image.code(name: long, qualifiedName: "q", file: "/f.py", firstLine: 1, lineTable: Self.table)
        image.thread(nativeID: 1, frame: image.frame(code: code, unit: 3))
        // A str claiming 2^62 characters, last in memory: read up to the bound (which memory
        // cuts), never allocated at its size.
        let huge = image.str("abc")
        image.put(1 << 62, at: huge + 16)
        image.put(huge, at: code + image.offsets.codeFilename)
        let frame = try XCTUnwrap(Self.read(image).threads.first?.frames.first)
        XCTAssertEqual(frame.function, String(repeating: "x", count: 1024) + "…")
        XCTAssertEqual(frame.file, PythonStackReader.unreadable)  // 1024 bytes past "abc" are not there
    }

    func testLineTablesThatLie() throws {
        let tables: [(String, [UInt8])] = [
            ("malformed", [0x05, 0x80]),  // no high bit
            ("ends before", PythonImage.lineTable([(1, 0)])),  // covers unit 0 only
            ("malformed", [0x80 | 13 << 3, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41]),  // a varint that never ends
            ("malformed", [0x80 | 14 << 3 | 7, 0x02]),  // long form cut
        ]
        for (expected, table) in tables {
            var image = PythonImage(.python311)
            let code = image.code(name: "f", qualifiedName: "f", file: "/f.py", firstLine: 1, lineTable: table)
            image.thread(nativeID: 1, frame: image.frame(code: code, unit: 3))
            let thread = try XCTUnwrap(Self.read(image).threads.first)
            XCTAssertEqual(thread.frames.map(\.line), [nil])
            XCTAssertTrue(thread.problem?.contains(expected) == true, "\(expected): \(String(describing: thread.problem))")
        }
        // A line table claiming 2^63 bytes, and an instruction far outside its code.
        var image = PythonImage(.python311)
        let code = image.code(name: "f", qualifiedName: "f", file: "/f.py", firstLine: 1, lineTable: Self.table)
        let table = image.u64(at: code + image.offsets.codeLinetable)
        image.put(1 << 63, at: table + 16)
        let other = image.code(name: "g", qualifiedName: "g", file: "/g.py", firstLine: 1, lineTable: Self.table)
        let frame = image.frame(code: other, unit: 3)
        image.put(UInt64.max - 1, at: frame + image.offsets.frameInstruction)
        image.thread(nativeID: 1, frame: image.frame(code: code, unit: 3, previous: frame))
        let thread = try XCTUnwrap(Self.read(image).threads.first)
        XCTAssertEqual(thread.frames.map(\.line), [nil, nil])
        XCTAssertTrue(thread.problem?.contains("co_linetable unreadable") == true, "\(String(describing: thread.problem))")
        XCTAssertTrue(
            thread.problem?.contains("g: the instruction is not in its code") == true, "\(String(describing: thread.problem))")
    }

    /// The long and one-line location forms, and a frame not yet started (skipped, as
    /// CPython's tracebacks skip it).
    func testLocationFormsAndIncompleteFrames() throws {
        var image = PythonImage(.python311)
        // Unit 0-1: one-line form +2 (line 3); 2-3: long form -1 (line 2), columns; 4: short form.
        let table: [UInt8] = [0x80 | 12 << 3 | 1, 0, 4, 0x80 | 14 << 3 | 1, 0x03, 0x00, 0x05, 0x09, 0x80 | 0 << 3, 0x11]
        let code = image.code(name: "f", qualifiedName: "f", file: "/f.py", firstLine: 1, lineTable: table)
        var previous: UInt64 = 0
        for unit in [4, 2, 1] { previous = image.frame(code: code, unit: unit, previous: previous) }
        let incomplete = image.frame(code: code, unit: 0, previous: previous)
        image.thread(nativeID: 1, frame: incomplete)
        let thread = try XCTUnwrap(Self.read(image).threads.first)
        XCTAssertEqual(thread.frames.map(\.line), [3, 2, 2])
        XCTAssertNil(thread.problem)
    }

    func testDebugOffsetsThatLie() {
        var image = Self.interpreter(.python313).image
        image.put(1 << 40, at: image.runtime + 40)  // runtime_state.interpreters_head
        let stacks = Self.read(image)
        XCTAssertEqual(stacks.threads, [])
        XCTAssertEqual(stacks.notes, ["_Py_DebugOffsets: runtime_state.interpreters_head is past any structure's size"])
        let cut = PythonImage(.python313)
        let short = PythonStackReader.read(
            memory: RegionMemory(regions: [MemoryRegion(start: cut.runtime, bytes: Array(cut.bytes.prefix(100)))]),
            runtimeAddress: cut.runtime, versionHex: cut.versionHex)
        XCTAssertEqual(short.notes, ["_Py_DebugOffsets cut short"])
    }

    func testByteBudget() {
        var limits = PythonStackReader.Limits()
        limits.totalBytes = 600
        let stacks = Self.read(Self.interpreter(.python311).image, limits: limits)
        XCTAssertTrue(stacks.notes.contains("stopped after reading 600 bytes of the process"), "\(stacks.notes)")
    }

    /// Within every count, a hostile state may still cost time (1024 thread states sharing a
    /// chain of 4096 frames): the reader stops at its time limit, and says so.
    func testTimeBudget() throws {
        var image = PythonImage(.python311)
        let code = image.code(name: "deep", qualifiedName: "deep", file: "/deep.py", firstLine: 1, lineTable: Self.table)
        let chain = FrameChain(start: 0x1_0000_0000, count: 1_000_000, code: code, offsets: image.offsets)
        image.thread(nativeID: 7, frame: chain.start)
        var limits = PythonStackReader.Limits()
        limits.nanoseconds = 0
        let stacks = PythonStackReader.read(
            memory: LayeredMemory([image.memory, chain]), runtimeAddress: image.runtime, versionHex: image.versionHex,
            limits: limits)
        XCTAssertTrue(stacks.notes.contains("stopped after 0 ms of reading the process"), "\(stacks.notes)")
        XCTAssertEqual(stacks.threads.first?.frames ?? [], [])
    }

    /// Limits of zero or less stop the reader where they apply, and do not trap.
    func testLimitsOfZeroOrLess() throws {
        for value in [0, -1] {
            for flavor in [PythonImage.Flavor.python311, .python313] {
                let image = Self.interpreter(flavor).image
                var counts = PythonStackReader.Limits()
                (counts.interpreters, counts.threads, counts.framesPerThread, counts.totalFrames) = (value, value, value, value)
                let none = Self.read(image, limits: counts)
                XCTAssertEqual(none.threads, [])
                XCTAssertTrue(none.notes.first?.contains("more than \(value) interpreters") == true, "\(none.notes)")
                var sizes = PythonStackReader.Limits()
                (sizes.stringBytes, sizes.lineTableBytes) = (value, value)
                let frame = try XCTUnwrap(Self.read(image, limits: sizes).threads.first?.frames.first)
                XCTAssertEqual(frame.function, "…")
                XCTAssertNil(frame.line)
                var codes = PythonStackReader.Limits()
                codes.codeObjects = value
                let thread = try XCTUnwrap(Self.read(image, limits: codes).threads.first)
                XCTAssertEqual(thread.frames.first?.function, PythonStackReader.unreadable)
                XCTAssertTrue(
                    thread.problem?.contains("code objects: not decoded") == true, "\(String(describing: thread.problem))")
            }
        }
    }

    // MARK: The fuzz target's seeds

    static let seedDirectory = TestSupport.repositoryRoot + "/Tests/Fuzz/seeds/python"

    /// Tests/Fuzz/seeds/python is what PythonImage writes: checked here, rewritten with
    /// CRASHPORT_WRITE_SEEDS=1 when the builder changes.
    func testSeedsAreTheImages() throws {
        let write = ProcessInfo.processInfo.environment["CRASHPORT_WRITE_SEEDS"] == "1"
        for (name, flavor) in [("built-3.11", PythonImage.Flavor.python311), ("built-3.13", .python313)] {
            let input = Self.interpreter(flavor).image.fuzzInput
            let path = Self.seedDirectory + "/" + name
            if write {
                try FileManager.default.createDirectory(atPath: Self.seedDirectory, withIntermediateDirectories: true)
                try Data(input).write(to: URL(fileURLWithPath: path))
            }
            XCTAssertEqual(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))), input, name)
            XCTAssertEqual(FuzzTarget.pythonBase, PythonImage.base)
            FuzzTarget.python.run(input)
        }
    }
}

/// `count` frames at `start`, 128 bytes apart, each the previous of the one before, all running
/// `code` at unit 3: memory made up as it is read, so a million frames cost nothing to build.
struct FrameChain: MemoryReader {
    let start: UInt64
    let count: UInt64
    let code: UInt64
    let offsets: PythonImage.Offsets

    func readUpTo(from address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard address >= start, (address - start) / 128 < count else { return 0 }
        let index = (address - start) / 128
        var frame = [UInt8](repeating: 0, count: 128)
        frame.put(code, at: Int(offsets.frameCode), size: 8)
        frame.put(index + 1 < count ? start + (index + 1) * 128 : 0, at: Int(offsets.framePrevious), size: 8)
        frame.put(code + offsets.codeAdaptive + 6, at: Int(offsets.frameInstruction), size: 8)
        let offset = Int((address - start) % 128)
        let copied = min(buffer.count, 128 - offset)
        frame.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<offset + copied])) }
        return copied
    }
}
