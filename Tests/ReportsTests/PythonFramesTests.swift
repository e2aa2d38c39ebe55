// Python frames among native ones (PythonFrames): each eval-loop frame gets the run of Python
// frames it ran, innermost first; what finds no eval-loop frame follows the native frames; the
// program's own Python is in-app and leads the title, the interpreter's is not.

import ReportModel
import XCTest

@testable import Reports

final class PythonFramesTests: XCTestCase {
    func native(_ names: [String], module: String = "python3.11") -> [FrameRecord] {
        names.enumerated().map {
            FrameRecord(index: $0.offset, pc: HexAddress(UInt64(0x1000 + $0.offset)), module: module, function: $0.element)
        }
    }

    func python(_ frames: [(String, String, Int, Bool)], tid: Int32 = 7) -> PythonThread {
        PythonThread(
            threadID: ThreadID(tid), frames: frames.map { PythonFrame(function: $0.0, file: $0.1, line: $0.2, entry: $0.3) })
    }

    func testEachEvalLoopFrameGetsTheRunItRan() {
        let frames = native([
            "memmove", "ffi_call", "_PyEval_EvalFrameDefault", "_PyObject_Call", "_PyEval_EvalFrameDefault", "Py_RunMain",
        ])
        let thread = python([
            ("crash", "/app/demo.py", 5, false), ("handler", "/app/demo.py", 9, true), ("main", "/app/demo.py", 20, false),
            ("<module>", "/app/demo.py", 22, true),
        ])
        let (placed, unplaced) = PythonFrames.interleave(native: frames, python: thread)
        XCTAssertEqual(unplaced, 0)
        XCTAssertEqual(
            placed.map { $0.function ?? "?" },
            [
                "memmove", "ffi_call", "crash", "handler", "_PyEval_EvalFrameDefault", "_PyObject_Call", "main", "<module>",
                "_PyEval_EvalFrameDefault", "Py_RunMain",
            ])
        XCTAssertEqual(placed.map(\.index), Array(0..<10), "renumbered")
        XCTAssertEqual(placed[2].language, "python")
        XCTAssertNil(placed[2].pc)
        XCTAssertEqual(placed[2].line, 5)
    }

    func testRunsWithoutAnEvalLoopFrameFollowTheNativeFrames() {
        let frames = native(["memmove", "_PyEval_EvalFrameDefault"])
        let thread = python([("a", "/app/x.py", 1, true), ("b", "/app/x.py", 2, true)])
        let (placed, unplaced) = PythonFrames.interleave(native: frames, python: thread)
        XCTAssertEqual(unplaced, 1)
        XCTAssertEqual(placed.map { $0.function ?? "?" }, ["memmove", "a", "_PyEval_EvalFrameDefault", "b"])
        // No native frames at all: the Python frames alone.
        XCTAssertEqual(PythonFrames.interleave(native: [], python: thread).frames.map(\.function), ["a", "b"])
    }

    func testTheInterpretersOwnPythonIsNotInApp() {
        for file in [
            "/usr/lib/python3.11/threading.py", "/usr/local/lib/python3.12/asyncio/events.py",
            "/home/u/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py",
            "/srv/venv/lib/python3.11/site-packages/requests/api.py",
            "/usr/lib/python3/dist-packages/yaml/__init__.py", "<frozen importlib._bootstrap>",
        ] {
            XCTAssertFalse(InAppRules().isInApp(pythonFile: file), file)
        }
        for file in ["/srv/app/loader.py", "<string>", "/home/u/lib/pythonic/app.py", "main.py"] {
            XCTAssertTrue(InAppRules().isInApp(pythonFile: file), file)
        }
        XCTAssertTrue(
            InAppRules(inApp: ["*/site-packages/mine/*"]).isInApp(pythonFile: "/v/lib/python3.11/site-packages/mine/x.py"))
        XCTAssertFalse(InAppRules(notInApp: ["/srv/app/vendored/*"]).isInApp(pythonFile: "/srv/app/vendored/x.py"))
        // The interpreter's own executable is a runtime, wherever it is installed.
        XCTAssertFalse(
            InAppRules().isInApp(modulePath: "/home/u/.pyenv/versions/3.11.7/bin/python3.11", function: "PyEval_EvalCode"))
        XCTAssertTrue(InAppRules().isInApp(modulePath: "/srv/app/python_etl", function: "main"))
        // Its own extension modules, and installed packages', wherever it is installed.
        XCTAssertFalse(
            InAppRules().isInApp(
                modulePath: "/root/.pyenv/versions/3.11.7/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so",
                function: "string_at"))
        XCTAssertFalse(
            InAppRules().isInApp(
                modulePath: "/srv/venv/lib/python3.11/site-packages/numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so",
                function: "array_add"))
    }

    /// A crash in libc called from ctypes is titled by the program's Python frame; one in the
    /// program's own C extension by its C function, from the Python that called it.
    func testTitleAndSignatureFromThePrograms() {
        var event = Event()
        event.kind = .crash
        event.signal = SignalRecord(number: 11, name: "SIGSEGV", code: 1, faultAddress: HexAddress(0))
        event.crashedThread = ThreadID(7)
        event.modules = [ModuleRecord(path: "/usr/bin/python3.11"), ModuleRecord(path: "/lib/x86_64-linux-gnu/libc.so.6")]
        let thread = python([
            ("write_slot", "/usr/lib/python3.11/ctypes/__init__.py", 3, false), ("parse_row", "/srv/app/loader.py", 42, true),
        ])
        var frames = native(["__memmove_avx_unaligned_erms"], module: "libc.so.6") + native(["_PyEval_EvalFrameDefault", "main"])
        event.threads = [ThreadRecord(tid: ThreadID(7), crashed: true, frames: frames)]
        PythonFrames.place(PythonStacks(version: "3.11.7", layout: "test", threads: [thread]), into: &event)
        Culprit.mark(&event)
        XCTAssertEqual(event.culprit?.function, "parse_row")
        XCTAssertEqual(event.title, "SIGSEGV: segmentation fault at 0x0 in parse_row (loader.py:42)")
        XCTAssertEqual(event.signature, "parse_row", "the function it called is ctypes' Python, no C library function")

        // The program's C extension.
        frames =
            native(["ext_crash"], module: "ext.cpython-311-x86_64-linux-gnu.so") + native(["_PyEval_EvalFrameDefault", "main"])
        event.modules! += [ModuleRecord(path: "/srv/app/ext.cpython-311-x86_64-linux-gnu.so")]
        frames[0].file = "/srv/app/ext.c"
        frames[0].line = 10
        event.threads = [ThreadRecord(tid: ThreadID(7), crashed: true, frames: frames)]
        PythonFrames.place(PythonStacks(version: "3.11.7", layout: "test", threads: [thread]), into: &event)
        Culprit.mark(&event)
        XCTAssertEqual(event.title, "SIGSEGV: segmentation fault at 0x0 in ext_crash (ext.c:10) from parse_row (loader.py:42)")
    }

    func testAThreadStateOfNoThreadIsNoted() {
        var event = Event()
        event.threads = [ThreadRecord(tid: ThreadID(7), crashed: true, frames: native(["main"]))]
        PythonFrames.place(
            PythonStacks(version: "3.11.7", layout: "test", threads: [python([("a", "/x.py", 1, true)], tid: 99)]), into: &event)
        XCTAssertEqual(event.threads?[0].frames?.count, 1)
        XCTAssertTrue(event.notes?.first?.contains("native id 99") == true, "\(event.notes ?? [])")
    }
}
