// CoreDumpReader: the kernel's ELF core stream, read once, front to back, with bounded memory
// whatever the process's size.
//
// The stream is what fs/binfmt_elf.c's elf_core_dump writes to a file, a pipe helper's stdin or
// the coredump socket: the ELF header, the program headers (PT_NOTE first, then one PT_LOAD per
// mapping, in address order), the notes, then (page-aligned) each load's p_filesz bytes in
// p_offset order. So: headers → notes (CoreNotes) → the plan of what to keep (KeepPlan) → the
// loads, each passed through one buffer and dropped but for the planned bytes. Nothing is
// sought back; what a hostile stream lies about costs a note, not memory: every count and size
// is checked against the limits below before anything is allocated for it.
//
// The reader stops at the end of the last load: what follows (the section header that
// extended numbering puts last) is not a report's. The caller closes the stream; for the
// kernel that ends the dump, which is not an error for the dying process.

import BoundedBytes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public enum CoreDumpReader {
    /// The bounds on what a stream may make the reader keep. Each default says why it is
    /// enough for a real process and small enough for a crash storm.
    public struct Limits: Sendable {
        /// Stack bytes of the crashing thread and of each other thread: a live capture's
        /// (CaptureWindows).
        public var crashedThreadStack = CaptureWindows.crashedThreadStackLimit
        public var threadStack = CaptureWindows.threadStackLimit
        /// All memory kept (stacks, windows, image pages): the crashing thread's 16 MiB and
        /// room for a few hundred other threads' deep stacks (a typical thread's is tens of KiB
        /// from its sp to its top), whatever the process's size.
        public var keptBytes = 64 << 20
        /// Threads whose registers are kept: more than a report shows usefully, and 4096 ×
        /// (216 + 512 bytes of registers) stays under 3 MiB; the rest are counted.
        public var threads = 4096
        /// Program headers kept (one PT_LOAD per mapping, 32 bytes each kept): four times the
        /// default vm.max_map_count (65,530); past it the loads are not known, their bytes
        /// pass unread.
        public var programHeaders = 1 << 18
        /// Bytes of notes parsed: NT_FILE's 16 MiB at most, plus 4096 threads' register notes
        /// (NT_PRSTATUS, NT_FPREGSET, NT_X86_XSTATE: under 12 KiB each) with room to spare; past
        /// it the notes pass unread. A note is held one at a time, at most its type's size
        /// (CoreNotes.wanted), so this bounds time, not memory.
        public var notesBytes = 128 << 20
        /// NT_FILE entries kept: the default vm.max_map_count (65,530) and a little more.
        public var files = 1 << 16
        /// The one buffer the stream passes through.
        public var chunkSize = 64 << 10

        public init() {}
    }

    /// ELF's fixed sizes for ELFCLASS64: Elf64_Ehdr, Elf64_Phdr, Elf64_Nhdr.
    static let headerSize = 64
    static let programHeaderSize = 56
    static let noteHeaderSize: UInt64 = 12
    /// e_phnum when the real count is in the first section header's sh_info (<elf.h> PN_XNUM).
    static let extendedNumbering: UInt16 = 0xFFFF

    /// Reads a core stream from a descriptor (a pipe, a socket, a file), to the end of its
    /// last load. Blocks in read(2) as long as the writer does.
    public static func read(fileDescriptor fd: Int32, limits: Limits = Limits()) throws(CoreDumpError) -> CoreDump {
        try read(from: { (buffer) throws(CoreDumpError) -> Int in try Syscalls.read(fd, into: buffer).get() }, limits: limits)
    }

    /// Reads a core stream from `source` (see CoreStream.Source), to the end of its last load.
    /// `notesRead` hears the notes (threads, signal, files) once they are parsed, before any load
    /// is read: what a handler the stream is passed on to needs to start (its signal argument).
    /// `grant`, when given, is asked for the bytes the plan would keep once it is made (before
    /// any load) and answers how many it may: a smaller answer cuts the plan to it, in its order
    /// of worth (the host level's readers share one budget).
    public static func read(
        from source: @escaping CoreStream.Source, limits: Limits = Limits(), grant: ((Int) -> Int)? = nil,
        notesRead: ((CoreDump) -> Void)? = nil
    ) throws(CoreDumpError)
        -> CoreDump
    {
        var stream = CoreStream(source: source, chunkSize: limits.chunkSize)
        let (notesSegment, loads, headerNotes) = try headers(&stream, limits: limits)
        var parser = CoreNotes(threadLimit: max(limits.threads, 1), fileLimit: max(limits.files, 0))
        for note in headerNotes { parser.note(note) }
        let notesEnded = try notes(notesSegment, from: &stream, into: &parser, limits: limits)
        var dump = parser.finish()
        dump.loads = loads
        notesRead?(dump)
        guard !dump.threads.isEmpty else {
            if notesEnded { throw .truncated(what: "the notes, before any thread's NT_PRSTATUS", offset: stream.offset) }
            throw .malformed("the notes hold no NT_PRSTATUS: no thread's registers")
        }
        if notesEnded {
            dump.notes.append("the stream ended inside the notes at byte \(stream.offset): no memory was kept")
            dump.bytesRead = stream.offset
            return dump
        }
        var plan = KeepPlan(dump: dump, limits: limits)
        if let grant {
            let planned = plan.plannedBytes
            let granted = max(0, grant(planned))
            if granted < planned {
                var cut = limits
                cut.keptBytes = granted
                plan = KeepPlan(dump: dump, limits: cut)
                dump.notes.append(
                    "\(granted) of the \(planned) bytes planned were kept: the cores read at once share one budget")
            }
        }
        dump.notes += plan.notes
        dump.complete = try passLoads(loads, from: &stream, plan: &plan, notes: &dump.notes)
        plan.apply(to: &dump)
        dump.bytesRead = stream.offset
        return dump
    }

    // MARK: - Headers

    /// The ELF header and program headers: the notes segment (offset, size) and the loads.
    static func headers(
        _ stream: inout CoreStream, limits: Limits
    ) throws(CoreDumpError) -> (notes: (offset: UInt64, size: UInt64), loads: [CoreDump.Load], remarks: [String]) {
        let header = try stream.read(headerSize)
        guard header.count == headerSize else { throw .truncated(what: "the ELF header", offset: stream.offset) }
        guard Array(header[0..<4]) == [0x7F, 0x45, 0x4C, 0x46] else { throw .unsupported("no ELF magic") }
        guard header[4] == 2, header[5] == 1 else {
            throw .unsupported("class \(header[4]), data \(header[5]) (not ELFCLASS64, ELFDATA2LSB)")
        }
        // The 64-byte Elf64_Ehdr holds each field.
        let (type, machine, entrySize, phoff, phnum) = header.withUnsafeBytes { raw in
            let view = ByteView(raw)
            return (view.u16(16)!, view.u16(18)!, view.u16(54)!, view.u64(32)!, view.u16(56)!)
        }
        guard type == UInt16(ET_CORE) else { throw .unsupported("e_type \(type) (not ET_CORE)") }
        guard machine == UInt16(EM_X86_64) else { throw .unsupported("e_machine \(machine) (not EM_X86_64)") }
        guard entrySize == UInt16(programHeaderSize) else {
            throw .malformed("e_phentsize \(entrySize) (Elf64_Phdr is \(programHeaderSize))")
        }
        guard phoff >= UInt64(headerSize) else { throw .malformed("e_phoff \(phoff) lies inside the ELF header") }
        guard try stream.skip(to: phoff) else {
            throw .truncated(what: "the gap before the program headers", offset: stream.offset)
        }

        var notes: (offset: UInt64, size: UInt64)?
        var loads: [CoreDump.Load] = []
        var remarks: [String] = []
        var count = UInt64(phnum)
        var index: UInt64 = 0
        var droppedLoads = 0
        while index < count {
            let entry = try stream.read(programHeaderSize)
            guard entry.count == programHeaderSize else { throw .truncated(what: "the program headers", offset: stream.offset) }
            // The entry holds 56 bytes: each field is there.
            let (type, flags, offset, address, fileSize, memorySize) = entry.withUnsafeBytes { raw in
                let view = ByteView(raw)
                return (view.u32(0)!, view.u32(4)!, view.u64(8)!, view.u64(16)!, view.u64(32)!, view.u64(40)!)
            }
            if index == 0 && phnum == extendedNumbering {
                // The count is in a section header the kernel writes after the loads; the notes,
                // written first, start right after the last program header.
                guard type == UInt32(PT_NOTE), offset > phoff, (offset - phoff) % UInt64(programHeaderSize) == 0 else {
                    throw .malformed("extended numbering (e_phnum PN_XNUM) without the notes' header first")
                }
                count = (offset - phoff) / UInt64(programHeaderSize)
                remarks.append("extended program header numbering: \(count) program headers")
            }
            index += 1
            switch type {
            case UInt32(PT_NOTE):
                if notes == nil { notes = (offset, fileSize) } else { remarks.append("a second PT_NOTE was ignored") }
            case UInt32(PT_LOAD):
                guard loads.count < limits.programHeaders else {
                    droppedLoads += 1
                    continue
                }
                loads.append(
                    CoreDump.Load(address: address, memorySize: memorySize, fileSize: fileSize, offset: offset, flags: flags))
            default:
                break
            }
        }
        if droppedLoads > 0 {
            remarks.append(
                "\(droppedLoads) PT_LOADs past the first \(limits.programHeaders) were not read: their bytes pass unread")
        }
        guard let notes else { throw .malformed("no PT_NOTE: no thread's registers") }
        return (notes, loads, remarks)
    }

    // MARK: - Notes

    /// Parses the notes segment note by note; returns whether the stream ended inside it.
    static func notes(
        _ segment: (offset: UInt64, size: UInt64), from stream: inout CoreStream, into parser: inout CoreNotes, limits: Limits
    ) throws(CoreDumpError) -> Bool {
        guard segment.offset >= stream.offset else {
            throw .malformed("the notes (at \(segment.offset)) overlap the program headers (to \(stream.offset))")
        }
        guard try stream.skip(to: segment.offset) else { return true }
        var remaining = segment.size
        var parsed: UInt64 = 0
        while remaining >= noteHeaderSize {
            if parsed > UInt64(limits.notesBytes) {
                parser.note("notes past the first \(limits.notesBytes) bytes passed unread")
                break
            }
            let header = try stream.read(Int(noteHeaderSize))
            guard header.count == Int(noteHeaderSize) else { return true }
            remaining -= noteHeaderSize
            // Elf64_Nhdr: n_namesz, n_descsz, n_type (the 12 bytes are there).
            let (nameSize, descSize, type) = header.withUnsafeBytes { raw in
                let view = ByteView(raw)
                return (UInt64(view.u32(0)!), UInt64(view.u32(4)!), view.u32(8)!)
            }
            // Each part is padded to 4 bytes; both fit in 33 bits, so neither sum overflows.
            let namePadded = (nameSize + 3) & ~3, descPadded = (descSize + 3) & ~3
            guard namePadded + descPadded <= remaining else {
                parser.note(
                    "a note (type \(type)) says it has \(namePadded + descPadded) bytes where its segment has \(remaining) left: the rest of the notes passed unread"
                )
                break
            }
            // Owner names are "CORE" and "LINUX": a longer one is no note a report reads.
            var name: [UInt8] = []
            if nameSize <= 16 {
                name = try stream.read(Int(namePadded))
                guard name.count == Int(namePadded) else { return true }
                name = Array(name.prefix(Int(nameSize)))
                if name.last == 0 { name.removeLast() }
            } else if try stream.skip(namePadded) < namePadded {
                return true
            }
            var desc: [UInt8] = []
            let wanted = CoreNotes.wanted(name: name, type: type).map { UInt64($0) } ?? 0
            let read = min(wanted, descSize)
            if read > 0 {
                desc = try stream.read(Int(read))
                guard desc.count == Int(read) else { return true }
            }
            if try stream.skip(descPadded - read) < descPadded - read { return true }
            if wanted > 0 { parser.add(type: type, bytes: desc, size: descSize) }
            remaining -= namePadded + descPadded
            parsed += noteHeaderSize + namePadded + descPadded
        }
        return try stream.skip(remaining) < remaining
    }

    // MARK: - Loads

    /// Passes every load's bytes through the plan, in stream order; returns whether the stream
    /// reached the end of the last one.
    static func passLoads(
        _ loads: [CoreDump.Load], from stream: inout CoreStream, plan: inout KeepPlan, notes: inout [String]
    ) throws(CoreDumpError) -> Bool {
        let order = loads.indices.filter { loads[$0].fileSize > 0 }
            .sorted { (loads[$0].offset, $0) < (loads[$1].offset, $1) }
        if order != order.sorted() {
            notes.append("the loads' bytes are not in their program headers' order: read in stream order")
        }
        var overlapping = 0
        for index in order {
            let load = loads[index]
            guard let end = load.offset.checkedAdding(load.fileSize),
                UInt64.checkedRange(start: load.address, count: load.fileSize) != nil
            else {
                notes.append("a load at \(HexAddress(load.address)) of \(load.fileSize) bytes ends past 2^64: skipped")
                continue
            }
            guard end > stream.offset else {
                overlapping += 1
                continue
            }
            if load.offset < stream.offset { overlapping += 1 }
            let start = max(load.offset, stream.offset)
            guard try stream.skip(to: start) else { break }
            // Within the load: file offset `at` is address load.address + (at - load.offset).
            try stream.pass(end - start) { at, chunk in
                plan.fill(load: index, address: load.address + (at - load.offset), chunk: chunk)
            }
            if stream.offset < end { break }
        }
        if overlapping > 0 {
            notes.append("\(overlapping) loads overlapped bytes already read: only their bytes past those were seen")
        }
        let last = order.compactMap { loads[$0].offset.checkedAdding(loads[$0].fileSize) }.max() ?? stream.offset
        if stream.offset < last {
            notes.append(
                "the stream ended at byte \(stream.offset) of \(last), among the loads: what was kept until then is all there is")
            return false
        }
        return true
    }
}
