// CoreBytes: an x86-64 ELF core stream laid out as the kernel's elf_core_dump writes it
// (fs/binfmt_elf.c): the ELF header, PT_NOTE then one PT_LOAD per mapping, the notes (per
// thread NT_PRSTATUS, then NT_PRPSINFO, NT_SIGINFO, NT_AUXV, NT_FILE after the first thread's,
// then its NT_FPREGSET), page-aligned loads in address order. Tests build the streams a kernel
// would write and, through `notes`, `programHeaders` and the offsets it reports, the ones it
// never would. Struct layouts by offset, as in <sys/procfs.h>; all little-endian.

import ReportModel

public struct CoreBytes {
    public struct Thread {
        public var tid: Int32
        public var signal: Int16
        public var registers: X86_64Registers
        /// NT_FPREGSET's 512 bytes, nil for none.
        public var fxsave: [UInt8]?

        public init(tid: Int32, signal: Int16 = 0, registers: X86_64Registers, fxsave: [UInt8]? = nil) {
            self.tid = tid
            self.signal = signal
            self.registers = registers
            self.fxsave = fxsave
        }
    }

    public struct Load {
        public var address: UInt64
        public var bytes: [UInt8]
        /// p_memsz; bytes.count when nil.
        public var memorySize: UInt64?
        /// p_flags: PF_R 4 | PF_W 2 | PF_X 1.
        public var flags: UInt32

        public init(address: UInt64, bytes: [UInt8], memorySize: UInt64? = nil, flags: UInt32 = 6) {
            self.address = address
            self.bytes = bytes
            self.memorySize = memorySize
            self.flags = flags
        }
    }

    public var threads: [Thread] = []
    /// NT_SIGINFO's bytes (CoreBytes.siginfo), nil for none.
    public var siginfo: [UInt8]?
    public var psinfo: [UInt8]?
    /// (a_type, a_val) pairs; AT_NULL is appended.
    public var auxv: [(UInt64, UInt64)]?
    /// NT_FILE's bytes (CoreBytes.fileNote), nil for none.
    public var file: [UInt8]?
    public var loads: [Load] = []
    /// Notes appended after the kernel's, as (owner name, type, descriptor).
    public var extraNotes: [(String, UInt32, [UInt8])] = []

    public init() {}

    /// A register set of zeros but `values` (by name: "rip", "rsp", ...).
    public static func registers(_ values: [String: UInt64]) -> X86_64Registers {
        var registers = X86_64Registers(gpr: [UInt64](repeating: 0, count: X86_64Registers.gprCount))
        for (name, value) in values { registers[name] = value }
        return registers
    }

    // MARK: Notes

    /// One note: Elf64_Nhdr (n_namesz with the NUL, n_descsz, n_type), the name and the
    /// descriptor each padded to 4 bytes. `descSize` overrides n_descsz (a note that lies).
    public static func note(name: String, type: UInt32, desc: [UInt8], descSize: UInt32? = nil) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.append(u32: UInt32(name.utf8.count + 1))
        bytes.append(u32: descSize ?? UInt32(desc.count))
        bytes.append(u32: type)
        bytes.append(cString: name)
        bytes.align(to: 4)
        bytes.append(contentsOf: desc)
        bytes.align(to: 4)
        return bytes
    }

    /// struct elf_prstatus (336 bytes): pr_cursig at 12, pr_pid at 32, pr_reg at 112.
    public static func prstatus(_ thread: Thread) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 336)
        bytes.put(u16: UInt16(bitPattern: thread.signal), at: 12)
        bytes.put(u32: UInt32(bitPattern: thread.tid), at: 32)
        for (index, value) in thread.registers.gpr.enumerated() { bytes.put(u64: value, at: 112 + 8 * index) }
        return bytes
    }

    /// siginfo_t (128 bytes): si_signo, si_errno, si_code, then si_addr (or si_pid, si_uid) at 16.
    public static func siginfo(signal: Int32, code: Int32, address: UInt64 = 0, pid: Int32 = 0, uid: UInt32 = 0) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 128)
        bytes.put(u32: UInt32(bitPattern: signal), at: 0)
        bytes.put(u32: UInt32(bitPattern: code), at: 8)
        if code > 0 {
            bytes.put(u64: address, at: 16)
        } else {
            bytes.put(u32: UInt32(bitPattern: pid), at: 16)
            bytes.put(u32: uid, at: 20)
        }
        return bytes
    }

    /// struct elf_prpsinfo (136 bytes): pr_sname at 1, pr_uid 16, pr_gid 20, pr_pid 24,
    /// pr_ppid 28, pr_fname[16] at 40, pr_psargs[80] at 56.
    public static func prpsinfo(
        state: Character = "R", uid: UInt32, gid: UInt32, pid: Int32, parent: Int32, command: String, arguments: String
    ) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 40)
        bytes[1] = state.asciiValue ?? 0
        bytes.put(u32: uid, at: 16)
        bytes.put(u32: gid, at: 20)
        bytes.put(u32: UInt32(bitPattern: pid), at: 24)
        bytes.put(u32: UInt32(bitPattern: parent), at: 28)
        bytes.append(command, fieldSize: 16)
        bytes.append(arguments, fieldSize: 80)
        return bytes
    }

    /// NT_FILE: count, page size, (start, end, page offset) per entry, then the paths.
    /// `count` overrides the count field (a note that lies).
    public static func fileNote(
        _ entries: [(UInt64, UInt64, UInt64, String)], pageSize: UInt64 = 4096, count: UInt64? = nil
    )
        -> [UInt8]
    {
        var bytes: [UInt8] = []
        bytes.append(u64: count ?? UInt64(entries.count))
        bytes.append(u64: pageSize)
        for (start, end, page, _) in entries {
            bytes.append(u64: start)
            bytes.append(u64: end)
            bytes.append(u64: page)
        }
        for entry in entries { bytes.append(cString: entry.3) }
        return bytes
    }

    /// The notes segment as the kernel orders it.
    public var notes: [UInt8] {
        var bytes: [UInt8] = []
        for (index, thread) in threads.enumerated() {
            bytes += Self.note(name: "CORE", type: 1, desc: Self.prstatus(thread))  // NT_PRSTATUS
            if index == 0 {
                if let psinfo { bytes += Self.note(name: "CORE", type: 3, desc: psinfo) }  // NT_PRPSINFO
                if let siginfo { bytes += Self.note(name: "CORE", type: 0x5349_4749, desc: siginfo) }  // NT_SIGINFO
                if let auxv {
                    var desc: [UInt8] = []
                    for (type, value) in auxv + [(0, 0)] {
                        desc.append(u64: type)
                        desc.append(u64: value)
                    }
                    bytes += Self.note(name: "CORE", type: 6, desc: desc)  // NT_AUXV
                }
                if let file { bytes += Self.note(name: "CORE", type: 0x4649_4C45, desc: file) }  // NT_FILE
            }
            if let fxsave = thread.fxsave { bytes += Self.note(name: "CORE", type: 2, desc: fxsave) }  // NT_FPREGSET
        }
        for (name, type, desc) in extraNotes { bytes += Self.note(name: name, type: type, desc: desc) }
        return bytes
    }

    // MARK: The stream

    /// Where the parts of `bytes()` are: the program headers (PT_NOTE first), the notes, each
    /// load's data.
    public var layout: (programHeaders: Int, notes: Int, loads: [Int]) {
        let notesAt = 64 + 56 * (1 + loads.count)
        var offset = (notesAt + notes.count + 4095) / 4096 * 4096
        var loadOffsets: [Int] = []
        for load in loads {
            loadOffsets.append(offset)
            offset += load.bytes.count
        }
        return (64, notesAt, loadOffsets)
    }

    /// Elf64_Phdr (56 bytes): p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align.
    public static func programHeader(
        type: UInt32, flags: UInt32, offset: UInt64, address: UInt64, fileSize: UInt64, memorySize: UInt64
    ) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.append(u32: type)
        bytes.append(u32: flags)
        for field in [offset, address, 0, fileSize, memorySize, 4096] { bytes.append(u64: field) }
        return bytes
    }

    /// The whole stream.
    public func bytes() -> [UInt8] {
        let notes = self.notes
        let layout = self.layout
        var bytes: [UInt8] = [0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0]  // ELFCLASS64, ELFDATA2LSB, EV_CURRENT
        bytes.pad(to: 16)
        bytes.append(u16: 4)  // ET_CORE
        bytes.append(u16: 62)  // EM_X86_64
        bytes.append(u32: 1)
        bytes.append(u64: 0)  // e_entry
        bytes.append(u64: 64)  // e_phoff
        bytes.append(u64: 0)  // e_shoff
        bytes.append(u32: 0)  // e_flags
        bytes.append(u16: 64)  // e_ehsize
        bytes.append(u16: 56)  // e_phentsize
        bytes.append(u16: UInt16(1 + loads.count))
        bytes.append(u16: 64)  // e_shentsize
        bytes.append(u16: 0)
        bytes.append(u16: 0)
        bytes += Self.programHeader(
            type: 4, flags: 0, offset: UInt64(layout.notes), address: 0, fileSize: UInt64(notes.count), memorySize: 0)
        for (load, offset) in zip(loads, layout.loads) {
            bytes += Self.programHeader(
                type: 1, flags: load.flags, offset: UInt64(offset), address: load.address, fileSize: UInt64(load.bytes.count),
                memorySize: load.memorySize ?? UInt64(load.bytes.count))
        }
        bytes += notes
        for (load, offset) in zip(loads, layout.loads) {
            bytes.pad(to: offset)
            bytes += load.bytes
        }
        return bytes
    }
}
