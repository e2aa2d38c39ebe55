// End-to-end: how `crashport run` splits its own options from the program's command line,
// with the real executable. Help and unknown options before the program are crashport's;
// everything from the program on (or after `--`) is the program's, `--help` included.

import Foundation
import TestSupport
import XCTest

final class CommandLineTests: XCTestCase {
    /// `crashport run ARGS...` with the stub from this tree and a fresh reports directory.
    func crashportRun(_ arguments: [String]) throws -> RunResult {
        let reports = TestSupport.temporaryDirectory("cli")
        defer { try? FileManager.default.removeItem(atPath: reports) }
        return try TestSupport.run(
            [TestSupport.crashport, "run", "--reports", reports] + arguments,
            environment: ["CRASHPORT_STUB": try TestSupport.stub()])
    }

    /// A program that prints each of its arguments in brackets.
    let echoArguments = ["/bin/sh", "-c", "printf '[%s]' \"$@\"", "sh"]

    /// crashport links FoundationEssentials, never full Foundation: that would bring ICU's 34 MB
    /// of tables into the release binary, which a cold `symbolicate` reads from disk and a sidecar
    /// maps. The debug build links the Swift libraries dynamically, so what any module imports
    /// shows in its needed libraries.
    func testTheWatcherLinksNoFullFoundation() throws {
        let needed = try TestSupport.run(["readelf", "-d", TestSupport.crashport]).stdout
        XCTAssertTrue(needed.contains("libFoundationEssentials.so"), needed)
        for library in ["libFoundation.so", "libFoundationInternationalization.so", "lib_FoundationICU.so"] {
            XCTAssertFalse(needed.contains("[\(library)]"), "crashport links \(library)")
        }
    }

    func testHelpBeforeTheProgramPrintsRunsHelp() throws {
        for flag in ["--help", "-h"] {
            for arguments in [[flag], [flag, "--", "/bin/true"], ["--no-ptrace", flag]] {
                let result = try crashportRun(arguments)
                XCTAssertEqual(result.status, .exited(0), "\(arguments): \(result.stderr)")
                XCTAssertTrue(result.stdout.contains("USAGE: crashport run"), "\(arguments): \(result.stdout)")
                XCTAssertTrue(result.stdout.contains("--max-reports"), result.stdout)
                XCTAssertFalse(result.stderr.contains("command not found"), result.stderr)
            }
        }
    }

    func testHelpAfterTheProgramIsTheProgramsArgument() throws {
        let afterTerminator = try crashportRun(["--"] + echoArguments + ["--help", "-h"])
        XCTAssertEqual(afterTerminator.status, .exited(0), afterTerminator.stderr)
        XCTAssertEqual(afterTerminator.stdout, "[--help][-h]")

        let withoutTerminator = try crashportRun(echoArguments + ["--help"])
        XCTAssertEqual(withoutTerminator.status, .exited(0), withoutTerminator.stderr)
        XCTAssertEqual(withoutTerminator.stdout, "[--help]")

        let options = try crashportRun(["--no-ptrace", "--"] + echoArguments + ["--bogus", "--reports", "x"])
        XCTAssertEqual(options.status, .exited(0), options.stderr)
        XCTAssertEqual(options.stdout, "[--bogus][--reports][x]")
    }

    func testUnknownOptionBeforeTheProgramIsAUsageError() throws {
        let marker = TestSupport.temporaryDirectory("cli-marker") + "/ran"
        defer { try? FileManager.default.removeItem(atPath: (marker as NSString).deletingLastPathComponent) }
        let program = ["/bin/sh", "-c", "touch '\(marker)'"]
        for option in ["--bogus", "-x"] {
            let result = try crashportRun([option, "--"] + program)
            XCTAssertEqual(result.status, .exited(64), "\(option): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("unknown option '\(option)'"), result.stderr)
            XCTAssertFalse(result.stderr.contains("command not found"), result.stderr)
            XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "\(option): the program must not run")
        }
        // The same words after `--` or after the program are passed on.
        let passed = try crashportRun(["--"] + program + ["--bogus"])
        XCTAssertEqual(passed.status, .exited(0), passed.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: marker))
    }

    func testUnknownOptionSaysHowToPassItToTheProgram() throws {
        let result = try crashportRun(["--bogus", "prog"])
        XCTAssertEqual(result.status, .exited(64), result.stderr)
        XCTAssertTrue(result.stderr.contains("unknown option '--bogus'"), result.stderr)
        XCTAssertTrue(result.stderr.contains("-- PROGRAM --bogus"), result.stderr)
    }

    /// Two real crashes in a fresh reports directory, ids oldest first.
    func twoReports() throws -> (directory: String, ids: [String]) {
        let directory = TestSupport.temporaryDirectory("cli-reports")
        for _ in 0..<2 {
            let run = try TestSupport.crashportRun(["/bin/sh", "-c", "kill -SEGV $$"], reports: directory)
            XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        }
        let ids = try FileManager.default.contentsOfDirectory(atPath: directory).filter { !$0.hasPrefix(".") }.sorted()
        XCTAssertEqual(ids.count, 2, "\(ids)")
        return (directory, ids)
    }

    func show(_ arguments: [String], environment: [String: String]? = nil) throws -> RunResult {
        try TestSupport.run([TestSupport.crashport, "show"] + arguments, environment: environment)
    }

    /// The report a `show` printed, from the crash log's `Report:` line.
    func shownID(_ result: RunResult) -> String? {
        result.stdout.split(separator: "\n").first { $0.hasPrefix("Report:") }?.split(separator: " ").last.map(String.init)
    }

    func testShowAcceptsAPathAPrefixAndLatest() throws {
        let (reports, ids) = try twoReports()
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let (older, newer) = (ids[0], ids[1])
        let common = String(zip(older, newer).prefix { $0 == $1 }.map(\.0))
        let uniquePrefix = String(older.prefix(common.count + 1))

        // A path names its own directory: no --reports needed.
        for reference in [reports + "/" + older, reports + "/" + older + "/", reports + "/" + older + "/event.json"] {
            let result = try show([reference])
            XCTAssertEqual(result.status, .exited(0), "\(reference): \(result.stderr)")
            XCTAssertEqual(shownID(result), older, reference)
        }
        for (reference, expected) in [(uniquePrefix, older), ("latest", newer), ("last", newer), (older, older)] {
            let result = try show(["--reports", reports, reference])
            XCTAssertEqual(result.status, .exited(0), "\(reference): \(result.stderr)")
            XCTAssertEqual(shownID(result), expected, reference)
        }
        let json = try show(["--reports", reports, "--format", "json", "latest"])
        XCTAssertEqual(json.status, .exited(0), json.stderr)
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        XCTAssertEqual(object?["id"] as? String, newer)
        // $CRASHPORT_REPORTS is where --reports is not given.
        let fromEnvironment = try show(["latest"], environment: ["CRASHPORT_REPORTS": reports])
        XCTAssertEqual(shownID(fromEnvironment), newer, fromEnvironment.stderr)
    }

    func testShowAmbiguousPrefixAndMiss() throws {
        let (reports, ids) = try twoReports()
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let common = String(zip(ids[0], ids[1]).prefix { $0 == $1 }.map(\.0))

        let ambiguous = try show(["--reports", reports, common])
        XCTAssertEqual(ambiguous.status, .exited(1), ambiguous.stderr)
        XCTAssertTrue(ambiguous.stderr.contains("2 reports in \(reports)"), ambiguous.stderr)
        XCTAssertTrue(ambiguous.stderr.contains(ids[0]) && ambiguous.stderr.contains(ids[1]), ambiguous.stderr)
        XCTAssertEqual(ambiguous.stdout, "")

        let miss = try show(["--reports", reports, "1999"])
        XCTAssertEqual(miss.status, .exited(1), miss.stderr)
        XCTAssertTrue(miss.stderr.contains("no report '1999' in \(reports)"), miss.stderr)
        XCTAssertTrue(miss.stderr.contains("nearest: \(ids[1]), \(ids[0])"), miss.stderr)

        let missingPath = try show([reports + "/" + ids[0] + "x/"])
        XCTAssertEqual(missingPath.status, .exited(1), missingPath.stderr)
        XCTAssertTrue(missingPath.stderr.contains("in \(reports) (nearest: "), missingPath.stderr)

        let nowhere = reports + "/nothing-here"
        let empty = try show(["--reports", nowhere, "latest"])
        XCTAssertEqual(empty.status, .exited(1), empty.stderr)
        XCTAssertTrue(empty.stderr.contains("in \(nowhere) (the directory does not exist)"), empty.stderr)
    }

    func testListWithNothingToList() throws {
        let empty = TestSupport.temporaryDirectory("cli-empty")
        defer { try? FileManager.default.removeItem(atPath: empty) }
        for (directory, said) in [(empty, "no reports in \(empty)\n"), (empty + "/missing", "(the directory does not exist)")] {
            for (arguments, stdout) in [([String](), ""), (["--format", "json"], "[]\n")] {
                let result = try TestSupport.run([TestSupport.crashport, "list", "--reports", directory] + arguments)
                XCTAssertEqual(result.status, .exited(0), result.stderr)
                XCTAssertEqual(result.stdout, stdout, "\(directory) \(arguments)")
                XCTAssertTrue(result.stderr.contains(said), result.stderr)
            }
        }
        let fromEnvironment = try TestSupport.run(
            [TestSupport.crashport, "list"], environment: ["CRASHPORT_REPORTS": empty + "/from-environment"])
        XCTAssertTrue(fromEnvironment.stderr.contains(empty + "/from-environment"), fromEnvironment.stderr)
    }

    func testListAsJSON() throws {
        let (reports, ids) = try twoReports()
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let result = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports, "--format", "json"])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        let array = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
        XCTAssertEqual(array.map { $0["id"] as? String }, [ids[1], ids[0]], "newest first")
        for object in array {
            XCTAssertEqual(object["path"] as? String, reports + "/" + (object["id"] as? String ?? ""))
            XCTAssertEqual(object["signal"] as? String, "SIGSEGV")
            XCTAssertEqual(object["kind"] as? String, "crash")
            XCTAssertNotNil(object["program"] as? String)
            XCTAssertNotNil(object["timestamp"] as? String)
            XCTAssertNotNil(object["top_frame"] as? String)
        }
    }

    func testVersion() throws {
        let result = try TestSupport.run([TestSupport.crashport, "--version"])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        XCTAssertTrue(result.stdout.hasPrefix("crashport "), result.stdout)
        XCTAssertEqual(result.stdout.split(separator: " ").last?.split(separator: ".").count, 3, result.stdout)
    }

    /// Every command's usage errors exit 64, the status the help's table gives.
    func testUsageErrorsExit64() throws {
        let nowhere = TestSupport.temporaryDirectory("cli-usage")
        defer { try? FileManager.default.removeItem(atPath: nowhere) }
        let cases: [[String]] = [
            ["--bogus"], ["nosuchcommand"],
            ["list", "--bogus"], ["list", "--max-reports", "3"], ["list", "--format", "yaml"],
            ["show"], ["show", "--bogus", "x"], ["show", "--max-size", "3", "x"], ["show", ""],
            ["stats", "--bogus"], ["stats", "--max-reports", "3"],
            ["doctor", "--bogus"],
            ["symbolicate"], ["symbolicate", "--bogus", "x"],
            ["watch", "--bogus"], ["watch", "--jobs", "0", "--socket", nowhere + "/s", "--reports", nowhere],
            ["run", "--reports", nowhere], ["run", "--reports", nowhere, "--timeout-ms", "0", "/bin/true"],
            ["run", "--reports", nowhere, "--forward-first", "SIGTERM", "/bin/true"],
        ]
        for arguments in cases {
            let result = try TestSupport.run([TestSupport.crashport] + arguments)
            XCTAssertEqual(result.status, .exited(64), "\(arguments): \(result.stderr)")
            XCTAssertFalse(result.stderr.isEmpty, "\(arguments)")
        }
        let help = try TestSupport.run([TestSupport.crashport, "help"])
        XCTAssertTrue(help.stdout.contains("64     usage error"), help.stdout)
    }

    /// Help texts are paragraphs that the argument parser wraps: no line of a command's overview
    /// or discussion is broken by hand where its next word would still have fit, at a terminal's
    /// 80 columns (the parser keeps lines under 80 characters). A row of a table (the exit
    /// statuses: a label, then two spaces or more) begins a line of its own.
    func testHelpTextsWrapAsParagraphs() throws {
        let commands: [[String]] = [
            [], ["run"], ["watch"], ["list"], ["show"], ["stats"], ["symbolicate"], ["upload"], ["consent"], ["send"],
            ["discard"], ["doctor"], ["host"], ["host", "status"], ["core-handler"],
        ]
        func indentation(_ line: Substring) -> Int { line.prefix { $0 == " " }.count }
        for command in commands {
            let result = try TestSupport.run([TestSupport.crashport] + command + ["--help"], environment: ["COLUMNS": "80"])
            XCTAssertEqual(result.status, .exited(0), "\(command): \(result.stderr)")
            let prose = result.stdout.components(separatedBy: "\nUSAGE:").first ?? ""
            let lines = prose.split(separator: "\n", omittingEmptySubsequences: false)
            for (line, next) in zip(lines, lines.dropFirst()) where !line.isEmpty && !next.isEmpty {
                let text = next.drop { $0 == " " }
                guard indentation(line) == indentation(next), !text.contains("  ") else { continue }
                let word = text.prefix { $0 != " " }
                XCTAssertGreaterThanOrEqual(
                    line.count + 1 + word.count, 80,
                    "crashport \(command.joined(separator: " ")) --help breaks a line by hand:\n\(line)\n\(next)")
            }
        }
    }

    /// A frame in a library without debug information (a function from its symbol table, no
    /// file) is listed with its module offset, which the report has: `libplugin.so+0x…`.
    func testListShowsTheModuleOffsetOfAFrameWithoutASourceFile() throws {
        let directory = TestSupport.temporaryDirectory("cli-plugin")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
        __attribute__((noinline)) void plugin_crash(volatile int *target) { *target = 42; }
        """.write(toFile: directory + "/plugin.c", atomically: true, encoding: .utf8)
        try """
        void plugin_crash(volatile int *target);
        int main(void) { plugin_crash(0); return 0; }
        """.write(toFile: directory + "/main.c", atomically: true, encoding: .utf8)
        _ = try TestSupport.compile(
            [directory + "/plugin.c"], output: directory + "/libplugin.so", flags: ["-O1", "-fPIC", "-shared"])
        let program = try TestSupport.compile(
            [directory + "/main.c"], output: directory + "/host", flags: ["-O1", "-g"],
            linkFlags: ["-L", directory, "-Wl,-rpath," + directory, "-lplugin"])
        let run = try TestSupport.crashportRun([program], reports: directory + "/reports")
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        let list = try TestSupport.run([TestSupport.crashport, "list", "--reports", directory + "/reports"])
        XCTAssertEqual(list.status, .exited(0), list.stderr)
        XCTAssertTrue(list.stdout.contains("plugin_crash (libplugin.so+0x"), list.stdout)
        XCTAssertFalse(list.stdout.contains("+?"), list.stdout)
    }

    /// `symbolicate --obj FILE --format json`: an array with one object per address (from the
    /// arguments), one object per line (from stdin), frames innermost first; a word that is no
    /// address is said so in its object.
    func testSymbolicateObjectAsJSON() throws {
        let directory = TestSupport.temporaryDirectory("cli-obj-json")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
        static inline __attribute__((always_inline)) int inner(int x) { return x * 3 + 1; }
        __attribute__((noinline)) int outer(int x) { return inner(x) + 2; }
        int main(int argc, char **argv) { (void)argv; return outer(argc); }
        """.write(toFile: directory + "/obj.c", atomically: true, encoding: .utf8)
        let object = try TestSupport.compile([directory + "/obj.c"], output: directory + "/obj", flags: ["-O2", "-g"])
        let symbols = try TestSupport.run(["nm", object]).stdout
        let outer = try XCTUnwrap(
            symbols.split(separator: "\n").first { $0.hasSuffix(" T outer") }?.split(separator: " ").first.map(String.init))
        let address = "0x" + outer

        let result = try TestSupport.run(
            [TestSupport.crashport, "symbolicate", "--obj", object, "--format", "json", address, "nonsense"])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        let array = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]], result.stdout)
        XCTAssertEqual(array.count, 2)
        XCTAssertEqual(array[0]["address"] as? String, "0x" + String(UInt64(outer, radix: 16) ?? 0, radix: 16))
        let frames = try XCTUnwrap(array[0]["frames"] as? [[String: Any]])
        XCTAssertEqual(frames.last?["function"] as? String, "outer", "\(frames)")
        XCTAssertEqual(frames.last?["inlined"] as? Bool, false)
        XCTAssertTrue((frames.last?["file"] as? String)?.hasSuffix("obj.c") == true, "\(frames)")
        XCTAssertNotNil(frames.last?["line"] as? Int)
        XCTAssertEqual(array[1]["address"] as? String, "nonsense")
        XCTAssertNotNil(array[1]["error"] as? String)

        let lines = try TestSupport.run(
            [TestSupport.crashport, "symbolicate", "--obj", object, "--format", "json"], input: address + "\n" + address + "\n")
        XCTAssertEqual(lines.status, .exited(0), lines.stderr)
        let objects = lines.stdout.split(separator: "\n")
        XCTAssertEqual(objects.count, 2, lines.stdout)
        for line in objects {
            let one = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            XCTAssertEqual(((one?["frames"] as? [[String: Any]])?.last)?["function"] as? String, "outer", String(line))
        }
    }

    func testSymbolicateDebugDirectoryAndReportDirectory() throws {
        let (reports, ids) = try twoReports()
        defer { try? FileManager.default.removeItem(atPath: reports) }
        let report = reports + "/" + ids[0]
        let missing = try TestSupport.run(
            [TestSupport.crashport, "symbolicate", "--debug-dir", reports + "/no-such-dir", report + "/minidump.dmp"])
        XCTAssertEqual(missing.status, .exited(1), missing.stderr)
        XCTAssertTrue(missing.stderr.contains("--debug-dir \(reports)/no-such-dir"), missing.stderr)
        XCTAssertEqual(missing.stdout, "")

        let stored = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report + "/event.json")))
        let timestamp = try XCTUnwrap((stored as? [String: Any])?["timestamp"] as? String)
        for directory in [report, report + "/"] {
            let result = try TestSupport.run([TestSupport.crashport, "symbolicate", "--format", "json", directory])
            XCTAssertEqual(result.status, .exited(0), "\(directory): \(result.stderr)")
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            XCTAssertEqual((object?["signal"] as? [String: Any])?["name"] as? String, "SIGSEGV", result.stdout)
            // Named as `crashport show` names the report: its id, and its time to the millisecond.
            XCTAssertEqual(object?["id"] as? String, ids[0])
            XCTAssertEqual(object?["timestamp"] as? String, timestamp)
        }
        let header = try TestSupport.run([TestSupport.crashport, "symbolicate", report + "/minidump.dmp"])
        XCTAssertEqual(header.status, .exited(0), header.stderr)
        XCTAssertTrue(header.stdout.contains("Report:    \(ids[0])\n"), header.stdout)
        XCTAssertTrue(header.stdout.contains("Time:      \(timestamp)\n"), header.stdout)
        // Without a minidump, the event.
        try FileManager.default.removeItem(atPath: report + "/minidump.dmp")
        let eventOnly = try TestSupport.run([TestSupport.crashport, "symbolicate", report])
        XCTAssertEqual(eventOnly.status, .exited(0), eventOnly.stderr)
        XCTAssertTrue(eventOnly.stdout.contains("SIGSEGV"), eventOnly.stdout)
        let empty = reports + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false)
        let neither = try TestSupport.run([TestSupport.crashport, "symbolicate", empty])
        XCTAssertEqual(neither.status, .exited(1), neither.stderr)
    }
}
