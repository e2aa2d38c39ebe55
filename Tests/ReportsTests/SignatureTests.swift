// The signature's rules on hand-made events: names normalised, the prefix rule, machinery
// skipped, and the fingerprint's inputs (what changes it and what must not).

import ReportModel
import XCTest

@testable import Reports

final class SignatureTests: XCTestCase {
    func testNamesLoseWhatVariesBetweenBuilds() {
        let cases = [
            ("worker_loop.cold", "worker_loop"),
            ("bind_port.constprop.0", "bind_port"),
            ("parse.part.0.isra.0", "parse"),
            ("serve.lto_priv.0", "serve"),
            ("cold_start", "cold_start"),
            ("runtime.raise.abi0", "runtime.raise"),
            ("int lookup<int>(std::vector<int, std::allocator<int> > const&, unsigned long)", "lookup"),
            ("Ledger::credit(std::__cxx11::basic_string<char> const&, long) const", "Ledger::credit"),
            ("(anonymous namespace)::Pool::run()", "(anonymous namespace)::Pool::run"),
            ("std::vector<int, std::allocator<int> >::at(unsigned long)", "std::vector::at"),
            ("bool operator< <Key>(Key const&, Key const&)", "operator<"),
            ("specialized Warehouse.stock(at:)", "Warehouse.stock(at:)"),
            ("closure #1 in audit(_:mode:)", "closure #1 in audit(_:mode:)"),
            ("main.(*ledger).credit", "main.(*ledger).credit"),
        ]
        for (name, expected) in cases { XCTAssertEqual(Signature.normalized(name), expected, name) }
    }

    func testTheCLibrarysVariantsAreOneFunction() {
        XCTAssertEqual(Signature.cLibraryFunction("__strlen_evex"), "strlen")
        XCTAssertEqual(Signature.cLibraryFunction("__strlen_avx2"), "strlen")
        XCTAssertEqual(Signature.cLibraryFunction("__memmove_avx_unaligned_erms"), "memmove")
        XCTAssertEqual(Signature.cLibraryFunction("__GI___libc_free"), "free")
        XCTAssertEqual(Signature.cLibraryFunction("cfree"), "free")
        XCTAssertNil(Signature.cLibraryFunction("strlen_of_record"))
        XCTAssertNil(Signature.cLibraryFunction("__pthread_kill_implementation"))
    }

    func event(_ frames: [(String, Bool)], signal: String = "SIGSEGV", module: String = "server") -> Event {
        var event = Event()
        event.kind = .crash
        event.signal = SignalRecord(number: signal == "SIGSEGV" ? 11 : 6, name: signal)
        var thread = ThreadRecord(tid: ThreadID(rawValue: 7), crashed: true)
        thread.frames = frames.enumerated().map { index, frame in
            var record = FrameRecord(
                index: index, pc: HexAddress(UInt64(0x1000 * (index + 1))), module: frame.1 ? module : "libc.so.6",
                function: frame.0, line: 40 + index)
            record.inApp = frame.1
            return record
        }
        event.threads = [thread]
        return event
    }

    func testPrefixMachineryAndTheFault() {
        var crash = event(
            [
                ("__pthread_kill_implementation", false), ("raise", false), ("abort", false), ("__libc_message", false),
                ("malloc_printerr", false), ("_int_free", false), ("cfree", false), ("release_buffer.cold", true), ("main", true),
            ], signal: "SIGABRT")
        Signature.mark(&crash)
        XCTAssertEqual(crash.signature, "free | release_buffer")

        // Lines, addresses and the thread differ between runs: the fingerprint does not.
        var moved = crash
        moved.threads![0].tid = ThreadID(rawValue: 99)
        moved.threads![0].frames = moved.threads![0].frames!.map {
            var frame = $0
            frame.line = ($0.line ?? 0) + 7
            frame.pc = HexAddress(($0.pc?.value ?? 0) + 0x40)
            return frame
        }
        Signature.mark(&moved)
        XCTAssertEqual(moved.fingerprint, crash.fingerprint)

        // Another signal in the same function is another bug; so is another program's `main`.
        var other = crash
        other.signal = SignalRecord(number: 11, name: "SIGSEGV")
        Signature.mark(&other)
        XCTAssertNotEqual(other.fingerprint, crash.fingerprint)
        var elsewhere = event([("main", true)], module: "client")
        var here = event([("main", true)], module: "server")
        Signature.mark(&elsewhere)
        Signature.mark(&here)
        XCTAssertNotEqual(elsewhere.fingerprint, here.fingerprint)

        // A frame the program called that is not on the prefix list does not lead it.
        var called = event([("json_parse", false), ("load_config", true)])
        Signature.mark(&called)
        XCTAssertEqual(called.signature, "load_config")

        // The C++ exception's type and Swift's runtime failure tell faults apart.
        var thrown = event([("lookup", true)], signal: "SIGABRT")
        thrown.exception = ExceptionRecord(type: "std::out_of_range", message: "index 7")
        var otherThrown = thrown
        otherThrown.exception = ExceptionRecord(type: "std::bad_alloc", message: "index 7")
        Signature.mark(&thrown)
        Signature.mark(&otherThrown)
        XCTAssertNotEqual(thrown.fingerprint, otherThrown.fingerprint)
        var onone = event([("Warehouse.stock(at:)", true)], signal: "SIGILL")
        onone.reason = "Swift/ContiguousArrayBuffer.swift:692: Fatal error: Index out of range"
        var optimised = event(
            [("Swift runtime failure: Index out of range", false), ("specialized Warehouse.stock(at:)", true)], signal: "SIGILL")
        Signature.mark(&onone)
        Signature.mark(&optimised)
        XCTAssertEqual(onone.fingerprint, optimised.fingerprint)
    }

    func testNoFramesStillGetsAFingerprint() {
        var killed = Event()
        killed.kind = .termination
        killed.cause = "oom-kill"
        killed.process = ProcessInfoRecord(pid: 4, executable: "/srv/bin/indexer")
        Signature.mark(&killed)
        XCTAssertEqual(killed.signature, "")
        XCTAssertEqual(killed.fingerprint?.count, 16)
    }

    func testInAppByWhatTheFrameIs() {
        let rules = InAppRules()
        // Swift's standard library specialised into the program, and the program's extension of it.
        XCTAssertFalse(
            rules.isInApp(
                modulePath: "/srv/app", function: "specialized Array._checkSubscript(_:wasNativeTypeChecked:)",
                file: "/<compiler-generated>",
                mangled: "$sSa15_checkSubscript_20wasNativeTypeCheckeds16_DependenceTokenVSi_SbtFSi_Tg5"))
        XCTAssertFalse(
            rules.isInApp(
                modulePath: "/srv/app", function: "specialized Dictionary.subscript.getter",
                mangled: "$sSDyq_SgxcigSS_SiTg5"))
        XCTAssertTrue(rules.isInApp(modulePath: "/srv/app", function: "Array.total()", mangled: "$sSa4mainE5totalSiyF"))
        XCTAssertTrue(
            rules.isInApp(
                modulePath: "/srv/app", function: "specialized Warehouse.stock(at:)",
                mangled: "$s4main9WarehouseV5stock2atS2i_tFTf4nx_n"))
        // Go's runtime and standard library; the program's packages.
        XCTAssertFalse(rules.isInApp(modulePath: "/srv/app", function: "runtime.raise.abi0"))
        XCTAssertFalse(rules.isInApp(modulePath: "/srv/app", function: "fmt.Fprintf", file: "/usr/lib/go-1.19/src/fmt/print.go"))
        XCTAssertTrue(rules.isInApp(modulePath: "/srv/app", function: "main.(*ledger).credit", file: "/src/ledger/main.go"))
        XCTAssertTrue(
            rules.isInApp(
                modulePath: "/srv/app", function: "github.com/acme/db.Open", file: "/root/go/pkg/mod/github.com/acme/db/open.go"))
        // A statically linked libc, by its reserved names, its sources and, when linked in, its functions.
        XCTAssertFalse(rules.isInApp(modulePath: "/srv/app", function: "__strlen_evex"))
        XCTAssertFalse(rules.isInApp(modulePath: "/srv/app", function: "raise", file: "../sysdeps/unix/sysv/linux/raise.c"))
        XCTAssertFalse(rules.isInApp(modulePath: "/srv/app", function: "abort", staticLibC: true))
        XCTAssertTrue(rules.isInApp(modulePath: "/srv/app", function: "abort"))
        XCTAssertTrue(rules.isInApp(modulePath: "/srv/app", function: "greet.cold"))
        // The patterns still decide first.
        XCTAssertTrue(InAppRules(inApp: ["app"]).isInApp(modulePath: "/srv/app", function: "runtime.raise"))
    }
}
