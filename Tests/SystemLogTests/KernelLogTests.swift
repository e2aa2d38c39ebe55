// The kernel's records as /dev/kmsg gives them on this machine (6.18, cgroup v1 memory
// controller), parsed and selected: a segfault line and its Code line, a trap, an OOM report in
// a memory cgroup, each as a root report and another user's.

import SystemLog
import XCTest

final class KernelLogTests: XCTestCase {
    func records(_ lines: [String]) -> [KernelLogRecord] {
        lines.compactMap { KernelLogRecord(Array(($0 + "\n").utf8)) }
    }

    /// An OOM report as the kernel printed it for a test's `hog` (pid 26576, uid 1000) in its
    /// memory cgroup, with a second task of another user in the table, and another process's
    /// fault line printed by another CPU in between.
    let oom = [
        "4,83108,43749921627,-;hog invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
        "4,83109,43749921643,-;CPU: 0 UID: 1000 PID: 26576 Comm: hog Not tainted 6.18.44-fc-v595 #1 PREEMPT(none) ",
        "4,83110,43749921648,-;Call Trace:",
        "4,83111,43749921718,-; <TASK>",
        "4,83112,43749921736,-; dump_stack_lvl+0x57/0x80",
        "4,83127,43749921891,-; asm_exc_page_fault+0x22/0x30",
        "4,83128,43749921895,-;RIP: 0033:0x5560e6169281",
        "4,83136,43749921918,-; </TASK>",
        "6,83137,43749921919,-;memory: usage 65536kB, limit 65536kB, failcnt 0",
        "6,83140,43749921931,-;Memory cgroup stats for /crashport-oom-20714:",
        "6,83141,43749921960,-;rss 66973696",
        "6,84000,43749921961,-;other[999]: segfault at 0 ip 000055e9a34cc239 sp 00007fff2aea2848 error 6 in other[1239,55e9a34cc000+1000]",
        "6,83183,43749922018,-;Tasks state (memory values in pages):",
        "6,83184,43749922019,-;[  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name",
        "6,83185,43749922022,-;[  26576]  1000 26576    17142    16755    16384      371         0   180224        0             0 hog",
        "6,83186,43749922023,-;[  26590]  1001 26590     1000      100      100        0         0    40000        0             0 secret-task",
        "6,83187,43749922026,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/crashport-oom-20714,task_memcg=/crashport-oom-20714,task=hog,pid=26576,uid=1000",
        "3,83188,43749922045,-;Memory cgroup out of memory: Killed process 26576 (hog) total-vm:68568kB, anon-rss:65536kB, file-rss:1484kB, shmem-rss:0kB, UID:1000 pgtables:176kB oom_score_adj:0",
        "6,83189,43749930000,-;oom_reaper: reaped process 26576 (hog), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
    ]

    /// A record's time read from its header alone (what the reader skips old records by), nil
    /// for a header that is not the kernel's shape.
    func testTheHeadersTimeAlone() {
        func time(_ text: String) -> UInt64? {
            var bytes = Array(text.utf8)
            let count = bytes.count
            bytes += [UInt8](repeating: 0x41, count: 16)
            return KernelLog.headerMicroseconds(bytes, count)
        }
        XCTAssertEqual(time("6,84570,44294604569,-,caller=T12;crash[6727]: segfault"), 44_294_604_569)
        XCTAssertEqual(time("6,1,2,-;x"), 2)
        XCTAssertNil(time("6,1,,-;x"))
        XCTAssertNil(time("6,1;2,-;x"))
        XCTAssertNil(time("6,1,2x,-;x"))
        XCTAssertNil(time("6,1,99999999999999999999999,-;x"))
        XCTAssertNil(time("6,1,2"), "no end of field within the record's bytes")
    }

    func testARecordIsParsed() throws {
        let record = try XCTUnwrap(
            KernelLogRecord(Array("6,84570,44294604569,-,caller=T12;crash[6727]: segfault at 0\n SUBSYSTEM=x\n".utf8)))
        XCTAssertEqual(record.level, 6)
        XCTAssertEqual(record.facility, 0)
        XCTAssertEqual(record.sequence, 84570)
        XCTAssertEqual(record.microseconds, 44_294_604_569)
        XCTAssertEqual(record.text, "crash[6727]: segfault at 0")
        XCTAssertEqual(record.line, "[44294.604569] crash[6727]: segfault at 0")
    }

    func testMalformedRecordsAreNil() {
        for text in ["", "6,1,2;", "6,1;x", "x,1,2,-;x", "6,1,99999999999999999999999,-;x", "no semicolon", "6,,2,-;x"] {
            XCTAssertNil(KernelLogRecord(Array(text.utf8)), text)
        }
    }

    func testTextThatIsNotTextIsEscaped() throws {
        let bytes = Array("6,1,2,-;a".utf8) + [0x00, 0x1B, 0xFF, 0x09] + Array("b\n".utf8)
        XCTAssertEqual(try XCTUnwrap(KernelLogRecord(bytes)).text, "a\\x00\\x1b\\xff\tb")
        let long = Array("6,1,2,-;".utf8) + [UInt8](repeating: 0x41, count: 5000)
        XCTAssertEqual(try XCTUnwrap(KernelLogRecord(long)).text.count, KernelLogRecord.textLimit + "…[cut]".count)
    }

    func testAFaultLineAndItsCodeAreSelected() {
        let log = records([
            "6,84568,44294604000,-;crash[6700]: segfault at 0 ip 000055e9a34cc239 sp 00007fff2aea2848 error 6 in crash[1239,55e9a34cc000+1000] likely on CPU 1 (core 1, socket 0)",
            "6,84570,44294604569,-;worker[6728]: segfault at 0 ip 000055e9a34cc239 sp 00007fff2aea2848 error 6 in crash[1239,55e9a34cc000+1000] likely on CPU 1 (core 1, socket 0)",
            "6,84571,44294604649,-;Code: 2e 00 00 e8 29 ff ff ff <c7> 04 25 00 00 00 00 2a 00 00 00",
            "6,84572,44294604700,-;traps: worker[6728] trap invalid opcode ip:7f6e2636df7f sp:7ffed75f9500 error:0 in libswiftCore.so[16df7f,7f6e26200000+5d3000]",
        ])
        let subject = KernelLogSubject(pid: 6727, threads: [6728], names: ["crash", "worker"])
        for viewer in [KernelLogViewer.root, .user(uid: 1000)] {
            let selection = KernelLogSelection.select(log, about: subject, for: viewer)
            XCTAssertEqual(selection.faultLines, 2)
            XCTAssertEqual(selection.lines.count, 3, "\(selection.lines)")
            XCTAssertTrue(
                selection.lines[0].hasSuffix(
                    "worker[6728]: segfault at 0 ip 000055e9a34cc239 sp 00007fff2aea2848 error 6 in crash[1239,55e9a34cc000+1000] likely on CPU 1 (core 1, socket 0)"
                ))
            XCTAssertTrue(selection.lines[1].hasSuffix("] Code: 2e 00 00 e8 29 ff ff ff <c7> 04 25 00 00 00 00 2a 00 00 00"))
        }
        // A reused thread id under another name: root's report trusts the id, a user's does not.
        let renamed = KernelLogSubject(pid: 6727, threads: [6728], names: ["crash"])
        XCTAssertEqual(KernelLogSelection.select(log, about: renamed, for: .root).faultLines, 2)
        XCTAssertEqual(KernelLogSelection.select(log, about: renamed, for: .user(uid: 1000)).faultLines, 0)
    }

    func testAnOOMReportIsSelectedWholeForRoot() {
        let selection = KernelLogSelection.select(records(oom), about: KernelLogSubject(pid: 26576, names: ["hog"]), for: .root)
        XCTAssertEqual(selection.oomKilled, 26576)
        XCTAssertEqual(selection.oomReports, 1)
        let text = selection.lines.joined(separator: "\n")
        for expected in [
            "hog invoked oom-killer", "dump_stack_lvl", "memory: usage 65536kB", "secret-task",
            "Memory cgroup out of memory: Killed process 26576 (hog)", "oom_reaper: reaped process 26576 (hog)",
        ] {
            XCTAssertTrue(text.contains(expected), "\(expected):\n\(text)")
        }
        XCTAssertFalse(text.contains("other[999]"), text)
    }

    func testAnotherUsersTaskRowsAndInvokerAreLeftOut() {
        let subject = KernelLogSubject(pid: 26576, names: ["hog"])
        let own = KernelLogSelection.select(records(oom), about: subject, for: .user(uid: 1000)).lines.joined(separator: "\n")
        XCTAssertTrue(own.contains("hog invoked oom-killer"), own)
        XCTAssertTrue(own.contains("[  26576]  1000 26576"), own)
        XCTAssertFalse(own.contains("secret-task"), own)
        XCTAssertTrue(own.contains("[… 1 task row(s) of other users left out]"), own)
        XCTAssertTrue(own.contains("Killed process 26576 (hog)"), own)

        // Invoked by a task of another user's (uid 1001) that is not the process.
        var invoked = oom
        invoked[0] = "4,83108,43749921627,-;intruder invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0"
        invoked[1] = "4,83109,43749921643,-;CPU: 0 UID: 1001 PID: 26590 Comm: intruder Not tainted 6.18.44-fc-v595 #1"
        let other = KernelLogSelection.select(records(invoked), about: subject, for: .user(uid: 1000)).lines.joined(
            separator: "\n")
        XCTAssertFalse(other.contains("intruder"), other)
        XCTAssertFalse(other.contains("dump_stack_lvl"), other)
        XCTAssertTrue(
            other.contains("[… the OOM killer was invoked by a task of another user: its 8 line(s) are left out]"), other)
        XCTAssertTrue(other.contains("memory: usage 65536kB"), other)
    }

    func testAnOOMReportOfAnotherProcessIsNotSelected() {
        for viewer in [KernelLogViewer.root, .user(uid: 1000)] {
            let selection = KernelLogSelection.select(
                records(oom), about: KernelLogSubject(pid: 26590, names: ["secret-task"]), for: viewer)
            XCTAssertNil(selection.oomKilled)
            XCTAssertEqual(selection.lines, [])
        }
        // Unfinished (the kill not printed yet): nothing, so that an OOM kill waits for it.
        let unfinished = records(Array(oom.prefix(10)))
        XCTAssertNil(
            KernelLogSelection.select(unfinished, about: KernelLogSubject(pid: 26576, names: ["hog"]), for: .root).oomKilled)
    }

    /// The ring as a descriptor gives it, one record a read: a socketpair of datagrams stands in
    /// for /dev/kmsg's framing; records before the window are dropped, malformed ones counted.
    func testTheReaderKeepsTheWindowAndSkipsWhatDoesNotParse() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds), 0)
        defer { close(fds[0]) }
        for text in ["6,1,100,-;old[1]: segfault at 0", "garbage", "6,2,5000000,-;new[2]: segfault at 0"] {
            _ = send(fds[1], text, text.utf8.count, 0)
        }
        close(fds[1])
        let reading = KernelLog.read(fds[0], since: 1_000_000)
        XCTAssertEqual(reading.records.map(\.text), ["new[2]: segfault at 0"])
        XCTAssertEqual(reading.malformed, 1)
    }

    /// This machine's own /dev/kmsg, read whole within the bounds (skipped where it cannot be opened).
    func testTheMachinesRingIsReadWithinItsBounds() throws {
        let started = monotonicNanosecondsForTest()
        let reading: KernelLog.Reading
        do {
            reading = try KernelLog.read(since: 0)
        } catch {
            throw XCTSkip("/dev/kmsg: \(error)")
        }
        XCTAssertLessThan(monotonicNanosecondsForTest() - started, 1_000_000_000)
        XCTAssertNil(reading.cut)
        XCTAssertEqual(reading.malformed, 0)
    }

    func monotonicNanosecondsForTest() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
