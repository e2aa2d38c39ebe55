// End-to-end: Go programs under crashport (Tests/Fixtures/go/ledger.go, built with cgo). Go's
// runtime owns SIGSEGV: its handler turns a fault into a call of runtime.sigpanic, which panics
// (a nil dereference in Go code, recoverable) or, for a fault in C code called through cgo,
// prints "fatal error: unexpected signal during runtime execution"; either way an unrecovered
// one ends the process with exit(2), without another signal. With crashport the program must
// end exactly so (exit 2; SIGABRT with GOTRACEBACK=crash), and the one report must name the
// original fault (SIGSEGV at 0x0 in the C function, or in the Go method) with the frames gdb
// shows, under `crashport run` and under the sidecar alike; a recovered panic is no report.
// Skipped, with the reason, where `go` is not installed (tools/install installs golang-go).

import Foundation
import ReportModel
import TestSupport
import XCTest

final class GoTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("go")
    /// The C function that writes through NULL, and its caller (ledger.go's cgo preamble).
    static let cFrames = ["ledger_write_entry", "ledger_post"]

    /// ledger.go built once per test process (go build, cgo on, its cache in the test's directory).
    func ledger() throws -> String {
        guard let go = TestSupport.which("go") else {
            throw XCTSkip("go is not installed (tools/install installs golang-go): the Go fixture cannot be built")
        }
        let output = Self.directory + "/ledger"
        if !FileManager.default.fileExists(atPath: output) {
            let built = try TestSupport.run(
                [go, "build", "-o", output, TestSupport.fixture("go/ledger.go")],
                environment: [
                    "CGO_ENABLED": "1", "GOCACHE": Self.directory + "/cache", "GOPATH": Self.directory + "/gopath",
                    "GOFLAGS": "", "GO111MODULE": "off",
                ],
                timeout: 600)
            guard built.status == .exited(0) else { throw TestFailure("go build ledger.go failed:\n\(built.stderr)") }
        }
        return output
    }

    /// Everything a failed assertion should show about one run.
    func facts(_ label: String, _ result: RunResult) -> String {
        "\(label): \(result.status)\n--- stdout\n\(result.stdout.suffix(2000))\n--- stderr\n\(result.stderr.suffix(3000))"
    }

    func names(_ event: Event) -> [String] { (event.crashedThreadRecord?.frames ?? []).map { $0.function ?? "?" } }

    /// What every report of the cgo fault says: SIGSEGV at 0x0 in the C function, its C caller
    /// and cgo's wrapper below, and what Go's handler did with it (`how`).
    func checkCgoFault(_ event: Event, how: ReraiseRecord.How, _ context: String) {
        XCTAssertEqual(event.kind, .crash, context)
        XCTAssertEqual(event.signal?.name, "SIGSEGV", "the original fault: \(context)")
        XCTAssertEqual(event.signal?.codeName, "SEGV_MAPERR", context)
        XCTAssertEqual(event.signal?.faultAddress?.value, 0, context)
        XCTAssertEqual(event.signal?.reraisedBy?.how, how, "\(String(describing: event.signal?.reraisedBy)): \(context)")
        XCTAssertEqual(Array(names(event).prefix(2)), Self.cFrames, "\(names(event).prefix(8)): \(context)")
        XCTAssertTrue(
            names(event).dropFirst(2).first?.hasSuffix("_Cfunc_ledger_post") == true, "\(names(event).prefix(8)): \(context)")
        XCTAssertEqual(event.culprit?.function, "ledger_write_entry", context)
    }

    func testCgoSegfaultUnderRunIsReportedAsTheFaultWithGDBsFrames() throws {
        let program = try ledger()
        let plain = try TestSupport.run([program, "cgo"])
        let watched = try TestSupport.crashportRun([program, "cgo"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let context = facts("under crashport", watched.result)

        // Go's runtime ended it as without crashport: its fatal error, exit status 2.
        XCTAssertEqual(plain.status, .exited(2), facts("plain", plain))
        XCTAssertEqual(watched.result.status, plain.status, "the exit status is the one without crashport: \(context)")
        for (label, result) in [("plain", plain), ("under crashport", watched.result)] {
            XCTAssertTrue(
                result.stderr.contains("fatal error: unexpected signal during runtime execution"), facts(label, result))
        }
        XCTAssertEqual(watched.reportIDs.count, 1, context)
        guard watched.reportIDs.count == 1 else { return }
        let event = try watched.event()
        checkCgoFault(event, how: .calledThenExited, context)
        XCTAssertEqual(event.signal?.reraisedBy?.exitStatus, 2, context)
        XCTAssertTrue(
            watched.result.stderr.contains("crashed: SIGSEGV"), "run says so on stderr: \(context)")

        // gdb stops at the fault, before Go's handler: its frames, as far as it names them
        // (below runtime.asmcgocall it loses the Go stack it does not switch to).
        guard TestSupport.which("gdb") != nil else { throw XCTSkip("gdb is not installed: the frames were not compared") }
        let gdb = try TestSupport.gdbBacktrace([program, "cgo"], settings: ["handle SIGURG nostop noprint pass"])
        let named = Array(gdb.prefix { $0.function != "??" })
        XCTAssertGreaterThanOrEqual(named.count, 4, "\(gdb)")
        // gdb names Go's assembly functions by their DWARF name (runtime.asmcgocall), the symbol
        // table by its ABI's (runtime.asmcgocall.abi0).
        let ours = names(event).map { $0.hasSuffix(".abi0") ? String($0.dropLast(5)) : $0 }
        XCTAssertEqual(Array(ours.prefix(named.count)), named.map(\.function), "gdb: \(gdb)\ncrashport: \(names(event))")
    }

    /// From a goroutine, on another thread than the main one, with GOTRACEBACK=crash too: the
    /// SIGABRT comes from the thread that faulted, and the report is that thread's fault.
    func testCgoSegfaultOnAnotherThreadIsThatThreadsFault() throws {
        let program = try ledger()
        for traceback in ["", "crash"] {
            let environment = traceback.isEmpty ? [:] : ["GOTRACEBACK": traceback]
            let plain = try TestSupport.run([program, "cgo-goroutine"], environment: environment)
            let watched = try TestSupport.crashportRun([program, "cgo-goroutine"], environment: environment)
            defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
            let context = facts("GOTRACEBACK=\(traceback) under crashport", watched.result)
            XCTAssertEqual(plain.status, traceback.isEmpty ? .exited(2) : .signaled(SIGABRT), facts("plain", plain))
            XCTAssertEqual(watched.result.status, plain.status, context)
            XCTAssertEqual(watched.reportIDs.count, 1, context)
            guard watched.reportIDs.count == 1 else { continue }
            let event = try watched.event()
            checkCgoFault(event, how: traceback.isEmpty ? .calledThenExited : .raised, context)
            XCTAssertNotEqual(
                event.crashedThreadRecord?.tid?.rawValue, event.process?.pid?.rawValue, "not the main thread: \(context)")
        }
    }

    func testCgoSegfaultUnderTheSidecarAgreesWithRun() throws {
        let program = try ledger()
        let watched = try TestSupport.crashportRun([program, "cgo"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let directory = TestSupport.temporaryDirectory("go-sidecar")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sidecar = try SidecarProcess(directory: directory)
        defer { sidecar.stop() }
        let client = try TestSupport.run(
            [program, "cgo"], environment: ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(client.status, .exited(2), facts("under the sidecar", client))
        let events = try sidecar.waitForReports(1)
        XCTAssertEqual(events.count, 1, sidecar.log)
        guard let event = events.first else { return }
        checkCgoFault(event, how: .calledThenExited, sidecar.log)
        XCTAssertEqual(watched.reportIDs.count, 1, facts("under crashport run", watched.result))
        guard watched.reportIDs.count == 1 else { return }
        let run = try watched.event()
        XCTAssertEqual(event.signal?.name, run.signal?.name)
        XCTAssertEqual(event.title, run.title)
        XCTAssertEqual(Array(names(event).prefix(4)), Array(names(run).prefix(4)), "sidecar and run agree")
        // Its session ended as a crash, with this report.
        let session = try sidecar.session(of: event.process?.pid?.rawValue ?? -1)
        XCTAssertEqual(session["status"] as? String, "crashed", "\(session)")
        XCTAssertEqual(session["report_id"] as? String, sidecar.reportIDs().first, "\(session)")
    }

    /// A sidecar that traces its clients to their exit stops (--trace-exit --trace-exit-codes)
    /// would capture the exit(2) too: the fault is the one report, and the session's.
    func testCgoSegfaultUnderATracingSidecarIsOneReport() throws {
        let program = try ledger()
        let directory = TestSupport.temporaryDirectory("go-traced")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let sidecar = try SidecarProcess(directory: directory, arguments: ["--trace-exit", "--trace-exit-codes"])
        defer { sidecar.stop() }
        let client = try TestSupport.run(
            [program, "cgo"], environment: ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(client.status, .exited(2), facts("under the sidecar", client))
        let pid = try XCTUnwrap(sidecar.waitForReports(1).first?.process?.pid?.rawValue)
        // The session is recorded after every report of the process was written.
        let session = try sidecar.session(of: pid)
        let events = try sidecar.events()
        XCTAssertEqual(events.count, 1, "\(events.map { $0.title ?? "?" }): \(sidecar.log)")
        guard let event = events.first else { return }
        checkCgoFault(event, how: .calledThenExited, sidecar.log)
        XCTAssertEqual(session["status"] as? String, "crashed", "\(session)")
        XCTAssertEqual(session["report_id"] as? String, event.id, "\(session)")
    }

    func testCgoSegfaultWithGOTRACEBACKCrashNamesTheFaultAndTheAbort() throws {
        let program = try ledger()
        let environment = ["GOTRACEBACK": "crash"]
        let plain = try TestSupport.run([program, "cgo"], environment: environment)
        let watched = try TestSupport.crashportRun([program, "cgo"], environment: environment)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let context = facts("under crashport", watched.result)

        XCTAssertEqual(plain.status, .signaled(SIGABRT), facts("plain", plain))
        XCTAssertEqual(watched.result.status, plain.status, "the exit status is the one without crashport: \(context)")
        XCTAssertEqual(watched.reportIDs.count, 1, context)
        guard watched.reportIDs.count == 1 else { return }
        let event = try watched.event()
        checkCgoFault(event, how: .raised, context)
        XCTAssertEqual(event.signal?.reraisedBy?.signal, "SIGABRT", context)
        XCTAssertTrue(event.title?.hasPrefix("SIGSEGV") == true, event.title ?? "no title")
    }

    func testUnrecoveredNilDereferenceIsReportedAsTheFaultGoPanickedOn() throws {
        let program = try ledger()
        let plain = try TestSupport.run([program, "nil"])
        let watched = try TestSupport.crashportRun([program, "nil"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let context = facts("under crashport", watched.result)

        XCTAssertEqual(plain.status, .exited(2), facts("plain", plain))
        XCTAssertEqual(watched.result.status, plain.status, context)
        for (label, result) in [("plain", plain), ("under crashport", watched.result)] {
            XCTAssertTrue(
                result.stderr.contains("panic: runtime error: invalid memory address or nil pointer dereference"),
                facts(label, result))
        }
        XCTAssertEqual(watched.reportIDs.count, 1, context)
        guard watched.reportIDs.count == 1 else { return }
        let event = try watched.event()
        XCTAssertEqual(event.signal?.name, "SIGSEGV", context)
        XCTAssertEqual(event.signal?.reraisedBy?.how, .calledThenExited, context)
        XCTAssertEqual(names(event).first, "main.(*ledger).credit", "\(names(event).prefix(8))")
        XCTAssertTrue(containsInOrder(names(event), ["main.(*ledger).credit", "main.main"]), "\(names(event).prefix(8))")
    }

    /// After ten recovered panics (each captured from the record only, past the first few), the
    /// fatal fault is still the one report, with its frames.
    func testCgoSegfaultAfterRecoveredPanicsIsTheOneReport() throws {
        let program = try ledger()
        let watched = try TestSupport.crashportRun([program, "recovered-then-cgo"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let context = facts("under crashport", watched.result)
        XCTAssertEqual(watched.result.status, .exited(2), context)
        XCTAssertEqual(watched.reportIDs.count, 1, context)
        guard watched.reportIDs.count == 1 else { return }
        let event = try watched.event()
        checkCgoFault(event, how: .calledThenExited, context)
        XCTAssertTrue((event.notes ?? []).contains { $0.hasPrefix("only the faulting thread") }, "\(event.notes ?? [])")
    }

    func testRecoveredPanicIsNoReport() throws {
        let program = try ledger()
        let watched = try TestSupport.crashportRun([program, "recovered"])
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        XCTAssertEqual(watched.result.status, .exited(0), facts("under crashport", watched.result))
        XCTAssertTrue(watched.result.stdout.contains("recovered: runtime error"), facts("under crashport", watched.result))
        XCTAssertEqual(watched.reportIDs, [], "a recovered panic is the program's own business")
    }
}
