// SectionCompression: the caps on compressed debug data, and the one file of this module that
// calls zlib and liblzma directly.
//
// Compressed debug sections (SHF_COMPRESSED with ELFCOMPRESS_ZLIB, and the older `.zdebug_*`
// form) are inflated by libelf (elf_compress, elf_compress_gnu) through ELFFile.sectionData,
// after the caps below have accepted the declared size; `.gnu_debuglink` CRCs go through zlib's
// `crc32`; MiniDebugInfo (`.gnu_debugdata`, an xz stream, which libelf does not decode) through
// liblzma's `lzma_stream_buffer_decode`, both declared by their own headers (CShims'
// crashport_libraries.h).
//
// Hard caps, so that a decompression bomb costs bounded memory and time:
// - `.gnu_debugdata` inflates into one buffer of at most 64 MiB (`miniDebugInfoCap`; Fedora's
//   MiniDebugInfo is a few hundred KB, a .symtab of a very large program a few tens of MB). The
//   decoder stops as soon as the buffer is full, so a stream claiming 500 MiB of zeros costs the
//   cap's memory and the time to produce 64 MiB, then is refused. liblzma's own memory (its
//   dictionary) is capped at 128 MiB (`xzMemoryLimit`).
// - A compressed section (SHF_COMPRESSED or `.zdebug_*`) is refused when its declared size
//   (`ch_size`) exceeds 256 MiB (`sectionCap`) or zlib's maximum ratio (1032:1) for its stream;
//   otherwise libelf inflates it into one buffer of exactly the declared size, which zlib never
//   writes past; a stream that does not inflate to the declared size is rejected.
// A refusal is a `DebugDataRefusal`, which reaches the report's notes and symbolicate's output
// through DebugImage. All functions are thread-safe.
//
// Large zlib sections that a reader visits sparsely (the DWARF of a debug file) can instead be
// inflated on demand (InflatedSection, below, through ELFFile.inflatedOnDemand): one streaming
// pass through a 64 KB buffer at open, then only the pages asked for.

import BoundedBytes
import CShims
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Debug data of one module that crashport would not decompress: a bomb, or a header that
/// claims more than the cap. Reported as "module NAME: debug data refused: SECTION REASON".
public struct DebugDataRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// The module's file name (the last path component).
    public var module: String
    /// `.gnu_debugdata`, `.debug_info`, …
    public var section: String
    /// "inflates past 64 MiB", "declares 3 GiB, past the 256 MiB cap", …
    public var reason: String

    public init(module: String, section: String, reason: String) {
        self.module = module
        self.section = section
        self.reason = reason
    }

    public var description: String { "module \(module): debug data refused: \(section) \(reason)" }
}

public enum SectionCompression {
    /// The most `.gnu_debugdata` may inflate to (64 MiB).
    public static let miniDebugInfoCap = 64 << 20
    /// The most liblzma may use for its dictionary while decoding `.gnu_debugdata` (128 MiB;
    /// `xz -9` needs 65 MiB).
    public static let xzMemoryLimit: UInt64 = 128 << 20
    /// The most one compressed debug section may declare and inflate to (256 MiB).
    public static let sectionCap = 256 << 20

    /// "64 MiB", "3 GiB", "1200 bytes".
    public static func describeSize(_ bytes: UInt64) -> String {
        if bytes >= 1 << 30 && bytes % (1 << 30) == 0 { return "\(bytes >> 30) GiB" }
        if bytes >= 1 << 20 { return "\(bytes >> 20) MiB" }
        return "\(bytes) bytes"
    }

    /// zlib's worst-case expansion is about 1032:1; anything claiming more is corrupt.
    public static func plausibleZlibSize(_ declared: UInt64, compressed: Int) -> Bool {
        let most = UInt64(compressed).checkedMultiplying(1100)?.checkedAdding(4096) ?? .max
        return declared <= UInt64(sectionCap) && declared <= most
    }

    /// Why a compressed section declaring `declared` bytes from a `compressed`-byte stream is
    /// refused, or nil when it may be inflated.
    public static func sectionRefusalReason(declared: UInt64, compressed: Int) -> String? {
        if declared > UInt64(sectionCap) {
            return "declares \(describeSize(declared)), past the \(describeSize(UInt64(sectionCap))) cap"
        }
        if !plausibleZlibSize(declared, compressed: compressed) {
            return "declares \(describeSize(declared)) from a \(compressed)-byte stream, more than zlib can inflate"
        }
        return nil
    }

    /// The compressed debug sections of `elf` (SHF_COMPRESSED `.debug_*`, header read with
    /// gelf_getchdr, and `.zdebug_*`) whose declared size is refused; reading the headers only.
    public static func sectionRefusals(in elf: ELFFile) -> [DebugDataRefusal] {
        let module = elf.fileName
        var refusals: [DebugDataRefusal] = []
        for section in elf.sections where section.name.hasPrefix(".debug_") || section.name.hasPrefix(".zdebug_") {
            guard let header = elf.compressionHeader(of: section),
                let reason = sectionRefusalReason(declared: header.declaredSize, compressed: header.streamSize)
            else { continue }
            refusals.append(DebugDataRefusal(module: module, section: section.name, reason: reason))
        }
        return refusals
    }

    /// The CRC-32 (ISO 3309, as `.gnu_debuglink` uses) of a byte buffer.
    public static func crc32(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: uLong = 0
        guard var pointer = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return 0 }
        var remaining = bytes.count
        while remaining > 0 {
            let chunk = min(remaining, 1 << 30)
            crc = CShims.crc32(crc, pointer, uInt(chunk))
            pointer += chunk
            remaining -= chunk
        }
        return UInt32(truncatingIfNeeded: crc)
    }

    /// Why `xzDecompress` gave nothing.
    public enum XZFailure: Error, Equatable {
        /// Past the cap: a bomb, or an image larger than we accept ("inflates past 64 MiB").
        case refused(String)
        /// Not a complete, valid .xz stream.
        case corrupt
    }

    /// Decodes a complete .xz stream in one pass into one buffer of at most `limit` bytes (an
    /// anonymous mapping: only the pages written cost memory), which becomes the image itself:
    /// the data is held once. liblzma stops when the buffer is full: a stream producing more is
    /// refused there, having cost `limit` bytes.
    public static func xzDecompress(
        _ input: ByteView, name: String, limit: Int = miniDebugInfoCap
    ) -> Result<MappedFile, XZFailure> {
        guard input.count > 0, let source = input.bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            return .failure(.corrupt)
        }
        var status = LZMA_PROG_ERROR
        let output = MappedFile(name: name, capacity: limit) { buffer in
            var inputPosition = 0, outputPosition = 0
            var memoryLimit = xzMemoryLimit
            status = lzma_stream_buffer_decode(
                &memoryLimit, 0, nil, source, &inputPosition, input.count,
                buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), &outputPosition, limit)
            // On failure liblzma may have written part of the buffer; keep it only on success.
            return status == LZMA_OK ? outputPosition : nil
        }
        switch status {
        case LZMA_OK: return output.map { .success($0) } ?? .failure(.corrupt)
        // LZMA_BUF_ERROR: the output is full and the stream goes on (a truncated input is
        // LZMA_DATA_ERROR). liblzma restores both positions on any error.
        case LZMA_BUF_ERROR:
            return .failure(.refused("inflates past \(describeSize(UInt64(limit)))"))
        case LZMA_MEMLIMIT_ERROR:
            return .failure(.refused("needs more than \(describeSize(xzMemoryLimit)) of decoder memory"))
        default: return .failure(.corrupt)
        }
    }
}

/// A zlib-compressed section (SHF_COMPRESSED, ELFCOMPRESS_ZLIB) inflated on demand, so that
/// symbolicating a few addresses in libc costs the pages of the few units they fall in, not the
/// 8 MB of its debug file's inflated DWARF.
///
/// `view` spans the whole declared size: an anonymous reservation (MAP_NORESERVE) whose pages
/// cost memory only once written. `materialize(_:)` writes the section's bytes into the pages
/// of a range; the other pages read as zeros, which a parser must not be asked to read (the
/// DWARF reader materializes a unit, its abbreviations and its line program before reading
/// them). zlib cannot seek, so init inflates the stream once, keeping nothing but an inflate
/// state every `checkpointInterval` bytes of output (a copy of zlib's state with its 32 KB
/// window, inflateCopy) and handing each chunk of output to `scan` (the unit headers); a later
/// range is inflated from the checkpoint at or before it, at most `checkpointInterval` bytes
/// too many. The compressed stream's pages are given back after each pass (`release`).
///
/// Hostile streams: nothing is written past the declared size; a stream that ends early, goes
/// on past its declared size or is corrupt fails init (nil), as libelf's inflating would.
/// Threads: materialize holds the object's mutex (`progress`, which holds the inflate states);
/// `view` may be read from any thread once the range read has been materialized.
public final class InflatedSection: Sendable {
    /// Output between two kept inflate states (each about 44 KB).
    public static let checkpointInterval = 512 << 10
    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    public let view: ByteView
    private let input: ByteView
    private let release: @Sendable () -> Void
    /// The SectionCache file `view` maps, when the section came from there (nil: `view` is
    /// this object's own anonymous reservation).
    private let cached: MappedFile?
    private typealias Checkpoint = (offset: Int, stream: UnsafeMutablePointer<z_stream>)
    /// What materialize reads and changes, behind the mutex: the inflate states kept at init,
    /// which pages are in place, how many passes were made.
    private struct Progress {
        var checkpoints: [Checkpoint]
        var pages: [UInt64]  // one bit per page of `view`: its bytes are in place
        var passes = 0
    }
    private let progress: Mutex<Progress>
    /// Partial passes after which the next one inflates the whole section: a batch touching
    /// many units (symbolicate --obj over all of libc) pays one full pass, as it did before,
    /// rather than a checkpoint's worth of inflating per unit.
    static let partialPasses = 8

    /// The section's bytes as SectionCache kept them (mapped read-only, kept from now on, and
    /// scanned by SectionCache.mapped): every page in place, nothing to inflate.
    init(cached: MappedFile, release: @escaping @Sendable () -> Void) {
        view = ByteView(cached.bytes)
        self.cached = cached
        input = ByteView(UnsafeRawBufferPointer(start: nil, count: 0))
        self.release = release
        progress = Mutex(
            Progress(checkpoints: [], pages: [UInt64](repeating: ~0, count: (cached.bytes.count / Self.pageSize + 1) / 64 + 1)))
        release()
    }

    /// Inflates `input` (the stream after the Elf64_Chdr) once, checking that it yields exactly
    /// `size` bytes, and writes what it inflates to `cache` (published once the whole section
    /// was, and only if `intact` says the file it was read from did not change meanwhile); nil
    /// when it does not or memory cannot be reserved.
    init?(
        input: ByteView, size: Int, release: @escaping @Sendable () -> Void, cache: SectionCache.Writer?,
        intact: () -> Bool = { true }, scan: (_ chunk: UnsafeRawBufferPointer, _ offset: Int) -> Void
    ) {
        guard size > 0, input.count > 0,
            let base = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0),
            base != MAP_FAILED
        else { return nil }
        guard
            let checkpoints = Self.inflateOnce(
                input: input, size: size, release: release, cache: cache, intact: intact, scan: scan)
        else {
            munmap(base, size)
            return nil
        }
        view = ByteView(UnsafeRawBufferPointer(start: base, count: size))
        cached = nil
        self.input = input
        self.release = release
        progress = Mutex(
            Progress(checkpoints: checkpoints, pages: [UInt64](repeating: 0, count: (size / Self.pageSize + 1) / 64 + 1)))
    }

    /// Init's one pass: the inflate states kept every `checkpointInterval` bytes of output, nil
    /// (and none kept) when the stream does not yield exactly `size` bytes.
    private static func inflateOnce(
        input: ByteView, size: Int, release: () -> Void, cache: SectionCache.Writer?, intact: () -> Bool,
        scan: (_ chunk: UnsafeRawBufferPointer, _ offset: Int) -> Void
    ) -> sending [Checkpoint]? {
        var checkpoints: [Checkpoint] = []
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        defer { scratch.deallocate() }
        var stream = z_stream()
        guard Self.start(&stream, input: input) else { return nil }
        defer { inflateEnd(&stream) }
        var produced = 0
        var ended = false
        while !ended {
            // Stop exactly at each checkpoint's offset to copy the state there.
            let nextCheckpoint = (produced / Self.checkpointInterval + 1) * Self.checkpointInterval
            let room = min(scratch.count, nextCheckpoint - produced, size - produced + 1)
            stream.next_out = scratch.baseAddress?.assumingMemoryBound(to: Bytef.self)
            stream.avail_out = uInt(room)
            let status = inflate(&stream, Z_NO_FLUSH)
            let count = room - Int(stream.avail_out)
            guard status == Z_OK || status == Z_STREAM_END, produced + count <= size else { break }
            if count > 0 {
                scan(UnsafeRawBufferPointer(rebasing: scratch[0..<count]), produced)
                // Handed over as a ByteView (Sendable): the compiler then sees that the inflate
                // states kept owe nothing to the writer, and lets them go to `progress`.
                cache?.write(ByteView(UnsafeRawBufferPointer(rebasing: scratch[0..<count])))
            }
            produced += count
            if status == Z_STREAM_END {
                ended = true
            } else if count == 0 {
                break  // no progress: the input ran out before the end of the stream
            } else if produced == nextCheckpoint && produced < size {
                let copy = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
                copy.initialize(to: z_stream())
                guard inflateCopy(copy, &stream) == Z_OK else {
                    copy.deallocate()
                    break
                }
                checkpoints.append((produced, copy))
            }
        }
        release()
        guard ended, produced == size else {
            discard(checkpoints)
            return nil
        }
        if intact() { cache?.finish() }
        return checkpoints
    }

    private static func discard(_ checkpoints: [Checkpoint]) {
        for checkpoint in checkpoints {
            inflateEnd(checkpoint.stream)
            checkpoint.stream.deallocate()
        }
    }

    deinit {
        progress.withLock { Self.discard($0.checkpoints) }
        if cached == nil { munmap(UnsafeMutableRawPointer(mutating: view.bytes.baseAddress), view.count) }
    }

    private static func start(_ stream: inout z_stream, input: ByteView) -> Bool {
        stream.next_in = UnsafeMutablePointer(mutating: input.bytes.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(clamping: input.count)
        return inflateInit_(&stream, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK
    }

    /// Puts the section's bytes in `range` (clamped to the section) in place: every page the
    /// range touches, inflated from the nearest checkpoint before it.
    public func materialize(_ range: Range<Int>) {
        let lower = max(range.lowerBound, 0), upper = min(range.upperBound, view.count)
        guard lower < upper else { return }
        progress.withLock { materialize(lower..<upper, progress: &$0) }
    }

    private func materialize(_ range: Range<Int>, progress: inout Progress) {
        let (lower, upper) = (range.lowerBound, range.upperBound)
        var firstPage = lower / Self.pageSize, lastPage = (upper - 1) / Self.pageSize
        guard (firstPage...lastPage).contains(where: { progress.pages[$0 >> 6] & (1 << UInt64($0 & 63)) == 0 }) else {
            return
        }
        progress.passes += 1
        if progress.passes > Self.partialPasses {
            firstPage = 0
            lastPage = (view.count - 1) / Self.pageSize
        }
        let start = firstPage * Self.pageSize, end = min((lastPage + 1) * Self.pageSize, view.count)
        var stream = z_stream()
        var produced = 0
        if let checkpoint = progress.checkpoints.last(where: { $0.offset <= start }) {
            guard inflateCopy(&stream, checkpoint.stream) == Z_OK else { return }
            produced = checkpoint.offset
        } else {
            guard Self.start(&stream, input: input) else { return }
        }
        defer {
            inflateEnd(&stream)
            release()
        }
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        defer { scratch.deallocate() }
        let target = UnsafeMutableRawPointer(mutating: view.bytes.baseAddress!)
        while produced < end {
            // Bytes before the range go to the scratch buffer; the range's straight into place.
            let direct = produced >= start
            let room = direct ? end - produced : min(scratch.count, start - produced)
            stream.next_out = (direct ? target + produced : scratch.baseAddress!).assumingMemoryBound(to: Bytef.self)
            stream.avail_out = uInt(room)
            let status = inflate(&stream, Z_NO_FLUSH)
            let count = room - Int(stream.avail_out)
            produced += count
            guard status == Z_OK || status == Z_STREAM_END, count > 0 || status == Z_STREAM_END else { break }
            if status == Z_STREAM_END { break }
        }
        // init checked that the stream yields the whole section: only a page fully inflated
        // is marked (a failure here leaves zeros, which read as no data).
        if produced >= end {
            for page in firstPage...lastPage { progress.pages[page >> 6] |= 1 << UInt64(page & 63) }
        }
    }
}
