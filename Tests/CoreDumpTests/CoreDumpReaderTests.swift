// The core stream reader on streams built byte by byte (TestSupport's CoreBytes), read a few
// bytes at a time as from a pipe: what it keeps of a well-formed core (the notes, each thread's
// stack from sp less the red zone to the end of its load, windows around registers, image
// pages), and that every lie a hostile stream can tell costs a note or a typed error, never a
// trap, a hang or memory beyond the limits.

import BoundedBytes
import CoreDump
import ReportModel
import TestSupport
import XCTest

final class CoreDumpReaderTests: XCTestCase {
    static let code: UInt64 = 0x4000_0000
    static let heap: UInt64 = 0x5555_0000_0000
    static let stack: UInt64 = 0x7FFD_0000_0000
    static let otherStack: UInt64 = 0x7FFC_0000_0000

    /// A pattern that says where each byte came from.
    static func pattern(_ count: Int, seed: UInt8) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) ^ seed } }

    /// Two threads (the crashing one first), a SIGSEGV, the program's code, heap and two stacks.
    static func core() -> CoreBytes {
        var core = CoreBytes()
        var fxsave = [UInt8](repeating: 0, count: 512)
        fxsave[0] = 0x7F  // fcw's low byte
        core.threads = [
            CoreBytes.Thread(
                tid: 100, signal: 11,
                registers: CoreBytes.registers([
                    "rip": code + 0x100, "rsp": stack + 0x3000, "rax": heap + 0x10, "rbx": heap + 0x1000, "rcx": 42,
                ]), fxsave: fxsave),
            CoreBytes.Thread(tid: 101, registers: CoreBytes.registers(["rip": code + 0x200, "rsp": otherStack + 0x1800])),
        ]
        core.siginfo = CoreBytes.siginfo(signal: 11, code: 1, address: 0xDEAD)
        core.psinfo = CoreBytes.prpsinfo(uid: 1000, gid: 100, pid: 100, parent: 1, command: "fixture", arguments: "fixture -x")
        core.auxv = [(9, code + 0x80), (33, 0)]
        core.file = CoreBytes.fileNote([(code, code + 0x1000, 0, "/usr/bin/fixture"), (heap, heap + 0x2000, 2, "/tmp/data")])
        core.loads = [
            CoreBytes.Load(address: code, bytes: pattern(0x1000, seed: 1), flags: 5),
            CoreBytes.Load(address: heap, bytes: pattern(0x2000, seed: 2)),
            CoreBytes.Load(address: heap + 0x10000, bytes: [], memorySize: 0x1000, flags: 0),
            CoreBytes.Load(address: otherStack, bytes: pattern(0x2000, seed: 3)),
            CoreBytes.Load(address: stack, bytes: pattern(0x4000, seed: 4)),
        ]
        return core
    }

    func read(_ bytes: [UInt8], limits: CoreDumpReader.Limits = CoreDumpReader.Limits(), chunk: Int = 13) throws -> CoreDump {
        let source = ChunkedSource(bytes, chunk: chunk)
        return try CoreDumpReader.read(from: { source.read(into: $0) }, limits: limits)
    }

    /// The slice of `load`'s bytes at addresses range.
    func bytes(_ core: CoreBytes, _ range: Range<UInt64>) -> [UInt8] {
        let load = core.loads.first { $0.address <= range.lowerBound && range.upperBound <= $0.address + UInt64($0.bytes.count) }!
        return Array(load.bytes[Int(range.lowerBound - load.address)..<Int(range.upperBound - load.address)])
    }

    func testReadsTheNotesAndKeepsStacksWindowsAndImagePages() throws {
        let core = Self.core()
        let stream = core.bytes()
        let dump = try read(stream)
        XCTAssertTrue(dump.complete, "\(dump.notes)")
        XCTAssertEqual(dump.notes, [])
        XCTAssertEqual(dump.bytesRead, UInt64(stream.count))
        XCTAssertEqual(dump.threads.map(\.tid), [100, 101])
        XCTAssertEqual(dump.threadCount, 2)
        XCTAssertEqual(dump.threads[0].signal, 11)
        XCTAssertEqual(dump.threads[0].registers.gpr, core.threads[0].registers.gpr)
        XCTAssertEqual(dump.threads[0].registers.fxsave.first, 0x7F)
        XCTAssertEqual(dump.threads[1].registers.fxsave, [])
        XCTAssertEqual(dump.signalInfo, CoreDump.SignalInfo(signal: 11, code: 1, faultAddress: 0xDEAD))
        XCTAssertEqual(
            dump.processInfo,
            CoreDump.ProcessInfo(
                state: "R", uid: 1000, gid: 100, pid: 100, parentPID: 1, command: "fixture", arguments: "fixture -x"))
        XCTAssertEqual(dump.auxiliaryValue(9), Self.code + 0x80)
        XCTAssertEqual(
            dump.files,
            [
                CoreDump.FileMapping(start: Self.code, end: Self.code + 0x1000, offset: 0, path: "/usr/bin/fixture"),
                CoreDump.FileMapping(start: Self.heap, end: Self.heap + 0x2000, offset: 0x2000, path: "/tmp/data"),
            ])
        XCTAssertEqual(dump.loads.count, 5)

        // Each stack from sp less the 128-byte red zone to the end of its load.
        let crashed = try XCTUnwrap(dump.threads[0].stack)
        XCTAssertEqual(crashed.start, Self.stack + 0x3000 - 128)
        XCTAssertEqual(crashed.bytes, bytes(core, (Self.stack + 0x3000 - 128)..<(Self.stack + 0x4000)))
        let other = try XCTUnwrap(dump.threads[1].stack)
        XCTAssertEqual(other.start, Self.otherStack + 0x1800 - 128)
        XCTAssertEqual(other.end, Self.otherStack + 0x2000)

        // 128 bytes each side of a register that points into a dumped load, clipped to it; the
        // two pcs' windows inside the code, rax's cut at the heap's start; rcx (42) points nowhere.
        let windows = dump.extraMemory.map { $0.start..<$0.end }
        XCTAssertEqual(
            windows,
            [
                (Self.code + 0x100 - 128)..<(Self.code + 0x100 + 128),
                Self.heap..<(Self.heap + 0x10 + 128),
                (Self.heap + 0x1000 - 128)..<(Self.heap + 0x1000 + 128),
                (Self.code + 0x200 - 128)..<(Self.code + 0x200 + 128),
            ])
        for region in dump.extraMemory { XCTAssertEqual(region.bytes, bytes(core, region.start..<region.end)) }
        // The first page of the file mapped from offset 0 (its build-id is there); the heap's
        // mapping is at a file offset, so none of it.
        XCTAssertEqual(dump.imageMemory.map { $0.start..<$0.end }, [Self.code..<(Self.code + 0x1000)])
        XCTAssertEqual(dump.imageMemory.first?.bytes, core.loads[0].bytes)

        // The maps a report uses where /proc is gone.
        let maps = MemoryMapping.parse(dump.mapsText)
        XCTAssertEqual(maps.map(\.start), [Self.code, Self.heap, Self.heap + 0x10000, Self.otherStack, Self.stack])
        XCTAssertEqual(maps.first?.path, "/usr/bin/fixture")
        XCTAssertEqual(maps.first?.executable, true)
        XCTAssertEqual(maps[1].offset, 0x2000)
    }

    func testTheSameFromAnyChunking() throws {
        let stream = Self.core().bytes()
        let whole = try read(stream, chunk: 1 << 20)
        for chunk in [1, 2, 3, 64, 4096] {
            XCTAssertEqual(try read(stream, chunk: chunk), whole, "chunk \(chunk)")
        }
        var limits = CoreDumpReader.Limits()
        limits.chunkSize = 1
        XCTAssertEqual(try read(stream, limits: limits), whole)
    }

    func testStacksAreCutAtTheirLimitsAndTheCapOnKeptBytes() throws {
        var limits = CoreDumpReader.Limits()
        limits.crashedThreadStack = 1000
        limits.threadStack = 100
        var dump = try read(Self.core().bytes(), limits: limits)
        XCTAssertEqual(dump.threads[0].stack?.bytes.count, 1000)
        XCTAssertEqual(dump.threads[1].stack?.bytes.count, 100)

        // The crashing thread's stack first, then its windows and the image pages: the other
        // thread's stack gets what is left.
        limits = CoreDumpReader.Limits()
        limits.keptBytes = 0x1080 + (256 + 0x90 + 256) + 0x1000 + 50
        dump = try read(Self.core().bytes(), limits: limits)
        XCTAssertEqual(dump.threads[0].stack?.bytes.count, 0x1080)
        XCTAssertEqual(dump.extraMemory.count, 3, "the crashing thread's windows, not the other's")
        XCTAssertEqual(dump.threads[1].stack?.bytes.count, 50)
        XCTAssertTrue(dump.notes.contains { $0.contains("thread 101's stack was cut") }, "\(dump.notes)")
        let kept =
            dump.threads.compactMap(\.stack).map(\.bytes.count).reduce(0, +)
            + (dump.extraMemory + dump.imageMemory).map(\.bytes.count).reduce(0, +)
        XCTAssertLessThanOrEqual(kept, limits.keptBytes)
    }

    /// A thread whose sp overflowed below its stack (into the guard gap) keeps the stack above.
    func testAnOverflowedStackIsFoundAboveItsGuard() throws {
        var core = Self.core()
        core.threads[0].registers["rsp"] = Self.stack - 4096
        let dump = try read(core.bytes())
        XCTAssertEqual(dump.threads[0].stack?.start, Self.stack)
        XCTAssertEqual(dump.threads[0].stack?.bytes.count, 0x4000)
    }

    // MARK: - Hostile streams

    func testEveryTruncationIsAnErrorOrANote() throws {
        let core = Self.core()
        let stream = core.bytes()
        let layout = core.layout
        let firstThreadEnd = layout.notes + CoreBytes.note(name: "CORE", type: 1, desc: CoreBytes.prstatus(core.threads[0])).count
        for length in stride(from: 0, to: stream.count, by: 1) {
            // Past the notes, a byte at a time is slow: every 61st, and each load's edges.
            if length > layout.loads[0] && length % 61 != 0 && !layout.loads.contains(length) { continue }
            let prefix = Array(stream[..<length])
            do {
                let dump = try read(prefix)
                XCTAssertGreaterThanOrEqual(length, firstThreadEnd, "a dump from \(length) bytes")
                XCTAssertFalse(dump.complete)
                XCTAssertEqual(dump.threads.first?.tid, 100)
                XCTAssertTrue(dump.notes.contains { $0.contains("stream ended") }, "\(length): \(dump.notes)")
                // Whatever was kept is the stream's own bytes.
                if let stack = dump.threads[0].stack {
                    XCTAssertEqual(stack.bytes, bytes(core, stack.start..<stack.end))
                }
            } catch let error as CoreDumpError {
                XCTAssertLessThan(length, firstThreadEnd, "\(length): \(error)")
                guard case .truncated = error else { return XCTFail("\(length): \(error)") }
            }
        }
        // Ending inside the crashing thread's stack keeps the part that came.
        let stackOffset = layout.loads[4] + 0x3000 - 128
        let dump = try read(Array(stream[..<(stackOffset + 100)]))
        XCTAssertEqual(dump.threads[0].stack?.bytes.count, 100)
        XCTAssertTrue(dump.notes.contains { $0.contains("thread 100's stack: 100 of") }, "\(dump.notes)")
    }

    func testHeadersThatAreNotAnX86CoreAreTypedErrors() {
        let stream = Self.core().bytes()
        func expect(_ patch: (inout [UInt8]) -> Void, _ check: (CoreDumpError) -> Bool, line: UInt = #line) {
            var bytes = stream
            patch(&bytes)
            XCTAssertThrowsError(try read(bytes), line: line) { error in
                XCTAssertTrue(check(error as! CoreDumpError), "\(error)", line: line)
            }
        }
        expect({ $0[0] = 0 }) { if case .unsupported = $0 { true } else { false } }
        expect({ $0[4] = 1 }) { if case .unsupported = $0 { true } else { false } }
        expect({ $0.put(u16: 2, at: 16) }) { if case .unsupported = $0 { true } else { false } }  // ET_EXEC
        expect({ $0.put(u16: 183, at: 18) }) { if case .unsupported = $0 { true } else { false } }  // EM_AARCH64
        expect({ $0.put(u16: 64, at: 54) }) { if case .malformed = $0 { true } else { false } }  // e_phentsize
        expect({ $0.put(u64: 8, at: 32) }) { if case .malformed = $0 { true } else { false } }  // e_phoff in the header
        expect({ $0.put(u32: 1, at: 64) }) { if case .malformed = $0 { true } else { false } }  // no PT_NOTE
        // The notes before the end of the program headers: cannot be read back.
        expect({ $0.put(u64: 64, at: 64 + 8) }) { if case .malformed = $0 { true } else { false } }
        // e_phnum 65535 that the stream does not hold.
        expect({
            $0.put(u16: 0xFFFF, at: 56); $0.put(u64: 64 + 56 * 1_000_000, at: 64 + 8)
        }) {
            if case .truncated = $0 { true } else { false }
        }
    }

    func testNotesThatLieAboutTheirSizesAreSkipped() throws {
        // An NT_PRSTATUS (the second thread's) whose n_descsz runs past its segment: the notes
        // stop there, the first thread and what came before stay.
        var core = Self.core()
        let lying = CoreBytes.note(name: "CORE", type: 1, desc: CoreBytes.prstatus(core.threads[1]), descSize: .max)
        core.threads.removeLast()
        core.extraNotes = [("CORE", 1, [])]
        var stream = core.bytes()
        let at = core.layout.notes + core.notes.count - 20  // the extra note's header
        stream.replaceSubrange(at..<(at + 20), with: lying.prefix(20))
        var dump = try read(stream)
        XCTAssertEqual(dump.threads.map(\.tid), [100])
        XCTAssertTrue(dump.notes.contains { $0.contains("says it has") }, "\(dump.notes)")
        XCTAssertTrue(dump.complete)

        // Descriptors of the wrong size for their type, an owner name of 2^32-1 bytes.
        core = Self.core()
        core.psinfo = [1, 2, 3]
        core.siginfo = [UInt8](repeating: 0, count: 127)
        core.extraNotes = [("CORE", 1, [UInt8](repeating: 0, count: 100)), ("LINUX", 0x202, [1, 2])]
        dump = try read(core.bytes())
        XCTAssertNil(dump.processInfo)
        XCTAssertNil(dump.signalInfo)
        XCTAssertEqual(dump.threads.count, 2)
        XCTAssertEqual(dump.threadCount, 3)
        XCTAssertTrue(dump.notes.contains { $0.contains("NT_PRSTATUS of 100 bytes") }, "\(dump.notes)")

        core = Self.core()
        core.extraNotes = [("CORE", 99, [1, 2, 3, 4])]
        stream = core.bytes()
        let named = core.layout.notes + core.notes.count - 24
        stream.put(u32: .max, at: named)  // n_namesz
        dump = try read(stream)
        XCTAssertEqual(dump.threads.count, 2)
        XCTAssertTrue(dump.notes.contains { $0.contains("says it has") }, "\(dump.notes)")
    }

    func testAnNTFileThatLiesAboutItsCountIsBounded() throws {
        var core = Self.core()
        core.file = CoreBytes.fileNote([(Self.code, Self.code + 0x1000, 0, "/usr/bin/fixture")], count: .max)
        var dump = try read(core.bytes())
        // As many triples as its bytes hold, and the paths after them.
        XCTAssertEqual(dump.files.map(\.path), ["/usr/bin/fixture"])
        XCTAssertTrue(dump.notes.contains { $0.contains("NT_FILE says") }, "\(dump.notes)")

        // Fewer paths than entries, a page offset past 2^64, an empty range.
        core.file = CoreBytes.fileNote(
            [(Self.code, Self.code + 0x1000, 0, "/a"), (Self.heap, Self.heap + 1, 1 << 60, "/b"), (5, 5, 0, "/c")])
        core.file!.removeLast(3)  // "/c\0"
        dump = try read(core.bytes())
        XCTAssertEqual(dump.files.map(\.path), ["/a"])
        XCTAssertTrue(dump.notes.contains { $0.contains("2 of its 3 paths") || $0.contains("paths") }, "\(dump.notes)")
    }

    func testSizesOf2To64AndLoadsOutOfOrderOrOverlapping() throws {
        let core = Self.core()
        var stream = core.bytes()
        let loadHeader = { (index: Int) in 64 + 56 * (1 + index) }
        // The code load says it is 2^64-1 bytes long: dropped with a note; the others are read.
        stream.put(u64: .max, at: loadHeader(0) + 32)
        var dump = try read(stream)
        XCTAssertTrue(dump.notes.contains { $0.contains("past 2^64") }, "\(dump.notes)")
        XCTAssertNotNil(dump.threads[0].stack)

        // The notes segment says 2^64-1 bytes: its notes are read to the stream's end, then it
        // ended inside them.
        stream = core.bytes()
        stream.put(u64: .max, at: 64 + 32)
        dump = try read(stream)
        XCTAssertTrue(dump.notes.contains { $0.contains("inside the notes") }, "\(dump.notes)")

        // The two stacks' headers swapped in order (their offsets too): read in stream order.
        stream = core.bytes()
        let a = loadHeader(3), b = loadHeader(4)
        let first = Array(stream[a..<(a + 56)]), second = Array(stream[b..<(b + 56)])
        stream.replaceSubrange(a..<(a + 56), with: second)
        stream.replaceSubrange(b..<(b + 56), with: first)
        dump = try read(stream)
        XCTAssertTrue(dump.notes.contains { $0.contains("not in their program headers' order") }, "\(dump.notes)")
        XCTAssertEqual(dump.threads[0].stack?.bytes.count, 0x1080)
        XCTAssertTrue(dump.complete)

        // The heap load claims the code's bytes (an offset already passed): its bytes past them
        // are all it gets; the windows into it are short.
        stream = core.bytes()
        stream.put(u64: UInt64(core.layout.loads[0] + 0x800), at: loadHeader(1) + 8)
        dump = try read(stream)
        XCTAssertTrue(dump.notes.contains { $0.contains("overlapped") }, "\(dump.notes)")
        XCTAssertEqual(dump.threads[0].stack?.bytes.count, 0x1080)
    }

    func testTensOfThousandsOfThreadsAreCountedPastTheCap() throws {
        var core = Self.core()
        let many = (0..<20_000).map {
            CoreBytes.Thread(tid: 1000 + Int32($0), registers: CoreBytes.registers(["rsp": Self.heap + 0x800]))
        }
        core.threads += many
        let dump = try read(core.bytes(), chunk: 4096)
        XCTAssertEqual(dump.threads.count, 4096)
        XCTAssertEqual(dump.threadCount, 20_002)
        XCTAssertTrue(dump.notes.contains { $0.contains("past the first 4096") }, "\(dump.notes)")
        // The heap's stacks overlap each other: each is kept, within the cap.
        XCTAssertEqual(dump.threads[2].stack?.start, Self.heap + 0x800 - 128)
        let kept = dump.threads.compactMap(\.stack).map(\.bytes.count).reduce(0, +)
        XCTAssertLessThanOrEqual(kept, CoreDumpReader.Limits().keptBytes)
    }

    func testExtendedNumberingTakesTheCountFromTheNotesOffset() throws {
        let core = Self.core()
        var stream = core.bytes()
        stream.put(u16: 0xFFFF, at: 56)
        let dump = try read(stream)
        XCTAssertEqual(dump.loads.count, 5)
        XCTAssertNotNil(dump.threads[0].stack)
    }

    func testTheFileDescriptorReaderReadsAPipe() throws {
        let stream = Self.core().bytes()
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let writeEnd = fds[1]
        let writer = Thread {
            _ = writeAll(writeEnd, stream)
            close(writeEnd)
        }
        writer.start()
        defer { close(fds[0]) }
        let dump = try CoreDumpReader.read(fileDescriptor: fds[0])
        XCTAssertEqual(dump.bytesRead, UInt64(stream.count))
        XCTAssertEqual(dump, try read(stream))
    }
}
