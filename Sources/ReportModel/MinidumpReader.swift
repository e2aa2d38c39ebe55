// Minidump: a bounds-checked reader for the minidumps crashport writes and for Linux dumps from
// Breakpad and Crashpad, used by the offline `crashport symbolicate FILE.dmp`.
//
// Every stream is decoded when the file is opened, so a malformed file fails there with a
// `MinidumpError.malformed` that says what and where, never later and never with a trap. Only the
// optional ThreadNames, MiscInfo and CrashpadInfo streams are soft: a corrupt one is skipped and
// noted in `warnings` (in CrashpadInfo, a corrupt annotation alone is skipped), since losing a
// report over a thread name or an annotation would be a poor trade. Every offset is checked
// against the file, arithmetic is done in UInt64 or checked, counts are capped by the bytes their
// stream holds, and the bytes copied out (stacks, memory, strings) are budgeted against the file
// size, so a hostile file can neither crash nor hang the reader nor make it allocate more than a
// small multiple of its own size.
//
// Tolerated, as other consumers do: nullified directory entries (type 0), missing optional streams,
// no ThreadNames, duplicate stream types (the first wins), 4 bytes of padding between a list's count
// and its entries (spec §1.4), non-x86_64 contexts (their registers are nil), MiscInfo of any
// version, and 'RSDS' CodeView records from old Breakpad writers (their GUID serves as the id).

import BoundedBytes
import ObjectFile

private typealias MD = MinidumpFormat

/// A minidump read into memory. Immutable once read; safe to share between threads.
public struct Minidump: Sendable {
    /// A MINIDUMP_LOCATION_DESCRIPTOR: `dataSize` bytes at file offset `rva`.
    public struct Location: Sendable, Hashable {
        public var dataSize: UInt32
        public var rva: UInt32

        public init(dataSize: UInt32, rva: UInt32) {
            self.dataSize = dataSize
            self.rva = rva
        }
    }

    /// One MINIDUMP_DIRECTORY entry.
    public struct DirectoryEntry: Sendable, Hashable {
        /// A `MinidumpFormat.MINIDUMP_STREAM_TYPE` value.
        public var type: UInt32
        public var location: Location
    }

    public struct Thread: Sendable, Equatable {
        public var tid: UInt32
        /// From the ThreadNames stream; nil when the dump has none for this thread.
        public var name: String?
        /// The CONTEXT_AMD64 registers. orig_rax and gs_base have no slot in the context and read
        /// as 0; fs_base comes from `teb`. Nil for a context of another CPU or none at all.
        public var registers: X86_64Registers?
        /// The captured stack; nil when none was captured.
        public var stack: MemoryRegion?
        /// MINIDUMP_THREAD.teb: the thread pointer (fs_base) for crashport and Crashpad, 0 for Breakpad.
        public var teb: UInt64
        /// Where the raw context is, for a caller that decodes another CPU's layout.
        public var context: Location
    }

    public struct Exception: Sendable, Equatable {
        /// The crashed thread (a ThreadList tid).
        public var threadID: UInt32
        /// signal = exception_code, code = exception_flags (si_code), faultAddress = exception_address.
        /// `senderPID` is not stored in a minidump and is nil.
        public var info: ExceptionInfo
        /// The faulting context (preferred over the thread's own context by other readers too).
        public var registers: X86_64Registers?
        public var context: Location
        /// exception_code 0xFFFFFFFF: the dump was requested, nothing crashed.
        public var isDumpRequested: Bool { UInt32(bitPattern: info.signal) == MD.MINIDUMP_EXCEPTION_STREAM.DUMP_REQUESTED }
    }

    /// The SystemInfo stream: the raw fields and the model's view of them.
    public struct SystemInformation: Sendable, Equatable {
        public var processorArchitecture: UInt16
        public var platformID: UInt32
        public var majorVersion: UInt32
        public var minorVersion: UInt32
        public var buildNumber: UInt32
        /// `uname -srvm` for Linux writers.
        public var csdVersion: String
        /// The same data as the snapshot model; uname fields are split out of `csdVersion`.
        public var system: SystemInfo
    }

    /// The file's bytes.
    private let file: [UInt8]

    /// MINIDUMP_HEADER.time_date_stamp: when the dump was written (Unix seconds).
    public var timeDateStamp: UInt32
    /// The stream directory as stored, nullified entries included.
    public var streams: [DirectoryEntry]
    public var threads: [Thread]
    /// The ModuleList; the vDSO ("linux-gate.so") is given back its mapping name "[vdso]".
    public var modules: [LoadedModule]
    public var exception: Exception?
    public var systemInfo: SystemInformation?
    public var threadNames: [UInt32: String]
    /// The MemoryList: every captured range (stacks included), readable by address.
    public var memory: RegionMemory
    /// From MiscInfo, else from the `Pid:` line of LinuxProcStatus.
    public var pid: Int32?
    /// MiscInfo process_create_time (Unix seconds), when present.
    public var processCreateTime: UInt32?
    /// CrashpadInfo's simple_annotations in the file's order: the program's annotations in a
    /// crashport dump. `truncated` is always false, since the stream has no place for it.
    public var annotations: [Annotation]
    /// Optional streams or records that were malformed and skipped (ThreadNames, MiscInfo,
    /// CrashpadInfo), one line each.
    public var warnings: [String]

    public init(path: String) throws {
        try self.init(bytes: MinidumpFile.readAll(path))
    }

    public init(bytes: [UInt8]) throws {
        var parser = Parser(file: bytes)
        file = bytes
        (timeDateStamp, streams) = try parser.header()

        var first: [UInt32: DirectoryEntry] = [:]
        for entry in streams where entry.type != MD.MINIDUMP_STREAM_TYPE.UnusedStream && first[entry.type] == nil {
            first[entry.type] = entry
        }
        let type = MD.MINIDUMP_STREAM_TYPE.self

        var warnings: [String] = []
        // ThreadNames and MiscInfo only add detail: a corrupt one is dropped with a warning rather
        // than costing the whole report.
        do {
            threadNames = try first[type.ThreadNames].map { try parser.threadNames($0.location) } ?? [:]
        } catch {
            threadNames = [:]
            warnings.append("ThreadNames stream ignored: \(error)")
        }
        threads = try first[type.ThreadList].map { try parser.threads($0.location) } ?? []
        for index in threads.indices { threads[index].name = threadNames[threads[index].tid] }
        modules = try first[type.ModuleList].map { try parser.modules($0.location) } ?? []
        memory = RegionMemory(regions: try first[type.MemoryList].map { try parser.memoryList($0.location) } ?? [])
        exception = try first[type.Exception].map { try parser.exception($0.location) }
        // The exception context has no teb of its own; fs_base comes from the crashed thread's.
        if let crashed = exception?.threadID, let teb = threads.first(where: { $0.tid == crashed })?.teb, teb != 0 {
            exception?.registers?.gpr[MD.fsBaseIndex] = teb
        }
        systemInfo = try first[type.SystemInfo].map { try parser.systemInfo($0.location) }
        var misc: (pid: Int32?, createTime: UInt32?)?
        do {
            misc = try first[type.MiscInfo].map { try parser.miscInfo($0.location) }
        } catch {
            warnings.append("MiscInfo stream ignored: \(error)")
        }
        pid = misc?.pid
        processCreateTime = misc?.createTime
        do {
            let crashpad = try first[type.CrashpadInfo].map { try parser.crashpadAnnotations($0.location) }
            annotations = crashpad?.annotations ?? []
            if let crashpad, crashpad.skipped > 0, let reason = crashpad.firstSkipReason {
                warnings.append("CrashpadInfo: \(crashpad.skipped) unreadable annotation(s) skipped, the first: \(reason)")
            }
        } catch {
            annotations = []
            warnings.append("CrashpadInfo stream ignored: \(error)")
        }
        if pid == nil, let status = first[type.LinuxProcStatus] {
            pid = Self.pidLine(in: try parser.raw(status.location, "LinuxProcStatus"))
        }
        self.warnings = warnings
    }

    /// The raw bytes of the first stream of `type` (for the Linux text streams), nil if absent.
    public func stream(_ type: UInt32) -> [UInt8]? {
        guard let entry = streams.first(where: { $0.type == type && type != MD.MINIDUMP_STREAM_TYPE.UnusedStream }) else {
            return nil
        }
        return bytes(of: entry.location)
    }

    /// The bytes at a location in the file, nil if it lies outside.
    public func bytes(of location: Location) -> [UInt8]? {
        let start = Int(location.rva)
        let end = start + Int(location.dataSize)
        guard end <= file.count else { return nil }
        return Array(file[start..<end])
    }

    /// The value of the first `Pid:` line of /proc/<pid>/status text.
    static func pidLine(in status: [UInt8]) -> Int32? {
        for line in status.split(separator: UInt8(ascii: "\n")) {
            let text = String(decoding: line, as: UTF8.self)
            if text.hasPrefix("Pid:") {
                return Int32(String(text.dropFirst(4).filter { $0 != " " && $0 != "\t" }))
            }
        }
        return nil
    }
}

// MARK: - Parsing

/// The decoding state: the file and what is left of the copy budget.
private struct Parser {
    let file: [UInt8]
    /// Bytes that may still be copied out of the file. A valid dump copies each stack twice (its
    /// thread and the MemoryList) and decodes each context into registers; four times the file
    /// size covers that, and stops a file whose entries all point at one large blob.
    var budget: Int

    init(file: [UInt8]) {
        self.file = file
        budget = file.count.multipliedReportingOverflow(by: 4).partialValue + (1 << 20)
    }

    func fail(_ message: String) -> MinidumpError { .malformed(message) }

    static func hex<T: BinaryInteger>(_ value: T) -> String { "0x" + String(value, radix: 16) }

    // MARK: Bounds-checked primitives

    /// The file range `offset ..< offset + count`, or an error naming `what`.
    func range(_ offset: UInt64, _ count: UInt64, _ what: @autoclosure () -> String) throws -> Range<Int> {
        let (end, overflow) = offset.addingReportingOverflow(count)
        guard !overflow, end <= UInt64(file.count) else {
            throw fail("\(what()) at \(Self.hex(offset)) (\(count) bytes) extends past the end of the file (\(file.count) bytes)")
        }
        return Int(offset)..<Int(end)
    }

    func integer(_ offset: UInt64, width: Int, _ what: @autoclosure () -> String) throws -> UInt64 {
        let bytes = try range(offset, UInt64(width), what())
        var value: UInt64 = 0
        for index in bytes.reversed() { value = value << 8 | UInt64(file[index]) }
        return value
    }

    func u8(_ offset: UInt64, _ what: @autoclosure () -> String) throws -> UInt8 {
        UInt8(truncatingIfNeeded: try integer(offset, width: 1, what()))
    }

    func u16(_ offset: UInt64, _ what: @autoclosure () -> String) throws -> UInt16 {
        UInt16(truncatingIfNeeded: try integer(offset, width: 2, what()))
    }

    func u32(_ offset: UInt64, _ what: @autoclosure () -> String) throws -> UInt32 {
        UInt32(truncatingIfNeeded: try integer(offset, width: 4, what()))
    }

    func u64(_ offset: UInt64, _ what: @autoclosure () -> String) throws -> UInt64 {
        try integer(offset, width: 8, what())
    }

    func location(_ offset: UInt64, _ what: @autoclosure () -> String) throws -> Minidump.Location {
        Minidump.Location(dataSize: try u32(offset, what()), rva: try u32(offset + 4, what()))
    }

    /// Copies a range out of the file, charging the budget.
    mutating func copy(_ offset: UInt64, _ count: UInt64, _ what: @autoclosure () -> String) throws -> [UInt8] {
        let bytes = try range(offset, count, what())
        try charge(bytes.count, what())
        return Array(file[bytes])
    }

    mutating func charge(_ count: Int, _ what: @autoclosure () -> String) throws {
        guard count <= budget else {
            throw fail("\(what()): the dump refers to far more data than the file holds (entries reuse the same bytes)")
        }
        budget -= count
    }

    mutating func raw(_ location: Minidump.Location, _ what: String) throws -> [UInt8] {
        try copy(UInt64(location.rva), UInt64(location.dataSize), what)
    }

    /// A MINIDUMP_STRING at `rva`.
    mutating func string(_ rva: UInt64, _ what: @autoclosure () -> String) throws -> String {
        let length = try u32(rva, what())
        guard length % 2 == 0 else { throw fail("\(what()) at \(Self.hex(rva)) has an odd byte length \(length)") }
        let bytes = try range(rva + 4, UInt64(length), what())
        try charge(bytes.count, what())
        var units: [UInt16] = []
        units.reserveCapacity(bytes.count / 2)
        var index = bytes.lowerBound
        while index < bytes.upperBound {
            units.append(UInt16(file[index]) | UInt16(file[index + 1]) << 8)
            index += 2
        }
        return String(decoding: units, as: UTF16.self)
    }

    /// A MINIDUMP_UTF8_STRING at `rva`: u32 byte length, then the bytes. The terminating NUL is
    /// not required; invalid UTF-8 becomes U+FFFD.
    mutating func utf8String(_ rva: UInt64, _ what: @autoclosure () -> String) throws -> String {
        let length = try u32(rva, what())
        let bytes = try range(rva + UInt64(MD.MINIDUMP_UTF8_STRING.headerSize), UInt64(length), what())
        try charge(bytes.count, what())
        return String(decoding: file[bytes], as: UTF8.self)
    }

    /// Checks a list stream (u32 count + entries) and returns the count and the entries' offset.
    /// Exactly 4 spare bytes are padding between the count and the array, as rust-minidump and
    /// LLVM read them; the count may never exceed what the stream holds.
    func list(_ location: Minidump.Location, entrySize: Int, _ what: String) throws -> (count: Int, first: UInt64) {
        guard location.dataSize >= 4 else { throw fail("\(what) stream is \(location.dataSize) bytes, too short for its count") }
        let rva = UInt64(location.rva)
        let count = UInt64(try u32(rva, "\(what) count"))
        let available = UInt64(location.dataSize) - 4
        let needed = count * UInt64(entrySize)  // < 2^32 * 2^7, cannot overflow
        guard needed <= available else {
            throw fail("\(what) claims \(count) entries of \(entrySize) bytes but its stream holds \(available)")
        }
        let padding: UInt64 = available - needed == 4 ? 4 : 0
        return (Int(count), rva + 4 + padding)
    }

    // MARK: Header and directory

    mutating func header() throws -> (UInt32, [Minidump.DirectoryEntry]) {
        guard file.count >= MD.MINIDUMP_HEADER.size else {
            throw fail("the file is \(file.count) bytes, shorter than the \(MD.MINIDUMP_HEADER.size)-byte header")
        }
        let signature = try u32(0, "header")
        guard signature == MD.MINIDUMP_HEADER.signature else {
            throw fail("signature is \(Self.hex(signature)), not \"MDMP\" (0x504d444d)")
        }
        let version = try u32(4, "header")
        guard version & MD.MINIDUMP_HEADER.versionMask == MD.MINIDUMP_HEADER.version else {
            throw fail("version is \(Self.hex(version)), not 0xa793")
        }
        let count = UInt64(try u32(8, "header"))
        let directoryRVA = UInt64(try u32(12, "header"))
        let timeDateStamp = try u32(20, "header")
        _ = try range(directoryRVA, count * UInt64(MD.MINIDUMP_DIRECTORY.size), "stream directory of \(count) entries")

        var entries: [Minidump.DirectoryEntry] = []
        entries.reserveCapacity(Int(count))
        for index in 0..<count {
            let offset = directoryRVA + index * UInt64(MD.MINIDUMP_DIRECTORY.size)
            let type = try u32(offset, "directory entry \(index)")
            let location = try self.location(offset + 4, "directory entry \(index)")
            let name = MD.MINIDUMP_STREAM_TYPE.name(type)
            _ = try range(UInt64(location.rva), UInt64(location.dataSize), "stream \(index) (\(name))")
            entries.append(Minidump.DirectoryEntry(type: type, location: location))
        }
        return (timeDateStamp, entries)
    }

    // MARK: Streams

    mutating func threads(_ location: Minidump.Location) throws -> [Minidump.Thread] {
        let (count, first) = try list(location, entrySize: MD.MINIDUMP_THREAD.size, "ThreadList")
        var threads: [Minidump.Thread] = []
        threads.reserveCapacity(count)
        for index in 0..<count {
            let entry = first + UInt64(index * MD.MINIDUMP_THREAD.size)
            let what = "ThreadList entry \(index)"
            let tid = try u32(entry, what)
            let teb = try u64(entry + UInt64(MD.MINIDUMP_THREAD.offsetOfTeb), what)
            let stackStart = try u64(entry + UInt64(MD.MINIDUMP_THREAD.offsetOfStack), what)
            let stackLocation = try self.location(entry + UInt64(MD.MINIDUMP_THREAD.offsetOfStack) + 8, what)
            let context = try self.location(entry + UInt64(MD.MINIDUMP_THREAD.offsetOfThreadContext), what)
            var stack: MemoryRegion?
            if stackLocation.dataSize > 0 {
                let bytes = try raw(stackLocation, "\(what) (tid \(tid)) stack")
                stack = MemoryRegion(start: stackStart, bytes: bytes)
            }
            var registers = try self.registers(context, "\(what) (tid \(tid)) context")
            if teb != 0 { registers?.gpr[MD.fsBaseIndex] = teb }
            threads.append(Minidump.Thread(tid: tid, name: nil, registers: registers, stack: stack, teb: teb, context: context))
        }
        return threads
    }

    /// Decodes a CONTEXT_AMD64; nil for an empty location or another CPU's context.
    mutating func registers(_ location: Minidump.Location, _ what: String) throws -> X86_64Registers? {
        guard location.dataSize > 0 else { return nil }
        let base = UInt64(location.rva)
        _ = try range(base, UInt64(location.dataSize), what)
        guard location.dataSize >= MD.CONTEXT_AMD64.size else { return nil }
        let flags = try u32(base + UInt64(MD.CONTEXT_AMD64.offsetOfContextFlags), what)
        guard flags & MD.CONTEXT_AMD64.CONTEXT_AMD64 != 0 else { return nil }
        try charge(MD.CONTEXT_AMD64.size, what)

        var gpr = [UInt64](repeating: 0, count: X86_64Registers.gprCount)
        for slot in MD.amd64ContextSlots {
            gpr[slot.gprIndex] = try integer(base + UInt64(slot.offset), width: slot.width, what)
        }
        var fxsave: [UInt8] = []
        if flags & MD.CONTEXT_AMD64.FLOATING_POINT == MD.CONTEXT_AMD64.FLOATING_POINT {
            let start = base + UInt64(MD.CONTEXT_AMD64.offsetOfFltSave)
            fxsave = Array(file[try range(start, UInt64(MD.CONTEXT_AMD64.fltSaveSize), what)])
        }
        return X86_64Registers(gpr: gpr, fxsave: fxsave)
    }

    mutating func modules(_ location: Minidump.Location) throws -> [LoadedModule] {
        let (count, first) = try list(location, entrySize: MD.MINIDUMP_MODULE.size, "ModuleList")
        var modules: [LoadedModule] = []
        modules.reserveCapacity(count)
        for index in 0..<count {
            let entry = first + UInt64(index * MD.MINIDUMP_MODULE.size)
            let what = "ModuleList entry \(index)"
            let base = try u64(entry + UInt64(MD.MINIDUMP_MODULE.offsetOfBaseOfImage), what)
            let size = try u32(entry + UInt64(MD.MINIDUMP_MODULE.offsetOfSizeOfImage), what)
            let nameRVA = try u32(entry + UInt64(MD.MINIDUMP_MODULE.offsetOfModuleNameRVA), what)
            let cv = try self.location(entry + UInt64(MD.MINIDUMP_MODULE.offsetOfCvRecord), what)
            var path = try string(UInt64(nameRVA), "\(what) name")
            if path == MD.vdsoModuleName { path = MD.vdsoMappingName }
            let buildID = try codeViewID(cv, "\(what) (\(path)) CodeView record")
            modules.append(LoadedModule(path: path, base: base, size: UInt64(size), buildID: BuildID(buildID)))
        }
        return modules
    }

    /// The identifier in a CodeView record: the build id of 'BpEL', the GUID of 'RSDS' (whose
    /// Breakpad debug id is then the same), empty for none or an unknown kind.
    mutating func codeViewID(_ location: Minidump.Location, _ what: String) throws -> [UInt8] {
        guard location.dataSize >= 4 else { return [] }
        let rva = UInt64(location.rva)
        switch try u32(rva, what) {
        case MD.CV_INFO_ELF.signature:
            return try copy(rva + 4, UInt64(location.dataSize) - 4, what)
        case MD.CV_INFO_PDB70.signature where location.dataSize >= MD.CV_INFO_PDB70.minimumSize:
            return try copy(rva + 4, 16, what)
        default:
            return []
        }
    }

    mutating func memoryList(_ location: Minidump.Location) throws -> [MemoryRegion] {
        let (count, first) = try list(location, entrySize: MD.MINIDUMP_MEMORY_DESCRIPTOR.size, "MemoryList")
        var regions: [MemoryRegion] = []
        regions.reserveCapacity(count)
        for index in 0..<count {
            let entry = first + UInt64(index * MD.MINIDUMP_MEMORY_DESCRIPTOR.size)
            let what = "MemoryList entry \(index)"
            let start = try u64(entry, what)
            let bytes = try raw(try self.location(entry + 8, what), "\(what) (\(Self.hex(start)))")
            regions.append(MemoryRegion(start: start, bytes: bytes))
        }
        return regions
    }

    mutating func exception(_ location: Minidump.Location) throws -> Minidump.Exception {
        let what = "Exception stream"
        guard location.dataSize >= MD.MINIDUMP_EXCEPTION_STREAM.size else {
            throw fail("\(what) is \(location.dataSize) bytes, shorter than \(MD.MINIDUMP_EXCEPTION_STREAM.size)")
        }
        let base = UInt64(location.rva)
        let threadID = try u32(base + UInt64(MD.MINIDUMP_EXCEPTION_STREAM.offsetOfThreadID), what)
        let code = try u32(base + UInt64(MD.MINIDUMP_EXCEPTION_STREAM.offsetOfExceptionCode), what)
        let flags = try u32(base + UInt64(MD.MINIDUMP_EXCEPTION_STREAM.offsetOfExceptionFlags), what)
        let address = try u64(base + UInt64(MD.MINIDUMP_EXCEPTION_STREAM.offsetOfExceptionAddress), what)
        let context = try self.location(base + UInt64(MD.MINIDUMP_EXCEPTION_STREAM.offsetOfThreadContext), what)
        let info = ExceptionInfo(signal: Int32(bitPattern: code), code: Int32(bitPattern: flags), faultAddress: address)
        let registers = try self.registers(context, "\(what) context")
        return Minidump.Exception(threadID: threadID, info: info, registers: registers, context: context)
    }

    mutating func systemInfo(_ location: Minidump.Location) throws -> Minidump.SystemInformation {
        let what = "SystemInfo stream"
        guard location.dataSize >= MD.MINIDUMP_SYSTEM_INFO.size else {
            throw fail("\(what) is \(location.dataSize) bytes, shorter than \(MD.MINIDUMP_SYSTEM_INFO.size)")
        }
        let base = UInt64(location.rva)
        let architecture = try u16(base, what)
        let level = try u16(base + 2, what)
        let revision = try u16(base + 4, what)
        let processors = try u8(base + 6, what)
        let major = try u32(base + 8, what)
        let minor = try u32(base + 12, what)
        let build = try u32(base + 16, what)
        let platform = try u32(base + 20, what)
        let csdRVA = try u32(base + UInt64(MD.MINIDUMP_SYSTEM_INFO.offsetOfCsdVersionRVA), what)
        let csd = csdRVA == 0 ? "" : try string(UInt64(csdRVA), "SystemInfo csd_version")

        var system = SystemInfo()
        system.cpuCount = Int(processors)
        system.cpuFamily = level
        system.cpuModel = revision >> 8
        system.cpuStepping = revision & 0xFF
        if architecture == MD.MINIDUMP_SYSTEM_INFO.PROCESSOR_ARCHITECTURE_AMD64 || architecture == 0 {
            let vendor = try range(
                base + UInt64(MD.MINIDUMP_SYSTEM_INFO.offsetOfCpu),
                UInt64(MD.MINIDUMP_SYSTEM_INFO.vendorIDSize), what)
            system.cpuVendor = String(decoding: file[vendor].prefix { $0 != 0 }, as: UTF8.self)
        }
        // csd_version is `uname -srvm`: sysname, release, version (with spaces), machine.
        let spaces = csd.indices.filter { csd[$0] == " " }
        if spaces.count >= 3 {
            system.sysname = String(csd[..<spaces[0]])
            system.release = String(csd[csd.index(after: spaces[0])..<spaces[1]])
            system.version = String(csd[csd.index(after: spaces[1])..<spaces[spaces.count - 1]])
            system.machine = String(csd[csd.index(after: spaces[spaces.count - 1])...])
        } else {
            system.sysname = platform == MD.MINIDUMP_SYSTEM_INFO.PLATFORM_LINUX ? "Linux" : ""
            system.release = "\(major).\(minor).\(build)"
            system.version = csd
            switch architecture {
            case MD.MINIDUMP_SYSTEM_INFO.PROCESSOR_ARCHITECTURE_AMD64: system.machine = "x86_64"
            case MD.MINIDUMP_SYSTEM_INFO.PROCESSOR_ARCHITECTURE_ARM64,
                MD.MINIDUMP_SYSTEM_INFO.PROCESSOR_ARCHITECTURE_ARM64_OLD:
                system.machine = "aarch64"
            default: system.machine = ""
            }
        }
        return Minidump.SystemInformation(
            processorArchitecture: architecture, platformID: platform, majorVersion: major,
            minorVersion: minor, buildNumber: build, csdVersion: csd, system: system)
    }

    func miscInfo(_ location: Minidump.Location) throws -> (pid: Int32?, createTime: UInt32?) {
        let what = "MiscInfo stream"
        guard location.dataSize >= MD.MINIDUMP_MISC_INFO.size else {
            throw fail("\(what) is \(location.dataSize) bytes, shorter than \(MD.MINIDUMP_MISC_INFO.size)")
        }
        let base = UInt64(location.rva)
        let flags = try u32(base + 4, what)
        let pid = try u32(base + 8, what)
        let createTime = try u32(base + 12, what)
        return (
            flags & MD.MINIDUMP_MISC_INFO.MINIDUMP_MISC1_PROCESS_ID != 0 ? Int32(bitPattern: pid) : nil,
            flags & MD.MINIDUMP_MISC_INFO.MINIDUMP_MISC1_PROCESS_TIMES != 0 ? createTime : nil
        )
    }

    /// CrashpadInfo's simple_annotations. A stream shorter than MINIDUMP_CRASHPAD_INFO or a
    /// dictionary that does not fit its location throws; an entry whose key or value cannot be
    /// read is skipped and counted, with the reason for the first one kept.
    mutating func crashpadAnnotations(
        _ location: Minidump.Location
    ) throws -> (annotations: [Annotation], skipped: Int, firstSkipReason: String?) {
        let what = "CrashpadInfo stream"
        guard location.dataSize >= MD.MINIDUMP_CRASHPAD_INFO.size else {
            throw fail("\(what) is \(location.dataSize) bytes, shorter than \(MD.MINIDUMP_CRASHPAD_INFO.size)")
        }
        let dictionary = try self.location(
            UInt64(location.rva) + UInt64(MD.MINIDUMP_CRASHPAD_INFO.offsetOfSimpleAnnotations), what)
        // Crashpad leaves the location zero when there are none.
        guard dictionary.dataSize > 0 else { return ([], 0, nil) }
        _ = try range(UInt64(dictionary.rva), UInt64(dictionary.dataSize), "CrashpadInfo simple_annotations")
        let (count, first) = try list(
            dictionary, entrySize: MD.MINIDUMP_SIMPLE_STRING_DICTIONARY_ENTRY.size, "CrashpadInfo simple_annotations")
        var annotations: [Annotation] = []
        var skipped = 0
        var firstSkipReason: String?
        for index in 0..<count {
            let entry = first + UInt64(index * MD.MINIDUMP_SIMPLE_STRING_DICTIONARY_ENTRY.size)
            let entryWhat = "CrashpadInfo simple_annotations entry \(index)"
            do {
                let keyRVA = try u32(entry, entryWhat)
                let valueRVA = try u32(entry + 4, entryWhat)
                let key = try utf8String(UInt64(keyRVA), "\(entryWhat) key")
                let value = try utf8String(UInt64(valueRVA), "\(entryWhat) value")
                annotations.append(Annotation(key: key, value: value))
            } catch {
                skipped += 1
                if firstSkipReason == nil { firstSkipReason = "\(error)" }
            }
        }
        return (annotations, skipped, firstSkipReason)
    }

    mutating func threadNames(_ location: Minidump.Location) throws -> [UInt32: String] {
        let (count, first) = try list(location, entrySize: MD.MINIDUMP_THREAD_NAME.size, "ThreadNames")
        var names: [UInt32: String] = [:]
        for index in 0..<count {
            let entry = first + UInt64(index * MD.MINIDUMP_THREAD_NAME.size)
            let what = "ThreadNames entry \(index)"
            let tid = try u32(entry, what)
            let rva = try u64(entry + 4, what)
            let name = try string(rva, "\(what) (tid \(tid)) name")
            if names[tid] == nil { names[tid] = name }
        }
        return names
    }
}
