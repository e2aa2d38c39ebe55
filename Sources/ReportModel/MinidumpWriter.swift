// MinidumpWriter: serialises a ProcessSnapshot as a Linux x86_64 minidump that rust-minidump
// (minidump-stackwalk, Sentry) and LLDB load and unwind (shared/reference/minidump.md).
//
// Layout of a written file: the header, the directory (sized exactly: a stream whose source is
// missing is omitted, never nullified), then 8-byte aligned blobs and streams. Thread contexts,
// strings, CodeView records, SystemInfo, MiscInfo, the raw Linux files and, when the program set
// annotations, CrashpadInfo come first; then the memory (stacks and extra regions); then
// ThreadList, MemoryList and Exception, which refer to it. Padding only ever sits between blobs,
// never inside a stream's data_size.
//
// This file is also ReportModel's only caller of C (`MinidumpFile`): the atomic write and the
// reader's whole-file read.

import BoundedBytes
import ObjectFile

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

private typealias MD = MinidumpFormat

/// Writes minidumps. A value type with no state besides its options; safe to use from any thread.
public struct MinidumpWriter: Sendable {
    /// Whether to write the LinuxEnviron stream. Off by default: the environment often holds
    /// secrets (spec §2.1 "privacy risk").
    public var includeEnvironment: Bool

    public init(includeEnvironment: Bool = false) {
        self.includeEnvironment = includeEnvironment
    }

    /// Bounds on the annotations written to CrashpadInfo. The stub keeps at most 64 keys of 64
    /// bytes with values of 1 KiB; the writer does not rely on that: it cuts keys and values longer
    /// than these (at a Unicode scalar boundary) and drops the annotations past the count, so that
    /// a corrupt snapshot cannot make the file large.
    public static let maximumAnnotationCount = 256
    public static let maximumAnnotationKeyBytes = 256
    public static let maximumAnnotationValueBytes = 4096

    /// The annotations as CrashpadInfo will hold them: keys and values cut to the bounds above,
    /// then empty keys and repeated keys (after the first) dropped, at most
    /// `maximumAnnotationCount`, in the snapshot's order. `truncated` is set where a cut was made
    /// here; the stream itself has no place for it, so a reader never sees it.
    public static func writtenAnnotations(_ annotations: [Annotation]) -> [Annotation] {
        var written: [Annotation] = []
        var keys = Set<String>()
        for annotation in annotations {
            guard written.count < maximumAnnotationCount else { break }
            let key = utf8Prefix(annotation.key, maximumBytes: maximumAnnotationKeyBytes)
            let value = utf8Prefix(annotation.value, maximumBytes: maximumAnnotationValueBytes)
            guard !key.isEmpty, keys.insert(key).inserted else { continue }
            let cut = key.utf8.count < annotation.key.utf8.count || value.utf8.count < annotation.value.utf8.count
            written.append(Annotation(key: key, value: value, truncated: annotation.truncated || cut))
        }
        return written
    }

    /// The longest prefix of `text` whose UTF-8 form has at most `maximumBytes` bytes and ends on
    /// a Unicode scalar boundary.
    static func utf8Prefix(_ text: String, maximumBytes: Int) -> String {
        let utf8 = text.utf8
        guard utf8.count > maximumBytes else { return text }
        var end = utf8.index(utf8.startIndex, offsetBy: maximumBytes)
        // Back off continuation bytes (10xxxxxx) so no scalar is split.
        while end > utf8.startIndex && utf8[end] & 0xC0 == 0x80 { end = utf8.index(before: end) }
        return String(decoding: utf8[..<end], as: UTF8.self)
    }

    /// The complete minidump for `snapshot`.
    public func bytes(for snapshot: ProcessSnapshot) -> [UInt8] {
        var serializer = Serializer(snapshot: snapshot, includeEnvironment: includeEnvironment)
        return serializer.run()
    }

    /// Writes the minidump to `path` atomically: a temporary file in the same directory is written
    /// with a zero signature, fsynced, given the real "MDMP" signature, fsynced again and renamed
    /// over `path`, so a reader never sees a half-written file that looks valid. The file is
    /// created with mode 0600.
    public func write(_ snapshot: ProcessSnapshot, to path: String) throws {
        try MinidumpFile.writeAtomically(bytes(for: snapshot), to: path)
    }
}

// MARK: - Serialisation

/// A growable little-endian byte buffer.
struct LittleEndianBuffer {
    private(set) var bytes: [UInt8] = []

    var count: Int { bytes.count }

    mutating func u8(_ value: UInt8) { bytes.append(value) }

    mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }

    mutating func u32(_ value: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    mutating func u64(_ value: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    mutating func append<C: Collection>(_ data: C) where C.Element == UInt8 { bytes.append(contentsOf: data) }

    mutating func zeros(_ count: Int) { bytes.append(contentsOf: repeatElement(0, count: count)) }

    mutating func align8() { zeros((8 - count % 8) % 8) }

    mutating func overwrite(_ data: [UInt8], at offset: Int) {
        bytes.replaceSubrange(offset..<(offset + data.count), with: data)
    }

    mutating func set(_ value: UInt64, at offset: Int, width: Int) {
        for index in 0..<width { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> UInt64(8 * index)) }
    }
}

/// A MINIDUMP_LOCATION_DESCRIPTOR as written.
private struct Location {
    var dataSize: UInt32
    var rva: UInt32
    static let none = Location(dataSize: 0, rva: 0)
}

/// A MemoryList entry: `size` bytes of the target at `start`, stored at `rva`.
private struct MemoryPiece {
    var start: UInt64
    var size: UInt64
    var rva: UInt32
}

/// One run of the writer. Holds the output and the locations of what it has placed so far.
private struct Serializer {
    let snapshot: ProcessSnapshot
    let includeEnvironment: Bool
    /// The annotations CrashpadInfo carries (bounded); empty means no CrashpadInfo stream.
    let annotations: [Annotation]
    var out = LittleEndianBuffer()
    /// Directory entries in directory order; the locations are filled in as the streams are written.
    var directory: [(type: UInt32, location: Location?)] = []

    init(snapshot: ProcessSnapshot, includeEnvironment: Bool) {
        self.snapshot = snapshot
        self.includeEnvironment = includeEnvironment
        annotations = MinidumpWriter.writtenAnnotations(snapshot.annotations)
    }

    /// Raw Linux streams in directory order, each present only when its file was read.
    var linuxStreams: [(type: UInt32, bytes: [UInt8])] {
        let files = snapshot.linuxFiles
        var streams: [(UInt32, [UInt8]?)] = [
            (MD.MINIDUMP_STREAM_TYPE.LinuxCpuInfo, files.cpuInfo),
            (MD.MINIDUMP_STREAM_TYPE.LinuxProcStatus, files.procStatus),
            (MD.MINIDUMP_STREAM_TYPE.LinuxLsbRelease, files.lsbRelease),
            (MD.MINIDUMP_STREAM_TYPE.LinuxCmdLine, files.cmdLine),
            (MD.MINIDUMP_STREAM_TYPE.LinuxAuxv, files.auxv),
            (MD.MINIDUMP_STREAM_TYPE.LinuxMaps, files.maps),
        ]
        if includeEnvironment { streams.append((MD.MINIDUMP_STREAM_TYPE.LinuxEnviron, files.environ)) }
        return streams.compactMap { type, bytes in bytes.map { (type, $0) } }
    }

    mutating func run() -> [UInt8] {
        let linux = linuxStreams
        let types =
            [
                MD.MINIDUMP_STREAM_TYPE.ThreadList, MD.MINIDUMP_STREAM_TYPE.ModuleList,
                MD.MINIDUMP_STREAM_TYPE.MemoryList, MD.MINIDUMP_STREAM_TYPE.Exception,
                MD.MINIDUMP_STREAM_TYPE.SystemInfo, MD.MINIDUMP_STREAM_TYPE.MiscInfo,
            ] + linux.filter { $0.type != MD.MINIDUMP_STREAM_TYPE.LinuxEnviron }.map(\.type)
            + [MD.MINIDUMP_STREAM_TYPE.ThreadNames]
            + linux.filter { $0.type == MD.MINIDUMP_STREAM_TYPE.LinuxEnviron }.map(\.type)
            + (annotations.isEmpty ? [] : [MD.MINIDUMP_STREAM_TYPE.CrashpadInfo])
        directory = types.map { ($0, nil) }

        writeHeader(streamCount: UInt32(types.count))
        out.zeros(types.count * MD.MINIDUMP_DIRECTORY.size)

        let contexts = snapshot.threads.map { writeContext($0.registers) }
        writeModuleList()
        writeSystemInfo()
        writeMiscInfo()
        for stream in linux { place(stream.type, stream.bytes) }
        writeThreadNames()
        if !annotations.isEmpty { writeCrashpadInfo() }
        let (stacks, pieces) = writeMemory()
        writeThreadList(contexts: contexts, stacks: stacks)
        writeMemoryList(pieces)
        writeException(contexts: contexts)

        for (index, entry) in directory.enumerated() {
            guard let location = entry.location else {
                preconditionFailure("stream \(MD.MINIDUMP_STREAM_TYPE.name(entry.type)) was planned but not written")
            }
            let offset = MD.MINIDUMP_HEADER.size + index * MD.MINIDUMP_DIRECTORY.size
            out.set(UInt64(entry.type), at: offset, width: 4)
            out.set(UInt64(location.dataSize), at: offset + 4, width: 4)
            out.set(UInt64(location.rva), at: offset + 8, width: 4)
        }
        return out.bytes
    }

    // MARK: Primitives

    /// The current offset as an RVA. Writers keep metadata small and budget the memory blobs
    /// (`memoryLimit`), so the file never outgrows 32-bit RVAs.
    var rva: UInt32 {
        guard let value = UInt32(exactly: out.count) else {
            preconditionFailure("minidump exceeds 4 GiB of metadata")
        }
        return value
    }

    /// Starts a blob or stream at the next 8-byte boundary; returns its RVA.
    mutating func beginBlob() -> UInt32 {
        out.align8()
        return rva
    }

    mutating func endBlob(from start: UInt32) -> Location {
        Location(dataSize: rva - start, rva: start)
    }

    mutating func record(_ type: UInt32, _ location: Location) {
        guard let index = directory.firstIndex(where: { $0.type == type }) else {
            preconditionFailure("stream \(MD.MINIDUMP_STREAM_TYPE.name(type)) was not planned")
        }
        directory[index].location = location
    }

    /// Writes raw bytes as a blob; when `type` is given, records it as that stream.
    @discardableResult
    mutating func place(_ type: UInt32? = nil, _ bytes: [UInt8]) -> Location {
        let start = beginBlob()
        out.append(bytes)
        let location = endBlob(from: start)
        if let type { record(type, location) }
        return location
    }

    /// Writes a MINIDUMP_STRING blob; returns its RVA.
    mutating func writeString(_ text: String) -> UInt32 {
        let start = beginBlob()
        let units = Array(text.utf16)
        out.u32(UInt32(truncatingIfNeeded: units.count * 2))
        for unit in units { out.u16(unit) }
        out.u16(0)
        return start
    }

    /// Writes a MINIDUMP_UTF8_STRING blob (length, bytes, NUL); returns its RVA.
    mutating func writeUTF8String(_ text: String) -> UInt32 {
        let start = beginBlob()
        let bytes = Array(text.utf8)
        out.u32(UInt32(truncatingIfNeeded: bytes.count))
        out.append(bytes)
        out.u8(0)
        return start
    }

    mutating func writeLocation(_ location: Location) {
        out.u32(location.dataSize)
        out.u32(location.rva)
    }

    // MARK: Header and contexts

    mutating func writeHeader(streamCount: UInt32) {
        out.u32(MD.MINIDUMP_HEADER.signature)
        out.u32(MD.MINIDUMP_HEADER.version)
        out.u32(streamCount)
        out.u32(UInt32(MD.MINIDUMP_HEADER.size))  // stream_directory_rva: right after the header
        out.u32(0)  // checksum
        out.u32(snapshot.captureTime)
        out.u64(0)  // flags: MiniDumpNormal
    }

    /// Writes a CONTEXT_AMD64 blob (spec §3.1–3.2).
    mutating func writeContext(_ registers: X86_64Registers) -> Location {
        let start = beginBlob()
        let base = out.count
        out.zeros(MD.CONTEXT_AMD64.size)
        let hasFP = registers.fxsave.count == MD.CONTEXT_AMD64.fltSaveSize
        var flags = MD.CONTEXT_AMD64.CONTROL | MD.CONTEXT_AMD64.INTEGER | MD.CONTEXT_AMD64.SEGMENTS
        if hasFP { flags |= MD.CONTEXT_AMD64.FLOATING_POINT }
        out.set(UInt64(flags), at: base + MD.CONTEXT_AMD64.offsetOfContextFlags, width: 4)
        for slot in MD.amd64ContextSlots {
            out.set(registers.gpr[slot.gprIndex], at: base + slot.offset, width: slot.width)
        }
        if hasFP {
            let fx = registers.fxsave
            out.overwrite(fx, at: base + MD.CONTEXT_AMD64.offsetOfFltSave)
            let mxcsrAt = MD.CONTEXT_AMD64.offsetOfMxCsrInFltSave
            let mxcsr = (0..<4).reduce(UInt64(0)) { $0 | UInt64(fx[mxcsrAt + $1]) << UInt64(8 * $1) }
            out.set(mxcsr, at: base + MD.CONTEXT_AMD64.offsetOfMxCsr, width: 4)
        }
        return endBlob(from: start)
    }

    // MARK: Streams

    mutating func writeModuleList() {
        struct Written { var module: LoadedModule; var name: UInt32; var cv: Location }
        var written: [Written] = []
        for module in snapshot.modules {
            let name = module.path == MD.vdsoMappingName ? MD.vdsoModuleName : module.path
            let nameRVA = writeString(name)
            var cv = Location.none
            if let buildID = module.buildID {
                let start = beginBlob()
                out.u32(MD.CV_INFO_ELF.signature)
                out.append(buildID.bytes)
                cv = endBlob(from: start)
            }
            written.append(Written(module: module, name: nameRVA, cv: cv))
        }
        let start = beginBlob()
        out.u32(UInt32(truncatingIfNeeded: written.count))
        for entry in written {
            out.u64(entry.module.base)  // base_of_image
            out.u32(UInt32(clamping: entry.module.size))  // size_of_image
            out.u32(0)  // checksum
            out.u32(0)  // time_date_stamp
            out.u32(entry.name)  // module_name_rva
            out.zeros(MD.VS_FIXEDFILEINFO.size)  // version_info
            writeLocation(entry.cv)  // cv_record
            writeLocation(.none)  // misc_record
            out.u64(0)  // reserved0
            out.u64(0)  // reserved1
        }
        record(MD.MINIDUMP_STREAM_TYPE.ModuleList, endBlob(from: start))
    }

    mutating func writeSystemInfo() {
        let system = snapshot.system
        let csd = [system.sysname, system.release, system.version, system.machine].joined(separator: " ")
        let csdRVA = writeString(csd)
        let (major, minor, build) = Self.kernelVersion(system.release)
        let start = beginBlob()
        out.u16(MD.MINIDUMP_SYSTEM_INFO.PROCESSOR_ARCHITECTURE_AMD64)
        out.u16(system.cpuFamily)  // processor_level
        out.u16((system.cpuModel << 8) | (system.cpuStepping & 0xFF))  // processor_revision
        out.u8(UInt8(clamping: max(0, system.cpuCount)))  // number_of_processors
        out.u8(0)  // product_type
        out.u32(major)
        out.u32(minor)
        out.u32(build)
        out.u32(MD.MINIDUMP_SYSTEM_INFO.PLATFORM_LINUX)
        out.u32(csdRVA)
        out.u16(0)  // suite_mask
        out.u16(0)  // reserved2
        // cpu.x86_cpu_info: vendor_id[3] as the 12 ASCII bytes, then version/feature words, which
        // the snapshot does not carry (Breakpad leaves them 0 as well).
        let vendor = Array(system.cpuVendor.utf8.prefix(MD.MINIDUMP_SYSTEM_INFO.vendorIDSize))
        out.append(vendor)
        out.zeros(MD.MINIDUMP_SYSTEM_INFO.vendorIDSize - vendor.count)
        out.u32(0)  // version_information
        out.u32(0)  // feature_information
        out.u32(0)  // amd_extended_cpu_features
        record(MD.MINIDUMP_STREAM_TYPE.SystemInfo, endBlob(from: start))
    }

    /// major.minor.build from a kernel release such as "6.1.0-13-amd64"; missing parts are 0.
    static func kernelVersion(_ release: String) -> (UInt32, UInt32, UInt32) {
        let numeric = release.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        let parts = numeric.split(separator: ".", omittingEmptySubsequences: false).prefix(3).map { UInt32($0) ?? 0 }
        let padded = parts + [UInt32](repeating: 0, count: 3 - parts.count)
        return (padded[0], padded[1], padded[2])
    }

    mutating func writeMiscInfo() {
        let start = beginBlob()
        var flags = MD.MINIDUMP_MISC_INFO.MINIDUMP_MISC1_PROCESS_ID
        if snapshot.processStartTime != nil { flags |= MD.MINIDUMP_MISC_INFO.MINIDUMP_MISC1_PROCESS_TIMES }
        out.u32(UInt32(MD.MINIDUMP_MISC_INFO.size))  // size_of_info
        out.u32(flags)  // flags1
        out.u32(UInt32(bitPattern: snapshot.pid.rawValue))  // process_id
        out.u32(snapshot.processStartTime ?? 0)  // process_create_time
        out.u32(0)  // process_user_time
        out.u32(0)  // process_kernel_time
        record(MD.MINIDUMP_STREAM_TYPE.MiscInfo, endBlob(from: start))
    }

    /// ThreadNames (spec §2.8); threads with an empty name are left out.
    mutating func writeThreadNames() {
        let named = snapshot.threads.filter { !$0.name.isEmpty }
        let names = named.map { writeString($0.name) }
        let start = beginBlob()
        out.u32(UInt32(truncatingIfNeeded: named.count))
        for (thread, nameRVA) in zip(named, names) {
            out.u32(UInt32(bitPattern: thread.tid.rawValue))
            out.u64(UInt64(nameRVA))  // RVA64, packed right after the u32
        }
        record(MD.MINIDUMP_STREAM_TYPE.ThreadNames, endBlob(from: start))
    }

    /// CrashpadInfo (spec §2.10) with the annotations as its simple_annotations, which is where
    /// rust-minidump (minidump-stackwalk, Sentry) reads a Crashpad process's annotations. The
    /// report and client GUIDs are zero (the snapshot has neither), and there is no module list.
    mutating func writeCrashpadInfo() {
        let strings = annotations.map { (key: writeUTF8String($0.key), value: writeUTF8String($0.value)) }
        let dictionaryStart = beginBlob()
        out.u32(UInt32(truncatingIfNeeded: strings.count))
        for entry in strings {
            out.u32(entry.key)
            out.u32(entry.value)
        }
        let dictionary = endBlob(from: dictionaryStart)
        let start = beginBlob()
        out.u32(MD.MINIDUMP_CRASHPAD_INFO.version)
        out.zeros(MD.MINIDUMP_CRASHPAD_INFO.guidSize)  // report_id
        out.zeros(MD.MINIDUMP_CRASHPAD_INFO.guidSize)  // client_id
        writeLocation(dictionary)  // simple_annotations
        writeLocation(.none)  // module_list
        record(MD.MINIDUMP_STREAM_TYPE.CrashpadInfo, endBlob(from: start))
    }

    /// Writes the thread stacks and the extra regions. Returns each thread's stack descriptor
    /// (nil when it has none or it did not fit) and the MemoryList entries: every stack again at
    /// the same RVA, then the extra memory, clipped so that no two entries overlap.
    mutating func writeMemory() -> (stacks: [(start: UInt64, location: Location)?], pieces: [MemoryPiece]) {
        // Plan the ranges first (they do not depend on where the bytes land), so that the size of
        // the lists written after the memory is known and can be reserved below 4 GiB.
        let candidates: [MemoryRegion?] = snapshot.threads.map(\.stack) + snapshot.extraMemory.map { $0 }
        var claimed: [Range<UInt64>] = []
        var plans: [[Range<UInt64>]] = []
        for region in candidates {
            guard let region, !region.bytes.isEmpty else {
                plans.append([])
                continue
            }
            let pieces = Self.subtract(claimed, from: region.start..<region.end)
            claimed += pieces
            plans.append(pieces)
        }
        let pieceCount = plans.reduce(0) { $0 + $1.count }
        let tail =
            3 * 8 + 4 + snapshot.threads.count * MD.MINIDUMP_THREAD.size + 4
            + pieceCount * MD.MINIDUMP_MEMORY_DESCRIPTOR.size + MD.MINIDUMP_EXCEPTION_STREAM.size
        let memoryLimit = Int(UInt32.max) - tail

        var stacks: [(start: UInt64, location: Location)?] = []
        var pieces: [MemoryPiece] = []
        for (index, region) in candidates.enumerated() {
            let isStack = index < snapshot.threads.count
            guard let region, !region.bytes.isEmpty else {
                if isStack { stacks.append(nil) }
                continue
            }
            // The bytes that count: a region whose end would wrap is cut at 2^64.
            let usable = Int(region.end - region.start)
            if isStack {
                guard alignedEnd(adding: usable) <= memoryLimit else {
                    stacks.append(nil)
                    continue
                }
                let blob = place(nil, Array(region.bytes.prefix(usable)))
                stacks.append((region.start, blob))
                // Usually the whole stack; only a stack overlapping another one is cut.
                for range in plans[index] {
                    let offset = UInt32(range.lowerBound - region.start)
                    pieces.append(
                        MemoryPiece(
                            start: range.lowerBound, size: range.upperBound - range.lowerBound,
                            rva: blob.rva + offset))
                }
            } else {
                // Extra memory: only the parts no stack or earlier region already holds.
                for range in plans[index] {
                    let offset = Int(range.lowerBound - region.start)
                    let size = Int(range.upperBound - range.lowerBound)
                    guard alignedEnd(adding: size) <= memoryLimit else { continue }
                    let blob = place(nil, Array(region.bytes[offset..<(offset + size)]))
                    pieces.append(MemoryPiece(start: range.lowerBound, size: UInt64(size), rva: blob.rva))
                }
            }
        }
        return (stacks, pieces)
    }

    /// Where a blob of `size` bytes placed next would end.
    func alignedEnd(adding size: Int) -> Int { ((out.count + 7) & ~7) + size }

    /// `range` minus every range in `taken`, as ordered disjoint non-empty ranges.
    static func subtract(_ taken: [Range<UInt64>], from range: Range<UInt64>) -> [Range<UInt64>] {
        var remaining = [range]
        for cut in taken where cut.overlaps(range) {
            remaining = remaining.flatMap { piece -> [Range<UInt64>] in
                guard piece.overlaps(cut) else { return [piece] }
                var parts: [Range<UInt64>] = []
                if piece.lowerBound < cut.lowerBound { parts.append(piece.lowerBound..<cut.lowerBound) }
                if cut.upperBound < piece.upperBound { parts.append(cut.upperBound..<piece.upperBound) }
                return parts
            }
        }
        return remaining
    }

    mutating func writeThreadList(contexts: [Location], stacks: [(start: UInt64, location: Location)?]) {
        let start = beginBlob()
        out.u32(UInt32(truncatingIfNeeded: snapshot.threads.count))
        for (index, thread) in snapshot.threads.enumerated() {
            out.u32(UInt32(bitPattern: thread.tid.rawValue))  // thread_id
            out.u32(0)  // suspend_count
            out.u32(0)  // priority_class
            out.u32(0)  // priority
            out.u64(thread.registers.gpr[MD.fsBaseIndex])  // teb: the thread pointer, as Crashpad does
            out.u64(stacks[index]?.start ?? 0)  // stack.start_of_memory_range
            writeLocation(stacks[index]?.location ?? .none)  // stack.memory
            writeLocation(contexts[index])  // thread_context
        }
        record(MD.MINIDUMP_STREAM_TYPE.ThreadList, endBlob(from: start))
    }

    mutating func writeMemoryList(_ pieces: [MemoryPiece]) {
        let start = beginBlob()
        out.u32(UInt32(truncatingIfNeeded: pieces.count))
        for piece in pieces {
            out.u64(piece.start)
            writeLocation(Location(dataSize: UInt32(truncatingIfNeeded: piece.size), rva: piece.rva))
        }
        record(MD.MINIDUMP_STREAM_TYPE.MemoryList, endBlob(from: start))
    }

    mutating func writeException(contexts: [Location]) {
        let exception = snapshot.exception
        let crashed = snapshot.threads.firstIndex { $0.tid == snapshot.crashedThreadID }
        let start = beginBlob()
        out.u32(UInt32(bitPattern: snapshot.crashedThreadID.rawValue))  // thread_id
        out.u32(0)  // __align
        out.u32(UInt32(bitPattern: exception.signal))  // exception_code: si_signo
        out.u32(UInt32(bitPattern: exception.code))  // exception_flags: si_code
        out.u64(0)  // exception_record
        out.u64(exception.faultAddress)  // exception_address: si_addr
        out.u32(0)  // number_parameters
        out.u32(0)  // __align
        out.zeros(15 * 8)  // exception_information
        writeLocation(crashed.map { contexts[$0] } ?? .none)  // thread_context: the crashed thread's blob
        record(MD.MINIDUMP_STREAM_TYPE.Exception, endBlob(from: start))
    }
}

// MARK: - File access (ReportModel's only C calls)

/// The POSIX calls behind `MinidumpWriter.write` and `Minidump(path:)`, with EINTR retried here.
enum MinidumpFile {
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        let base = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let temporary = "\(directory)/.\(base).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw MinidumpError.system(call: "open", path: temporary, errno: errno) }
        var closed = false
        var renamed = false
        defer {
            if !closed { _ = close(fd) }
            if !renamed { _ = unlink(temporary) }
        }

        // Everything but the signature first, so a torn file never starts with "MDMP".
        var unsigned = bytes
        let signatureSize = min(4, unsigned.count)
        for index in 0..<signatureSize { unsigned[index] = 0 }
        try writeAll(fd, unsigned, at: 0, path: temporary)
        guard fsync(fd) == 0 else { throw MinidumpError.system(call: "fsync", path: temporary, errno: errno) }
        try writeAll(fd, Array(bytes.prefix(signatureSize)), at: 0, path: temporary)
        guard fsync(fd) == 0 else { throw MinidumpError.system(call: "fsync", path: temporary, errno: errno) }
        closed = true
        guard close(fd) == 0 else { throw MinidumpError.system(call: "close", path: temporary, errno: errno) }
        guard rename(temporary, path) == 0 else {
            throw MinidumpError.system(call: "rename", path: path, errno: errno)
        }
        renamed = true

        // Make the rename itself durable; a failure here leaves a complete file, so it is ignored.
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            _ = fsync(directoryFD)
            _ = close(directoryFD)
        }
    }

    /// Every byte written at `offset` (BoundedBytes.writeAll), or the error naming the file.
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int, path: String) throws {
        let written = bytes.withUnsafeBytes { BoundedBytes.writeAll(fd, $0, at: offset) }
        guard written else { throw MinidumpError.system(call: "pwrite", path: path, errno: errno) }
    }

    /// The whole file. Files over 4 GiB are refused: 32-bit RVAs cannot point past that.
    static func readAll(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw MinidumpError.system(call: "open", path: path, errno: errno) }
        defer { _ = close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw MinidumpError.system(call: "fstat", path: path, errno: errno) }
        guard status.st_size <= off_t(UInt32.max) else {
            throw MinidumpError.malformed("\(path) is \(status.st_size) bytes, more than a minidump can address")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let result = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if result < 0 {
                if errno == EINTR { continue }
                throw MinidumpError.system(call: "read", path: path, errno: errno)
            }
            if result == 0 { break }
            bytes.append(contentsOf: chunk[0..<result])
            if bytes.count > Int(UInt32.max) {
                throw MinidumpError.malformed("\(path) is more than 4 GiB, more than a minidump can address")
            }
        }
        return bytes
    }
}

/// strerror(3) text for an errno.
func minidumpErrnoDescription(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "unknown error" }
    return String(cString: text)
}
