// ELFImage: a real 64-bit little-endian ELF file (built with cc) as bytes, for tests that patch
// it: the header's, section headers' and program headers' fields at their offsets in <elf.h>, a
// section or segment found by hand (never through the reader under test), fields overwritten in
// place.

public struct ELFImage {
    public var bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
    public func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
    public func u64(_ at: Int) -> Int { u32(at) | u32(at + 4) << 32 }

    /// Overwrites `size` bytes at `at` with the low bytes of `value`.
    public mutating func put(_ value: UInt64, at: Int, size: Int) { bytes.put(value, at: at, size: size) }

    /// Elf64_Ehdr's e_phoff, e_phentsize, e_phnum, e_shoff and e_shnum.
    public var phoff: Int { u64(32) }
    public var phentsize: Int { u16(54) }
    public var phnum: Int { u16(56) }
    public var shoff: Int { u64(40) }
    public var shnum: Int { u16(60) }

    /// The file offset of section header `index` (Elf64_Shdr: 64 bytes).
    public func header(_ index: Int) -> Int { shoff + index * 64 }

    /// The section header's file offset, and the section's offset and size.
    public func section(_ name: String) -> (header: Int, offset: Int, size: Int)? {
        let names = u64(header(u16(62)) + 24)
        for index in 0..<shnum {
            let at = header(index)
            var end = names + u32(at)
            while bytes[end] != 0 { end += 1 }
            if String(decoding: bytes[(names + u32(at))..<end], as: UTF8.self) == name {
                return (at, u64(at + 24), u64(at + 32))
            }
        }
        return nil
    }

    /// The first program header of p_type `type`: its file offset, and the segment's p_offset.
    public func segment(type: Int) -> (header: Int, offset: Int)? {
        for index in 0..<phnum {
            let at = phoff + index * phentsize
            if u32(at) == type { return (at, u64(at + 8)) }
        }
        return nil
    }
}
