// DpkgDatabase: the machine's own dpkg database (which package installed sleep and libc, in
// either merged-/usr spelling, against dpkg-query's answer), and databases made here: a list
// file too large, an unreadable one, a deadline reached, answers kept until the database changes.

import BoundedBytes
import Foundation
import ObjectFile
import TestSupport
import XCTest

@testable import Reports

#if canImport(Glibc)
import Glibc
#endif

final class DpkgDatabaseTests: XCTestCase {
    func testTheMachinesDatabaseNamesSleepAndLibcInBothSpellings() throws {
        guard FileManager.default.fileExists(atPath: "/var/lib/dpkg/status") else { throw XCTSkip("no dpkg here") }
        let database = DpkgDatabase()
        let paths = [
            "/usr/bin/sleep", "/bin/sleep", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6",
            "/nowhere/not-a-package-file",
        ]
        let started = monotonicNanoseconds()
        let lookup = database.packages(owning: paths)
        let cold = monotonicNanoseconds() - started
        XCTAssertNil(lookup.note)
        let coreutils = try TestSupport.run(["dpkg-query", "-W", "-f", "${Version} ${Architecture}", "coreutils"]).stdout
        for path in paths.prefix(2) {
            XCTAssertEqual(lookup.packages[path]?.name, "coreutils", path)
            XCTAssertEqual(
                "\(lookup.packages[path]?.version ?? "") \(lookup.packages[path]?.architecture ?? "")", coreutils, path)
            XCTAssertEqual(lookup.packages[path]?.source, .dpkg)
        }
        for path in paths[2...3] { XCTAssertEqual(lookup.packages[path]?.name, "libc6", path) }
        XCTAssertNil(lookup.packages["/nowhere/not-a-package-file"])
        // Kept: the second time reads nothing.
        let again = monotonicNanoseconds()
        XCTAssertEqual(database.packages(owning: paths), lookup)
        let warm = monotonicNanoseconds() - again
        print("dpkg lookup of \(paths.count) paths: \(cold / 1000) µs cold, \(warm / 1000) µs warm")
        XCTAssertLessThan(warm, cold)
    }

    /// A database made here (anyone's files accepted): `lists` as info/NAME.list, a status file.
    func database(_ lists: [String: String], status: String) throws -> String {
        let root = TestSupport.temporaryDirectory("dpkg")
        try FileManager.default.createDirectory(atPath: root + "/info", withIntermediateDirectories: true)
        for (name, text) in lists { try text.write(toFile: root + "/info/\(name).list", atomically: true, encoding: .utf8) }
        try status.write(toFile: root + "/status", atomically: true, encoding: .utf8)
        return root
    }

    static let status = """
        Package: tool
        Status: install ok installed
        Architecture: amd64
        Version: 2.0-1
        Description: a tool
         with a continuation line
        Version-Not: no

        Package: libthing
        Architecture: arm64
        Version: 0.9

        Package: libthing
        Architecture: amd64
        Version: 1.0

        """

    /// Only where Debian's packages install is dpkg asked.
    func testOnlyPathsAPackageCouldHoldAreLookedFor() {
        for path in ["/usr/bin/sleep", "/lib/x86_64-linux-gnu/libc.so.6", "/bin/sh", "/sbin/init", "/opt/vendor/lib/x.so"] {
            XCTAssertTrue(DpkgDatabase.mayOwn(path), path)
        }
        for path in ["/usr/local/bin/app", "/tmp/crash", "/home/me/build/app", "/srv/app", "/usrx/bin/a", "[vdso]"] {
            XCTAssertFalse(DpkgDatabase.mayOwn(path), path)
        }
    }

    func testOwnersAndVersionsOfADatabaseMadeHere() throws {
        let root = try database(
            ["tool": "/.\n/usr/bin/tool\n", "libthing:amd64": "/usr/lib/libthing.so.1\n", "libthing:arm64": "/usr/lib/other\n"],
            status: Self.status)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let lookup = DpkgDatabase(root: root, owners: nil).packages(owning: ["/bin/tool", "/lib/libthing.so.1"])
        XCTAssertEqual(
            lookup.packages["/bin/tool"], PackageMetadata(name: "tool", version: "2.0-1", architecture: "amd64", source: .dpkg))
        XCTAssertEqual(
            lookup.packages["/lib/libthing.so.1"],
            PackageMetadata(name: "libthing", version: "1.0", architecture: "amd64", source: .dpkg))
        XCTAssertNil(lookup.note)
    }

    func testALargeOrUnreadableListIsSkippedAndSaid() throws {
        let big = String(repeating: "/usr/share/doc/big/" + String(repeating: "f", count: 44) + "\n", count: 270_000)  // 17 MB
        let root = try database(["big": big, "tool": "/usr/bin/tool\n"], status: Self.status)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let lookup = DpkgDatabase(root: root, owners: nil).packages(owning: ["/usr/bin/tool", "/usr/bin/missing"])
        XCTAssertEqual(lookup.packages["/usr/bin/tool"]?.version, "2.0-1")
        XCTAssertTrue(
            lookup.note?.contains("big.list") == true && lookup.note?.contains("more than the") == true, "\(lookup.note ?? "")")

        // A FIFO where a list should be: refused without blocking.
        XCTAssertEqual(mkfifo(root + "/info/fifo.list", 0o600), 0)
        let again = DpkgDatabase(root: root, owners: nil).packages(owning: ["/usr/bin/missing"])
        XCTAssertTrue(
            again.note?.contains("not a regular file") == true || again.note?.contains("more than") == true, "\(again.note ?? "")"
        )

        // Only root's files are read in production: a list of another owner is refused.
        if getuid() != 0 {
            let production = DpkgDatabase(root: root).packages(owning: ["/usr/bin/tool"])
            XCTAssertNil(production.packages["/usr/bin/tool"])
        }
    }

    func testTheDeadlineStopsTheScan() throws {
        var lists: [String: String] = [:]
        for index in 0..<200 { lists["package\(index)"] = String(repeating: "/usr/share/doc/p\(index)/x\n", count: 2000) }
        let root = try database(lists, status: Self.status)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let lookup = DpkgDatabase(root: root, owners: nil, deadlineNanoseconds: 0).packages(owning: ["/usr/bin/tool"])
        XCTAssertTrue(lookup.note?.contains("within 0 ms") == true, "\(lookup.note ?? "")")
    }

    func testAnswersAreKeptUntilTheDatabaseChanges() throws {
        let root = try database(["tool": "/usr/bin/tool\n"], status: Self.status)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let database = DpkgDatabase(root: root, owners: nil)
        XCTAssertNil(database.packages(owning: ["/usr/bin/new"]).packages["/usr/bin/new"])
        try "/usr/bin/new\n".write(toFile: root + "/info/newpkg.list", atomically: true, encoding: .utf8)
        // The directory's modification time moved (a new file): asked again.
        XCTAssertEqual(database.packages(owning: ["/usr/bin/new"]).packages["/usr/bin/new"]?.name, "newpkg")
    }
}
