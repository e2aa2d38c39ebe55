// MinidumpFormat: the constants of the Linux minidump format, named as in the spec
// (shared/reference/minidump.md, which follows Breakpad's minidump_format.h and rust-minidump's
// format.rs), so that every number here can be grepped against it.
//
// The writer and the reader serialise field by field at the offsets given here; nothing relies on
// Swift's struct layout (`MemoryLayout` would give 112 instead of 108 for a module).

/// Namespace for the on-disk layout. All integers are little-endian; sizes are in bytes.
public enum MinidumpFormat {
    /// MINIDUMP_HEADER (spec §1.1), at file offset 0.
    public enum MINIDUMP_HEADER {
        public static let size = 32
        /// "MDMP" on disk.
        public static let signature: UInt32 = 0x504D_444D
        /// MINIDUMP_VERSION; readers compare only the low 16 bits.
        public static let version: UInt32 = 0x0000_A793
        public static let versionMask: UInt32 = 0x0000_FFFF
        public static let offsetOfSignature = 0
        public static let offsetOfVersion = 4
        public static let offsetOfStreamCount = 8
        public static let offsetOfStreamDirectoryRVA = 12
        public static let offsetOfChecksum = 16
        public static let offsetOfTimeDateStamp = 20
        public static let offsetOfFlags = 24
    }

    /// MINIDUMP_DIRECTORY (spec §1.2): u32 stream_type, MINIDUMP_LOCATION_DESCRIPTOR.
    public enum MINIDUMP_DIRECTORY {
        public static let size = 12
    }

    /// MINIDUMP_LOCATION_DESCRIPTOR (spec §1.3): u32 data_size, then u32 rva.
    public enum MINIDUMP_LOCATION_DESCRIPTOR {
        public static let size = 8
    }

    /// MINIDUMP_MEMORY_DESCRIPTOR (spec §1.3): u64 start_of_memory_range, LOCATION_DESCRIPTOR.
    public enum MINIDUMP_MEMORY_DESCRIPTOR {
        public static let size = 16
    }

    /// MINIDUMP_STRING (spec §1.5): u32 byte length (even, excluding the terminator), UTF-16LE
    /// code units, u16 0.
    public enum MINIDUMP_STRING {
        public static let headerSize = 4
    }

    /// Stream type numbers (spec §2.1).
    public enum MINIDUMP_STREAM_TYPE {
        public static let UnusedStream: UInt32 = 0
        public static let ThreadList: UInt32 = 3
        public static let ModuleList: UInt32 = 4
        public static let MemoryList: UInt32 = 5
        public static let Exception: UInt32 = 6
        public static let SystemInfo: UInt32 = 7
        public static let ThreadExList: UInt32 = 8
        public static let Memory64List: UInt32 = 9
        public static let MiscInfo: UInt32 = 15
        public static let MemoryInfoList: UInt32 = 16
        public static let ThreadNames: UInt32 = 24
        public static let BreakpadInfo: UInt32 = 0x4767_0001
        public static let AssertionInfo: UInt32 = 0x4767_0002
        public static let LinuxCpuInfo: UInt32 = 0x4767_0003
        public static let LinuxProcStatus: UInt32 = 0x4767_0004
        public static let LinuxLsbRelease: UInt32 = 0x4767_0005
        public static let LinuxCmdLine: UInt32 = 0x4767_0006
        public static let LinuxEnviron: UInt32 = 0x4767_0007
        public static let LinuxAuxv: UInt32 = 0x4767_0008
        public static let LinuxMaps: UInt32 = 0x4767_0009
        public static let LinuxDsoDebug: UInt32 = 0x4767_000A
        public static let CrashpadInfo: UInt32 = 0x4350_0001
        public static let MozLinuxLimits: UInt32 = 0x4D7A_0003
        public static let MozSoftErrors: UInt32 = 0x4D7A_0004

        /// The spec's name for a stream type, or its hex value.
        public static func name(_ type: UInt32) -> String {
            switch type {
            case UnusedStream: return "UnusedStream"
            case ThreadList: return "ThreadList"
            case ModuleList: return "ModuleList"
            case MemoryList: return "MemoryList"
            case Exception: return "Exception"
            case SystemInfo: return "SystemInfo"
            case ThreadExList: return "ThreadExList"
            case Memory64List: return "Memory64List"
            case MiscInfo: return "MiscInfo"
            case MemoryInfoList: return "MemoryInfoList"
            case ThreadNames: return "ThreadNames"
            case BreakpadInfo: return "BreakpadInfo"
            case AssertionInfo: return "AssertionInfo"
            case LinuxCpuInfo: return "LinuxCpuInfo"
            case LinuxProcStatus: return "LinuxProcStatus"
            case LinuxLsbRelease: return "LinuxLsbRelease"
            case LinuxCmdLine: return "LinuxCmdLine"
            case LinuxEnviron: return "LinuxEnviron"
            case LinuxAuxv: return "LinuxAuxv"
            case LinuxMaps: return "LinuxMaps"
            case LinuxDsoDebug: return "LinuxDsoDebug"
            case CrashpadInfo: return "CrashpadInfo"
            case MozLinuxLimits: return "MozLinuxLimits"
            case MozSoftErrors: return "MozSoftErrors"
            default: return "0x" + String(type, radix: 16)
            }
        }
    }

    /// MINIDUMP_THREAD (spec §2.2); ThreadList = u32 count + entries.
    public enum MINIDUMP_THREAD {
        public static let size = 48
        public static let offsetOfThreadID = 0
        public static let offsetOfTeb = 16
        public static let offsetOfStack = 24
        public static let offsetOfThreadContext = 40
    }

    /// MINIDUMP_MODULE (spec §2.3); ModuleList = u32 count + entries.
    public enum MINIDUMP_MODULE {
        public static let size = 108
        public static let offsetOfBaseOfImage = 0
        public static let offsetOfSizeOfImage = 8
        public static let offsetOfModuleNameRVA = 20
        public static let offsetOfVersionInfo = 24
        public static let offsetOfCvRecord = 76
        public static let offsetOfMiscRecord = 84
    }

    /// VS_FIXEDFILEINFO, embedded in MINIDUMP_MODULE; written as zeros.
    public enum VS_FIXEDFILEINFO {
        public static let size = 52
    }

    /// CV_INFO_ELF (spec §2.3): u32 'BpEL' signature, then the raw build id.
    public enum CV_INFO_ELF {
        /// 'BpEL' as a u32; "LEpB" on disk.
        public static let signature: UInt32 = 0x4270_454C
        public static let headerSize = 4
    }

    /// CV_INFO_PDB70 ('RSDS'): u32 signature, 16-byte GUID, u32 age, path. Read only.
    public enum CV_INFO_PDB70 {
        public static let signature: UInt32 = 0x5344_5352
        public static let minimumSize = 24
    }

    /// MINIDUMP_EXCEPTION_STREAM (spec §2.4).
    public enum MINIDUMP_EXCEPTION_STREAM {
        public static let size = 168
        public static let offsetOfThreadID = 0
        public static let offsetOfExceptionCode = 8
        public static let offsetOfExceptionFlags = 12
        public static let offsetOfExceptionAddress = 24
        public static let offsetOfThreadContext = 160
        /// exception_code for a dump taken without a crash.
        public static let DUMP_REQUESTED: UInt32 = 0xFFFF_FFFF
    }

    /// MINIDUMP_SYSTEM_INFO (spec §2.6).
    public enum MINIDUMP_SYSTEM_INFO {
        public static let size = 56
        public static let PROCESSOR_ARCHITECTURE_AMD64: UInt16 = 9
        public static let PROCESSOR_ARCHITECTURE_ARM64: UInt16 = 12
        public static let PROCESSOR_ARCHITECTURE_ARM64_OLD: UInt16 = 0x8003
        public static let PLATFORM_LINUX: UInt32 = 0x8201
        public static let offsetOfCsdVersionRVA = 24
        public static let offsetOfCpu = 32
        public static let vendorIDSize = 12
    }

    /// MINIDUMP_MISC_INFO version 1 (spec §2.7).
    public enum MINIDUMP_MISC_INFO {
        public static let size = 24
        public static let MINIDUMP_MISC1_PROCESS_ID: UInt32 = 0x1
        public static let MINIDUMP_MISC1_PROCESS_TIMES: UInt32 = 0x2
    }

    /// ThreadNames entry (spec §2.8): u32 thread_id, u64 RVA64 of a MINIDUMP_STRING, packed.
    public enum MINIDUMP_THREAD_NAME {
        public static let size = 12
    }

    /// MINIDUMP_CRASHPAD_INFO (spec §2.10), the CrashpadInfo stream: u32 version, GUID report_id,
    /// GUID client_id, LOCATION simple_annotations (a MINIDUMP_SIMPLE_STRING_DICTIONARY), LOCATION
    /// module_list. Breakpad's newer definition appends fields; readers take the first 52 bytes.
    public enum MINIDUMP_CRASHPAD_INFO {
        public static let size = 52
        public static let version: UInt32 = 1
        public static let offsetOfVersion = 0
        public static let offsetOfReportID = 4
        public static let offsetOfClientID = 20
        public static let offsetOfSimpleAnnotations = 36
        public static let offsetOfModuleList = 44
        /// A GUID: u32 data1, u16 data2, u16 data3, u8[8] data4.
        public static let guidSize = 16
    }

    /// MINIDUMP_SIMPLE_STRING_DICTIONARY: u32 count, then MINIDUMP_SIMPLE_STRING_DICTIONARY_ENTRY
    /// {u32 key RVA, u32 value RVA}[count], each RVA pointing at a MINIDUMP_UTF8_STRING.
    public enum MINIDUMP_SIMPLE_STRING_DICTIONARY_ENTRY {
        public static let size = 8
    }

    /// MINIDUMP_UTF8_STRING (spec §1.5, Crashpad's MinidumpUTF8String): u32 length in bytes
    /// (excluding the terminator), the UTF-8 bytes, then a 0 byte that rust-minidump requires.
    public enum MINIDUMP_UTF8_STRING {
        public static let headerSize = 4
    }

    /// CONTEXT_AMD64 / MDRawContextAMD64 (spec §3.1).
    public enum CONTEXT_AMD64 {
        public static let size = 1232
        /// The CPU bit.
        public static let CONTEXT_AMD64: UInt32 = 0x0010_0000
        public static let CONTROL: UInt32 = CONTEXT_AMD64 | 0x01
        public static let INTEGER: UInt32 = CONTEXT_AMD64 | 0x02
        public static let SEGMENTS: UInt32 = CONTEXT_AMD64 | 0x04
        public static let FLOATING_POINT: UInt32 = CONTEXT_AMD64 | 0x08
        public static let DEBUG_REGISTERS: UInt32 = CONTEXT_AMD64 | 0x10
        public static let XSTATE: UInt32 = CONTEXT_AMD64 | 0x40
        /// CONTROL | INTEGER | FLOATING_POINT = 0x0010000B.
        public static let FULL: UInt32 = CONTROL | INTEGER | FLOATING_POINT
        /// FULL | SEGMENTS | DEBUG_REGISTERS = 0x0010001F.
        public static let ALL: UInt32 = FULL | SEGMENTS | DEBUG_REGISTERS
        /// LLDB's fs_base/gs_base tail marker; never written (rust-minidump rejects it).
        public static let LLDB_EXTENSION_BIT: UInt32 = 0x8000_0000

        public static let offsetOfContextFlags = 0x30
        public static let offsetOfMxCsr = 0x34
        public static let offsetOfFltSave = 0x100
        /// XMM_SAVE_AREA32 = the 512-byte FXSAVE image (`struct user_fpregs_struct`).
        public static let fltSaveSize = 512
        /// Offset of mx_csr inside XMM_SAVE_AREA32.
        public static let offsetOfMxCsrInFltSave = 24
    }

    /// Where a `user_regs_struct` field lives in CONTEXT_AMD64 (spec §3.2). orig_rax, fs_base and
    /// gs_base have no slot (the writer puts fs_base in the thread's teb, as Crashpad does).
    struct AMD64ContextSlot: Sendable {
        /// Index into `X86_64Registers.gpr`.
        let gprIndex: Int
        let offset: Int
        /// 2, 4 or 8 bytes; the register is truncated to this width.
        let width: Int
    }

    static let amd64ContextSlots: [AMD64ContextSlot] = [
        ("cs", 0x38, 2), ("ds", 0x3A, 2), ("es", 0x3C, 2), ("fs", 0x3E, 2), ("gs", 0x40, 2),
        ("ss", 0x42, 2), ("eflags", 0x44, 4),
        ("rax", 0x78, 8), ("rcx", 0x80, 8), ("rdx", 0x88, 8), ("rbx", 0x90, 8), ("rsp", 0x98, 8),
        ("rbp", 0xA0, 8), ("rsi", 0xA8, 8), ("rdi", 0xB0, 8),
        ("r8", 0xB8, 8), ("r9", 0xC0, 8), ("r10", 0xC8, 8), ("r11", 0xD0, 8),
        ("r12", 0xD8, 8), ("r13", 0xE0, 8), ("r14", 0xE8, 8), ("r15", 0xF0, 8),
        ("rip", 0xF8, 8),
    ].map { name, offset, width in
        AMD64ContextSlot(gprIndex: X86_64Registers.names.firstIndex(of: name)!, offset: offset, width: width)
    }

    /// Index of fs_base in `X86_64Registers.gpr`, stored in MINIDUMP_THREAD.teb.
    static let fsBaseIndex = X86_64Registers.names.firstIndex(of: "fs_base")!

    /// The vDSO's module name in a minidump (a Breakpad convention; spec §2.3).
    public static let vdsoModuleName = "linux-gate.so"
    /// The vDSO's path in `/proc/<pid>/maps` and in `LoadedModule`.
    public static let vdsoMappingName = "[vdso]"
}

/// The Breakpad debug identifier of an ELF build id (spec §2.3): the first 16 bytes (zero-padded)
/// read as a GUID with little-endian fields (bytes 0–3, 4–5 and 6–7 reversed), as 32 uppercase hex
/// digits, followed by the age "0". For 83dd4c04 99a7 344a ea26… it gives 044CDD83A7994A34EA26….0.
public func breakpadDebugID(buildID: [UInt8]) -> String {
    var guid = Array(buildID.prefix(16))
    guid += [UInt8](repeating: 0, count: 16 - guid.count)
    guid[0..<4].reverse()
    guid[4..<6].reverse()
    guid[6..<8].reverse()
    let digits: [Character] = Array("0123456789ABCDEF")
    var text = ""
    text.reserveCapacity(33)
    for byte in guid {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0xF)])
    }
    return text + "0"
}

/// Why a minidump could not be written or read.
public enum MinidumpError: Error, Equatable, CustomStringConvertible {
    /// The bytes are not a well-formed minidump; the message says what and where.
    case malformed(String)
    /// A system call failed; `errno` is the C errno it left.
    case system(call: String, path: String, errno: Int32)

    public var description: String {
        switch self {
        case .malformed(let message):
            return "malformed minidump: \(message)"
        case .system(let call, let path, let errno):
            return "\(call)(\(path)) failed: errno \(errno) (\(minidumpErrnoDescription(errno)))"
        }
    }
}
