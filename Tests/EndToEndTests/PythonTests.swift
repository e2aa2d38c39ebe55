// End-to-end: Python programs crashing in native code (Tests/Fixtures/python/loader.py: ctypes,
// and crashext.c, a C extension built here), on the main thread and on a worker thread, under
// `crashport run`, the sidecar and the host level, with Debian's /usr/bin/python3.11 and with an
// interpreter built another way (pyenv's, where this machine has one). Each report's Python
// frames are checked function, file and line against what CPython's own faulthandler printed in
// the same run (`-X faulthandler`, which runs before the stub and hands the signal on), and, at
// the host level (no faulthandler: its re-raise is what the kernel would dump), against
// pystack's reading of the core crashport kept (`--keep-core`).

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A Python frame as both sides name it.
struct PythonLocation: Equatable, CustomStringConvertible {
    var function: String
    var file: String
    var line: Int
    var description: String { "\(function) (\(file):\(line))" }
}

enum PythonFixture {
    static let directory = TestSupport.temporaryDirectory("python")
    static let loader = TestSupport.fixture("python/loader.py")

    /// Debian's interpreter, and one built another way when PATH's python3 is one (pyenv's).
    static func interpreters() throws -> [String] {
        var found: [String] = []
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/python3.11") { found.append("/usr/bin/python3.11") }
        if let other = try? TestSupport.run(["python3", "-c", "import sys; print(sys.executable)"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines),
            !other.isEmpty, !other.hasPrefix("/usr/bin/"), !other.hasPrefix("/bin/")
        {
            found.append(other)
        } else {
            print("PythonTests: no python3 built another way on PATH (a pyenv's); Debian's alone is tried")
        }
        guard !found.isEmpty else { throw XCTSkip("no python3.11 here") }
        return found
    }

    /// crashext.c built for `python` (its headers and its extension suffix), in a directory of
    /// its own; the directory.
    static func crashext(for python: String) throws -> String {
        let info = try TestSupport.run([
            python, "-c",
            "import sysconfig; print(sysconfig.get_paths()['include']); print(sysconfig.get_config_var('EXT_SUFFIX'))",
        ])
        let lines = info.stdout.split(separator: "\n").map(String.init)
        guard lines.count == 2, FileManager.default.fileExists(atPath: lines[0] + "/Python.h") else {
            throw XCTSkip("\(python) has no Python.h (python3.11-dev): the C extension cannot be built")
        }
        let output = TestSupport.freshDirectory(in: directory, "ext-" + String(python.hashValue, radix: 36))
        _ = try TestSupport.compile(
            [TestSupport.fixture("python/crashext.c")], output: output + "/crashext" + lines[1],
            flags: ["-O0", "-g", "-shared", "-fPIC", "-I", lines[0]])
        return output
    }

    /// faulthandler's frames (innermost first) of the thread whose block names `function`, or
    /// of the current (crashed) thread when `function` is nil.
    static func faulthandler(_ stderr: String, threadRunning function: String? = nil) -> [PythonLocation] {
        let blocks = stderr.components(separatedBy: "\n\n")
        let block = blocks.first { block in
            guard block.contains("(most recent call first):") else { return false }
            guard let function else { return block.hasPrefix("Current thread ") || block.contains("\nCurrent thread ") }
            return block.contains(" in \(function)\n") || block.hasSuffix(" in \(function)")
        }
        return (block ?? "").split(separator: "\n").compactMap { line in
            // `  File "/path/x.py", line 20 in parse_row`
            let text = line.trimmingCharacters(in: .whitespaces)
            guard text.hasPrefix("File \""), let close = text.range(of: "\", line ") else { return nil }
            let file = String(text[text.index(text.startIndex, offsetBy: 6)..<close.lowerBound])
            let rest = text[close.upperBound...].split(separator: " ", maxSplits: 2)
            guard rest.count == 3, let line = Int(rest[0]), rest[1] == "in" else { return nil }
            return PythonLocation(function: String(rest[2]), file: file, line: line)
        }
    }

    /// The Python frames of a report's thread, innermost first.
    static func frames(_ thread: ThreadRecord?) -> [PythonLocation] {
        (thread?.frames ?? []).compactMap { frame in
            guard frame.language == "python", let function = frame.function, let file = frame.file, let line = frame.line
            else { return nil }
            return PythonLocation(function: function, file: file, line: line)
        }
    }

    /// The report's thread whose Python frames include `function`.
    static func thread(running function: String, in event: Event) -> ThreadRecord? {
        event.threads?.first { frames($0).contains { $0.function == function } }
    }
}

final class PythonTests: XCTestCase {
    /// ctypes and the C extension, on the main thread and a worker, under `crashport run`, for
    /// each interpreter: the report's Python frames are faulthandler's, function, file and line,
    /// placed among the native frames, and the title is the program's own frame.
    func testPythonFramesUnderRunMatchFaulthandler() throws {
        for python in try PythonFixture.interpreters() {
            let ext = try PythonFixture.crashext(for: python)
            for how in ["ctypes", "ext"] {
                for thread in ["main", "thread"] {
                    let label = "\(python) \(how) \(thread)"
                    let run = try TestSupport.crashportRun(
                        [python, "-X", "faulthandler", PythonFixture.loader, how, thread],
                        environment: ["CRASHPORT_TEST_EXT": ext])
                    defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
                    XCTAssertEqual(run.result.status, .signaled(SIGSEGV), "\(label): dies as without crashport")
                    guard run.reportIDs.count == 1 else {
                        XCTFail("\(label): one report: \(run.reportIDs)\n\(run.result.stderr)")
                        continue
                    }
                    let event = try run.event()
                    let expected = PythonFixture.faulthandler(run.result.stderr)
                    XCTAssertGreaterThanOrEqual(expected.count, 2, "\(label): faulthandler printed:\n\(run.result.stderr)")
                    XCTAssertEqual(PythonFixture.frames(event.crashedThreadRecord), expected, label)
                    // The idle thread's too.
                    XCTAssertEqual(
                        PythonFixture.frames(PythonFixture.thread(running: "idle", in: event)),
                        PythonFixture.faulthandler(run.result.stderr, threadRunning: "idle"), label)
                    check(event, how: how, thread: thread, label: label)
                }
            }
        }
    }

    /// What every report of the fixture says, however it was captured.
    func check(_ event: Event, how: String, thread: String, label: String) {
        let frames = event.crashedThreadRecord?.frames ?? []
        // The Python frames sit just above the eval loop that ran them.
        if let first = frames.firstIndex(where: { $0.language == "python" }) {
            let next = frames[first...].first { $0.language == nil }
            XCTAssertEqual(next?.function, "_PyEval_EvalFrameDefault", "\(label): \(frames.map { $0.function ?? "?" })")
        } else {
            XCTFail("\(label): no Python frame on the crashed thread: \(frames.map { $0.function ?? "?" })")
        }
        // Neither ctypes' string_at (a PYFUNCTYPE) nor the extension lets go of the GIL.
        XCTAssertEqual(event.crashedThreadRecord?.holdsGIL, true, label)
        XCTAssertEqual(event.threads?.filter { $0.holdsGIL == true }.count, 1, label)
        let parseRow = frames.first { $0.language == "python" && $0.function == "parse_row" }
        XCTAssertEqual(parseRow?.qualifiedName, "Loader.parse_row", label)
        XCTAssertEqual(parseRow?.inApp, true, label)
        XCTAssertEqual(frames.first { $0.file?.hasSuffix("/threading.py") == true }?.inApp ?? false, false, label)
        if how == "ctypes" {
            XCTAssertEqual(event.culprit?.function, "parse_row", label)
            XCTAssertEqual(event.title, "SIGSEGV: segmentation fault at 0x10 in parse_row (loader.py:20)", label)
            XCTAssertEqual(event.signature, "parse_row", label)
        } else {
            XCTAssertEqual(event.culprit?.function, "ext_store_record", label)
            XCTAssertEqual(
                event.title,
                "SIGSEGV: segmentation fault at 0x10 in ext_store_record (crashext.c:7) from parse_row (loader.py:19)",
                label)
        }
        if thread == "thread" {
            XCTAssertNotEqual(event.crashedThread?.rawValue, event.process?.pid?.rawValue, "\(label): the worker crashed")
        } else {
            XCTAssertEqual(event.crashedThread?.rawValue, event.process?.pid?.rawValue, "\(label): the main thread crashed")
        }
    }

    /// The sidecar (a root watcher serving every user, the stub preloaded): the same frames.
    func testPythonFramesUnderTheSidecar() throws {
        let python = try PythonFixture.interpreters()[0]
        let ext = try PythonFixture.crashext(for: python)
        let directory = TestSupport.freshDirectory(in: PythonFixture.directory, "sidecar")
        let sidecar = try SidecarProcess(directory: directory)
        defer { sidecar.stop() }
        var count = 0
        for (how, thread) in [("ctypes", "thread"), ("ext", "main")] {
            let result = try TestSupport.run(
                [python, "-X", "faulthandler", PythonFixture.loader, how, thread],
                environment: [
                    "LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket, "CRASHPORT_TEST_EXT": ext,
                ])
            XCTAssertEqual(result.status, .signaled(SIGSEGV))
            count += 1
            let events = try sidecar.waitForReports(count, uid: 0)
            let event = try XCTUnwrap(events.first { $0.process?.arguments?.suffix(2) == [how, thread] }, "\(events.count)")
            XCTAssertEqual(PythonFixture.frames(event.crashedThreadRecord), PythonFixture.faulthandler(result.stderr), how)
            check(event, how: how, thread: thread, label: "sidecar \(how) \(thread)")
        }
    }
}

/// The host level: no stub, the kernel's core stream; Python frames read while the kernel holds
/// the process, checked against faulthandler's and against pystack's reading of the kept core.
final class PythonHostLevelTests: HostLevelTestCase {
    func testPythonFramesAtTheHostLevelMatchPystack() throws {
        let directory = fresh("python")
        let sidecar = try hostSidecar(directory, arguments: ["--keep-core"])
        defer { sidecar.stop() }
        for python in try PythonFixture.interpreters() {
            for thread in ["main", "thread"] {
                let label = "host \(python) \(thread)"
                // No faulthandler here: it would re-raise the fault, and the kernel dumps that.
                let result = try TestSupport.run([python, PythonFixture.loader, "ctypes", thread])
                XCTAssertEqual(result.status, .signaled(SIGSEGV), label)
                // Other programs on the machine may crash meanwhile: this one's report, by its
                // arguments and interpreter, once complete.
                let executable = URL(fileURLWithPath: python).resolvingSymlinksInPath().path
                var found: Event?
                try waitUntil("\(label): its report; log:\n\(sidecar.log)", timeout: 60) {
                    found = (try? sidecar.events(uid: 0))?.first {
                        $0.process?.executable == executable && $0.process?.arguments?.suffix(2) == ["ctypes", thread]
                            && $0.stage != Event.capturedStage
                    }
                    return found != nil
                }
                let event = try XCTUnwrap(found)
                XCTAssertEqual(event.source, "host")
                check(event, thread: thread, label: label)
                try comparePystack(event, python: executable, sidecar: sidecar, label: label)
            }
        }
        XCTAssertEqual(sidecar.stop(), 0)
    }

    func check(_ event: Event, thread: String, label: String) {
        XCTAssertEqual(event.title, "SIGSEGV: segmentation fault at 0x10 in parse_row (loader.py:20)", label)
        XCTAssertEqual(event.crashedThreadRecord?.holdsGIL, true, label)
        let idle = PythonFixture.frames(PythonFixture.thread(running: "idle", in: event))
        XCTAssertEqual(idle.first { $0.function == "idle" }?.line, 25, "\(label): \(idle)")
    }

    /// pystack (tools/fetch-validators) on the core the sidecar kept: every thread's Python
    /// frames, function, file and line, are the report's.
    func comparePystack(_ event: Event, python: String, sidecar: SidecarProcess, label: String) throws {
        guard let pystack = TestSupport.pystack else {
            throw XCTSkip("pystack is not installed (tools/fetch-validators could not reach PyPI): the core cannot be compared")
        }
        guard let id = event.id else { return XCTFail("\(label): no id") }
        let report = sidecar.reportsDirectory(uid: 0) + "/" + id
        let core = report + "/core"
        XCTAssertEqual(
            try TestSupport.run(["/bin/sh", "-c", "zstd -q -d -c '\(report)/core.zst' > '\(core)'"]).status, .exited(0))
        defer { try? FileManager.default.removeItem(atPath: core) }
        let result = try TestSupport.run(
            ["python3", "-m", "pystack", "core", core, python, "--no-color"], environment: ["PYTHONPATH": pystack],
            timeout: 120)
        XCTAssertEqual(result.status, .exited(0), "\(label): pystack: \(result.stderr)")
        let theirs = Self.pystackThreads(result.stdout)
        XCTAssertGreaterThanOrEqual(theirs.count, 2, "\(label): pystack printed:\n\(result.stdout)")
        for (tid, frames) in theirs {
            let ours = PythonFixture.frames(event.threads?.first { $0.tid?.rawValue == tid })
            XCTAssertEqual(ours, frames, "\(label): thread \(tid)")
        }
    }

    /// pystack's "Traceback for thread TID …" blocks: each thread's frames, innermost first
    /// (pystack prints them outermost first).
    static func pystackThreads(_ text: String) -> [Int32: [PythonLocation]] {
        var threads: [Int32: [PythonLocation]] = [:]
        var current: Int32?
        for line in text.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("Traceback for thread ") {
                current = Int32(trimmed.dropFirst("Traceback for thread ".count).prefix { $0.isNumber })
                if let current { threads[current] = [] }
                continue
            }
            // `(Python) File "/path/x.py", line 20, in parse_row`
            guard let current, trimmed.hasPrefix("(Python) File \""), let close = trimmed.range(of: "\", line ") else { continue }
            let file = String(trimmed[trimmed.index(trimmed.startIndex, offsetBy: 15)..<close.lowerBound])
            let rest = trimmed[close.upperBound...]
            guard let comma = rest.range(of: ", in "), let number = Int(rest[..<comma.lowerBound]) else { continue }
            threads[current]?.insert(PythonLocation(function: String(rest[comma.upperBound...]), file: file, line: number), at: 0)
        }
        return threads
    }
}
