// FuzzRegressionTests: every committed seed (Tests/Fuzz/seeds/TARGET/) and every input that once
// crashed a parser (Tests/Fuzz/regressions/TARGET/) replayed through its FuzzTarget. A trap
// here kills the test process and fails the suite, so each crash libFuzzer found stays fixed
// even on a machine where the fuzzer itself cannot be built.

import Foundation
import FuzzTargets
import XCTest

final class FuzzRegressionTests: XCTestCase {
    /// Tests/Fuzz, found from this file's path (the inputs are data, not bundle resources).
    static let fuzzDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    /// The files of Tests/Fuzz/KIND/TARGET, sorted by name.
    static func inputs(_ kind: String, _ target: FuzzTarget) -> [URL] {
        let directory = fuzzDirectory.appendingPathComponent(kind).appendingPathComponent(target.rawValue)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { !$0.hasPrefix(".") && $0 != "README.md" }.sorted().map { directory.appendingPathComponent($0) }
    }

    func replay(_ kind: String) throws -> Int {
        var count = 0
        for target in FuzzTarget.allCases {
            for url in Self.inputs(kind, target) {
                // A trap kills the test process; a hang is libFuzzer's -timeout to find (tools/fuzz).
                target.run(try [UInt8](Data(contentsOf: url)))
                count += 1
            }
        }
        return count
    }

    func testSeedsParse() throws {
        XCTAssertGreaterThan(try replay("seeds"), 0, "no seeds under \(Self.fuzzDirectory.path)/seeds")
    }

    func testRegressionsNoLongerCrash() throws {
        _ = try replay("regressions")
    }

    /// Issue 30, attack 3: a CRASH record with SIGABRT, rsp = 2^64-1 and a stack copy at 0
    /// trapped the stack-string scan of the sidecar that received it. Through the whole
    /// record-to-report path it is now a report: the signal, the crashed thread from the
    /// record, the minidump with its stack.
    func testWildStackRecordIsReported() throws {
        let url = Self.fuzzDirectory.appendingPathComponent("regressions/record-report/stack-strings-sp-above-stack-at-zero")
        let bytes = try [UInt8](Data(contentsOf: url))
        let report = try XCTUnwrap(FuzzTarget.report(ofRecord: bytes), "the record parses")
        XCTAssertEqual(report.event.signal?.name, "SIGABRT")
        XCTAssertEqual(report.event.crashedThreadRecord?.registers?["rsp"]?.value, UInt64.max)
        XCTAssertNotNil(report.event.title)
        XCTAssertEqual(Array(report.minidump.prefix(4)), Array("MDMP".utf8))
    }
}
