// The wire ABI as Swift sees it must equal what the C header static-asserts, and the decoder
// must reject every malformed message with a reason.

import BoundedBytes
import CCrashPortProtocol
import Glibc
@testable import ReportModel
import TestSupport
import XCTest

final class WireProtocolTests: XCTestCase {
    /// The handled signals as the watcher reads them from the header (crashport run
    /// --forward-first checks against them), by Glibc's numbers.
    func testDefaultSignalsAreTheHeaders() {
        XCTAssertEqual(WireProtocol.defaultSignals, [SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS])
    }

    func testLayoutMirrorsTheHeader() {
        XCTAssertEqual(MemoryLayout<cp_header>.size, 16)
        XCTAssertEqual(MemoryLayout<cp_hello>.size, 88)
        XCTAssertEqual(MemoryLayout<cp_hello>.offset(of: \cp_hello.wants), 80)
        XCTAssertEqual(MemoryLayout<cp_action>.size, 32)
        XCTAssertEqual(MemoryLayout<cp_verdict>.size, 32)
        XCTAssertEqual(MemoryLayout<cp_heartbeat>.size, 24)
        XCTAssertEqual(MemoryLayout<cp_crash>.offset(of: \cp_crash.regs), 88)
        XCTAssertEqual(MemoryLayout<cp_crash>.offset(of: \cp_crash.fpregs), 360)
        XCTAssertEqual(MemoryLayout<cp_chain_entry>.size, 104)
        XCTAssertEqual(MemoryLayout<cp_crash>.offset(of: \cp_crash.chain_count), 888)
        XCTAssertEqual(MemoryLayout<cp_crash>.offset(of: \cp_crash.chain), 896)
        XCTAssertEqual(MemoryLayout<cp_crash>.offset(of: \cp_crash.reraise), 1728)
        XCTAssertEqual(MemoryLayout<cp_reraise>.size, 32)
        XCTAssertEqual(MemoryLayout<cp_crash>.offset(of: \cp_crash.app_area), 1760)
        XCTAssertEqual(MemoryLayout<cp_crash>.offset(of: \cp_crash.stack_start), 1768)
        XCTAssertEqual(CrashRecord.fixedSize, 1784)
        XCTAssertEqual(CrashRecord.maximumSize, 1784 + 65536)
        XCTAssertEqual(MemoryLayout<cp_app_area>.offset(of: \cp_app_area.annotations), 64)
        XCTAssertEqual(
            MemoryLayout<cp_app_area>.offset(of: \cp_app_area.error_details),
            64 + 64 * 1096 + 100 * 312 + 16 * 1032 + 24 + 256 + 1024 + 8 + 128 + 1024 + 16 + 128)
        XCTAssertEqual(MemoryLayout<cp_app_area>.offset(of: \cp_app_area.error_details), Int(CP_APP_SIZE_MIN))
        XCTAssertEqual(MemoryLayout<cp_error_details>.offset(of: \cp_error_details.properties), 32)
        XCTAssertEqual(MemoryLayout<cp_error_details>.size, 32 + 16 * 1096 + 4 * 1032)
        XCTAssertEqual(MemoryLayout<cp_app_area>.offset(of: \cp_app_area.error_stack), Int(CP_APP_SIZE_DETAILS))
        XCTAssertEqual(Int(CP_APP_SIZE_DETAILS), Int(CP_APP_SIZE_MIN) + MemoryLayout<cp_error_details>.size)
        XCTAssertEqual(MemoryLayout<cp_app_area>.offset(of: \cp_app_area.memory_attachments_used), Int(CP_APP_SIZE_STACK))
        XCTAssertEqual(Int(CP_APP_SIZE_STACK), Int(CP_APP_SIZE_DETAILS) + 8)
        XCTAssertEqual(MemoryLayout<cp_memory_attachment>.size, 160)
        XCTAssertEqual(MemoryLayout<cp_app_area>.size, Int(CP_APP_SIZE_STACK) + 8 + 16 * 160)
        XCTAssertEqual(MemoryLayout<cp_error_frame>.size, 400)
        XCTAssertEqual(MemoryLayout<cp_error_stack>.size, 24 + 512 * 400)
        XCTAssertEqual(MemoryLayout<cp_action>.offset(of: \cp_action.restorer), 16)
        XCTAssertEqual(MemoryLayout<cp_action>.offset(of: \cp_action.mask), 24)
    }

    func record(stack: [UInt8] = [1, 2, 3, 4], pid: UInt32 = 1234, signal: Int32 = 11) -> [UInt8] {
        WireBytes.crashRecord(
            pid: pid, signal: signal, code: 1, faultAddress: 0xdead, appArea: 0x5000_0000, stackStart: 0x7000_0000, stack: stack)
    }

    /// A spool file carries the command line after the maps; a file of the older 32-byte header
    /// (no cmdline_size) still reads, without one; sizes that disagree with the file are refused.
    func testSpoolFileWithItsCommandLineAndTheOlderHeader() throws {
        XCTAssertEqual(MemoryLayout<cp_spool_header>.size, 40)
        XCTAssertEqual(MemoryLayout<cp_spool_header>.offset(of: \cp_spool_header.cmdline_size), 32)
        let maps = Array("00400000-00401000 r-xp 00000000 08:01 1 /bin/x\n".utf8)
        let commandLine = Array("/bin/x\u{0}two words\u{0}".utf8)
        let file = SpooledRecord.encode(record: record(), executable: Array("/bin/x".utf8), maps: maps, commandLine: commandLine)
        let spooled = try SpooledRecord(bytes: file)
        XCTAssertEqual(spooled.record.pid, 1234)
        XCTAssertEqual(spooled.executable, "/bin/x")
        XCTAssertEqual(Array(spooled.maps.utf8), maps)
        XCTAssertEqual(spooled.commandLine, commandLine)

        var older = SpooledRecord.encode(record: record(), executable: Array("/bin/x".utf8), maps: maps)
        older.removeSubrange(32..<40)
        older.replaceSubrange(8..<12, with: [32, 0, 0, 0])
        let old = try SpooledRecord(bytes: older)
        XCTAssertEqual(old.record.pid, 1234)
        XCTAssertEqual(Array(old.maps.utf8), maps)
        XCTAssertEqual(old.commandLine, [])

        var lying = file
        lying[32] &+= 1
        XCTAssertThrowsError(try SpooledRecord(bytes: lying))
        XCTAssertThrowsError(try SpooledRecord(bytes: Array(file.dropLast())))
    }

    func testDecodesAValidRecord() throws {
        let decoded = try CrashRecord(bytes: record())
        XCTAssertEqual(decoded.pid, 1234)
        XCTAssertEqual(decoded.signal, 11)
        XCTAssertEqual(decoded.code, 1)
        XCTAssertEqual(decoded.faultAddress, 0xdead)
        XCTAssertEqual(decoded.appArea, 0x5000_0000)
        XCTAssertEqual(decoded.stack, MemoryRegion(start: 0x7000_0000, bytes: [1, 2, 3, 4]))
    }

    /// The record the host level spools for a report it cannot write reads back as it was made.
    func testHostDumpRecordReadsBack() throws {
        var registers = X86_64Registers(gpr: (0..<UInt64(X86_64Registers.gprCount)).map { $0 * 0x1111 })
        registers.fxsave = (0..<512).map { UInt8(truncatingIfNeeded: $0) }
        var record = CrashRecord(
            kernelDumpOf: ProcessID(4242), tid: ThreadID(4243), signal: SIGSEGV, code: 1, faultAddress: 8,
            senderPID: nil, senderUID: nil, threadName: "worker\u{1}name", registers: registers,
            timeNanoseconds: 1_800_000_000_000_000_000)
        record.stack = MemoryRegion(start: 0x7ffd_0000_0000, bytes: (0..<3000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let read = try CrashRecord(bytes: record.encodedHostDump())
        XCTAssertTrue(read.isHostDump)
        XCTAssertFalse(read.stackTruncated)
        XCTAssertEqual(read.pid, record.pid)
        XCTAssertEqual(read.tid, record.tid)
        XCTAssertEqual(read.signal, SIGSEGV)
        XCTAssertEqual(read.code, 1)
        XCTAssertEqual(read.faultAddress, 8)
        XCTAssertEqual(read.timeNanoseconds, record.timeNanoseconds)
        XCTAssertEqual(read.threadName, "worker name", "a control character is a space on the wire")
        XCTAssertEqual(read.registers, registers)
        XCTAssertEqual(read.stack, record.stack)
        // A stack longer than a record holds keeps its top, and says so.
        record.stack = MemoryRegion(start: 0x1000, bytes: [UInt8](repeating: 9, count: Int(CP_STACK_COPY_MAX) + 100))
        let cut = try CrashRecord(bytes: record.encodedHostDump())
        XCTAssertTrue(cut.stackTruncated)
        XCTAssertEqual(cut.stack.bytes.count, Int(CP_STACK_COPY_MAX))
    }

    func testRejectsMalformedRecords() {
        var badMagic = record()
        badMagic[0] ^= 0xFF
        XCTAssertThrowsError(try CrashRecord(bytes: badMagic)) { XCTAssertTrue("\($0)".contains("bad magic")) }
        var badVersion = record()
        badVersion[4] = 1
        XCTAssertThrowsError(try CrashRecord(bytes: badVersion)) { XCTAssertTrue("\($0)".contains("version 1")) }
        let truncated = Array(record().dropLast())
        XCTAssertThrowsError(try CrashRecord(bytes: truncated)) { XCTAssertTrue("\($0)".contains("declared size")) }
        XCTAssertThrowsError(try CrashRecord(bytes: Array(record().prefix(10))))
        var stackLies = record()
        stackLies[1776] = 200  // stack_size disagrees with the message size
        XCTAssertThrowsError(try CrashRecord(bytes: stackLies)) { XCTAssertTrue("\($0)".contains("stack_size")) }
        XCTAssertThrowsError(try CrashRecord(bytes: record(signal: 0)))
        XCTAssertThrowsError(try CrashRecord(bytes: record(signal: 999)))
        XCTAssertThrowsError(try CrashRecord(bytes: record(pid: 0)))
        var chainTooLong = record()
        chainTooLong[888] = 9
        XCTAssertThrowsError(try CrashRecord(bytes: chainTooLong)) { XCTAssertTrue("\($0)".contains("chain_count")) }
        var unknownReraise = record()
        unknownReraise[1728] = 9
        XCTAssertThrowsError(try CrashRecord(bytes: unknownReraise)) { XCTAssertTrue("\($0)".contains("re-raise")) }
        var reraisedSignalOutOfRange = record()
        reraisedSignalOutOfRange[1728] = 1
        reraisedSignalOutOfRange[1732] = 99
        XCTAssertThrowsError(try CrashRecord(bytes: reraisedSignalOutOfRange)) { XCTAssertTrue("\($0)".contains("out of range")) }
        var wrongType = record()
        wrongType[12] = UInt8(CP_MSG_HELLO.rawValue)
        XCTAssertThrowsError(try CrashRecord(bytes: wrongType))
    }

    /// GOODBYE: 24 bytes, the exit status as sent; short, long, of another version or with its
    /// reserved field set, it is refused with a reason.
    func testGoodbye() throws {
        XCTAssertEqual(MemoryLayout<cp_goodbye>.size, 24)
        XCTAssertEqual(MemoryLayout<cp_goodbye>.offset(of: \cp_goodbye.exit_status), 16)
        XCTAssertEqual(CP_MSG_GOODBYE.rawValue, 9)
        let bytes = GoodbyeMessage.encode(exitStatus: -3)
        XCTAssertEqual(try GoodbyeMessage(bytes: bytes).exitStatus, -3)
        var short = Array(bytes.prefix(20))
        short[8] = 20
        XCTAssertThrowsError(try GoodbyeMessage(bytes: short)) { XCTAssertTrue("\($0)".contains("a goodbye of 20 bytes")) }
        var long = bytes + [0, 0, 0, 0]
        long[8] = 28
        XCTAssertThrowsError(try GoodbyeMessage(bytes: long)) { XCTAssertTrue("\($0)".contains("28 bytes")) }
        var version = bytes
        version[4] = 2
        XCTAssertThrowsError(try GoodbyeMessage(bytes: version)) { XCTAssertTrue("\($0)".contains("version 2")) }
        var reserved = bytes
        reserved[23] = 0x80
        XCTAssertThrowsError(try GoodbyeMessage(bytes: reserved)) { XCTAssertTrue("\($0)".contains("reserved")) }
        XCTAssertThrowsError(try GoodbyeMessage(bytes: Array(bytes.prefix(10))))
        XCTAssertThrowsError(try GoodbyeMessage(bytes: HelloMessage.encode(pid: 1)))
    }

    /// A HELLO's requests (CRASHPORT_TRACE_EXIT, CRASHPORT_HANG_MS, CRASHPORT_HANG_KILL); the
    /// 80 bytes of stubs before them are read as asking nothing; other sizes are refused.
    func testHelloWantsAndItsOlderShortForm() throws {
        var bytes = HelloMessage.encode(pid: 42)
        XCTAssertEqual(bytes.count, 88)
        bytes.put(u32: CP_WANTS_TRACE_EXIT_CODES | CP_WANTS_HANG_KILL | 0x8000_0000, at: 80)
        bytes.put(u32: 1500, at: 84)
        let hello = try HelloMessage(bytes: bytes)
        XCTAssertEqual(hello.pid, ProcessID(42))
        XCTAssertTrue(hello.wantsTraceExit && hello.wantsTraceExitCodes && hello.wantsHangKill)
        XCTAssertEqual(hello.wants, CP_WANTS_TRACE_EXIT_CODES | CP_WANTS_HANG_KILL, "unknown bits are dropped")
        XCTAssertEqual(hello.hangMilliseconds, 1500)

        var short = Array(bytes.prefix(80))
        short[8] = 80
        let old = try HelloMessage(bytes: short)
        XCTAssertEqual(old.wants, 0)
        XCTAssertEqual(old.hangMilliseconds, 0)
        XCTAssertFalse(old.wantsTraceExit)

        var odd = Array(bytes.prefix(84))
        odd[8] = 84
        XCTAssertThrowsError(try HelloMessage(bytes: odd)) { XCTAssertTrue("\($0)".contains("a HELLO of 84 bytes"), "\($0)") }
    }

    /// crashport_set_consent and friends: the three actions round-trip; anything else, and any
    /// other size, is refused with a reason.
    func testConsentMessages() throws {
        XCTAssertEqual(MemoryLayout<cp_consent>.size, 24)
        for message in [ConsentMessage.set(0), .set(2), .sendPending, .discardPending] {
            XCTAssertEqual(try ConsentMessage(bytes: ConsentMessage.encode(message)), message)
        }
        var bytes = ConsentMessage.encode(.set(1))
        bytes[20] = 3  // value 3: no such choice
        XCTAssertThrowsError(try ConsentMessage(bytes: bytes)) {
            XCTAssertTrue("\($0)".contains("action 1 and value 3"), "\($0)")
        }
        bytes = ConsentMessage.encode(.sendPending)
        bytes[16] = 9
        XCTAssertThrowsError(try ConsentMessage(bytes: bytes))
        var long = ConsentMessage.encode(.sendPending) + [0, 0, 0, 0]
        long[8] = 28
        XCTAssertThrowsError(try ConsentMessage(bytes: long)) { XCTAssertTrue("\($0)".contains("28 bytes"), "\($0)") }
    }

    /// The last run in full: the whole HELLO_REPLY for a stub that asks, the 496 bytes that end
    /// at last_run for one that does not (stubs before it require them); its texts cut to their
    /// fields, their tabs and newlines made spaces (CRASHPORT_LAST_RUN_DETAIL's separators).
    func testRunDetailInTheHelloReplyAndTheEnvironment() throws {
        XCTAssertEqual(MemoryLayout<cp_run_detail>.size, 1592)
        XCTAssertEqual(MemoryLayout<cp_hello_reply>.offset(of: \cp_hello_reply.run_detail), 496)
        var info = LastRunInfo()
        info.known = true
        info.detail.kind = .crash
        info.detail.signal = 11
        info.detail.signalName = "SIGSEGV"
        info.detail.oomKilled = true
        info.detail.startedMilliseconds = 1_700_000_000_123
        info.detail.title = "SIGSEGV in parse\theader\n(app.c:3)"
        info.detail.reason = String(repeating: "é", count: 200)
        info.send = SendState(.sent, sentMilliseconds: 1_700_000_001_000, serverID: "bp-42", reason: "")
        let whole = HelloReplyMessage.encode(accepted: true, spool: "", message: "", lastRun: info)
        XCTAssertEqual(whole.count, 2424)
        XCTAssertEqual(SendState(bytes: whole, at: 2088), info.send, "last_send after run_detail")
        XCTAssertNoThrow(try HelloReply(bytes: whole))
        let detail = 496
        XCTAssertEqual(whole[detail], UInt8(RunDetail.Kind.crash.rawValue))
        XCTAssertEqual(whole[detail + 4], UInt8(CP_RUN_OOM_KILLED))
        XCTAssertEqual(whole[detail + 8], 11)
        let title = whole[(detail + 312)..<(detail + 568)].prefix { $0 != 0 }
        XCTAssertEqual(String(decoding: title, as: UTF8.self), "SIGSEGV in parse header (app.c:3)")
        let reason = whole[(detail + 56)..<(detail + 312)]
        XCTAssertEqual(reason.prefix { $0 != 0 }.count, 254, "cut at a character: 127 two-byte characters")
        XCTAssertEqual(reason.last, 0, "NUL-terminated")

        let short = HelloReplyMessage.encode(accepted: true, spool: "", message: "", lastRun: info, detail: false)
        XCTAssertEqual(short.count, 496)
        XCTAssertEqual(short[8], 0xF0, "its size says 496")
        XCTAssertNoThrow(try HelloReply(bytes: short))
        XCTAssertThrowsError(try HelloReply(bytes: Array(whole.prefix(600))))
        // A stub before last_send asked for the detail alone: the 2088 bytes it accepts.
        let detailOnly = HelloReplyMessage.encode(accepted: true, spool: "", message: "", lastRun: info, sendState: false)
        XCTAssertEqual(detailOnly.count, 2088)
        XCTAssertEqual(
            Array(detailOnly),
            Array(whole.prefix(2088)).enumerated().map { $0.offset == 8 ? 0x28 : $0.offset == 9 ? 0x08 : $0.element })
        XCTAssertNoThrow(try HelloReply(bytes: detailOnly))
        // CRASHPORT_LAST_RUN_DETAIL: the detail's fields, then the send state's.
        let fields = info.detailEnvironmentText.split(separator: "\t", omittingEmptySubsequences: false)
        XCTAssertEqual(fields.count, 8)
        XCTAssertEqual(fields[5], "3 1700000001000")
        XCTAssertEqual(fields[6], "bp-42")

        let text = info.detail.environmentText.split(separator: "\t", omittingEmptySubsequences: false)
        XCTAssertEqual(text.count, 5)
        XCTAssertEqual(text[0], "2 8 11 -1 1700000000123 0 0 0")
        XCTAssertEqual(text[1], "SIGSEGV")
        XCTAssertEqual(text[3], "SIGSEGV in parse header (app.c:3)")
        XCTAssertEqual(RunDetail.Kind(summary: "termination"), .termination)
        XCTAssertEqual(RunDetail.Kind(summary: "bogus"), .unknown)
    }

    /// crashport_report_states: the query's flag, and its answer round trip, bounded.
    func testReportStates() throws {
        XCTAssertEqual(MemoryLayout<cp_report_states>.size, 24 + 32 * 680)
        XCTAssertEqual(try PendingQuery.check(PendingQuery.encode()), false)
        XCTAssertEqual(try PendingQuery.check(PendingQuery.encode(sendStates: true)), true)
        var query = PendingQuery.encode()
        query[16] = 2
        XCTAssertThrowsError(try PendingQuery.check(query), "an unknown flag")
        let entry = PendingEntry(id: "20261129T000000.000Z-1-abcd", title: "SIGSEGV in main", kind: "crash", timeMilliseconds: 7)
        let list = ReportStateList(
            entries: [
                (entry, SendState(.failed, reason: "HTTP 401: not retried")),
                (entry, SendState(.sent, sentMilliseconds: 9, serverID: String(repeating: "x", count: 100))),
            ], total: 5)
        let decoded = try ReportStateList(bytes: list.encode())
        XCTAssertEqual(decoded.total, 5)
        XCTAssertEqual(decoded.entries.map(\.send.kind), [.failed, .sent])
        XCTAssertEqual(decoded.entries[1].send.serverID.count, 63, "cut to its field")
        var hostile = list.encode()
        hostile.put(33, at: 16, size: 4)
        XCTAssertThrowsError(try ReportStateList(bytes: hostile))
        hostile = list.encode()
        hostile.put(99, at: 24 + 344, size: 4)
        XCTAssertEqual(try ReportStateList(bytes: hostile).entries[0].send.kind, SendState.Kind.none, "an unknown state")
    }

    func testLaunchMessage() throws {
        XCTAssertEqual(MemoryLayout<cp_launch>.size, 32)
        let message = LaunchMessage(protected: true, consecutiveLaunchCrashes: 3, threshold: 3)
        XCTAssertEqual(try LaunchMessage(bytes: message.bytes), message)
        var bytes = message.bytes
        bytes[16] = 2
        XCTAssertThrowsError(try LaunchMessage(bytes: bytes)) { XCTAssertTrue("\($0)".contains("protected_run = 2"), "\($0)") }
        bytes = message.bytes
        bytes[28] = 1
        XCTAssertEqual(try LaunchMessage(bytes: bytes).protectTimedOut, true, "outcome 1: the protect timed out")
        let timedOut = LaunchMessage(protected: true, consecutiveLaunchCrashes: 2, threshold: 0, protectTimedOut: true)
        XCTAssertEqual(try LaunchMessage(bytes: timedOut.bytes), timedOut)
        bytes[28] = 2
        XCTAssertThrowsError(try LaunchMessage(bytes: bytes)) { XCTAssertTrue("\($0)".contains("outcome = 2"), "\($0)") }
        XCTAssertThrowsError(try LaunchMessage(bytes: Array(message.bytes.prefix(24))))
        XCTAssertThrowsError(try LaunchMessage(bytes: GoodbyeMessage.encode(exitStatus: 0)))
    }

    func testVerdictEncoding() throws {
        let bytes = VerdictMessage.encode(captureNanoseconds: 77)
        XCTAssertEqual(bytes.count, 32)
        let header = try WireHeader(bytes: bytes)
        XCTAssertEqual(header.type, CP_MSG_VERDICT.rawValue)
        XCTAssertEqual(bytes[24], 77)
    }
}
