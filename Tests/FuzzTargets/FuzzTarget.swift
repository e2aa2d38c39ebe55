// FuzzTarget: one entry point per parser of hostile bytes, for libFuzzer (Fuzz/, tools/fuzz)
// and for the regression tests that replay seeds and past crashes (FuzzRegressionTests).
//
// Each target takes the fuzzer's bytes as the whole input a parser would get in production
// (an ELF file, a minidump, an event.json, a wire message) and drives the real parser as deep
// as a report or the offline symbolicator would, throwing the results away: a target passes by
// not trapping, not hanging and not allocating without bound. Nothing here is a mock; the only
// help given to the fuzzer is a second pass over a fixed-up copy where a format has a field
// that must match the input's length or a checksum-like magic (see `wire` and `ehframe`).
//
// Threads: `run` may be called from one thread at a time (libFuzzer's model); the targets share
// DebugImageCache.shared with the rest of the process, as the watcher does.

import BoundedBytes
import CCrashPortProtocol
import CoreDump
import Foundation
import LiveProcess
import ReportModel
import Symbolication
import Unwinding
import Upload
import ObjectFile
import Reports
import Runtimes

public enum FuzzTarget: String, CaseIterable, Sendable {
    /// ELF headers, program headers, sections, notes, build-id, symbol tables, debuglink,
    /// .eh_frame_hdr, MiniDebugInfo (xz) and the DWARF sections' decompression.
    case elf
    /// .eh_frame and .eh_frame_hdr through the unwinder: the header's table, and the FDE index
    /// built from .eh_frame when the header is missing.
    case ehframe
    /// DWARF (.debug_info, .debug_abbrev, .debug_line, ranges and rnglists, aranges, inline
    /// trees, compressed sections) of an ELF file, looked up at addresses across its code.
    case dwarf
    /// The minidump reader, then the offline pipeline (unwinding and symbolication) over it.
    case minidump
    /// The event JSON reader, the text renderings of an event and offline re-symbolication.
    case event
    /// The wire messages the stub sends on the socket (header, hello, goodbye, crash record), and the
    /// app area the watcher reads out of a crashed process.
    case wire
    /// A crash, error or hang record through to its report, as the sidecar would make it of a
    /// process it must not read: the snapshot of CaptureSession.spooled (the crashed thread
    /// from the record's registers and stack copy, the modules of a maps text), the stack
    /// strings of the record's copy, the event (unwinding, symbolication, the stack-overflow
    /// verdict, the culprit, the title), the crash log, the Sentry event and the minidump,
    /// read back. No live process is read: not the pid the record names, not any other.
    case recordReport = "record-report"
    /// The kernel's ELF core stream (CoreDumpReader) read as from a pipe, a few bytes at a
    /// time, with small limits (so the caps are reached), then the capture made of it
    /// (CaptureSession.core, without a live process; NT_FILE's paths replaced by `mapsPaths`,
    /// as `record-report` does, so no input opens a file it names).
    case coreStream = "core-stream"
    /// CPython's frames (PythonStackReader) read out of a synthetic memory image: the input's
    /// first byte picks the version, the rest is memory at `pythonBase` with `_PyRuntime` at
    /// its start (FuzzTarget+Python.swift).
    case python
    /// A JIT's perf map (Runtimes' PerfMap): parsed whole and as a tail that starts mid-line,
    /// looked up at addresses across it, its symbols checked sorted and disjoint.
    case perfMap = "perf-map"
    /// A runtime's crash log (Runtimes' RuntimeCrashLogs): the same bytes as the JVM's hs_err
    /// file and as Node's report, then put into an event, titled and shown.
    case runtimeLog = "runtime-log"
    /// The DWARF expression evaluator on arbitrary bytes, with an arbitrary frame state
    /// (FuzzTarget+Variables.swift).
    case dwarfExpression = "dwarf-expr"
    /// A frame's variables (scopes, location lists, the type walker and value formatter) over
    /// an ELF file's DWARF (FuzzTarget+Variables.swift).
    case dwarfTypes = "dwarf-types"
    /// The kernel's log as /dev/kmsg gives it (one record a line here, its ` KEY=VALUE` lines
    /// after it), each record parsed, then selected for the first pid a line names, as root's
    /// report and another user's (FuzzTarget+SystemLog.swift).
    case kmsg
    /// journalctl's output, parsed into a report's lines (FuzzTarget+SystemLog.swift).
    case journal
    /// A package metadata note's descriptor (PackageNote: a flat JSON object of strings), and
    /// the same wrapped in a note area as a process's memory holds it (FuzzTarget+PackageNote.swift).
    case packageNote = "package-note"
    /// /proc/PID/cgroup's text and the node's container files (containerd's, CRI-O's and
    /// podman's, docker's config, the kubelet's hosts file), named (FuzzTarget+Fleet.swift).
    case container
    /// An OpenTelemetry collector's answer, protobuf and JSON (FuzzTarget+Fleet.swift).
    case otlpResponse = "otlp-response"

    /// Runs the target over one input.
    public func run(_ bytes: UnsafeRawBufferPointer) {
        switch self {
        case .elf: Self.elf(bytes)
        case .ehframe: Self.ehframe(bytes)
        case .dwarf: Self.dwarf(bytes)
        case .minidump: Self.minidump(bytes)
        case .event: Self.event(bytes)
        case .wire: Self.wire(bytes)
        case .recordReport: Self.recordReport(bytes)
        case .coreStream: Self.coreStream(bytes)
        case .python: Self.python(bytes)
        case .perfMap: Self.perfMap(bytes)
        case .runtimeLog: Self.runtimeLog(bytes)
        case .dwarfExpression: Self.dwarfExpression(bytes)
        case .dwarfTypes: Self.dwarfTypes(bytes)
        case .kmsg: Self.kmsg(bytes)
        case .journal: Self.journal(bytes)
        case .packageNote: Self.packageNote(bytes)
        case .container: Self.container(bytes)
        case .otlpResponse: Self.otlpResponse(bytes)
        }
    }

    public func run(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { run($0) }
    }

    // MARK: - ELF

    static func elfFile(_ bytes: [UInt8], name: String) -> ELFFile? {
        try? ELFFile(file: MappedFile(bytes: bytes, name: name))
    }

    static func elf(_ input: UnsafeRawBufferPointer) {
        guard let elf = elfFile(Array(input), name: "fuzz.elf") else { return }
        exerciseELF(elf, depth: 0)
    }

    /// Every accessor a report, the unwinder or the locator uses, then the same over the
    /// MiniDebugInfo image inside it (one level deep: an xz bomb of nested images is not news).
    static func exerciseELF(_ elf: ELFFile, depth: Int) {
        _ = elf.buildID
        _ = elf.debugLink
        _ = elf.ehFrameTable
        _ = elf.neededLibraries
        _ = elf.isDynamicallyLinked
        _ = elf.imageVirtualBase
        _ = elf.definesSymbol(named: "main")
        _ = elf.dataSymbolAddress(named: "_PyRuntime")
        for section in elf.sections.prefix(64) { _ = elf.contents(of: section) }
        // Loaded at its own addresses (bias 0), read as the unwinder reads module code.
        let image = ImageMemory(
            modules: [LoadedModule(path: elf.path, base: elf.imageVirtualBase, size: 0, buildID: elf.buildID, object: elf)],
            segments: .all)
        for address in probeAddresses(elf, count: 24) {
            _ = elf.symbols.lookup(address)
            _ = image.bytes(at: address, count: 16)
        }
        // The DWARF sections, inflated when compressed (no lookups: that is the dwarf target).
        _ = DWARFInfo(elf: elf)
        // Compressed sections inflated on demand as well (DWARFSections does it for large ones
        // only): the streaming pass, then ranges from the start, the middle and the whole.
        for section in elf.sections.prefix(64) where elf.compressionHeader(of: section) != nil {
            guard let inflated = elf.inflatedOnDemand(section, scan: { _, _ in }) else { continue }
            let size = inflated.view.count
            for range in [0..<min(size, 64), (size / 2)..<size, 0..<size] {
                inflated.materialize(range)
                _ = inflated.view.u64(UInt64(range.lowerBound))
            }
        }
        if depth == 0, let mini = DebugFileLocator(debugDirectories: []).miniDebugInfo(for: elf) {
            exerciseELF(mini, depth: 1)
        }
    }

    /// Addresses spread over the file's code (executable segments, else executable sections,
    /// as in relocatable objects), plus each edge: where lookups find something to read.
    static func probeAddresses(_ elf: ELFFile, count: Int) -> [UInt64] {
        var ranges = elf.executableRanges.prefix(4).map { $0 }
        if ranges.isEmpty {
            ranges = elf.sections.prefix(256).filter { $0.flags & 4 != 0 && $0.size > 0 }.prefix(4)
                .compactMap { UInt64.checkedRange(start: $0.address, count: $0.size) }
        }
        var addresses: [UInt64] = [0]
        for range in ranges where !range.isEmpty {
            let span = range.upperBound - range.lowerBound
            let steps = UInt64(max(1, count / max(1, ranges.count)))
            let stride = max(1, span / steps)
            var address = range.lowerBound
            for _ in 0..<steps {
                addresses.append(address)
                guard let next = address.checkedAdding(stride), next < range.upperBound else { break }
                address = next
            }
            addresses.append(range.upperBound &- 1)
        }
        return addresses
    }

    // MARK: - .eh_frame

    static func ehframe(_ input: UnsafeRawBufferPointer) {
        let bytes = Array(input)
        guard let elf = elfFile(bytes, name: "fuzz.ehframe") else { return }
        unwind(elf)
        // Again without PT_GNU_EH_FRAME, so the unwinder builds its own index from .eh_frame.
        guard elf.ehFrameTable != nil, let stripped = withoutEHFrameHeader(bytes, elf),
            let other = elfFile(stripped, name: "fuzz.ehframe-nohdr")
        else { return }
        unwind(other)
    }

    /// The bytes with every PT_GNU_EH_FRAME program header turned into PT_NULL.
    static func withoutEHFrameHeader(_ bytes: [UInt8], _ elf: ELFFile) -> [UInt8]? {
        guard let phoff = elf.view.u64(32), let entrySize = elf.view.u16(54) else { return nil }
        var copy = bytes
        for (index, segment) in elf.segments.enumerated() where segment.type == ELFSegment.gnuEHFrame {
            guard let offset = UInt64(index).checkedMultiplying(UInt64(entrySize)).flatMap({ $0.checkedAdding(phoff) }),
                let at = Int(checkedCount: offset, limit: copy.count - 4)
            else { return nil }
            for byte in 0..<4 { copy[at + byte] = 0 }
        }
        return copy
    }

    /// Unwinds from pcs across the code, over a stack that holds pointers into it.
    static func unwind(_ elf: ELFFile) {
        _ = elf.ehFrameTable
        let base: UInt64 = 0x5555_0000_0000
        let bias = base &- elf.imageVirtualBase
        let end = elf.segments.filter { $0.type == ELFSegment.load }.map { $0.vaddr &+ $0.memorySize }.max() ?? 0
        let size = min(end &- elf.imageVirtualBase, 1 << 32)
        let pcs = probeAddresses(elf, count: 8).filter { $0 != 0 }.map { $0 &+ bias }
        guard !pcs.isEmpty else { return }
        let stackStart: UInt64 = 0x7FFF_0000_0000
        var stack = [UInt8](repeating: 0, count: 1024)
        for (slot, pc) in zip(stride(from: 8, to: stack.count, by: 24), pcs.cycled(count: 64)) {
            withUnsafeBytes(of: (pc &+ 5).littleEndian) { for byte in 0..<8 { stack[slot + byte] = $0[byte] } }
        }
        let memory = RegionMemory(regions: [MemoryRegion(start: stackStart, bytes: stack)])
        let unwinder = Unwinder(
            memory: memory, modules: [LoadedModule(path: elf.path, base: base, size: size, buildID: elf.buildID, object: elf)])
        unwinder.maxFrames = 16
        unwinder.headFrames = 8
        unwinder.frameLimit = 64
        for pc in pcs {
            var registers = [UInt64](repeating: 0, count: 27)
            registers[16] = pc  // rip
            registers[19] = stackStart &+ 64  // rsp
            registers[4] = stackStart &+ 256  // rbp
            _ = unwinder.unwind(registers: registers)
        }
    }

    // MARK: - DWARF

    static func dwarf(_ input: UnsafeRawBufferPointer) {
        guard let elf = elfFile(Array(input), name: "fuzz.dwarf"), let info = DWARFInfo(elf: elf) else { return }
        for address in probeAddresses(elf, count: 32) {
            _ = info.frames(at: address)
            _ = info.frames(at: address &+ 1)
            _ = info.callSite(returningTo: address)
            if let entry = info.functionEntry(containing: address) { _ = info.tailCalls(ofFunctionAt: entry, limit: 64) }
        }
    }

    // MARK: - Minidump

    static func minidump(_ input: UnsafeRawBufferPointer) {
        guard let dump = try? Minidump(bytes: Array(input)) else { return }
        for region in (dump.memory.regions + dump.threads.compactMap(\.stack)).prefix(16) {
            _ = dump.memory.bytes(at: region.start, count: 16)
            _ = dump.memory.bytes(at: region.start &+ UInt64(region.bytes.count) &- 8, count: 16)
        }
        for entry in dump.streams.prefix(32) { _ = dump.stream(entry.type) }
        _ = try? OfflineSymbolicator(debugDirectories: []).symbolicate(minidump: dump, name: "fuzz.dmp")
    }

    // MARK: - Event

    static func event(_ input: UnsafeRawBufferPointer) {
        // A run record's start time is the store's word (RunHistory), and names are searched
        // byte for byte (Signature): the input as either.
        let text = String(decoding: input, as: UTF8.self)
        _ = UTCTime.unixMilliseconds(text)
        _ = text.firstUTF8Range(of: text.suffix(3))
        guard let event = try? Event.decode(Data(input)) else { return }
        _ = event.timestamp.flatMap(UTCTime.unixMilliseconds)
        _ = try? event.jsonData()
        _ = CrashLog.full(event)
        _ = CrashLog.summary(event, reportPath: "fuzz.json")
        _ = OfflineSymbolicator(debugDirectories: []).symbolicate(event: event)
    }

    // MARK: - Wire

    static func wire(_ input: UnsafeRawBufferPointer) {
        let bytes = Array(input)
        parseWire(bytes)
        // The header must state the message's own size, magic and version: set them, so the
        // fuzzer spends its time on the fields behind the header.
        guard bytes.count >= WireHeader.byteCount, let size = UInt32(exactly: bytes.count) else { return }
        var fixed = bytes
        for (offset, value) in [(0, UInt32(CP_MAGIC)), (4, UInt32(CP_VERSION)), (8, size)] {
            withUnsafeBytes(of: value.littleEndian) { for byte in 0..<4 { fixed[offset + byte] = $0[byte] } }
        }
        parseWire(fixed)
        // The app area: its magic, version and size set, and stretched to its full size.
        // The input laid over the start of a zeroed area (zero: free slots, quickly skipped).
        var area = [UInt8](repeating: 0, count: AppArea.size)
        area.replaceSubrange(0..<min(bytes.count, area.count), with: bytes.prefix(area.count))
        for (offset, value) in [(0, UInt32(CP_APP_MAGIC)), (4, UInt32(CP_APP_VERSION)), (8, UInt32(AppArea.size))] {
            withUnsafeBytes(of: value.littleEndian) { for byte in 0..<4 { area[offset + byte] = $0[byte] } }
        }
        for candidate in [bytes, area] {
            guard let parsed = try? AppArea(bytes: candidate) else { continue }
            _ = parsed.annotations.map(\.key.count)
            _ = parsed.breadcrumbs.map(\.message.count)
            _ = parsed.exception?.type.count
            // The handled error's own block (crashport_report_error_with): read for an ERROR record.
            _ = parsed.handledErrorDetails?.properties.map(\.value.count)
            _ = parsed.handledErrorDetails?.files.count
            // The handled error's own stack (crashport_report_error_stack): the block the area names.
            _ = AppArea.errorStackAddress(area: candidate)
            _ = HandledErrorStack.size(header: candidate)
            _ = HandledErrorStack(bytes: candidate)?.frames.map { ($0.function?.count, $0.file?.count) }
            _ = AppArea.rangesToRead(header: Array(candidate.prefix(AppArea.headerSize)), errorDetails: true)
            _ = AppArea.readMessages(area: candidate) { address, count in
                Array(candidate.prefix(min(count, Int(truncatingIfNeeded: address & 0xFFFF))))
            }
        }
        // The memory attachments' table at the area's end, the input laid over it: their bytes
        // read (from the input) as capture reads them from a held process.
        let table = MemoryLayout<cp_app_area>.offset(of: \cp_app_area.memory_attachments_used)!
        area.replaceSubrange(
            table..<area.count,
            with: bytes.prefix(area.count - table) + [UInt8](repeating: 0, count: max(0, area.count - table - bytes.count)))
        let attachments = AppArea.readMemoryAttachments(area: area) { address, count in
            Array(bytes.prefix(min(count, Int(truncatingIfNeeded: address & 0xFFFF))))
        }
        _ = attachments.map { MemoryAttachment.checkedContentType($0.contentType) }
    }

    static func parseWire(_ bytes: [UInt8]) {
        _ = try? WireHeader(bytes: bytes)
        _ = try? HelloMessage(bytes: bytes)
        _ = try? GoodbyeMessage(bytes: bytes)
        _ = try? LaunchMessage(bytes: bytes)
        _ = try? ConsentMessage(bytes: bytes)
        _ = try? PendingQuery.check(bytes)
        _ = try? ReportStateList(bytes: bytes)
        _ = (try? PendingList(bytes: bytes))?.entries.map(\.title.count)
        _ = try? ConsentReportMessage(bytes: bytes)
        _ = try? HelloReply(bytes: bytes)
        _ = try? SpooledRecord(bytes: bytes)
        if let record = try? CrashRecord(bytes: bytes) {
            _ = record.stackTruncated
            _ = record.forwardedFirst
            _ = record.reraise
        }
    }
}

// MARK: - Record to report

extension FuzzTarget {
    /// The modules' files, parsed once for every input that names them.
    static let recordCache = ELFCache()
    /// The only paths a maps line of an input keeps: any other is replaced by one of these, so
    /// that an input opens no file it names (a FIFO, a device), only real ELF files or none.
    static let mapsPaths = [
        "", "[stack]", "[heap]", "[vdso]", "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    ]

    /// The input: a record's wire bytes (a CRASH or ERROR message, its stack copy as long as
    /// its stack_size says, up to the input's end), then a maps text. The record's header and
    /// stack_size are set to agree with that split, so the fuzzer spends its time on the
    /// fields behind them; the reserved word after stack_size chooses a record the watcher
    /// makes itself (bits 0-1: 1 a hang of fault_address ms, 2 an exit with status `code`;
    /// bits 2-3 the exit's cause).
    static func recordReport(_ input: UnsafeRawBufferPointer) {
        _ = report(ofRecord: Array(input))
    }

    /// What `record-report` makes of an input: the event and the minidump's bytes; nil when
    /// the bytes are not a record (the wire parser's error is the answer then).
    public static func report(ofRecord bytes: [UInt8]) -> (event: Event, minidump: [UInt8])? {
        let fixed = CrashRecord.fixedSize
        guard bytes.count >= fixed else { return nil }
        let wire = { (offset: Int) in
            UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
                | UInt32(bytes[offset + 3]) << 24
        }
        let stackSizeOffset = MemoryLayout<cp_crash>.offset(of: \cp_crash.stack_size)!
        let stackSize = min(Int(wire(stackSizeOffset)), bytes.count - fixed, Int(CP_STACK_COPY_MAX))
        let recordEnd = fixed + stackSize
        var message = Array(bytes[..<recordEnd])
        let type = wire(12) == CP_MSG_ERROR.rawValue ? CP_MSG_ERROR.rawValue : CP_MSG_CRASH.rawValue
        for (offset, value) in [
            (0, UInt32(CP_MAGIC)), (4, UInt32(CP_VERSION)), (8, UInt32(recordEnd)), (12, type),
            (stackSizeOffset, UInt32(stackSize)),
        ] {
            withUnsafeBytes(of: value.littleEndian) { for byte in 0..<4 { message[offset + byte] = $0[byte] } }
        }
        guard var record = try? CrashRecord(bytes: message) else { return nil }
        let choice = wire(stackSizeOffset + 4)
        switch choice & 3 {
        case 1: record.observation = .hang(milliseconds: record.faultAddress)
        case 2:
            let causes = ["exit", "signal", "oom-kill", Watchdog.cause]
            record.observation = .exit(status: record.code, cause: causes[Int(choice >> 2 & 3)])
        default: break
        }
        let maps = recordMaps(Array(bytes[recordEnd...]), stack: record.stack)
        var capture = CaptureSession.spooled(
            record: record, executable: nil, maps: maps, mapsTruncated: false, cache: recordCache)
        capture.stackStrings = StackStrings.read(record: record, mappings: MemoryMapping.parse(maps))
        if record.isError { capture.app = errorStackArea(Array(bytes[fixed..<recordEnd]), record: record) }
        let fileBytes = UnwindFileBytes()
        var event = ReportBuilder.event(
            for: capture, id: "fuzz-record", timestamp: "2026-01-01T00:00:00.000Z", fileBytes: fileBytes)
        event.capturedFrom = "spool"
        _ = try? event.jsonData()
        _ = CrashLog.full(event)
        _ = CrashLog.summary(event, reportPath: "fuzz-record")
        _ = CrashLog.oneLine(event)
        _ = try? SentryEvent.jsonData(for: event, options: SentryEvent.Options(sdkVersion: "fuzz"))
        var snapshot = capture.snapshot
        snapshot.extraMemory += fileBytes.regions
        let dump = MinidumpWriter().bytes(for: snapshot)
        _ = try? Minidump(bytes: dump)
        return (event, dump)
    }

    /// An ERROR record's stack copy read as the handled error's own stack block (cp_error_stack),
    /// marked complete and in use by the record's thread, so that its frames reach the report.
    static func errorStackArea(_ block: [UInt8], record: CrashRecord) -> AppArea {
        var block = block
        if block.count >= HandledErrorStack.headerSize {
            let fields = [
                (MemoryLayout<cp_error_stack>.offset(of: \cp_error_stack.flags)!, UInt32(CP_SLOT_USED)),
                (MemoryLayout<cp_error_stack>.offset(of: \cp_error_stack.tid)!, UInt32(bitPattern: record.tid.rawValue)),
            ]
            for (offset, value) in fields {
                withUnsafeBytes(of: value.littleEndian) { for byte in 0..<4 { block[offset + byte] = $0[byte] } }
            }
            block[0] &= 0xFE  // the sequence even: not being written
        }
        var app = AppArea()
        app.handledErrorStack = HandledErrorStack(bytes: block)
        return app
    }

    /// The input's maps lines (at most 64), each with its path kept only when it is one of
    /// `mapsPaths` (else replaced by one of them), and a `[stack]` line over the record's stack
    /// copy: a stack the record's pointers may point into, as the stub's maps would show it.
    static func recordMaps(_ text: [UInt8], stack: MemoryRegion) -> String {
        func hex(_ value: UInt64) -> String { String(value, radix: 16) }
        var lines: [String] = []
        if stack.start < stack.end {
            lines.append("\(hex(stack.start))-\(hex(stack.end)) rw-p 00000000 00:00 0 [stack]")
        }
        for mapping in MemoryMapping.parse(text).prefix(64) {
            let path = mapsPaths.contains(mapping.path) ? mapping.path : mapsPaths[mapping.path.utf8.count % mapsPaths.count]
            let perms =
                (mapping.readable ? "r" : "-") + (mapping.writable ? "w" : "-") + (mapping.executable ? "x" : "-") + "p"
            lines.append(
                "\(hex(mapping.start))-\(hex(mapping.end)) \(perms) \(hex(mapping.offset)) 00:00 \(mapping.inode) \(path)")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

// MARK: - Core stream

extension FuzzTarget {
    /// Limits small enough for an input of at most 64 KiB to reach every cap.
    static let coreLimits: CoreDumpReader.Limits = {
        var limits = CoreDumpReader.Limits()
        limits.threads = 16
        limits.keptBytes = 16 << 10
        limits.crashedThreadStack = 8 << 10
        limits.threadStack = 1 << 10
        limits.programHeaders = 64
        limits.notesBytes = 32 << 10
        limits.files = 32
        limits.chunkSize = 512
        return limits
    }()

    static func coreStream(_ input: UnsafeRawBufferPointer) {
        let bytes = Array(input)
        readCore(bytes)
        // The ELF header's fixed fields set (magic, ELFCLASS64, ELFDATA2LSB, ET_CORE, EM_X86_64,
        // e_phentsize 56), so the fuzzer spends its time behind them.
        guard bytes.count >= 64 else { return }
        var fixed = bytes
        fixed.replaceSubrange(0..<6, with: [0x7F, 0x45, 0x4C, 0x46, 2, 1])
        for (offset, value) in [(16, UInt16(4)), (18, UInt16(62)), (54, UInt16(56))] {
            fixed[offset] = UInt8(truncatingIfNeeded: value)
            fixed[offset + 1] = UInt8(truncatingIfNeeded: value >> 8)
        }
        readCore(fixed)
    }

    static func readCore(_ bytes: [UInt8]) {
        // Reads of 1 to 61 bytes, varying as a pipe's do.
        var position = 0, turn = 0
        let source: CoreStream.Source = { buffer in
            turn += 1
            let count = min(buffer.count, bytes.count - position, 1 + (turn * 7 + bytes.count) % 61)
            guard count > 0 else { return 0 }
            bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[position..<position + count])) }
            position += count
            return count
        }
        guard var dump = try? CoreDumpReader.read(from: source, limits: coreLimits) else { return }
        _ = dump.mapsText
        _ = dump.auxiliaryVector
        for index in dump.files.indices {
            let path = dump.files[index].path
            dump.files[index].path = mapsPaths.contains(path) ? path : mapsPaths[path.utf8.count % mapsPaths.count]
        }
        guard let capture = CaptureSession.core(dump, access: nil, cache: recordCache, timeNanoseconds: 0) else { return }
        _ = RegionMemory(regions: capture.snapshot.threads.compactMap(\.stack) + capture.snapshot.extraMemory)
    }
}

extension Array {
    /// The elements repeated until there are `count` of them (empty stays empty).
    fileprivate func cycled(count: Int) -> [Element] {
        guard !isEmpty else { return [] }
        return (0..<count).map { self[$0 % self.count] }
    }
}
