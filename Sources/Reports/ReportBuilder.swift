// ReportBuilder: a Capture, unwound and symbolicated, becomes the event (docs/using.md, "Using it": the report and its event.json).
//
// Runs after the process was released: every thread is unwound from the captured registers
// and stacks (module code and CFI come from the ELF files), then every frame is symbolicated.

import BoundedBytes
import ObjectFile
import ReportModel
import Runtimes
import Symbolication
import Unwinding

#if canImport(Glibc)
import Glibc
#endif

public enum ReportBuilder {
    /// The event of a capture: every thread unwound and symbolicated, with what the program and
    /// the crash record say. `fileBytes`, when given, receives the bytes of the modules' files
    /// the unwind read (code, CFI): the minidump holds them, so an offline unwind without the
    /// files finds the same frames (Unwinder.fileBytesRead). With `debuginfod`, a debug file
    /// found nowhere here is asked of the servers in DEBUGINFOD_URLS (the notes say which came
    /// from there, or why none did). With `dpkg`, a module with no package note is named after
    /// the package dpkg installed its file from (a crash on this machine only).
    public static func event(
        for capture: Capture, id: String, timestamp: String, rules: InAppRules = InAppRules(),
        fileBytes: UnwindFileBytes? = nil, debuginfod: Bool = false, dpkg: DpkgDatabase? = nil
    ) -> Event {
        var locator = DebugFileLocator()
        locator.useDebuginfod = debuginfod
        var event = event(
            snapshot: capture.snapshot, executable: capture.executable,
            arguments: capture.arguments, notes: capture.notes, id: id, timestamp: timestamp, locator: locator,
            fileBytes: fileBytes, dpkg: dpkg)
        if let container = capture.container { container.describe(&event.process) }
        // What the runtimes said: JIT frames named from the perf map, their crash logs.
        RuntimeReport.nameJITFrames(&event, symbols: capture.runtime.jitSymbols)
        RuntimeReport.record(capture.runtime, into: &event)
        if debuginfod {
            for module in capture.snapshot.modules {
                guard let buildID = module.buildID, let outcome = Debuginfod.outcome(for: buildID) else { continue }
                event.notes = (event.notes ?? []) + ["\(module.name) (build-id \(buildID.hex)): debug file \(outcome)"]
            }
        }
        if let python = capture.runtime.python { PythonFrames.place(python, into: &event) }
        if !capture.runtime.notes.isEmpty { event.notes = (event.notes ?? []) + capture.runtime.notes }
        let symbolizer = Symbolizer(modules: capture.snapshot.modules, locator: locator)
        let reraised = capture.record.reraise.map { reraiseRecord($0, symbolizer: symbolizer) }
        event.handlerChain = handlerChain(capture.record, reraised: reraised, symbolizer: symbolizer)
        if capture.record.isError {
            event.kind = .error
            event.signal = nil
            let error = capture.app?.handledError
            event.exception = ExceptionRecord(
                type: error?.type ?? "error", message: error?.message, truncated: error?.truncated == true ? true : nil,
                handled: true)
            event.reason = (error?.type ?? "error") + (error?.message.map { ": \($0)" } ?? "")
            if let details = capture.errorDetails { errorDetails(details, into: &event) }
            if let stack = capture.errorStack { errorStack(stack, symbolizer: symbolizer, into: &event) }
        } else if let thrown = capture.app?.exception {
            event.exception = ExceptionRecord(
                type: thrown.type, message: thrown.message, truncated: thrown.truncated ? true : nil)
            event.reason = "uncaught exception \(thrown.type)" + (thrown.message.map { ": \($0)" } ?? "")
        } else if let said = capture.app?.swiftMessage ?? capture.app?.abortMessage {
            // The runtime's own words win over the trap's artificial frame (they say more).
            if let said = runtimeMessage(said) { event.reason = said }
        } else if let said = rustPanic(&event, capture: capture, rules: rules) {
            event.exception = ExceptionRecord(type: "panic", message: said.isEmpty ? nil : said)
            event.reason = said.isEmpty ? "panicked" : "panicked: \(said)"
        }
        if let observation = capture.record.observation { observed(observation, into: &event) }
        event.memory = capture.memory
        event.stackTaken = capture.stackTaken
        if let app = capture.app, let during = app.crashedDuringLaunch(at: capture.record.timeNanoseconds),
            !capture.record.isError
        {
            let since = capture.record.timeNanoseconds.checkedSubtracting(app.installTimeNanoseconds).map { $0 / 1_000_000 }
            event.launch = LaunchRecord(crashedDuringLaunch: during, sinceInstallMilliseconds: since)
        }
        event.release = release(of: capture.app, event: event)
        event.record(annotations: [], breadcrumbs: capture.app?.breadcrumbs ?? [])
        if let record = reraised {
            event.signal?.reraisedBy = record
            event.notes =
                (event.notes ?? []) + [
                    "the program's handler \(record.function ?? record.handler?.description ?? "?") ran first and "
                        + CrashLog.describe(reraise: record) + "; this report names the original fault"
                ]
        }
        if capture.record.isTest, !capture.record.isError { event.test = true }
        if !capture.record.isError { Watchdog.mark(&event) }
        Culprit.mark(&event, rules: rules)
        // The runtime's words (glibc's heap checks, a panic) decide an abort's verdict.
        if !capture.record.isError { FaultExplanation.diagnoseAbort(&event) }
        return event
    }

    /// The Rust panic the crashed thread ended in (RustPanic), its frames marked in-app first.
    static func rustPanic(_ event: inout Event, capture: Capture, rules: InAppRules) -> String? {
        Culprit.mark(&event, rules: rules)
        return RustPanic.message(
            frames: event.crashedThreadRecord?.frames ?? [], signal: capture.snapshot.exception.signal,
            strings: capture.stackStrings)
    }

    /// The event a report's first step writes with its minidump (Event.stage `captured`): what
    /// the capture says without unwinding or symbolication, a fraction of a millisecond of work.
    /// Each thread's pc (module and offset, no name; its registers are in the minidump), the
    /// signal, the process, the modules, and the reason a record or the runtime gave. The full
    /// event (`event(for:)`) replaces it once every thread is unwound and symbolicated.
    public static func capturedEvent(for capture: Capture, id: String, timestamp: String) -> Event {
        let snapshot = capture.snapshot
        var event = Event()
        event.stage = Event.capturedStage
        event.id = id
        event.kind = capture.record.isError ? .error : .crash
        event.timestamp = timestamp
        event.process = ProcessInfoRecord(
            pid: snapshot.pid, executable: capture.executable, arguments: capture.arguments,
            buildID: snapshot.modules.first?.buildID?.hex)
        if let container = capture.container { container.describe(&event.process) }
        let exception = snapshot.exception
        if !capture.record.isError {
            event.signal = signalRecord(exception)
        }
        if let observation = capture.record.observation { observed(observation, into: &event) }
        event.crashedThread = snapshot.crashedThreadID
        let modules = snapshot.modules
        event.threads = snapshot.threads.map { thread in
            let pc = thread.registers.gpr[X86_64Registers.ripIndex]
            let module = modules.first { $0.contains(pc) }
            let frame = FrameRecord(
                index: 0, pc: HexAddress(pc), module: module?.name, moduleOffset: module.map { HexAddress(pc - $0.base) },
                trust: .context)
            return ThreadRecord(
                tid: thread.tid, name: thread.name, crashed: thread.tid == snapshot.crashedThreadID, frames: [frame])
        }
        let (records, packageNotes) = moduleRecords(modules)
        event.modules = records
        event.minidump = "minidump.dmp"
        if let said = (capture.app?.swiftMessage ?? capture.app?.abortMessage).flatMap(runtimeMessage) { event.reason = said }
        event.release = release(of: capture.app, event: event)
        if capture.record.isTest, !capture.record.isError { event.test = true }
        let notes =
            capture.notes + packageNotes + [
                "written when the process was captured, before its threads were unwound and symbolicated: the full event replaces this one moments later (the minidump already holds every thread's registers and stack)"
            ]
        event.notes = notes
        return event
    }

    /// The signal as the capture's exception gives it, named and described.
    static func signalRecord(_ exception: ExceptionInfo, stackOverflow: Bool? = nil) -> SignalRecord {
        SignalRecord(
            number: exception.signal, name: SignalNames.name(exception.signal), code: exception.code,
            codeName: SignalNames.codeName(signal: exception.signal, code: exception.code),
            faultAddress: HexAddress(exception.faultAddress), senderPID: exception.senderPID,
            description: SignalNames.describe(signal: exception.signal, code: exception.code), stackOverflow: stackOverflow)
    }

    /// The modules' records, each with its package (ModulePackages: its note, else dpkg's
    /// database when `dpkg` is given), and the notes that go with them.
    static func moduleRecords(_ modules: [LoadedModule], dpkg: DpkgDatabase? = nil) -> ([ModuleRecord], notes: [String]) {
        let (packages, notes) = ModulePackages.read(modules, dpkg: dpkg)
        let records = zip(modules, packages).map { module, package in
            var record = ModuleRecord(
                path: module.path, base: HexAddress(module.base), size: HexAddress(module.size), buildID: module.buildID?.hex)
            record.package = package.map(ModulePackages.record)
            return record
        }
        return (records, notes)
    }

    /// A runtime's abort message without its trailing newlines; nil when nothing else is left.
    static func runtimeMessage(_ said: String) -> String? {
        let trimmed = String(said.reversed().drop { $0 == "\n" }.reversed())
        return trimmed.isEmpty ? nil : trimmed
    }

    /// The program's release: its "release" annotation, else CRASHPORT_RELEASE at install.
    public static func release(of app: AppArea?) -> String? {
        app?.annotations.first { $0.key == "release" }?.value ?? app?.release
    }

    /// The release of a crash's event: the program's own (`release(of:)`), else its package's
    /// `name@version` (Sentry's `package@version` convention), from the executable's module.
    static func release(of app: AppArea?, event: Event) -> String? {
        release(of: app) ?? ModulePackages.release(event.modules ?? [], executable: event.process?.executable)
    }

    /// A handled error's own properties (its files are copied as the report is written) and
    /// what the stub left out of them.
    static func errorDetails(_ details: HandledErrorDetails, into event: inout Event) {
        if !details.properties.isEmpty {
            event.exception?.properties = Dictionary(
                details.properties.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
            let cut = details.properties.filter(\.truncated).map(\.key)
            event.exception?.propertiesTruncated = cut.isEmpty ? nil : cut
        }
        var left: [String] = []
        if details.propertiesLeftOut > 0 {
            left.append("\(details.propertiesLeftOut) of its properties (it keeps \(HandledErrorDetails.maximumProperties))")
        }
        if details.filesLeftOut > 0 {
            left.append(
                "\(details.filesLeftOut) of its files (it keeps \(HandledErrorDetails.maximumFiles), with paths of up to \(HandledErrorDetails.maximumPathBytes) bytes)"
            )
        }
        if !left.isEmpty {
            event.notes = (event.notes ?? []) + ["the handled error's report leaves out " + left.joined(separator: " and ")]
        }
    }

    /// A handled error's own stack, as the report's crashed thread: a record of its own with the
    /// reporting thread's id, first, each address symbolicated as a return address (its
    /// inlined functions as frames of their own), each text frame as the interpreter named it;
    /// the reporting thread's own record stays, no longer the crashed one.
    static func errorStack(_ stack: HandledErrorStack, symbolizer: Symbolizer, into event: inout Event) {
        var frames: [FrameRecord] = []
        for frame in stack.frames {
            var records: [FrameRecord]
            if let address = frame.address {
                records = symbolizer.symbolicate(pc: address, isReturnAddress: true).map {
                    FrameRecord(index: 0, pc: HexAddress(address), symbol: $0, trust: nil)
                }
                if records.isEmpty { records = [FrameRecord(pc: HexAddress(address))] }
            } else {
                records = [FrameRecord()]
            }
            // The interpreter's words win over the symbol table's, for the innermost record.
            if frame.function != nil || frame.file != nil {
                records[records.count - 1].function = frame.function ?? records[records.count - 1].function
                records[records.count - 1].file = frame.file ?? records[records.count - 1].file
                records[records.count - 1].line = frame.line ?? records[records.count - 1].line
            }
            for index in records.indices { records[index].index = frames.count + index }
            frames += records
        }
        var threads = event.threads ?? []
        for index in threads.indices where threads[index].tid == stack.thread { threads[index].crashed = false }
        let own = threads.first { $0.tid == stack.thread }
        var record = ThreadRecord(tid: stack.thread, name: own?.name, crashed: true, frames: frames)
        record.errorStack = true
        event.threads = [record] + threads
        var notes = [
            "the crashed thread is the handled error's own stack, as the program gave it; the reporting thread's stack follows it"
        ]
        if stack.leftOut > 0 {
            notes.append(
                "the handled error's own stack was cut: the first \(stack.frames.count) frames are kept, \(stack.leftOut) more were left out (it keeps \(HandledErrorStack.maximumFrames))"
            )
        }
        if stack.frames.contains(where: \.truncated) {
            notes.append("some of the handled error's own frames had a function or file name cut to the stub's limit")
        }
        event.notes = (event.notes ?? []) + notes
    }

    /// A death or hang the watcher saw from outside: its kind, cause and reason.
    static func observed(_ observation: CrashRecord.Observation, into event: inout Event) {
        switch observation {
        case .exit(let status, let cause):
            event.kind = .termination
            event.cause = cause
            switch ProcessExit(waitStatus: status) {
            case .exited(let code)?:
                event.signal = nil
                event.reason = "exited with status \(code)"
            case .signaled(let signal)?:
                event.signal = SignalRecord(
                    number: signal, name: SignalNames.name(signal), description: SignalNames.meaning(signal))
            case nil:  // not an end (the tracer records only ends): said as it is
                event.reason = "ended with wait status \(status)"
            }
            event.notes =
                (event.notes ?? []) + [
                    "every thread as it was at its exit (--trace-exit): the process was seized for its whole life, so the kernel stopped each thread at its exit event with its registers and memory intact"
                ]
        case .hang(let milliseconds):
            event.kind = .hang
            event.cause = "hang"
            event.signal = nil
            event.hangMilliseconds = milliseconds
            event.reason = "no heartbeat for \(milliseconds) ms"
            event.notes =
                (event.notes ?? []) + [
                    "the program was left running: its threads were stopped only while their stacks were read; the thread that beat last is first"
                ]
        }
    }

    static func reraiseRecord(_ reraise: WireReraise, symbolizer: Symbolizer) -> ReraiseRecord {
        let how: ReraiseRecord.How
        switch reraise.how {
        case .raised: how = .raised
        case .faulted: how = .faulted
        case .reset: how = .resetAndReturned
        case .cameBack: how = .cameBack
        case .called: how = .calledThenExited
        }
        let symbol = symbolizer.symbolicate(pc: reraise.handler, isReturnAddress: false).last
        let signal = reraise.signal > 0 ? reraise.signal : nil
        var record = ReraiseRecord(
            how: how, signal: signal.map(SignalNames.name), number: signal, code: signal.map { _ in reraise.code },
            codeName: signal.flatMap { SignalNames.codeName(signal: $0, code: reraise.code) },
            handler: HexAddress(reraise.handler), function: symbol?.function, module: symbol?.module)
        // A held fault's exit status, put in `code` by the watcher once the process ended.
        if reraise.how == .called { record.exitStatus = reraise.code }
        return record
    }

    /// An event from any snapshot (a live capture, or a minidump read offline): every thread
    /// unwound, every frame symbolicated with what `locator` finds.
    public static func event(
        snapshot: ProcessSnapshot, executable: String?, arguments: [String], notes: [String],
        id: String, timestamp: String, locator: DebugFileLocator, fileBytes: UnwindFileBytes? = nil,
        dpkg: DpkgDatabase? = nil
    ) -> Event {
        let modules = snapshot.modules
        let captured = RegionMemory(regions: snapshot.threads.compactMap(\.stack) + snapshot.extraMemory)
        let unwinder = Unwinder(memory: captured, modules: modules)
        let mappings = snapshot.linuxFiles.maps.map { MemoryMapping.parse($0) } ?? []
        unwinder.jitCode = jitCode(mappings: mappings, modules: modules)
        unwinder.debugFile = { module in
            module.object.flatMap { DebugImageCache.shared.image(for: $0, locator: locator).debugFile }
        }
        let symbolizer = Symbolizer(modules: modules, locator: locator)

        var event = Event()
        event.id = id
        event.kind = .crash
        event.timestamp = timestamp
        event.process = ProcessInfoRecord(
            pid: snapshot.pid, executable: executable, arguments: arguments,
            buildID: modules.first?.buildID?.hex)
        let exception = snapshot.exception
        event.signal = signalRecord(exception, stackOverflow: StackOverflow.verdict(snapshot, mappings: mappings))
        event.crashedThread = snapshot.crashedThreadID
        event.record(annotations: snapshot.annotations, breadcrumbs: [])

        // The crashed thread's top frames' variables read from what the report captured (and
        // the modules' read-only segments: string literals).
        let variables =
            FrameVariables.enabled
            ? FrameVariables.Collection(
                memory: LayeredMemory([captured, ImageMemory(modules: modules, segments: .readOnly)])) : nil
        let threads = snapshot.threads.map { thread in
            let crashed = thread.tid == snapshot.crashedThreadID
            return threadRecord(
                thread, crashed: crashed, unwinder: unwinder, symbolizer: symbolizer, variables: crashed ? variables : nil)
        }
        if let crashed = threads.firstIndex(where: { $0.crashed == true }),
            let original = originalFault(exception: exception, pid: snapshot.pid, frames: threads[crashed].frames ?? [])
        {
            event.signal = original.signal
            event.notes = (event.notes ?? []) + [original.note]
        }
        event.threads = threads
        // Why: the faulting instruction and its access (not for a fault a handler re-raised:
        // the registers are then the handler's).
        if event.signal?.reraisedBy == nil {
            event.fault = FaultExplanation.explain(
                snapshot, mappings: mappings, stackOverflow: event.signal?.stackOverflow == true)
            if var fault = event.fault, let variables,
                let crashed = snapshot.threads.first(where: { $0.tid == snapshot.crashedThreadID })
            {
                // A call to a bad pointer: the register was the caller's, at its call.
                let caller = fault.instruction?.role != nil ? 1 : 0
                FrameVariables.nameBadValue(
                    &fault, scopes: variables.scopes[caller],
                    pc: caller == 1 ? fault.instruction?.address?.value ?? 0 : crashed.registers.rip,
                    functionStart: variables.functionStarts[caller], gpr: crashed.registers.gpr, memory: variables.memory,
                    parameterAtEntry: { register in
                        // The function's parameters where they arrive: evaluated at its entry.
                        guard let start = variables.functionStarts[caller],
                            let number = FrameVariables.dwarfNumbers[register]
                        else { return nil }
                        let entry = DWARFFrameState(registers: [:], memory: RegionMemory(regions: []))
                        let scopes = symbolizer.variables(pc: start, isReturnAddress: false, state: entry)
                        for scope in scopes {
                            for variable in scope.variables where variable.isParameter {
                                if case .register(number) = variable.location { return (variable.name, scope.function) }
                            }
                        }
                        return nil
                    })
                event.fault = fault
            }
        }
        fileBytes?.regions = unwinder.fileBytesRead()
        for (path, file) in unwinder.debugFrameUse.sorted(by: { $0.key < $1.key }) {
            let name = path.split(separator: "/").last.map(String.init) ?? path
            let source = file.map { ".debug_frame of its debug file \($0)" } ?? "its own .debug_frame"
            event.notes = (event.notes ?? []) + ["frames in \(name) were unwound with \(source): no .eh_frame covers them"]
        }
        // Swift traps carry their reason as an artificial inlined frame at the trap.
        if let top = threads.first(where: { $0.crashed == true })?.frames?.first, top.inlined == true,
            let reason = top.function, reason.hasPrefix("Swift runtime failure: ")
        {
            let described = event.signal?.description ?? ""
            event.signal?.description = described + "; " + reason
            event.reason = reason
        }
        let (records, packageNotes) = moduleRecords(modules, dpkg: dpkg)
        event.modules = records
        event.minidump = "minidump.dmp"
        // Debug data refused (a decompression bomb, an oversized section): say whose.
        let refused = symbolizer.refusals.map(\.description).filter { !notes.contains($0) }
        // A module's file truncated (or failing reads) while it was read for this report.
        let torn = symbolizer.tornModules.map { "module \($0): \(ELFFile.tornDescription)" }.filter { !notes.contains($0) }
        let all = notes + (event.notes ?? []) + packageNotes + refused + torn
        event.notes = all.isEmpty ? nil : all
        Culprit.mark(&event)
        FaultExplanation.diagnoseAbort(&event)
        return event
    }

    /// A signal the process sent itself from inside a signal handler that the stub did not run
    /// (one installed with a raw rt_sigaction, a static program's, a runtime's that bypasses
    /// libc): the fault that handler was called for is in the kernel's signal frame on the stack.
    /// The report names that fault, as for a handler the stub ran; the crashed thread keeps all
    /// its frames, as gdb shows them (the handler's, `<signal handler called>`, the fault's).
    static func originalFault(
        exception: ExceptionInfo, pid: ProcessID, frames: [FrameRecord]
    )
        -> (signal: SignalRecord, note: String)?
    {
        // A minidump does not keep the sender: then any signal sent by a process is taken.
        guard exception.code <= 0, exception.senderPID == pid || exception.senderPID == nil,
            let trampoline = frames.firstIndex(where: { $0.trust == .signalFrame }),
            let info = frames[trampoline].delivered, info.code > 0,
            SignalNames.hasFaultAddress(signal: info.number, code: info.code)
        else { return nil }
        let handler = frames[..<trampoline].last { $0.function != nil }
        let raised = exception.signal
        var signal = SignalRecord(
            number: info.number, name: SignalNames.name(info.number), code: info.code,
            codeName: SignalNames.codeName(signal: info.number, code: info.code), faultAddress: info.address,
            description: SignalNames.describe(signal: info.number, code: info.code))
        signal.reraisedBy = ReraiseRecord(
            how: .raised, signal: SignalNames.name(raised), number: raised, code: exception.code,
            codeName: SignalNames.codeName(signal: raised, code: exception.code), handler: handler?.pc,
            function: handler?.function, module: handler?.module,
            originalFrame: trampoline + 1 < frames.count ? trampoline + 1 : nil)
        let note =
            "\(SignalNames.name(raised)) was raised inside a signal handler crashport did not run (installed without libc's sigaction); the report names the fault its signal frame holds"
        return (signal, note)
    }

    /// One thread unwound from its captured registers, every frame symbolicated (inlined
    /// functions as frames of their own), and its registers.
    static func threadRecord(
        _ thread: ThreadSnapshot, crashed: Bool, unwinder: Unwinder, symbolizer: Symbolizer,
        variables: FrameVariables.Collection? = nil
    ) -> ThreadRecord {
        let stack = unwinder.unwind(registers: thread.registers.gpr)
        var frames: [FrameRecord] = []
        // The frame below this one (its callee), when tail calls may have been elided between.
        var callee: (pc: UInt64, isReturnAddress: Bool)?
        for (position, frame) in stack.frames.enumerated() {
            if frame.isSignalTrampoline {
                var record = signalFrameRecord(index: frames.count, pc: frame.pc, symbolizer: symbolizer)
                record.delivered = frame.signalInfo.map {
                    DeliveredSignal(number: $0.signal, code: $0.code, address: $0.code > 0 ? HexAddress($0.address) : nil)
                }
                frames.append(record)
                callee = nil
                continue
            }
            // Every caller's pc is a return address, except a frame a signal interrupted.
            let isReturnAddress = position > 0 && frame.method != .context && !frame.isSignalFrame
            // Functions that left the stack by a tail call between the callee and this frame (not
            // after a frame found by stack scanning: the two need not be callee and caller).
            if let callee, isReturnAddress, frame.method != .scan {
                for elided in symbolizer.tailCallFrames(
                    calleePC: callee.pc, calleeIsReturnAddress: callee.isReturnAddress, callerPC: frame.pc)
                {
                    var record = FrameRecord(
                        index: frames.count, pc: HexAddress(elided.pc), symbol: elided.frame, trust: FrameTrust(frame.method))
                    variables?.adopt(into: &record)
                    frames.append(record)
                }
            }
            callee = (frame.pc, isReturnAddress)
            let symbols = symbolizer.symbolicate(pc: frame.pc, isReturnAddress: isReturnAddress)
            var records = symbols.map {
                FrameRecord(index: frames.count, pc: HexAddress(frame.pc), symbol: $0, trust: FrameTrust(frame.method))
            }
            for index in records.indices { records[index].index = frames.count + index }
            if let variables, frames.count < FrameVariables.maximumFrames {
                variables.read(
                    into: &records, position: position, stack: stack.frames, gpr: thread.registers.gpr,
                    fxsave: thread.registers.fxsave, isReturnAddress: isReturnAddress, symbolizer: symbolizer)
            }
            frames += records
        }
        var registers: [String: HexAddress] = [:]
        for (index, name) in X86_64Registers.names.enumerated() where name != "orig_rax" {
            registers[name] = HexAddress(thread.registers.gpr[index])
        }
        return ThreadRecord(
            tid: thread.tid, name: thread.name, crashed: crashed, registers: registers, frames: frames,
            truncated: stack.skipped > 0 ? stack.skipped : nil)
    }

    /// The kernel's signal frame, named as gdb names it: its pc is the rt_sigreturn trampoline
    /// (an exact address, in libc's __restore_rt or the program's own restorer), kept with its
    /// module and offset.
    static func signalFrameRecord(index: Int, pc: UInt64, symbolizer: Symbolizer) -> FrameRecord {
        let symbol = symbolizer.symbolicate(pc: pc, isReturnAddress: false).last
        return FrameRecord(
            index: index, pc: HexAddress(pc), module: symbol?.module, moduleOffset: symbol?.moduleOffset.map(HexAddress.init),
            function: FrameRecord.signalHandlerCalled, trust: .signalFrame)
    }

    /// `reraised`: the record's re-raise, as the event names it.
    static func handlerChain(_ record: CrashRecord, reraised: ReraiseRecord?, symbolizer: Symbolizer) -> [HandlerChainEntry] {
        func describe(_ action: WireAction) -> HandlerRecord {
            switch action.handler {
            case 0: return .disposition(.default)
            case 1: return .disposition(.ignore)
            default:
                // The function itself, not what is inlined at its first instruction.
                let symbol = symbolizer.symbolicate(pc: action.handler, isReturnAddress: false).last
                return .function(
                    address: HexAddress(action.handler), symbol: symbol?.function, module: symbol?.module,
                    flags: actionFlags(action.flags))
            }
        }
        // The report of a re-raise is made while the raised signal is delivered: what follows it
        // is that signal's action.
        let raised = record.reraise.flatMap { reraise in record.chain.first { $0.signal == reraise.signal } }
        return record.chain.map { entry in
            let crashing = entry.signal == record.signal
            let deciding = crashing ? (raised ?? entry) : entry
            // A raised signal is sent, not a fault; the other signals are described for a fault.
            var continuation = HandlerChain.continuation(
                program: deciding.program, changed: deciding.programChanged,
                isFault: crashing ? raised == nil && record.code > 0 : true)
            if crashing, reraised?.how == .cameBack { continuation = .forwardedToProgram }
            var ran: [String]?
            if crashing {
                let handler = reraised.map { reraised in
                    "\(reraised.function ?? reraised.handler?.description ?? "?") (the program's): "
                        + CrashLog.describe(reraise: reraised)
                }
                ran = (handler.map { [$0] } ?? []) + ["crashport: report", continuation.rawValue]
            }
            return HandlerChainEntry(
                signal: SignalNames.name(entry.signal), previous: entry.previous.map(describe) ?? .disposition(.default),
                above: entry.programChanged ? describe(entry.program) : nil, kernel: entry.kernel.map(describe), ran: ran,
                action: continuation,
                policy: HandlerChain.policy(
                    program: entry.program, changed: entry.programChanged, forwardFirst: entry.forwardFirst,
                    ranFirst: crashing && reraised != nil))
        }
    }

    static func actionFlags(_ flags: UInt64) -> [String] {
        // sa_flags as the kernel's struct sigaction holds them (<signal.h>, through Glibc).
        let known: [(UInt32, String)] = [
            (UInt32(SA_SIGINFO), "SA_SIGINFO"), (UInt32(SA_ONSTACK), "SA_ONSTACK"), (UInt32(SA_RESTART), "SA_RESTART"),
            (UInt32(SA_NODEFER), "SA_NODEFER"), (UInt32(SA_RESETHAND), "SA_RESETHAND"), (UInt32(SA_NOCLDSTOP), "SA_NOCLDSTOP"),
            (UInt32(SA_NOCLDWAIT), "SA_NOCLDWAIT"),
        ]
        return known.filter { flags & UInt64($0.0) != 0 }.map(\.1)
    }
}

extension FrameRecord {
    /// A frame of the event: a pc and what symbolication found there.
    init(index: Int, pc: HexAddress?, symbol: SymbolicatedFrame, trust: FrameTrust?) {
        self.init(
            index: index, pc: pc, module: symbol.module, moduleOffset: symbol.moduleOffset.map(HexAddress.init),
            function: symbol.function, mangled: symbol.mangled, symbol: symbol.symbol,
            functionOffset: symbol.functionOffset.map(HexAddress.init),
            file: symbol.file, line: symbol.line, column: symbol.column, inlined: symbol.inlined ? true : nil,
            tailCall: symbol.tailCall ? true : nil, trust: trust)
    }
}

extension FrameRecord {
    /// The function name of the kernel's signal frame, as gdb prints it.
    public static let signalHandlerCalled = "<signal handler called>"
}

extension FrameTrust {
    /// The unwinder's method, as the event names it.
    init(_ method: UnwoundFrame.Method) {
        switch method {
        case .context: self = .context
        case .cfi: self = .cfi
        case .framePointer: self = .framePointer
        case .scan: self = .scan
        }
    }
}

extension ReportBuilder {
    /// The executable mappings that no module covers: a JIT's code.
    static func jitCode(mappings: [MemoryMapping], modules: [LoadedModule]) -> [Range<UInt64>] {
        mappings.compactMap { mapping in
            guard mapping.executable, mapping.start < mapping.end, !modules.contains(where: { $0.contains(mapping.start) })
            else { return nil }
            return mapping.start..<mapping.end
        }
    }
}

/// Receives the bytes of the modules' files an unwind read (ReportBuilder.event).
public final class UnwindFileBytes {
    public var regions: [MemoryRegion] = []
    public init() {}
}
