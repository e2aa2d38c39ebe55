// End-to-end: what a JVM's or Node's runtime says of its own crash, under `crashport run`.
//  - A HotSpot JVM that faults in C2-compiled Java (Tests/Fixtures/jvm/UnsafeCrash.java, no
//    native frame of the program's): its hs_err file attached, its problematic frame in the
//    title and in `crashport show`, and the crashed thread unwound through the JIT's frame.
//  - Node with --perf-basic-prof (and --interpreted-frames-native-stack, so that functions the
//    interpreter runs have code of their own to name) crashing in a native addon called from
//    named JavaScript functions (Tests/Fixtures/node): those functions named from its perf map
//    (language jit), and the unwind through V8's frames to node::Start. Then the addon's
//    napi_fatal_error under --report-on-fatalerror: Node's report attached, its message the
//    reason.
// Each skips, saying why, where no JDK, node or Node-API header is found.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class RuntimeCrashLogTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("runtime-logs")
    static let timeout: TimeInterval = 240

    func facts(_ run: CrashportRun) -> String {
        "\(run.result.status)\n--- stdout\n\(run.result.stdout.suffix(2000))\n--- stderr\n\(run.result.stderr.suffix(3000))"
    }

    // MARK: The JVM

    func testJVMCrashInCompiledJavaAttachesItsLogAndTitlesItsProblematicFrame() throws {
        guard let javac = TestSupport.which("javac"), let java = TestSupport.which("java") else {
            throw XCTSkip("no java and javac on PATH")
        }
        let classes = Self.directory + "/classes"
        let compiled = try TestSupport.run(
            [javac, "-nowarn", "-d", classes, TestSupport.fixture("jvm/UnsafeCrash.java")], timeout: Self.timeout)
        XCTAssertEqual(compiled.status, .exited(0), compiled.stderr)
        let errorFile = Self.directory + "/unsafe-hs_err-%p.log"
        let watched = try TestSupport.crashportRun(
            [java, "-XX:ErrorFile=" + errorFile, "-XX:-UsePerfData", "-Xmx64m", "-cp", classes, "UnsafeCrash"],
            timeout: Self.timeout)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.reportIDs.count, 1, facts(watched))
        guard watched.reportIDs.count == 1 else { return }
        let event = try watched.event()
        let pid = try XCTUnwrap(event.process?.pid)
        let written = errorFile.replacingOccurrences(of: "%p", with: String(pid.rawValue))
        defer { try? FileManager.default.removeItem(atPath: written) }

        // The log, found where -XX:ErrorFile put it, parsed and attached.
        let log = try XCTUnwrap(event.runtimeLogs?.first, "no runtime log: \(event.notes ?? [])")
        XCTAssertEqual(log.kind, "hs_err")
        XCTAssertEqual(log.path, written)
        let frame = try XCTUnwrap(log.problematicFrame)
        XCTAssertTrue(frame.hasPrefix("J ") && frame.hasSuffix(" UnsafeCrash.writeThrough(JI)V"), frame)
        XCTAssertTrue(log.frames?.contains { $0.contains("UnsafeCrash.main") } == true, "\(log.frames ?? [])")
        XCTAssertEqual(event.title?.hasSuffix(" in \(frame)"), true, event.title ?? "no title")
        let attachment = try XCTUnwrap(event.attachments?.first { $0.scope == AttachmentRecord.runtimeScope })
        XCTAssertEqual(attachment.path, written)
        let copy = try Data(
            contentsOf: URL(
                fileURLWithPath: watched.reportsDirectory + "/" + watched.reportIDs[0] + "/" + (attachment.file ?? "")))
        let original = try Data(contentsOf: URL(fileURLWithPath: written))
        XCTAssertFalse(copy.isEmpty)
        XCTAssertEqual(copy, original.prefix(copy.count), "the copy is the file as it was read")
        // HotSpot's error reporting catches its own secondary faults (it unblocks SIGSEGV in its
        // handler and installs another): under crashport too, so the log is whole and the JVM
        // ends as without crashport, by the abort that follows its log.
        XCTAssertTrue(
            String(decoding: original.suffix(64), as: UTF8.self).contains("END."),
            "the log is cut: \(String(decoding: original.suffix(500), as: UTF8.self))")
        XCTAssertEqual(watched.result.status, .signaled(SIGABRT), facts(watched))
        XCTAssertFalse(
            event.signal?.description?.contains("faulted again") == true, event.signal?.description ?? "no description")

        // `crashport show` shows it.
        let shown = try TestSupport.run(
            [TestSupport.crashport, "show", "--reports", watched.reportsDirectory, watched.reportIDs[0]], timeout: Self.timeout)
        XCTAssertTrue(shown.stdout.contains("Problematic frame: \(frame)"), shown.stdout)
        XCTAssertTrue(shown.stdout.contains("[the runtime's crash log]"), shown.stdout)

        // The fault's pc is in the JIT's code: the unwind goes on from it to the thread's start.
        let functions = event.crashedFunctions
        XCTAssertTrue(functions.contains("JavaMain"), "\(functions)")
    }

    // MARK: Node

    struct Node {
        var node: String
        var addon: String
        var app: String
    }

    /// node, and the addon built against its Node-API headers, once per test process.
    func node() throws -> Node {
        guard let node = TestSupport.which("node") else { throw XCTSkip("no node on PATH") }
        let include = ["/usr/include/node", "/usr/local/include/node"].first {
            FileManager.default.fileExists(atPath: $0 + "/node_api.h")
        }
        guard let include else { throw XCTSkip("no node_api.h in /usr/include/node or /usr/local/include/node") }
        let addon = Self.directory + "/addon.node"
        if !FileManager.default.fileExists(atPath: addon) {
            _ = try TestSupport.compile(
                [TestSupport.fixture("node/addon.c")], output: addon,
                flags: ["-O1", "-g", "-fno-omit-frame-pointer", "-shared", "-fPIC", "-I", include])
        }
        return Node(node: node, addon: addon, app: TestSupport.fixture("node/app.js"))
    }

    /// Node's flags: its perf map, with the interpreter's functions in it; V8's own log (which
    /// --perf-basic-prof turns on) in the test's directory, not the working one.
    func nodeCommand(_ node: Node, _ how: String, extra: [String] = []) -> [String] {
        [
            node.node, "--perf-basic-prof", "--interpreted-frames-native-stack", "--logfile=\(Self.directory)/v8-\(how).log",
            "--no-logfile-per-isolate",
        ] + extra + [node.app, node.addon, how]
    }

    func testNodeJavaScriptFramesAreNamedFromItsPerfMap() throws {
        let node = try node()
        let watched = try TestSupport.crashportRun(nodeCommand(node, "crash"), timeout: Self.timeout)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.reportIDs.count, 1, facts(watched))
        guard watched.reportIDs.count == 1 else { return }
        let event = try watched.event()
        if let pid = event.process?.pid { try? FileManager.default.removeItem(atPath: "/tmp/perf-\(pid.rawValue).map") }
        let frames = event.crashedThreadRecord?.frames ?? []
        let functions = frames.map { $0.function ?? "?" }
        XCTAssertEqual(functions.first, "addon_write_null", "\(functions.prefix(12))")
        // The JavaScript functions, innermost first, named by V8 in the perf map.
        let jit = frames.filter { $0.language == "jit" }.compactMap(\.function)
        let inner = try XCTUnwrap(jit.firstIndex { $0.hasPrefix("JS:~crashInNative ") }, "\(functions)")
        let outer = try XCTUnwrap(jit.firstIndex { $0.hasPrefix("JS:~outerFunction ") }, "\(functions)")
        XCTAssertLessThan(inner, outer)
        XCTAssertEqual(jit.filter { $0.hasPrefix("JS:~crashInNative ") }.count, 4, "the recursion: \(jit)")
        XCTAssertTrue(jit[inner].contains(node.app + ":"), jit[inner])
        XCTAssertTrue(frames.filter { $0.language == "jit" }.allSatisfy { $0.module == nil && $0.inApp == true })
        // Through V8's frames (frame pointers in code no module holds) to the program's start.
        XCTAssertTrue(functions.contains("node::Start(int, char**)"), "\(functions)")
    }

    func testNodeFatalErrorAttachesItsReport() throws {
        let node = try node()
        let reports = Self.directory + "/node-reports"
        try? FileManager.default.removeItem(atPath: reports)
        try FileManager.default.createDirectory(atPath: reports, withIntermediateDirectories: true)
        let watched = try TestSupport.crashportRun(
            nodeCommand(node, "fatal", extra: ["--report-on-fatalerror", "--report-directory=" + reports]),
            timeout: Self.timeout)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.reportIDs.count, 1, facts(watched))
        guard watched.reportIDs.count == 1 else { return }
        let event = try watched.event()
        if let pid = event.process?.pid { try? FileManager.default.removeItem(atPath: "/tmp/perf-\(pid.rawValue).map") }
        let log = try XCTUnwrap(event.runtimeLogs?.first, "no runtime log: \(event.notes ?? [])")
        XCTAssertEqual(log.kind, "node-report")
        XCTAssertTrue(log.path?.hasPrefix(reports + "/report.") == true, log.path ?? "")
        XCTAssertEqual(log.problematicFrame, "fatal on purpose")
        XCTAssertTrue(log.frames?.first?.hasPrefix("at crashInNative ") == true, "\(log.frames ?? [])")
        XCTAssertEqual(event.reason, "fatal on purpose")
        let attachment = try XCTUnwrap(event.attachments?.first { $0.scope == AttachmentRecord.runtimeScope })
        XCTAssertEqual(attachment.path, log.path)
        XCTAssertGreaterThan(attachment.copied ?? 0, 1000)
    }
}
