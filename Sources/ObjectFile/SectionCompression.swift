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

import BoundedBytes
import CShims

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
