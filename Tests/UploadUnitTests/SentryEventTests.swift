// An event in Sentry's shape, from a made-up report (values in, JSON out): frame order, the
// debug_id rule against values symbolic computed from real ELF files, tags within Sentry's
// limits, levels and mechanisms per kind, and what privacy leaves out. Relay's own normalizer
// checks real reports in EndToEndTests/SentryEventEndToEndTests.

import Foundation
import ReportModel
import Upload
import XCTest

final class SentryEventTests: XCTestCase {
    let options = SentryEvent.Options(sdkVersion: "9.9.9")

    /// A crash on thread 100 in f (inlined into g), called from main; thread 101 waits.
    func crash() -> Event {
        var event = Event()
        event.id = "20261124T013016.301Z-100-7e05"
        event.kind = .crash
        event.timestamp = "2026-11-24T01:30:16.301Z"
        event.process = ProcessInfoRecord(
            pid: 100, executable: "/home/alice/app", arguments: ["/home/alice/app", "--password", "hunter2"],
            buildID: "14292519f3bce70b21e48739f0726c69fdacd70d")
        event.signal = SignalRecord(
            number: 11, name: "SIGSEGV", code: 1, codeName: "SEGV_MAPERR", faultAddress: HexAddress(0),
            description: "segmentation fault: address not mapped (SEGV_MAPERR)")
        event.crashedThread = 100
        var inlined = FrameRecord(
            index: 0, pc: HexAddress(0x1000_12d7), module: "app", moduleOffset: HexAddress(0x12d7), function: "f",
            functionOffset: HexAddress(0), file: "/src/app.c", line: 30, column: 14, inlined: true, trust: .context)
        inlined.inApp = true
        var outer = FrameRecord(
            index: 1, pc: HexAddress(0x1000_12d7), module: "app", moduleOffset: HexAddress(0x12d7), function: "g",
            mangled: "_Z1gv", functionOffset: HexAddress(0x17), file: "/src/app.c", line: 41, trust: .context)
        outer.inApp = true
        var main = FrameRecord(
            index: 2, pc: HexAddress(0x1000_17ec), module: "app", function: "main", symbol: "main.cold", file: "app.c", line: 80,
            trust: .cfi)
        main.inApp = true
        var libc = FrameRecord(index: 3, pc: HexAddress(0x7f00_0002_7305), module: "libc.so.6", function: "__libc_start_main")
        libc.inApp = false
        libc.trust = .framePointer
        event.threads = [
            ThreadRecord(
                tid: 100, name: "app", crashed: true, registers: ["rip": HexAddress(0x1000_12d7)],
                frames: [inlined, outer, main, libc]),
            ThreadRecord(
                tid: 101, name: "worker", crashed: false,
                frames: [
                    FrameRecord(
                        index: 0, pc: HexAddress(0x7f00_0009_0000), module: "libc.so.6", function: "pause", trust: .context)
                ]),
        ]
        event.modules = [
            ModuleRecord(
                path: "/home/alice/app", base: HexAddress(0x1000_0000), size: HexAddress(0x5000),
                buildID: "14292519f3bce70b21e48739f0726c69fdacd70d"),
            ModuleRecord(
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6", base: HexAddress(0x7f00_0000_0000), size: HexAddress(0x1d_5000),
                buildID: "93ac61ec5a8eb1396f9fbd350e3169a558528a40"),
            ModuleRecord(path: "/opt/no-build-id.so", base: HexAddress(0x7f10_0000_0000), size: HexAddress(0x1000)),
        ]
        event.release = "app@1.2"
        event.session = "9b992308-5ef4-4aba-b0c6-22d18cbe642a"
        event.annotations = [
            "user": "bob", "environment": "staging", "release": "ignored: event.release wins",
            "build": "nightly\n\u{1b}[31mred", "long": String(repeating: "v", count: 201),
            "edge": String(repeating: "v", count: 200), String(repeating: "k", count: 33): "x",
            String(repeating: "k", count: 32): "y", "with space": "z", "empty": "",
        ]
        event.breadcrumbs = [
            BreadcrumbRecord(timestamp: "2026-11-24T01:30:16.297Z", category: "loop", message: "step 1"),
            BreadcrumbRecord(timestamp: "2026-11-24T01:30:16.298Z", category: "loop", message: "step 2", truncated: true),
        ]
        event.culprit = CulpritRecord(function: "f", file: "/src/app.c", line: 30, module: "app")
        return event
    }

    func payload(_ event: Event, _ options: SentryEvent.Options? = nil) throws -> [String: Any] {
        // Through the bytes, as Sentry would read them.
        let data = try SentryEvent.jsonData(for: event, options: options ?? self.options)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    func testWhereItRanIsTagged() throws {
        var event = crash()
        let id = String(repeating: "3f2a", count: 16)
        var identity = ContainerIdentity(cgroup: "/kubepods.slice/x")
        (identity.runtime, identity.id, identity.name, identity.image) = (.containerd, id, "web", "nginx:1.27")
        (identity.podUID, identity.podName, identity.podNamespace) = ("0b4f1c3e-8a2d-4c61-9f7e-2d5b3a1c0e9f", "web-1", "shop")
        identity.describe(&event.process)
        let tags = try XCTUnwrap(payload(event)["tags"] as? [String: String])
        XCTAssertEqual(tags["container.id"], id)
        XCTAssertEqual(tags["container.name"], "web")
        XCTAssertEqual(tags["container.runtime"], "containerd")
        XCTAssertEqual(tags["container.image"], "nginx:1.27")
        XCTAssertEqual(tags["k8s.pod.name"], "web-1")
        XCTAssertEqual(tags["k8s.namespace.name"], "shop")
        XCTAssertEqual(tags["k8s.container.name"], "web")
        let plain = try XCTUnwrap(payload(crash())["tags"] as? [String: String])
        XCTAssertTrue(plain.keys.allSatisfy { !$0.hasPrefix("container.") && !$0.hasPrefix("k8s.") }, "\(plain)")
    }

    func exception(_ payload: [String: Any]) throws -> [String: Any] {
        let values = try XCTUnwrap((payload["exception"] as? [String: Any])?["values"] as? [[String: Any]])
        XCTAssertEqual(values.count, 1)
        return try XCTUnwrap(values.first)
    }

    /// The fault explanation goes as mechanism data and a tag; the frames' variables only when
    /// the upload says so (--send-variables).
    func testTheDiagnosisIsSentAndTheVariablesOnlyWhenAsked() throws {
        var event = crash()
        event.fault = FaultRecord(
            instruction: InstructionRecord(text: "mov eax, dword ptr [rax + 8]"),
            access: AccessRecord(kind: .read, size: 4, expression: "[rax + 8]", address: HexAddress(8)),
            diagnosis: DiagnosisRecord(rule: "near-null", summary: "null pointer dereference"),
            variable: BadValueRecord(register: "rax", value: HexAddress(0), variable: "o", expression: "o->sku"))
        event.threads?[0].frames?[0].vars = [VariableRecord(name: "o", type: "struct order *", value: "0x0", parameter: true)]
        let sent = try payload(event)
        let mechanism = try XCTUnwrap(try exception(sent)["mechanism"] as? [String: Any])
        let data = try XCTUnwrap(mechanism["data"] as? [String: Any])
        XCTAssertEqual(data["diagnosis_rule"] as? String, "near-null")
        XCTAssertEqual(data["instruction"] as? String, "mov eax, dword ptr [rax + 8]")
        XCTAssertEqual(data["bad_value_variable"] as? String, "o->sku")
        XCTAssertEqual((sent["tags"] as? [String: String])?["crashport.diagnosis"], "near-null")
        func variables(_ payload: [String: Any]) throws -> [[String: Any]?] {
            let frames = try XCTUnwrap((try exception(payload)["stacktrace"] as? [String: Any])?["frames"] as? [[String: Any]])
            return frames.map { $0["vars"] as? [String: Any] }
        }
        XCTAssertTrue(try variables(sent).allSatisfy { $0 == nil }, "variables left out by default")
        var asked = options
        asked.includeVariables = true
        let withVariables = try variables(try payload(event, asked))
        XCTAssertEqual(withVariables.last??["o"] as? String, "0x0")
    }

    func testCrashIsFatalWithTheSignalAsSentryNativeReportsIt() throws {
        let payload = try payload(crash())
        XCTAssertEqual(payload["platform"] as? String, "native")
        XCTAssertEqual(payload["level"] as? String, "fatal")
        XCTAssertEqual(payload["timestamp"] as? String, "2026-11-24T01:30:16.301Z")
        XCTAssertEqual(payload["release"] as? String, "app@1.2")
        XCTAssertEqual(payload["environment"] as? String, "staging", "from the annotation")
        XCTAssertEqual(payload["culprit"] as? String, "f (app.c:30)")
        XCTAssertEqual(payload["sdk"] as? [String: String], ["name": "crashport", "version": "9.9.9"])
        let exception = try exception(payload)
        XCTAssertEqual(exception["type"] as? String, "SIGSEGV")
        XCTAssertEqual(exception["value"] as? String, "segmentation fault: address not mapped (SEGV_MAPERR)")
        XCTAssertEqual(exception["thread_id"] as? Int, 100)
        let mechanism = try XCTUnwrap(exception["mechanism"] as? [String: Any])
        XCTAssertEqual(mechanism["type"] as? String, "signalhandler")
        XCTAssertEqual(mechanism["handled"] as? Bool, false)
        XCTAssertEqual(mechanism["synthetic"] as? Bool, true)
        let signal = try XCTUnwrap((mechanism["meta"] as? [String: Any])?["signal"] as? [String: Any])
        XCTAssertEqual(signal["number"] as? Int, 11)
        XCTAssertEqual(signal["code"] as? Int, 1)
        XCTAssertEqual(signal["name"] as? String, "SIGSEGV")
        XCTAssertEqual(signal["code_name"] as? String, "SEGV_MAPERR")
        XCTAssertEqual((mechanism["data"] as? [String: Any])?["fault_address"] as? String, "0x0")
    }

    /// crashport lists the innermost frame first; Sentry wants it last. The inlined frame keeps
    /// its pc and comes after (inside) the function it was inlined into.
    func testFramesAreOutermostFirstWithHexAddressesAndModules() throws {
        let exception = try exception(try payload(crash()))
        let stacktrace = try XCTUnwrap(exception["stacktrace"] as? [String: Any])
        let frames = try XCTUnwrap(stacktrace["frames"] as? [[String: Any]])
        XCTAssertEqual(frames.map { $0["function"] as? String }, ["__libc_start_main", "main", "g", "f"])
        XCTAssertEqual(
            frames.map { $0["instruction_addr"] as? String }, ["0x7f0000027305", "0x100017ec", "0x100012d7", "0x100012d7"])
        XCTAssertEqual(frames.map { $0["in_app"] as? Bool }, [false, true, true, true])
        XCTAssertEqual(frames.map { $0["trust"] as? String }, ["fp", "cfi", "context", "context"])
        XCTAssertEqual(frames[0]["package"] as? String, "/usr/lib/x86_64-linux-gnu/libc.so.6", "the module's path, by pc")
        XCTAssertEqual(frames[3]["package"] as? String, "/home/alice/app")
        XCTAssertEqual(frames[3]["image_addr"] as? String, "0x10000000")
        XCTAssertEqual(frames[3]["filename"] as? String, "/src/app.c")
        XCTAssertEqual(frames[3]["abs_path"] as? String, "/src/app.c")
        XCTAssertNil(frames[1]["abs_path"], "a relative file name is no absolute path")
        XCTAssertEqual(frames[3]["lineno"] as? Int, 30)
        XCTAssertEqual(frames[3]["colno"] as? Int, 14)
        XCTAssertEqual(frames[2]["symbol"] as? String, "_Z1gv")
        // The symbol that ran, when it is not the function's own (a GCC split part).
        XCTAssertEqual(frames[1]["symbol"] as? String, "main.cold")
        XCTAssertEqual(frames[1]["function"] as? String, "main")
        XCTAssertEqual(frames[2]["symbol_addr"] as? String, "0x100012c0")
        XCTAssertEqual(stacktrace["registers"] as? [String: String], ["rip": "0x100012d7"])
    }

    func testEveryThreadIsListedAndTheCrashedOneHasNoSecondStack() throws {
        let threads = try XCTUnwrap((try payload(crash())["threads"] as? [String: Any])?["values"] as? [[String: Any]])
        XCTAssertEqual(threads.map { $0["id"] as? Int }, [100, 101])
        XCTAssertEqual(threads.map { $0["name"] as? String }, ["app", "worker"])
        XCTAssertEqual(threads.map { $0["crashed"] as? Bool }, [true, false])
        XCTAssertEqual(threads.map { $0["current"] as? Bool }, [true, false])
        XCTAssertNil(threads[0]["stacktrace"], "the exception carries it")
        let worker = try XCTUnwrap((threads[1]["stacktrace"] as? [String: Any])?["frames"] as? [[String: Any]])
        XCTAssertEqual(worker.map { $0["function"] as? String }, ["pause"])
    }

    /// A handled error's own stack is the exception's stacktrace; the reporting thread, with its
    /// own stack, is the current thread, listed once.
    func testAnErrorsOwnStackIsTheExceptionsStacktrace() throws {
        var event = Event()
        event.kind = .error
        event.exception = ExceptionRecord(type: "ScriptError", message: "KeyError", handled: true)
        event.crashedThread = ThreadID(100)
        var own = ThreadRecord(
            tid: ThreadID(100), name: "app", crashed: true,
            frames: [
                FrameRecord(index: 0, function: "handle_request", file: "app/views.py", line: 42),
                FrameRecord(index: 1, function: "<module>", file: "app/main.py", line: 1),
            ])
        own.errorStack = true
        let reporting = ThreadRecord(
            tid: ThreadID(100), name: "app", crashed: false, frames: [FrameRecord(index: 0, function: "report_saved")])
        event.threads = [own, reporting]
        let sent = try payload(event)
        let exception = try XCTUnwrap(((sent["exception"] as? [String: Any])?["values"] as? [[String: Any]])?.first)
        let frames = try XCTUnwrap((exception["stacktrace"] as? [String: Any])?["frames"] as? [[String: Any]])
        XCTAssertEqual(frames.map { $0["function"] as? String }, ["<module>", "handle_request"], "outermost first")
        XCTAssertEqual(frames.last?["lineno"] as? Int, 42)
        let threads = try XCTUnwrap((sent["threads"] as? [String: Any])?["values"] as? [[String: Any]])
        XCTAssertEqual(threads.count, 1)
        XCTAssertEqual(threads.first?["current"] as? Bool, true)
        XCTAssertEqual(threads.first?["crashed"] as? Bool, false)
        let stack = try XCTUnwrap((threads.first?["stacktrace"] as? [String: Any])?["frames"] as? [[String: Any]])
        XCTAssertEqual(stack.map { $0["function"] as? String }, ["report_saved"])
    }

    /// The debug ids symbolic 13.9.0 gives these very files (`Archive.open(path)` →
    /// `Object.debug_id`): a 20-byte build-id's first 16 bytes, the GUID's first three fields
    /// byte-swapped, age 0.
    func testDebugIDsAreDerivedFromBuildIDsAsSentryDoes() throws {
        XCTAssertEqual(
            SentryDebugID(buildID: "14292519f3bce70b21e48739f0726c69fdacd70d")?.description,
            "19252914-bcf3-0be7-21e4-8739f0726c69")
        XCTAssertEqual(
            SentryDebugID(buildID: "93ac61ec5a8eb1396f9fbd350e3169a558528a40")?.description,
            "ec61ac93-8e5a-39b1-6f9f-bd350e3169a5")
        // A short build-id is padded with zeros (symbolic's compute_debug_id).
        XCTAssertEqual(SentryDebugID(buildID: "0102030405060708")?.description, "04030201-0605-0807-0000-000000000000")
        XCTAssertEqual(SentryDebugID(buildID: "ABCDEF01")?.description, "01efcdab-0000-0000-0000-000000000000")
        for bad in ["", "1", "xyz0", "12 4"] { XCTAssertNil(SentryDebugID(buildID: bad), bad) }

        let images = try XCTUnwrap((try payload(crash())["debug_meta"] as? [String: Any])?["images"] as? [[String: Any]])
        XCTAssertEqual(images.count, 2, "the module without a build-id is left out")
        XCTAssertEqual(images[0]["type"] as? String, "elf")
        XCTAssertEqual(images[0]["code_file"] as? String, "/home/alice/app")
        XCTAssertEqual(images[0]["code_id"] as? String, "14292519f3bce70b21e48739f0726c69fdacd70d")
        XCTAssertEqual(images[0]["debug_id"] as? String, "19252914-bcf3-0be7-21e4-8739f0726c69")
        XCTAssertEqual(images[0]["image_addr"] as? String, "0x10000000")
        XCTAssertEqual(images[0]["image_size"] as? Int, 0x5000)
    }

    /// Annotations within Sentry's tag limits are tags; the rest go to extra whole, and so do
    /// the keys Relay reserves for its own fields.
    func testTagsKeepSentrysLimitsAndTheRestGoesToExtra() throws {
        let payload = try payload(crash())
        let tags = try XCTUnwrap(payload["tags"] as? [String: String])
        XCTAssertEqual(
            tags,
            [
                "edge": String(repeating: "v", count: 200), String(repeating: "k", count: 32): "y",
                "crashport.kind": "crash",
            ])
        let extra = try XCTUnwrap(payload["extra"] as? [String: Any])
        let annotations = try XCTUnwrap(extra["annotations"] as? [String: String])
        XCTAssertEqual(
            annotations,
            [
                "build": "nightly\n\u{1b}[31mred", "long": String(repeating: "v", count: 201),
                String(repeating: "k", count: 33): "x", "with space": "z", "empty": "", "user": "bob",
            ])
        XCTAssertEqual(extra["crashport_report_id"] as? String, "20261124T013016.301Z-100-7e05")
        XCTAssertEqual(extra["session"] as? String, "9b992308-5ef4-4aba-b0c6-22d18cbe642a")
        XCTAssertTrue(SentryEvent.isTag(key: "a.b:c-d_e", value: "ü"))
        XCTAssertFalse(SentryEvent.isTag(key: "ключ", value: "v"))
        XCTAssertFalse(SentryEvent.isTag(key: "user", value: "bob"), "Relay would drop it")
    }

    /// The executable's package is a tag, `name@version`; a library's is not.
    func testTheProgramsPackageIsATag() throws {
        var event = crash()
        event.modules?[0].package = PackageRecord(name: "app", version: "1.2.3-1", architecture: "amd64", source: "note")
        event.modules?[1].package = PackageRecord(name: "libc6", version: "2.36-9", source: "dpkg")
        XCTAssertEqual((try payload(event)["tags"] as? [String: String])?["crashport.package"], "app@1.2.3-1")
        event.modules?[0].package = nil
        XCTAssertNil((try payload(event)["tags"] as? [String: String])?["crashport.package"])
    }

    /// A handled error's own properties are tags where they fit, winning over an annotation of
    /// the same key, and the rest (with the keys the stub cut) in extra; its own files say so.
    func testAHandledErrorsOwnPropertiesAreItsTags() throws {
        var event = crash()
        event.kind = .error
        event.exception = ExceptionRecord(
            type: "OrderError", message: "order 1234 refused", handled: true,
            properties: ["order": "1234", "edge": "the error's", "with space": "p", "user": "carol", "note": "a\nb"],
            propertiesTruncated: ["note"])
        event.attachments = [AttachmentRecord(path: "/tmp/order.log", file: "attachments/order.log", scope: "error")]
        let payload = try payload(event)
        let tags = try XCTUnwrap(payload["tags"] as? [String: String])
        XCTAssertEqual(tags["order"], "1234")
        XCTAssertEqual(tags["edge"], "the error's", "the error's value wins over the annotation's")
        XCTAssertNil(tags["with space"])
        let extra = try XCTUnwrap(payload["extra"] as? [String: Any])
        XCTAssertEqual(
            extra["error_properties"] as? [String: String], ["with space": "p", "user": "carol", "note": "a\nb"])
        XCTAssertEqual(extra["error_properties_truncated"] as? [String], ["note"])
        XCTAssertEqual((extra["annotations"] as? [String: String])?["user"], "bob", "the annotation stays as it was")
        let attachments = try XCTUnwrap(extra["attachments"] as? [[String: Any]])
        XCTAssertEqual(attachments.first?["scope"] as? String, "error")
        XCTAssertEqual(attachments.first?["name"] as? String, "order.log")
    }

    func testBreadcrumbsKeepTheirTimestampsInOrder() throws {
        let values = try XCTUnwrap((try payload(crash())["breadcrumbs"] as? [String: Any])?["values"] as? [[String: Any]])
        XCTAssertEqual(values.map { $0["timestamp"] as? String }, ["2026-11-24T01:30:16.297Z", "2026-11-24T01:30:16.298Z"])
        XCTAssertEqual(values.map { $0["message"] as? String }, ["step 1", "step 2"])
        XCTAssertEqual(values.map { $0["category"] as? String }, ["loop", "loop"])
        XCTAssertEqual((values[1]["data"] as? [String: Bool])?["truncated"], true)
    }

    /// No arguments, no environment: only the program's file name, in the process context.
    func testArgumentsAndEnvironmentAreNeverSent() throws {
        let data = try SentryEvent.jsonData(for: crash(), options: options)
        let text = String(decoding: data, as: UTF8.self)
        XCTAssertFalse(text.contains("hunter2"))
        XCTAssertFalse(text.contains("--password"))
        let payload = try payload(crash())
        let contexts = try XCTUnwrap(payload["contexts"] as? [String: Any])
        XCTAssertEqual((contexts["process"] as? [String: Any])?["name"] as? String, "app")
        XCTAssertEqual((contexts["device"] as? [String: Any])?["arch"] as? String, "x86_64", "from the registers")
    }

    func testOperatingSystemContextFromTheMinidumpsFacts() throws {
        let fields = SentryOperatingSystem.releaseFields(
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n# x=y\n")
        XCTAssertEqual(fields["PRETTY_NAME"], "Debian GNU/Linux 12 (bookworm)")
        XCTAssertEqual(fields["ID"], "debian")
        XCTAssertNil(fields["# x"])
        let os = SentryOperatingSystem(
            kernelRelease: "6.1.0-28-amd64", kernelVersion: "#1 SMP", machine: "x86_64", distributionName: "debian",
            distributionVersion: "12")
        let contexts = try XCTUnwrap(
            try payload(crash(), SentryEvent.Options(sdkVersion: "1", environment: "production", operatingSystem: os))[
                "contexts"] as? [String: Any])
        let value = try XCTUnwrap(contexts["os"] as? [String: String])
        XCTAssertEqual(
            value,
            [
                "type": "os", "name": "Linux", "version": "6.1.0-28-amd64", "kernel_version": "6.1.0-28-amd64",
                "build": "#1 SMP", "distribution_name": "debian", "distribution_version": "12",
            ])
    }

    func testEnvironmentOptionWinsAndIsOtherwiseOmitted() throws {
        var event = crash()
        XCTAssertEqual(
            try payload(event, SentryEvent.Options(sdkVersion: "1", environment: "production"))["environment"] as? String,
            "production")
        event.annotations?["environment"] = nil
        XCTAssertNil(try payload(event)["environment"])
        event.release = nil
        XCTAssertEqual(try payload(event)["release"] as? String, "ignored: event.release wins", "the annotation, then")
    }

    func testEventIDIsStableHexFromTheReportID() {
        let first = SentryEvent.eventID(reportID: "20261124T013016.301Z-100-7e05")
        XCTAssertEqual(first, SentryEvent.eventID(reportID: "20261124T013016.301Z-100-7e05"))
        XCTAssertNotEqual(first, SentryEvent.eventID(reportID: "20261124T013016.301Z-100-7e06"))
        XCTAssertTrue(SentryEnvelope.isEventID(first), first)
        XCTAssertTrue(SentryEnvelope.isEventID(SentryEvent.eventID(reportID: "")))
        // FNV-1a 128's published value for "a" (so the constants cannot drift).
        XCTAssertEqual(SentryEvent.eventID(reportID: "a"), "d228cb696f1a8caf78912b704e4a8964")
    }

    /// A handled error, a hang and a termination: their levels and mechanisms.
    func testKindsHaveTheirLevelsAndMechanisms() throws {
        var error = crash()
        error.kind = .error
        error.signal = nil
        error.exception = ExceptionRecord(type: "ParseError", message: "line 3", handled: true)
        var payload = try payload(error)
        XCTAssertEqual(payload["level"] as? String, "error")
        var exception = try exception(payload)
        XCTAssertEqual(exception["type"] as? String, "ParseError")
        XCTAssertEqual(exception["value"] as? String, "line 3")
        XCTAssertEqual((exception["mechanism"] as? [String: Any])?["handled"] as? Bool, true)
        var threads = try XCTUnwrap((payload["threads"] as? [String: Any])?["values"] as? [[String: Any]])
        XCTAssertEqual(threads.map { $0["crashed"] as? Bool }, [false, false], "nothing crashed")
        XCTAssertEqual(threads.map { $0["current"] as? Bool }, [true, false], "the reporting thread")

        var hang = crash()
        hang.kind = .hang
        hang.signal = nil
        hang.cause = "hang"
        hang.hangMilliseconds = 1500
        payload = try self.payload(hang)
        XCTAssertEqual(payload["level"] as? String, "error")
        exception = try self.exception(payload)
        XCTAssertEqual(exception["type"] as? String, "AppHang")
        XCTAssertEqual(exception["value"] as? String, "App hung for at least 1500 ms.")
        let hangMechanism = try XCTUnwrap(exception["mechanism"] as? [String: Any])
        XCTAssertEqual(hangMechanism["type"] as? String, "AppHang")
        XCTAssertEqual(hangMechanism["handled"] as? Bool, true)
        threads = try XCTUnwrap((payload["threads"] as? [String: Any])?["values"] as? [[String: Any]])
        XCTAssertEqual(threads.map { $0["crashed"] as? Bool }, [false, false])

        var killed = crash()
        killed.kind = .termination
        killed.cause = "oom-kill"
        killed.signal = SignalRecord(number: 9, name: "SIGKILL")
        killed.title = "killed by the OOM killer (SIGKILL)"
        payload = try self.payload(killed)
        XCTAssertEqual(payload["level"] as? String, "fatal")
        exception = try self.exception(payload)
        XCTAssertEqual(exception["type"] as? String, "SIGKILL")
        XCTAssertEqual(exception["value"] as? String, "killed by the OOM killer (SIGKILL)")
        let mechanism = try XCTUnwrap(exception["mechanism"] as? [String: Any])
        XCTAssertEqual(mechanism["handled"] as? Bool, false)
        XCTAssertEqual((mechanism["data"] as? [String: Any])?["cause"] as? String, "oom-kill")
        XCTAssertEqual(((mechanism["meta"] as? [String: Any])?["signal"] as? [String: Any])?["number"] as? Int, 9)
        XCTAssertEqual((payload["tags"] as? [String: String])?["crashport.cause"], "oom-kill")

        var exited = Event()
        exited.kind = .termination
        exited.cause = "exit"
        exited.exitCode = 3
        exception = try self.exception(try self.payload(exited))
        XCTAssertEqual(exception["type"] as? String, "AbnormalExit")
        XCTAssertNil(exception["stacktrace"], "no stacks: none were captured")
    }

    /// A C++ exception that escaped names the crash, not its SIGABRT.
    func testALanguageExceptionNamesTheCrash() throws {
        var event = crash()
        event.signal = SignalRecord(number: 6, name: "SIGABRT", code: -6, codeName: "SI_TKILL")
        event.exception = ExceptionRecord(type: "config_error", message: "the config file is missing")
        let exception = try exception(try payload(event))
        XCTAssertEqual(exception["type"] as? String, "config_error")
        XCTAssertEqual(exception["value"] as? String, "the config file is missing")
        let mechanism = try XCTUnwrap(exception["mechanism"] as? [String: Any])
        XCTAssertNil(mechanism["synthetic"])
        XCTAssertEqual(((mechanism["meta"] as? [String: Any])?["signal"] as? [String: Any])?["name"] as? String, "SIGABRT")
    }

    /// The machine's grouping travels: Sentry's `fingerprint` replaces its own, so the server
    /// groups as `crashport list --group` does; Crashpad collectors get it as a form field.
    func testTheFingerprintGroupsOnTheServerAsOnTheMachine() throws {
        var event = crash()
        event.fingerprint = "8e1239788f24c726"
        event.signature = "strlen | parse_records"
        let payload = try payload(event)
        XCTAssertEqual(payload["fingerprint"] as? [String], ["8e1239788f24c726"])
        XCTAssertEqual((payload["tags"] as? [String: Any])?["crashport.fingerprint"] as? String, "8e1239788f24c726")
        let fields = Dictionary(CrashpadUpload.fields(for: event, reportID: "r1"), uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(fields["crashport_fingerprint"], "8e1239788f24c726")
        XCTAssertEqual(fields["crashport_signature"], "strlen | parse_records")
        XCTAssertNil(try self.payload(crash())["fingerprint"], "no fingerprint: Sentry groups by its own rules")
    }

    /// An event with nothing in it still gives a payload Sentry takes (every field optional).
    func testAnEmptyEventStillConverts() throws {
        let payload = try payload(Event())
        XCTAssertEqual(payload["level"] as? String, "fatal")
        XCTAssertTrue(SentryEnvelope.isEventID(try XCTUnwrap(payload["event_id"] as? String)))
        XCTAssertNil(payload["threads"])
        XCTAssertNil(payload["debug_meta"])
    }
}
