// JournalEntry's fields and encoding without a journald: which MESSAGE_ID a report gets, the
// native protocol's two forms (a value with a newline is length-prefixed, so a hostile
// function name cannot start a field of its own), the caps. JournalEntryTests (end to end)
// reads real entries back with the real journald and coredumpctl.

import Foundation
import ReportModel
import XCTest

@testable import Watcher

final class JournalEntryUnitTests: XCTestCase {
    func event(kind: ReportKind, signal: Int32?, function: String = "crash_here") -> Event {
        var event = Event()
        event.id = "20261129T000000.000Z-42-abcd"
        event.kind = kind
        event.timestamp = "2026-11-29T23:10:03.123Z"
        var process = ProcessInfoRecord(
            pid: ProcessID(rawValue: 42), executable: "/usr/bin/a-very-long-program-name", arguments: ["a", "b"])
        process.unit = "demo.service"
        process.cgroup = "/system.slice/demo.service"
        event.process = process
        if let signal { event.signal = SignalRecord(number: signal, name: "SIG\(signal)") }
        let frame = FrameRecord(
            pc: HexAddress(0x1234), module: "/usr/bin/a-very-long-program-name", moduleOffset: HexAddress(0x234),
            function: function)
        event.threads = [ThreadRecord(tid: ThreadID(rawValue: 42), crashed: true, frames: [frame])]
        event.signature = "crash_here"
        event.fingerprint = "0123456789abcdef"
        return event
    }

    func fields(_ entry: JournalEntry) -> [String: String] {
        Dictionary(entry.fields.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    func testACoreSignalIsACoredumpAndAnythingElseABacktrace() {
        let owner = JournalEntry.Owner(uid: 1000, gid: 100)
        let crash = fields(
            JournalEntry(event(kind: .crash, signal: SIGSEGV), reportPath: "/r", owner: owner, hostname: "h", core: "/r/core.zst")
        )
        XCTAssertEqual(crash["MESSAGE_ID"], JournalEntry.coredumpMessageID)
        XCTAssertEqual(crash["COREDUMP_SIGNAL"], String(SIGSEGV))
        XCTAssertEqual(crash["COREDUMP_UID"], "1000")
        XCTAssertEqual(crash["COREDUMP_GID"], "100")
        XCTAssertEqual(crash["COREDUMP_COMM"], "a-very-long-pro", "15 bytes, as the kernel's comm")
        XCTAssertEqual(crash["COREDUMP_UNIT"], "demo.service")
        XCTAssertEqual(crash["COREDUMP_FILENAME"], "/r/core.zst")
        XCTAssertEqual(crash["COREDUMP_TIMESTAMP"], "1795993803123000")
        XCTAssertEqual(
            crash["COREDUMP_STACKTRACE"],
            "Stack trace of thread 42:\n#0  0x0000000000001234 crash_here (a-very-long-program-name + 0x234)")
        XCTAssertTrue(crash["MESSAGE"]?.hasPrefix("Process 42 (a-very-long-pro) of user 1000 dumped core.") == true)

        let killed = fields(
            JournalEntry(event(kind: .termination, signal: SIGKILL), reportPath: "/r", owner: owner, hostname: nil, core: nil))
        XCTAssertEqual(killed["MESSAGE_ID"], JournalEntry.backtraceMessageID)
        XCTAssertNil(killed["COREDUMP_FILENAME"])
        var error = event(kind: .error, signal: nil)
        error.exception = ExceptionRecord(type: "ParseError", message: "bad input")
        let handled = fields(JournalEntry(error, reportPath: "/r", owner: owner, hostname: nil, core: nil))
        XCTAssertEqual(handled["MESSAGE_ID"], JournalEntry.backtraceMessageID)
        XCTAssertEqual(handled["COREDUMP_SIGNAL"], "error: ParseError")
        XCTAssertEqual(handled["PRIORITY"], "3")
    }

    /// A function name holding a newline and a would-be field: length-prefixed, one field.
    func testTheNativeProtocolKeepsAHostileValueInItsField() throws {
        let hostile = event(kind: .crash, signal: SIGABRT, function: "evil\nCOREDUMP_UID=0\n")
        let entry = JournalEntry(hostile, reportPath: "/r", owner: .init(uid: 7, gid: 7), hostname: nil, core: nil)
        let bytes = entry.encoded
        // Decoded as journald does: NAME=value\n, or NAME\n + 64-bit LE length + value + \n.
        var decoded: [(String, String)] = []
        var at = 0
        while at < bytes.count {
            let end = try XCTUnwrap(bytes[at...].firstIndex { $0 == UInt8(ascii: "=") || $0 == UInt8(ascii: "\n") })
            let name = String(decoding: bytes[at..<end], as: UTF8.self)
            if bytes[end] == UInt8(ascii: "=") {
                let stop = try XCTUnwrap(bytes[(end + 1)...].firstIndex(of: UInt8(ascii: "\n")))
                decoded.append((name, String(decoding: bytes[(end + 1)..<stop], as: UTF8.self)))
                at = stop + 1
            } else {
                let length = bytes[(end + 1)..<(end + 9)].reversed().reduce(0) { $0 << 8 | Int($1) }
                decoded.append((name, String(decoding: bytes[(end + 9)..<(end + 9 + length)], as: UTF8.self)))
                XCTAssertEqual(bytes[end + 9 + length], UInt8(ascii: "\n"))
                at = end + 9 + length + 1
            }
        }
        XCTAssertEqual(decoded.filter { $0.0 == "COREDUMP_UID" }.map(\.1), ["7"])
        XCTAssertEqual(decoded.map(\.0), entry.fields.map(\.name))
    }

    /// A program's name, path and function with a terminal's escape sequence and a newline:
    /// escaped in every field, so coredumpctl never prints them to a terminal as they are, and
    /// no fake frame line appears in the stack.
    func testControlCharactersAreEscaped() {
        var hostile = event(kind: .crash, signal: SIGSEGV, function: "f\u{1b}[2J\n#1  0x0000000000000000 fake (x + 0x0)")
        hostile.process?.executable = "/tmp/\u{1b}]0;owned\u{07}prog"
        hostile.process?.arguments = ["/tmp/\u{1b}[31mprog", "a\nb"]
        let entry = JournalEntry(hostile, reportPath: "/r", owner: .init(uid: 1000, gid: 1000), hostname: nil, core: nil)
        for (name, value) in entry.fields {
            XCTAssertFalse(value.unicodeScalars.contains { $0.value == 0x1b || $0.value == 0x07 }, "\(name): \(value)")
            if !["MESSAGE", "COREDUMP_STACKTRACE"].contains(name) { XCTAssertFalse(value.contains("\n"), "\(name): \(value)") }
        }
        let stack = fields(entry)["COREDUMP_STACKTRACE"] ?? ""
        XCTAssertEqual(stack.split(separator: "\n").count, 2, "one frame, no fake one: \(stack)")
    }

    func testCaps() {
        var big = event(kind: .crash, signal: SIGSEGV)
        big.process?.arguments = [String(repeating: "é", count: 20_000)]
        let entry = JournalEntry(big, reportPath: "/r", owner: .init(uid: 0, gid: 0), hostname: nil, core: nil)
        let cmdline = fields(entry)["COREDUMP_CMDLINE"] ?? ""
        XCTAssertLessThanOrEqual(cmdline.utf8.count, JournalEntry.maxFieldBytes)
        XCTAssertTrue(cmdline.hasSuffix("é..."), "cut on a character's boundary")
        XCTAssertLessThanOrEqual(entry.encoded.count, JournalEntry.maxEntryBytes)
        var frames = event(kind: .crash, signal: SIGSEGV)
        let one = frames.threads![0].frames![0]
        frames.threads?[0].frames = Array(repeating: one, count: 500)
        let stack = fields(JournalEntry(frames, reportPath: "/r", owner: .init(uid: 0, gid: 0), hostname: nil, core: nil))[
            "COREDUMP_STACKTRACE"]
        XCTAssertEqual(stack?.split(separator: "\n").count, 1 + JournalEntry.maxFrames + 1)
    }
}
