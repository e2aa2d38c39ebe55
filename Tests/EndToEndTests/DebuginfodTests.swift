// End-to-end: `crashport symbolicate --debuginfod`. A stripped program crashes under the real
// watcher; its debug file is served, as a debuginfod server lays it out
// (buildid/<hex>/debuginfo), by an HTTP server on 127.0.0.1 started here, and fetched by
// elfutils' own client (libdebuginfod) into its cache. Also: without --debuginfod nothing is
// asked; a served file of another build is refused; a server that is not there is said.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class DebuginfodTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("debuginfod")

    /// A stripped build of the crash corpus, its separate debug file, and its build-id.
    func strippedProgram(
        _ name: String, flags: [String] = ["-O1", "-g"]
    ) throws -> (binary: String, debug: String, buildID: String) {
        let binary = Self.directory + "/" + name
        _ = try TestSupport.compile([TestSupport.fixture("corpus/crash.c")], output: binary, flags: flags)
        for command in [["objcopy", "--only-keep-debug", binary, binary + ".debug"], ["strip", "--strip-all", binary]] {
            let result = try TestSupport.run(command)
            XCTAssertEqual(result.status, .exited(0), result.stderr)
        }
        return (binary, binary + ".debug", try TestSupport.buildID(of: binary))
    }

    /// An HTTP server on 127.0.0.1 over `root`; its port.
    func serve(_ root: String) throws -> (Process, Int) {
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            "import functools,http.server,sys;h=functools.partial(http.server.SimpleHTTPRequestHandler,directory=sys.argv[1]);h.log_message=lambda *a:None;s=http.server.HTTPServer(('127.0.0.1',0),h);print(s.server_address[1],flush=True);s.serve_forever()",
            root,
        ]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            throw TestFailure("the server did not start: \(line)")
        }
        return (process, port)
    }

    func symbolicate(_ event: String, servers: String, cache: String, _ extra: [String]) throws -> RunResult {
        try TestSupport.run(
            [TestSupport.crashport, "symbolicate", "--verbose"] + extra + [event],
            environment: ["DEBUGINFOD_URLS": servers, "DEBUGINFOD_CACHE_PATH": cache], timeout: 120)
    }

    /// A new directory laid out as a debuginfod server serves files: `debugFile` as the debug
    /// file of `buildID`.
    func tree(_ label: String, serving debugFile: String, as buildID: String) throws -> String {
        let root = Self.directory + "/\(label)-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: root + "/buildid/" + buildID, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: debugFile, toPath: root + "/buildid/\(buildID)/debuginfo")
        return root
    }

    func testDebugFileFetchedByBuildID() throws {
        let program = try strippedProgram("stripped")
        let run = try TestSupport.crashportRun([program.binary, "null"])
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let event = run.reportsDirectory + "/" + run.reportIDs[0] + "/event.json"
        XCTAssertFalse(try run.event().crashedThreadRecord?.frames?.contains { $0.function == "crash_null" } ?? true, "stripped")

        let (server, port) = try serve(tree("tree", serving: program.debug, as: program.buildID))
        defer { server.terminate() }
        let cache = Self.directory + "/cache-\(UUID().uuidString.prefix(6))"

        let without = try symbolicate(event, servers: "http://127.0.0.1:\(port)", cache: cache, [])
        XCTAssertFalse(without.stdout.contains("crash_null"), "nothing asked without --debuginfod: \(without.stdout)")

        let with = try symbolicate(event, servers: "http://127.0.0.1:\(port)", cache: cache, ["--debuginfod"])
        XCTAssertEqual(with.status, .exited(0), with.stderr)
        XCTAssertTrue(with.stdout.contains("crash_null (crash.c:"), with.stdout)
        XCTAssertTrue(with.stderr.contains("fetched by debuginfod into \(cache)/\(program.buildID)/debuginfo"), with.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(cache)/\(program.buildID)/debuginfo"), "the client's own cache")
        let doctor = try TestSupport.run(
            [TestSupport.crashport, "doctor", "--reports", Self.directory + "/doctor"],
            environment: ["DEBUGINFOD_URLS": "http://127.0.0.1:\(port)"])
        XCTAssertTrue(
            doctor.stdout.contains("debuginfod: crashport symbolicate --debuginfod asks http://127.0.0.1:\(port)"), doctor.stdout)
    }

    /// The watcher asks too, with --debuginfod, after the verdict: the report of a stripped
    /// program names its frames from the debug file fetched, and its notes say so; without the
    /// flag nothing is asked; without servers the flag is a usage error.
    func testWatcherAsksAfterTheVerdict() throws {
        let program = try strippedProgram("watched")
        let (server, port) = try serve(tree("tree", serving: program.debug, as: program.buildID))
        defer { server.terminate() }
        let environment = [
            "DEBUGINFOD_URLS": "http://127.0.0.1:\(port)",
            "DEBUGINFOD_CACHE_PATH": Self.directory + "/cache-\(UUID().uuidString.prefix(6))",
        ]
        let asked = try TestSupport.crashportRun([program.binary, "null"], options: ["--debuginfod"], environment: environment)
        defer { try? FileManager.default.removeItem(atPath: asked.reportsDirectory) }
        XCTAssertEqual(asked.result.status, .signaled(SIGSEGV), asked.result.stderr)
        let event = try asked.event()
        XCTAssertEqual(Array(event.crashedFunctions.prefix(4)), ["crash_null", "level_two", "level_one", "main"])
        XCTAssertTrue(
            (event.notes ?? []).contains {
                $0.hasPrefix("watched (build-id \(program.buildID)): debug file fetched by debuginfod into ")
            },
            "\(event.notes ?? [])")

        let plain = try TestSupport.crashportRun([program.binary, "null"], environment: environment)
        defer { try? FileManager.default.removeItem(atPath: plain.reportsDirectory) }
        XCTAssertNotEqual(try plain.event().crashedFunctions.first, "crash_null", "nothing asked without --debuginfod")

        let unset = try TestSupport.crashportRun(
            [program.binary, "null"], options: ["--debuginfod"], environment: ["DEBUGINFOD_URLS": ""])
        XCTAssertEqual(unset.result.status, .exited(64), unset.result.stderr)
    }

    func testAnotherBuildsFileOrNoServerIsSaid() throws {
        let program = try strippedProgram("refused")
        let other = try strippedProgram("other", flags: ["-O2", "-g"])  // another build-id
        XCTAssertNotEqual(program.buildID, other.buildID)
        let run = try TestSupport.crashportRun([program.binary, "null"])
        let event = run.reportsDirectory + "/" + run.reportIDs[0] + "/event.json"

        // A server that answers for this build-id with another build's debug file.
        let (server, port) = try serve(tree("lying", serving: other.debug, as: program.buildID))
        defer { server.terminate() }
        let lied = try symbolicate(
            event, servers: "http://127.0.0.1:\(port)", cache: Self.directory + "/cache-\(UUID().uuidString.prefix(6))",
            ["--debuginfod"])
        XCTAssertFalse(lied.stdout.contains("crash_null"), lied.stdout)
        XCTAssertTrue(lied.stderr.contains("with build-id \(other.buildID), not \(program.buildID): not used"), lied.stderr)

        // Nobody listening: said, and symbolicate still prints what it has.
        let down = try symbolicate(
            event, servers: "http://127.0.0.1:\(TestSupport.closedPort())",
            cache: Self.directory + "/cache-\(UUID().uuidString.prefix(6))", ["--debuginfod"])
        XCTAssertEqual(down.status, .exited(0), down.stderr)
        XCTAssertTrue(down.stderr.contains("debuginfod (http://127.0.0.1:"), down.stderr)

        let unset = try TestSupport.run(
            [TestSupport.crashport, "symbolicate", "--debuginfod", event], environment: ["DEBUGINFOD_URLS": ""])
        XCTAssertEqual(unset.status, .exited(64), unset.stderr)
    }
}
