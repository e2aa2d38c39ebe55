// MemoryReader: the one way to read another address space: a live process (LiveProcess's
// ProcessMemory), regions captured from one (RegionMemory, below), a minidump's memory list
// (ReportModel) or an ELF image as it would be loaded (ObjectFile). Modelled on Swift's
// RuntimeModule MemoryReader (throwing reads, typed reads in an extension) and Crashpad's
// ProcessMemory::ReadUpTo (a partial read that says how far it got).

/// Bytes at `address` were not there: unmapped, not captured, or past a region's end.
public struct MemoryReadError: Error, Equatable, Sendable, CustomStringConvertible {
    public var address: UInt64
    public var count: Int

    public init(address: UInt64, count: Int) {
        self.address = address
        self.count = count
    }

    public var description: String { "cannot read \(count) bytes at 0x\(String(address, radix: 16))" }
}

public protocol MemoryReader {
    /// Copies as many bytes from `address` as can be read contiguously, up to `buffer.count`,
    /// and returns how many: a short count means the range ran into memory that is not there.
    func readUpTo(from address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int
}

extension MemoryReader {
    /// Copies exactly `buffer.count` bytes from `address`, or throws.
    @inlinable
    public func read(from address: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(MemoryReadError) {
        guard readUpTo(from: address, into: buffer) == buffer.count else {
            throw MemoryReadError(address: address, count: buffer.count)
        }
    }

    /// A value of trivial type `T` (an integer, a C struct such as `Elf64_Ehdr`) at `address`,
    /// in the target's byte order (little-endian, as this machine's).
    @inlinable
    public func fetch<T: BitwiseCopyable>(_ type: T.Type, from address: UInt64) throws(MemoryReadError) -> T {
        try withUnsafeTemporaryAllocation(byteCount: MemoryLayout<T>.size, alignment: MemoryLayout<T>.alignment) {
            (buffer) throws(MemoryReadError) -> T in
            try read(from: address, into: buffer)
            return buffer.load(as: T.self)
        }
    }

    /// Up to `count` bytes from `address`: fewer when the range runs into memory that is not
    /// there.
    public func bytes(at address: UInt64, count: Int) -> [UInt8] {
        guard count > 0 else { return [] }
        var result = [UInt8](repeating: 0, count: count)
        let copied = result.withUnsafeMutableBytes { readUpTo(from: address, into: $0) }
        result.removeLast(count - copied)
        return result
    }
}

/// A block of memory copied out of a target process.
public struct MemoryRegion: Sendable, Equatable {
    /// Address of `bytes[0]` in the target process.
    public var start: UInt64
    public var bytes: [UInt8]

    public init(start: UInt64, bytes: [UInt8]) {
        self.start = start
        self.bytes = bytes
    }

    /// One past the last address covered (saturating, so a hostile start cannot wrap).
    public var end: UInt64 {
        let (sum, overflow) = start.addingReportingOverflow(UInt64(bytes.count))
        return overflow ? UInt64.max : sum
    }

    public func contains(_ address: UInt64) -> Bool { address >= start && address < end }
}

/// Memory made of captured regions (a snapshot's stacks, a minidump's memory list), searched by
/// address.
public struct RegionMemory: MemoryReader, Sendable, Equatable {
    public let regions: [MemoryRegion]

    public init(regions: [MemoryRegion]) {
        self.regions = regions.sorted { $0.start < $1.start }
    }

    public func readUpTo(from address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        // The last region starting at or below the address (captured regions do not overlap:
        // capture keeps a stack and the bytes around a pc apart).
        if let found = regions.lastIndex(atOrBelow: address, key: \.start), regions[found].contains(address) {
            let region = regions[found]
            let offset = Int(address - region.start)
            let count = min(buffer.count, region.bytes.count - offset)
            region.bytes.withUnsafeBytes {
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<offset + count]))
            }
            return count
        }
        return 0
    }
}

/// Readers consulted in order: an address is read from the first layer that has its first
/// byte (for example a module's code from its file, then a captured stack, then a live process).
public struct LayeredMemory: MemoryReader {
    public let layers: [any MemoryReader]

    public init(_ layers: [any MemoryReader]) { self.layers = layers }

    public func readUpTo(from address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        for layer in layers {
            let count = layer.readUpTo(from: address, into: buffer)
            if count > 0 { return count }
        }
        return 0
    }
}
