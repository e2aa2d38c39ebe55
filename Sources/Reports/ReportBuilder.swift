// ReportBuilder: a Capture, unwound and symbolicated, becomes the event (DESIGN §6).
//
// Runs after the process was released: every thread is unwound from the captured registers
// and stacks (module code and CFI come from the ELF files), then every frame is symbolicated.

import BoundedBytes
import ObjectFile
import ReportModel
import Symbolication
import Unwinding

#if canImport(Glibc)
import Glibc
#endif

public enum ReportBuilder {
    public static func event(for capture: Capture, id: String, timestamp: String) -> Event {
        var event = event(
            snapshot: capture.snapshot, executable: capture.executable,
            arguments: capture.arguments, notes: capture.notes, id: id, timestamp: timestamp, locator: DebugFileLocator())
        event.handlerChain = handlerChain(
            capture.record,
            symbolizer: Symbolizer(modules: capture.snapshot.modules))
        if capture.record.forwardedFirst {
            let note =
                capture.record.previousGaveUp
                ? "forward-first: the previous handler ran first and gave up (reset its action or raised the signal again)"
                : "forward-first: the previous handler ran first, returned, and the same fault came back"
            event.notes = (event.notes ?? []) + [note]
        }
        return event
    }

    /// An event from any snapshot (a live capture, or a minidump read offline): every thread
    /// unwound, every frame symbolicated with what `locator` finds.
    public static func event(
        snapshot: ProcessSnapshot, executable: String?, arguments: [String], notes: [String],
        id: String, timestamp: String, locator: DebugFileLocator
    ) -> Event {
        let modules = snapshot.modules
        let captured = RegionMemory(regions: snapshot.threads.compactMap(\.stack) + snapshot.extraMemory)
        let unwinder = Unwinder(memory: captured, modules: modules)
        let symbolizer = Symbolizer(modules: modules, locator: locator)

        var event = Event()
        event.id = id
        event.kind = .crash
        event.timestamp = timestamp
        event.process = ProcessInfoRecord(
            pid: snapshot.pid, executable: executable, arguments: arguments,
            buildID: modules.first?.buildID?.hex)
        let exception = snapshot.exception
        event.signal = SignalRecord(
            number: exception.signal, name: SignalNames.name(exception.signal), code: exception.code,
            codeName: SignalNames.codeName(signal: exception.signal, code: exception.code),
            faultAddress: HexAddress(exception.faultAddress), senderPID: exception.senderPID,
            description: SignalNames.describe(signal: exception.signal, code: exception.code))
        event.crashedThread = snapshot.crashedThreadID

        let threads = snapshot.threads.map { thread in
            threadRecord(thread, crashed: thread.tid == snapshot.crashedThreadID, unwinder: unwinder, symbolizer: symbolizer)
        }
        event.threads = threads
        // Swift traps carry their reason as an artificial inlined frame at the trap.
        if let top = threads.first(where: { $0.crashed == true })?.frames?.first, top.inlined == true,
            let reason = top.function, reason.hasPrefix("Swift runtime failure: ")
        {
            let described = event.signal?.description ?? ""
            event.signal?.description = described + "; " + reason
        }
        event.modules = modules.map {
            ModuleRecord(path: $0.path, base: HexAddress($0.base), size: HexAddress($0.size), buildID: $0.buildID?.hex)
        }
        event.minidump = "minidump.dmp"
        // Debug data refused (a decompression bomb, an oversized section): say whose.
        let refused = symbolizer.refusals.map(\.description).filter { !notes.contains($0) }
        event.notes = notes.isEmpty && refused.isEmpty ? nil : notes + refused
        return event
    }

    /// One thread unwound from its captured registers, every frame symbolicated (inlined
    /// functions as frames of their own), and its registers.
    static func threadRecord(_ thread: ThreadSnapshot, crashed: Bool, unwinder: Unwinder, symbolizer: Symbolizer) -> ThreadRecord
    {
        let stack = unwinder.unwind(registers: thread.registers.gpr)
        var frames: [FrameRecord] = []
        for (position, frame) in stack.frames.enumerated() {
            if frame.isSignalTrampoline {
                frames.append(signalFrameRecord(index: frames.count, pc: frame.pc, symbolizer: symbolizer))
                continue
            }
            // Every caller's pc is a return address, except a frame a signal interrupted.
            let isReturnAddress = position > 0 && frame.method != .context && !frame.isSignalFrame
            for symbol in symbolizer.symbolicate(pc: frame.pc, isReturnAddress: isReturnAddress) {
                frames.append(
                    FrameRecord(index: frames.count, pc: HexAddress(frame.pc), symbol: symbol, trust: FrameTrust(frame.method)))
            }
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

    static func handlerChain(_ record: CrashRecord, symbolizer: Symbolizer) -> [HandlerChainEntry] {
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
        return record.chain.map { entry in
            let crashing = entry.signal == record.signal
            let continuation = HandlerChain.continuation(
                previous: entry.previous, forwardFirst: entry.forwardFirst,
                previousGaveUp: crashing && record.previousGaveUp, isFault: crashing ? record.code > 0 : true)
            return HandlerChainEntry(
                signal: SignalNames.name(entry.signal), previous: entry.previous.map(describe) ?? .disposition(.default),
                above: entry.current.map(describe), action: continuation,
                policy: entry.forwardFirst ? .forwardFirst : .reportThenForward)
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
            function: symbol.function, mangled: symbol.mangled, functionOffset: symbol.functionOffset.map(HexAddress.init),
            file: symbol.file, line: symbol.line, column: symbol.column, inlined: symbol.inlined ? true : nil, trust: trust)
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
