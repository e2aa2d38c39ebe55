// The after_send hook without a server: what it is told of an attempt (arguments and JSON), and
// how it is bounded, with a real program each time: its output cut at the limit, a hook that
// hangs killed, one that fails or cannot be run only said.

import Foundation
import TestSupport
import XCTest

@testable import Upload

final class AfterSendTests: XCTestCase {
    let collector = try! UploadDestination.crashpad(checking: "https://crashes.example/submit?key=k")

    func notice(_ entry: UploadState.Entry) -> AfterSend.Notice {
        AfterSend.Notice(
            reportID: "20261126T2100-1-ab", report: "/r/20261126T2100-1-ab", title: "SIGSEGV in parse", destination: collector,
            entry: entry)
    }

    func object(_ notice: AfterSend.Notice) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(notice.json))) as? [String: Any] ?? [:]
    }

    /// upload.json's entry after an attempt, as the hook is told it: sent with the server's id,
    /// pending as retrying with the reason and the next attempt, failed with the reason.
    func testWhatTheHookIsToldOfEachResult() {
        let sent = notice(UploadState.Entry(status: .sent, attempts: 2, serverID: "bp-1", sentAt: 1_795_000_000))
        XCTAssertEqual(sent.arguments, ["20261126T2100-1-ab", "https://crashes.example/submit?key=k", "sent", "bp-1"])
        let told = object(sent)
        XCTAssertEqual(told["result"] as? String, "sent")
        XCTAssertEqual(told["server_id"] as? String, "bp-1")
        XCTAssertEqual(told["kind"] as? String, "crashpad")
        XCTAssertEqual(told["title"] as? String, "SIGSEGV in parse")
        XCTAssertEqual(told["report"] as? String, "/r/20261126T2100-1-ab")
        XCTAssertEqual(told["attempts"] as? Int, 2)
        XCTAssertNil(told["error"])
        XCTAssertNil(told["next_attempt"])

        let retrying = notice(
            UploadState.Entry(
                status: .pending, attempts: 1, nextAttempt: 1_795_000_900, notBefore: 1_795_003_600, lastError: "HTTP 503"))
        XCTAssertEqual(retrying.arguments.suffix(2), ["retrying", "HTTP 503"])
        XCTAssertEqual(
            object(retrying)["next_attempt"] as? String, "2026-11-18T12:06:40Z", "the later of the two waits: the server's")
        XCTAssertNil(object(retrying)["server_id"])

        let failed = notice(UploadState.Entry(status: .failed, attempts: 1, lastError: "HTTP 413: not retried"))
        XCTAssertEqual(failed.arguments.suffix(2), ["failed", "HTTP 413: not retried"])
        XCTAssertEqual(object(failed)["error"] as? String, "HTTP 413: not retried")
        XCTAssertNil(object(failed)["next_attempt"])
        // A sent report whose server gave no id: an empty argument, no key.
        let anonymous = notice(UploadState.Entry(status: .sent, attempts: 1))
        XCTAssertEqual(anonymous.arguments.last, "")
        XCTAssertNil(object(anonymous)["server_id"])
    }

    /// A real hook each time: it gets the arguments and the JSON; its stdout and stderr are said,
    /// at most the limit; a failure, a hang (killed), a missing program are said and no more.
    func testTheHookIsBounded() throws {
        let directory = TestSupport.temporaryDirectory("after-send")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func hook(_ name: String, _ script: String) throws -> AfterSend {
            let path = directory + "/" + name
            try Data("#!/bin/sh\n\(script)\n".utf8).write(to: URL(fileURLWithPath: path))
            chmod(path, 0o755)
            return AfterSend(program: path)
        }
        let told = notice(UploadState.Entry(status: .sent, attempts: 1, serverID: "bp-1"))
        let prefix = "20261126T2100-1-ab: after_send"

        let recorder = try hook("record", "printf '%s\\n' \"$@\" > \(directory)/arguments; cat > \(directory)/stdin")
        XCTAssertEqual(recorder.run(told), [])
        XCTAssertEqual(
            try String(contentsOfFile: directory + "/arguments", encoding: .utf8),
            "20261126T2100-1-ab\nhttps://crashes.example/submit?key=k\nsent\nbp-1\n")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: directory + "/stdin")), Data(told.json))

        let failing = try hook("failing", "echo delivered; echo 'no mail server' >&2; exit 3")
        XCTAssertEqual(
            failing.run(told),
            ["\(prefix): delivered", "\(prefix): no mail server", "\(prefix) \(failing.program) exited 3"])

        // 100 000 bytes of "y\n": 4096 of them said, the rest read (the hook is never blocked on
        // a full pipe) and dropped.
        let loud = try hook("loud", "yes | head -c 100000")
        let said = loud.run(told)
        XCTAssertEqual(said.count, 2048 + 1)
        XCTAssertEqual(said.first, "\(prefix): y")
        XCTAssertEqual(said.last, "\(prefix): … 95904 more bytes of its output not shown")

        // Past its time it is killed, with what it started: were it waited for, this test would not end.
        var slow = try hook("slow", "sleep 100000 & echo $! > \(directory)/child; wait")
        slow.timeout = 0.3
        XCTAssertEqual(slow.run(told), ["\(prefix) \(slow.program) took longer than 0.3 s; killed"])
        let child = try XCTUnwrap(
            Int32(
                try String(contentsOfFile: directory + "/child", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
        )
        XCTAssertTrue(Self.dies(child), "the sleep it started is killed with it (its process group)")

        let missing = AfterSend(program: directory + "/missing")
        XCTAssertEqual(missing.run(told), ["\(prefix) \(missing.program) cannot be run: No such file or directory"])
    }

    /// Whether process `pid` is gone or a zombie within 10 s (SIGKILL takes effect when the
    /// kernel next schedules it; its new parent reaps it when it will).
    static func dies(_ pid: Int32) -> Bool {
        for _ in 0..<1000 {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let state = stat.split(separator: ")").last?.split(separator: " ").first
            else { return true }
            if state == "Z" || state == "X" { return true }
            usleep(10_000)
        }
        return false
    }
}
