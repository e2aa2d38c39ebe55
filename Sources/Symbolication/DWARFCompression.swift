// DWARFCompression: the one file of this module that calls zlib and liblzma.
//
// Compressed debug sections (SHF_COMPRESSED with ELFCOMPRESS_ZLIB, and the older `.zdebug_*`
// form) go through zlib's `uncompress`; `.gnu_debuglink` CRCs through zlib's `crc32`;
// MiniDebugInfo (`.gnu_debugdata`, an xz stream) through liblzma's one-shot
// `lzma_stream_buffer_decode`. The functions are declared with @_silgen_name rather than through
// a C header so the shims stay untouched; every argument is an integer or a pointer, which the
// Swift and C calling conventions pass identically on the supported targets.
//
// Every output size is capped (`maximumOutputSize`) and checked against the declared size, so a
// hostile header cannot make us allocate without bound. All functions are thread-safe.

import BoundedBytes

@_silgen_name("uncompress")
private func _zlib_uncompress(
    _ dest: UnsafeMutablePointer<UInt8>?, _ destLen: UnsafeMutablePointer<UInt>?,
    _ source: UnsafePointer<UInt8>?, _ sourceLen: UInt
) -> Int32

@_silgen_name("crc32")
private func _zlib_crc32(_ crc: UInt, _ buffer: UnsafePointer<UInt8>?, _ length: UInt32) -> UInt

@_silgen_name("lzma_stream_buffer_decode")
private func _lzma_stream_buffer_decode(
    _ memlimit: UnsafeMutablePointer<UInt64>?, _ flags: UInt32, _ allocator: UnsafeRawPointer?,
    _ input: UnsafePointer<UInt8>?, _ inputPosition: UnsafeMutablePointer<Int>?, _ inputSize: Int,
    _ output: UnsafeMutablePointer<UInt8>?, _ outputPosition: UnsafeMutablePointer<Int>?, _ outputSize: Int
) -> Int32

enum DWARFCompression {
    /// The largest decompressed section or MiniDebugInfo image we accept (512 MiB).
    static let maximumOutputSize = 512 << 20

    /// zlib's worst-case expansion is about 1032:1; anything claiming more is corrupt.
    static func plausibleZlibSize(_ declared: UInt64, compressed: Int) -> Bool {
        declared <= UInt64(maximumOutputSize) && declared <= UInt64(compressed) * 1100 + 4096
    }

    /// Inflates a zlib stream whose decompressed size is known; nil unless it inflates to
    /// exactly `size` bytes. The caller owns the returned buffer (deallocate it).
    static func zlibDecompress(_ input: ByteView, size: UInt64) -> UnsafeMutableRawBufferPointer? {
        guard size > 0, plausibleZlibSize(size, compressed: input.count), input.count > 0 else { return nil }
        let output = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(size), alignment: 16)
        var length = UInt(size)
        let status = _zlib_uncompress(
            output.baseAddress!.assumingMemoryBound(to: UInt8.self), &length,
            input.bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt(input.count))
        guard status == 0, length == UInt(size) else {
            output.deallocate()
            return nil
        }
        return output
    }

    /// The CRC-32 (ISO 3309, as `.gnu_debuglink` uses) of a byte buffer.
    static func crc32(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt = 0
        guard var pointer = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return 0 }
        var remaining = bytes.count
        while remaining > 0 {
            let chunk = min(remaining, 1 << 30)
            crc = _zlib_crc32(crc, pointer, UInt32(chunk))
            pointer += chunk
            remaining -= chunk
        }
        return UInt32(truncatingIfNeeded: crc)
    }

    /// Decodes a complete .xz stream; the output buffer grows by doubling up to the cap.
    static func xzDecompress(_ input: ByteView) -> [UInt8]? {
        guard input.count > 0, let source = input.bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            return nil
        }
        let LZMA_OK: Int32 = 0, LZMA_BUF_ERROR: Int32 = 10
        var capacity = min(max(input.count * 4, 64 << 10), maximumOutputSize)
        while true {
            var output = [UInt8](repeating: 0, count: capacity)
            var inputPosition = 0, outputPosition = 0
            var memoryLimit: UInt64 = UInt64(maximumOutputSize)
            let status = output.withUnsafeMutableBufferPointer { buffer in
                _lzma_stream_buffer_decode(
                    &memoryLimit, 0, nil, source, &inputPosition, input.count,
                    buffer.baseAddress, &outputPosition, capacity)
            }
            if status == LZMA_OK {
                output.removeSubrange(outputPosition...)
                return output
            }
            guard status == LZMA_BUF_ERROR, capacity < maximumOutputSize else { return nil }
            capacity = min(capacity * 2, maximumOutputSize)
        }
    }
}
