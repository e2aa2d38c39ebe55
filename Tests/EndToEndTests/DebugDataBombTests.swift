// End-to-end: MiniDebugInfo decompression is capped. A stripped program whose `.gnu_debugdata`
// is xz of 500 MiB of zeros (76 KB on disk) must cost `symbolicate --obj` and the live watcher
// the cap's memory (64 MiB), not the bomb's, and both must say which module's debug data was
// refused; a real MiniDebugInfo section still names functions.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class DebugDataBombTests: XCTestCase {
    static let refusal = "module bombed: debug data refused: .gnu_debugdata inflates past 64 MiB"

    /// A program that crashes in `crash_here` when run without arguments: `bin` (with its
    /// symbols), `withmini` (stripped, a real MiniDebugInfo naming crash_here) and `bombed`
    /// (stripped, the bomb as .gnu_debugdata). Returns the directory and crash_here's address.
    func buildPrograms() throws -> (directory: String, crashHere: String) {
        let directory = TestSupport.temporaryDirectory("bomb")
        let source = directory + "/m.c"
        try Data(
            "int crash_here(int *p) { return *p; }\nint main(int argc, char **argv) { return crash_here(argc > 5 ? &argc : 0); }\n"
                .utf8
        ).write(to: URL(fileURLWithPath: source))
        _ = try TestSupport.compile([source], output: directory + "/bin", flags: ["-O1", "-fno-inline"])
        let steps = [
            "objcopy --only-keep-debug bin mini",
            "objcopy -S --remove-section .comment --keep-symbol=crash_here --keep-symbol=main mini mini.debug",
            "xz -T1 mini.debug",
            "strip --strip-all -o stripped bin",
            "objcopy --add-section .gnu_debugdata=mini.debug.xz stripped withmini",
            "head -c 500M /dev/zero | xz -T1 -1 > bomb.xz",
            "objcopy --add-section .gnu_debugdata=bomb.xz stripped bombed",
        ]
        for step in steps {
            let result = try TestSupport.run(["/bin/sh", "-c", "cd '\(directory)' && " + step], timeout: 120)
            guard result.status == .exited(0) else { throw TestFailure("\(step): \(result.stderr)") }
        }
        let symbols = try TestSupport.run(["nm", directory + "/bin"])
        guard let line = symbols.stdout.split(separator: "\n").first(where: { $0.hasSuffix(" crash_here") }) else {
            throw TestFailure("no crash_here in nm output: \(symbols.stdout)")
        }
        return (directory, "0x" + line.prefix { $0 != " " })
    }

    /// Runs `command` under `/usr/bin/time -v`; its result and peak resident set size in bytes.
    func measured(_ command: [String], environment: [String: String] = [:]) throws -> (RunResult, Int) {
        let time = "/usr/bin/time"
        guard FileManager.default.isExecutableFile(atPath: time) else { throw XCTSkip("needs GNU time (apt-get install time)") }
        let result = try TestSupport.run([time, "-v"] + command, environment: environment, timeout: 120)
        let prefix = "Maximum resident set size (kbytes): "
        guard
            let line = result.stderr.split(separator: "\n").first(where: { $0.contains(prefix) }),
            let kilobytes = Int(line.components(separatedBy: prefix).last ?? "")
        else { throw TestFailure("no peak RSS from time -v: \(result.stderr)") }
        return (result, kilobytes * 1024)
    }

    func testMiniDebugInfoBombIsRefusedWithinTheCap() throws {
        let (directory, crashHere) = try buildPrograms()
        defer { try? FileManager.default.removeItem(atPath: directory) }

        // A real MiniDebugInfo still names the function; the stripped program alone cannot.
        let real = try TestSupport.run([TestSupport.crashport, "symbolicate", "--obj", directory + "/withmini", crashHere])
        XCTAssertEqual(real.status, .exited(0), real.stderr)
        XCTAssertTrue(real.stdout.hasPrefix("crash_here\n"), real.stdout)
        XCTAssertFalse(real.stderr.contains("refused"), real.stderr)

        // The bomb: an answer (unknown name) and the refusal, at the cost of the cap.
        let (bombed, peak) = try measured([TestSupport.crashport, "symbolicate", "--obj", directory + "/bombed", crashHere])
        XCTAssertEqual(bombed.status, .exited(0), bombed.stderr)
        XCTAssertEqual(bombed.stdout, "??\n??:0:0\n\n")
        XCTAssertTrue(bombed.stderr.contains("crashport: symbolicate: " + Self.refusal), bombed.stderr)
        XCTAssertLessThan(peak, 300 << 20, "symbolicate --obj peak RSS \(peak >> 20) MiB")
    }

    func testLiveWatcherRefusesTheBombAndReportsModuleOffsets() throws {
        let (directory, _) = try buildPrograms()
        let reports = directory + "/reports"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (run, peak) = try measured(
            [TestSupport.crashport, "run", "--reports", reports, "--", directory + "/bombed"],
            environment: ["CRASHPORT_STUB": try TestSupport.stub()])
        XCTAssertTrue(run.stderr.contains("crashed: SIGSEGV"), run.stderr)
        XCTAssertLessThan(peak, 300 << 20, "crashport run peak RSS \(peak >> 20) MiB")

        let ids = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }
        XCTAssertEqual(ids.count, 1, run.stderr)
        let eventPath = reports + "/" + ids[0] + "/event.json"
        let event = try Event.decode(try Data(contentsOf: URL(fileURLWithPath: eventPath)))
        let top = try XCTUnwrap(event.crashedThreadRecord?.frames?.first)
        XCTAssertEqual(top.module, "bombed")
        XCTAssertNotNil(top.moduleOffset)
        XCTAssertTrue(event.notes?.contains(Self.refusal) ?? false, "the live report names the refusal: \(event.notes ?? [])")

        // Offline, the same report says which module's debug data was refused.
        let offline = try TestSupport.run([TestSupport.crashport, "symbolicate", "--format", "json", eventPath])
        XCTAssertEqual(offline.status, .exited(0), offline.stderr)
        let symbolicated = try Event.decode(Data(offline.stdout.utf8))
        XCTAssertTrue(symbolicated.notes?.contains(Self.refusal) ?? false, "\(symbolicated.notes ?? [])")
        XCTAssertEqual(symbolicated.crashedThreadRecord?.frames?.first?.module, "bombed")
    }
}
