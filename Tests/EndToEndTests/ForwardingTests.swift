// End-to-end: crashport keeps the kernel's signal slot (issue 11). Programs install their own
// handlers after crashport (Tests/Fixtures/forward/handlers.c, Python's faulthandler); each must
// die, or survive, exactly as without crashport (exit status, the handler's own output), and a
// crash must be reported once, naming the original fault with the frames down to main, live and
// from the minidump offline.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class ForwardingTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("forward")
    static let faultingFrames = ["crash_inner", "crash_middle", "crash_outer", "main"]

    func program() throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("forward/handlers.c")], output: Self.directory + "/handlers",
            flags: ["-O1", "-g", "-pthread"])
    }

    /// Runs a mode plainly and under crashport: same exit status, and the report count.
    func compare(
        _ mode: String, reports: Int, file: StaticString = #filePath, line: UInt = #line
    ) throws -> (
        plain: RunResult, watched: CrashportRun
    ) {
        let program = try program()
        let plain = try TestSupport.run([program, mode])
        let watched = try TestSupport.crashportRun([program, mode])
        XCTAssertEqual(watched.result.status, plain.status, "\(mode): \(watched.result.stderr)", file: file, line: line)
        XCTAssertEqual(watched.reportIDs.count, reports, "\(mode): \(watched.result.stderr)", file: file, line: line)
        return (plain, watched)
    }

    /// The report names the NULL store in crash_inner, reached from main.
    func assertOriginalFault(_ event: Event, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(event.signal?.name, "SIGSEGV", file: file, line: line)
        XCTAssertEqual(event.signal?.codeName, "SEGV_MAPERR", file: file, line: line)
        XCTAssertEqual(event.signal?.faultAddress?.value, 0, file: file, line: line)
        XCTAssertEqual(event.crashedFunctions.first, "crash_inner", "\(event.crashedFunctions)", file: file, line: line)
        XCTAssertTrue(
            containsInOrder(event.crashedFunctions, Self.faultingFrames), "\(event.crashedFunctions)", file: file, line: line)
    }

    /// `crashport symbolicate --format json` of the report's minidump: the same crashed frames.
    func assertOfflineAgrees(_ run: CrashportRun, file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try TestSupport.run([TestSupport.crashport, "symbolicate", "--format", "json", run.minidumpPath()])
        XCTAssertEqual(result.status, .exited(0), result.stderr, file: file, line: line)
        let offline = try Event.decode(Data(result.stdout.utf8))
        XCTAssertEqual(offline.crashedFunctions, try run.event().crashedFunctions, file: file, line: line)
        XCTAssertEqual(offline.signal?.faultAddress, try run.event().signal?.faultAddress, file: file, line: line)
    }

    /// A handler on its own alternate stack with SA_NODEFER that prints, restores the previous
    /// action (SIG_DFL: what the program was told) and re-raises.
    func testHandlerAboveCrashportThatReRaises() throws {
        let (plain, watched) = try compare("reraise", reports: 1)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(plain.status, .signaled(SIGSEGV))
        XCTAssertTrue(watched.result.stderr.contains("reraise_handler ran"), watched.result.stderr)
        let event = try watched.event()
        assertOriginalFault(event)
        XCTAssertEqual(event.signal?.reraisedBy?.how, .raised)
        XCTAssertEqual(event.signal?.reraisedBy?.signal, "SIGSEGV")
        XCTAssertEqual(event.signal?.reraisedBy?.codeName, "SI_TKILL")
        XCTAssertEqual(event.signal?.reraisedBy?.function, "reraise_handler")
        XCTAssertTrue(
            watched.result.stderr.contains("at 0x0 in crash_inner, re-raised by reraise_handler as SIGSEGV"),
            watched.result.stderr)
        let chain = event.handlerChain?.first { $0.signal == "SIGSEGV" }
        XCTAssertEqual(chain?.policy, .forwardFirst)
        XCTAssertEqual(chain?.action, .defaultAction)
        XCTAssertEqual(chain?.ran?.first, "reraise_handler (the program's): re-raised it as SIGSEGV")
        try assertOfflineAgrees(watched)
    }

    func testHandlerThatFaultsItself() throws {
        let (plain, watched) = try compare("faulting", reports: 1)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(plain.status, .signaled(SIGSEGV))
        let event = try watched.event()
        assertOriginalFault(event)
        XCTAssertEqual(event.signal?.reraisedBy?.how, .faulted)
        XCTAssertEqual(event.signal?.reraisedBy?.function, "faulting_handler")
        try assertOfflineAgrees(watched)
    }

    func testHandlerThatRaisesAnotherSignal() throws {
        let (plain, watched) = try compare("other", reports: 1)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(plain.status, .signaled(SIGBUS))
        let event = try watched.event()
        assertOriginalFault(event)
        XCTAssertEqual(event.signal?.reraisedBy?.signal, "SIGBUS")
    }

    /// A handler that re-raises into itself forever: bounded, one report, the same death.
    func testHandlerThatLoopsReRaising() throws {
        let (plain, watched) = try compare("loop", reports: 1)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(plain.status, .signaled(SIGSEGV))
        let event = try watched.event()
        XCTAssertEqual(event.kind, .crash)
        assertOriginalFault(event)
    }

    /// A fault inside the handler whose nested run siglongjmps out is recovered: no report for
    /// it; the program's later real crash is the one reported.
    func testSiglongjmpOutOfANestedSignal() throws {
        let (_, watched) = try compare("nested-jump", reports: 1)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertTrue(watched.result.stderr.contains("nested-jump: recovered"), watched.result.stderr)
        let event = try watched.event()
        assertOriginalFault(event)
        XCTAssertNil(event.signal?.reraisedBy, "the real crash happened under SIG_DFL")
    }

    /// SIGSEGV set to SIG_IGN: the kernel kills on a fault anyway; crashport reports first.
    func testIgnoredFaultSignal() throws {
        let (plain, watched) = try compare("ignore", reports: 1)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(plain.status, .signaled(SIGSEGV))
        let event = try watched.event()
        assertOriginalFault(event)
        XCTAssertEqual(event.handlerChain?.first { $0.signal == "SIGSEGV" }?.above, .disposition(.ignore))
    }

    /// sigaction called inside the handler sees the program's own action; the handler recovers.
    func testSigactionFromInsideAHandler() throws {
        let (_, watched) = try compare("in-handler", reports: 1)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertTrue(watched.result.stderr.contains("in_handler_handler sees itself"), watched.result.stderr)
        assertOriginalFault(try watched.event())
    }

    /// A handler that repairs the context (the JVM's implicit null checks): 1000 faults, no report.
    func testHandlerThatRepairsTheContextIsNotACrash() throws {
        let (plain, watched) = try compare("recover-pc", reports: 0)
        XCTAssertEqual(plain.status, .exited(0))
        XCTAssertTrue(watched.result.stdout.contains("recovered 1000"), watched.result.stdout)
    }

    /// Four threads set and reset SIGSEGV's action a million times while the main thread takes
    /// 20,000 faults the current action recovers: no torn action is read back or run.
    func testActionsChangedFromManyThreadsWhileFaultsHappen() throws {
        let (plain, watched) = try compare("storm", reports: 0)
        XCTAssertEqual(plain.status, .exited(0))
        XCTAssertTrue(watched.result.stdout.contains("storm recovered 20000"), watched.result.stdout + watched.result.stderr)
    }

    /// An alternate stack too small for the handler: the process dies as without crashport,
    /// bounded; the launcher's report (a crash, or a termination without a record) is written.
    func testAlternateStackTooSmall() throws {
        let (plain, watched) = try compare("tiny-stack", reports: 1)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(plain.status, .signaled(SIGSEGV))
    }

    /// A thread parked inside a handler crashport runs (on the frame crashport built for it) is
    /// unwound through that frame down to its thread function, live and offline: the frame's
    /// return trampoline carries unwind information like libc's own.
    func testThreadInsideAForwardedHandlerIsUnwoundThroughIt() throws {
        let (_, watched) = try compare("parked", reports: 1)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let event = try watched.event()
        assertOriginalFault(event)
        let parked = try XCTUnwrap(event.threads?.first { $0.crashed != true })
        let names = parked.frames?.map { $0.function ?? "?" } ?? []
        XCTAssertTrue(
            containsInOrder(names, ["park_handler", "<signal handler called>", "worker_fault", "worker_thread"]), "\(names)")
        let result = try TestSupport.run([TestSupport.crashport, "symbolicate", "--format", "json", watched.minidumpPath()])
        let offline = try Event.decode(Data(result.stdout.utf8))
        XCTAssertEqual(offline.threads?.first { $0.tid == parked.tid }?.frames?.map { $0.function ?? "?" }, names)
    }

    /// sigaction, signal, sysv_signal and sigset answer as libc's would without crashport.
    func testInterposedFunctionsAnswerAsLibcWould() throws {
        let (plain, watched) = try compare("api", reports: 0)
        XCTAssertEqual(plain.status, .exited(0), plain.stderr)
        XCTAssertTrue(watched.result.stdout.contains("api ok"), watched.result.stderr)
    }

    /// A handler installed with the raw rt_sigaction system call never passes through libc's
    /// sigaction: the handler chain shows what the kernel held at the crash.
    func testHandlerChainShowsAnActionThatBypassedTheStub() throws {
        let (_, watched) = try compare("bypass", reports: 1)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let event = try watched.event()
        assertOriginalFault(event)
        let bus = event.handlerChain?.first { $0.signal == "SIGBUS" }
        guard case .function(_, let symbol, _, _)? = bus?.kernel else {
            return XCTFail("no kernel action for SIGBUS: \(String(describing: bus))")
        }
        XCTAssertEqual(symbol, "bypass_handler")
        XCTAssertNil(event.handlerChain?.first { $0.signal == "SIGSEGV" }?.kernel)
    }

    /// Python's faulthandler (pytest turns it on): its traceback as without crashport, and the
    /// report names the NULL read in strlen with every frame down to main.
    func testPythonFaulthandler() throws {
        guard let python = TestSupport.which("python3") else {
            throw XCTSkip("python3 is not on this machine")
        }
        let command = [python, "-X", "faulthandler", "-c", "import ctypes; ctypes.string_at(0)"]
        let plain = try TestSupport.run(command)
        let watched = try TestSupport.crashportRun(command)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(plain.status, .signaled(SIGSEGV))
        XCTAssertEqual(watched.result.status, plain.status, watched.result.stderr)
        for text in ["Fatal Python error: Segmentation fault", "in string_at"] {
            XCTAssertTrue(plain.stderr.contains(text), plain.stderr)
            XCTAssertTrue(watched.result.stderr.contains(text), watched.result.stderr)
        }
        XCTAssertEqual(watched.reportIDs.count, 1)
        let event = try watched.event()
        XCTAssertEqual(event.signal?.name, "SIGSEGV")
        XCTAssertEqual(event.signal?.codeName, "SEGV_MAPERR")
        XCTAssertEqual(event.signal?.faultAddress?.value, 0)
        XCTAssertEqual(event.signal?.reraisedBy?.function, "faulthandler_fatal_error")
        XCTAssertTrue(event.crashedFunctions.first?.contains("strlen") ?? false, "\(event.crashedFunctions)")
        // The frames gdb shows from the fault (its "<signal handler called>" onwards).
        XCTAssertTrue(
            containsInOrder(
                event.crashedFrames,
                [
                    "string_at", "ffi_call", "_ctypes_callproc", "PyEval_EvalCode", "Py_RunMain", "Py_BytesMain",
                    "__libc_start_main",
                ]),
            "\(event.crashedFunctions)")
        XCTAssertTrue(watched.result.stderr.contains("re-raised by faulthandler_fatal_error as SIGSEGV"), watched.result.stderr)
        let result = try TestSupport.run([TestSupport.crashport, "symbolicate", "--format", "json", watched.minidumpPath()])
        // The minidump holds the native frames: the event's, less the Python frames read live.
        let native = (event.crashedThreadRecord?.frames ?? []).filter { $0.language == nil }.map { $0.function ?? "?" }
        XCTAssertEqual(try Event.decode(Data(result.stdout.utf8)).crashedFunctions, native)
        XCTAssertEqual(
            event.crashedThreadRecord?.frames?.filter { $0.language == "python" }.map { $0.function ?? "?" },
            ["string_at", "<module>"])
    }
}
