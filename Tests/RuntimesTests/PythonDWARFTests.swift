// The Python stack reader's DWARF route: the layout of an interpreter read from its debug
// information (LiveProcess' PythonDWARFLayouts over Symbolication's DWARFTypeLayout). pyenv's
// CPython 3.11 and 3.12 (whose libpython carries full DWARF, where the built-in offsets were
// read from) must give exactly the built-in offsets; Debian's debug build (python3.11-dbg:
// Py_DEBUG changes the structures, so the built-in offsets do not fit it) is read live through
// its debug file and compared with faulthandler, as PythonLiveTests does; answers that lack a
// member or do not fit the memory give way to the built-in offsets.

import Foundation
import LiveProcess
import ObjectFile
@testable import Runtimes
import Symbolication
import TestSupport
import XCTest

final class PythonDWARFTests: XCTestCase {
    /// pyenv's newest 3.`minor`, when installed: (interpreter, its libpython).
    static func pyenv(minor: Int) -> (python: String, library: String)? {
        let root = "/root/.pyenv/versions"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        guard let version = versions.sorted().last(where: { $0.hasPrefix("3.\(minor).") }) else { return nil }
        let python = "\(root)/\(version)/bin/python3.\(minor)"
        let library = "\(root)/\(version)/lib/libpython3.\(minor).so.1.0"
        guard FileManager.default.isExecutableFile(atPath: python), FileManager.default.fileExists(atPath: library) else {
            return nil
        }
        return (python, library)
    }

    /// Debian's debug build of 3.11 (package python3.11-dbg), when installed.
    static var debugBuild: String? {
        ["/usr/bin/python3.11d", "/usr/bin/python3.11-dbg"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    func testPyenvDWARFGivesTheBuiltInOffsets() throws {
        var checked = 0
        for minor in [11, 12] {
            guard let (_, library) = Self.pyenv(minor: minor) else {
                print("python-dwarf: no pyenv CPython 3.\(minor): not compared")
                continue
            }
            let query = try XCTUnwrap(PythonStructureQuery.forMinor(UInt32(minor)))
            let elf = try ELFFile(path: library)
            let start = ContinuousClock.now
            let answers = try XCTUnwrap(PythonDWARFLayouts.read(elf, query: query, locator: DebugFileLocator()))
            let elapsed = ContinuousClock.now - start
            print("python-dwarf: the first parse of \(library)'s DWARF took \(elapsed)")
            XCTAssertEqual(answers.source, "libpython3.\(minor).so.1.0")
            var layout = try query.layout(from: answers).get()
            XCTAssertEqual(layout.route, "DWARF of libpython3.\(minor).so.1.0")
            let builtIn = try XCTUnwrap(PythonLayout.builtIn(minor: UInt32(minor)))
            layout.route = builtIn.route
            XCTAssertEqual(layout, builtIn, "3.\(minor)")
            checked += 1
        }
        if checked == 0 { throw XCTSkip("no pyenv CPython 3.11 or 3.12 here") }
    }

    /// The answers a 3.11 default build's DWARF gives (pyenv's 3.11.7, the synthetic image's
    /// layout), with `changes`, as if read from "libfake.so".
    static func answers311(_ changes: [String: UInt64] = [:]) throws -> PythonStructureAnswers {
        let known: [String: UInt64] = [
            "_PyRuntimeState.interpreters.head": 40, "_PyRuntimeState.ceval.gil.last_holder": 368,
            "_PyRuntimeState.ceval.gil.locked": 376, "PyInterpreterState.next": 0, "PyInterpreterState.threads.head": 16,
            "PyThreadState.next": 8, "PyThreadState.interp": 16, "PyThreadState.native_thread_id": 160,
            "PyThreadState.cframe": 56, "_PyCFrame.current_frame": 8, "_PyInterpreterFrame.f_code": 32,
            "_PyInterpreterFrame.previous": 48, "_PyInterpreterFrame.prev_instr": 56, "_PyInterpreterFrame.owner": 69,
            "_PyInterpreterFrame.is_entry": 68, "PyCodeObject.co_filename": 112, "PyCodeObject.co_name": 120,
            "PyCodeObject.co_qualname": 128, "PyCodeObject.co_linetable": 136, "PyCodeObject.co_firstlineno": 72,
            "PyCodeObject.co_code_adaptive": 184, "PyCodeObject._co_firsttraceable": 168, "PyObject.ob_type": 8,
            "PyTypeObject.tp_name": 24, "PyASCIIObject.length": 16, "PyASCIIObject.state": 32,
            "sizeof(PyASCIIObject)": 48, "sizeof(PyCompactUnicodeObject)": 72, "PyBytesObject.ob_base.ob_size": 16,
            "PyBytesObject.ob_sval": 32,
        ].merging(changes) { $1 }
        let query = try XCTUnwrap(PythonStructureQuery.forMinor(11))
        XCTAssertEqual(Set(query.members.map(\.description)), Set(known.keys))
        var values: [PythonStructureQuery.Member: UInt64] = [:]
        for member in query.members { values[member] = known[member.description] }
        return PythonStructureAnswers(source: "libfake.so", values: values)
    }

    /// The synthetic 3.11 interpreter with each thread state's `interp` 8 bytes further on:
    /// what a build whose PyThreadState differs looks like to the built-in offsets.
    static func shiftedImage() -> PythonImage {
        var (image, main, worker) = PythonSyntheticTests.interpreter(.python311)
        for state in [main, worker] {
            image.put(0, at: state + 16)
            image.put(image.interpreter, at: state + 24)
        }
        return image
    }

    func testDWARFReadsWhatTheBuiltInOffsetsDoNotFit() throws {
        let image = Self.shiftedImage()
        var asked = 0
        let answers = try Self.answers311(["PyThreadState.interp": 24])
        let stacks = PythonStackReader.read(
            memory: image.memory, runtimeAddress: image.runtime, versionHex: image.versionHex,
            dwarfLayout: { query in
                asked += 1
                XCTAssertEqual(query.minor, 11)
                return answers
            })
        XCTAssertEqual(asked, 1)
        XCTAssertEqual(stacks.layout, "DWARF of libfake.so")
        XCTAssertEqual(stacks.threads.map { $0.frames.map(\.function) }, [["parse_row", "load", "<module>"], ["𝔣𝔫"]])
        XCTAssertEqual(stacks.threads.first?.holdsGIL, true)
        // Why the built-in offsets were not used.
        XCTAssertEqual(stacks.notes.count, 1, "\(stacks.notes)")
        XCTAssertTrue(stacks.notes.first?.hasPrefix("built-in 3.11 offsets do not fit") == true, "\(stacks.notes)")
        // Without DWARF, nothing is read (as before).
        let without = PythonStackReader.read(memory: image.memory, runtimeAddress: image.runtime, versionHex: image.versionHex)
        XCTAssertEqual(without.threads, [])
    }

    func testDWARFNotAskedWhenTheBuiltInOffsetsFit() throws {
        let image = PythonSyntheticTests.interpreter(.python311).image
        var asked = 0
        let stacks = PythonStackReader.read(
            memory: image.memory, runtimeAddress: image.runtime, versionHex: image.versionHex,
            dwarfLayout: { _ in
                asked += 1
                return nil
            })
        XCTAssertEqual(asked, 0)
        XCTAssertEqual(stacks.layout, "built-in 3.11 offsets")
        XCTAssertEqual(stacks.notes, [])
        // First in the order, and then it is the route.
        let first = PythonStackReader.read(
            memory: image.memory, runtimeAddress: image.runtime, versionHex: image.versionHex,
            dwarfLayout: { _ in try? Self.answers311() }, dwarfOrder: .beforeBuiltIn)
        XCTAssertEqual(first.layout, "DWARF of libfake.so")
        XCTAssertEqual(first.threads.count, 2)
        XCTAssertEqual(first.notes, [])
    }

    /// DWARF answers that do not fit, or lack a member, give way to the built-in offsets, with a note.
    func testDWARFThatDoesNotFitGivesWay() throws {
        let image = PythonSyntheticTests.interpreter(.python311).image
        let wrong = try Self.answers311(["PyThreadState.interp": 24])
        let stacks = PythonStackReader.read(
            memory: image.memory, runtimeAddress: image.runtime, versionHex: image.versionHex,
            dwarfLayout: { _ in wrong }, dwarfOrder: .beforeBuiltIn)
        XCTAssertEqual(stacks.layout, "built-in 3.11 offsets")
        XCTAssertEqual(stacks.threads.count, 2)
        XCTAssertTrue(stacks.notes.first?.hasPrefix("DWARF of libfake.so do not fit") == true, "\(stacks.notes)")
        var lacking = try Self.answers311()
        lacking.values = lacking.values.filter { $0.key.path != "cframe" }
        let shifted = Self.shiftedImage()
        let none = PythonStackReader.read(
            memory: shifted.memory, runtimeAddress: shifted.runtime, versionHex: shifted.versionHex,
            dwarfLayout: { _ in lacking })
        XCTAssertEqual(none.threads, [])
        XCTAssertEqual(none.layout, "built-in 3.11 offsets")
        XCTAssertTrue(none.notes.contains("DWARF of libfake.so: no PyThreadState.cframe"), "\(none.notes)")
    }

    /// Answers that lack a member, or give one past any structure's size, make no layout.
    func testIncompleteAnswersMakeNoLayout() throws {
        guard let (_, library) = Self.pyenv(minor: 11) else { throw XCTSkip("no pyenv CPython 3.11 here") }
        let query = try XCTUnwrap(PythonStructureQuery.forMinor(11))
        var answers = try XCTUnwrap(
            PythonDWARFLayouts.read(try ELFFile(path: library), query: query, locator: DebugFileLocator()))
        answers.values[PythonStructureQuery.Member(type: "PyThreadState", path: "cframe")] = nil
        guard case .failure(let missing) = query.layout(from: answers) else { return XCTFail("a layout without cframe") }
        XCTAssertEqual(missing.member.description, "PyThreadState.cframe")
        // An offset past any structure is refused too.
        answers.values[PythonStructureQuery.Member(type: "PyThreadState", path: "cframe")] = 1 << 40
        if case .success = query.layout(from: answers) { XCTFail("an offset of 2^40 taken") }
    }
}

/// The live reads through DWARF, with PythonLiveTests' child and comparison.
extension PythonLiveTests {
    func testPyenv311ReadLiveThroughDWARF() throws {
        guard let (python, _) = PythonDWARFTests.pyenv(minor: 11) else {
            print("python-dwarf: no pyenv CPython 3.11: skipped")
            throw XCTSkip("no pyenv CPython 3.11 here")
        }
        try check(
            python, dwarfLayout: PythonDWARFLayouts().answers(for:query:), dwarfOrder: .beforeBuiltIn,
            layout: "DWARF of libpython3.11.so.1.0")
    }

    func testDebugBuildReadLiveThroughDWARF() throws {
        guard let python = PythonDWARFTests.debugBuild else {
            print("python-dwarf: no /usr/bin/python3.11d (Debian's python3.11-dbg): skipped")
            throw XCTSkip("no python3.11-dbg here")
        }
        // The default order: the built-in offsets fit Debian's debug build, DWARF is not read.
        var asked = 0
        try check(
            python,
            dwarfLayout: { _, _ in
                asked += 1
                return nil
            }, layout: "built-in 3.11 offsets")
        XCTAssertEqual(asked, 0)
        let cache = PythonDWARFLayouts()
        try check(python, dwarfLayout: cache.answers(for:query:), dwarfOrder: .beforeBuiltIn, layout: "DWARF of python3.11d")
        // The second time from the cache.
        let object = try ELFFile(path: python)
        let module = LoadedModule(path: python, base: 0, size: 0, buildID: object.buildID, object: object)
        let query = try XCTUnwrap(PythonStructureQuery.forMinor(11))
        let parse = ContinuousClock.now
        let fresh = PythonDWARFLayouts.read(object, query: query, locator: DebugFileLocator())
        print("python-dwarf: the first parse of \(python)'s DWARF took \(ContinuousClock.now - parse)")
        let start = ContinuousClock.now
        let answers = try XCTUnwrap(cache.answers(for: module, query: query))
        XCTAssertEqual(fresh, answers)
        print("python-dwarf: \(python)'s answers from \(answers.source), cached, in \(ContinuousClock.now - start)")
        let layout = try query.layout(from: answers).get()
        // Debian's 3.11 debug build (Py_DEBUG without Py_TRACE_REFS) keeps the default build's
        // offsets of every structure read: the DWARF says so.
        XCTAssertEqual(layout.route, "DWARF of python3.11d")
    }
}
