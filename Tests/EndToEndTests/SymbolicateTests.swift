// End-to-end: `crashport symbolicate`, offline, on reports of a stripped program whose debug
// file is kept elsewhere under a build-id directory; and its answers to bad input.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class SymbolicateTests: XCTestCase {
    /// A stripped crash-corpus program, its debug file under DIR/.build-id/xx/rest.debug, and
    /// a report of it crashing.
    struct Stripped {
        var program: String
        var debugDirectory: String
        var run: CrashportRun
    }

    static let directory = TestSupport.temporaryDirectory("symbolicate")

    func strippedCrash() throws -> Stripped {
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/crash", flags: ["-O2", "-g"])
        let debug = Self.directory + "/crash.debug"
        for command in [["objcopy", "--only-keep-debug", program, debug], ["strip", "--strip-all", program]] {
            XCTAssertEqual(try TestSupport.run(command).status, .exited(0), command.joined(separator: " "))
        }
        let debugDirectory = Self.directory + "/debug"
        try TestSupport.placeDebugFile(debug, buildID: try TestSupport.buildID(of: program), in: debugDirectory, move: true)
        let run = try TestSupport.crashportRun([program, "null"])
        XCTAssertEqual(run.reportIDs.count, 1)
        return Stripped(program: program, debugDirectory: debugDirectory, run: run)
    }

    func symbolicate(_ arguments: [String]) throws -> RunResult {
        try TestSupport.run([TestSupport.crashport, "symbolicate"] + arguments)
    }

    func testStrippedProgramSymbolicatedOfflineFromEventAndMinidump() throws {
        let stripped = try strippedCrash()
        defer { try? FileManager.default.removeItem(atPath: stripped.run.reportsDirectory) }
        // Online there are no names: the binary is stripped and its debug file is elsewhere.
        let online = try stripped.run.event()
        XCTAssertNotEqual(online.crashedFunctions.first, "crash_null")

        let directory = stripped.run.reportsDirectory + "/" + stripped.run.reportIDs[0]
        for file in ["event.json", "minidump.dmp"] {
            let result = try symbolicate(["--debug-dir", stripped.debugDirectory, "--format", "json", directory + "/" + file])
            XCTAssertEqual(result.status, .exited(0), result.stderr)
            let event = try Event.decode(Data(result.stdout.utf8))
            XCTAssertEqual(Array(event.crashedFunctions.prefix(4)), ["crash_null", "level_two", "level_one", "main"], file)
            let top = event.crashedThreadRecord?.frames?.first
            XCTAssertEqual(top?.file.map { ($0 as NSString).lastPathComponent }, "crash.c", file)
            XCTAssertEqual(top?.line, 24, file)
            XCTAssertEqual(event.signal?.name, "SIGSEGV", file)

            let text = try symbolicate(["--debug-dir", stripped.debugDirectory, directory + "/" + file])
            // The title names the culprit found offline; the thread lists the file's full path.
            XCTAssertTrue(
                text.stdout.contains("crashed: SIGSEGV: segmentation fault at 0x0 in crash_null (crash.c:24)"), text.stdout)
            XCTAssertTrue(text.stdout.contains("crash_null (/") && text.stdout.contains("/crash.c:24)"), text.stdout)
        }

        // Without the debug directory: frames keep module+offset, and the output says why.
        let bare = try symbolicate(["--format", "json", directory + "/event.json"])
        XCTAssertEqual(bare.status, .exited(0))
        XCTAssertNotEqual(try Event.decode(Data(bare.stdout.utf8)).crashedFunctions.first, "crash_null")
    }

    /// The program moved away after its crash, its debug file found by build-id: the minidump,
    /// unwound again offline, gives the frames the event's do (main and its inline frames too):
    /// the code and CFI the unwind read online are in the minidump, where the debug file has
    /// only their places. With nothing found at all, the frames are still those, unnamed.
    func testMinidumpOfAProgramMovedAwayUnwindsAsOnline() throws {
        let stripped = try strippedCrash()
        defer { try? FileManager.default.removeItem(atPath: stripped.run.reportsDirectory) }
        let moved = stripped.program + ".moved"
        try? FileManager.default.removeItem(atPath: moved)
        try FileManager.default.moveItem(atPath: stripped.program, toPath: moved)
        defer { try? FileManager.default.moveItem(atPath: moved, toPath: stripped.program) }
        let directory = stripped.run.reportsDirectory + "/" + stripped.run.reportIDs[0]

        struct Frame: Equatable {
            var function: String?, file: String?, line: Int?, pc: UInt64?, module: String?, offset: UInt64?
            var inlined: Bool?
        }
        func frames(_ arguments: [String]) throws -> [[Frame]] {
            let result = try symbolicate(["--format", "json"] + arguments)
            XCTAssertEqual(result.status, .exited(0), result.stderr)
            let event = try Event.decode(Data(result.stdout.utf8))
            return (event.threads ?? []).map { thread in
                (thread.frames ?? []).map {
                    Frame(
                        function: $0.function, file: $0.file, line: $0.line, pc: $0.pc?.value, module: $0.module,
                        offset: $0.moduleOffset?.value, inlined: $0.inlined)
                }
            }
        }
        let fromEvent = try frames(["--debug-dir", stripped.debugDirectory, directory + "/event.json"])
        let fromDump = try frames(["--debug-dir", stripped.debugDirectory, directory + "/minidump.dmp"])
        XCTAssertEqual(fromDump, fromEvent)
        XCTAssertEqual(fromDump.first?.compactMap(\.function).prefix(4), ["crash_null", "level_two", "level_one", "main"])

        let bareEvent = try frames([directory + "/event.json"]).map { $0.map { [$0.module, $0.offset.map { String($0) }] } }
        let bareDump = try frames([directory + "/minidump.dmp"]).map { $0.map { [$0.module, $0.offset.map { String($0) }] } }
        XCTAssertEqual(bareDump, bareEvent, "found nowhere: the same frames, as module+offset")
        let text = try symbolicate([directory + "/minidump.dmp"]).stdout
        XCTAssertFalse(text.contains(" × "), "distinct unnamed frames are not folded as a recursion: \(text)")
    }

    /// A frame left without a name says which build-id was looked for; --verbose lists, per
    /// module, every place looked at and what was used.
    func testVerboseSaysWhereItLooked() throws {
        let stripped = try strippedCrash()
        defer { try? FileManager.default.removeItem(atPath: stripped.run.reportsDirectory) }
        let directory = stripped.run.reportsDirectory + "/" + stripped.run.reportIDs[0]
        let found = try symbolicate(["--verbose", "--debug-dir", stripped.debugDirectory, directory])
        XCTAssertEqual(found.status, .exited(0), found.stderr)
        let line = found.stderr.split(separator: "\n").first { $0.contains("crash (build-id ") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains(": \(stripped.program), debug file \(stripped.debugDirectory)/.build-id/"), found.stderr)
        XCTAssertTrue(line.contains("looked at \(stripped.program), \(stripped.debugDirectory)/.build-id/"), line)

        // The program moved away and no debug directory: the note names the build-id.
        var event = try Event.decode(Data(contentsOf: URL(fileURLWithPath: directory + "/event.json")))
        let gone = Self.directory + "/moved-away/crash"
        let buildID = try XCTUnwrap(event.modules?.first?.buildID)
        event.modules?[0].path = gone
        let edited = Self.directory + "/moved.json"
        try event.jsonData().write(to: URL(fileURLWithPath: edited))
        let missing = try symbolicate(["--format", "json", edited])
        XCTAssertEqual(missing.status, .exited(0), missing.stderr)
        let notes = try Event.decode(Data(missing.stdout.utf8)).notes ?? []
        XCTAssertTrue(
            notes.contains {
                $0.contains("no binary or debug file for crash with build-id \(buildID)") && $0.contains("--verbose")
            },
            "\(notes)")
        let empty = Self.directory + "/empty-debug"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let verbose = try symbolicate(["--verbose", "--debug-dir", empty, edited])
        XCTAssertTrue(
            verbose.stderr.contains(
                "crash (build-id \(buildID)): not found; looked at \(gone), \(empty)/.build-id/\(buildID.prefix(2))/"),
            verbose.stderr)
    }

    func testObjectModeMatchesLlvmSymbolizerFormat() throws {
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/crash-obj", flags: ["-O2", "-g"])
        let symbols = try TestSupport.run(["nm", program]).stdout.split(separator: "\n")
        let addresses = symbols.filter { $0.hasSuffix(" T level_two") || $0.hasSuffix(" T crash_null") }
            .map { "0x" + $0.split(separator: " ")[0] }
        XCTAssertEqual(addresses.count, 2)
        let ours = try symbolicate(["--obj", program] + addresses + ["0x1", "junk"])
        XCTAssertEqual(ours.status, .exited(0), ours.stderr)
        let blocks = ours.stdout.components(separatedBy: "\n\n")
        XCTAssertTrue(blocks[0].hasPrefix("crash_null\n") && blocks[0].contains("crash.c:24:"), blocks[0])
        XCTAssertTrue(blocks[1].hasPrefix("level_two\n"), blocks[1])
        XCTAssertEqual(blocks[2], "??\n??:0:0")
        XCTAssertEqual(blocks[3], "??\n??:0:0")
        // The same answers through stdin.
        let piped = try TestSupport.run(
            [TestSupport.crashport, "symbolicate", "--obj", program],
            input: addresses.joined(separator: "\n") + "\n0x1\njunk\n")
        XCTAssertEqual(piped.stdout, ours.stdout)
        // The plainest command lines skip the argument parser (Crashport.main); any other goes
        // through it: the answers and the statuses are the same either way.
        for spelling in [
            ["--obj=" + program] + addresses + ["0x1", "junk"],
            ["--obj", program, "--debug-dir", Self.directory] + addresses + ["0x1", "junk"],
        ] {
            let answer = try symbolicate(spelling)
            XCTAssertEqual(answer.status, .exited(0), answer.stderr)
            XCTAssertEqual(answer.stdout, ours.stdout, spelling.joined(separator: " "))
        }
        for (spelling, status) in [
            (["--obj", Self.directory + "/no-such-file", "0x1"], ExitStatus.exited(1)),
            (["--obj", Self.directory + "/no-such-file", "--format", "json", "0x1"], .exited(1)),
            (["--obj"], .exited(64)), (["--obj", program, "--no-demangle", "--no-demangle"], .exited(0)),
            (["--obj", program, "--bogus"], .exited(64)),
        ] {
            XCTAssertEqual(try symbolicate(spelling).status, status, spelling.joined(separator: " "))
        }
        if FileManager.default.isExecutableFile(atPath: "/opt/swift/usr/bin/llvm-symbolizer") {
            let llvm = try TestSupport.run(["/opt/swift/usr/bin/llvm-symbolizer", "--obj=" + program] + addresses)
            XCTAssertEqual(llvm.stdout, blocks.prefix(2).joined(separator: "\n\n") + "\n\n")
        }
    }

    func testBadInputGetsAClearError() throws {
        let directory = TestSupport.temporaryDirectory("bad-input")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let missing = try symbolicate([directory + "/nope.json"])
        XCTAssertEqual(missing.status, .exited(1))
        XCTAssertTrue(missing.stderr.contains("cannot be read"), missing.stderr)

        try Data("{\"schema\": \"crashport.event.v1\", \"threads\": [".utf8).write(
            to: URL(fileURLWithPath: directory + "/truncated.json"))
        let truncated = try symbolicate([directory + "/truncated.json"])
        XCTAssertEqual(truncated.status, .exited(1))
        XCTAssertTrue(truncated.stderr.contains("not a valid event"), truncated.stderr)

        try Data("hello".utf8).write(to: URL(fileURLWithPath: directory + "/text"))
        let text = try symbolicate([directory + "/text"])
        XCTAssertTrue(text.stderr.contains("neither a minidump nor"), text.stderr)

        var dump = [UInt8]("MDMP".utf8) + [0x93, 0xA7, 0, 0] + [UInt8](repeating: 0xFF, count: 40)
        dump[8] = 200  // 200 streams in a 48-byte file
        try Data(dump).write(to: URL(fileURLWithPath: directory + "/corrupt.dmp"))
        let corrupt = try symbolicate([directory + "/corrupt.dmp"])
        XCTAssertEqual(corrupt.status, .exited(1))
        XCTAssertFalse(corrupt.stderr.isEmpty)

        let notELF = try symbolicate(["--obj", directory + "/text", "0x10"])
        XCTAssertEqual(notELF.status, .exited(1))
        XCTAssertTrue(notELF.stderr.contains("not an ELF file"), notELF.stderr)

        // A truncated ELF: whatever it still holds, and never a crash.
        let program = try TestSupport.corpus()[0].path
        let bytes = try Data(contentsOf: URL(fileURLWithPath: program))
        for length in [10, 64, 700, bytes.count / 3, bytes.count - 100] {
            try bytes.prefix(length).write(to: URL(fileURLWithPath: directory + "/cut"))
            let cut = try symbolicate(["--obj", directory + "/cut", "0x1140"])
            XCTAssertTrue(cut.status == .exited(0) || cut.status == .exited(1), "length \(length): \(cut.status) \(cut.stderr)")
        }
    }

    /// A debug file whose build-id does not match is not used.
    func testMismatchedDebugFileIsRejected() throws {
        let stripped = try strippedCrash()
        defer { try? FileManager.default.removeItem(atPath: stripped.run.reportsDirectory) }
        // Put an unrelated debug file under the stripped program's build-id path.
        let other = try TestSupport.compile(
            [TestSupport.fixture("corpus/threads.c")], output: Self.directory + "/other", flags: ["-O2", "-g", "-pthread"])
        let directory = stripped.run.reportsDirectory + "/" + stripped.run.reportIDs[0]
        let wrong = Self.directory + "/wrong-debug"
        try TestSupport.placeDebugFile(other, buildID: try TestSupport.buildID(of: stripped.program), in: wrong)
        let result = try symbolicate(["--debug-dir", wrong, "--format", "json", directory + "/event.json"])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        let event = try Event.decode(Data(result.stdout.utf8))
        XCTAssertFalse(event.crashedFunctions.contains("park_here"), "names from the wrong file: \(event.crashedFunctions)")
        XCTAssertFalse(event.crashedFunctions.contains("crash_null"), "the stripped binary has no such name of its own")
        XCTAssertNil(event.crashedThreadRecord?.frames?.first?.file, "no lines from a file with another build-id")
    }

    /// Agreement with llvm-symbolizer (function, file:line:column, inline frames) on
    /// thousands of addresses: a generated C binary with DWARF and inlining, and
    /// libswiftCore.so, which has only a symbol table.
    func testAgreesWithLlvmSymbolizer() throws {
        let llvm = "/opt/swift/usr/bin/llvm-symbolizer"
        guard FileManager.default.isExecutableFile(atPath: llvm) else {
            throw TestFailure("llvm-symbolizer from the Swift toolchain is missing at \(llvm)")
        }
        var source = "#include <stdint.h>\nvolatile uint64_t sink;\n"
        for i in 0..<600 {
            if i % 4 == 0 {
                source +=
                    "static inline __attribute__((always_inline)) uint64_t helper_\(i)(uint64_t x) { for (int k = 0; k < 3; k++) x = x * \(i + 3) + sink; return x; }\n"
            }
            source +=
                "__attribute__((noinline)) uint64_t function_\(i)(uint64_t x) {\n  x = (x ^ \(i * 7919)u) * \(i + 11)u + sink;\n  if (x & 1) sink += x;\n"
            if i % 4 == 0 { source += "  x += helper_\(i)(x);\n" }
            if i > 0 { source += "  if (x & 2) x += function_\(i / 2)(x >> 1);\n" }
            source += "  return x;\n}\n"
        }
        source += "int main(int argc, char **argv) { (void)argv; return (int)function_599((uint64_t)argc); }\n"
        let file = Self.directory + "/large.c"
        try source.write(toFile: file, atomically: true, encoding: .utf8)
        let large = try TestSupport.compile([file], output: Self.directory + "/large", flags: ["-O2", "-g"])
        let swiftCore = "/opt/swift/usr/lib/swift/linux/libswiftCore.so"

        for (binary, minimum) in [(large, 0.995), (swiftCore, 0.995)] {
            let sections = try TestSupport.run(["readelf", "-SW", binary]).stdout
            guard let text = sections.split(separator: "\n").first(where: { $0.contains(" .text ") }) else {
                throw TestFailure("no .text")
            }
            let fields = text.split(separator: "]").last!.split(separator: " ")
            let start = UInt64(fields[2], radix: 16)!, size = UInt64(fields[4], radix: 16)!
            var state: UInt64 = 0x9E37_79B9_7F4A_7C15
            let addresses = (0..<3000).map { _ -> String in
                state = state &* 6364136223846793005 &+ 1442695040888963407
                return "0x" + String(start + (state >> 11) % size, radix: 16)
            }
            let input = addresses.joined(separator: "\n") + "\n"
            let ours = try TestSupport.run(
                [TestSupport.crashport, "symbolicate", "--obj", binary, "--no-demangle"], input: input)
            let theirs = try TestSupport.run([llvm, "--obj=" + binary, "--no-demangle"], input: input)
            let a = ours.stdout.components(separatedBy: "\n\n"), b = theirs.stdout.components(separatedBy: "\n\n")
            let same = zip(a, b).filter { $0 == $1 }.count
            let disagreements = zip(zip(a, b), addresses).filter { pair, _ in pair.0 != pair.1 }.prefix(5)
                .map { pair, address in "\(address): \(pair.0) | \(pair.1)" }
            XCTAssertGreaterThanOrEqual(
                Double(same) / Double(addresses.count), minimum,
                "\(binary): \(same)/\(addresses.count) agree; first differences:\n\(disagreements.joined(separator: "\n"))")
        }
    }

    /// A debug file whose DWARF is zlib-compressed (as libc6-dbg's is) and large enough to be
    /// inflated on demand gives the same answers as the same program's uncompressed DWARF, on a
    /// few addresses (only the units they fall in inflated) and on thousands (the whole section,
    /// once); a corrupt stream gives the symbol table's answers, not a crash.
    func testCompressedDebugInfoInflatedOnDemandAnswersTheSame() throws {
        var source = ""
        for index in 0..<400 {
            source += "struct s\(index) { int a\(index); long b\(index); const char *c\(index); };\n"
            source +=
                "__attribute__((noinline)) long f\(index)(struct s\(index) *p) { return p->a\(index) + p->b\(index) + (long)p->c\(index); }\n"
        }
        source += "int main(void) { return 0; }\n"
        var files: [String] = []
        // Many units, so that a few addresses touch a few of them.
        for part in 0..<8 {
            let file = Self.directory + "/part\(part).c"
            try source.replacingOccurrences(of: "struct s", with: "struct p\(part)s")
                .replacingOccurrences(of: " f", with: " p\(part)f")
                .replacingOccurrences(
                    of: "int main(void) { return 0; }\n", with: part == 0 ? "int main(void) { return 0; }\n" : ""
                )
                .write(toFile: file, atomically: true, encoding: .utf8)
            files.append(file)
        }
        let plain = try TestSupport.compile(files, output: Self.directory + "/parts", flags: ["-O1", "-g"])
        let compressed = try TestSupport.compile(files, output: Self.directory + "/parts-gz", flags: ["-O1", "-g", "-gz=zlib"])
        let sections = try TestSupport.run(["readelf", "-SW", compressed]).stdout
        XCTAssertTrue(sections.split(separator: "\n").contains { $0.contains(".debug_info") && $0.contains(" C ") }, sections)

        let symbols = try TestSupport.run(["nm", plain]).stdout.split(separator: "\n").compactMap { line -> String? in
            let fields = line.split(separator: " ")
            return fields.count == 3 && fields[1] == "T" && fields[2].contains("f") ? "0x" + fields[0] : nil
        }
        XCTAssertGreaterThan(symbols.count, 1000)
        // A few addresses as arguments (inflated on demand), then all on stdin (a batch: whole).
        for count in [3, symbols.count] {
            let few = count <= 64
            let input = few ? "" : symbols.prefix(count).joined(separator: "\n") + "\n"
            let addresses = few ? Array(symbols.prefix(count)) : []
            let expected = try TestSupport.run(
                [TestSupport.crashport, "symbolicate", "--obj", plain, "--no-demangle"] + addresses, input: input)
            let answered = try TestSupport.run(
                [TestSupport.crashport, "symbolicate", "--obj", compressed, "--no-demangle"] + addresses, input: input)
            XCTAssertEqual(answered.status, .exited(0))
            XCTAssertEqual(answered.stdout, expected.stdout, "\(count) addresses")
            XCTAssertTrue(expected.stdout.contains("part"), expected.stdout)
        }
        // And the reference reads the compressed file the same way.
        let llvm = "/opt/swift/usr/bin/llvm-symbolizer"
        if FileManager.default.isExecutableFile(atPath: llvm) {
            let addresses = Array(symbols.prefix(3))
            let theirs = try TestSupport.run([llvm, "--obj=" + compressed, "--no-demangle"] + addresses)
            let ours = try TestSupport.run(
                [TestSupport.crashport, "symbolicate", "--obj", compressed, "--no-demangle"] + addresses)
            XCTAssertEqual(ours.stdout, theirs.stdout)
        }

        // The same file with its .debug_info stream damaged in the middle.
        var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: compressed)))
        let header = try XCTUnwrap(sections.split(separator: "\n").first { $0.contains(" .debug_info ") })
        let fields = header.split(separator: "]").last!.split(separator: " ")
        let offset = Int(fields[2], radix: 16)!, size = Int(fields[3], radix: 16)!
        for index in (offset + size / 2)..<(offset + size / 2 + 64) { bytes[index] = 0 }
        let damaged = Self.directory + "/parts-damaged"
        try Data(bytes).write(to: URL(fileURLWithPath: damaged))
        let answered = try TestSupport.run(
            [TestSupport.crashport, "symbolicate", "--obj", damaged, "--no-demangle"] + symbols.prefix(3))
        XCTAssertEqual(answered.status, .exited(0), answered.stderr)
        XCTAssertEqual(answered.stdout.components(separatedBy: "\n\n").filter { !$0.isEmpty }.count, 3, answered.stdout)
        XCTAssertTrue(answered.stdout.contains("p0f0") || answered.stdout.contains("f"), answered.stdout)
    }
}
