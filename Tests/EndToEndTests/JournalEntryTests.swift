// End-to-end: each report is also the journal entry systemd-coredump would have written, read
// back by the real readers. A real systemd-journald started by the test in mount and PID
// namespaces of its own (Tests/Fixtures/journal/with-journald), the real host level
// (`crashport watch --host --keep-core`, the machine's core_pattern saved and restored), a real
// crash, then Debian's own coredumpctl (tools/fetch-validators unpacks it from the
// systemd-coredump package into tools/.cache/coredump) lists it, shows its stack, runs gdb on
// the kept core and dumps it for gdb. And the journal's bad sockets: a FIFO at the path, a
// socket no one reads (full), none at all: the report is written, the program dies as it would,
// and a log line says why there is no entry.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class JournalEntryTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("journal-entry")
    static let coredumpctl = TestSupport.repositoryRoot + "/tools/.cache/coredump/usr/bin/coredumpctl"

    /// Tests/Fixtures/host/host.c: its `threads N` crashes in crash_here ← call_crash ← main.
    /// Linked with a package note (`ld --package-metadata`), which the entry names.
    func crasher(_ directory: String) throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("host/host.c")], output: directory + "/crasher", flags: ["-O0", "-g", "-pthread"],
            linkFlags: ["-Xlinker", #"--package-metadata={"type":"deb","name":"crashjournal","version":"2.0-1"}"#])
    }

    func testCoredumpctlListsShowsAndDebugsTheHostLevelsCrash() throws {
        if let why = CorePattern.unavailable { throw XCTSkip("the host level cannot be installed: \(why)") }
        let journald = ["/lib/systemd/systemd-journald", "/usr/lib/systemd/systemd-journald"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        guard let journald else { throw XCTSkip("systemd-journald is not installed") }
        guard FileManager.default.isExecutableFile(atPath: Self.coredumpctl) else {
            throw XCTSkip("coredumpctl is not in tools/.cache/coredump (tools/fetch-validators could not download it)")
        }
        guard let gdb = TestSupport.which("gdb") else { throw XCTSkip("gdb is not installed") }
        guard let unshare = TestSupport.which("unshare") else { throw XCTSkip("unshare (util-linux) is not installed") }
        // A mount namespace only, and the pipe mode: the host level writes core_pattern, which
        // the kernel takes from the initial PID namespace alone, and a socket pattern (`@`)
        // from the initial mount namespace alone. with-journald stops its journald at its end.
        let namespaces = [unshare, "--mount", "--propagation", "private"]
        let probe = try TestSupport.run(namespaces + ["/bin/true"], timeout: 10)
        guard probe.status == .exited(0) else {
            throw XCTSkip("a new mount namespace cannot be made here: \(probe.stderr)")
        }
        let reservation = try CorePattern.Reservation()
        defer { reservation.release() }

        let directory = TestSupport.freshDirectory(in: Self.directory, "coredumpctl")
        let program = try crasher(directory)
        let host = "/tmp/cpj-" + UUID().uuidString.prefix(6)
        defer { try? FileManager.default.removeItem(atPath: host) }
        // In the namespaces: the host level with --keep-core, one crash, and coredumpctl reading
        // what journald keeps (its own files, in this namespace's /var/log/journal).
        let steps = """
            crashport=$1 program=$2 dir=$3 host=$4 coredumpctl=$5
            "$crashport" watch --socket "$dir/crashport.sock" --reports "$dir/reports" --spool "$dir/spool" \\
                --host --host-directory "$host" --host-mode pipe --keep-core >"$dir/watch.log" 2>&1 &
            watch=$!
            tries=0
            until grep -q "host: the machine's core handler" "$dir/watch.log"; do
                tries=$((tries + 1)); [ "$tries" -gt 300 ] && { echo "no host level"; cat "$dir/watch.log"; exit 3; }
                sleep 0.1
            done
            "$program" threads 2 || true
            tries=0
            until "$coredumpctl" --no-pager --quiet list "$program" >/dev/null 2>&1 \\
                && [ -n "$(find "$dir/reports" -name core.zst)" ]; do
                tries=$((tries + 1)); [ "$tries" -gt 600 ] && { echo "no entry"; cat "$dir/watch.log"; break; }
                sleep 0.1
            done
            echo "== list"
            "$coredumpctl" --no-pager list "$program"
            echo "== info"
            "$coredumpctl" --no-pager info "$program"
            echo "== gdb"
            timeout 120 "$coredumpctl" --no-pager --debugger-arguments="-q -batch -nx -ex bt" gdb "$program" </dev/null 2>&1
            echo "== dump"
            "$coredumpctl" --no-pager --output="$dir/core" dump "$program"
            kill -TERM "$watch"; wait "$watch"
            echo "== watch exited $?"
            """
        let run = try TestSupport.run(
            namespaces + [
                TestSupport.fixture("journal/with-journald"), journald, directory + "/journald.log", "/bin/sh", "-c",
                steps, "steps", TestSupport.crashport, program, directory, host, Self.coredumpctl,
            ], timeout: 300)
        let watchLog = (try? String(contentsOfFile: directory + "/watch.log", encoding: .utf8)) ?? ""
        let context = "\(run.stdout)\n\(run.stderr)\nwatch:\n\(watchLog)"
        XCTAssertEqual(run.status, .exited(0), context)
        let pattern = try String(contentsOfFile: CorePattern.patternFile, encoding: .utf8)
        XCTAssertEqual(pattern.trimmingCharacters(in: .newlines), reservation.pattern, "the sidecar put core_pattern back")
        let sections = Self.sections(run.stdout)

        // coredumpctl list: the crash, its signal, its program, and the core present.
        let list = sections["list"] ?? ""
        let row = list.split(separator: "\n").first { $0.contains(program) }.map(String.init) ?? ""
        XCTAssertTrue(row.contains("SIGSEGV"), context)
        XCTAssertTrue(row.contains("present"), "the kept core is the entry's file: \(context)")

        // coredumpctl info: the stack in systemd's form, the report's path.
        let info = sections["info"] ?? ""
        XCTAssertTrue(info.contains("Signal: 11 (SEGV)"), context)
        XCTAssertTrue(info.contains("Stack trace of thread"), context)
        let frames = ["crash_here", "call_crash", "main"].map { name in
            info.range(
                of: #"#\d+ +0x[0-9a-f]{16} "# + NSRegularExpression.escapedPattern(for: name + " (crasher + 0x"),
                options: .regularExpression)
        }
        XCTAssertTrue(frames.allSatisfy { $0 != nil }, "the stack, frame by frame: \(info)")
        if let first = frames[0], let last = frames[2] { XCTAssertLessThan(first.lowerBound, last.lowerBound, info) }
        XCTAssertTrue(info.contains("Storage: ") && info.contains("core.zst (present)"), info)
        XCTAssertTrue(info.contains("Report: " + directory + "/reports/0/"), info)
        XCTAssertTrue(info.contains("Package: crashjournal/2.0-1"), info)

        // coredumpctl gdb: gdb on the kept core, decompressed by coredumpctl, shows the frames.
        let debugged = sections["gdb"] ?? ""
        let backtrace = debugged.split(separator: "\n").filter { $0.hasPrefix("#") }
        XCTAssertTrue(
            containsInOrder(
                backtrace.compactMap { line in
                    line.split(separator: " ").first { ["crash_here", "call_crash", "main"].contains(String($0)) }
                        .map(String.init)
                }, ["crash_here", "call_crash", "main"]), debugged)

        // coredumpctl dump: a core gdb opens by itself.
        let core = directory + "/core"
        XCTAssertTrue(FileManager.default.fileExists(atPath: core), context)
        let opened = try TestSupport.run([gdb, "-q", "-batch", "-nx", "-ex", "bt", program, core], timeout: 120)
        XCTAssertTrue(opened.stdout.contains("crash_here"), opened.stdout + opened.stderr)

        // The report itself is the same crash: its id and signature are the entry's.
        let reports = directory + "/reports/0"
        let ids = ((try? FileManager.default.contentsOfDirectory(atPath: reports)) ?? []).filter { !$0.hasPrefix(".") }
        XCTAssertEqual(ids.count, 1, context)
    }

    /// A FIFO where journald's socket would be, a socket no one reads, and none at all: the
    /// report is written, the program dies of its signal, a log line says why (none for no
    /// journald at all).
    func testABadJournalSocketNeverHoldsAReport() throws {
        let directory = TestSupport.freshDirectory(in: Self.directory, "bad-socket")
        let program = try crasher(directory)

        func crash(_ socket: String, _ label: String) throws -> (RunResult, Int) {
            let reports = directory + "/reports-" + label
            let result = try TestSupport.run(
                [TestSupport.crashport, "run", "--reports", reports, "--", program, "threads", "1"],
                environment: ["CRASHPORT_JOURNAL_SOCKET": socket], timeout: 60)
            let ids = ((try? FileManager.default.contentsOfDirectory(atPath: reports)) ?? []).filter { !$0.hasPrefix(".") }
            return (result, ids.count)
        }

        let fifo = directory + "/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o666), 0)
        let (fifoRun, fifoReports) = try crash(fifo, "fifo")
        XCTAssertEqual(fifoRun.status, .signaled(SIGSEGV), fifoRun.stderr)
        XCTAssertEqual(fifoReports, 1, fifoRun.stderr)
        XCTAssertTrue(fifoRun.stderr.contains("journal: \(fifo) is not a socket"), fifoRun.stderr)

        // A datagram socket whose queue the test fills and never reads: journald stopped reading.
        let full = directory + "/full.sock"
        let listener = try Self.datagramSocket(boundTo: full)
        defer { close(listener) }
        Self.fill(full)
        let started = Date()
        let (fullRun, fullReports) = try crash(full, "full")
        XCTAssertEqual(fullRun.status, .signaled(SIGSEGV), fullRun.stderr)
        XCTAssertEqual(fullReports, 1, fullRun.stderr)
        XCTAssertTrue(fullRun.stderr.contains("journal: journald did not take the entry within 250 ms"), fullRun.stderr)
        print("a full journal socket: crashport run took \(Int(Date().timeIntervalSince(started) * 1000)) ms in all")

        // No journald: no entry, no word of it.
        let (noneRun, noneReports) = try crash(directory + "/absent.sock", "none")
        XCTAssertEqual(noneReports, 1, noneRun.stderr)
        XCTAssertFalse(noneRun.stderr.contains("journal:"), noneRun.stderr)
    }

    /// A socket the test reads: the entry in journald's native protocol, every field the
    /// report's; with --no-journal, nothing.
    func testTheEntryOnTheWireAndNoJournal() throws {
        let directory = TestSupport.freshDirectory(in: Self.directory, "wire")
        let program = try crasher(directory)
        let path = directory + "/journal.sock"
        let listener = try Self.datagramSocket(boundTo: path)
        defer { close(listener) }
        let reports = directory + "/reports"
        let result = try TestSupport.run(
            [TestSupport.crashport, "run", "--reports", reports, "--", program, "threads", "1"],
            environment: ["CRASHPORT_JOURNAL_SOCKET": path], timeout: 60)
        XCTAssertEqual(result.status, .signaled(SIGSEGV), result.stderr)
        let fields = try XCTUnwrap(Self.receiveEntry(listener), result.stderr)
        let id = try XCTUnwrap(
            ((try? FileManager.default.contentsOfDirectory(atPath: reports)) ?? []).first { !$0.hasPrefix(".") })
        let event = try Event.decode(try XCTUnwrap(FileManager.default.contents(atPath: reports + "/" + id + "/event.json")))
        XCTAssertEqual(fields["MESSAGE_ID"], "fc2e22bc6ee647b6b90729ab34a250b1")
        XCTAssertEqual(fields["COREDUMP_PID"], event.process?.pid.map { String($0.rawValue) })
        XCTAssertEqual(fields["COREDUMP_UID"], String(getuid()))
        XCTAssertEqual(fields["COREDUMP_SIGNAL"], String(SIGSEGV))
        XCTAssertEqual(fields["COREDUMP_SIGNAL_NAME"], "SIGSEGV")
        XCTAssertEqual(fields["COREDUMP_EXE"], event.process?.executable)
        XCTAssertEqual(fields["COREDUMP_COMM"], "crasher")
        XCTAssertEqual(fields["COREDUMP_CMDLINE"], "\(program) threads 1")
        XCTAssertEqual(fields["CRASHPORT_REPORT_ID"], id)
        XCTAssertEqual(fields["CRASHPORT_REPORT"], reports + "/" + id)
        XCTAssertEqual(fields["CRASHPORT_SIGNATURE"], event.signature)
        XCTAssertEqual(fields["CRASHPORT_FINGERPRINT"], event.fingerprint)
        XCTAssertNotNil(fields["COREDUMP_TIMESTAMP"].flatMap(UInt64.init))
        // The program's package from its note; libc's (dpkg's) among the modules'.
        XCTAssertEqual(fields["COREDUMP_PACKAGE_NAME"], "crashjournal")
        XCTAssertEqual(fields["COREDUMP_PACKAGE_VERSION"], "2.0-1")
        let packages = try XCTUnwrap(fields["COREDUMP_PACKAGE_JSON"])
        let modules = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(packages.utf8)) as? [String: [String: String]])
        XCTAssertEqual(modules[program]?["name"], "crashjournal", packages)
        XCTAssertEqual(modules[program]?["buildId"], event.modules?.first { $0.path == program }?.buildID, packages)
        XCTAssertTrue(modules.values.contains { $0["name"] == "libc6" }, packages)
        XCTAssertEqual(fields["CRASHPORT_RELEASE"], "crashjournal@2.0-1")
        let stack = try XCTUnwrap(fields["COREDUMP_STACKTRACE"])
        XCTAssertTrue(
            stack.hasPrefix("Stack trace of thread \(event.crashedThread.map { String($0.rawValue) } ?? "?"):\n#0  0x"), stack)
        XCTAssertTrue(fields["MESSAGE"]?.contains("of user \(getuid()) dumped core.") == true, fields["MESSAGE"] ?? "")
        XCTAssertTrue(fields["MESSAGE"]?.contains(stack) == true)

        let quiet = try TestSupport.run(
            [TestSupport.crashport, "run", "--no-journal", "--reports", reports, "--", program, "threads", "1"],
            environment: ["CRASHPORT_JOURNAL_SOCKET": path], timeout: 60)
        XCTAssertEqual(quiet.status, .signaled(SIGSEGV), quiet.stderr)
        XCTAssertNil(Self.receiveEntry(listener, waitMilliseconds: 300), "--no-journal wrote an entry")
    }

    // MARK: - Helpers

    /// `coredumpctl` output split at its "== NAME" lines.
    static func sections(_ text: String) -> [String: String] {
        var sections: [String: String] = [:]
        var name: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("== ") {
                name = String(line.dropFirst(3))
                sections[name!] = ""
            } else if let name {
                sections[name, default: ""] += line + "\n"
            }
        }
        return sections
    }

    /// `path` as a Unix socket's address.
    static func unixAddress(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            _ = path.utf8CString.withUnsafeBytes {
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(buffer.count - 1)))
            }
        }
        return address
    }

    static func datagramSocket(boundTo path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(errno)") }
        var address = unixAddress(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            close(fd)
            throw TestFailure("bind \(path): \(errno)")
        }
        chmod(path, 0o666)
        return fd
    }

    /// Sends datagrams to `path` until its queue is full.
    static func fill(_ path: String) {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        defer { close(fd) }
        var address = unixAddress(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { return }
        let datagram = [UInt8](repeating: 0x41, count: 1024)
        for _ in 0..<100_000 where send(fd, datagram, datagram.count, Int32(MSG_DONTWAIT)) >= 0 {}
    }

    /// One datagram from `fd`, decoded as journald's native protocol; nil when none comes.
    static func receiveEntry(_ fd: Int32, waitMilliseconds: Int32 = 5000) -> [String: String]? {
        var wait = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&wait, 1, waitMilliseconds) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        let got = recv(fd, &buffer, buffer.count, 0)
        guard got > 0 else { return nil }
        let bytes = Array(buffer[0..<got])
        var fields: [String: String] = [:]
        var at = 0
        while at < bytes.count {
            guard let end = bytes[at...].firstIndex(where: { $0 == UInt8(ascii: "=") || $0 == UInt8(ascii: "\n") }) else { break }
            let name = String(decoding: bytes[at..<end], as: UTF8.self)
            if bytes[end] == UInt8(ascii: "=") {
                let stop = bytes[(end + 1)...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
                fields[name] = String(decoding: bytes[(end + 1)..<stop], as: UTF8.self)
                at = stop + 1
            } else {
                guard end + 9 <= bytes.count else { break }
                let length = bytes[(end + 1)..<(end + 9)].reversed().reduce(0) { $0 << 8 | Int($1) }
                let start = end + 9
                guard start + length <= bytes.count else { break }
                fields[name] = String(decoding: bytes[start..<(start + length)], as: UTF8.self)
                at = start + length + 1
            }
        }
        return fields
    }
}
