// End-to-end: attachments from memory (crashport_attach_text, _bytes, _ring, _append,
// crashport_detach_memory). Tests/Fixtures/api/memory_attach.c sets a text, bytes of a content
// type of its own and a 64 KiB log ring it appends 10000 lines to, then crashes (or reports a
// handled error) under `crashport run` and a sidecar; the report's attachments/ hold exactly what
// the program kept, the ring's last 64 KiB oldest first; threads appending while another thread
// crashes; every limit; and the content types reach Sentry over real HTTP on 127.0.0.1.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class MemoryAttachmentTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("memory-attachments")

    func fresh(_ name: String) -> String {
        TestSupport.freshDirectory(in: Self.directory, name)
    }

    func program(in directory: String) throws -> String {
        let libraries = (try TestSupport.stub() as NSString).deletingLastPathComponent
        return try TestSupport.compile(
            [TestSupport.fixture("api/memory_attach.c")], output: directory + "/memory_attach",
            flags: ["-O1", "-g", "-pthread", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
    }

    /// The fixture's log: 10000 lines, of which the ring keeps the last 64 KiB.
    static let log = (0..<10000).map { String(format: "line %05d\n", $0) }.joined()

    /// What `crash` mode attached, as the report in `directory` holds it.
    func assertAttached(_ event: Event, directory: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let memory = (event.attachments ?? []).filter { $0.scope == AttachmentRecord.memoryScope }
        XCTAssertEqual(
            memory.map(\.name), ["state.txt", "blob.bin", "app.log"], "detached: none of gone.txt", file: file, line: line)
        XCTAssertEqual(
            memory.map(\.contentType), ["text/plain; charset=utf-8", "application/x-ledger-state", "text/plain; charset=utf-8"],
            file: file, line: line)
        func contents(_ name: String) -> [UInt8] {
            Array(FileManager.default.contents(atPath: directory + "/attachments/" + name) ?? Data())
        }
        XCTAssertEqual(
            String(decoding: contents("state.txt"), as: UTF8.self), "state: serving\nqueue: 3\n", file: file, line: line)
        XCTAssertEqual(contents("blob.bin"), (0..<256).map { UInt8($0) }, file: file, line: line)
        XCTAssertEqual(
            contents("app.log"), Array(Self.log.utf8.suffix(64 * 1024)), "the ring's last 64 KiB", file: file, line: line)
        let ring = try XCTUnwrap(memory.last, file: file, line: line)
        XCTAssertEqual(ring.size, UInt64(Self.log.utf8.count), file: file, line: line)
        XCTAssertEqual(ring.copied, 64 * 1024, file: file, line: line)
        XCTAssertNil(ring.partial, file: file, line: line)
    }

    func testAttachmentsFromMemoryUnderRun() throws {
        let work = fresh("run")
        let program = try program(in: work)
        let run = try TestSupport.crashportRun([program, "crash"], reports: work + "/reports")
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        XCTAssertTrue(run.result.stdout.contains("gone 0 0"), run.result.stdout)
        let event = try run.event()
        try assertAttached(event, directory: run.reportsDirectory + "/" + run.reportIDs[0])
        let shown = try TestSupport.run([TestSupport.crashport, "show", "--reports", run.reportsDirectory, run.reportIDs[0]])
        XCTAssertTrue(shown.stdout.contains("app.log"), shown.stdout)

        // A handled error carries them too.
        let error = try TestSupport.crashportRun([program, "error"], reports: work + "/reports-error")
        XCTAssertEqual(error.result.status, .exited(0), error.result.stderr)
        let reported = try error.event()
        XCTAssertEqual(reported.kind, .error)
        try assertAttached(reported, directory: error.reportsDirectory + "/" + error.reportIDs[0])
    }

    func testAttachmentsFromMemoryUnderTheSidecar() throws {
        let work = fresh("sidecar")
        let program = try program(in: work)
        let sidecar = try SidecarProcess(directory: work)
        defer { sidecar.stop() }
        let result = try TestSupport.run([program, "crash"], environment: ["CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(result.status, .signaled(SIGSEGV), result.stderr)
        let event = try XCTUnwrap(try sidecar.waitForReports(1).first)
        try assertAttached(event, directory: sidecar.reportsDirectory() + "/" + (event.id ?? ""))
    }

    /// Four threads append to a 4 KiB ring and set a text as fast as they can while the main
    /// thread crashes: the crash is reported at once, with the ring (a torn last write marked).
    func testThreadsAttachingWhileAnotherCrashes() throws {
        let work = fresh("threads")
        let program = try program(in: work)
        for _ in 0..<3 {
            let run = try TestSupport.crashportRun([program, "threads"], reports: work + "/reports", timeout: 60)
            XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
            let event = try run.event(run.reportIDs.count - 1)
            let ring = try XCTUnwrap(event.attachments?.first { $0.name == "app.log" }, "\(event.attachments ?? [])")
            XCTAssertEqual(ring.copied, 4096)
            XCTAssertEqual(ring.contentType, "text/plain")
            let state = try XCTUnwrap(event.attachments?.first { $0.name == "state.txt" })
            XCTAssertTrue([19, 20].contains(state.copied ?? 0), "\(state)")
        }
    }

    /// Every limit said by its answer; an 8 MiB buffer kept as its first 7 MiB, marked; a name
    /// set again replaced.
    func testLimits() throws {
        let work = fresh("limits")
        let program = try program(in: work)
        let run = try TestSupport.crashportRun([program, "limits"], reports: work + "/reports")
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        for line in [
            "8 MiB: 1", "slash: 1", "dots: 1", "reserved: 0", "empty: 1", "long: 1", "append to a buffer: 1", "append to none: 1",
            "empty ring: 1",
            "seventeenth: 1", "type cut: 1", "set again: 0",
        ] {
            XCTAssertTrue(run.result.stdout.contains(line + "\n"), "\(line): \(run.result.stdout)")
        }
        let event = try run.event()
        let memory = (event.attachments ?? []).filter { $0.scope == AttachmentRecord.memoryScope }
        XCTAssertEqual(memory.count, 16, "\(memory)")
        let big = try XCTUnwrap(memory.first { $0.name == "big.bin" })
        XCTAssertEqual(big.copied, 1, "set again: one byte")
        XCTAssertEqual(big.contentType, "application/octet-stream")
        // A program's "system.log" never takes the place of the watcher's system.log.
        let forged = try XCTUnwrap(memory.first { $0.name == "system.log" })
        XCTAssertEqual(forged.file, "attachments/2-system.log")
        if let system = event.attachments?.first(where: { $0.scope == AttachmentRecord.systemScope }) {
            XCTAssertEqual(system.file, "attachments/system.log")
        }
    }

    /// `crashport upload` to Sentry: each attachment from memory is an `event.attachment` item
    /// with the program's content type.
    func testContentTypesReachSentry() throws {
        let work = fresh("sentry")
        let program = try program(in: work)
        let run = try TestSupport.crashportRun([program, "crash"], reports: work + "/reports")
        XCTAssertEqual(run.reportIDs.count, 1, run.result.stderr)
        let sentry = try Collector(answers: [["status": 200, "body": "{\"id\":\"$EVENT_ID\"}"]], directory: work)
        let uploaded = try TestSupport.run(
            [
                TestSupport.crashport, "upload", "--reports", run.reportsDirectory, "--sentry-dsn",
                "http://publickey@127.0.0.1:\(sentry.port)/42",
            ])
        XCTAssertEqual(uploaded.status, .exited(0), uploaded.stderr)
        let items = sentry.requests.first?["items"] as? [[String: Any]] ?? []
        let attached = items.filter { $0["attachment_type"] as? String == "event.attachment" }
        var types: [String: String] = [:]
        for item in attached { types[item["filename"] as? String ?? ""] = item["content_type"] as? String ?? "" }
        XCTAssertEqual(types["blob.bin"], "application/x-ledger-state", "\(attached)")
        XCTAssertEqual(types["app.log"], "text/plain; charset=utf-8", "\(attached)")
        let log = try XCTUnwrap(attached.first { $0["filename"] as? String == "app.log" }?["saved"] as? String)
        XCTAssertEqual(Array(FileManager.default.contents(atPath: log) ?? Data()), Array(Self.log.utf8.suffix(64 * 1024)))
    }
}
