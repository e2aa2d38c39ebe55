// CoreDump: what a report keeps of the kernel's ELF core stream, as plain values.
//
// CoreDumpReader fills it in one pass over the stream (fs/binfmt_elf.c, elf_core_dump): the
// notes whole (each thread's registers, the signal, the process, the auxiliary vector, the file
// mappings), and of the memory only what a report needs (each thread's stack, windows around
// registers that point into memory, the first page of each mapped file and the vDSO, for
// build-ids). LiveProcess turns it into a Capture (CaptureSession.core). Thread ids and the
// process's pid are the process's own (its pid namespace), as the kernel wrote them.

import BoundedBytes
import ReportModel

public struct CoreDump: Sendable, Equatable {
    /// One NT_PRSTATUS, with the FP state that followed it and the stack kept for it.
    public struct Thread: Sendable, Equatable {
        /// pr_pid: the thread's id in the process's pid namespace.
        public var tid: ThreadID
        /// pr_cursig: the signal the thread was handling (the crashing thread's fatal one).
        public var signal: Int32
        /// pr_reg (user_regs_struct) and NT_FPREGSET's FXSAVE image (empty when absent).
        public var registers: X86_64Registers
        /// From the stack pointer less the red zone (CaptureWindows.stack); nil when its
        /// mapping was not dumped or the stream ended first.
        public var stack: MemoryRegion?

        public init(tid: ThreadID, signal: Int32, registers: X86_64Registers, stack: MemoryRegion? = nil) {
            self.tid = tid
            self.signal = signal
            self.registers = registers
            self.stack = stack
        }
    }

    /// NT_SIGINFO: the crashing thread's siginfo_t.
    public struct SignalInfo: Sendable, Equatable {
        public var signal: Int32
        public var code: Int32
        public var errno: Int32
        /// si_addr, for a signal the kernel raised (si_code > 0); 0 otherwise.
        public var faultAddress: UInt64
        /// si_pid and si_uid, for a signal a process sent (si_code <= 0: kill, tgkill, sigqueue).
        public var senderPID: ProcessID?
        public var senderUID: UInt32?

        public init(
            signal: Int32, code: Int32, errno: Int32 = 0, faultAddress: UInt64 = 0, senderPID: ProcessID? = nil,
            senderUID: UInt32? = nil
        ) {
            self.signal = signal
            self.code = code
            self.errno = errno
            self.faultAddress = faultAddress
            self.senderPID = senderPID
            self.senderUID = senderUID
        }
    }

    /// NT_PRPSINFO: struct elf_prpsinfo.
    public struct ProcessInfo: Sendable, Equatable {
        /// pr_sname: the state letter (R, S, D, T, Z ...).
        public var state: Character
        public var uid: UInt32
        public var gid: UInt32
        public var pid: ProcessID
        public var parentPID: ProcessID
        /// pr_fname: the thread-group leader's comm (at most 15 bytes).
        public var command: String
        /// pr_psargs: the arguments joined by spaces, cut at 79 bytes by the kernel.
        public var arguments: String

        public init(
            state: Character, uid: UInt32, gid: UInt32, pid: ProcessID, parentPID: ProcessID, command: String,
            arguments: String
        ) {
            self.state = state
            self.uid = uid
            self.gid = gid
            self.pid = pid
            self.parentPID = parentPID
            self.command = command
            self.arguments = arguments
        }
    }

    /// One NT_FILE entry: a file mapped at start..<end from byte `offset` of `path`.
    public struct FileMapping: Sendable, Equatable {
        public var start: UInt64
        public var end: UInt64
        /// In bytes (the note gives pages; the entry is dropped when that overflows).
        public var offset: UInt64
        /// As the crashing process named it (its mount namespace, its root).
        public var path: String

        public init(start: UInt64, end: UInt64, offset: UInt64, path: String) {
            self.start = start
            self.end = end
            self.offset = offset
            self.path = path
        }
    }

    /// One PT_LOAD: a mapping of the process, `fileSize` bytes of it in the stream (0 for a
    /// mapping the kernel did not dump).
    public struct Load: Sendable, Equatable {
        public var address: UInt64
        public var memorySize: UInt64
        public var fileSize: UInt64
        /// p_offset: where its bytes are in the stream.
        public var offset: UInt64
        /// p_flags: PF_R 4, PF_W 2, PF_X 1.
        public var flags: UInt32

        public init(address: UInt64, memorySize: UInt64, fileSize: UInt64, offset: UInt64, flags: UInt32) {
            self.address = address
            self.memorySize = memorySize
            self.fileSize = fileSize
            self.offset = offset
            self.flags = flags
        }

        public var readable: Bool { flags & 4 != 0 }
        public var writable: Bool { flags & 2 != 0 }
        public var executable: Bool { flags & 1 != 0 }
        /// The whole mapping's addresses; nil when its end overflows (hostile headers).
        public var addresses: Range<UInt64>? { UInt64.checkedRange(start: address, count: memorySize) }
    }

    /// Every kept thread, the crashing one (the first NT_PRSTATUS) first.
    public var threads: [Thread] = []
    /// How many NT_PRSTATUS notes there were (more than `threads` when the cap cut them).
    public var threadCount = 0
    public var signalInfo: SignalInfo?
    public var processInfo: ProcessInfo?
    /// NT_AUXV as written: (a_type, a_val) pairs of u64, up to AT_NULL.
    public var auxv: [UInt8]?
    public var files: [FileMapping] = []
    /// The program headers' PT_LOADs, in their order.
    public var loads: [Load] = []
    /// Windows around the registers that point into dumped memory (outside the stacks).
    public var extraMemory: [MemoryRegion] = []
    /// The first page of every file mapped from offset 0 (its ELF header and notes, where the
    /// build-id is) and the vDSO image: what ModuleMap reads build-ids and the vDSO from.
    public var imageMemory: [MemoryRegion] = []
    /// What was skipped, cut or malformed, in the order met.
    public var notes: [String] = []
    /// Bytes read from the stream.
    public var bytesRead: UInt64 = 0
    /// Whether the stream reached the end of the last load (false: it ended early, and what
    /// had been kept is all there is).
    public var complete = false

    public init() {}

    /// The auxiliary vector's entries, up to AT_NULL.
    public var auxiliaryVector: [(type: UInt64, value: UInt64)] {
        guard let auxv else { return [] }
        var entries: [(type: UInt64, value: UInt64)] = []
        auxv.withUnsafeBytes { raw in
            let view = ByteView(raw)
            var offset: UInt64 = 0
            while let type = view.u64(offset), let value = view.u64(offset + 8), type != 0 {
                entries.append((type, value))
                offset += 16
            }
        }
        return entries
    }

    /// The value of auxiliary vector entry `type` (AT_ENTRY 9, AT_SYSINFO_EHDR 33, ...).
    public func auxiliaryValue(_ type: UInt64) -> UInt64? {
        auxiliaryVector.first { $0.type == type }?.value
    }

    /// The mappings as /proc/PID/maps would list them, from the loads (addresses, permissions)
    /// and NT_FILE (paths and offsets): what a report uses where /proc is gone. `[vdso]` is the
    /// load at AT_SYSINFO_EHDR and `[stack]` the one holding AT_EXECFN (the program's name, at
    /// the top of its initial stack). No device or inode: the core has none.
    public var mappings: [MemoryMapping] {
        let byStart = Dictionary(files.map { ($0.start, $0) }, uniquingKeysWith: { first, _ in first })
        let vdso = auxiliaryValue(33), execfn = auxiliaryValue(31)  // AT_SYSINFO_EHDR, AT_EXECFN
        return loads.compactMap { load in
            guard let range = load.addresses, !range.isEmpty else { return nil }
            let file = byStart[load.address]
            var path = file?.path ?? ""
            if file == nil && load.address == vdso { path = "[vdso]" }
            if file == nil, let execfn, range.contains(execfn) { path = "[stack]" }
            return MemoryMapping(
                start: range.lowerBound, end: range.upperBound, readable: load.readable, writable: load.writable,
                executable: load.executable, offset: file?.offset ?? 0, inode: 0, path: path)
        }.sorted { $0.start < $1.start }
    }

    /// `mappings` as the text of /proc/PID/maps (the minidump keeps it, the report parses it).
    public var mapsText: String {
        func hex(_ value: UInt64) -> String { String(value, radix: 16) }
        return mappings.map { mapping in
            let perms =
                (mapping.readable ? "r" : "-") + (mapping.writable ? "w" : "-") + (mapping.executable ? "x" : "-") + "p"
            let offset = String(repeating: "0", count: max(0, 8 - hex(mapping.offset).count)) + hex(mapping.offset)
            let line = "\(hex(mapping.start))-\(hex(mapping.end)) \(perms) \(offset) 00:00 0"
            // As the kernel escapes it in maps (show_map_vma): a newline would end the line.
            let path = mapping.path.replacingNewlines()
            return path.isEmpty ? line : line + String(repeating: " ", count: max(1, 73 - line.count)) + path
        }.map { $0 + "\n" }.joined()
    }
}

extension String {
    /// Each newline as maps writes it, `\012`.
    fileprivate func replacingNewlines() -> String {
        guard contains("\n") else { return self }
        return split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\\012")
    }
}
