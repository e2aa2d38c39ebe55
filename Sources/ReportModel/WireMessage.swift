// WireMessage: decoding and encoding the messages of crashport_protocol.h.
//
// Received bytes are never cast to the C structs: each field is read at its offset (taken from
// the C declarations through MemoryLayout, so the header stays the single source of truth)
// after checking magic, version, type and that `size` equals the bytes actually received.

import BoundedBytes
import CCrashPortProtocol

public enum WireError: Error, CustomStringConvertible, Equatable {
    case tooShort(Int)
    case badMagic(UInt32)
    case badVersion(UInt32)
    case sizeMismatch(declared: UInt32, received: Int)
    case unexpectedType(UInt32)
    case badField(String)

    public var description: String {
        switch self {
        case .tooShort(let count): return "message of \(count) bytes is shorter than a header"
        case .badMagic(let magic): return "bad magic 0x\(String(magic, radix: 16))"
        case .badVersion(let version): return "unsupported protocol version \(version) (this watcher speaks \(CP_VERSION))"
        case .sizeMismatch(let declared, let received): return "declared size \(declared) but \(received) bytes arrived"
        case .unexpectedType(let type): return "unexpected message type \(type)"
        case .badField(let what): return what
        }
    }
}

/// Field offsets in the C structs, for the decoder.
enum Layout {
    static func offset<T>(_ path: PartialKeyPath<T>) -> Int { MemoryLayout<T>.offset(of: path)! }
}

struct WireBytes {
    let bytes: [UInt8]

    func u32(_ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
    }

    func i32(_ offset: Int) -> Int32 { Int32(bitPattern: u32(offset)) }
    func u64(_ offset: Int) -> UInt64 { UInt64(u32(offset)) | UInt64(u32(offset + 4)) << 32 }
}

/// The common header: checks magic, version and that `size` matches what was received.
public struct WireHeader: Equatable, Sendable {
    public var type: UInt32
    public var size: UInt32

    public static let byteCount = MemoryLayout<cp_header>.size

    public init(bytes: [UInt8]) throws {
        guard bytes.count >= Self.byteCount else { throw WireError.tooShort(bytes.count) }
        let wire = WireBytes(bytes: bytes)
        let magic = wire.u32(Layout.offset(\cp_header.magic))
        guard magic == CP_MAGIC else { throw WireError.badMagic(magic) }
        let version = wire.u32(Layout.offset(\cp_header.version))
        guard version == CP_VERSION else { throw WireError.badVersion(version) }
        size = wire.u32(Layout.offset(\cp_header.size))
        guard Int(size) == bytes.count else { throw WireError.sizeMismatch(declared: size, received: bytes.count) }
        type = wire.u32(Layout.offset(\cp_header.type))
    }
}

public struct HelloMessage: Equatable, Sendable {
    public var pid: ProcessID
    public var stubVersion: UInt32
    public var buildID: [UInt8]
    /// Where the process keeps its cp_app_area (0 if none): an address in that process, to be
    /// read from it, bounds-checked (the hang monitor reads the heartbeat there; a sidecar, the
    /// client's breadcrumbs and annotations while it runs).
    public var appArea: UInt64
    /// What the process asks of a sidecar (CP_WANTS_*, from its environment); unknown bits are
    /// ignored, not trusted.
    public var wants: UInt32 = 0
    /// CRASHPORT_HANG_MS as the process gave it (0: none); the sidecar bounds it.
    public var hangMilliseconds: UInt32 = 0

    /// The HELLO of stubs before `wants`: it ends at build_id.
    static let shortSize = Layout.offset(\cp_hello.wants)

    public init(bytes: [UInt8]) throws {
        let header = try WireHeader(bytes: bytes)
        guard header.type == CP_MSG_HELLO.rawValue else { throw WireError.unexpectedType(header.type) }
        guard bytes.count == MemoryLayout<cp_hello>.size || bytes.count == Self.shortSize else {
            throw WireError.badField(
                "a HELLO of \(bytes.count) bytes (expected \(MemoryLayout<cp_hello>.size), or \(Self.shortSize) from an older stub)"
            )
        }
        let wire = WireBytes(bytes: bytes)
        pid = ProcessID(wire.i32(Layout.offset(\cp_hello.pid)))
        stubVersion = wire.u32(Layout.offset(\cp_hello.stub_version))
        appArea = wire.u64(Layout.offset(\cp_hello.annotations_address))
        let idSize = Int(wire.u32(Layout.offset(\cp_hello.build_id_size)))
        guard idSize <= 40 else { throw WireError.badField("build-id size \(idSize) exceeds 40") }
        let start = Layout.offset(\cp_hello.build_id)
        buildID = Array(bytes[start..<start + idSize])
        if bytes.count == MemoryLayout<cp_hello>.size {
            wants = wire.u32(Layout.offset(\cp_hello.wants)) & CP_WANTS_ALL
            hangMilliseconds = wire.u32(Layout.offset(\cp_hello.hang_ms))
        }
    }

    public var wantsTraceExit: Bool { wants & (CP_WANTS_TRACE_EXIT | CP_WANTS_TRACE_EXIT_CODES) != 0 }
    public var wantsTraceExitCodes: Bool { wants & CP_WANTS_TRACE_EXIT_CODES != 0 }
    public var wantsHangKill: Bool { wants & CP_WANTS_HANG_KILL != 0 }
    /// It reads HELLO_REPLY's run_detail (a stub from before it wants the short reply).
    public var wantsRunDetail: Bool { wants & CP_WANTS_RUN_DETAIL != 0 }
    /// It reads HELLO_REPLY's last_send (a stub from before it wants the reply that ends at run_detail).
    public var wantsSendState: Bool { wants & CP_WANTS_SEND_STATE != 0 }
}

/// GOODBYE: the process that said HELLO exits normally (exit() or _exit()); nothing answers it.
public struct GoodbyeMessage: Equatable, Sendable {
    /// The status passed to exit() or _exit(); the parent sees its low byte.
    public var exitStatus: Int32

    public init(bytes: [UInt8]) throws {
        let header = try WireHeader(bytes: bytes)
        guard header.type == CP_MSG_GOODBYE.rawValue else { throw WireError.unexpectedType(header.type) }
        guard bytes.count == MemoryLayout<cp_goodbye>.size else {
            throw WireError.badField("a goodbye of \(bytes.count) bytes (expected \(MemoryLayout<cp_goodbye>.size))")
        }
        let wire = WireBytes(bytes: bytes)
        let reserved = wire.u32(Layout.offset(\cp_goodbye.reserved))
        guard reserved == 0 else { throw WireError.badField("a goodbye with reserved = \(reserved)") }
        exitStatus = wire.i32(Layout.offset(\cp_goodbye.exit_status))
    }

    /// A GOODBYE as the stub sends it.
    public static func encode(exitStatus: Int32) -> [UInt8] {
        var message = MessageEncoder(type: CP_MSG_GOODBYE.rawValue, size: MemoryLayout<cp_goodbye>.size)
        message.put32(UInt32(bitPattern: exitStatus), at: Layout.offset(\cp_goodbye.exit_status))
        return message.bytes
    }
}

/// A sigaction as the stub saw it.
public struct WireAction: Equatable, Sendable {
    public var handler: UInt64
    public var flags: UInt64
    public var mask: UInt64

    public init(handler: UInt64, flags: UInt64, mask: UInt64 = 0) {
        self.handler = handler
        self.flags = flags
        self.mask = mask
    }
}

/// One handled signal's chain at crash time.
public struct ChainRecord: Equatable, Sendable {
    public var signal: Int32
    /// Saved at install: the handler below crashport.
    public var previous: WireAction?
    /// The program's own action at the crash (what the kernel would hold without crashport).
    public var program: WireAction
    /// The program set its action since crashport installed (so `program` is above crashport).
    public var programChanged: Bool
    /// What the kernel held at the crash when it was not crashport's: a handler installed by a
    /// raw rt_sigaction, which libc's sigaction (and so crashport) never saw.
    public var kernel: WireAction?
    public var forwardFirst: Bool

    public init(
        signal: Int32, previous: WireAction?, program: WireAction, programChanged: Bool = false, kernel: WireAction? = nil,
        forwardFirst: Bool = false
    ) {
        self.signal = signal
        self.previous = previous
        self.program = program
        self.programChanged = programChanged
        self.kernel = kernel
        self.forwardFirst = forwardFirst
    }
}

/// A program handler ran on the fault first and did not recover: the second signal (the record's
/// signal, registers and stack are the original fault's).
public struct WireReraise: Equatable, Sendable {
    public enum How: UInt32, Sendable {
        case raised = 1, faulted, reset, cameBack
        /// CP_RERAISE_CALLED: the handler made the faulting instruction seem to call something
        /// (Go's runtime.sigpanic); a crash only if the process then ends by the runtime's fatal path.
        /// No second signal: once the process has ended so, the watcher puts its exit status in `code`.
        case called
    }

    public var how: How
    public var signal: Int32
    public var code: Int32
    /// Program handlers running on the thread, nested.
    public var depth: Int32
    public var handler: UInt64
    public var pc: UInt64

    public init(how: How, signal: Int32, code: Int32 = 0, depth: Int32 = 1, handler: UInt64 = 0, pc: UInt64 = 0) {
        self.how = how
        self.signal = signal
        self.code = code
        self.depth = depth
        self.handler = handler
        self.pc = pc
    }
}

public struct CrashRecord: Equatable, Sendable {
    public var pid: ProcessID
    public var tid: ThreadID
    public var signal: Int32
    public var code: Int32
    public var senderPID: ProcessID
    public var senderUID: UInt32
    public var arch: UInt32
    public var faultAddress: UInt64
    public var flags: UInt32
    public var otherCrashes: UInt32
    public var timeNanoseconds: UInt64
    public var threadName: String
    public var registers: X86_64Registers
    /// Every handled signal's chain, in signal order.
    public var chain: [ChainRecord]
    /// Set when a program handler ran on the fault first and raised, aborted or faulted again.
    public var reraise: WireReraise?
    /// Where the process keeps its cp_app_area (annotations, breadcrumbs, attachments), 0 if
    /// none: an address in the crashed process, to be read from it, bounds-checked.
    public var appArea: UInt64
    public var stack: MemoryRegion

    /// Bytes before `stack` (Swift does not import the 64 KiB array member itself; the header's
    /// static asserts guarantee it follows `reserved` directly).
    public static let fixedSize = MemoryLayout<cp_crash>.offset(of: \cp_crash.reserved)! + 4
    public static let maximumSize = fixedSize + Int(CP_STACK_COPY_MAX)

    public var stackTruncated: Bool { flags & CP_CRASH_STACK_TRUNCATED != 0 }
    /// An ERROR record (crashport_report_error): a handled error, the process lives on; signal 0.
    public var isError: Bool
    public var forwardedFirst: Bool { flags & CP_CRASH_FORWARD_FIRST != 0 }
    /// The process was not dumpable at the crash (CP_CRASH_NOT_DUMPABLE): the stub sent no memory
    /// of it (no registers, no stack copy, no addresses), and none may be read from it for a peer
    /// that is not its effective user.
    public var notDumpable: Bool { flags & CP_CRASH_NOT_DUMPABLE != 0 }
    /// A test crash (CP_CRASH_TEST): the thread was in crashport_test_crash(), crashing on purpose.
    public var isTest: Bool { flags & CP_CRASH_TEST != 0 }

    /// A death or hang the watcher saw from outside (no stub record): what it read itself.
    public enum Observation: Equatable, Sendable {
        /// Every thread stopped at its exit event; `status` is the wait status of the exit.
        case exit(status: Int32, cause: String)
        /// The heartbeat had not moved for `milliseconds`.
        case hang(milliseconds: UInt64)
    }

    /// Set on a record the watcher made itself (ExitTracer, the hang monitor), never on one
    /// from the wire: the named thread's registers then come from the capture, not the record.
    public var observation: Observation?

    /// A record for a death or hang the watcher observed: `tid` is the thread the report leads
    /// with, `appArea` the address the stub's HELLO gave (0 if none).
    public init(
        observation: Observation, pid: ProcessID, tid: ThreadID, signal: Int32, senderPID: ProcessID = ProcessID(0),
        appArea: UInt64, timeNanoseconds: UInt64
    ) {
        self.observation = observation
        self.pid = pid
        self.tid = tid
        self.signal = signal
        code = 0
        self.senderPID = senderPID
        senderUID = 0
        arch = CP_ARCH_X86_64
        faultAddress = 0
        flags = 0
        otherCrashes = 0
        self.timeNanoseconds = timeNanoseconds
        threadName = ""
        registers = X86_64Registers(gpr: [UInt64](repeating: 0, count: X86_64Registers.gprCount))
        chain = []
        reraise = nil
        self.appArea = appArea
        stack = MemoryRegion(start: 0, bytes: [])
        isError = false
    }

    /// A record for a crash the kernel dumped (the host level: no stub ran): the signal as its
    /// siginfo gave it and the crashing thread's registers; no chain, no stack copy, no app area.
    public init(
        kernelDumpOf pid: ProcessID, tid: ThreadID, signal: Int32, code: Int32, faultAddress: UInt64,
        senderPID: ProcessID?, senderUID: UInt32?, threadName: String, registers: X86_64Registers,
        timeNanoseconds: UInt64
    ) {
        self.init(
            observation: .hang(milliseconds: 0), pid: pid, tid: tid, signal: signal, appArea: 0, timeNanoseconds: timeNanoseconds)
        observation = nil
        self.code = code
        self.faultAddress = faultAddress
        self.senderPID = senderPID ?? ProcessID(0)
        self.senderUID = senderUID ?? 0
        self.threadName = threadName
        self.registers = registers
    }

    public init(bytes: [UInt8]) throws {
        let header = try WireHeader(bytes: bytes)
        guard header.type == CP_MSG_CRASH.rawValue || header.type == CP_MSG_ERROR.rawValue else {
            throw WireError.unexpectedType(header.type)
        }
        isError = header.type == CP_MSG_ERROR.rawValue
        guard bytes.count >= Self.fixedSize, bytes.count <= Self.maximumSize else {
            throw WireError.badField("crash record of \(bytes.count) bytes (expected \(Self.fixedSize)…\(Self.maximumSize))")
        }
        let wire = WireBytes(bytes: bytes)
        func at<T>(_ path: KeyPath<cp_crash, T>) -> Int { Layout.offset(path) }
        pid = ProcessID(wire.i32(at(\.pid)))
        tid = ThreadID(wire.i32(at(\.tid)))
        signal = wire.i32(at(\.signo))
        code = wire.i32(at(\.code))
        senderPID = ProcessID(wire.i32(at(\.sender_pid)))
        senderUID = wire.u32(at(\.sender_uid))
        arch = wire.u32(at(\.arch))
        guard arch == CP_ARCH_X86_64 else { throw WireError.badField("unsupported architecture \(arch)") }
        guard isError ? signal == 0 : signal > 0 && signal < 65 else {
            throw WireError.badField("signal number \(signal) out of range\(isError ? " for an error record" : "")")
        }
        guard pid.rawValue > 0, tid.rawValue > 0 else { throw WireError.badField("pid \(pid) / tid \(tid) not positive") }
        faultAddress = wire.u64(at(\.fault_address))
        flags = wire.u32(at(\.flags))
        otherCrashes = wire.u32(at(\.other_crashes))
        timeNanoseconds = wire.u64(at(\.time_ns))
        let nameStart = at(\.thread_name)
        let nameBytes = bytes[nameStart..<nameStart + 16].prefix { $0 != 0 }
        threadName = String(decoding: nameBytes, as: UTF8.self)
        let regsStart = at(\.regs)
        registers = X86_64Registers(gpr: (0..<X86_64Registers.gprCount).map { wire.u64(regsStart + $0 * 8) })
        if flags & CP_CRASH_HAS_FPREGS != 0 {
            let start = at(\.fpregs)
            registers.fxsave = Array(bytes[start..<start + 512])
        }
        func action(at start: Int) -> WireAction {
            WireAction(
                handler: wire.u64(start + Layout.offset(\cp_action.handler)),
                flags: wire.u64(start + Layout.offset(\cp_action.flags)),
                mask: wire.u64(start + Layout.offset(\cp_action.mask)))
        }
        let count = Int(wire.u32(at(\.chain_count)))
        guard count <= Int(CP_CHAIN_MAX) else { throw WireError.badField("chain_count \(count) exceeds \(CP_CHAIN_MAX)") }
        let entrySize = MemoryLayout<cp_chain_entry>.size
        chain = (0..<count).map { index in
            let start = at(\.chain) + index * entrySize
            let flags = wire.u32(start + Layout.offset(\cp_chain_entry.flags))
            return ChainRecord(
                signal: wire.i32(start + Layout.offset(\cp_chain_entry.signo)),
                previous: flags & CP_CHAIN_HAS_PREVIOUS != 0 ? action(at: start + Layout.offset(\cp_chain_entry.previous)) : nil,
                program: action(at: start + Layout.offset(\cp_chain_entry.program)),
                programChanged: flags & CP_CHAIN_PROGRAM_CHANGED != 0,
                kernel: flags & CP_CHAIN_KERNEL_BYPASSED != 0 ? action(at: start + Layout.offset(\cp_chain_entry.kernel)) : nil,
                forwardFirst: flags & CP_CHAIN_FORWARD_FIRST != 0)
        }
        let reraiseStart = at(\.reraise)
        let how = wire.u32(reraiseStart + Layout.offset(\cp_reraise.how))
        if how != CP_RERAISE_NONE {
            guard let known = WireReraise.How(rawValue: how) else { throw WireError.badField("re-raise kind \(how) unknown") }
            let raised = wire.i32(reraiseStart + Layout.offset(\cp_reraise.signo))
            guard raised >= 0 && raised < 65 else { throw WireError.badField("re-raised signal \(raised) out of range") }
            reraise = WireReraise(
                how: known, signal: raised, code: wire.i32(reraiseStart + Layout.offset(\cp_reraise.code)),
                depth: wire.i32(reraiseStart + Layout.offset(\cp_reraise.depth)),
                handler: wire.u64(reraiseStart + Layout.offset(\cp_reraise.handler)),
                pc: wire.u64(reraiseStart + Layout.offset(\cp_reraise.pc)))
        }
        appArea = wire.u64(at(\.app_area))
        let stackStart = wire.u64(at(\.stack_start))
        let stackSize = Int(wire.u32(at(\.stack_size)))
        guard stackSize == bytes.count - Self.fixedSize else {
            throw WireError.badField("stack_size \(stackSize) disagrees with the message size \(bytes.count)")
        }
        stack = MemoryRegion(start: stackStart, bytes: Array(bytes[Self.fixedSize...]))
    }
}

extension CrashRecord {
    /// A record of the host level's, from a crash the kernel dumped (no stub ran), kept in the
    /// spool when its report cannot be written: the crashing thread's registers and the top of
    /// its stack (at most CP_STACK_COPY_MAX bytes), flagged CP_CRASH_HOST_DUMP. No chain, no app
    /// area. Reads back through init(bytes:).
    public func encodedHostDump() -> [UInt8] {
        let stackBytes = stack.bytes.prefix(Int(CP_STACK_COPY_MAX))
        var message = MessageEncoder(type: CP_MSG_CRASH.rawValue, size: Self.fixedSize + stackBytes.count)
        func at<T>(_ path: KeyPath<cp_crash, T>) -> Int { Layout.offset(path) }
        message.put32(UInt32(bitPattern: pid.rawValue), at: at(\.pid))
        message.put32(UInt32(bitPattern: tid.rawValue), at: at(\.tid))
        message.put32(UInt32(bitPattern: signal), at: at(\.signo))
        message.put32(UInt32(bitPattern: code), at: at(\.code))
        message.put32(UInt32(bitPattern: senderPID.rawValue), at: at(\.sender_pid))
        message.put32(senderUID, at: at(\.sender_uid))
        message.put32(CP_ARCH_X86_64, at: at(\.arch))
        message.put64(faultAddress, at: at(\.fault_address))
        var flags = CP_CRASH_HOST_DUMP
        if stackBytes.count < stack.bytes.count { flags |= CP_CRASH_STACK_TRUNCATED }
        if registers.fxsave.count == 512 {
            flags |= CP_CRASH_HAS_FPREGS
            message.bytes.replaceSubrange(at(\.fpregs)..<at(\.fpregs) + 512, with: registers.fxsave)
        }
        message.put32(flags, at: at(\.flags))
        message.put64(timeNanoseconds, at: at(\.time_ns))
        message.putText(threadName, at: at(\.thread_name), capacity: 16)
        for (index, value) in registers.gpr.prefix(X86_64Registers.gprCount).enumerated() {
            message.put64(value, at: at(\.regs) + index * 8)
        }
        message.put64(stack.start, at: at(\.stack_start))
        message.put32(UInt32(stackBytes.count), at: at(\.stack_size))
        message.bytes.replaceSubrange(Self.fixedSize..<Self.fixedSize + stackBytes.count, with: stackBytes)
        return message.bytes
    }

    /// A record the host level kept in the spool (CP_CRASH_HOST_DUMP).
    public var isHostDump: Bool { flags & CP_CRASH_HOST_DUMP != 0 }
}

/// Builds a message to send: the header filled in, fields written little-endian at their
/// offsets in the C declaration.
struct MessageEncoder {
    var bytes: [UInt8]

    init(type: UInt32, size: Int) {
        bytes = [UInt8](repeating: 0, count: size)
        put32(CP_MAGIC, at: Layout.offset(\cp_header.magic))
        put32(CP_VERSION, at: Layout.offset(\cp_header.version))
        put32(UInt32(size), at: Layout.offset(\cp_header.size))
        put32(type, at: Layout.offset(\cp_header.type))
    }

    mutating func put32(_ value: UInt32, at offset: Int) {
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * i)) }
    }

    /// A text field for the stub (WireText.field: cut, control characters made spaces; the
    /// zeroed message keeps its NUL).
    mutating func putText(_ text: String, at offset: Int, capacity: Int) {
        let field = WireText.field(text, capacity: capacity)
        bytes.replaceSubrange(offset..<offset + field.count, with: field)
    }

    mutating func put64(_ value: UInt64, at offset: Int) {
        for i in 0..<8 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * i)) }
    }
}

public enum HeartbeatMessage {
    /// "Still working: give me extendMilliseconds more from now" (the stub caps the total).
    public static func encode(extendMilliseconds: UInt32) -> [UInt8] {
        var message = MessageEncoder(type: CP_MSG_HEARTBEAT.rawValue, size: MemoryLayout<cp_heartbeat>.size)
        message.put32(extendMilliseconds, at: Layout.offset(\cp_heartbeat.extend_ms))
        return message.bytes
    }
}

public enum VerdictMessage {
    public static func encode(verdict: UInt32 = CP_VERDICT_CONTINUE, captureNanoseconds: UInt64) -> [UInt8] {
        var message = MessageEncoder(type: CP_MSG_VERDICT.rawValue, size: MemoryLayout<cp_verdict>.size)
        message.put32(verdict, at: Layout.offset(\cp_verdict.verdict))
        message.put64(captureNanoseconds, at: Layout.offset(\cp_verdict.capture_ns))
        return message.bytes
    }
}

extension HelloMessage {
    /// A HELLO as the stub sends it, for a process with no build-id to give (doctor's probe).
    public static func encode(pid: Int32) -> [UInt8] {
        var hello = MessageEncoder(type: CP_MSG_HELLO.rawValue, size: MemoryLayout<cp_hello>.size)
        hello.put32(UInt32(bitPattern: pid), at: Layout.offset(\cp_hello.pid))
        return hello.bytes
    }
}

/// A sidecar's answer to HELLO, decoded.
public struct HelloReply: Equatable, Sendable {
    public var accepted: Bool
    public var spool: String
    public var message: String

    public init(bytes: [UInt8]) throws {
        let header = try WireHeader(bytes: bytes)
        guard header.type == CP_MSG_HELLO_REPLY.rawValue else { throw WireError.unexpectedType(header.type) }
        guard
            [MemoryLayout<cp_hello_reply>.size, Int(CP_HELLO_REPLY_DETAIL_SIZE), Int(CP_HELLO_REPLY_SHORT_SIZE)].contains(
                bytes.count)
        else {
            throw WireError.sizeMismatch(declared: header.size, received: MemoryLayout<cp_hello_reply>.size)
        }
        func text(_ offset: Int, capacity: Int) -> String {
            String(decoding: bytes[offset..<offset + capacity].prefix { $0 != 0 }, as: UTF8.self)
        }
        accepted = WireBytes(bytes: bytes).u32(Layout.offset(\cp_hello_reply.status)) == CP_HELLO_ACCEPTED
        spool = text(Layout.offset(\cp_hello_reply.spool), capacity: 256)
        message = text(Layout.offset(\cp_hello_reply.message), capacity: 128)
    }
}

/// A program's previous run as the stub's crashport_last_run answers it (cp_last_run).
public struct LastRunInfo: Sendable, Equatable {
    public var known = false
    public var crashed = false
    public var crashedDuringLaunch = false
    public var consecutiveLaunchCrashes: UInt32 = 0
    public var disabled = false
    /// A report id (only the id's shape is sent), nil if none.
    public var reportID: String?
    /// The program's reports awaiting consent (crashport_pending_reports).
    public var pendingReports: UInt32 = 0
    /// How it ended, in full (crashport_last_run_detail).
    public var detail = RunDetail()
    /// What became of its report's upload.
    public var send = SendState()

    /// CRASHPORT_LAST_RUN_DETAIL's text: the detail's, then the send state's.
    public var detailEnvironmentText: String { detail.environmentText + "\t" + send.environmentText }

    public init() {}

    /// CRASHPORT_LAST_RUN's text: "known crashed during_launch consecutive disabled ID pending"
    /// ("-": no ID).
    public var environmentText: String {
        func bit(_ flag: Bool) -> String { flag ? "1" : "0" }
        return
            "\(bit(known)) \(bit(crashed)) \(bit(crashedDuringLaunch)) \(consecutiveLaunchCrashes) \(bit(disabled)) \(reportID ?? "-") \(pendingReports)"
    }
}

public enum HelloReplyMessage {
    /// The sidecar's answer to HELLO: whether it serves the process, its spool directory, and
    /// (refused) why, and the program's previous run. Strings longer than their fields are cut;
    /// all stay NUL-terminated.
    public static func encode(
        accepted: Bool, spool: String, message: String, lastRun: LastRunInfo = LastRunInfo(), detail: Bool = true,
        sendState: Bool = true
    )
        -> [UInt8]
    {
        let size =
            !detail
            ? Int(CP_HELLO_REPLY_SHORT_SIZE) : sendState ? MemoryLayout<cp_hello_reply>.size : Int(CP_HELLO_REPLY_DETAIL_SIZE)
        var reply = MessageEncoder(type: CP_MSG_HELLO_REPLY.rawValue, size: size)
        reply.put32(accepted ? CP_HELLO_ACCEPTED : CP_HELLO_REFUSED, at: Layout.offset(\cp_hello_reply.status))
        func put(_ text: String, at offset: Int, capacity: Int) {
            let bytes = Array(text.utf8.prefix(capacity - 1))
            reply.bytes.replaceSubrange(offset..<offset + bytes.count, with: bytes)
        }
        put(spool, at: Layout.offset(\cp_hello_reply.spool), capacity: 256)
        put(message, at: Layout.offset(\cp_hello_reply.message), capacity: 128)
        let run = Layout.offset(\cp_hello_reply.last_run)
        func at(_ path: PartialKeyPath<cp_last_run>) -> Int { run + Layout.offset(path) }
        reply.put32(lastRun.known ? 1 : 0, at: at(\cp_last_run.known))
        reply.put32(lastRun.crashed ? 1 : 0, at: at(\cp_last_run.crashed))
        reply.put32(lastRun.crashedDuringLaunch ? 1 : 0, at: at(\cp_last_run.crashed_during_launch))
        reply.put32(lastRun.consecutiveLaunchCrashes, at: at(\cp_last_run.consecutive_launch_crashes))
        reply.put32(lastRun.disabled ? 1 : 0, at: at(\cp_last_run.disabled))
        reply.put32(lastRun.pendingReports, at: at(\cp_last_run.pending_reports))
        put(lastRun.reportID ?? "", at: at(\cp_last_run.report_id), capacity: 64)
        if detail { lastRun.detail.encode(into: &reply, at: Layout.offset(\cp_hello_reply.run_detail)) }
        if detail, sendState { lastRun.send.encode(into: &reply, at: Layout.offset(\cp_hello_reply.last_send)) }
        return reply.bytes
    }
}

/// Text for a fixed field the stub reads: control characters (tabs and newlines, which are
/// CRASHPORT_LAST_RUN_DETAIL's separators and would break a dialog's line) made spaces, cut to
/// `capacity - 1` bytes at a character boundary (the field keeps its NUL).
enum WireText {
    static func field(_ text: String, capacity: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        for scalar in text.unicodeScalars {
            let encoded = scalar.value < 0x20 || scalar.value == 0x7F ? [UInt8(ascii: " ")] : Array(String(scalar).utf8)
            guard bytes.count + encoded.count <= capacity - 1 else { break }
            bytes += encoded
        }
        return bytes
    }
}

/// The previous run in full (cp_run_detail): how it ended, when, for how long, and its report,
/// as crashport_last_run_detail gives it to the program.
public struct RunDetail: Sendable, Equatable {
    public enum Kind: UInt32, Sendable {
        case unknown = 0, clean, crash, termination, hang, errors

        /// From its name in the run history (RunSummary.kind): unknown for any other.
        public init(summary name: String) {
            self = [Kind.clean, .crash, .termination, .hang, .errors].first { "\($0)" == name } ?? .unknown
        }
    }

    public var kind = Kind.unknown
    public var duringLaunch = false
    public var abnormal = false
    public var memoryPressure = false
    public var oomKilled = false
    public var test = false
    /// It ran its launch protection (crashport_launch).
    public var protected = false
    /// Its asynchronous protect work did not finish within its timeout.
    public var protectTimedOut = false
    public var signal: Int32 = 0
    public var signalName = ""
    /// Its exit status, -1 when it did not exit or it is unknown.
    public var exitStatus: Int32 = -1
    public var startedMilliseconds: UInt64 = 0
    public var durationMilliseconds: UInt64 = 0
    public var errors: UInt32 = 0
    public var hangs: UInt32 = 0
    public var reason = ""
    public var title = ""
    public var reportPath = ""

    public init() {}

    /// Each text's capacity in cp_run_detail, NUL included.
    static let signalNameBytes = 16
    static let reasonBytes = 256
    static let titleBytes = 256
    static let reportPathBytes = 1024

    public var flags: UInt32 {
        var flags: UInt32 = 0
        if duringLaunch { flags |= CP_RUN_DURING_LAUNCH }
        if abnormal { flags |= CP_RUN_ABNORMAL }
        if memoryPressure { flags |= CP_RUN_MEMORY_PRESSURE }
        if oomKilled { flags |= CP_RUN_OOM_KILLED }
        if test { flags |= CP_RUN_TEST }
        if protected { flags |= CP_RUN_PROTECTED }
        if protectTimedOut { flags |= CP_RUN_PROTECT_TIMED_OUT }
        return flags
    }

    /// Writes cp_run_detail at `base` of a zeroed message.
    func encode(into message: inout MessageEncoder, at base: Int) {
        func at(_ path: PartialKeyPath<cp_run_detail>) -> Int { base + Layout.offset(path) }
        message.put32(kind.rawValue, at: at(\cp_run_detail.kind))
        message.put32(flags, at: at(\cp_run_detail.flags))
        message.put32(UInt32(bitPattern: signal), at: at(\cp_run_detail.signo))
        message.put32(UInt32(bitPattern: exitStatus), at: at(\cp_run_detail.exit_status))
        message.put64(startedMilliseconds, at: at(\cp_run_detail.started_ms))
        message.put64(durationMilliseconds, at: at(\cp_run_detail.duration_ms))
        message.put32(errors, at: at(\cp_run_detail.errors))
        message.put32(hangs, at: at(\cp_run_detail.hangs))
        message.putText(signalName, at: at(\cp_run_detail.signal_name), capacity: Self.signalNameBytes)
        message.putText(reason, at: at(\cp_run_detail.reason), capacity: Self.reasonBytes)
        message.putText(title, at: at(\cp_run_detail.title), capacity: Self.titleBytes)
        message.putText(reportPath, at: at(\cp_run_detail.report_path), capacity: Self.reportPathBytes)
    }

    /// CRASHPORT_LAST_RUN_DETAIL's text, for a launcher's child: "kind flags signo exit_status
    /// started_ms duration_ms errors hangs" then, each after a tab, the signal's name, the
    /// reason, the title and the report's path (their tabs and newlines made spaces, each cut to
    /// its field in cp_run_detail).
    public var environmentText: String {
        let numbers =
            "\(kind.rawValue) \(flags) \(signal) \(exitStatus) \(startedMilliseconds) \(durationMilliseconds) \(errors) \(hangs)"
        let texts = [
            (signalName, Self.signalNameBytes), (reason, Self.reasonBytes), (title, Self.titleBytes),
            (reportPath, Self.reportPathBytes),
        ].map { String(decoding: WireText.field($0.0, capacity: $0.1), as: UTF8.self) }
        return ([numbers] + texts).joined(separator: "\t")
    }
}

/// A spool file (crashport_protocol.h, cp_spool_header): a crash the stub wrote to disk
/// because no watcher answered. Every size is checked against the file's length before use.
public struct SpooledRecord: Sendable {
    public var record: CrashRecord
    public var executable: String?
    public var maps: String
    public var mapsTruncated: Bool
    /// /proc/self/cmdline as the stub read it at the crash (NUL-terminated arguments); empty in
    /// a file of the older 32-byte header, which has none.
    public var commandLine: [UInt8]
    public var commandLineTruncated: Bool
    /// The record had reached a watcher that never answered (it may have been reported).
    public var wasSent: Bool

    public static let headerSize = MemoryLayout<cp_spool_header>.size
    /// The header as it was before the command line (it ends at `flags`): still read, so that
    /// crashes spooled by an older stub are reported after an upgrade.
    static let headerSizeWithoutCommandLine = Layout.offset(\cp_spool_header.cmdline_size)
    public static let maximumSize =
        headerSize + CrashRecord.maximumSize + Int(CP_SPOOL_EXE_MAX) + Int(CP_SPOOL_MAPS_MAX) + Int(CP_SPOOL_CMDLINE_MAX)

    public init(bytes: [UInt8]) throws {
        guard bytes.count >= Self.headerSizeWithoutCommandLine else { throw WireError.tooShort(bytes.count) }
        guard bytes.count <= Self.maximumSize else {
            throw WireError.badField("spool file of \(bytes.count) bytes exceeds \(Self.maximumSize)")
        }
        let wire = WireBytes(bytes: bytes)
        let declared = Int(wire.u32(Layout.offset(\cp_header.size)))
        let headerSize = declared == Self.headerSizeWithoutCommandLine ? declared : Self.headerSize
        guard bytes.count >= headerSize else { throw WireError.tooShort(bytes.count) }
        let header = try WireHeader(bytes: Array(bytes.prefix(headerSize)))
        guard header.type == CP_MSG_SPOOLED.rawValue else { throw WireError.unexpectedType(header.type) }
        let recordSize = Int(wire.u32(Layout.offset(\cp_spool_header.record_size)))
        let exeSize = Int(wire.u32(Layout.offset(\cp_spool_header.exe_size)))
        let mapsSize = Int(wire.u32(Layout.offset(\cp_spool_header.maps_size)))
        let flags = wire.u32(Layout.offset(\cp_spool_header.flags))
        let commandLineSize = headerSize == Self.headerSize ? Int(wire.u32(Layout.offset(\cp_spool_header.cmdline_size))) : 0
        guard exeSize <= Int(CP_SPOOL_EXE_MAX), mapsSize <= Int(CP_SPOOL_MAPS_MAX), recordSize <= CrashRecord.maximumSize,
            commandLineSize <= Int(CP_SPOOL_CMDLINE_MAX),
            headerSize + recordSize + exeSize + mapsSize + commandLineSize == bytes.count
        else {
            throw WireError.badField(
                "spool sizes (record \(recordSize), exe \(exeSize), maps \(mapsSize), cmdline \(commandLineSize)) disagree with the file's \(bytes.count) bytes"
            )
        }
        var cursor = headerSize
        record = try CrashRecord(bytes: Array(bytes[cursor..<cursor + recordSize]))
        cursor += recordSize
        executable = exeSize == 0 ? nil : String(decoding: bytes[cursor..<cursor + exeSize], as: UTF8.self)
        cursor += exeSize
        maps = String(decoding: bytes[cursor..<cursor + mapsSize], as: UTF8.self)
        cursor += mapsSize
        commandLine = Array(bytes[cursor..<cursor + commandLineSize])
        mapsTruncated = flags & CP_SPOOL_MAPS_TRUNCATED != 0
        commandLineTruncated = flags & CP_SPOOL_CMDLINE_TRUNCATED != 0
        wasSent = flags & CP_SPOOL_SENT != 0
    }
}

extension SpooledRecord {
    /// A spool file's bytes (the sidecar keeps a crash it cannot write a report for this way).
    public static func encode(record: [UInt8], executable: [UInt8], maps: [UInt8], commandLine: [UInt8] = []) -> [UInt8] {
        var header = MessageEncoder(type: CP_MSG_SPOOLED.rawValue, size: headerSize)
        header.put32(UInt32(record.count), at: Layout.offset(\cp_spool_header.record_size))
        header.put32(UInt32(executable.count), at: Layout.offset(\cp_spool_header.exe_size))
        header.put32(UInt32(maps.count), at: Layout.offset(\cp_spool_header.maps_size))
        header.put32(UInt32(commandLine.count), at: Layout.offset(\cp_spool_header.cmdline_size))
        return header.bytes + record + executable + maps + commandLine
    }
}

/// crashport_set_consent, crashport_send_pending or crashport_discard_pending (cp_consent).
public enum ConsentMessage: Equatable, Sendable {
    /// The program's consent: 0 ask, 1 always, 2 never (CP_CONSENT_*).
    case set(UInt32)
    case sendPending
    case discardPending

    public init(bytes: [UInt8]) throws {
        let header = try WireHeader(bytes: bytes)
        guard header.type == CP_MSG_CONSENT.rawValue else { throw WireError.unexpectedType(header.type) }
        guard bytes.count == MemoryLayout<cp_consent>.size else {
            throw WireError.badField("a consent message of \(bytes.count) bytes (expected \(MemoryLayout<cp_consent>.size))")
        }
        let wire = WireBytes(bytes: bytes)
        let action = wire.u32(Layout.offset(\cp_consent.action))
        let value = wire.u32(Layout.offset(\cp_consent.value))
        switch action {
        case CP_CONSENT_SET where value <= CP_CONSENT_NEVER: self = .set(value)
        case CP_CONSENT_SEND where value == 0: self = .sendPending
        case CP_CONSENT_DISCARD where value == 0: self = .discardPending
        default: throw WireError.badField("a consent message with action \(action) and value \(value)")
        }
    }

    public static func encode(_ message: ConsentMessage) -> [UInt8] {
        var bytes = MessageEncoder(type: CP_MSG_CONSENT.rawValue, size: MemoryLayout<cp_consent>.size)
        let (action, value): (UInt32, UInt32) =
            switch message {
            case .set(let choice): (CP_CONSENT_SET, choice)
            case .sendPending: (CP_CONSENT_SEND, 0)
            case .discardPending: (CP_CONSENT_DISCARD, 0)
            }
        bytes.put32(action, at: Layout.offset(\cp_consent.action))
        bytes.put32(value, at: Layout.offset(\cp_consent.value))
        return bytes.bytes
    }
}

/// crashport_launch's word on its run (cp_launch): whether the protect work ran, the count
/// and threshold it was decided on, and (sent again) whether an asynchronous protect timed out.
public struct LaunchMessage: Equatable, Sendable {
    public var protected: Bool
    public var consecutiveLaunchCrashes: UInt32
    public var threshold: UInt32
    /// The protect work did not finish within its timeout (crashport_launch_with).
    public var protectTimedOut: Bool

    public init(protected: Bool, consecutiveLaunchCrashes: UInt32, threshold: UInt32, protectTimedOut: Bool = false) {
        self.protected = protected
        self.consecutiveLaunchCrashes = consecutiveLaunchCrashes
        self.threshold = threshold
        self.protectTimedOut = protectTimedOut
    }

    public init(bytes: [UInt8]) throws {
        let header = try WireHeader(bytes: bytes)
        guard header.type == CP_MSG_LAUNCH.rawValue else { throw WireError.unexpectedType(header.type) }
        guard bytes.count == MemoryLayout<cp_launch>.size else {
            throw WireError.badField("a launch message of \(bytes.count) bytes (expected \(MemoryLayout<cp_launch>.size))")
        }
        let wire = WireBytes(bytes: bytes)
        let protected = wire.u32(Layout.offset(\cp_launch.protected_run))
        let outcome = wire.u32(Layout.offset(\cp_launch.outcome))
        guard protected <= 1, outcome <= CP_LAUNCH_PROTECT_TIMED_OUT else {
            throw WireError.badField("a launch message with protected_run = \(protected), outcome = \(outcome)")
        }
        self.protected = protected == 1
        consecutiveLaunchCrashes = wire.u32(Layout.offset(\cp_launch.consecutive_launch_crashes))
        threshold = wire.u32(Layout.offset(\cp_launch.threshold))
        protectTimedOut = outcome == CP_LAUNCH_PROTECT_TIMED_OUT
    }

    public var bytes: [UInt8] {
        var message = MessageEncoder(type: CP_MSG_LAUNCH.rawValue, size: MemoryLayout<cp_launch>.size)
        message.put32(protected ? 1 : 0, at: Layout.offset(\cp_launch.protected_run))
        message.put32(consecutiveLaunchCrashes, at: Layout.offset(\cp_launch.consecutive_launch_crashes))
        message.put32(threshold, at: Layout.offset(\cp_launch.threshold))
        message.put32(
            protectTimedOut ? CP_LAUNCH_PROTECT_TIMED_OUT : CP_LAUNCH_PROTECT_STARTED, at: Layout.offset(\cp_launch.outcome))
        return message.bytes
    }
}

/// What crashport_protocol.h fixes beyond the messages' layout.
public enum WireProtocol {
    /// The signals the stub handles unless its options name others (CP_DEFAULT_SIGNALS), in
    /// number order: SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS.
    public static let defaultSignals: [Int32] = (1..<64).filter { CP_DEFAULT_SIGNALS & (1 << UInt64($0)) != 0 }
        .map(Int32.init)
}
