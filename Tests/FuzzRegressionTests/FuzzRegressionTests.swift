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
}
