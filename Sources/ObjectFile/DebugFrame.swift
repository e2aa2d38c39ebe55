// DebugFrame: a module's .debug_frame (DWARF CFI kept with the debug information: a program
// built with -fno-asynchronous-unwind-tables, or a separate debug file) rewritten in .eh_frame's
// form, so libunwind's remote-table search serves it like any .eh_frame.
//
// The two formats say the same things differently: .debug_frame's CIE id is 0xffffffff (0 in
// .eh_frame), an FDE names its CIE by section offset (by distance back from the field), and an
// FDE's location is an absolute link-time address (.eh_frame encodes it as the CIE's 'R'
// augmentation says). So each CIE is written again with augmentation "zR" and encoding
// pcrel|sdata8, each FDE with its location made relative to where the image is served (which is
// why an image is made for one address and one load bias). The CFA instructions are copied as
// they are: they mean the same in both. Parsing is bounded by the section; a malformed entry
// or 64-bit DWARF ends the scan, an unsupported CIE (an augmentation, an address size other
// than 8) is skipped with its FDEs.

import BoundedBytes

public struct DebugFrame: Sendable {
    struct CIE {
        /// The CIE's code alignment, data alignment and return register, as LEB128 bytes.
        var alignments: [UInt8]
        var instructions: [UInt8]
    }

    struct FDE {
        var cie: Int
        /// Link-time start address and length of the code it covers.
        var start: UInt64
        var length: UInt64
        var instructions: [UInt8]
    }

    let cies: [CIE]
    /// Sorted by start, none overlapping the one before it.
    let fdes: [FDE]

    public var count: Int { fdes.count }

    /// Parses `data`, a .debug_frame section, keeping FDEs that lie inside `code` (link-time
    /// ranges: a function the linker discarded keeps its FDE, at address 0). nil when none does.
    public init?(_ data: ByteView, code: [Range<UInt64>]) {
        var cies: [CIE] = []
        var cieIndex: [UInt64: Int] = [:]
        var fdes: [FDE] = []
        var offset: UInt64 = 0
        while let length32 = data.u32(offset), length32 != 0, length32 < 0xFFFF_FFF0 {
            let start = offset + 4
            let length = UInt64(length32)
            guard data.has(start, length), length >= 4, let id = data.u32(start) else { break }
            let next = start + length
            defer { offset = next }
            var cursor = start + 4
            if id == 0xFFFF_FFFF {
                if let cie = Self.parseCIE(data, &cursor, end: next) {
                    cieIndex[offset] = cies.count
                    cies.append(cie)
                }
                continue
            }
            // An FDE: its CIE by section offset (CIEs come first in practice; one later is not
            // looked for), then an 8-byte location and length.
            guard next >= cursor + 16, let cie = cieIndex[UInt64(id)], let location = data.u64(cursor),
                let range = data.u64(cursor + 8),
                range > 0, let end = location.checkedAdding(range),
                code.contains(where: { $0.lowerBound <= location && end <= $0.upperBound }),
                let instructions = data.slice(cursor + 16, next - (cursor + 16))
            else { continue }
            fdes.append(FDE(cie: cie, start: location, length: range, instructions: Array(instructions.bytes)))
        }
        fdes.sort { $0.start < $1.start }
        var kept: [FDE] = []
        for fde in fdes where kept.last.map({ $0.start + $0.length <= fde.start }) ?? true { kept.append(fde) }
        guard !kept.isEmpty, kept.count < Int(Int32.max) else { return nil }
        self.cies = cies
        self.fdes = kept
    }

    static func parseCIE(_ data: ByteView, _ cursor: inout UInt64, end: UInt64) -> CIE? {
        guard let version = data.u8(cursor), [1, 3, 4].contains(version), data.u8(cursor + 1) == 0 else { return nil }
        cursor += 2  // version, and an empty augmentation
        if version == 4 {
            // address_size, segment_selector_size
            guard data.u8(cursor) == 8, data.u8(cursor + 1) == 0 else { return nil }
            cursor += 2
        }
        let alignmentsStart = cursor
        guard data.uleb128(at: &cursor) != nil, data.sleb128(at: &cursor) != nil else { return nil }
        var alignments = data.slice(alignmentsStart, cursor - alignmentsStart).map { Array($0.bytes) } ?? []
        if version == 1 {
            guard let register = data.u8(cursor) else { return nil }
            cursor += 1
            alignments += Self.uleb(UInt64(register))  // version 3's form
        } else {
            let registerStart = cursor
            guard data.uleb128(at: &cursor) != nil, let register = data.slice(registerStart, cursor - registerStart) else {
                return nil
            }
            alignments += Array(register.bytes)
        }
        guard cursor <= end, let instructions = data.slice(cursor, end - cursor) else { return nil }
        return CIE(alignments: alignments, instructions: Array(instructions.bytes))
    }

    static func uleb(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        repeat {
            var byte = UInt8(value & 0x7F)
            value >>= 7
            if value != 0 { byte |= 0x80 }
            bytes.append(byte)
        } while value != 0
        return bytes
    }

    /// The image served at `address` for a module loaded with `bias`: the CIEs and FDEs in
    /// .eh_frame's form, then (8-aligned, at `tableOffset`) the search table libunwind's
    /// UNW_INFO_FORMAT_IP_OFFSET expects: sorted int32 pairs (location − `startIP`, FDE offset
    /// from `address`).
    public func image(at address: UInt64, bias: UInt64, startIP: UInt64) -> (bytes: [UInt8], tableOffset: Int)? {
        var bytes: [UInt8] = []
        func append32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        func append64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        func padAndSetLength(from start: Int) {
            while (bytes.count - start) % 8 != 0 { bytes.append(0) }  // DW_CFA_nop
            let length = UInt32(bytes.count - start - 4).littleEndian
            withUnsafeBytes(of: length) { bytes.replaceSubrange(start..<start + 4, with: $0) }
        }
        var cieOffsets: [Int] = []
        for cie in cies {
            let start = bytes.count
            cieOffsets.append(start)
            append32(0)  // length, set below
            append32(0)  // CIE id
            bytes.append(3)  // version 3: the return register is LEB128
            bytes += Array("zR".utf8) + [0]
            bytes += cie.alignments
            bytes += [1, DW_EH_PE_pcrel | DW_EH_PE_sdata8]  // augmentation data: the FDE encoding
            bytes += cie.instructions
            padAndSetLength(from: start)
        }
        var pairs: [(Int32, Int32)] = []
        pairs.reserveCapacity(fdes.count)
        for fde in fdes {
            let start = bytes.count
            let relativeStart = Int64(bitPattern: (fde.start &+ bias) &- startIP)
            guard relativeStart >= 0, relativeStart <= Int64(Int32.max), start <= Int(Int32.max) else { continue }
            append32(0)
            append32(UInt32(bytes.count - cieOffsets[fde.cie]))  // back to its CIE
            append64((fde.start &+ bias) &- (address &+ UInt64(bytes.count)))  // pcrel
            append64(fde.length)
            bytes.append(0)  // augmentation data length
            bytes += fde.instructions
            padAndSetLength(from: start)
            pairs.append((Int32(relativeStart), Int32(start)))
        }
        guard !pairs.isEmpty else { return nil }
        append32(0)  // the terminator .eh_frame ends with
        while bytes.count % 8 != 0 { bytes.append(0) }
        let tableOffset = bytes.count
        for (location, fde) in pairs {
            append32(UInt32(bitPattern: location))
            append32(UInt32(bitPattern: fde))
        }
        append64(0)  // word-sized reads past the end
        return (bytes, tableOffset)
    }
}

extension ELFFile {
    /// This file's .debug_frame (decompressed if need be) with FDEs for code of `code` (link-time
    /// ranges: the executable ranges of the image it describes); nil when it has none.
    public func debugFrame(code: [Range<UInt64>]) -> DebugFrame? {
        guard let section = section(named: ".debug_frame"), section.type != ELFSection.noBits,
            case .success(let data) = sectionData(section)
        else { return nil }
        return DebugFrame(data, code: code)
    }
}
