// EHFrameIndex: a binary-search table of FDEs built from .eh_frame, for ELF files that lack
// .eh_frame_hdr (static glibc executables: GCC passes --eh-frame-hdr only to dynamic links).
//
// The table has the layout of .eh_frame_hdr's (pairs of int32: initial location, FDE address,
// both relative to a base, sorted by location), so libunwind's remote-table search can use it
// unchanged. Parsing is bounded by the section size; a malformed entry ends the scan.

import BoundedBytes

// DW_EH_PE pointer encodings (Linux Standard Base Core, "DWARF Exception Header Encoding"):
// the low nibble is the format, the next three bits how the value is applied.
let DW_EH_PE_absptr: UInt8 = 0x00
let DW_EH_PE_uleb128: UInt8 = 0x01
let DW_EH_PE_udata2: UInt8 = 0x02
let DW_EH_PE_udata4: UInt8 = 0x03
let DW_EH_PE_udata8: UInt8 = 0x04
let DW_EH_PE_sleb128: UInt8 = 0x09
let DW_EH_PE_sdata2: UInt8 = 0x0A
let DW_EH_PE_sdata4: UInt8 = 0x0B
let DW_EH_PE_sdata8: UInt8 = 0x0C
let DW_EH_PE_pcrel: UInt8 = 0x10
let DW_EH_PE_datarel: UInt8 = 0x30
let DW_EH_PE_omit: UInt8 = 0xFF
let DW_EH_PE_formatMask: UInt8 = 0x0F
let DW_EH_PE_applicationMask: UInt8 = 0x70

public struct EHFrameIndex: Sendable {
    /// Runtime-independent: relative to the .eh_frame section's ELF virtual address.
    public var base: UInt64
    /// (location − base, fde − base) pairs, sorted, as little-endian int32 bytes.
    public var table: [UInt8]
    public var entries: Int

    public init?(elf: ELFFile) {
        guard let section = elf.section(named: ".eh_frame"), let data = elf.contents(of: section) else { return nil }
        base = section.address
        var pairs: [(Int64, Int64)] = []
        var encodings: [UInt64: UInt8] = [:]  // CIE offset -> FDE pointer encoding
        var offset: UInt64 = 0
        while let length32 = data.u32(offset), length32 != 0 {
            var length = UInt64(length32)
            var start = offset + 4
            if length32 == 0xFFFF_FFFF {
                guard let extended = data.u64(offset + 4) else { break }
                length = extended
                start = offset + 12
            }
            guard data.has(start, length), length >= 4, let id = data.u32(start) else { break }
            let next = start + length
            if id == 0 {
                encodings[offset] = Self.fdeEncoding(data, cieStart: start + 4, end: next)
            } else if UInt64(id) <= start {
                let cie = start - UInt64(id)
                let encoding = encodings[cie] ?? 0
                var cursor = start + 4
                if let location = Self.readPointer(data, &cursor, encoding: encoding, fieldAddress: base &+ cursor),
                    location != 0
                {
                    let relative = Int64(bitPattern: location &- base)
                    if relative >= Int64(Int32.min) && relative <= Int64(Int32.max) {
                        pairs.append((relative, Int64(offset)))
                    }
                }
            }
            offset = next
        }
        guard !pairs.isEmpty, pairs.count < Int(Int32.max) else { return nil }
        pairs.sort { $0.0 < $1.0 }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(pairs.count * 8 + 8)
        for (location, fde) in pairs {
            for value in [Int32(location), Int32(fde)] {
                withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
            }
        }
        bytes.append(contentsOf: [UInt8](repeating: 0, count: 8))  // word-sized reads past the end
        table = bytes
        entries = pairs.count
    }

    /// The 'R' augmentation of a CIE: how its FDEs encode their initial location.
    static func fdeEncoding(_ data: ByteView, cieStart: UInt64, end: UInt64) -> UInt8 {
        var cursor = cieStart
        guard let version = data.u8(cursor) else { return 0 }
        cursor += 1
        var augmentation: [UInt8] = []
        while let byte = data.u8(cursor), byte != 0, cursor < end {
            augmentation.append(byte)
            cursor += 1
        }
        cursor += 1
        if augmentation.starts(with: Array("eh".utf8)) { cursor += 8 }
        _ = data.uleb128(at: &cursor)  // code alignment
        _ = data.sleb128(at: &cursor)  // data alignment
        if version == 1 { cursor += 1 } else { _ = data.uleb128(at: &cursor) }  // return register
        guard augmentation.first == UInt8(ascii: "z") else { return 0 }
        _ = data.uleb128(at: &cursor)  // augmentation data length
        for letter in augmentation.dropFirst() {
            switch letter {
            case UInt8(ascii: "R"): return data.u8(cursor) ?? 0
            case UInt8(ascii: "P"):
                guard let encoding = data.u8(cursor) else { return 0 }
                cursor += 1
                _ = readPointer(data, &cursor, encoding: encoding, fieldAddress: 0)
            case UInt8(ascii: "L"): cursor += 1
            default: break
            }
        }
        return 0
    }

    /// Reads a DW_EH_PE-encoded pointer; pcrel is resolved against `fieldAddress`.
    static func readPointer(_ data: ByteView, _ cursor: inout UInt64, encoding: UInt8, fieldAddress: UInt64) -> UInt64? {
        if encoding == DW_EH_PE_omit { return nil }
        var value: UInt64
        switch encoding & DW_EH_PE_formatMask {
        case DW_EH_PE_absptr, DW_EH_PE_udata8, DW_EH_PE_sdata8:
            guard let raw = data.u64(cursor) else { return nil }; value = raw; cursor += 8
        case DW_EH_PE_uleb128: guard let raw = data.uleb128(at: &cursor) else { return nil }; value = raw
        case DW_EH_PE_udata2: guard let raw = data.u16(cursor) else { return nil }; value = UInt64(raw); cursor += 2
        case DW_EH_PE_udata4: guard let raw = data.u32(cursor) else { return nil }; value = UInt64(raw); cursor += 4
        case DW_EH_PE_sleb128: guard let raw = data.sleb128(at: &cursor) else { return nil }; value = UInt64(bitPattern: raw)
        case DW_EH_PE_sdata2:
            guard let raw = data.u16(cursor) else { return nil }; value = UInt64(bitPattern: Int64(Int16(bitPattern: raw)));
            cursor += 2
        case DW_EH_PE_sdata4:
            guard let raw = data.u32(cursor) else { return nil }; value = UInt64(bitPattern: Int64(Int32(bitPattern: raw)));
            cursor += 4
        default: return nil
        }
        switch encoding & DW_EH_PE_applicationMask {
        case DW_EH_PE_absptr: break
        case DW_EH_PE_pcrel: value = value &+ fieldAddress
        default: return nil  // datarel/textrel/funcrel do not occur in .eh_frame FDE locations
        }
        return value
    }
}
