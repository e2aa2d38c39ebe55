// End-to-end: the Debian package (tools/package), as an administrator meets it. Built from this
// tree, lintian-clean where lintian is installed; installed with apt into a fresh Debian root
// file system the test makes (mmdebstrap, from Debian's own packages) and enters with chroot;
// `crashport doctor` there; a program built against the installed pkg-config file crashes and
// the packaged sidecar reports it; removal leaves only the reports, and purge leaves the root
// file system as it was. The man pages and completions it ships are checked against the command
// line's own --help.
//
// Needs root, mmdebstrap and Debian's mirror (tools/install installs mmdebstrap); skipped with
// the reason otherwise.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class PackageTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("package")

    /// The package, built once per test run (a release build: minutes on a fresh machine).
    static let built = Result<String, Error> {
        let output = directory + "/out"
        // Its own build directory: SwiftPM locks .build while `swift test` runs there.
        var environment = ProcessInfo.processInfo.environment
        environment["CRASHPORT_SCRATCH"] = TestSupport.repositoryRoot + "/.build-package"
        let result = try TestSupport.run(
            [TestSupport.repositoryRoot + "/tools/package", "--output", output], environment: environment, timeout: 3600)
        guard result.status == .exited(0), let path = result.stdout.split(separator: "\n").last.map(String.init),
            path.hasSuffix(".deb")
        else { throw TestFailure("tools/package failed:\n\(result.stderr)\n\(result.stdout)") }
        // lintian's verdict: nothing but its own chatter about running as root.
        let tags = result.stderr.split(separator: "\n").filter { $0.hasPrefix("E: ") || $0.hasPrefix("W: ") }
        guard tags.isEmpty else { throw TestFailure("lintian:\n" + tags.joined(separator: "\n")) }
        return path
    }

    func package() throws -> String {
        guard getuid() == 0 else { throw XCTSkip("needs root (dpkg-deb's owner, chroot)") }
        for tool in ["dpkg-deb", "dpkg-shlibdeps", "patchelf"] where TestSupport.which(tool) == nil {
            throw XCTSkip("\(tool) is missing (tools/install --deps-only installs it)")
        }
        return try Self.built.get()
    }

    /// What the package holds, unpacked.
    func unpacked(_ package: String) throws -> String {
        let root = Self.directory + "/unpacked-" + UUID().uuidString.prefix(6)
        let result = try TestSupport.run(["dpkg-deb", "-x", package, root])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        return root
    }

    /// Every subcommand has its page (crashport-watch(1), named for `man crashport-watch`), and
    /// every option its --help lists is in its page; the configuration file and the units have
    /// theirs; bash completes the subcommands and their options.
    func testManPagesAndCompletionsFollowTheCommandLine() throws {
        let root = try unpacked(try package())
        let crashport = root + "/usr/bin/crashport"
        let subcommands = [
            "run", "watch", "list", "show", "stats", "symbolicate", "doctor", "upload", "send", "discard", "consent",
            "test-crash", "core-handler", "host", "host status", "host restore",
        ]
        for subcommand in [""] + subcommands {
            let name = (["crashport"] + subcommand.split(separator: " ").map(String.init)).joined(separator: "-")
            let page = root + "/usr/share/man/man1/\(name).1.gz"
            XCTAssertTrue(FileManager.default.fileExists(atPath: page), "no \(name)(1)")
            let rendered = try TestSupport.run(
                ["man", "-l", page], environment: ["MANWIDTH": "200", "PATH": "/usr/bin:/bin"])
            XCTAssertEqual(rendered.status, .exited(0), rendered.stderr)
            let text = rendered.stdout.replacingOccurrences(of: "\u{8}.", with: "", options: .regularExpression)
            XCTAssertTrue(text.contains("NAME\n     \(name) "), "\(name)(1) names itself \(name): \(text.prefix(300))")
            let help = try TestSupport.run([crashport] + subcommand.split(separator: " ").map(String.init) + ["--help"])
            let options = Set(
                help.stdout.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "-") }).filter {
                    $0.hasPrefix("--") && $0.count > 3
                }.map(String.init))
            XCTAssertFalse(subcommand != "" && subcommand != "host" && options.isEmpty, "\(subcommand): no options in --help")
            for option in options {
                XCTAssertTrue(text.contains(option), "\(name)(1) lacks \(option), which --help lists")
            }
        }
        for page in ["man5/crashport.toml.5.gz", "man8/crashport.service.8.gz", "man8/crashport.socket.8.gz"] {
            let rendered = try TestSupport.run(["man", "-l", root + "/usr/share/man/" + page])
            XCTAssertEqual(rendered.status, .exited(0), page + rendered.stderr)
        }
        // crashport.toml(5) names every key the configuration accepts.
        let toml = try TestSupport.run(["man", "-l", root + "/usr/share/man/man5/crashport.toml.5.gz"]).stdout
        let rejected = try TestSupport.run(
            [crashport, "upload", "--config", try configuration(["bogus = 1"]), "--reports", Self.directory + "/none"])
        let known = try XCTUnwrap(rejected.stderr.range(of: "(known: ").map { rejected.stderr[$0.upperBound...] })
        for key in known.prefix(while: { $0 != ")" }).split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            XCTAssertTrue(toml.contains(key), "crashport.toml(5) lacks upload.\(key)")
        }

        // bash: the subcommands, then a subcommand's options.
        let completion = root + "/usr/share/bash-completion/completions/crashport"
        func complete(_ words: [String]) throws -> [String] {
            let script = """
                source '\(completion)'
                COMP_WORDS=(\(words.map { "'\($0)'" }.joined(separator: " "))); COMP_CWORD=\(words.count - 1)
                COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
                _crashport crashport "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
                printf '%s\\n' "${COMPREPLY[@]}"
                """
            let result = try TestSupport.run(["bash", "-c", script], environment: ["PATH": root + "/usr/bin:/usr/bin:/bin"])
            XCTAssertEqual(result.status, .exited(0), result.stderr)
            return result.stdout.split(separator: "\n").map(String.init)
        }
        let first = try complete(["crashport", ""])
        XCTAssertTrue(Set(["run", "watch", "list", "symbolicate", "host"]).isSubset(of: first), "\(first)")
        let watch = try complete(["crashport", "watch", "--ho"])
        XCTAssertTrue(watch.contains("--host") && watch.contains("--host-mode"), "\(watch)")
    }

    /// The packaged system units pass systemd's own check (with /usr/bin/crashport pointed at the
    /// unpacked binary, which is not installed on this machine), with the host level's drop-in.
    func testThePackagedUnitsVerify() throws {
        let root = try unpacked(try package())
        guard let analyze = TestSupport.which("systemd-analyze", also: ["/usr/bin"]) else {
            throw XCTSkip("no systemd-analyze (Debian: systemd)")
        }
        let units = Self.directory + "/units-" + UUID().uuidString.prefix(6)
        try FileManager.default.createDirectory(atPath: units + "/crashport.service.d", withIntermediateDirectories: true)
        func copy(_ from: String, _ to: String) throws {
            try String(contentsOfFile: root + from, encoding: .utf8)
                .replacingOccurrences(of: "/usr/bin/crashport", with: root + "/usr/bin/crashport")
                .write(toFile: units + "/" + to, atomically: true, encoding: .utf8)
        }
        try copy("/usr/lib/systemd/system/crashport.service", "crashport.service")
        try copy("/usr/lib/systemd/system/crashport.socket", "crashport.socket")
        try copy("/usr/share/crashport/crashport-host.conf", "crashport.service.d/host.conf")
        var environment = ProcessInfo.processInfo.environment
        environment["SYSTEMD_UNIT_PATH"] = units + ":"
        for unit in ["crashport.service", "crashport.socket"] {
            let result = try TestSupport.run([analyze, "verify", units + "/" + unit], environment: environment)
            XCTAssertEqual(result.status, .exited(0), unit + ": " + result.stderr)
            XCTAssertEqual(result.stderr.trimmingCharacters(in: .whitespacesAndNewlines), "", result.stderr)
        }
    }

    func configuration(_ lines: [String]) throws -> String {
        let path = Self.directory + "/crashport-\(UUID().uuidString.prefix(6)).toml"
        try (["[upload]"] + lines).joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// apt installs it into a fresh Debian root, pulling only Debian's packages; it works there;
    /// removal and purge put the root back as it was.
    func testInstalledIntoAFreshDebianAndRemovedWithoutATrace() throws {
        let package = try package()
        guard TestSupport.which("mmdebstrap") != nil else {
            throw XCTSkip("mmdebstrap is missing (tools/install --deps-only installs it)")
        }
        let root = Self.directory + "/root-" + UUID().uuidString.prefix(6)
        let made = try TestSupport.run(["mmdebstrap", "--variant=apt", "--quiet", "bookworm", root], timeout: 900)
        guard made.status == .exited(0) else {
            throw XCTSkip("mmdebstrap could not make a Debian root here (no mirror?): \(made.stderr.suffix(400))")
        }
        defer { try? FileManager.default.removeItem(atPath: root) }
        // /proc and /dev for the chroot (ptrace, /proc/PID/mem), unmounted however the test ends.
        for (source, target, type) in [("proc", "/proc", "proc"), ("/dev", "/dev", "")] {
            let mounted = try TestSupport.run(
                type.isEmpty ? ["mount", "--bind", source, root + target] : ["mount", "-t", type, source, root + target])
            guard mounted.status == .exited(0) else { throw XCTSkip("cannot mount \(target) in the chroot: \(mounted.stderr)") }
        }
        defer {
            _ = try? TestSupport.run(["umount", "-l", root + "/dev"])
            _ = try? TestSupport.run(["umount", "-l", root + "/proc"])
        }
        func inRoot(_ command: [String], timeout: TimeInterval = 600) throws -> RunResult {
            try TestSupport.run(
                ["chroot", root] + command, environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"],
                timeout: timeout)
        }
        let before = try files(in: root)

        let deb = "/tmp/" + (package as NSString).lastPathComponent
        try FileManager.default.copyItem(atPath: package, toPath: root + deb)
        // mmdebstrap leaves no package lists: an administrator's apt-get update first.
        let updated = try inRoot(["apt-get", "update"], timeout: 600)
        guard updated.status == .exited(0) else { throw XCTSkip("apt-get update in the new root failed: \(updated.stderr)") }
        let installing = Date()
        let installed = try inRoot(["apt-get", "install", "-y", "--no-install-recommends", deb], timeout: 900)
        XCTAssertEqual(installed.status, .exited(0), installed.stderr + installed.stdout)
        let pulled = installed.stdout.split(separator: "\n").filter { $0.hasPrefix("Get:") && !$0.contains(deb) }
        XCTAssertTrue(pulled.allSatisfy { $0.contains("deb.debian.org") }, "only Debian's packages: \(pulled)")
        let doctor = try inRoot(["crashport", "doctor"])
        XCTAssertEqual(doctor.status, .exited(0), doctor.stdout + doctor.stderr)
        XCTAssertTrue(doctor.stdout.contains("stub"), doctor.stdout)

        // The packaged sidecar, and a program built against the installed crashport.pc.
        let flags = try TestSupport.run(
            ["pkg-config", "--cflags", "--libs", "crashport"],
            environment: [
                "PKG_CONFIG_SYSROOT_DIR": root, "PKG_CONFIG_LIBDIR": root + "/usr/lib/x86_64-linux-gnu/pkgconfig",
            ])
        XCTAssertEqual(flags.status, .exited(0), flags.stderr)
        _ = try TestSupport.compile(
            [TestSupport.repositoryRoot + "/examples/c/app.c"], output: root + "/usr/local/bin/app", flags: ["-O0", "-g"],
            linkFlags: flags.stdout.split(whereSeparator: \.isWhitespace).map(String.init))
        let sidecar = Process()
        sidecar.executableURL = URL(fileURLWithPath: "/usr/sbin/chroot")
        sidecar.arguments = [root, "/usr/bin/crashport", "watch"]
        sidecar.standardOutput = FileHandle.nullDevice
        sidecar.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try sidecar.run()
        defer {
            if sidecar.isRunning { kill(sidecar.processIdentifier, SIGKILL) }
        }
        try waitUntil("the packaged sidecar listens", timeout: 30) {
            FileManager.default.fileExists(atPath: root + "/run/crashport/crashport.sock")
        }
        let crashed = try inRoot(["env", "CRASHPORT_SOCKET=/run/crashport/crashport.sock", "/usr/local/bin/app"])
        XCTAssertEqual(crashed.status, .signaled(SIGSEGV), crashed.stderr)
        let reports = root + "/var/lib/crashport/reports/0"
        try waitUntil("its report", timeout: 60) {
            ((try? FileManager.default.contentsOfDirectory(atPath: reports)) ?? []).contains { !$0.hasPrefix(".") }
        }
        print("PackageTests: from apt install to the first report: \(Int(Date().timeIntervalSince(installing) * 1000)) ms")
        // On disk at its first step; whole (symbolicated) moments later.
        try waitUntil("its report whole", timeout: 60) {
            ((try? FileManager.default.contentsOfDirectory(atPath: reports)) ?? []).contains { id in
                guard !id.hasPrefix("."), let data = FileManager.default.contents(atPath: reports + "/" + id + "/event.json"),
                    let event = try? Event.decode(data)
                else { return false }
                return event.stage == nil
            }
        }
        let listed = try inRoot(["crashport", "list", "--reports", "/var/lib/crashport/reports/0"])
        XCTAssertTrue(listed.stdout.contains("parse_record"), listed.stdout + listed.stderr)
        kill(sidecar.processIdentifier, SIGTERM)
        sidecar.waitUntilExit()

        // Removal: every file of the package gone, the reports kept; purge: those too.
        let owned = try inRoot(["dpkg", "-L", "crashport"]).stdout.split(separator: "\n").map(String.init)
        let removed = try inRoot(["apt-get", "remove", "-y", "crashport"])
        XCTAssertEqual(removed.status, .exited(0), removed.stderr)
        for path in owned where path.hasPrefix("/usr/") {
            var info = stat()
            let exists = lstat(root + path, &info) == 0 && info.st_mode & S_IFMT != S_IFDIR
            XCTAssertFalse(exists, "\(path) stays after removal")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: reports), "removal keeps the reports")
        let purged = try inRoot(["apt-get", "purge", "-y", "--autoremove", "crashport"])
        XCTAssertEqual(purged.status, .exited(0), purged.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: root + "/var/lib/crashport"), "purge removes the reports")
        _ = try inRoot(["apt-get", "autoremove", "--purge", "-y"])
        try FileManager.default.removeItem(atPath: root + deb)
        try FileManager.default.removeItem(atPath: root + "/usr/local/bin/app")
        let after = try files(in: root)
        XCTAssertEqual(after.subtracting(before), [], "left behind by install and purge")
    }

    /// The root file system's files, but for apt's and dpkg's own records, caches and logs.
    func files(in root: String) throws -> Set<String> {
        let result = try TestSupport.run(
            [
                "find", root, "-xdev", "(", "-path", root + "/proc", "-o", "-path", root + "/dev", "-o", "-path",
                root + "/var/lib/dpkg", "-o", "-path", root + "/var/lib/apt", "-o", "-path", root + "/var/cache", "-o",
                "-path", root + "/var/log", "-o", "-path", root + "/tmp", "-o", "-path", root + "/run", ")", "-prune", "-o",
                "-print",
            ], timeout: 120)
        return Set(result.stdout.split(separator: "\n").map { String($0.dropFirst(root.count)) })
    }
}
