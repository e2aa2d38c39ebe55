// Event: the report's JSON, schema "crashport.event.v1" (docs/using.md; every field optional to readers).
//
// Readers treat every field as optional (a report from an older or newer crashport, or a partial
// one, still decodes); writers fill what they know. Addresses are strings "0x…".

import FoundationEssentials
import Glibc

/// A target-process address, encoded as a "0x…" string in JSON.
public struct HexAddress: Codable, Sendable, Hashable, CustomStringConvertible {
    public var value: UInt64

    public init(_ value: UInt64) { self.value = value }

    public var description: String { "0x" + String(value, radix: 16) }

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            let digits = text.hasPrefix("0x") || text.hasPrefix("0X") ? text.dropFirst(2) : Substring(text)
            guard let parsed = UInt64(digits, radix: 16) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a hex address: \(text)")
            }
            value = parsed
        } else {
            value = try container.decode(UInt64.self)
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// What a report is about: a crash a signal handler saw, or a termination none saw.
public enum ReportKind: String, Codable, Sendable {
    /// `error`: a handled error the program reported (crashport_report_error); it lived on.
    case crash, termination, error
    /// `hang`: the program stopped calling crashport_heartbeat for longer than --hang-ms; every
    /// thread's stack as it was then, the program left running.
    case hang
}

/// How a frame was found, most reliable first: the registers of the crash itself, DWARF call
/// frame information, the frame-pointer chain, or a scan of the stack for a return address.
public enum FrameTrust: String, Codable, Sendable {
    case context, cfi
    case framePointer = "frame_pointer"
    case scan
    /// `<signal handler called>`: the kernel's signal frame (its `__restore_rt` return address);
    /// the next frame's registers come from the ucontext it holds.
    case signalFrame = "signal_frame"
}

/// What crashport does with a signal after reporting it: what the kernel would have done with
/// the program's action.
public enum ChainAction: String, Codable, Sendable {
    /// The handler installed before crashport runs (the program never replaced it).
    case forwardedToPrevious = "forwarded-to-previous"
    /// The handler the program installed after crashport runs (again).
    case forwardedToProgram = "forwarded-to-program"
    case defaultAction = "default-action"
    /// The program ignores the signal and it was sent, not a fault: nothing happens.
    case ignored
}

/// When the program's handler runs: after the report (a handler installed before crashport, by
/// default), or before it, with crashport reporting only what it does not recover from (every
/// handler the program installs after crashport, and forward-first signals).
public enum SignalPolicy: String, Codable, Sendable {
    case reportThenForward = "report-then-forward"
    case forwardFirst = "forward-first"
}

public struct Event: Codable, Sendable, Equatable {
    public static let schemaName = "crashport.event.v1"

    public var schema: String? = Event.schemaName
    public var id: String?
    public var kind: ReportKind?
    public var timestamp: String?
    public var process: ProcessInfoRecord?
    public var signal: SignalRecord?
    public var crashedThread: ThreadID?
    public var threads: [ThreadRecord]?
    public var modules: [ModuleRecord]?
    public var handlerChain: [HandlerChainEntry]?
    public var minidump: String?
    /// How the crash reached the watcher when not live: "spool" for a record the stub wrote to
    /// the spool directory because no watcher answered (only the crashing thread, from its
    /// stack copy). Absent for a live capture.
    public var capturedFrom: String?
    /// Which level of crashport saw the crash: `stub` (the program's own handler sent a record),
    /// `launcher` (the task level: `crashport run` or the sidecar observed the death, hang or exit
    /// itself), `host` (the kernel's core handler: `crashport watch --host`).
    public var source: String?
    /// What could not be captured and why (best-effort capture records its gaps here).
    public var notes: [String]?
    /// What the program said about itself (crashport_annotate), by key.
    public var annotations: [String: String]?
    /// The keys whose key or value the stub cut to its limit.
    public var annotationsTruncated: [String]?
    /// The program's last breadcrumbs (crashport_breadcrumb), oldest first.
    public var breadcrumbs: [BreadcrumbRecord]?
    /// The files the program asked to attach (crashport_attach_file), as copied into attachments/.
    public var attachments: [AttachmentRecord]?
    /// A C++ exception that escaped (std::terminate): its type and what().
    public var exception: ExceptionRecord?
    /// Why the program ended, in its runtime's words: a failed assert or malloc's check (glibc's
    /// abort message), a Swift fatal error, an uncaught exception.
    public var reason: String?
    /// Whether the crash came inside the program's launch window, and how long after install.
    public var launch: LaunchRecord?
    /// The program's release: the "release" annotation, else CRASHPORT_RELEASE at install.
    public var release: String?
    /// The session (run) this report belongs to: its `sid` in the reports' session log.
    public var session: String?
    /// One line, Sentry-like: what happened, then the culprit ("SIGABRT: … in parse_config (config.cpp:42)").
    public var title: String?
    /// The crashing thread's first frame that is the program's own (in_app).
    public var culprit: CulpritRecord?
    /// What identifies the bug, for people: the frames that decide it, Socorro's way
    /// ("strlen | parse_records"). See Reports/Signature.swift.
    public var signature: String?
    /// The bug's name for machines: 16 hex digits over the signature, the fault and the module,
    /// the same on every machine and build (Sentry's `fingerprint`).
    public var fingerprint: String?
    /// Why a termination or hang report was written: `SIGKILL`, `oom-kill` (the kernel's OOM
    /// counters moved: its cgroup's, or the machine's), `exit` (a non-zero exit status, or, seen
    /// by a sidecar, an exit without goodbye), `signal` (a fatal signal no handler reported),
    /// `hang`, `watchdog` (a program --hang-kill ended, or a kill inferred from its sender
    /// being pid 1, as systemd's WatchdogSec= sends it: the notes say which).
    public var cause: String?
    /// The report this one follows from: a watchdog kill names the hang report it came after.
    public var related: String?
    /// A hang: how long the heartbeat had not moved when the stacks were taken.
    public var hangMilliseconds: UInt64?
    /// The exit code of a process that exited (a termination with cause `exit`), when known.
    public var exitCode: Int32?
    /// Its memory as the kernel accounted it when captured: the memory cgroup's limit, usage,
    /// peak and events, the pressure on it, the process's peak resident set.
    public var memory: MemoryRecord?
    /// A death seen at its exit (a termination under --trace-exit): whether its stacks were
    /// read at the death, or came from a snapshot taken under memory pressure before it.
    public var stackTaken: StackTaken?
    /// A test crash (crashport_test_crash(), CrashPort.testCrash(), `crashport test-crash`): a
    /// real crash made on purpose, titled "test crash: …" and kept out of crash-free statistics.
    /// Absent for any other report.
    public var test: Bool?
    /// A report a sidecar writes in two steps: `captured` while this event is the one written
    /// with the minidump, before unwinding and symbolication (the signal, the process, its
    /// modules, each thread's pc; its registers are in the minidump). The full event replaces it moments later
    /// (a rename: readers see one or the other). Absent in a complete report; a report left
    /// `captured` (its watcher was stopped between the steps) is still whole in its minidump.
    public var stage: String?
    /// The crash logs the process's runtime wrote (the JVM's hs_err file, Node's report), found
    /// when it was captured; their bytes are attachments (scope `runtime`).
    public var runtimeLogs: [RuntimeLogRecord]?
    /// Why the program died: the faulting instruction decoded, its access, a diagnosis and the
    /// variable that held the bad value (FaultRecord.swift).
    public var fault: FaultRecord?

    /// The `stage` of an event written before unwinding and symbolication.
    public static let capturedStage = "captured"

    public init() {}

    /// The program's annotations (with the keys it cut) and breadcrumbs, as its app area held
    /// them; fields left nil when there are none.
    public mutating func record(annotations: [Annotation], breadcrumbs: [Breadcrumb]) {
        if !annotations.isEmpty {
            self.annotations = Dictionary(annotations.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
            let cut = annotations.filter(\.truncated).map(\.key)
            annotationsTruncated = cut.isEmpty ? nil : cut
        }
        if !breadcrumbs.isEmpty {
            self.breadcrumbs = breadcrumbs.map {
                BreadcrumbRecord(
                    timestamp: Event.timestamp(unixNanoseconds: $0.timeNanoseconds), category: $0.category,
                    message: $0.message, truncated: $0.truncated ? true : nil)
            }
        }
    }

    /// The top-level fields this crashport reads: anything else in an event.json (a newer
    /// crashport's, a hand edit) is skipped, and `crashport show` says which.
    public static var knownFields: Set<String> { Set(CodingKeys.allCases.map(\.rawValue)) }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case schema, id, kind, timestamp, process, signal
        case crashedThread = "crashed_thread"
        case threads, modules
        case handlerChain = "handler_chain"
        case minidump, notes
        case capturedFrom = "captured_from"
        case source
        case annotations
        case annotationsTruncated = "annotations_truncated"
        case breadcrumbs, attachments, exception, reason, launch, release, session, title, culprit, signature, fingerprint
        case cause, related
        case hangMilliseconds = "hang_ms"
        case exitCode = "exit_code"
        case memory
        case stackTaken = "stack_taken"
        case test
        case stage
        case runtimeLogs = "runtime_logs"
        case fault
    }

    /// An event timestamp: ISO 8601 with fractional seconds, UTC.
    public static func timestamp(_ date: Date = Date()) -> String {
        let time = UTCTime(date)
        return "\(time.date("-"))T\(time.time(":")).\(UTCTime.digits(time.millisecond, 3))Z"
    }

    /// The timestamp of a time in nanoseconds since the Unix epoch (a breadcrumb's clock).
    public static func timestamp(unixNanoseconds: UInt64) -> String {
        timestamp(Date(timeIntervalSince1970: Double(unixNanoseconds) / 1e9))
    }

    /// A decoding error in a sentence: what was wrong, and where in the event.
    public static func describe(decodingError error: Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context):
            return context.underlyingError.map { "\($0)" } ?? context.debugDescription
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.keyNotFound(_, let context):
            return context.debugDescription + " at " + context.codingPath.map(\.stringValue).joined(separator: ".")
        default: return "\(error)"
        }
    }

    /// The crashed thread's record, if present.
    public var crashedThreadRecord: ThreadRecord? {
        threads?.first { $0.crashed == true } ?? threads?.first { $0.tid == crashedThread }
    }
}

public struct CulpritRecord: Codable, Sendable, Equatable {
    public var function: String?
    public var file: String?
    public var line: Int?
    public var module: String?

    public init(function: String? = nil, file: String? = nil, line: Int? = nil, module: String? = nil) {
        self.function = function
        self.file = file
        self.line = line
        self.module = module
    }
}

public struct LaunchRecord: Codable, Sendable, Equatable {
    public var crashedDuringLaunch: Bool?
    /// Milliseconds from crashport_install to the crash.
    public var sinceInstallMilliseconds: UInt64?

    public init(crashedDuringLaunch: Bool? = nil, sinceInstallMilliseconds: UInt64? = nil) {
        self.crashedDuringLaunch = crashedDuringLaunch
        self.sinceInstallMilliseconds = sinceInstallMilliseconds
    }

    enum CodingKeys: String, CodingKey {
        case crashedDuringLaunch = "crashed_during_launch"
        case sinceInstallMilliseconds = "since_install_ms"
    }
}

public struct ExceptionRecord: Codable, Sendable, Equatable {
    public var type: String?
    public var message: String?
    /// The stub cut the type or message to its limit.
    public var truncated: Bool?
    /// The program handled it and reported it (crashport_report_error), and lived on.
    public var handled: Bool?
    /// A handled error's own key/values (crashport_report_error_with), in this report only;
    /// the program's annotations stay in `annotations`.
    public var properties: [String: String]?
    /// The keys whose key or value the stub cut to its limit.
    public var propertiesTruncated: [String]?

    public init(
        type: String? = nil, message: String? = nil, truncated: Bool? = nil, handled: Bool? = nil,
        properties: [String: String]? = nil, propertiesTruncated: [String]? = nil
    ) {
        self.type = type
        self.message = message
        self.truncated = truncated
        self.handled = handled
        self.properties = properties
        self.propertiesTruncated = propertiesTruncated
    }

    enum CodingKeys: String, CodingKey {
        case type, message, truncated, handled, properties
        case propertiesTruncated = "properties_truncated"
    }
}

public struct BreadcrumbRecord: Codable, Sendable, Equatable {
    /// RFC 3339 UTC, milliseconds.
    public var timestamp: String?
    public var category: String?
    public var message: String?
    /// The stub cut the category or message to its limit.
    public var truncated: Bool?

    public init(timestamp: String? = nil, category: String? = nil, message: String? = nil, truncated: Bool? = nil) {
        self.timestamp = timestamp
        self.category = category
        self.message = message
        self.truncated = truncated
    }
}

/// One file the program asked to attach: where it was, and what of it the report holds.
public struct AttachmentRecord: Codable, Sendable, Equatable {
    /// The path the program named (absolute).
    public var path: String?
    /// The copy, relative to the report directory ("attachments/app.log"); absent when nothing
    /// was copied.
    public var file: String?
    /// The file's size when it was copied.
    public var size: UInt64?
    /// Bytes in the copy.
    public var copied: UInt64?
    /// The copy stops short of the file: its cap (7 MB per file, 20 MB in all) was reached.
    public var truncated: Bool?
    /// Why nothing (or less) was copied: "not a regular file", "permission denied", …
    public var error: String?
    /// `error`: the handled error's own file (crashport_report_error_with), in this report only;
    /// `memory`: an attachment from memory (crashport_attach_bytes, crashport_attach_ring);
    /// `runtime`: a runtime's crash log; absent: a file the program attached for every report
    /// (crashport_attach_file).
    public var scope: String?
    /// An attachment from memory: the name the program gave it, and its content type.
    public var name: String?
    public var contentType: String?
    /// An attachment from memory a thread was writing when the process stopped: its last
    /// write may be partial.
    public var partial: Bool?

    /// The scope of a handled error's own file.
    public static let errorScope = "error"
    /// The scope of an attachment from memory.
    public static let memoryScope = "memory"

    public init(
        path: String? = nil, file: String? = nil, size: UInt64? = nil, copied: UInt64? = nil, truncated: Bool? = nil,
        error: String? = nil, scope: String? = nil
    ) {
        self.path = path
        self.file = file
        self.size = size
        self.copied = copied
        self.truncated = truncated
        self.error = error
        self.scope = scope
    }

    enum CodingKeys: String, CodingKey {
        case path, file, size, copied, truncated, error, scope, name
        case contentType = "content_type"
        case partial
    }
}

public struct ProcessInfoRecord: Codable, Sendable, Equatable {
    public var pid: ProcessID?
    public var executable: String?
    public var arguments: [String]?
    public var buildID: String?
    /// Its cgroup (/proc/PID/cgroup's unified line), and what that names: a systemd unit
    /// (`nginx.service`, `cron.service`, a user's `app.scope`) or a container's id.
    public var cgroup: String?
    public var unit: String?
    public var container: String?
    /// The container by name, where the cgroup path and the node's files say (ContainerRecord
    /// readers): its runtime (`docker`, `containerd`, `cri-o`, `podman`, `systemd-nspawn`), the
    /// name its runtime gives it (Kubernetes' container name for a pod's), its image.
    public var containerRuntime: String?
    public var containerName: String?
    public var containerImage: String?
    /// The Kubernetes pod the container belongs to.
    public var pod: PodRecord?

    public init(pid: ProcessID? = nil, executable: String? = nil, arguments: [String]? = nil, buildID: String? = nil) {
        self.pid = pid
        self.executable = executable
        self.arguments = arguments
        self.buildID = buildID
    }

    enum CodingKeys: String, CodingKey {
        case pid, executable, arguments
        case buildID = "build_id"
        case cgroup, unit, container
        case containerRuntime = "container_runtime"
        case containerName = "container_name"
        case containerImage = "container_image"
        case pod
    }
}

/// A Kubernetes pod: its uid (from the cgroup path), and its name and namespace where the
/// node's files say them.
public struct PodRecord: Codable, Sendable, Equatable {
    public var uid: String?
    public var name: String?
    public var namespace: String?

    public init(uid: String? = nil, name: String? = nil, namespace: String? = nil) {
        self.uid = uid
        self.name = name
        self.namespace = namespace
    }
}

public struct SignalRecord: Codable, Sendable, Equatable {
    public var number: Int32?
    public var name: String?
    public var code: Int32?
    public var codeName: String?
    public var faultAddress: HexAddress?
    public var senderPID: ProcessID?
    /// A sentence: what the signal means.
    public var description: String?
    /// The fault is a stack overflow: its address lies in the guard region below the thread's
    /// stack, or within a page of the stack pointer past the stack's mapping.
    public var stackOverflow: Bool?
    /// The signal above is the original fault; a handler of the program ran on it and then
    /// raised, aborted or faulted again, and this is that second signal and who sent it.
    public var reraisedBy: ReraiseRecord?

    public init(
        number: Int32? = nil, name: String? = nil, code: Int32? = nil, codeName: String? = nil,
        faultAddress: HexAddress? = nil, senderPID: ProcessID? = nil, description: String? = nil,
        stackOverflow: Bool? = nil, reraisedBy: ReraiseRecord? = nil
    ) {
        self.number = number
        self.name = name
        self.code = code
        self.codeName = codeName
        self.faultAddress = faultAddress
        self.senderPID = senderPID
        self.description = description
        self.stackOverflow = stackOverflow
        self.reraisedBy = reraisedBy
    }

    enum CodingKeys: String, CodingKey {
        case number, name, code
        case codeName = "code_name"
        case faultAddress = "fault_address"
        case senderPID = "sender_pid"
        case description
        case stackOverflow = "stack_overflow"
        case reraisedBy = "reraised_by"
    }
}

/// A signal as the kernel delivered it to a handler (its siginfo).
public struct DeliveredSignal: Codable, Sendable, Equatable {
    public var number: Int32
    public var code: Int32
    /// si_addr, for a fault.
    public var address: HexAddress?

    public init(number: Int32, code: Int32, address: HexAddress?) {
        self.number = number
        self.code = code
        self.address = address
    }
}

/// The second signal of a fault a program handler did not recover from: the handler that was
/// running (its function and module), and the signal it raised, the abort it called or the
/// fault it took itself.
public struct ReraiseRecord: Codable, Sendable, Equatable {
    public enum How: String, Codable, Sendable {
        /// raise(), kill(), tgkill() or sigqueue() from the process itself (abort() included).
        case raised
        /// The handler faulted itself.
        case faulted
        /// The handler reset the action to SIG_DFL and returned, so the fault came back.
        case resetAndReturned = "reset_and_returned"
        /// The handler returned without repairing anything and the same fault came back.
        case cameBack = "came_back"
        /// The handler turned the fault into a call (Go's runtime: runtime.sigpanic), and the
        /// runtime then ended the process with `exit_status` (Go's fatal error or unrecovered
        /// panic: 2) without another signal.
        case calledThenExited = "called_then_exited"
    }

    public var how: How?
    /// The signal the handler raised or took (absent for reset_and_returned and came_back).
    public var signal: String?
    public var number: Int32?
    public var code: Int32?
    public var codeName: String?
    /// The handler that was running, as a function and its module.
    public var handler: HexAddress?
    public var function: String?
    public var module: String?
    /// When the crashed thread was unwound from the second signal (a handler crashport did not
    /// run, found through its signal frame): the index of the frame the original fault is in.
    public var originalFrame: Int?
    /// called_then_exited: the status the process exited with.
    public var exitStatus: Int32?

    public init(
        how: How? = nil, signal: String? = nil, number: Int32? = nil, code: Int32? = nil, codeName: String? = nil,
        handler: HexAddress? = nil, function: String? = nil, module: String? = nil, originalFrame: Int? = nil
    ) {
        self.originalFrame = originalFrame
        self.how = how
        self.signal = signal
        self.number = number
        self.code = code
        self.codeName = codeName
        self.handler = handler
        self.function = function
        self.module = module
    }

    enum CodingKeys: String, CodingKey {
        case how, signal, number, code
        case codeName = "code_name"
        case handler, function, module
        case originalFrame = "original_frame"
        case exitStatus = "exit_status"
    }
}

public struct ThreadRecord: Codable, Sendable, Equatable {
    public var tid: ThreadID?
    public var name: String?
    public var crashed: Bool?
    public var registers: [String: HexAddress]?
    public var frames: [FrameRecord]?
    /// Frames left out of a very deep stack, between the first and the last kept ones.
    public var truncated: Int?
    /// A CPython thread that held the interpreter's lock (the GIL) when the process stopped.
    public var holdsGIL: Bool?
    /// A handled error's own stack (crashport_report_error_stack), not a thread's: it has the
    /// reporting thread's id, and that thread's own stack is the next record with that id.
    public var errorStack: Bool?

    public init(
        tid: ThreadID? = nil, name: String? = nil, crashed: Bool? = nil, registers: [String: HexAddress]? = nil,
        frames: [FrameRecord]? = nil, truncated: Int? = nil
    ) {
        self.tid = tid
        self.name = name
        self.crashed = crashed
        self.registers = registers
        self.frames = frames
        self.truncated = truncated
    }

    enum CodingKeys: String, CodingKey {
        case tid, name, crashed, registers, frames, truncated
        case holdsGIL = "holds_gil"
        case errorStack = "error_stack"
    }
}

public struct FrameRecord: Codable, Sendable, Equatable {
    public var index: Int?
    public var pc: HexAddress?
    public var module: String?
    public var moduleOffset: HexAddress?
    public var function: String?
    public var mangled: String?
    /// The raw name of the ELF symbol that ran, when it names something other than `function`:
    /// a GCC clone or split part (`worker_loop.cold`, `bind_port.constprop.0`, whose function
    /// is `worker_loop`, `bind_port`, as the DWARF and gdb say), or another alias of the same
    /// code. Only on a pc's outermost frame; `function_offset` counts from its start.
    public var symbol: String?
    public var functionOffset: HexAddress?
    public var file: String?
    public var line: Int?
    public var column: Int?
    public var inlined: Bool?
    /// A function that had left the stack by a tail call (its last act was a jump, not a
    /// call), put back from the DWARF call sites as gdb shows it: its pc is the tail call's
    /// return address, its file and line the jump's.
    public var tailCall: Bool?
    public var trust: FrameTrust?
    /// On a `<signal handler called>` frame: the signal the kernel delivered there, from the
    /// siginfo in its signal frame.
    public var delivered: DeliveredSignal?
    /// The program's own frame (not a system or language runtime's, not crashport's): see
    /// Reports/Culprit.swift for the rule.
    public var inApp: Bool?
    /// The language of a frame that is not machine code's own: `python` (a CPython frame the
    /// interpreter was running, read from its memory and placed just above the eval-loop frame
    /// that ran it), `jit` (code generated at run time, named by the process's perf map: a
    /// JavaScript, Java or Python function). Absent for native frames. A `python` frame has no
    /// pc; its `file` and `line` are the Python source's.
    public var language: String?
    /// A Python frame's qualified name (`Loader.parse_row`), where `function` is its code
    /// object's name (`parse_row`).
    public var qualifiedName: String?
    /// The frame's parameters and locals where the DWARF places them in registers or memory
    /// the report captured (the crashed thread's top frames; off with
    /// CRASHPORT_VARIABLES=off), in gdb's order: parameters, then locals innermost scope first.
    public var vars: [VariableRecord]?

    public init(
        index: Int? = nil, pc: HexAddress? = nil, module: String? = nil, moduleOffset: HexAddress? = nil,
        function: String? = nil, mangled: String? = nil, symbol: String? = nil, functionOffset: HexAddress? = nil,
        file: String? = nil, line: Int? = nil, column: Int? = nil, inlined: Bool? = nil, tailCall: Bool? = nil,
        trust: FrameTrust? = nil
    ) {
        self.index = index
        self.pc = pc
        self.module = module
        self.moduleOffset = moduleOffset
        self.function = function
        self.mangled = mangled
        self.symbol = symbol
        self.functionOffset = functionOffset
        self.file = file
        self.line = line
        self.column = column
        self.inlined = inlined
        self.tailCall = tailCall
        self.trust = trust
    }

    enum CodingKeys: String, CodingKey {
        case index, pc, module
        case moduleOffset = "module_offset"
        case function, mangled, symbol
        case functionOffset = "function_offset"
        case file, line, column, inlined
        case tailCall = "tail_call"
        case trust, delivered
        case inApp = "in_app"
        case language
        case qualifiedName = "qualified_name"
        case vars
    }
}

public struct ModuleRecord: Codable, Sendable, Equatable {
    public var path: String?
    public var base: HexAddress?
    public var size: HexAddress?
    public var buildID: String?
    /// The package the module came from: its `.note.package` note, else dpkg's database.
    public var package: PackageRecord?

    public init(path: String? = nil, base: HexAddress? = nil, size: HexAddress? = nil, buildID: String? = nil) {
        self.path = path
        self.base = base
        self.size = size
        self.buildID = buildID
    }

    enum CodingKeys: String, CodingKey {
        case path, base, size
        case buildID = "build_id"
        case package
    }
}

/// A module's package: from its ELF `.note.package` note (systemd.io/ELF_PACKAGE_METADATA:
/// `type`, `os`, `osVersion`, `name`, `version`, `architecture`, `debugInfoUrl`), or, for a
/// file dpkg installed and no note names, the package dpkg says owns its path.
public struct PackageRecord: Codable, Sendable, Equatable {
    public var type: String?
    public var name: String?
    public var version: String?
    public var architecture: String?
    public var os: String?
    public var osVersion: String?
    public var debuginfodURL: String?
    /// Where it was read: `note` or `dpkg`.
    public var source: String?

    public init(
        type: String? = nil, name: String? = nil, version: String? = nil, architecture: String? = nil,
        os: String? = nil, osVersion: String? = nil, debuginfodURL: String? = nil, source: String? = nil
    ) {
        self.type = type
        self.name = name
        self.version = version
        self.architecture = architecture
        self.os = os
        self.osVersion = osVersion
        self.debuginfodURL = debuginfodURL
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case type, name, version, architecture, os
        case osVersion = "os_version"
        case debuginfodURL = "debuginfod_url"
        case source
    }
}

/// One handled signal's chain: what was installed below crashport (saved at install), what sits
/// above it (installed later by someone else), and what crashport did with the signal.
public struct HandlerChainEntry: Codable, Sendable, Equatable {
    public var signal: String?
    /// Below crashport: the action the kernel held when crashport installed.
    public var previous: HandlerRecord?
    /// Above crashport: the action the program set since (crashport keeps the kernel's slot
    /// and runs it as the kernel would); absent when the program never changed it.
    public var above: HandlerRecord?
    /// What the kernel held at the crash when it was not crashport's: a handler installed by a
    /// raw rt_sigaction (static programs, runtimes that bypass libc), invisible until then.
    public var kernel: HandlerRecord?
    /// For the crashing signal, what ran, in order ("faulthandler_fatal_error (above): raised
    /// SIGSEGV", "crashport: report", "default action").
    public var ran: [String]?
    /// For the crashing signal, what crashport did after the report; for the others, what it
    /// would do.
    public var action: ChainAction?
    public var policy: SignalPolicy?

    public init(
        signal: String? = nil, previous: HandlerRecord? = nil, above: HandlerRecord? = nil, kernel: HandlerRecord? = nil,
        ran: [String]? = nil, action: ChainAction? = nil, policy: SignalPolicy? = nil
    ) {
        self.signal = signal
        self.previous = previous
        self.above = above
        self.kernel = kernel
        self.ran = ran
        self.action = action
        self.policy = policy
    }
}

/// A handler: either a function (address, symbol, module, flags) or "default" / "ignore".
public enum HandlerRecord: Codable, Sendable, Equatable {
    public enum Disposition: String, Codable, Sendable {
        case `default`, ignore
    }

    case disposition(Disposition)
    case function(address: HexAddress, symbol: String?, module: String?, flags: [String])

    enum CodingKeys: String, CodingKey { case address, symbol, module, flags }

    public init(from decoder: Decoder) throws {
        if let disposition = try? decoder.singleValueContainer().decode(Disposition.self) {
            self = .disposition(disposition)
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self = .function(
            address: try container.decode(HexAddress.self, forKey: .address),
            symbol: try container.decodeIfPresent(String.self, forKey: .symbol),
            module: try container.decodeIfPresent(String.self, forKey: .module),
            flags: try container.decodeIfPresent([String].self, forKey: .flags) ?? []
        )
    }

    public func encode(to encoder: Encoder) throws {
        switch self {
        case .disposition(let disposition):
            var container = encoder.singleValueContainer()
            try container.encode(disposition)
        case .function(let address, let symbol, let module, let flags):
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(address, forKey: .address)
            try container.encodeIfPresent(symbol, forKey: .symbol)
            try container.encodeIfPresent(module, forKey: .module)
            try container.encode(flags, forKey: .flags)
        }
    }
}

extension Event {
    public func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    public static func decode(_ data: Data) throws -> Event {
        try JSONDecoder().decode(Event.self, from: data)
    }
}

/// A moment's UTC calendar fields, from gmtime_r: what timestamps and report ids are written
/// from (Foundation's date formatters would load ICU and its data into the watcher for this).
public struct UTCTime {
    public var year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, millisecond = 0

    public init(_ date: Date) {
        let since1970 = date.timeIntervalSince1970
        let seconds = since1970.rounded(.down)
        var time = Int(seconds)
        var fields = tm()
        gmtime_r(&time, &fields)
        year = Int(fields.tm_year) + 1900
        month = Int(fields.tm_mon) + 1
        day = Int(fields.tm_mday)
        hour = Int(fields.tm_hour)
        minute = Int(fields.tm_min)
        second = Int(fields.tm_sec)
        millisecond = min(999, Int((since1970 - seconds) * 1000))
    }

    /// YYYY-MM-DD with `separator` between the fields (empty: YYYYMMDD).
    public func date(_ separator: String) -> String {
        [Self.digits(year, 4), Self.digits(month, 2), Self.digits(day, 2)].joined(separator: separator)
    }

    /// hh:mm:ss with `separator` between the fields.
    public func time(_ separator: String) -> String {
        [Self.digits(hour, 2), Self.digits(minute, 2), Self.digits(second, 2)].joined(separator: separator)
    }

    /// Milliseconds since the Unix epoch of a timestamp as `Event.timestamp` writes it
    /// (YYYY-MM-DDThh:mm:ss, a fraction or none, Z); nil for any other text. Parsed here, not
    /// by FoundationEssentials' ISO 8601 style, whose calendar code a sidecar would map for
    /// each crash's run record.
    public static func unixMilliseconds(_ text: String) -> UInt64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40, bytes.last == UInt8(ascii: "Z") else { return nil }
        func number(_ start: Int, _ count: Int) -> Int? {
            var value = 0
            for byte in bytes[start..<start + count] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        func separator(_ at: Int, _ character: Unicode.Scalar) -> Bool { bytes[at] == UInt8(ascii: character) }
        guard let year = number(0, 4), separator(4, "-"), let month = number(5, 2), separator(7, "-"),
            let day = number(8, 2), separator(10, "T"), let hour = number(11, 2), separator(13, ":"),
            let minute = number(14, 2), separator(16, ":"), let second = number(17, 2),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        var millisecond = 0
        if bytes.count > 20 {
            let digits = bytes.count - 21
            guard separator(19, "."), digits >= 1, bytes[20..<20 + digits].allSatisfy({ (0x30...0x39).contains($0) })
            else { return nil }
            // The first three digits ("1" is 100 ms, "12" 120 ms); the rest are dropped.
            let kept = min(digits, 3)
            millisecond = (number(20, kept) ?? 0) * [100, 10, 1][kept - 1]
        }
        var fields = tm()
        fields.tm_year = Int32(year - 1900)
        fields.tm_mon = Int32(month - 1)
        fields.tm_mday = Int32(day)
        fields.tm_hour = Int32(hour)
        fields.tm_min = Int32(minute)
        fields.tm_sec = Int32(second)
        let seconds = timegm(&fields)
        guard seconds >= 0 else { return nil }
        return UInt64(seconds) * 1000 + UInt64(millisecond)
    }

    /// `value` in decimal, zero-padded to `width`.
    public static func digits(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
}
