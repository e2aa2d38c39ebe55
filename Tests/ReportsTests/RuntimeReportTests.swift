// RuntimeReport: JIT frames named from a perf map's symbols, the runtime's crash log in the
// event, the title and `crashport show`; and Culprit's rule for a stack with no frame of the
// program's (the first frame that is not signal delivery).

import ReportModel
import XCTest

@testable import Reports

final class RuntimeReportTests: XCTestCase {
    func frame(_ function: String?, module: String?, pc: UInt64, trust: FrameTrust = .cfi) -> FrameRecord {
        FrameRecord(pc: HexAddress(pc), module: module, function: function, trust: trust)
    }

    func event(_ frames: [FrameRecord], signal: Int32 = 6) -> Event {
        var event = Event()
        event.kind = .crash
        event.signal = SignalRecord(number: signal, name: SignalNames.name(signal))
        event.modules = [
            ModuleRecord(path: "/usr/lib/x86_64-linux-gnu/libc.so.6"),
            ModuleRecord(path: "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"),
            ModuleRecord(path: "/usr/bin/node"),
        ]
        event.threads = [ThreadRecord(tid: ThreadID(1), name: "main", crashed: true, frames: frames)]
        return event
    }

    func testFramesInNoModuleAreNamedFromThePerfMap() {
        let symbols = [
            JITSymbol(start: 0x7000, size: 0x100, name: "JS:~crashInNative /srv/app.js:2:23"),
            JITSymbol(start: 0x7100, size: 0x100, name: "JS:~outerFunction /srv/app.js:3:23"),
        ]
        var event = event([
            frame("crashport_addon_write_null", module: "addon.node", pc: 0x1000, trust: .context),
            frame(nil, module: nil, pc: 0x7050),
            // A return address at the very end of crashInNative: the call is in it, not in the next.
            frame(nil, module: nil, pc: 0x7100, trust: .framePointer),
            frame(nil, module: "node", pc: 0x7150),
            frame(nil, module: nil, pc: 0x9000, trust: .framePointer),
        ])
        RuntimeReport.nameJITFrames(&event, symbols: symbols)
        let frames = event.crashedThreadRecord?.frames ?? []
        XCTAssertEqual(
            frames.map(\.function),
            [
                "crashport_addon_write_null", "JS:~crashInNative /srv/app.js:2:23", "JS:~crashInNative /srv/app.js:2:23", nil,
                nil,
            ])
        XCTAssertEqual(frames.map(\.language), [nil, "jit", "jit", nil, nil])
        XCTAssertEqual(frames[1].functionOffset?.value, 0x50)
        // The JavaScript frames are the program's; V8's own code is not.
        XCTAssertTrue(InAppRules().isInApp(modulePath: nil, function: "JS:~crashInNative /srv/app.js:2:23"))
        XCTAssertFalse(InAppRules().isInApp(modulePath: nil, function: "Builtin:InterpreterEntryTrampoline"))
    }

    var machinery: [FrameRecord] {
        [
            frame("__pthread_kill_implementation", module: "libc.so.6", pc: 0x10, trust: .context),
            frame("raise", module: "libc.so.6", pc: 0x20), frame("abort", module: "libc.so.6", pc: 0x30),
            frame("os::abort(bool, void*, void const*)", module: "libjvm.so", pc: 0x40),
            frame("VMError::report_and_die()", module: "libjvm.so", pc: 0x50),
        ]
    }

    func testWithNoFrameOfTheProgramsTheTitleSkipsSignalDelivery() {
        var event = event(machinery)
        Culprit.mark(&event)
        XCTAssertEqual(event.culprit?.function, "os::abort(bool, void*, void const*)")
        XCTAssertEqual(event.title, "SIGABRT: aborted in os::abort(bool, void*, void const*)")
    }

    func testTheJVMsProblematicFrameNamesACrashWithNoNativeFrameOfTheProgramsInTheTitle() {
        let runtime = RuntimeState(crashLogs: [
            RuntimeCrashLog(
                kind: "hs_err", path: "/tmp/hs_err_pid42.log", contents: Array("log".utf8), truncated: false,
                problematicFrame: "J 9 c2 UnsafeCrash.writeThrough(JI)V",
                frames: ["J 9 c2 UnsafeCrash.writeThrough(JI)V", "j UnsafeCrash.main([Ljava/lang/String;)V+40"])
        ])
        var event = event(machinery)
        RuntimeReport.record(runtime, into: &event)
        Culprit.mark(&event)
        XCTAssertEqual(event.title, "SIGABRT: aborted in J 9 c2 UnsafeCrash.writeThrough(JI)V")
        XCTAssertEqual(event.runtimeLogs?.first?.frames?.count, 2)
        let log = CrashLog.full(event)
        XCTAssertTrue(log.contains("Problematic frame: J 9 c2 UnsafeCrash.writeThrough(JI)V"), log)
        XCTAssertTrue(log.contains("    j UnsafeCrash.main([Ljava/lang/String;)V+40"), log)
        // Read back from its JSON: the same title.
        let decoded = try? Event.decode(event.jsonData())
        XCTAssertEqual(decoded?.runtimeLogs, event.runtimeLogs)

        // A native frame of the program's (a JNI library) is the better place: it stays.
        var jni = self.event(
            [frame("write_null_from_jni", module: "/tmp/libfixture-jni.so", pc: 0x60, trust: .context)] + machinery)
        RuntimeReport.record(runtime, into: &jni)
        Culprit.mark(&jni)
        XCTAssertEqual(jni.title, "SIGABRT: aborted in write_null_from_jni")
    }

    func testNodesReportGivesTheReasonAndTheTitlesPlace() {
        let runtime = RuntimeState(crashLogs: [
            RuntimeCrashLog(
                kind: "node-report", path: "report.20261129.135732.15296.0.001.json", contents: [], truncated: false,
                problematicFrame: "fatal on purpose", frames: ["at crashInNative (/srv/app.js:2:106)"])
        ])
        var event = event([frame("abort", module: "libc.so.6", pc: 0x30, trust: .context)])
        RuntimeReport.record(runtime, into: &event)
        Culprit.mark(&event)
        XCTAssertEqual(event.reason, "fatal on purpose")
        XCTAssertEqual(event.title, "SIGABRT: fatal on purpose in crashInNative (/srv/app.js:2:106)")
    }
}
