// PythonStackReader over a real python3 child of the test: a script with a class, a call made
// through C (map) and a worker thread, each blocked at a known line, read from outside with the
// test's own credentials (ProcessMemory, no ptrace) while it waits. The frames read must be the
// ones CPython itself prints at the same moment: faulthandler, registered for SIGUSR1 with
// all_threads, dumps every thread's frames from the same thread states when the test signals it
// after reading. Debian's /usr/bin/python3 (3.11, libpython linked in) always; pyenv's 3.12
// and 3.13 builds (a separate libpython3.X.so) when this machine has them.

import BoundedBytes
import Foundation
import LiveProcess
import ObjectFile
import ReportModel
import Runtimes
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class PythonLiveTests: XCTestCase {
    static let script = """
        import faulthandler, json, os, signal, sys, threading
        faulthandler.register(signal.SIGUSR1, all_threads=True)

        class Loader:
            def parse_row(self, row):
                sys.stdin.read(1)  # MAIN-BLOCKS
                return row

            def load(self):
                return list(map(self.parse_row, [1]))  # LOAD-CALLS

        started = threading.Event()
        release = threading.Event()
        ids = {}

        def worker():
            ids["worker"] = [threading.get_ident(), threading.get_native_id()]
            started.set()
            release.wait()  # WORKER-BLOCKS

        thread = threading.Thread(target=worker)
        thread.start()
        started.wait()
        ids["main"] = [threading.get_ident(), threading.get_native_id()]
        print(json.dumps(ids), flush=True)
        Loader().load()
        release.set()
        thread.join()

        """

    /// The interpreters to try: Debian's always (skipped if absent), pyenv's when installed.
    static func interpreters() -> [String] {
        var found = ["/usr/bin/python3"].filter { FileManager.default.isExecutableFile(atPath: $0) }
        let pyenv = "/root/.pyenv/versions"
        for minor in [12, 13, 14] {
            let versions = (try? FileManager.default.contentsOfDirectory(atPath: pyenv)) ?? []
            if let version = versions.sorted().last(where: { $0.hasPrefix("3.\(minor).") }) {
                let path = "\(pyenv)/\(version)/bin/python3.\(minor)"
                if FileManager.default.isExecutableFile(atPath: path) { found.append(path) }
            }
        }
        return found
    }

    func testFramesMatchFaulthandler() throws {
        let interpreters = Self.interpreters()
        guard !interpreters.isEmpty else { throw XCTSkip("no python3 here") }
        for interpreter in interpreters {
            try check(interpreter)
        }
    }

    /// One interpreter: run, read, compare. With `dwarfLayout`, the reader is given it, and the
    /// layout must be `layout` (the route, or its start).
    func check(
        _ interpreter: String, dwarfLayout: ((LoadedModule, PythonStructureQuery) -> PythonStructureAnswers?)? = nil,
        dwarfOrder: PythonStackReader.DWARFOrder = .whenBuiltInFails, layout expectedLayout: String? = nil
    ) throws {
        let directory = TestSupport.temporaryDirectory("python-live")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let scriptPath = directory + "/loader.py"
        try Self.script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let lines = Self.script.split(separator: "\n", omittingEmptySubsequences: false)
        func line(_ marker: String) -> Int { (lines.firstIndex { $0.contains(marker) } ?? -1) + 1 }

        let child = Process()
        child.executableURL = URL(fileURLWithPath: interpreter)
        child.arguments = [scriptPath]
        let input = Pipe(), output = Pipe(), errors = Pipe()
        child.standardInput = input
        child.standardOutput = output
        child.standardError = errors
        try child.run()
        defer {
            if child.isRunning { kill(child.processIdentifier, SIGKILL) }
            child.waitUntilExit()
        }
        let ready = try XCTUnwrap(readLine(output.fileHandleForReading.fileDescriptor), "\(interpreter) never got ready")
        let ids = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(ready.utf8)) as? [String: [Int]])
        // The main thread's read has started once it printed; give it the moment to block.
        usleep(100_000)

        let pid = ProcessID(rawValue: child.processIdentifier)
        let memory = ProcessMemory(pid: pid)
        let modules = try Self.modules(pid: pid)
        let stacks = try XCTUnwrap(
            PythonStackReader.read(memory: memory, modules: modules, dwarfLayout: dwarfLayout, dwarfOrder: dwarfOrder),
            interpreter)

        // How long one read takes, for the report on this reader.
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            for _ in 0..<100 {
                _ = PythonStackReader.read(memory: memory, modules: modules, dwarfLayout: dwarfLayout, dwarfOrder: dwarfOrder)
            }
        }
        // The same without finding `_PyRuntime` among the modules' symbols: the walk alone.
        let module = try XCTUnwrap(modules.first { $0.object?.dataSymbolAddress(named: "_PyRuntime") != nil })
        let runtime = try XCTUnwrap(module.object?.dataSymbolAddress(named: "_PyRuntime")) &+ module.loadBias
        let versionAddress = try XCTUnwrap(module.object?.dataSymbolAddress(named: "Py_Version")) &+ module.loadBias
        let version = try memory.fetch(UInt32.self, from: versionAddress)
        let walk = clock.measure {
            for _ in 0..<100 { _ = PythonStackReader.read(memory: memory, runtimeAddress: runtime, versionHex: version) }
        }
        print(
            "python-live: \(interpreter) \(stacks.version) via \(stacks.layout): 100 reads in \(elapsed), the walk alone \(walk)")

        // What CPython says, at the same place.
        kill(child.processIdentifier, SIGUSR1)
        let expectedFrames = stacks.threads.reduce(0) { $0 + $1.frames.count }
        let dump = Self.readDump(errors.fileHandleForReading.fileDescriptor, frames: expectedFrames)
        try input.fileHandleForWriting.write(contentsOf: Data("x".utf8))
        try input.fileHandleForWriting.close()

        XCTAssertTrue(stacks.notes.isEmpty, "\(interpreter): \(stacks.notes)")
        let minor = stacks.version.split(separator: ".").dropFirst().first.map(String.init)
        XCTAssertTrue(interpreter.hasSuffix("python3") || interpreter.contains("3.\(minor ?? "?")"), stacks.version)
        if let expectedLayout {
            XCTAssertTrue(stacks.layout.hasPrefix(expectedLayout), "\(interpreter): \(stacks.layout)")
        } else {
            XCTAssertEqual(
                stacks.layout, Int(minor ?? "") ?? 0 >= 13 ? "_Py_DebugOffsets" : "built-in 3.\(minor ?? "") offsets")
        }
        XCTAssertEqual(stacks.threads.count, 2, "\(stacks.threads)")
        let mainID = try XCTUnwrap(ids["main"]), workerID = try XCTUnwrap(ids["worker"])
        let main = try XCTUnwrap(stacks.threads.first { $0.threadID?.rawValue == Int32(mainID[1]) }, "\(stacks.threads)")
        let worker = try XCTUnwrap(stacks.threads.first { $0.threadID?.rawValue == Int32(workerID[1]) }, "\(stacks.threads)")
        for thread in [main, worker] { XCTAssertNil(thread.problem, "\(interpreter): \(thread)") }

        // The main thread: parse_row (called from C by map: an entry frame), load, the module.
        XCTAssertEqual(main.frames.map(\.function), ["parse_row", "load", "<module>"], interpreter)
        XCTAssertEqual(main.frames.map(\.qualifiedName), ["Loader.parse_row", "Loader.load", "<module>"])
        XCTAssertEqual(main.frames.map(\.line), [line("MAIN-BLOCKS"), line("LOAD-CALLS"), line("Loader().load()")])
        XCTAssertEqual(main.frames.map(\.entry), [true, false, true], interpreter)
        XCTAssertTrue(main.frames.allSatisfy { $0.file == scriptPath })
        // The worker: blocked in threading's Event.wait, under the function the test wrote.
        XCTAssertEqual(worker.frames.first { $0.file == scriptPath }?.function, "worker")
        XCTAssertEqual(worker.frames.first { $0.file == scriptPath }?.line, line("WORKER-BLOCKS"))
        XCTAssertEqual(worker.frames.first?.qualifiedName, "Condition.wait")
        XCTAssertEqual(worker.frames.last?.function, "_bootstrap")
        XCTAssertEqual(worker.frames.last?.entry, true)

        // Every frame of every thread as faulthandler printed it (its thread ids are
        // threading.get_ident's).
        XCTAssertEqual(dump[mainID[0]]?.map(Frame.init), main.frames.map(Frame.init), interpreter)
        XCTAssertEqual(dump[workerID[0]]?.map(Frame.init), worker.frames.map(Frame.init), interpreter)
        // Only one thread can hold the GIL; neither does, both wait (3.11+ only marks it where cheap).
        XCTAssertLessThanOrEqual(stacks.threads.filter(\.holdsGIL).count, 1)
    }

    struct Frame: Equatable, CustomStringConvertible {
        var file: String
        var line: Int?
        var function: String
        init(_ frame: PythonFrame) { (file, line, function) = (frame.file, frame.line, frame.function) }
        init(_ parsed: (file: String, line: Int?, function: String)) { (file, line, function) = parsed }
        var description: String { "\(file):\(line.map(String.init) ?? "???") \(function)" }
    }

    /// The modules of the python process mapped from its maps, opened with ObjectFile as capture
    /// would: each file mapped at offset 0 once, its base the lowest such mapping.
    static func modules(pid: ProcessID) throws -> [LoadedModule] {
        // Read to its end (String(contentsOfFile:) stops at the first page of a /proc file, before
        // libpython when many extension modules are mapped below it, as with pyenv's 3.11).
        let handle = try XCTUnwrap(FileHandle(forReadingAtPath: "/proc/\(pid.rawValue)/maps"))
        defer { try? handle.close() }
        let maps = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        var modules: [LoadedModule] = []
        for mapping in MemoryMapping.parse(maps) where mapping.offset == 0 && mapping.path.hasPrefix("/") {
            guard !modules.contains(where: { $0.path == mapping.path }) else { continue }
            let object = try? ELFFile(path: mapping.path)
            let end = MemoryMapping.parse(maps).filter { $0.path == mapping.path }.map(\.end).max() ?? mapping.end
            modules.append(
                LoadedModule(
                    path: mapping.path, base: mapping.start, size: end - mapping.start, buildID: object?.buildID, object: object))
        }
        return modules
    }

    /// One line from `fd`, waiting at most 20 s.
    func readLine(_ fd: Int32) -> String? {
        var line: [UInt8] = []
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { return nil }
            guard poller.revents != 0 else { continue }
            var byte: UInt8 = 0
            guard Glibc.read(fd, &byte, 1) == 1 else { return nil }
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
        return nil
    }

    /// faulthandler's dump, by thread ident: read until it has `frames` frame lines (or 10 s
    /// passed), then parsed: "Thread 0x…" / "Current thread 0x…" headers, then
    /// `  File "F", line N in NAME` lines.
    static func readDump(_ fd: Int32, frames: Int) -> [Int: [(file: String, line: Int?, function: String)]] {
        var text: [UInt8] = []
        let deadline = Date().addingTimeInterval(10)
        func frameLines() -> Int { String(decoding: text, as: UTF8.self).components(separatedBy: "\n  File ").count - 1 }
        while Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, 100) > 0 {
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = Glibc.read(fd, &buffer, buffer.count)
                if count <= 0 { break }
                text += buffer[0..<count]
            } else if frameLines() >= frames, text.last == UInt8(ascii: "\n") {
                break
            }
        }
        var threads: [Int: [(file: String, line: Int?, function: String)]] = [:]
        var current: Int?
        for line in String(decoding: text, as: UTF8.self).split(separator: "\n") {
            if let range = line.range(of: "hread 0x") {
                let digits = line[range.upperBound...].prefix { $0.isHexDigit }
                current = Int(digits, radix: 16)
                if let current { threads[current] = [] }
            } else if let current, line.hasPrefix("  File \""), let quote = line.dropFirst(8).firstIndex(of: "\"") {
                let file = String(line[line.index(line.startIndex, offsetBy: 8)..<quote])
                let rest = line[quote...]
                let number = rest.range(of: ", line ").map { rest[$0.upperBound...].prefix { $0.isNumber } }.flatMap { Int($0) }
                let function = rest.range(of: " in ").map { String(rest[$0.upperBound...]) } ?? "?"
                threads[current, default: []].append((file, number, function))
            }
        }
        return threads
    }
}
