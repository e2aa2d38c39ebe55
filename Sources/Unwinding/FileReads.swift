// FileReads: a memory layer that remembers what it served. The unwinder reads code and CFI from
// the modules' files through it; what it read goes into the minidump (Unwinder.fileBytesRead),
// so that the same unwind can be done again where the files are not (a machine with only the
// debug files, whose code and CFI sections are NOBITS).

import BoundedBytes
import ObjectFile

final class FileReads: MemoryReader {
    /// Reads are remembered in granules of this many bytes (merged into regions at the end).
    static let granule: UInt64 = 64
    /// At most this many granules (1 MiB) are remembered; reads past it are still served.
    static let maxGranules = 16_384

    let files: ImageMemory
    private var granules: Set<UInt64> = []

    init(_ files: ImageMemory) { self.files = files }

    func readUpTo(from address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let count = files.readUpTo(from: address, into: buffer)
        if count > 0 && granules.count < Self.maxGranules {
            var granule = address / Self.granule
            let last = (address &+ UInt64(count - 1)) / Self.granule
            while granule <= last && granules.count < Self.maxGranules {
                granules.insert(granule)
                granule += 1
            }
        }
        return count
    }

    /// The granules read, with the files' bytes, merged where they are contiguous.
    func regions() -> [MemoryRegion] {
        var regions: [MemoryRegion] = []
        var buffer = [UInt8](repeating: 0, count: Int(Self.granule))
        for granule in granules.sorted() {
            let address = granule * Self.granule
            let count = buffer.withUnsafeMutableBytes { files.readUpTo(from: address, into: $0) }
            guard count > 0 else { continue }
            if let last = regions.last, last.end == address, last.bytes.count % Int(Self.granule) == 0 {
                regions[regions.count - 1].bytes += buffer[..<count]
            } else {
                regions.append(MemoryRegion(start: address, bytes: Array(buffer[..<count])))
            }
        }
        return regions
    }
}
