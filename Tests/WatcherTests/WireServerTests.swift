// The wire server's checks, message by message, with the bytes the stub would send (TestSupport's
// WireBytes and the decoders' own encoders) and this test process as the sender: every refusal is
// returned and logged, never reaches the mode, and a crash record's refusal still answers the
// stub (it must not wait out its timeout); what is valid makes exactly one call of the delegate.
// ServingTrustTests runs the same attacks end to end against a root sidecar.

import CCrashPortProtocol
import LiveProcess
import ReportModel
import Synchronization
import TestSupport
import XCTest

@testable import Watcher

#if canImport(Glibc)
import Glibc
#endif

/// Records each call the wire server makes, on the (single) test thread.
final class RecordingMode: WireServerDelegate {
    var calls: [String] = []
    var crashes: [AcceptedCrash] = []
    /// What `crash` answers: nil accepts.
    var refusal: String?
    var pending: PendingList? = PendingList(entries: [], total: 0)

    func hello(_ hello: HelloMessage, from sender: Sender) { calls.append("hello \(hello.pid)") }
    func crash(_ crash: AcceptedCrash) -> String? {
        calls.append(crash.record.isError ? "error" : "crash")
        crashes.append(crash)
        if refusal == nil { crash.answer(captureNanoseconds: 7) }
        return refusal
    }
    func setting(enabled: Bool, from sender: Sender) { calls.append("setting \(enabled)") }
    func consent(_ message: ConsentMessage, from sender: Sender) { calls.append("consent") }
    func pendingReports(from sender: Sender) -> PendingList? {
        calls.append("pending")
        return pending
    }
    func consentReport(_ message: ConsentReportMessage, from sender: Sender) { calls.append("consent report") }
    func goodbye(_ goodbye: GoodbyeMessage, from sender: Sender) { calls.append("goodbye \(goodbye.exitStatus)") }
    func launch(_ message: LaunchMessage, from sender: Sender) { calls.append("launch") }
}

final class WireServerTests: XCTestCase {
    var mode = RecordingMode()
    var logged: [String] = []
    var server: WireServer!
    let me = Sender(pid: ProcessID(getpid()), uid: getuid(), gid: getgid())

    override func setUp() {
        mode = RecordingMode()
        logged = []
        server = WireServer(delegate: mode, log: { [unowned self] in logged.append($0) })
    }

    /// A connected SOCK_SEQPACKET pair: the reply descriptor a stub sends, and its end to read.
    func replyPair() -> (send: Int32, read: Int32) {
        var pair: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &pair), 0)
        return (pair[0], pair[1])
    }

    /// The verdict the stub would read on its end, nil when none came.
    func verdict(on fd: Int32) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        return count > 0 ? Array(buffer.prefix(count)) : nil
    }

    /// A crash record of this process's main thread (or `pid`, `tid`).
    func record(pid: Int32 = getpid(), tid: Int32? = nil, type: UInt32 = CP_MSG_CRASH.rawValue) -> [UInt8] {
        var bytes = WireBytes.crashRecord(
            pid: UInt32(pid), signal: type == CP_MSG_ERROR.rawValue ? 0 : SIGSEGV, code: 1, faultAddress: 0, appArea: 0,
            stackStart: 0, stack: [])
        bytes.put(u32: type, at: 12)
        if let tid { bytes.put(u32: UInt32(bitPattern: tid), at: MemoryLayout<cp_crash>.offset(of: \cp_crash.tid)!) }
        return bytes
    }

    /// Sends `bytes` with a fresh reply socket; what the server said and the stub's end read.
    func sendCrash(_ bytes: [UInt8], as sender: Sender? = nil) -> (rejection: String?, verdict: [UInt8]?) {
        let (reply, stub) = replyPair()
        defer { close(stub) }
        let rejection = server.handle(bytes, sender: sender ?? me, replyFDs: [reply])
        return (rejection, verdict(on: stub))
    }

    func message(type: UInt32, size: Int, _ fill: (inout [UInt8]) -> Void = { _ in }) -> [UInt8] {
        var bytes = WireBytes.header(type: type, size: size)
        bytes.pad(to: size)
        fill(&bytes)
        return bytes
    }

    func testAValidCrashRecordMakesOneCallWithTheKernelsWordAndIsAnswered() throws {
        let (rejection, verdict) = sendCrash(record())
        XCTAssertNil(rejection)
        XCTAssertEqual(mode.calls, ["crash"])
        XCTAssertEqual(mode.crashes.first?.record.pid, ProcessID(getpid()))
        XCTAssertEqual(mode.crashes.first?.sender, me)
        XCTAssertFalse(mode.crashes.first?.threads.isEmpty ?? true, "the live process's threads, as checked")
        XCTAssertNotNil(mode.crashes.first?.status, "its /proc status, as checked")
        XCTAssertEqual(verdict, VerdictMessage.encode(captureNanoseconds: 7), "the mode's answer reached the stub")
        XCTAssertTrue(logged.isEmpty, "\(logged)")
    }

    func testACrashRecordWithoutExactlyOneSocketIsRejectedBeforeAnyRead() throws {
        XCTAssertEqual(
            server.handle(record(), sender: me, replyFDs: []),
            "a crash record from pid \(getpid()): it carried 0 descriptors, expected 1")
        let (a, b) = replyPair()
        XCTAssertNotNil(server.handle(record(), sender: me, replyFDs: [a, b]))
        var ends: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&ends), 0)
        defer { close(ends[0]) }
        XCTAssertEqual(
            server.handle(record(), sender: me, replyFDs: [ends[1]]),
            "a crash record from pid \(getpid()): its reply descriptor is not a socket")
        XCTAssertEqual(mode.calls, [])
        XCTAssertEqual(fcntl(ends[1], F_GETFD), -1, "the descriptors it carried are closed")
        XCTAssertEqual(logged.count, 3)
    }

    func testEveryCheckOfACrashRecordRefusesAndStillAnswersTheStub() throws {
        let stranger = Sender(pid: me.pid, uid: getuid() &+ 4242, gid: getgid())
        let otherThread = Int32(1)  // init's pid: never a thread of this process
        var badArchitecture = record()
        badArchitecture.put(u32: 99, at: MemoryLayout<cp_crash>.offset(of: \cp_crash.arch)!)
        let cases: [(bytes: [UInt8], sender: Sender, says: String)] = [
            (badArchitecture, me, "unsupported architecture 99"),
            (record(pid: 1), me, "it names pid 1"),
            (record(tid: otherThread), me, "thread 1 is not one of its threads"),
            (record(), stranger, "now belongs to uid \(getuid())"),
        ]
        for (bytes, sender, says) in cases {
            let (rejection, verdict) = sendCrash(bytes, as: sender)
            XCTAssertTrue(rejection?.contains(says) == true, "\(rejection ?? "accepted"): expected \(says)")
            XCTAssertEqual(verdict, VerdictMessage.encode(captureNanoseconds: 0), "\(says): the stub is answered")
        }
        XCTAssertEqual(mode.calls, [])
    }

    func testTheModesRefusalIsAnsweredAndLogged() throws {
        mode.refusal = "uid 0 is not served here"
        let (rejection, verdict) = sendCrash(record())
        XCTAssertEqual(rejection, "a crash record from pid \(getpid()): uid 0 is not served here")
        XCTAssertEqual(verdict, VerdictMessage.encode(captureNanoseconds: 0))
        XCTAssertEqual(logged, ["rejected a crash record from pid \(getpid()): uid 0 is not served here"])
    }

    func testErrorRecordsPastTheirRateAreRefused() throws {
        for _ in 0..<WireServer.errorsPerMinute { XCTAssertNil(sendCrash(record(type: CP_MSG_ERROR.rawValue)).rejection) }
        let (rejection, verdict) = sendCrash(record(type: CP_MSG_ERROR.rawValue))
        XCTAssertTrue(rejection?.contains("more than \(WireServer.errorsPerMinute) in a minute") == true, "\(rejection ?? "")")
        XCTAssertEqual(verdict, VerdictMessage.encode(captureNanoseconds: 0))
        XCTAssertEqual(mode.calls.count, WireServer.errorsPerMinute)
        // Crashes are not rate limited: a crash is the last thing a process sends.
        XCTAssertNil(sendCrash(record()).rejection)
    }

    func testMalformedMessagesOfEveryTypeAreRejectedAndNeverReachTheMode() throws {
        let short: [UInt8] = [1, 2, 3]
        let unknown = message(type: 9999, size: 16)
        let hello = message(type: CP_MSG_HELLO.rawValue, size: 20)
        let setting = message(type: CP_MSG_SETTING.rawValue, size: 20)
        let twoSetting = message(type: CP_MSG_SETTING.rawValue, size: MemoryLayout<cp_setting>.size) {
            $0.put(u32: 2, at: MemoryLayout<cp_setting>.offset(of: \cp_setting.enabled)!)
        }
        let goodbye = message(type: CP_MSG_GOODBYE.rawValue, size: MemoryLayout<cp_goodbye>.size) {
            $0.put(u32: 1, at: MemoryLayout<cp_goodbye>.offset(of: \cp_goodbye.reserved)!)
        }
        let consent = message(type: CP_MSG_CONSENT.rawValue, size: 20)
        let launch = message(type: CP_MSG_LAUNCH.rawValue, size: 20)
        let consentReport = message(type: CP_MSG_CONSENT_REPORT.rawValue, size: 20)
        for (bytes, says) in [
            (short, "a message from pid"), (unknown, "unexpected type 9999"), (hello, "a HELLO"),
            (setting, "a setting from pid \(getpid()): 20 bytes"), (twoSetting, "enabled = 2"), (goodbye, "reserved = 1"),
            (consent, "a consent message"), (launch, "a launch message"), (consentReport, "a report's consent"),
        ] {
            let rejection = server.handle(bytes, sender: me, replyFDs: [])
            XCTAssertTrue(rejection?.contains(says) == true, "\(rejection ?? "accepted"): expected \(says)")
        }
        XCTAssertEqual(mode.calls, [])
        XCTAssertEqual(logged.count, 9, "each rejection is logged: \(logged)")
    }

    func testValidMessagesMakeOneCallEach() throws {
        XCTAssertNil(server.handle(HelloMessage.encode(pid: getpid()), sender: me, replyFDs: []))
        let on = message(type: CP_MSG_SETTING.rawValue, size: MemoryLayout<cp_setting>.size) {
            $0.put(u32: 1, at: MemoryLayout<cp_setting>.offset(of: \cp_setting.enabled)!)
        }
        XCTAssertNil(server.handle(on, sender: me, replyFDs: []))
        XCTAssertNil(server.handle(ConsentMessage.encode(.sendPending), sender: me, replyFDs: []))
        XCTAssertNil(server.handle(GoodbyeMessage.encode(exitStatus: 3), sender: me, replyFDs: []))
        XCTAssertEqual(mode.calls, ["hello \(getpid())", "setting true", "consent", "goodbye 3"])
    }

    func testAHelloThatClaimsAnotherPidIsLoggedButStillGreeted() throws {
        XCTAssertNil(server.handle(HelloMessage.encode(pid: 1), sender: me, replyFDs: []))
        XCTAssertEqual(mode.calls, ["hello 1"])
        XCTAssertEqual(logged, ["HELLO from pid \(getpid()) claims pid 1; ignored"])
    }

    func testSettingsPastTheirRateAreIgnoredNotRejected() throws {
        let on = message(type: CP_MSG_SETTING.rawValue, size: MemoryLayout<cp_setting>.size) {
            $0.put(u32: 1, at: MemoryLayout<cp_setting>.offset(of: \cp_setting.enabled)!)
        }
        for _ in 0..<(WireServer.settingsPerMinute + 5) { XCTAssertNil(server.handle(on, sender: me, replyFDs: [])) }
        XCTAssertEqual(mode.calls.count, WireServer.settingsPerMinute, "the rest ignored (the connection stays)")
    }

    func testAPendingQueryIsAnsweredOnItsSocketOrRefused() throws {
        let query = message(type: CP_MSG_PENDING_QUERY.rawValue, size: MemoryLayout<cp_pending_query>.size)
        XCTAssertTrue(server.handle(query, sender: me, replyFDs: [])?.contains("expected 1") == true)
        var ends: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&ends), 0)
        defer { close(ends[0]) }
        XCTAssertTrue(server.handle(query, sender: me, replyFDs: [ends[1]])?.contains("not a socket") == true)
        var (reply, stub) = replyPair()
        XCTAssertTrue(
            server.handle(Array(query.prefix(20)), sender: me, replyFDs: [reply])?.contains("pending-reports query") == true)
        XCTAssertNil(verdict(on: stub), "a malformed query gets no answer")
        close(stub)
        XCTAssertEqual(mode.calls, [])
        (reply, stub) = replyPair()
        XCTAssertNil(server.handle(query, sender: me, replyFDs: [reply]))
        XCTAssertEqual(verdict(on: stub), PendingList(entries: [], total: 0).encode(), "the mode's list, answered")
        close(stub)
        mode.pending = nil
        (reply, stub) = replyPair()
        XCTAssertTrue(server.handle(query, sender: me, replyFDs: [reply])?.contains("not served here") == true)
        XCTAssertNil(verdict(on: stub))
        close(stub)
        XCTAssertEqual(mode.calls, ["pending", "pending"])
    }

    func testLinesAboutAClientGoThroughItsUsersLimit() throws {
        var aboutUID: [UInt32] = []
        server = WireServer(
            delegate: mode, log: { _ in XCTFail("not through the plain log") }, logAbout: { _, uid in aboutUID.append(uid) })
        _ = server.handle([0], sender: me, replyFDs: [])
        XCTAssertEqual(aboutUID, [getuid()])
    }
}
