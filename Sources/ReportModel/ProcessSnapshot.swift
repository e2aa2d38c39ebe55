// ProcessSnapshot: everything captured from a crashed process, as plain values.
//
// The capture side (Watcher) fills it from ptrace, /proc and the crash record; the writers
// (minidump, event) read only this, so they are tested on synthetic snapshots and never touch a
// live process. Register sets use the kernel's ptrace layouts so that a record from the stub and
// a PTRACE_GETREGSET decode the same way. Memory regions are BoundedBytes' MemoryRegion and
// modules ObjectFile's LoadedModule.

import BoundedBytes
import ObjectFile

#if canImport(Glibc)
import Glibc
#endif

/// The general and floating-point registers of one x86_64 thread, in ptrace layout:
/// `gpr` is `struct user_regs_struct` (27 × u64), `fxsave` is `struct user_fpregs_struct`
/// (the 512-byte FXSAVE image), empty when unknown.
public struct X86_64Registers: Sendable, Equatable {
    /// The count and positions of registers in `struct user_regs_struct` (<sys/user.h>).
    public static let gprCount = MemoryLayout<user_regs_struct>.size / MemoryLayout<UInt64>.size
    public static let ripIndex = MemoryLayout<user_regs_struct>.offset(of: \.rip)! / MemoryLayout<UInt64>.size
    public static let rspIndex = MemoryLayout<user_regs_struct>.offset(of: \.rsp)! / MemoryLayout<UInt64>.size
    public static let rbpIndex = MemoryLayout<user_regs_struct>.offset(of: \.rbp)! / MemoryLayout<UInt64>.size
    public static let names = [
        "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx",
        "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds",
        "es", "fs", "gs",
    ]

    public var gpr: [UInt64]
    public var fxsave: [UInt8]

    public init(gpr: [UInt64], fxsave: [UInt8] = []) {
        precondition(gpr.count == Self.gprCount, "user_regs_struct has \(Self.gprCount) registers")
        self.gpr = gpr
        self.fxsave = fxsave
    }

    public subscript(name: String) -> UInt64 {
        get { gpr[Self.names.firstIndex(of: name)!] }
        set { gpr[Self.names.firstIndex(of: name)!] = newValue }
    }

    public var rip: UInt64 { gpr[Self.ripIndex] }
    public var rsp: UInt64 { gpr[Self.rspIndex] }
    public var rbp: UInt64 { gpr[Self.rbpIndex] }
}

public struct ThreadSnapshot: Sendable, Equatable {
    public var tid: ThreadID
    public var name: String
    public var registers: X86_64Registers
    /// The stack from the stack pointer (less the red zone) towards the end of its mapping.
    public var stack: MemoryRegion?

    public init(tid: ThreadID, name: String, registers: X86_64Registers, stack: MemoryRegion?) {
        self.tid = tid
        self.name = name
        self.registers = registers
        self.stack = stack
    }
}

/// The signal that ended the process, as the kernel described it in `siginfo_t`.
public struct ExceptionInfo: Sendable, Equatable {
    public var signal: Int32
    public var code: Int32
    public var faultAddress: UInt64
    public var senderPID: ProcessID?

    public init(signal: Int32, code: Int32, faultAddress: UInt64, senderPID: ProcessID? = nil) {
        self.signal = signal
        self.code = code
        self.faultAddress = faultAddress
        self.senderPID = senderPID
    }
}

/// The machine, for the minidump's SystemInfo stream.
public struct SystemInfo: Sendable, Equatable {
    public var cpuCount: Int = 1
    public var cpuFamily: UInt16 = 0
    public var cpuModel: UInt16 = 0
    public var cpuStepping: UInt16 = 0
    /// "GenuineIntel", "AuthenticAMD", ...
    public var cpuVendor: String = ""
    /// uname fields.
    public var sysname: String = "Linux"
    public var release: String = ""
    public var version: String = ""
    public var machine: String = "x86_64"

    public init() {}
}

/// Raw Linux files kept verbatim in the minidump's Linux streams; nil when unreadable.
public struct LinuxFiles: Sendable, Equatable {
    public var cpuInfo: [UInt8]?
    public var procStatus: [UInt8]?
    public var lsbRelease: [UInt8]?
    public var cmdLine: [UInt8]?
    public var environ: [UInt8]?
    public var auxv: [UInt8]?
    public var maps: [UInt8]?

    public init() {}
}

public struct ProcessSnapshot: Sendable, Equatable {
    public var pid: ProcessID
    public var crashedThreadID: ThreadID
    public var exception: ExceptionInfo
    /// Every thread; the crashed one carries the registers of the fault, not of its handler.
    public var threads: [ThreadSnapshot]
    /// Mapped modules, the main executable first.
    public var modules: [LoadedModule]
    /// Memory beyond the stacks: around the faulting instruction, and the stacks that signal
    /// handlers interrupted (a handler on an alternate stack), so an unwind crosses their signal
    /// frames offline as it did live.
    public var extraMemory: [MemoryRegion]
    public var system: SystemInfo
    public var linuxFiles: LinuxFiles
    /// Unix seconds.
    public var captureTime: UInt32
    public var processStartTime: UInt32?
    /// What the program said about itself (crashport_annotate), in the order of its slots.
    public var annotations: [Annotation] = []

    public init(
        pid: ProcessID, crashedThreadID: ThreadID, exception: ExceptionInfo, threads: [ThreadSnapshot],
        modules: [LoadedModule], extraMemory: [MemoryRegion] = [], system: SystemInfo = SystemInfo(),
        linuxFiles: LinuxFiles = LinuxFiles(), captureTime: UInt32, processStartTime: UInt32? = nil
    ) {
        self.pid = pid
        self.crashedThreadID = crashedThreadID
        self.exception = exception
        self.threads = threads
        self.modules = modules
        self.extraMemory = extraMemory
        self.system = system
        self.linuxFiles = linuxFiles
        self.captureTime = captureTime
        self.processStartTime = processStartTime
    }
}

/// One key/value pair the program set with crashport_annotate. `truncated`: the program's value
/// (or key) was longer than the stub keeps, and was cut.
public struct Annotation: Sendable, Equatable, Codable {
    public var key: String
    public var value: String
    public var truncated: Bool

    public init(key: String, value: String, truncated: Bool = false) {
        self.key = key
        self.value = value
        self.truncated = truncated
    }
}

/// A text the crashed thread's stack pointed at (a (pointer, length) pair at `slot`), read while
/// the process was held: where a Rust panic's message is found (StackStrings, RustPanic).
public struct StackString: Sendable, Equatable {
    public var slot: UInt64
    public var text: String
    /// The text was longer than what was read.
    public var truncated: Bool

    public init(slot: UInt64, text: String, truncated: Bool) {
        self.slot = slot
        self.text = text
        self.truncated = truncated
    }
}

/// A crash as captured: the snapshot, with what the capture learned about the process and
/// about itself (its gaps, its timings). Built by LiveProcess, read by Reports and the Watcher.
public struct Capture: Sendable {
    public var snapshot: ProcessSnapshot
    public var executable: String?
    public var arguments: [String]
    public var notes: [String]
    public var record: CrashRecord
    /// Nanoseconds from the start of capture until the process was released.
    public var suspendedNanoseconds: UInt64
    /// Nanoseconds from the first PTRACE_SEIZE to the end of the last detach: the window in
    /// which a stopped watcher would keep the program stopped too (0 without ptrace).
    public var heldNanoseconds: UInt64 = 0
    /// What the program told crashport (breadcrumbs, files to attach; its annotations are in
    /// the snapshot too), nil when it told nothing or the area could not be read.
    public var app: AppArea?
    /// Texts near the crashed thread's stack pointer, for a SIGABRT (StackStrings).
    public var stackStrings: [StackString] = []
    /// What the language runtimes in the process said: Python frames, JIT names, crash logs.
    public var runtime = RuntimeState()
    /// The handled error's own properties and files (crashport_report_error_with): for an ERROR
    /// record only, and only when the thread that wrote them is the record's.
    public var errorDetails: HandledErrorDetails? {
        guard record.isError, let details = app?.handledErrorDetails, details.thread == record.tid else { return nil }
        return details
    }
    /// The handled error's own stack (crashport_report_error_stack): for an ERROR record only,
    /// and only when the thread that wrote it is the record's.
    public var errorStack: HandledErrorStack? {
        guard record.isError, let stack = app?.handledErrorStack, stack.thread == record.tid else { return nil }
        return stack
    }
    /// What the kernel said about its memory (its cgroup's limit, peak, events, pressure).
    public var memory: MemoryRecord?
    /// A death seen at its exit: when its stacks were taken (at it, or before it).
    public var stackTaken: StackTaken?
    /// Its cgroup, and the unit, container and pod that is (ContainerIdentity).
    public var container: ContainerIdentity?

    /// About what it holds in memory: its stacks and the other memory it copied, and the rest.
    public var heldBytes: Int {
        snapshot.threads.reduce(64 << 10) { $0 + ($1.stack?.bytes.count ?? 0) + 1024 }
            + snapshot.extraMemory.reduce(0) { $0 + $1.bytes.count }
            + (app?.memoryAttachments ?? []).reduce(0) { $0 + $1.contents.count }
    }

    public init(
        snapshot: ProcessSnapshot, executable: String?, arguments: [String], notes: [String], record: CrashRecord,
        suspendedNanoseconds: UInt64, heldNanoseconds: UInt64
    ) {
        self.snapshot = snapshot
        self.executable = executable
        self.arguments = arguments
        self.notes = notes
        self.record = record
        self.suspendedNanoseconds = suspendedNanoseconds
        self.heldNanoseconds = heldNanoseconds
    }
}
