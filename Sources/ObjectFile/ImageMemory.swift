// ImageMemory: ELF images read as memory. A module's object file is a MemoryReader at its
// runtime addresses (its PT_LOAD contents), and a build-id (and the package note) is read
// straight from any MemoryReader (a live process, a minidump) through the image's own headers,
// with no copy of the image.

import BoundedBytes

#if canImport(Glibc)
import Glibc
#endif

/// The file contents of modules' loaded segments at their runtime addresses. Code, unwind
/// tables and read-only data are the same in the file as in the process; writable segments are
/// not (`segments: .readOnly` leaves them out), nor is anything past a segment's file size.
public struct ImageMemory: MemoryReader {
    public enum Segments: Sendable { case readOnly, all }

    struct Range {
        var start: UInt64
        var end: UInt64
        var bytes: UnsafeRawBufferPointer
        /// Keeps `bytes`' mapping alive.
        var owner: ELFFile
    }

    let ranges: [Range]

    public init(modules: [LoadedModule], segments: Segments) {
        var ranges: [Range] = []
        for module in modules {
            guard let object = module.object else { continue }
            for segment in object.segments where segment.type == ELFSegment.load && segment.fileSize > 0 {
                if segments == .readOnly && segment.isWritable { continue }
                let start = segment.vaddr &+ module.loadBias  // the bias is modular: it may wrap
                guard let view = object.view.slice(segment.offset, segment.fileSize),
                    let end = start.checkedAdding(segment.fileSize)
                else { continue }
                ranges.append(Range(start: start, end: end, bytes: view.bytes, owner: object))
            }
        }
        self.ranges = ranges.sorted { $0.start < $1.start }
    }

    public func readUpTo(from address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let found = ranges.lastIndex(atOrBelow: address, key: \.start), address < ranges[found].end else { return 0 }
        let range = ranges[found]
        let offset = Int(address - range.start)
        let count = min(buffer.count, range.bytes.count - offset)
        buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: range.bytes[offset..<offset + count]))
        return count
    }
}

extension ELFFile {
    /// The GNU build-id of the ELF image loaded at `base` in `memory`, read from the image itself:
    /// its ELF header, its program headers and its PT_NOTE segments (which lie in the first
    /// PT_LOAD, mapped at the base). nil when the image is not there, not ELF, or has none.
    public static func buildID(ofImageAt base: UInt64, in target: some MemoryReader) -> BuildID? {
        imageNotes(ofImageAt: base, in: target).buildID
    }

    /// The GNU build-id and the package metadata note (PackageNote, parsed) of the ELF image
    /// loaded at `base` in `memory`, read as `buildID(ofImageAt:in:)` reads the build-id: from
    /// the same PT_NOTE segments (each at most a page), so a module whose file cannot be opened
    /// still names its package.
    public static func imageNotes(
        ofImageAt base: UInt64, in target: some MemoryReader
    ) -> (
        buildID: BuildID?, package: Result<PackageMetadata, PackageNote.Refusal>?
    ) {
        // The headers and notes lie in the image's first page: read it once (one system call on
        // a live process), and anything past it from the target.
        let firstPage = MemoryRegion(start: base, bytes: target.bytes(at: base, count: 4096))
        let memory = LayeredMemory([RegionMemory(regions: [firstPage]), target])
        guard let (headers, imageBase) = programHeaders(ofImageAt: base, in: memory) else { return (nil, nil) }
        var buildID: BuildID?
        var package: Result<PackageMetadata, PackageNote.Refusal>?
        for note in headers where note.p_type == UInt32(PT_NOTE) && note.p_filesz <= 4096 {
            let bytes = memory.bytes(at: base &+ (note.p_vaddr &- imageBase), count: Int(note.p_filesz))
            guard bytes.count == Int(note.p_filesz) else { continue }
            bytes.withUnsafeBytes { area in
                buildID = buildID ?? ELFFile.buildID(inNotes: ByteView(area))
                package = package ?? packageNote(inNotes: ByteView(area))
            }
            if buildID != nil && package != nil { break }
        }
        return (buildID, package)
    }

    /// The program headers of the ELF image loaded at `base` in `memory`, and the virtual address
    /// its first PT_LOAD maps to `base` from (runtime address = vaddr − imageBase + base).
    public static func programHeaders(
        ofImageAt base: UInt64, in memory: some MemoryReader
    ) -> (
        headers: [Elf64_Phdr], imageBase: UInt64
    )? {
        guard let header = try? memory.fetch(Elf64_Ehdr.self, from: base),
            header.e_ident.0 == 0x7F, header.e_ident.1 == UInt8(ascii: "E"), header.e_ident.2 == UInt8(ascii: "L"),
            header.e_ident.3 == UInt8(ascii: "F"), header.e_ident.4 == UInt8(ELFCLASS64),
            header.e_phentsize == UInt16(MemoryLayout<Elf64_Phdr>.size), header.e_phnum <= 256
        else { return nil }
        var headers: [Elf64_Phdr] = []
        for index in 0..<UInt64(header.e_phnum) {
            guard let at = header.e_phoff.checkedAdding(index * UInt64(header.e_phentsize)),
                let address = base.checkedAdding(at),
                let programHeader = try? memory.fetch(Elf64_Phdr.self, from: address)
            else { return nil }
            headers.append(programHeader)
        }
        // The image's first PT_LOAD is at the base: vaddr − its own vaddr is the offset from it.
        guard let first = headers.filter({ $0.p_type == UInt32(PT_LOAD) }).min(by: { $0.p_vaddr < $1.p_vaddr }) else {
            return nil
        }
        return (headers, first.p_vaddr &- first.p_offset)
    }

    /// The `.eh_frame_hdr` table and executable ranges of the image loaded at `base`, read from
    /// `memory` alone (its headers, then PT_GNU_EH_FRAME's header): for a module whose file is
    /// found nowhere, from a minidump that holds what the unwind read online. Runtime addresses.
    public static func unwindTable(
        ofImageAt base: UInt64, in memory: some MemoryReader
    ) -> (
        table: EHFrameTable, executable: [Range<UInt64>]
    )? {
        guard let (headers, imageBase) = programHeaders(ofImageAt: base, in: memory),
            let frameHeader = headers.first(where: { $0.p_type == UInt32(PT_GNU_EH_FRAME) })
        else { return nil }
        let bias = base &- imageBase
        let bytes = memory.bytes(at: frameHeader.p_vaddr &+ bias, count: Int(min(frameHeader.p_memsz, 20)))
        guard
            let table = bytes.withUnsafeBytes({
                parseEHFrameHeader(ByteView($0), at: frameHeader.p_vaddr &+ bias, segmentSize: frameHeader.p_memsz)
            })
        else { return nil }
        let executable = headers.compactMap { header -> Range<UInt64>? in
            guard header.p_type == UInt32(PT_LOAD), header.p_flags & UInt32(PF_X) != 0 else { return nil }
            return UInt64.checkedRange(start: header.p_vaddr &+ bias, count: header.p_memsz)
        }
        return (table, executable)
    }
}
