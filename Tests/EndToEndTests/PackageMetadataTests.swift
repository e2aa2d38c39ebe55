// End-to-end: a module's package in its report (ModuleRecord.package) and the release it gives.
// A program linked with `ld --package-metadata` crashes under `crashport run`: its module has
// the note's package and the report's release is `name@version`, unless CRASHPORT_RELEASE names
// one. A program of a Debian package (coreutils' sleep) killed with SIGSEGV: its module and
// libc's are named after dpkg's database. A note with JSON that is not the spec's: the report
// is written, without a package, and a note says why.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class PackageMetadataTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("package")
    static let metadata =
        #"{"type":"deb","name":"crashfixture","version":"1.2.3-1","architecture":"amd64","os":"debian","osVersion":"12","debugInfoUrl":"https://debuginfod.debian.net"}"#

    /// Tests/Fixtures/package/crash.c with the package note (-Xlinker: -Wl, would split the
    /// JSON at its commas).
    func noted() throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("package/crash.c")], output: Self.directory + "/crashfixture", flags: ["-O1", "-g"],
            linkFlags: ["-Xlinker", "--package-metadata=" + Self.metadata])
    }

    func main(_ event: Event) throws -> ModuleRecord {
        let executable = try XCTUnwrap(event.process?.executable)
        return try XCTUnwrap(event.modules?.first { $0.path == executable }, "\(event.modules ?? [])")
    }

    func testTheNotesPackageIsTheModulesAndGivesTheRelease() throws {
        let run = try TestSupport.crashportRun([try noted()])
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let event = try run.event()
        XCTAssertNil(event.stage)
        XCTAssertEqual(
            try main(event).package,
            PackageRecord(
                type: "deb", name: "crashfixture", version: "1.2.3-1", architecture: "amd64", os: "debian", osVersion: "12",
                debuginfodURL: "https://debuginfod.debian.net", source: "note"))
        XCTAssertEqual(event.release, "crashfixture@1.2.3-1")

        let shown = try TestSupport.run([TestSupport.crashport, "show", "--reports", run.reportsDirectory, run.reportIDs[0]])
        XCTAssertTrue(
            shown.stdout.contains("Package:   crashfixture 1.2.3-1 (amd64, deb, debian 12; from its package note)"), shown.stdout)
    }

    func testCrashportReleaseWinsOverThePackage() throws {
        let run = try TestSupport.crashportRun([try noted()], environment: ["CRASHPORT_RELEASE": "fixture-app@9"])
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let event = try run.event()
        XCTAssertEqual(event.release, "fixture-app@9")
        XCTAssertEqual(try main(event).package?.name, "crashfixture")
    }

    func testANoteThatIsNotTheSpecsIsSaidAndIgnored() throws {
        let program = try TestSupport.compile(
            [TestSupport.fixture("package/bad-note.c")], output: Self.directory + "/bad-note", flags: ["-O1", "-g"])
        let run = try TestSupport.crashportRun([program])
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let event = try run.event()
        XCTAssertNil(event.stage)
        XCTAssertNil(try main(event).package)
        XCTAssertNil(event.release)
        XCTAssertTrue(
            (event.notes ?? []).contains {
                $0.hasPrefix(
                    "module \(program): its package metadata note (.note.package) is ignored: the value of \"name\" is not a string"
                )
            }, "\(event.notes ?? [])")
        XCTAssertFalse(event.crashedFrames.isEmpty)
    }

    /// coreutils' sleep, killed with SIGSEGV from here once the stub is in it: no note, so dpkg's
    /// database names its package and libc's (the maps say /usr/lib/…, dpkg lists /lib/…).
    func testADebianProgramsModulesAreNamedAfterDpkgsPackages() throws {
        let status = "/var/lib/dpkg/status"
        guard FileManager.default.fileExists(atPath: status), FileManager.default.fileExists(atPath: "/usr/bin/sleep") else {
            throw XCTSkip("no dpkg database here")
        }
        let reports = TestSupport.freshDirectory(in: Self.directory, "dpkg")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestSupport.crashport)
        process.arguments = ["run", "--reports", reports, "--", "/usr/bin/sleep", "30"]
        var environment = ProcessInfo.processInfo.environment
        environment["CRASHPORT_STUB"] = try TestSupport.stub()
        environment["CRASHPORT_RELEASE"] = nil
        process.environment = environment
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        // sleep, the launcher's child, once the stub is mapped into it and it sleeps.
        var sleeper: pid_t = 0
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let children =
                (try? String(
                    contentsOfFile: "/proc/\(process.processIdentifier)/task/\(process.processIdentifier)/children",
                    encoding: .utf8)) ?? ""
            if let child = children.split(separator: " ").first.flatMap({ pid_t($0) }),
                let maps = try? String(contentsOfFile: "/proc/\(child)/maps", encoding: .utf8), maps.contains("libcrashport"),
                let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
                stat.split(separator: ")").last?.split(separator: " ").first == "S"
            {
                sleeper = child
                break
            }
            usleep(20_000)
        }
        XCTAssertGreaterThan(sleeper, 0, "sleep did not start under crashport run")
        guard sleeper > 0 else { return }
        XCTAssertEqual(kill(sleeper, SIGSEGV), 0)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .uncaughtSignal)

        let ids = try FileManager.default.contentsOfDirectory(atPath: reports).filter { !$0.hasPrefix(".") }
        XCTAssertEqual(ids.count, 1)
        let data = try XCTUnwrap(FileManager.default.contents(atPath: reports + "/" + ids[0] + "/event.json"))
        let event = try Event.decode(data)
        let query = try TestSupport.run(["dpkg-query", "-W", "-f", "${Version} ${Architecture}", "coreutils"])
        let parts = query.stdout.split(separator: " ").map(String.init)
        XCTAssertEqual(
            try main(event).package,
            PackageRecord(name: "coreutils", version: parts.first, architecture: parts.last, source: "dpkg"))
        XCTAssertEqual(event.release, "coreutils@" + (parts.first ?? "?"))
        let libc = try XCTUnwrap(event.modules?.first { $0.path?.hasSuffix("/libc.so.6") == true })
        XCTAssertEqual(libc.package?.name, "libc6")
        XCTAssertEqual(libc.package?.source, "dpkg")
        let libcVersion = try TestSupport.run(["dpkg-query", "-W", "-f", "${Version}", "libc6"]).stdout
        XCTAssertEqual(libc.package?.version, libcVersion)
    }
}
