// End-to-end: crashport among other signal handlers (docs/architecture.md, issue 5's matrix). Each row is
// a real program under the real watcher, checked for report count, exit status, and that the
// other handler's side effect happened.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class CoexistenceTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("coexist")

    var crashProgram: String { get throws { try TestSupport.corpus()[0].path } }

    func belowLibrary() throws -> String {
        try TestSupport.compile(
            [TestSupport.fixture("coexist/below.c")], output: Self.directory + "/below.so",
            flags: ["-O2", "-g", "-shared", "-fPIC"])
    }

    func probeProgram() throws -> String {
        let stubDirectory = (try TestSupport.stub() as NSString).deletingLastPathComponent
        return try TestSupport.compile(
            [TestSupport.fixture("coexist/probe.c")], output: Self.directory + "/probe",
            flags: ["-O2", "-g", "-I", TestSupport.repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", stubDirectory, "-lcrashport", "-Wl,-rpath," + stubDirectory])
    }

    func chain(_ event: Event, _ signal: String = "SIGSEGV") -> HandlerChainEntry? {
        event.handlerChain?.first { $0.signal == signal }
    }

    func symbol(_ handler: HandlerRecord?) -> String? {
        if case .function(_, let symbol, _, _)? = handler { return symbol }
        return nil
    }

    /// A handler installed before crashport (below it): it runs after the report.
    func testHandlerInstalledBeforeCrashportRunsAfterTheReport() throws {
        let watched = try TestSupport.crashportRun(
            [try crashProgram, "null"], environment: ["LD_PRELOAD": try belowLibrary(), "BELOW_MODE": "exit42"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .exited(42), watched.result.stderr)
        XCTAssertTrue(watched.result.stderr.contains("below-ran"))
        XCTAssertEqual(watched.reportIDs.count, 1)
        let entry = chain(try watched.event())
        XCTAssertEqual(symbol(entry?.previous), "below_handler")
        XCTAssertEqual(entry?.action?.rawValue, "forwarded-to-previous")
        XCTAssertNil(entry?.above)
        // Every handled signal has an entry.
        XCTAssertEqual(
            Set(try watched.event().handlerChain?.compactMap(\.signal) ?? []),
            ["SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "SIGTRAP", "SIGSYS"])
    }

    /// A plain handler (no SA_SIGINFO) without SA_ONSTACK.
    func testPlainHandlerWithoutOnStack() throws {
        let watched = try TestSupport.crashportRun(
            [try crashProgram, "null"], environment: ["LD_PRELOAD": try belowLibrary(), "BELOW_MODE": "plain"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .exited(43), watched.result.stderr)
        XCTAssertTrue(watched.result.stderr.contains("below-plain-ran"))
        XCTAssertEqual(watched.reportIDs.count, 1)
        if case .function(_, let symbol, _, let flags)? = chain(try watched.event())?.previous {
            XCTAssertEqual(symbol, "below_plain_handler")
            XCTAssertFalse(flags.contains("SA_ONSTACK"))
            XCTAssertFalse(flags.contains("SA_SIGINFO"))
        } else {
            XCTFail("previous handler not recorded")
        }
    }

    /// A previous handler that itself crashes: the process still dies with the signal.
    func testPreviousHandlerThatCrashes() throws {
        let watched = try TestSupport.crashportRun(
            [try crashProgram, "null"], environment: ["LD_PRELOAD": try belowLibrary(), "BELOW_MODE": "crash"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(11), watched.result.stderr)
        XCTAssertTrue(watched.result.stderr.contains("below-crashing"))
        XCTAssertEqual(watched.reportIDs.count, 1)
    }

    /// A saved action whose handler address is in no mapping: no crash in the stub, the chain
    /// still continues, and the process dies with its signal.
    func testGarbledPreviousAction() throws {
        let watched = try TestSupport.crashportRun(
            [try crashProgram, "null"], environment: ["LD_PRELOAD": try belowLibrary(), "BELOW_MODE": "garbled"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(11), watched.result.stderr)
        XCTAssertEqual(watched.reportIDs.count, 1)
        if case .function(let address, let symbol, let module, _)? = chain(try watched.event())?.previous {
            XCTAssertEqual(address.value, 0x10)
            XCTAssertNil(symbol)
            XCTAssertNil(module)
        } else {
            XCTFail("previous handler not recorded")
        }
    }

    /// A handler installed after crashport (above it) that recovers its own probe faults with
    /// siglongjmp and chains real crashes to the previous action it got back: SIG_DFL, as without
    /// crashport, so it resets the action and returns. crashport, still in the kernel's slot,
    /// reports the real crash once.
    func testHandlerInstalledAfterCrashportThatChains() throws {
        let plain = try TestSupport.run([try probeProgram(), "above"])
        let watched = try TestSupport.crashportRun([try probeProgram(), "above"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, plain.status, watched.result.stderr)
        XCTAssertEqual(watched.result.status, .signaled(11), watched.result.stderr)
        XCTAssertTrue(watched.result.stderr.contains("probe recovered 3"))
        XCTAssertEqual(watched.reportIDs.count, 1, "the recovered probes are not crashes")
        let event = try watched.event()
        XCTAssertEqual(event.signal?.faultAddress?.value, 0)
        XCTAssertEqual(event.crashedFunctions.first, "real_crash")
        XCTAssertEqual(event.signal?.reraisedBy?.function, "probe_handler")
        XCTAssertEqual(event.signal?.reraisedBy?.how, .resetAndReturned)
        XCTAssertEqual(chain(event)?.above, .disposition(.default), "it reset its action before the report")
        XCTAssertEqual(chain(event)?.policy, .forwardFirst)
    }

    /// Forward-first: a handler below crashport that recovers probe faults with siglongjmp gets
    /// them first, so only the real crash is reported; by default the first probe would be.
    func testForwardFirstReportsOnlyTheFaultNobodyHandled() throws {
        let probe = try probeProgram()
        let manual = ["CRASHPORT_INSTALL": "manual"]
        let byDefault = try TestSupport.crashportRun([probe, "below"], environment: manual)
        defer { try? FileManager.default.removeItem(atPath: byDefault.reportsDirectory) }
        XCTAssertEqual(byDefault.result.status, .signaled(11))
        XCTAssertEqual(byDefault.reportIDs.count, 1)
        XCTAssertEqual(try byDefault.event().signal?.faultAddress?.value, 0x1000, "report-then-forward reports the probe")

        for (options, environment) in [
            (["--forward-first", "SIGSEGV"], manual),
            ([], manual.merging(["CRASHPORT_FORWARD_FIRST": "segv"]) { $1 }),
        ] {
            let watched = try TestSupport.crashportRun([probe, "below"], options: options, environment: environment)
            defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
            XCTAssertEqual(watched.result.status, .signaled(11), watched.result.stderr)
            XCTAssertTrue(watched.result.stderr.contains("probe recovered 3"), watched.result.stderr)
            XCTAssertEqual(watched.reportIDs.count, 1)
            let event = try watched.event()
            XCTAssertEqual(event.signal?.faultAddress?.value, 0)
            XCTAssertEqual(event.crashedFunctions.first, "real_crash")
            XCTAssertEqual(chain(event)?.policy?.rawValue, "forward-first")
            XCTAssertEqual(event.signal?.reraisedBy?.function, "probe_handler")
            XCTAssertTrue(event.notes?.contains { $0.contains("ran first") } ?? false, "\(event.notes ?? [])")
        }
    }

    /// Unknown names in CRASHPORT_FORWARD_FIRST: one clear line at install, defaults kept.
    func testUnknownForwardFirstSignalIsReportedOnceAndIgnored() throws {
        let watched = try TestSupport.crashportRun(
            [try crashProgram, "null"], environment: ["CRASHPORT_FORWARD_FIRST": "SIGSEGV,SIGNOPE"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(11))
        let lines = watched.result.stderr.split(separator: "\n").filter { $0.contains("CRASHPORT_FORWARD_FIRST") }
        XCTAssertEqual(lines.count, 1, watched.result.stderr)
        XCTAssertTrue(lines.first?.contains("SIGNOPE") ?? false)
        XCTAssertEqual(watched.reportIDs.count, 1)
        XCTAssertEqual(chain(try watched.event())?.policy?.rawValue, "report-then-forward")
    }

    /// A program that resets the signal to SIG_DFL changes its own action, not the kernel's:
    /// crashport keeps the slot, reports the crash, and the process dies by the default action.
    func testProgramThatResetsToDefault() throws {
        let source = Self.directory + "/dfl.c"
        try "#include <signal.h>\nint *volatile p;\nint main(void) { signal(SIGSEGV, SIG_DFL); *p = 1; return 0; }\n"
            .write(toFile: source, atomically: true, encoding: .utf8)
        let program = try TestSupport.compile([source], output: Self.directory + "/dfl")
        let watched = try TestSupport.crashportRun([program])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(11))
        XCTAssertEqual(watched.reportIDs.count, 1)
        let event = try watched.event()
        XCTAssertEqual(event.kind?.rawValue, "crash")
        XCTAssertEqual(event.signal?.name, "SIGSEGV")
        XCTAssertEqual(event.crashedFunctions.first, "main")
        XCTAssertEqual(chain(event)?.above, .disposition(.default))
        XCTAssertEqual(chain(event)?.action, .defaultAction)
    }

    /// A raw rt_sigaction bypasses libc's sigaction, so crashport never sees it: SIG_DFL put in
    /// the kernel's slot that way takes crashport out, and the launcher, which sees every death,
    /// writes a termination report.
    func testRawSystemCallToDefaultBypassesCrashport() throws {
        let source = Self.directory + "/rawdfl.c"
        try """
        #include <signal.h>
        #include <stdint.h>
        #include <sys/syscall.h>
        #include <unistd.h>
        int *volatile p;
        int main(void) {
            uint64_t action[4] = {0, 0, 0, 0}; /* SIG_DFL, as the kernel's struct sigaction */
            syscall(SYS_rt_sigaction, SIGSEGV, action, 0, 8);
            *p = 1;
            return 0;
        }
        """.write(toFile: source, atomically: true, encoding: .utf8)
        let program = try TestSupport.compile([source], output: Self.directory + "/rawdfl")
        let watched = try TestSupport.crashportRun([program])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .signaled(11))
        XCTAssertEqual(watched.reportIDs.count, 1)
        let event = try watched.event()
        XCTAssertEqual(event.kind?.rawValue, "termination")
        XCTAssertEqual(event.signal?.name, "SIGSEGV")
        XCTAssertTrue(watched.result.stderr.contains("no crash record"), watched.result.stderr)
    }

    /// The Swift runtime's own backtracer stays on: both it and crashport report.
    func testSwiftRuntimeBacktracerCoexists() throws {
        let program = Self.directory + "/inventory"
        let compile = try TestSupport.run(
            ["swiftc", "-O", "-g", TestSupport.fixture("swift/Inventory.swift"), "-o", program], timeout: 300)
        XCTAssertEqual(compile.status, .exited(0), compile.stderr)
        let environment = ["SWIFT_BACKTRACE": "enable=yes,interactive=no"]
        let plain = try TestSupport.run([program], environment: environment)
        let watched = try TestSupport.crashportRun([program], environment: environment)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, plain.status)
        XCTAssertTrue(watched.result.stderr.contains("Program crashed"), "Swift's backtracer output:\n\(watched.result.stderr)")
        XCTAssertEqual(watched.reportIDs.count, 1)
        let event = try watched.event()
        XCTAssertEqual(event.signal?.name, "SIGILL")
        // Swift marks the trap with an artificial inlined frame naming the failure, above the
        // function that trapped.
        XCTAssertEqual(event.crashedFunctions.first, "Swift runtime failure: Index out of range")
        XCTAssertTrue(
            containsInOrder(event.crashedFunctions, ["specialized Inventory.item(at:)", "main"]), "\(event.crashedFunctions)")
        XCTAssertEqual(event.crashedThreadRecord?.frames?.first?.inlined, true)
        let item = event.crashedThreadRecord?.frames?.first { $0.function == "specialized Inventory.item(at:)" }
        XCTAssertTrue(item?.mangled?.hasPrefix("$s") ?? false)
        XCTAssertEqual(item?.file.map { ($0 as NSString).lastPathComponent }, "Inventory.swift")
        XCTAssertEqual(item?.line, 8)
        XCTAssertTrue(event.signal?.description?.contains("Index out of range") ?? false)
        XCTAssertTrue(watched.result.stderr.contains("Index out of range"))
        // An -O bounds check traps without calling the runtime: the reason is the trap's frame.
        XCTAssertEqual(event.reason, "Swift runtime failure: Index out of range")
    }

    /// AddressSanitizer keeps working (its runtime is preloaded first) and still reports.
    func testAddressSanitizer() throws {
        let program = try TestSupport.compile(
            [TestSupport.fixture("corpus/crash.c")], output: Self.directory + "/asan", flags: ["-O1", "-g", "-fsanitize=address"])
        let plain = try TestSupport.run([program, "null"])
        let watched = try TestSupport.crashportRun([program, "null"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, plain.status, watched.result.stderr)
        XCTAssertTrue(watched.result.stderr.contains("AddressSanitizer: SEGV"), watched.result.stderr)
        XCTAssertEqual(watched.reportIDs.count, 1)
        XCTAssertEqual(try watched.event().crashedFunctions.first, "crash_null")
    }
}
