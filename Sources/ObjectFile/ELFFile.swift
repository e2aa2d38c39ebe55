// ELFFile: a 64-bit little-endian ELF file, its container read with libelf (elfutils).
//
// libelf reads the container: gelf_getehdr, elf_getphdrnum/gelf_getphdr, elf_getshdrnum,
// elf_getshdrstrndx, elf_nextscn/gelf_getshdr/elf_strptr, elf_getdata + gelf_getnote (the
// build-id, the package note), gelf_getdyn (DT_NEEDED), gelf_getsym (SymbolTable), gelf_getchdr + elf_compress
// (compressed sections). What lies inside sections (.eh_frame_hdr, .gnu_debuglink, DWARF) is
// read from the same bytes through ByteView, bounds-checked.
//
// Why `elf_memory` over our MappedFile and not `elf_begin(fd, ELF_C_READ_MMAP)`: one mapping
// serves libelf and our own readers (no second mmap, no fd kept open), and the same code takes
// images that are not files: the vDSO copied out of a process, MiniDebugInfo decoded into an
// anonymous mapping. The price: elf_memory treats the image as a private writable copy
// (ELF_C_READ_MMAP_PRIVATE), and elf_compress rewrites the inflated section's header in place
// (sh_size, sh_flags). So MappedFile maps files MAP_PRIVATE with PROT_WRITE (a write costs one
// copy-on-write page and never reaches the file; on a PROT_READ mapping it is a SIGSEGV), and an
// ELFFile claims its MappedFile: a second ELFFile over the same mapping works on a private copy.
//
// Hostile files (the watcher may run as root): libelf validates some things and not others, so
// before trusting it we check ourselves: the identification bytes and the 64-byte header before
// elf_memory (it reads the header without checking the image holds one); the program header
// table against the file (libelf clamps a truncated one silently; we call it malformed); every
// section's offset+size against the file before elf_getdata/elf_compress; a compressed
// section's declared size (gelf_getchdr, or the `.zdebug` header) against SectionCompression's
// caps before inflating; note and symbol lengths again against the data libelf returned.
// libelf itself drops a section header table that does not fit in the file (no sections), and
// bounds e_shnum by it; a name outside .shstrtab is "".
//
// Threads: an `Elf *` is not safe for concurrent use. Everything but inflating sections and
// building the symbol table is read in init into Swift values; those two use the descriptor
// later, under `state`'s lock. elf_end runs in deinit.

import BoundedBytes
import CLibELF
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

public struct ELFSegment: Sendable, Equatable {
    public var type: UInt32
    public var flags: UInt32
    public var offset: UInt64
    public var vaddr: UInt64
    public var fileSize: UInt64
    public var memorySize: UInt64

    // Spec names from <elf.h> (through Glibc).
    public static let load = UInt32(PT_LOAD)
    public static let dynamic = UInt32(PT_DYNAMIC)
    public static let interpreter = UInt32(PT_INTERP)
    public static let note = UInt32(PT_NOTE)
    public static let gnuEHFrame = UInt32(PT_GNU_EH_FRAME)
    public var isExecutable: Bool { flags & UInt32(PF_X) != 0 }
    public var isWritable: Bool { flags & UInt32(PF_W) != 0 }
}

public struct ELFSection: Sendable, Equatable {
    public var name: String
    public var type: UInt32
    public var flags: UInt64
    public var address: UInt64
    public var offset: UInt64
    public var size: UInt64
    public var link: UInt32
    public var entrySize: UInt64
    /// Its index in the section header table (`sections[index]` is this section).
    public var index: Int = 0

    public static let noBits = UInt32(SHT_NOBITS)
    public static let symbolTable = UInt32(SHT_SYMTAB)
    public static let dynamicSymbolTable = UInt32(SHT_DYNSYM)
    public static let compressedFlag = UInt64(SHF_COMPRESSED)
}

/// libelf's library-wide setup, done once before any other libelf call.
private let libelfReady: Bool = elf_version(UInt32(EV_CURRENT)) != UInt32(EV_NONE)

/// The libelf descriptor and what was built through it after init: touched only under
/// ELFFile's lock.
struct LibELFState: ~Copyable {
    let elf: OpaquePointer
    var inflated: [Int: Result<ByteView, DebugDataRefusal>] = [:]
    /// Sections read from SectionCache's files (their views are in `inflated`), kept as long as
    /// this file.
    var cachedMappings: [MappedFile] = []
    var symbols: SymbolTable?
}

/// Immutable once read (inflated sections and the symbol table, built on first use, behind a
/// lock with the libelf descriptor): shareable between threads.
public final class ELFFile: Sendable {
    public let file: MappedFile
    public let view: ByteView
    public let type: UInt16
    public let machine: UInt16
    public let segments: [ELFSegment]
    public let sections: [ELFSection]
    /// The GNU build-id (NT_GNU_BUILD_ID), if the file has one.
    public let buildID: BuildID?
    /// The package metadata note (`.note.package`, PackageNote), parsed or refused; nil when
    /// the file has none.
    public let packageNote: Result<PackageMetadata, PackageNote.Refusal>?
    /// The `.eh_frame_hdr` search table, if PT_GNU_EH_FRAME names a usable one.
    public let ehFrameTable: EHFrameTable?
    /// The compressed sections (by index): their declared size, read before any inflating.
    let compression: [Int: CompressionHeader]
    /// The ELF header and the program and section header tables, in file offsets: the bytes
    /// libelf may rewrite in place, never released.
    private let headerTables: [Range<UInt64>]
    private let state: Mutex<LibELFState>
    /// Every file of SectionCache's this file's sections were read from (sectionData's, and the
    /// InflatedSections' of inflatedOnDemand, held weakly: those go with their section): for
    /// `torn`, apart from `state`, whose lock an inflating holds.
    private let sectionFiles = Mutex<[WeakMappedFile]>([])

    struct WeakMappedFile {
        weak var file: MappedFile?
    }

    public var path: String { file.path }
    /// The last component of the path: how reports name a module.
    public var fileName: String { path.split(separator: "/").last.map(String.init) ?? path }

    /// A compressed section's header: SHF_COMPRESSED (Elf64_Chdr, through gelf_getchdr) or the
    /// GNU `.zdebug_*` form ("ZLIB" and a big-endian 64-bit size).
    public struct CompressionHeader: Sendable, Equatable {
        public enum Kind: Sendable, Equatable { case gabi(type: UInt32), gnu }
        public var kind: Kind
        /// What the header says the section inflates to (ch_size).
        public var declaredSize: UInt64
        /// The bytes of the compressed stream after the header.
        public var streamSize: Int
    }

    public convenience init(path: String) throws {
        try self.init(file: MappedFile(path: path))
    }

    public init(file original: MappedFile) throws {
        // libelf may write the image's section headers (see the header comment): one ELFFile
        // per mapping.
        let file = original.claimForLibELF() ? original : MappedFile(bytes: Array(original.bytes), name: original.path)
        self.file = file
        let view = ByteView(file.bytes)
        self.view = view
        let path = file.path
        guard view.has(0, 64), view.u32(0) == 0x464C_457F else {
            throw ObjectFileError.notELF(path: path, reason: "no ELF magic")
        }
        guard view.u8(4) == 2 else { throw ObjectFileError.notELF(path: path, reason: "not a 64-bit ELF") }
        guard view.u8(5) == 1 else { throw ObjectFileError.notELF(path: path, reason: "not little-endian") }
        guard libelfReady, let base = file.bytes.baseAddress,
            let elf = elf_memory(UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: CChar.self)), file.bytes.count)
        else {
            throw ObjectFileError.malformed(path: path, reason: "libelf: \(Self.libelfError())")
        }
        let parts: Parts
        do {
            parts = try Self.read(elf, view: view, path: path)
        } catch {
            elf_end(elf)
            throw error
        }
        type = parts.type
        machine = parts.machine
        segments = parts.segments
        sections = parts.sections
        compression = parts.compression
        buildID = parts.buildID
        packageNote = parts.packageNote
        headerTables = parts.headerTables
        ehFrameTable = Self.readEHFrameTable(view: view, segments: parts.segments)
        state = Mutex(LibELFState(elf: elf))
    }

    deinit {
        state.withLock { state in _ = elf_end(state.elf) }
        // A cache file that tore under us is not mapped again by the next watcher.
        for file in sectionFiles.withLock({ $0.compactMap(\.file) }) where file.torn { SectionCache.discard(file) }
    }

    /// What a report says of a module whose file was `torn`.
    public static let tornDescription =
        "its file changed while it was read (truncated, or its file system failed a read): what lay past the change read as zeros"

    /// Whether a file this ELFFile read changed while it was read (MappedFile.torn): the file
    /// itself, or a section's copy in SectionCache. Its bytes past that point read as zeros, so
    /// a cache must not keep it: the next reader opens the file again.
    public var torn: Bool {
        file.torn || sectionFiles.withLock { files in files.contains { $0.file?.torn ?? false } }
    }

    static func libelfError() -> String {
        elf_errmsg(-1).map { String(cString: $0) } ?? "unknown error"
    }

    private struct Parts {
        var type: UInt16
        var machine: UInt16
        var segments: [ELFSegment]
        var sections: [ELFSection]
        var compression: [Int: CompressionHeader]
        var buildID: BuildID?
        var packageNote: Result<PackageMetadata, PackageNote.Refusal>?
        var headerTables: [Range<UInt64>]
    }

    /// Everything init keeps, through libelf. Throws for what makes the file unusable: no
    /// header, a program header table outside the file.
    private static func read(_ elf: OpaquePointer, view: ByteView, path: String) throws -> Parts {
        guard elf_kind(elf) == ELF_K_ELF, gelf_getclass(elf) == ELFCLASS64 else {
            throw ObjectFileError.notELF(path: path, reason: "libelf: not a 64-bit ELF object")
        }
        var header = GElf_Ehdr()
        guard gelf_getehdr(elf, &header) != nil else {
            throw ObjectFileError.malformed(path: path, reason: "libelf: \(libelfError())")
        }
        let (segments, noteAlignments) = try readSegments(elf, header: header, view: view, path: path)
        let sections = readSections(elf, header: header, view: view)
        var compression: [Int: CompressionHeader] = [:]
        for section in sections {
            if let found = readCompressionHeader(elf, section: section, view: view) { compression[section.index] = found }
        }
        var sectionCount = 0
        if elf_getshdrnum(elf, &sectionCount) != 0 { sectionCount = Int(header.e_shnum) }
        let headerTables = [
            UInt64.checkedRange(start: 0, count: 64),
            UInt64.checkedRange(start: header.e_phoff, count: UInt64(header.e_phnum) &* UInt64(header.e_phentsize)),
            UInt64.checkedRange(start: header.e_shoff, count: UInt64(sectionCount) &* UInt64(header.e_shentsize)),
        ].compactMap { $0 }
        return Parts(
            type: header.e_type, machine: header.e_machine, segments: segments, sections: sections,
            compression: compression,
            buildID: readBuildID(elf, sections: sections, segments: segments, noteAlignments: noteAlignments, view: view),
            packageNote: readPackageNote(
                elf, sections: sections, segments: segments, noteAlignments: noteAlignments, view: view),
            headerTables: headerTables)
    }

    /// The program headers; the alignment of each (for PT_NOTE's note layout) alongside.
    private static func readSegments(
        _ elf: OpaquePointer, header: GElf_Ehdr, view: ByteView, path: String
    ) throws -> ([ELFSegment], [UInt64]) {
        var count = 0
        if header.e_phoff == 0 { return ([], []) }
        // libelf clamps a table that runs past the file to what fits; we call it malformed.
        guard elf_getphdrnum(elf, &count) == 0 else {
            throw ObjectFileError.malformed(path: path, reason: "program headers: libelf: \(libelfError())")
        }
        // libelf answers 0, or what fits, for a table past the end: compare with the header's count.
        let declared = header.e_phnum == UInt16(PN_XNUM) ? count : Int(header.e_phnum)
        guard declared > 0 else { return ([], []) }
        guard count == declared, header.e_phentsize == 56, let size = UInt64(count).checkedMultiplying(56),
            view.has(header.e_phoff, size)
        else {
            throw ObjectFileError.malformed(path: path, reason: "program headers out of bounds")
        }
        var segments: [ELFSegment] = []
        var alignments: [UInt64] = []
        segments.reserveCapacity(count)
        for index in 0..<Int32(clamping: count) {
            var phdr = GElf_Phdr()
            guard gelf_getphdr(elf, index, &phdr) != nil else {
                throw ObjectFileError.malformed(path: path, reason: "program header \(index): libelf: \(libelfError())")
            }
            segments.append(
                ELFSegment(
                    type: phdr.p_type, flags: phdr.p_flags, offset: phdr.p_offset, vaddr: phdr.p_vaddr,
                    fileSize: phdr.p_filesz, memorySize: phdr.p_memsz))
            alignments.append(phdr.p_align)
        }
        return (segments, alignments)
    }

    /// The section headers, section 0 included so that `sections[i]` is section i. A header
    /// libelf cannot give is an empty SHT_NULL entry; a name it cannot give is "".
    private static func readSections(_ elf: OpaquePointer, header: GElf_Ehdr, view: ByteView) -> [ELFSection] {
        var count = 0
        // libelf reports no sections when the table does not fit in the file.
        guard elf_getshdrnum(elf, &count) == 0, count > 0, header.e_shentsize == 64 else { return [] }
        var namesIndex = 0
        let hasNames = elf_getshdrstrndx(elf, &namesIndex) == 0 && namesIndex < count
        var sections: [ELFSection] = []
        sections.reserveCapacity(count)
        var scn = elf_getscn(elf, 0)
        while let current = scn, sections.count < count {
            var shdr = GElf_Shdr()
            var section = ELFSection(
                name: "", type: UInt32(SHT_NULL), flags: 0, address: 0, offset: 0, size: 0, link: 0, entrySize: 0,
                index: sections.count)
            if gelf_getshdr(current, &shdr) != nil {
                section.type = shdr.sh_type
                section.flags = shdr.sh_flags
                section.address = shdr.sh_addr
                section.offset = shdr.sh_offset
                section.size = shdr.sh_size
                section.link = shdr.sh_link
                section.entrySize = shdr.sh_entsize
                // elf_strptr checks the index, that the table is SHT_STRTAB inside the file,
                // and that the name ends inside it.
                if hasNames, shdr.sh_name != 0, let name = elf_strptr(elf, namesIndex, Int(shdr.sh_name)) {
                    section.name = String(cString: name)
                }
            }
            sections.append(section)
            scn = elf_nextscn(elf, current)
        }
        return sections
    }

    /// Whether a section's bytes lie inside the image: checked before any libelf data call.
    static func inFile(_ section: ELFSection, _ view: ByteView) -> Bool {
        section.type != ELFSection.noBits && section.type != UInt32(SHT_NULL) && view.has(section.offset, section.size)
    }

    /// The `Elf_Data` of an in-file section, through elf_getdata.
    static func data(_ elf: OpaquePointer, _ section: ELFSection, _ view: ByteView) -> UnsafeMutablePointer<Elf_Data>? {
        guard inFile(section, view), let scn = elf_getscn(elf, section.index), let data = elf_getdata(scn, nil),
            data.pointee.d_size <= section.size || section.flags & ELFSection.compressedFlag != 0
        else { return nil }
        return data
    }

    private static func readCompressionHeader(
        _ elf: OpaquePointer, section: ELFSection, view: ByteView
    ) -> CompressionHeader? {
        guard inFile(section, view) else { return nil }
        if section.flags & ELFSection.compressedFlag != 0 {
            var chdr = GElf_Chdr()
            guard let scn = elf_getscn(elf, section.index), gelf_getchdr(scn, &chdr) != nil else { return nil }
            let headerSize = Int(gelf_fsize(elf, ELF_T_CHDR, 1, UInt32(EV_CURRENT)))
            return CompressionHeader(
                kind: .gabi(type: chdr.ch_type), declaredSize: chdr.ch_size,
                streamSize: max(Int(section.size) - headerSize, 0))
        }
        // libelf has no reader for the GNU header short of inflating: read it here.
        if section.name.hasPrefix(".zdebug"), let raw = view.slice(section.offset, section.size),
            raw.u32(0) == 0x4249_4C5A /* "ZLIB" */, let high = raw.u32(4), let low = raw.u32(8)
        {
            let declared = UInt64(UInt32(bigEndian: high)) << 32 | UInt64(UInt32(bigEndian: low))
            return CompressionHeader(kind: .gnu, declaredSize: declared, streamSize: raw.count - 12)
        }
        return nil
    }

    public func section(named name: String) -> ELFSection? { sections.first { $0.name == name } }

    /// The bytes of a section in the file, as stored (compressed ones compressed); nil for
    /// SHT_NOBITS or out-of-bounds sections.
    public func contents(of section: ELFSection) -> ByteView? { Self.contents(of: section, in: view) }

    static func contents(of section: ELFSection, in view: ByteView) -> ByteView? {
        guard section.type != ELFSection.noBits else { return nil }
        return view.slice(section.offset, section.size)
    }

    /// The header of a compressed section (SHF_COMPRESSED or `.zdebug_*`), nil for others.
    public func compressionHeader(of section: ELFSection) -> CompressionHeader? { compression[section.index] }

    /// A section's bytes, inflated when compressed (SHF_COMPRESSED through elf_compress,
    /// `.zdebug_*` through elf_compress_gnu). A declared size past SectionCompression's caps is
    /// refused before any inflating; so are a stream that does not inflate to its declared size,
    /// and a section outside the file. Inflated bytes belong to libelf's descriptor (or, for a
    /// section SectionCache kept, to this file's mapping of the cache's copy) and live as long as
    /// this ELFFile; each section is inflated (or mapped) once.
    public func sectionData(_ section: ELFSection) -> Result<ByteView, DebugDataRefusal> {
        func refusal(_ reason: String) -> Result<ByteView, DebugDataRefusal> {
            .failure(DebugDataRefusal(module: fileName, section: section.name, reason: reason))
        }
        guard section.index < sections.count, sections[section.index] == section, let raw = contents(of: section) else {
            return refusal("is not in the file")
        }
        guard let header = compression[section.index] else {
            if section.flags & ELFSection.compressedFlag != 0 { return refusal("has no readable compression header") }
            return .success(raw)
        }
        if case .gabi(let type) = header.kind, type != UInt32(ELFCOMPRESS_ZLIB) {
            return refusal("uses compression type \(type), not zlib")
        }
        if let reason = SectionCompression.sectionRefusalReason(
            declared: header.declaredSize, compressed: header.streamSize)
        {
            return refusal(reason)
        }
        // A zlib section of at least 32 KB (libc6-dbg's strings, range lists and aranges: 480 KB
        // inflated) is kept decompressed on disk (SectionCache): mapped, its pages read as they
        // are touched, not held inflated on the heap. Written to the cache once the lock is let
        // go: the write, its fsync and a pruning of the directory are no reason for other report
        // threads to wait for this file.
        let size = Int(header.declaredSize)
        let cacheable = header.kind == .gabi(type: UInt32(ELFCOMPRESS_ZLIB)) && size >= 32 << 10 ? cacheKey : nil
        // The bytes libelf inflated now, to be written to the cache.
        let (result, inflatedNow) = state.withLock { state -> (Result<ByteView, DebugDataRefusal>, UnsafeRawBufferPointer?) in
            if let done = state.inflated[section.index] { return (done, nil) }
            if let buildID = cacheable, let cached = SectionCache.mapped(buildID: buildID, section: section.name, size: size) {
                state.cachedMappings.append(cached)
                sectionFiles.withLock { $0.append(WeakMappedFile(file: cached)) }
                releasePages(of: section)
                let result = Result<ByteView, DebugDataRefusal>.success(ByteView(cached.bytes))
                state.inflated[section.index] = result
                return (result, nil)
            }
            var inflatedNow: UnsafeRawBufferPointer?
            let result: Result<ByteView, DebugDataRefusal>
            if let scn = elf_getscn(state.elf, section.index),
                (header.kind == .gnu ? elf_compress_gnu(scn, 0, 0) : elf_compress(scn, 0, 0)) == 1,
                let data = elf_getdata(scn, nil), data.pointee.d_size == Int(header.declaredSize),
                data.pointee.d_buf != nil || header.declaredSize == 0
            {
                let bytes = UnsafeRawBufferPointer(start: data.pointee.d_buf, count: data.pointee.d_size)
                result = .success(ByteView(bytes))
                releasePages(of: section)
                inflatedNow = bytes
            } else {
                result = refusal(
                    "does not inflate to its declared \(SectionCompression.describeSize(header.declaredSize)) (libelf: \(Self.libelfError()))"
                )
            }
            state.inflated[section.index] = result
            return (result, inflatedNow)
        }
        // The inflated bytes are libelf's, kept with its descriptor for this file's lifetime. Not
        // from a file that changed while it was read: what it inflated from is not its section.
        if let buildID = cacheable, let bytes = inflatedNow, !file.torn,
            let writer = SectionCache.Writer(buildID: buildID, section: section.name, size: size)
        {
            writer.write(ByteView(bytes))
            writer.finish()
        }
        return result
    }

    /// A zlib section (SHF_COMPRESSED, ELFCOMPRESS_ZLIB) as an InflatedSection: inflated in
    /// one streaming pass that hands each chunk to `scan` (when given), then page by page as
    /// asked. The same caps as `sectionData` first; nil for any other section, a refused one,
    /// or a stream that does not inflate to its declared size. Does not touch libelf's
    /// descriptor.
    public func inflatedOnDemand(
        _ section: ELFSection, scan: ((_ chunk: UnsafeRawBufferPointer, _ offset: Int) -> Void)? = nil
    ) -> InflatedSection? {
        guard section.index < sections.count, sections[section.index] == section, let raw = contents(of: section),
            let header = compression[section.index], header.kind == .gabi(type: UInt32(ELFCOMPRESS_ZLIB)),
            SectionCompression.sectionRefusalReason(declared: header.declaredSize, compressed: header.streamSize) == nil,
            header.streamSize <= raw.count, let size = Int(exactly: header.declaredSize),
            let input = raw.slice(UInt64(raw.count - header.streamSize), UInt64(header.streamSize))
        else { return nil }
        // Kept decompressed on disk by an earlier watcher (SectionCache): mapped, not inflated.
        let cacheable = cacheKey
        if let buildID = cacheable,
            let cached = SectionCache.mapped(buildID: buildID, section: section.name, size: size, scan: scan)
        {
            sectionFiles.withLock { $0.append(WeakMappedFile(file: cached)) }
            return InflatedSection(cached: cached, release: { self.releasePages(of: section) })
        }
        return InflatedSection(
            input: input, size: size, release: { self.releasePages(of: section) },
            cache: cacheable.flatMap { SectionCache.Writer(buildID: $0, section: section.name, size: size) },
            intact: { !self.file.torn }, scan: scan ?? { _, _ in })
    }

    /// The key of this file's sections in SectionCache: its build-id, when the file is root's or
    /// this user's and no one else can write it (else nil: nothing of it is kept).
    private var cacheKey: BuildID? { buildID.flatMap { file.ownedWithoutOthersWriting(byRootOr: geteuid()) ? $0 : nil } }

    /// A section whose pages were read and are not needed in memory now: a compressed stream
    /// once inflated (or once its copy in SectionCache was mapped: reading its header touched
    /// it), the symbol tables once sorted (their names are read again only for the symbols
    /// looked up). The memory of its pages goes back, unless a page also holds a header table
    /// libelf rewrites. A hostile file can overlap them; then nothing is released (one page too
    /// many is only memory). A file's clean pages: what is read again faults back in.
    private func releasePages(of section: ELFSection) {
        // Only whole pages inside the section go, so a table outside it is never touched.
        guard let range = UInt64.checkedRange(start: section.offset, count: section.size),
            !headerTables.contains(where: { $0.overlaps(range) }),
            let start = Int(exactly: range.lowerBound), let end = Int(exactly: range.upperBound)
        else { return }
        file.releasePages(in: start..<end)
    }

    /// The virtual address at which file offset 0 is loaded: what a module's base maps to.
    public var imageVirtualBase: UInt64 {
        let loads = segments.filter { $0.type == ELFSegment.load }
        if let first = loads.min(by: { $0.vaddr < $1.vaddr }) {
            return first.vaddr &- first.offset
        }
        return 0
    }

    /// Executable address ranges (ELF virtual addresses) of the loaded image.
    public var executableRanges: [Range<UInt64>] {
        segments.compactMap { segment in
            guard segment.type == ELFSegment.load, segment.isExecutable, segment.memorySize > 0 else { return nil }
            return UInt64.checkedRange(start: segment.vaddr, count: segment.memorySize)  // nil: it wraps
        }
    }

    /// Walks the notes of a note area that is not inside a libelf descriptor (a PT_NOTE read
    /// from a process's memory): gelf_getnote needs an `Elf_Data` that libelf made. Stops
    /// quietly at the first malformed note.
    public static func notes(in area: ByteView, _ body: (_ name: String, _ type: UInt32, _ desc: ByteView) -> Bool) {
        var offset: UInt64 = 0
        while let nameSize = area.u32(offset), let descSize = area.u32(offset + 4), let type = area.u32(offset + 8) {
            let nameStart = offset + 12
            let descStart = nameStart + ((UInt64(nameSize) + 3) & ~3)
            guard let nameView = area.slice(nameStart, UInt64(nameSize)),
                let desc = area.slice(descStart, UInt64(descSize))
            else { return }
            var name = nameView.cString(0) ?? ""
            if name.count > Int(nameSize) { name = String(name.prefix(Int(nameSize))) }
            if !body(name, type, desc) { return }
            offset = descStart + ((UInt64(descSize) + 3) & ~3)
        }
    }

    /// The descriptor of the first note of `owner` and `type` in an `Elf_Data` of notes
    /// (ELF_T_NHDR or ELF_T_NHDR8), through gelf_getnote, which checks each note's sizes against
    /// the data. The view lies in the data, which lives as long as the descriptor.
    private static func note(
        inNoteData data: UnsafeMutablePointer<Elf_Data>, owner: String, type: UInt32
    ) -> ByteView? {
        guard data.pointee.d_type == ELF_T_NHDR || data.pointee.d_type == ELF_T_NHDR8,
            let base = data.pointee.d_buf
        else { return nil }
        let notes = ByteView(UnsafeRawBufferPointer(start: base, count: data.pointee.d_size))
        let name = Array(owner.utf8) + [0]
        var offset = 0
        while offset < data.pointee.d_size {
            var note = GElf_Nhdr()
            var nameOffset = 0
            var descOffset = 0
            let next = gelf_getnote(data, offset, &note, &nameOffset, &descOffset)
            guard next > offset else { return nil }
            offset = next
            guard note.n_type == type, note.n_namesz == UInt32(name.count),
                notes.array(UInt64(nameOffset), UInt64(name.count)) == name,
                let desc = notes.slice(UInt64(descOffset), UInt64(note.n_descsz))
            else { continue }
            return desc
        }
        return nil
    }

    /// The descriptor of the first note of `owner` and `type`: from the section named
    /// `section` if present, else the PT_NOTE segments.
    private static func readNote(
        _ elf: OpaquePointer, owner: String, type: UInt32, section name: String, sections: [ELFSection],
        segments: [ELFSegment], noteAlignments: [UInt64], view: ByteView
    ) -> ByteView? {
        if let section = sections.first(where: { $0.name == name && $0.type == UInt32(SHT_NOTE) }),
            let data = data(elf, section, view), let found = note(inNoteData: data, owner: owner, type: type)
        {
            return found
        }
        for (index, segment) in segments.enumerated() where segment.type == ELFSegment.note {
            guard segment.fileSize > 0, view.has(segment.offset, segment.fileSize),
                let data = elf_getdata_rawchunk(
                    elf, Int64(segment.offset), Int(segment.fileSize),
                    noteAlignments[index] == 8 ? ELF_T_NHDR8 : ELF_T_NHDR)
            else { continue }
            if let found = note(inNoteData: data, owner: owner, type: type) { return found }
        }
        return nil
    }

    /// The GNU build-id (NT_GNU_BUILD_ID), from the section if present, else the PT_NOTE segments.
    private static func readBuildID(
        _ elf: OpaquePointer, sections: [ELFSection], segments: [ELFSegment], noteAlignments: [UInt64], view: ByteView
    ) -> BuildID? {
        readNote(
            elf, owner: "GNU", type: UInt32(NT_GNU_BUILD_ID), section: ".note.gnu.build-id", sections: sections,
            segments: segments, noteAlignments: noteAlignments, view: view
        ).flatMap { $0.array(0, UInt64($0.count)) }.flatMap(BuildID.init)
    }

    /// The package metadata note (PackageNote), parsed: from `.note.package` if present, else
    /// the PT_NOTE segments. nil when the file has none.
    private static func readPackageNote(
        _ elf: OpaquePointer, sections: [ELFSection], segments: [ELFSegment], noteAlignments: [UInt64], view: ByteView
    ) -> Result<PackageMetadata, PackageNote.Refusal>? {
        readNote(
            elf, owner: PackageNote.owner, type: PackageNote.type, section: ".note.package", sections: sections,
            segments: segments, noteAlignments: noteAlignments, view: view
        ).map { PackageNote.parse($0.bytes) }
    }

    /// The NT_GNU_BUILD_ID note of a note area (a section, a PT_NOTE segment, or the same read
    /// from a process's memory), if any.
    public static func buildID(inNotes area: ByteView) -> BuildID? {
        var found: [UInt8]?
        notes(in: area) { name, type, desc in
            if name == "GNU" && type == UInt32(NT_GNU_BUILD_ID) { found = desc.array(0, UInt64(desc.count)) }
            return found == nil
        }
        return found.flatMap(BuildID.init)
    }

    /// The package metadata note (PackageNote) of a note area (a section, a PT_NOTE segment, or
    /// the same read from a process's memory), parsed; nil when it has none.
    public static func packageNote(inNotes area: ByteView) -> Result<PackageMetadata, PackageNote.Refusal>? {
        var found: Result<PackageMetadata, PackageNote.Refusal>?
        notes(in: area) { name, type, desc in
            if name == PackageNote.owner && type == PackageNote.type { found = PackageNote.parse(desc.bytes) }
            return found == nil
        }
        return found
    }

    /// DT_NEEDED entries of the dynamic section: the shared libraries the file asks for. Read
    /// when asked (only the launcher asks, once), not at every open.
    public var neededLibraries: [String] {
        state.withLock { Self.readNeeded($0.elf, sections: sections, view: view) }
    }

    /// DT_NEEDED names, through gelf_getdyn and elf_strptr on the table the section links to.
    private static func readNeeded(_ elf: OpaquePointer, sections: [ELFSection], view: ByteView) -> [String] {
        guard let dynamic = sections.first(where: { $0.type == UInt32(SHT_DYNAMIC) }),
            let data = data(elf, dynamic, view)
        else { return [] }
        let entrySize = Int(gelf_fsize(elf, ELF_T_DYN, 1, UInt32(EV_CURRENT)))
        guard entrySize > 0 else { return [] }
        var result: [String] = []
        for index in 0..<Int32(clamping: data.pointee.d_size / entrySize) {
            var entry = GElf_Dyn()
            guard gelf_getdyn(data, index, &entry) != nil, entry.d_tag != Int64(DT_NULL) else { break }
            // d_val is the file's word: an offset past Int.max names nothing (no trap).
            if entry.d_tag == Int64(DT_NEEDED), let offset = Int(exactly: entry.d_un.d_val),
                let name = elf_strptr(elf, Int(dynamic.link), offset)
            {
                result.append(String(cString: name))
            }
        }
        return result
    }

    /// `.gnu_debuglink`: the name of the separate debug file and the CRC32 of its contents.
    public var debugLink: (name: String, crc: UInt32)? {
        guard let section = section(named: ".gnu_debuglink"), let data = contents(of: section),
            let name = data.cString(0), !name.isEmpty
        else { return nil }
        let crcOffset = (UInt64(name.utf8.count) + 1 + 3) & ~3
        guard let crc = data.u32(crcOffset) else { return nil }
        return (name, crc)
    }
    /// The `.eh_frame_hdr` search table, in ELF virtual addresses.
    public struct EHFrameTable: Sendable {
        public var headerAddress: UInt64
        public var tableAddress: UInt64
        public var entries: UInt64
    }

    static func readEHFrameTable(view: ByteView, segments: [ELFSegment]) -> EHFrameTable? {
        guard let segment = segments.first(where: { $0.type == ELFSegment.gnuEHFrame }),
            let header = view.slice(segment.offset, segment.fileSize)
        else { return nil }
        return parseEHFrameHeader(header, at: segment.vaddr, segmentSize: segment.fileSize)
    }

    /// The `.eh_frame_hdr` table of this image, its header read from `memory` at the image's
    /// runtime addresses (ELF virtual address + `bias`): for a separate debug file, which keeps
    /// the PT_GNU_EH_FRAME segment's place but not its bytes, with a minidump that holds them.
    /// In ELF virtual addresses, like `ehFrameTable`.
    public func ehFrameTable(headerFrom memory: some MemoryReader, bias: UInt64) -> EHFrameTable? {
        guard let segment = segments.first(where: { $0.type == ELFSegment.gnuEHFrame }) else { return nil }
        // version, three encodings, a pointer and a count of at most 8 bytes each.
        let bytes = memory.bytes(at: segment.vaddr &+ bias, count: Int(min(segment.memorySize, 20)))
        return bytes.withUnsafeBytes { Self.parseEHFrameHeader(ByteView($0), at: segment.vaddr, segmentSize: segment.memorySize) }
    }

    /// Parses an `.eh_frame_hdr` header (`header` holds at least its fixed part) of a segment of
    /// `segmentSize` bytes at virtual address `vaddr`.
    static func parseEHFrameHeader(_ header: ByteView, at vaddr: UInt64, segmentSize: UInt64) -> EHFrameTable? {
        guard header.u8(0) == 1 else { return nil }
        // version 1, eh_frame_ptr_enc, fde_count_enc, table_enc; libunwind's remote search
        // supports the standard table encoding only: DW_EH_PE_datarel | DW_EH_PE_sdata4.
        guard let framePointerEncoding = header.u8(1), let countEncoding = header.u8(2),
            header.u8(3) == DW_EH_PE_datarel | DW_EH_PE_sdata4
        else { return nil }
        /// The size of a fixed-size DW_EH_PE format (nil for LEB128 and unknown formats).
        func size(of encoding: UInt8) -> UInt64? {
            switch encoding & DW_EH_PE_formatMask {
            case DW_EH_PE_udata4, DW_EH_PE_sdata4: return 4
            case DW_EH_PE_udata8, DW_EH_PE_sdata8: return 8
            default: return nil
            }
        }
        guard let pointerSize = size(of: framePointerEncoding), let countSize = size(of: countEncoding) else { return nil }
        let countOffset = 4 + pointerSize
        // A count is never negative: sdata and udata read alike.
        guard let count = countSize == 4 ? header.u32(countOffset).map(UInt64.init) : header.u64(countOffset) else {
            return nil
        }
        let tableOffset = countOffset + countSize
        // The count and the segment's address are the file's word: a table that does not fit
        // in the segment, or an address that wraps, means no table (libunwind then falls back).
        guard count > 0, let tableSize = count.checkedMultiplying(8), let tableEnd = tableOffset.checkedAdding(tableSize),
            tableEnd <= segmentSize, let tableAddress = vaddr.checkedAdding(tableOffset),
            tableAddress.checkedAdding(tableSize) != nil
        else { return nil }
        return EHFrameTable(headerAddress: vaddr, tableAddress: tableAddress, entries: count)
    }

    /// The function symbols, built on first use (one pass through gelf_getsym and a sort), then
    /// shared: safe to ask from any thread.
    public var symbols: SymbolTable {
        state.withLock { state in
            if let table = state.symbols { return table }
            let built = SymbolTable(libelf: state.elf, sections: sections, view: view)
            state.symbols = built
            // Sorted: the tables' pages (libc6-dbg's: 360 KB) need not stay mapped.
            for table in SymbolTable.tables(in: sections) {
                releasePages(of: table)
                if let strings = SymbolTable.stringSection(for: table, in: sections) { releasePages(of: strings) }
            }
            return built
        }
    }

    /// Whether the file has a program interpreter (PT_INTERP): false for static executables.
    public var isDynamicallyLinked: Bool { segments.contains { $0.type == ELFSegment.interpreter } }

    /// Whether .symtab or .dynsym defines a symbol of this name (any type), decoded as the
    /// symbol table decodes them.
    public func definesSymbol(named name: String) -> Bool {
        let wanted = Array(name.utf8)
        return state.withLock { state in
            for table in SymbolTable.tables(in: sections) {
                guard let strings = SymbolTable.strings(for: table, sections: sections, view: view) else { continue }
                var found = false
                SymbolTable.forEachSymbol(libelf: state.elf, table: table, view: view) { symbol in
                    guard symbol.st_shndx != UInt16(SHN_UNDEF),
                        let candidate = strings.slice(UInt64(symbol.st_name), UInt64(wanted.count + 1)),
                        candidate.u8(UInt64(wanted.count)) == 0,
                        (0..<wanted.count).allSatisfy({ candidate.u8(UInt64($0)) == wanted[$0] })
                    else { return true }
                    found = true
                    return false
                }
                if found { return true }
            }
            return false
        }
    }

    /// The address (an ELF virtual address) of the defined data object (STT_OBJECT; not STT_TLS,
    /// whose value is an offset in each thread's block) named `name`, from the first symbol
    /// table that defines one: .dynsym first (a runtime's well-known globals, CPython's
    /// `_PyRuntime` and `Py_Version`, are exported, and .dynsym is a fraction of a .symtab that
    /// also lists every local), then .symtab (a program that links the runtime in without
    /// exporting it). A versioned .symtab name matches its bare name as `functionAddresses`
    /// does. One pass over each table, names compared in place.
    public func dataSymbolAddress(named name: String) -> UInt64? {
        let wanted = Array(name.utf8)
        guard let first = wanted.first else { return nil }
        let length = UInt64(wanted.count)
        return state.withLock { state in
            for table in SymbolTable.tables(in: sections).reversed() {
                guard let strings = SymbolTable.strings(for: table, sections: sections, view: view) else { continue }
                var found: UInt64?
                SymbolTable.forEachSymbol(libelf: state.elf, table: table, view: view) { symbol in
                    // A u32 offset plus a name's length: no overflow.
                    let start = UInt64(symbol.st_name)
                    let next = strings.u8(start + length)
                    guard next == 0 || next == UInt8(ascii: "@"), strings.u8(start) == first,
                        Int32(symbol.st_info & 0x0F) == STT_OBJECT, symbol.st_shndx != UInt16(SHN_UNDEF),
                        symbol.st_value != 0, let candidate = strings.slice(start, length),
                        (0..<wanted.count).allSatisfy({ candidate.u8(UInt64($0)) == wanted[$0] })
                    else { return true }
                    found = symbol.st_value
                    return false
                }
                if let found { return found }
            }
            return nil
        }
    }

    /// The addresses of the defined functions (STT_FUNC, STT_GNU_IFUNC) named `name` in the
    /// first symbol table that has any (.symtab, else .dynsym), each with whether it is global
    /// or weak. A .symtab name with a default version (`pthread_kill@@GLIBC_2.34`) matches its
    /// bare name; other versions do not. One pass over the table, names compared in place.
    public func functionAddresses(named name: String) -> [(address: UInt64, global: Bool)] {
        let wanted = Array(name.utf8)
        guard let first = wanted.first else { return [] }
        let length = UInt64(wanted.count)
        return state.withLock { state in
            var found: [(address: UInt64, global: Bool)] = []
            for table in SymbolTable.tables(in: sections) {
                guard let strings = SymbolTable.strings(for: table, sections: sections, view: view) else { continue }
                SymbolTable.forEachSymbol(libelf: state.elf, table: table, view: view) { symbol in
                    // A u32 offset plus a name's length: no overflow. The byte after the name
                    // and its first byte reject nearly every symbol before a full compare.
                    let start = UInt64(symbol.st_name)
                    let next = strings.u8(start + length)
                    guard next == 0 || next == UInt8(ascii: "@"), strings.u8(start) == first else { return true }
                    let type = Int32(symbol.st_info & 0x0F), binding = Int32(symbol.st_info >> 4)
                    guard type == STT_FUNC || type == STT_GNU_IFUNC, symbol.st_shndx != UInt16(SHN_UNDEF),
                        symbol.st_value != 0, let candidate = strings.slice(start, length),
                        (0..<wanted.count).allSatisfy({ candidate.u8(UInt64($0)) == wanted[$0] }),
                        next == 0 || strings.u8(start + length + 1) == UInt8(ascii: "@")
                    else { return true }
                    found.append((symbol.st_value, binding == STB_GLOBAL || binding == STB_WEAK))
                    return true
                }
                if !found.isEmpty { break }
            }
            return found
        }
    }
}
