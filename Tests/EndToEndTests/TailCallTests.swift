// End-to-end: tail-call frames (issue 17). Programs built -O2 whose functions end in a jump
// crash under the real `crashport run`; the report must show the functions that left the stack
// by a tail call, as gdb shows them (gdb's `bt` is run on the same program when gdb is here),
// marked `tail_call`, and must not invent one where two tail-call paths lead to the crash. The
// same frames come back from `crashport symbolicate` of the report's event.json and minidump.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class TailCallTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("tailcall")

    func build(_ name: String, flags: [String] = ["-O2", "-g"], compiler: String = "cc", output: String? = nil) throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("tailcall/\(name).c")], output: Self.directory + "/" + (output ?? name), compiler: compiler,
            flags: flags)
    }

    /// One report of `program` crashing under `crashport run`.
    func crash(_ program: String) throws -> (run: CrashportRun, event: Event) {
        let run = try TestSupport.crashportRun([program])
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        guard run.reportIDs.count == 1 else { throw TestFailure("no report of \(program): \(run.result.stderr)") }
        return (run, try run.event())
    }

    /// gdb's backtrace at the crash of `program` (TestSupport.gdbBacktrace); nil, saying so,
    /// when gdb is not on this machine.
    func gdbBacktrace(_ program: String) throws -> [GDBFrame]? {
        guard TestSupport.which("gdb") != nil else {
            print("TailCallTests: gdb is not installed here; the frames are checked without comparing with gdb")
            return nil
        }
        return try TestSupport.gdbBacktrace([program])
    }

    /// A frame reduced to what gdb and crashport both say: the function (canonical), the
    /// file's last component and the line.
    struct Place: Equatable {
        var function: String
        var file: String?
        var line: Int?
    }

    /// A function's name without the aliases glibc gives it (__GI_raise is raise, cfree and
    /// __libc_free are free), so gdb's names and crashport's compare.
    static func canonical(_ name: String) -> String {
        var name = Substring(name)
        if name.hasPrefix("__GI_") { name = name.dropFirst(5) }
        name = name.drop { $0 == "_" }
        switch name {
        case "cfree", "libc_free": return "free"
        default: return String(name)
        }
    }

    static func baseName(_ path: String?) -> String? { path.map { ($0 as NSString).lastPathComponent } }

    /// crashport's frames, from the crash to main, must be gdb's: the same functions in the same
    /// order, each at the file and line gdb gives it.
    func assertEqualsGDBFrames(_ gdb: [GDBFrame], _ frames: [FrameRecord], _ label: String) {
        let ours = frames.map { frame in
            Place(function: Self.canonical(frame.function ?? "?"), file: Self.baseName(frame.file), line: frame.line)
        }
        let theirs = gdb.map { frame in
            var place = Place(function: Self.canonical(frame.function))
            // gdb's location is "file:line" (or "from LIBRARY" without debug information).
            if let location = frame.location, let colon = location.lastIndex(of: ":"),
                let line = Int(location[location.index(after: colon)...])
            {
                place.file = Self.baseName(String(location[..<colon]))
                place.line = line
            }
            return place
        }
        func toMain(_ places: [Place]) -> [Place] {
            guard let main = places.firstIndex(where: { $0.function == "main" }) else { return places }
            return Array(places[...main])
        }
        let (ourStack, gdbStack) = (toMain(ours), toMain(theirs))
        XCTAssertEqual(ourStack.map(\.function), gdbStack.map(\.function), "\(label): crashport's frames are not gdb's")
        for (our, their) in zip(ourStack, gdbStack) where their.line != nil && our.function == their.function {
            XCTAssertEqual(our, their, "\(label): gdb and crashport place \(their.function) differently")
        }
    }

    /// The frames of a report's crashed thread as compared across online and offline.
    static func projection(_ event: Event) -> [String] {
        (event.crashedThreadRecord?.frames ?? []).map { frame in
            [
                frame.pc?.description ?? "-", frame.function ?? "?", baseName(frame.file) ?? "-",
                frame.line.map(String.init) ?? "-", frame.inlined == true ? "inlined" : "", frame.tailCall == true ? "tail" : "",
            ].joined(separator: " ")
        }
    }

    // MARK: - A double free whose second free is a tail call

    func testDoubleFreeShowsTheFunctionThatTailCalledFree() throws {
        let program = try build("double_free")
        let (run, event) = try crash(program)
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        let frames = try XCTUnwrap(event.crashedThreadRecord?.frames)
        let names = frames.map { Self.canonical($0.function ?? "?") }

        // release_twice (double_free.c:9, the second free: a jump to free) between free and main.
        let release = try XCTUnwrap(names.firstIndex(of: "release_twice"), "no release_twice in \(names)")
        XCTAssertEqual(frames[release].tailCall, true)
        XCTAssertNil(frames[release].inlined)
        XCTAssertEqual(Self.baseName(frames[release].file), "double_free.c")
        XCTAssertEqual(frames[release].line, 9)
        XCTAssertEqual(names[release - 1], "free", "\(names)")
        XCTAssertEqual(names[release + 1], "main", "\(names)")
        XCTAssertNil(frames[release + 1].tailCall)
        // Its pc is the tail call's return address: in the program, right after the jump.
        XCTAssertEqual(frames[release].module, frames[release + 1].module)
        XCTAssertEqual(event.culprit?.function, "release_twice")

        // Inside libc, with its debug file: __pthread_kill_internal tail-called
        // __pthread_kill_implementation, as gdb shows from libc6-dbg's call sites.
        let libc = event.modules?.first { ($0.path ?? "").contains("/libc.so") }
        let debugFile = libc?.buildID.map { "/usr/lib/debug/.build-id/\($0.prefix(2))/\($0.dropFirst(2)).debug" }
        if let debugFile, FileManager.default.fileExists(atPath: debugFile) {
            let killInternal = try XCTUnwrap(
                names.firstIndex(of: "pthread_kill_internal"), "no __pthread_kill_internal in \(names)")
            XCTAssertEqual(frames[killInternal].tailCall, true)
            XCTAssertEqual(names[killInternal - 1], "pthread_kill_implementation", "\(names)")
            // Inlined into pthread_kill at the jump: named, as gdb names it, by the inlined
            // function alone, and raise is next.
            XCTAssertEqual(frames[killInternal].inlined, true)
            XCTAssertEqual(names[killInternal + 1], "raise", "\(names)")
            XCTAssertEqual(names.firstIndex(of: "raise").map { $0 > killInternal }, true, "\(names)")
        } else {
            print("TailCallTests: libc's debug file (libc6-dbg) is not here; libc's own tail calls are not checked")
        }

        if let gdb = try gdbBacktrace(program) {
            XCTAssertTrue(gdb.contains { $0.function == "release_twice" }, "gdb: \(gdb)")
            assertEqualsGDBFrames(gdb, frames, "double free")
        }

        // The crash log marks it.
        let shown = try TestSupport.run([TestSupport.crashport, "show", "--reports", run.reportsDirectory, run.reportIDs[0]])
        let line = shown.stdout.split(separator: "\n").first { $0.contains(" release_twice (/") }
        XCTAssertEqual(line?.hasSuffix("[tail call]"), true, shown.stdout)
    }

    // MARK: - A chain of tail calls in the program

    func testChainOfTailCallsIsPutBackWholeAndMarked() throws {
        var variants: [(label: String, compiler: String, flags: [String])] = [
            ("gcc DWARF 5", "cc", ["-O2", "-g"]), ("gcc DWARF 4 (GNU call sites)", "cc", ["-O2", "-gdwarf-4"]),
        ]
        if let clang = TestSupport.which("clang") {
            variants.append(("clang", clang, ["-O2", "-g", "-Wno-unknown-attributes"]))
        } else {
            print("TailCallTests: clang is not installed here; its call sites (DW_AT_call_pc) are not checked")
        }
        for (number, variant) in variants.enumerated() {
            let program = try build("chain", flags: variant.flags, compiler: variant.compiler, output: "chain-\(number)")
            // The compiler really ended first, second and third in jumps (else nothing is elided).
            let disassembly = try TestSupport.run(["objdump", "-d", "--no-show-raw-insn", program]).stdout
            for (function, callee) in [("first", "second"), ("second", "third"), ("third", "crash_here")] {
                XCTAssertTrue(
                    Self.body(of: function, in: disassembly).contains { $0.contains("jmp") && $0.contains("<\(callee)>") },
                    "\(variant.label): \(function) does not jump to \(callee)")
            }
            let (run, event) = try crash(program)
            defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
            let frames = try XCTUnwrap(event.crashedThreadRecord?.frames)
            let top = frames.prefix(5)
            XCTAssertEqual(top.map { $0.function ?? "?" }, ["crash_here", "third", "second", "first", "main"], variant.label)
            XCTAssertEqual(top.map { $0.tailCall == true }, [false, true, true, true, false], variant.label)
            XCTAssertEqual(top.map { $0.inlined == true }, [false, false, false, false, false], variant.label)
            // Each at its own tail call: the line of the `return` that jumps.
            XCTAssertEqual(top.map(\.line), [15, 21, 26, 31, 36], variant.label)
            XCTAssertEqual(event.signal?.name, "SIGSEGV")
            // gdb 13 reads GCC's call sites; clang's DWARF 5 tail calls carry only
            // DW_AT_call_pc, which gdb does not read (it shows crash_here, main).
            if variant.compiler == "cc", let gdb = try gdbBacktrace(program) {
                XCTAssertEqual(
                    gdb.prefix(5).map(\.function), ["crash_here", "third", "second", "first", "main"], variant.label)
                assertEqualsGDBFrames(gdb, frames, variant.label)
            }
        }
    }

    /// The instruction lines of `function` in objdump's disassembly.
    static func body(of function: String, in disassembly: String) -> [Substring] {
        let lines = disassembly.split(separator: "\n")
        guard let start = lines.firstIndex(where: { $0.hasSuffix(" <\(function)>:") }) else { return [] }
        return Array(lines[(start + 1)...].prefix { !$0.isEmpty && !$0.hasSuffix(">:") })
    }

    // MARK: - Two tail-call paths: nothing invented

    func testTwoTailCallPathsPutNoFrameBack() throws {
        let program = try build("ambiguous")
        let disassembly = try TestSupport.run(["objdump", "-d", "--no-show-raw-insn", program]).stdout
        for (function, callees) in [("dispatch", ["left", "right"]), ("left", ["crash_here"]), ("right", ["crash_here"])] {
            for callee in callees {
                XCTAssertTrue(
                    Self.body(of: function, in: disassembly).contains { $0.contains("jmp") && $0.contains("<\(callee)>") },
                    "\(function) does not jump to \(callee)")
            }
        }
        let (run, event) = try crash(program)
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        let frames = try XCTUnwrap(event.crashedThreadRecord?.frames)
        // dispatch → left → crash_here or dispatch → right → crash_here: either could be.
        XCTAssertEqual(frames.prefix(2).map { $0.function ?? "?" }, ["crash_here", "main"])
        XCTAssertFalse(frames.contains { $0.tailCall == true }, "\(Self.projection(event))")
        if let gdb = try gdbBacktrace(program) {
            XCTAssertEqual(gdb.prefix(2).map(\.function), ["crash_here", "main"])
        }
    }

    /// Where the two paths share their start (outer → dispatch → left or right → crash_here),
    /// only the shared part is put back, as gdb keeps it: outer, not dispatch, left or right.
    func testTwoTailCallPathsPutBackOnlyWhatTheyShare() throws {
        let program = try build("shared_prefix")
        let disassembly = try TestSupport.run(["objdump", "-d", "--no-show-raw-insn", program]).stdout
        XCTAssertTrue(Self.body(of: "outer", in: disassembly).contains { $0.contains("jmp") && $0.contains("<dispatch>") })
        let (run, event) = try crash(program)
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        let frames = try XCTUnwrap(event.crashedThreadRecord?.frames)
        XCTAssertEqual(frames.prefix(3).map { $0.function ?? "?" }, ["crash_here", "outer", "main"], "\(Self.projection(event))")
        XCTAssertEqual(frames.prefix(3).map { $0.tailCall == true }, [false, true, false])
        XCTAssertEqual(frames.filter { $0.tailCall == true }.count, 1, "\(Self.projection(event))")
        XCTAssertEqual(frames[1].line, 36)
        if let gdb = try gdbBacktrace(program) {
            XCTAssertEqual(gdb.prefix(3).map(\.function), ["crash_here", "outer", "main"])
            assertEqualsGDBFrames(gdb, frames, "shared prefix")
        }
    }

    // MARK: - Offline

    func testSymbolicateOfEventAndMinidumpGivesTheSameTailCallFrames() throws {
        for name in ["double_free", "chain"] {
            let program = try build(name, output: name + "-offline")
            let (run, event) = try crash(program)
            defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
            let online = Self.projection(event)
            XCTAssertTrue(online.contains { $0.hasSuffix(" tail") }, "\(name): \(online)")
            let directory = run.reportsDirectory + "/" + run.reportIDs[0]
            for file in ["event.json", "minidump.dmp"] {
                let result = try TestSupport.run([
                    TestSupport.crashport, "symbolicate", "--format", "json", directory + "/" + file,
                ])
                XCTAssertEqual(result.status, .exited(0), result.stderr)
                let offline = try Event.decode(Data(result.stdout.utf8))
                XCTAssertEqual(Self.projection(offline), online, "\(name) \(file)")
            }
        }
    }
}
