// ProcessSnapshot: everything captured from a crashed process, as plain values.
//
// The capture side (Watcher) fills it from ptrace, /proc and the crash record; the writers
// (minidump, event) read only this, so they are tested on synthetic snapshots and never touch a
// live process. Register sets use the kernel's ptrace layouts so that a record from the stub and
// a PTRACE_GETREGSET decode the same way.

/// A block of memory copied out of the target process.
public struct MemoryRegion: Sendable, Equatable {
    /// Address of `bytes[0]` in the target process.
    public var start: UInt64
    public var bytes: [UInt8]

    public init(start: UInt64, bytes: [UInt8]) {
        self.start = start
        self.bytes = bytes
    }

    /// One past the last address covered (saturating, so a hostile start cannot wrap).
    public var end: UInt64 {
        let (sum, overflow) = start.addingReportingOverflow(UInt64(bytes.count))
        return overflow ? UInt64.max : sum
    }

    public func contains(_ address: UInt64) -> Bool { address >= start && address < end }
}

/// The general and floating-point registers of one x86_64 thread, in ptrace layout:
/// `gpr` is `struct user_regs_struct` (27 × u64), `fxsave` is `struct user_fpregs_struct`
/// (the 512-byte FXSAVE image), empty when unknown.
public struct X86_64Registers: Sendable, Equatable {
    public static let gprCount = 27
    public static let names = [
        "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx",
        "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds",
        "es", "fs", "gs",
    ]

    public var gpr: [UInt64]
    public var fxsave: [UInt8]

    public init(gpr: [UInt64], fxsave: [UInt8] = []) {
        precondition(gpr.count == Self.gprCount, "user_regs_struct has 27 registers")
        self.gpr = gpr
        self.fxsave = fxsave
    }

    public subscript(name: String) -> UInt64 {
        get { gpr[Self.names.firstIndex(of: name)!] }
        set { gpr[Self.names.firstIndex(of: name)!] = newValue }
    }

    public var rip: UInt64 { gpr[16] }
    public var rsp: UInt64 { gpr[19] }
    public var rbp: UInt64 { gpr[4] }
}

public struct ThreadSnapshot: Sendable, Equatable {
    public var tid: Int32
    public var name: String
    public var registers: X86_64Registers
    /// The stack from the stack pointer (less the red zone) towards the end of its mapping.
    public var stack: MemoryRegion?

    public init(tid: Int32, name: String, registers: X86_64Registers, stack: MemoryRegion?) {
        self.tid = tid
        self.name = name
        self.registers = registers
        self.stack = stack
    }
}

/// A mapped ELF image (or the vDSO).
public struct ModuleInfo: Sendable, Equatable {
    /// Full path as mapped; "[vdso]" for the vDSO.
    public var path: String
    /// Start of the mapping at file offset 0 (the ELF header), not of the executable mapping.
    public var base: UInt64
    /// End of the last contiguous mapping of the same file, minus `base`.
    public var size: UInt64
    /// Raw bytes of the NT_GNU_BUILD_ID note; empty when the module has none.
    public var buildID: [UInt8]

    public init(path: String, base: UInt64, size: UInt64, buildID: [UInt8]) {
        self.path = path
        self.base = base
        self.size = size
        self.buildID = buildID
    }

    public var end: UInt64 { base &+ size }
    public func contains(_ address: UInt64) -> Bool { address >= base && address < end }
    public var name: String { path.split(separator: "/").last.map(String.init) ?? path }
}

/// The signal that ended the process, as the kernel described it in `siginfo_t`.
public struct ExceptionInfo: Sendable, Equatable {
    public var signal: Int32
    public var code: Int32
    public var faultAddress: UInt64
    public var senderPID: Int32?

    public init(signal: Int32, code: Int32, faultAddress: UInt64, senderPID: Int32? = nil) {
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
    public var pid: Int32
    public var crashedThreadID: Int32
    public var exception: ExceptionInfo
    /// Every thread; the crashed one carries the registers of the fault, not of its handler.
    public var threads: [ThreadSnapshot]
    /// Mapped modules, the main executable first.
    public var modules: [ModuleInfo]
    /// Memory beyond the stacks (for example around the faulting instruction).
    public var extraMemory: [MemoryRegion]
    public var system: SystemInfo
    public var linuxFiles: LinuxFiles
    /// Unix seconds.
    public var captureTime: UInt32
    public var processStartTime: UInt32?

    public init(
        pid: Int32, crashedThreadID: Int32, exception: ExceptionInfo, threads: [ThreadSnapshot],
        modules: [ModuleInfo], extraMemory: [MemoryRegion] = [], system: SystemInfo = SystemInfo(),
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
