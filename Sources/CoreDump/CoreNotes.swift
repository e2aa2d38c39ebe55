// CoreNotes: the PT_NOTE segment of a core, one note at a time, as elf_core_dump writes it
// (fs/binfmt_elf.c, write_note_info): for each thread NT_PRSTATUS, then (the first thread only)
// NT_PRPSINFO, NT_SIGINFO, NT_AUXV and NT_FILE, then the thread's other register sets
// (NT_FPREGSET, NT_X86_XSTATE, ...). A note's descriptor is read only when its type is one a
// report uses and its size is one that type can have; any other is skipped unread. Layouts are
// x86-64's (include/uapi/linux/elfcore.h, <sys/procfs.h>), by offset: struct elf_prstatus is
// 336 bytes with pr_reg at 112, struct elf_prpsinfo 136, siginfo_t 128.

import BoundedBytes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

struct CoreNotes {
    /// A note's type and owner name ("CORE" or "LINUX"), and the most of its descriptor that is
    /// read (nil: skipped without reading).
    static func wanted(name: [UInt8], type: UInt32) -> Int? {
        let core = name == Array("CORE".utf8), linux = name == Array("LINUX".utf8)
        switch Int32(bitPattern: type) {
        case NT_PRSTATUS where core: return prstatusSize
        case NT_FPREGSET where core: return fxsaveSize
        case NT_PRPSINFO where core: return prpsinfoSize
        case NT_SIGINFO where core: return siginfoSize
        // The kernel's saved_auxv holds AT_VECTOR_SIZE (under 64) pairs.
        case NT_AUXV where core: return 4096
        // The kernel cuts NT_FILE at core_file_note_size_limit, at most 16 MiB
        // (CORE_FILE_NOTE_SIZE_MAX); 4 MiB by default.
        case NT_FILE where core: return 16 << 20
        // Its first 512 bytes are the FXSAVE image: all the snapshot's registers hold. The AVX
        // and later state after it has no place in them (ptrace's NT_PRFPREG gives a live
        // capture the same 512 bytes).
        case NT_X86_XSTATE where linux: return fxsaveSize
        default: return nil
        }
    }

    static let prstatusSize = 336
    static let prstatusRegisters: UInt64 = 112
    static let prpsinfoSize = 136
    static let siginfoSize = 128
    static let fxsaveSize = 512

    /// The thread-count cap: threads past it are counted, not kept.
    let threadLimit: Int
    /// The limit on the NT_FILE entries kept.
    let fileLimit: Int
    private(set) var dump = CoreDump()
    /// Whether the last NT_PRSTATUS was kept (its register sets follow it).
    private var lastThreadKept = false

    init(threadLimit: Int, fileLimit: Int) {
        self.threadLimit = threadLimit
        self.fileLimit = fileLimit
    }

    mutating func note(_ text: String) { dump.notes.append(text) }

    /// One note's descriptor: `bytes` is its head (as much as `wanted` allows), `size` its
    /// whole size as the note said.
    mutating func add(type: UInt32, bytes: [UInt8], size: UInt64) {
        bytes.withUnsafeBytes { raw in add(type: Int32(bitPattern: type), ByteView(raw), size: size) }
    }

    private mutating func add(type: Int32, _ view: ByteView, size: UInt64) {
        switch type {
        case NT_PRSTATUS: prstatus(view)
        case NT_FPREGSET, NT_X86_XSTATE: fpregs(view, xstate: type == NT_X86_XSTATE)
        case NT_PRPSINFO: prpsinfo(view)
        case NT_SIGINFO: siginfo(view)
        case NT_AUXV:
            if dump.auxv != nil { note("a second NT_AUXV was ignored") } else { dump.auxv = Array(view.bytes) }
        case NT_FILE: file(view, size: size)
        default: break
        }
    }

    private mutating func prstatus(_ view: ByteView) {
        dump.threadCount += 1
        lastThreadKept = false
        guard dump.threads.count < threadLimit else {
            if dump.threadCount == threadLimit + 1 {
                note("threads past the first \(threadLimit) were counted, not kept (the cap on threads a report holds)")
            }
            return
        }
        let count = X86_64Registers.gprCount
        guard let cursig = view.u16(12), let pid = view.u32(32),
            let registers = view.slice(Self.prstatusRegisters, UInt64(count * 8))
        else {
            note("an NT_PRSTATUS of \(view.count) bytes (not \(Self.prstatusSize)) was skipped")
            return
        }
        let gpr = (0..<count).map { registers.u64(UInt64($0 * 8))! }  // the slice holds count words
        dump.threads.append(
            CoreDump.Thread(
                tid: ThreadID(Int32(bitPattern: pid)), signal: Int32(Int16(bitPattern: cursig)),
                registers: X86_64Registers(gpr: gpr)))
        lastThreadKept = true
    }

    private mutating func fpregs(_ view: ByteView, xstate: Bool) {
        // NT_X86_XSTATE's AVX and later state after the FXSAVE image is not kept: a snapshot (and
        // a minidump's context) holds the FXSAVE registers only, as a live capture does; not a
        // gap worth a note in every report.
        guard lastThreadKept, view.count == Self.fxsaveSize else { return }
        // NT_FPREGSET is the FXSAVE image itself; NT_X86_XSTATE starts with it (used where the
        // thread has no NT_FPREGSET).
        guard !xstate || dump.threads[dump.threads.count - 1].registers.fxsave.isEmpty else { return }
        dump.threads[dump.threads.count - 1].registers.fxsave = Array(view.bytes)
    }

    private mutating func prpsinfo(_ view: ByteView) {
        guard dump.processInfo == nil else { return note("a second NT_PRPSINFO was ignored") }
        guard view.count == Self.prpsinfoSize, let sname = view.u8(1), let uid = view.u32(16), let gid = view.u32(20),
            let pid = view.u32(24), let ppid = view.u32(28), let fname = view.slice(40, 16), let psargs = view.slice(56, 80)
        else { return note("an NT_PRPSINFO of \(view.count) bytes (not \(Self.prpsinfoSize)) was skipped") }
        dump.processInfo = CoreDump.ProcessInfo(
            state: Character(Unicode.Scalar(sname)), uid: uid, gid: gid, pid: ProcessID(Int32(bitPattern: pid)),
            parentPID: ProcessID(Int32(bitPattern: ppid)), command: fname.cString(0) ?? "",
            arguments: psargs.cString(0) ?? "")
    }

    private mutating func siginfo(_ view: ByteView) {
        guard dump.signalInfo == nil else { return note("a second NT_SIGINFO was ignored") }
        guard view.count == Self.siginfoSize, let signo = view.u32(0), let errno = view.u32(4), let code = view.u32(8),
            let address = view.u64(16), let pid = view.u32(16), let uid = view.u32(20)
        else { return note("an NT_SIGINFO of \(view.count) bytes (not \(Self.siginfoSize)) was skipped") }
        let signalCode = Int32(bitPattern: code)
        // si_addr shares a union with si_pid and si_uid: a kernel-raised signal (si_code > 0)
        // has an address, a sent one (kill, tgkill, sigqueue) a sender.
        dump.signalInfo = CoreDump.SignalInfo(
            signal: Int32(bitPattern: signo), code: signalCode, errno: Int32(bitPattern: errno),
            faultAddress: signalCode > 0 ? address : 0,
            senderPID: signalCode > 0 ? nil : ProcessID(Int32(bitPattern: pid)), senderUID: signalCode > 0 ? nil : uid)
    }

    /// NT_FILE: count and page size (u64 each), count (start, end, page offset) triples, then
    /// count NUL-terminated paths.
    private mutating func file(_ view: ByteView, size: UInt64) {
        guard dump.files.isEmpty else { return note("a second NT_FILE was ignored") }
        guard UInt64(view.count) == size else {
            return note("an NT_FILE of \(size) bytes (more than the kernel writes) was skipped: file mappings unknown")
        }
        guard let count = view.u64(0), let pageSize = view.u64(8) else {
            return note("an NT_FILE of \(view.count) bytes was skipped")
        }
        // The triples must fit in the note: that bounds the count whatever it says.
        let fits = (UInt64(view.count) - 16) / 24
        if count > fits { note("NT_FILE says \(count) mappings where its \(view.count) bytes hold at most \(fits)") }
        let entries = Int(min(count, fits, UInt64(fileLimit)))
        if count > UInt64(fileLimit) && fileLimit < fits { note("NT_FILE mappings past the first \(fileLimit) were left out") }
        var pathAt = 16 + UInt64(entries) * 24
        // Paths follow every triple the note said it has.
        if count <= fits { pathAt = 16 + count * 24 }
        var dropped = 0
        for index in 0..<entries {
            let at = 16 + UInt64(index) * 24
            guard let path = view.cString(pathAt) else {
                note("NT_FILE has \(index) of its \(count) paths")
                break
            }
            pathAt += UInt64(path.utf8.count) + 1
            // The slice holds every triple up to `entries`.
            let start = view.u64(at)!, end = view.u64(at + 8)!, page = view.u64(at + 16)!
            guard start < end, let offset = page.checkedMultiplying(pageSize) else {
                dropped += 1
                continue
            }
            dump.files.append(CoreDump.FileMapping(start: start, end: end, offset: offset, path: path))
        }
        if dropped > 0 { note("\(dropped) NT_FILE entries with an empty range or an offset past 2^64 were dropped") }
    }

    /// The dump the notes made.
    func finish() -> CoreDump { dump }
}
