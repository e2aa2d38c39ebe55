// End-to-end: the crash signature (Reports/Signature.swift) on real crashes under the real
// `crashport run`. Twelve distinct bugs in C, C++ and Swift (Tests/Fixtures/grouping), each built
// three ways (-O0, -O2, and -O2 with an unrelated function added, which moves every address and
// line), plus the C ones statically linked: every bug keeps one fingerprint in every build, no
// two bugs share one, `list --group` prints one line per bug and `stats` counts the same, and
// the culprit is the program's own function, not the standard library's or libc's.

import Foundation
import ReportModel
@testable import Reports
import TestSupport
import XCTest

final class GroupingTests: XCTestCase {
    struct Bug {
        var program: String
        var mode: String
        /// The signature every build must give.
        var signature: String
    }

    static let bugs = [
        Bug(program: "bugs", mode: "parse", signature: "strlen | parse_records"),
        Bug(program: "bugs", mode: "double-free", signature: "free | release_buffer"),
        Bug(program: "bugs", mode: "assert", signature: "check_invariant"),
        Bug(program: "bugs", mode: "average", signature: "average"),
        Bug(program: "bugs", mode: "walk", signature: "strlen | name_length"),
        Bug(program: "bugs", mode: "setting", signature: "read_setting"),
        Bug(program: "bugs", mode: "request-null", signature: "handle_request"),
        Bug(program: "bugs", mode: "request-div", signature: "handle_request"),
        Bug(program: "pool", mode: "lookup", signature: "lookup"),
        Bug(program: "pool", mode: "credit", signature: "Ledger::credit"),
        Bug(program: "warehouse", mode: "stock", signature: "Warehouse.stock(at:)"),
        Bug(program: "warehouse", mode: "price", signature: "Warehouse.price(of:)"),
    ]

    /// The three builds of each program, each in its own directory under the same name (a
    /// program's name is part of what identifies a bug in it).
    func build(in directory: String) throws -> [String] {
        let builds = [
            ("O0", ["-O0"], ["-Onone"]), ("O2", ["-O2"], ["-O"]), ("O2u", ["-O2", "-DUNRELATED"], ["-O", "-DUNRELATED"]),
        ]
        for (name, cFlags, swiftFlags) in builds {
            let output = directory + "/" + name
            try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
            _ = try TestSupport.compile(
                [TestSupport.fixture("grouping/bugs.c")], output: output + "/bugs", flags: cFlags + ["-g", "-w"])
            _ = try TestSupport.compile(
                [TestSupport.fixture("grouping/pool.cpp")], output: output + "/pool", compiler: "g++",
                flags: cFlags + ["-g", "-pthread"])
            guard let swiftc = TestSupport.which("swiftc") else { throw TestFailure("swiftc is not installed") }
            let swift = try TestSupport.run(
                [swiftc] + swiftFlags + ["-g", TestSupport.fixture("grouping/Warehouse.swift"), "-o", output + "/warehouse"],
                timeout: 300)
            guard swift.status == .exited(0) else { throw TestFailure("swiftc failed: \(swift.stderr)") }
        }
        return builds.map { directory + "/" + $0.0 }
    }

    func testEveryBugKeepsOneFingerprintInEveryBuildAndTheGroupsAgree() throws {
        let directory = TestSupport.temporaryDirectory("grouping")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let builds = try build(in: directory)
        let reports = directory + "/reports"
        var fingerprints: [String: Set<String>] = [:]
        for bug in Self.bugs {
            let key = "\(bug.program) \(bug.mode)"
            for build in builds {
                let before = Set((try? FileManager.default.contentsOfDirectory(atPath: reports)) ?? [])
                let run = try TestSupport.crashportRun(
                    [build + "/" + bug.program, bug.mode], reports: reports, environment: ["SWIFT_BACKTRACE": "enable=no"])
                let new = run.reportIDs.filter { !before.contains($0) }
                XCTAssertEqual(new.count, 1, "\(key) in \(build): \(run.result.stderr)")
                guard let id = new.first else { continue }
                let event = try JSONDecoder().decode(
                    Event.self, from: Data(contentsOf: URL(fileURLWithPath: reports + "/" + id + "/event.json")))
                XCTAssertEqual(event.signature, bug.signature, "\(key) in \(build): frames \(event.crashedFunctions)")
                XCTAssertEqual(event.fingerprint?.count, 16, key)
                fingerprints[key, default: []].insert(event.fingerprint ?? "none")
                // The culprit is the program's function, never the standard library's.
                let culprit = event.culprit?.function ?? ""
                XCTAssertTrue(
                    culprit.contains(bug.signature.split(separator: "|").last!.trimmingCharacters(in: .whitespaces)),
                    "\(key) in \(build): culprit \(culprit)")
            }
        }
        for (key, set) in fingerprints { XCTAssertEqual(set.count, 1, "\(key) has fingerprints \(set) across the builds") }
        let distinct = Set(fingerprints.values.compactMap(\.first))
        XCTAssertEqual(distinct.count, Self.bugs.count, "bugs that share a fingerprint: \(fingerprints)")

        // list --group: one line per bug, each with its three reports; stats counts the same.
        let listed = try TestSupport.run([TestSupport.crashport, "list", "--group", "--format", "json", "--reports", reports])
        let groups = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]] ?? []
        XCTAssertEqual(groups.count, Self.bugs.count, listed.stdout)
        XCTAssertEqual(Set(groups.compactMap { $0["fingerprint"] as? String }), distinct)
        XCTAssertTrue(groups.allSatisfy { $0["count"] as? Int == builds.count }, listed.stdout)
        let text = try TestSupport.run([TestSupport.crashport, "list", "--group", "--reports", reports])
        XCTAssertEqual(text.stdout.split(separator: "\n").count, Self.bugs.count, text.stdout)
        let stats = try TestSupport.run([TestSupport.crashport, "stats", "--reports", reports])
        for fingerprint in distinct {
            XCTAssertTrue(
                stats.stdout.contains("\(builds.count)  \(fingerprint)  "), "stats lacks \(fingerprint):\n\(stats.stdout)")
        }
    }

    /// A statically linked program: libc is linked into the program, yet `__strlen_evex` and
    /// `abort` are libc's, so the culprit and the signature are the program's, as in the
    /// dynamically linked build. Without the stub (it cannot be preloaded), --trace-exit captures.
    func testStaticallyLinkedLibcIsNotTheProgramsOwn() throws {
        let directory = TestSupport.temporaryDirectory("grouping-static")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let staticBuild = directory + "/static/bugs"
        let dynamicBuild = directory + "/dynamic/bugs"
        for path in [staticBuild, dynamicBuild] {
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        }
        do {
            _ = try TestSupport.compile(
                [TestSupport.fixture("grouping/bugs.c")], output: staticBuild, flags: ["-O2", "-g", "-w", "-static"])
        } catch {
            throw XCTSkip("no static libc to link with: \(error)")
        }
        _ = try TestSupport.compile([TestSupport.fixture("grouping/bugs.c")], output: dynamicBuild, flags: ["-O2", "-g", "-w"])
        for (mode, signature) in [("parse", "strlen | parse_records"), ("double-free", "free | release_buffer")] {
            var seen: [String] = []
            for (program, options) in [(staticBuild, ["--trace-exit"]), (dynamicBuild, [])] {
                let run = try TestSupport.crashportRun([program, mode], options: options)
                defer { try? FileManager.default.removeItem(atPath: run.reportsDirectory) }
                XCTAssertEqual(run.reportIDs.count, 1, "\(mode) \(program): \(run.result.stderr)")
                guard run.reportIDs.count == 1 else { continue }
                let event = try run.event()
                XCTAssertEqual(event.signature, signature, "\(mode) \(program): frames \(event.crashedFunctions)")
                let culprit = event.culprit?.function ?? ""
                XCTAssertEqual(culprit, signature.split(separator: "|").last!.trimmingCharacters(in: .whitespaces), program)
                seen.append(event.fingerprint ?? "")
            }
            XCTAssertEqual(Set(seen).count, 1, "\(mode): the static and the dynamic build group apart: \(seen)")
        }
    }

    /// The crashing thread's frames, name for name, as gdb's `bt` shows them: the C bugs at -O2
    /// (GCC's `.cold` part named by its function), statically linked, and the C++ pool's worker
    /// (argument lists aside: gdb prints `Ledger::credit` where crashport demangles the whole
    /// linkage name). The daemon and prefork cases are RunCountsTests'; Go's, GoTests'.
    func testFramesAreGDBs() throws {
        guard TestSupport.which("gdb") != nil else { throw XCTSkip("gdb is not installed: no reference backtrace") }
        let directory = TestSupport.temporaryDirectory("grouping-gdb")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = TestSupport.fixture("grouping/bugs.c")
        var programs = [
            (try TestSupport.compile([source], output: directory + "/bugs", flags: ["-O2", "-g", "-w"]), [String]())
        ]
        if let staticBuild = try? TestSupport.compile(
            [source], output: directory + "/bugs-static", flags: ["-O2", "-g", "-w", "-static"])
        {
            programs.append((staticBuild, ["--trace-exit"]))
        } else {
            print("GroupingTests: no static libc to link with; the static build is not compared")
        }
        var cases = programs.flatMap { program, options in
            ["parse", "double-free", "assert", "average", "walk", "setting", "request-null", "request-div"].map {
                ([program, $0], options, false)
            }
        }
        let pool = try TestSupport.compile(
            [TestSupport.fixture("grouping/pool.cpp")], output: directory + "/pool", compiler: "g++",
            flags: ["-O2", "-g", "-pthread"])
        cases += [([pool, "credit"], [], true)]
        for (command, options, cxx) in cases {
            let reference = try TestSupport.gdbBacktrace(command)
            let watched = try TestSupport.crashportRun(command, options: options)
            defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
            XCTAssertEqual(watched.reportIDs.count, 1, "\(command): \(watched.result.stderr)")
            guard watched.reportIDs.count == 1 else { continue }
            let frames = try watched.event().crashedThreadRecord?.frames ?? []
            let names = frames.enumerated().map { index, frame -> String? in
                guard cxx, let function = frame.function else { return frame.function }
                // gdb leaves a lambda's members unqualified (`_FUN`).
                let simplified = Signature.simplifiedCxx(function)
                let gdbName = index < reference.count ? reference[index].function : ""
                return simplified.hasSuffix("::" + gdbName) ? gdbName : simplified
            }
            XCTAssertNil(GDBFrame.differences(reference, names), "\(command): gdb \(reference), crashport \(names)")
        }
    }
}
