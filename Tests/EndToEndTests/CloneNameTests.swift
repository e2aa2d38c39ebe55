// End-to-end: GCC's clones and split parts are named as gdb and the DWARF name them (issue 33).
// A C program built -O2 crashes in `worker_loop.cold`, called from `handle.part.0`, called
// from `serve.constprop.0.isra.0`, under the real `crashport run`: the report's frames are
// worker_loop, handle, serve, as gdb's `bt` shows, name for name, each keeping the symbol that
// ran in `symbol`; so are its title, culprit and `crashport list` line, and the frames of
// `crashport symbolicate` of its minidump. Built without -g (a symbol table alone), the
// clone suffixes are dropped from the names and kept in `symbol` all the same.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class CloneNameTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("clones")

    /// The fixture built with `flags`, after checking that GCC really made the clones the test
    /// is about: their symbols are in the symbol table and not the plain functions'.
    func build(_ name: String, flags: [String]) throws -> String {
        let program = try TestSupport.compile(
            [TestSupport.fixture("clones/clones.c")], output: Self.directory + "/" + name, flags: flags)
        let symbols = try TestSupport.run(["nm", program]).stdout.split(separator: "\n").compactMap {
            $0.split(separator: " ").last.map(String.init)
        }
        for clone in Self.clones {
            XCTAssertTrue(symbols.contains(clone), "\(name): no \(clone) in the symbol table (GCC made other clones)")
        }
        XCTAssertFalse(symbols.contains("handle") || symbols.contains("serve"), "\(name): handle or serve was not cloned")
        return program
    }

    /// The clones on the crashing stack, innermost first.
    static let clones = ["worker_loop.cold", "handle.part.0", "serve.constprop.0.isra.0"]

    /// The crashed thread's frames up to main.
    static func toMain(_ frames: [FrameRecord]) -> [FrameRecord] {
        guard let main = frames.firstIndex(where: { $0.function == "main" }) else { return frames }
        return Array(frames[...main])
    }

    /// No frame's function keeps a clone suffix; each clone's frame keeps the symbol that ran.
    func assertNamedAsSource(_ event: Event, _ label: String) throws {
        let frames = Self.toMain(try XCTUnwrap(event.crashedThreadRecord?.frames, label))
        for frame in frames {
            let function = frame.function ?? "?"
            XCTAssertNil(CloneSuffixesCheck.suffix(of: function), "\(label): \(function) keeps a clone suffix")
        }
        let physical = frames.filter { $0.inlined != true }
        XCTAssertEqual(physical.map { $0.function ?? "?" }, ["worker_loop", "handle", "serve", "main"], label)
        XCTAssertEqual(physical.map(\.symbol), Self.clones + [nil], label)
        XCTAssertTrue(
            frames.filter { $0.inlined == true }.allSatisfy { $0.symbol == nil }, "\(label): an inlined frame has a symbol")
    }

    func testClonesAreNamedAsGDBAndTheDWARFNameThem() throws {
        let program = try build("clones-O2-g", flags: ["-O2", "-g"])
        // The fault is in the cold part: the crashing pc is inside worker_loop.cold.
        let disassembly = try TestSupport.run(["objdump", "-d", "--no-show-raw-insn", program]).stdout
        XCTAssertTrue(disassembly.contains("<worker_loop.cold>:"), "no worker_loop.cold in the disassembly")

        let run = try TestSupport.crashportRun([program])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let event = try run.event()
        XCTAssertEqual(event.signal?.name, "SIGSEGV")
        try assertNamedAsSource(event, "online")
        let frames = try XCTUnwrap(event.crashedThreadRecord?.frames)
        XCTAssertEqual(frames.first?.line, 39)

        // Name for name what gdb's bt shows (its inline frame of handle too), to main.
        if TestSupport.which("gdb") != nil {
            let reference = try TestSupport.gdbBacktrace([program])
            let gdbToMain =
                Array(reference.prefix { $0.function != "main" }) + reference.filter { $0.function == "main" }.prefix(1)
            XCTAssertEqual(gdbToMain.map(\.function), ["worker_loop", "handle", "handle", "serve", "main"], "gdb: \(reference)")
            XCTAssertEqual(Self.toMain(frames).map { $0.function ?? "?" }, gdbToMain.map(\.function))
            XCTAssertNil(GDBFrame.differences(reference, frames.map(\.function)))
        } else {
            print("CloneNameTests: gdb is not installed here; the names are checked without comparing with gdb")
        }

        // What reads `function` reads the source name: the title, the culprit, `list`.
        XCTAssertEqual(event.culprit?.function, "worker_loop")
        XCTAssertEqual(event.title?.contains("in worker_loop (clones.c:39)"), true, event.title ?? "no title")
        let list = try TestSupport.run([TestSupport.crashport, "list", "--reports", run.reportsDirectory])
        XCTAssertTrue(list.stdout.contains("worker_loop (clones.c:39)"), list.stdout)
        XCTAssertFalse(list.stdout.contains(".cold"), list.stdout)

        // The minidump, symbolicated offline, names them the same way.
        let json = try TestSupport.run([TestSupport.crashport, "symbolicate", "--format", "json", run.minidumpPath()])
        XCTAssertEqual(json.status, .exited(0), json.stderr)
        let offline = try Event.decode(Data(json.stdout.utf8))
        try assertNamedAsSource(offline, "offline")
        XCTAssertEqual(
            Self.toMain(offline.crashedThreadRecord?.frames ?? []).map(\.function), Self.toMain(frames).map(\.function))

        // The raw event keeps "symbol" only where it differs from "function".
        let raw = try String(contentsOfFile: run.reportsDirectory + "/" + run.reportIDs[0] + "/event.json", encoding: .utf8)
        XCTAssertTrue(raw.contains(#""symbol" : "worker_loop.cold""#), raw)
        XCTAssertFalse(raw.contains(#""symbol" : "main""#), raw)
    }

    func testSymbolTableOnlyDropsTheCloneSuffixes() throws {
        let program = try build("clones-O2", flags: ["-O2"])
        let run = try TestSupport.crashportRun([program])
        defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let event = try run.event()
        try assertNamedAsSource(event, "symbol table only")
        XCTAssertEqual(event.culprit?.function, "worker_loop")
        // gdb, from the same symbol table, shows the clones' names in its own way
        // (`worker_loop[cold]`, `handle.part`, `serve.constprop.0.isra`): ours are theirs
        // without the suffixes.
        if TestSupport.which("gdb") != nil {
            let reference = try TestSupport.gdbBacktrace([program])
            let gdbToMain =
                Array(reference.prefix { $0.function != "main" }) + reference.filter { $0.function == "main" }.prefix(1)
            let gdbNames = gdbToMain.map(\.function)
            XCTAssertEqual(gdbNames.count, 4, "gdb: \(reference)")
            XCTAssertTrue(gdbNames.prefix(3).allSatisfy { CloneSuffixesCheck.suffix(of: $0) != nil }, "gdb: \(reference)")
            let frames = Self.toMain(event.crashedThreadRecord?.frames ?? [])
            XCTAssertEqual(
                frames.map { $0.function ?? "?" },
                gdbNames.map { String($0.replacingOccurrences(of: "[cold]", with: ".cold").split(separator: ".")[0]) })
        } else {
            print("CloneNameTests: gdb is not installed here; the names are checked without comparing with gdb")
        }
    }
}

/// The test's own reading of GCC's suffixes, independent of crashport's (CloneSuffixes).
enum CloneSuffixesCheck {
    static func suffix(of name: String) -> String? {
        for marker in ["[cold]", ".cold", ".hot", ".constprop", ".isra", ".part", ".lto_priv", ".localalias"]
        where name.contains(marker) {
            return marker
        }
        return nil
    }
}
