// PythonLineTable: the line of an instruction from a code object's `co_linetable`, in the
// location table format of CPython 3.11+ (Objects/locations.md; what PyCode_Addr2Line walks).
//
// The table is a sequence of entries, each covering 1 to 8 code units (2 bytes each) of the
// code. An entry's first byte has its high bit set, its kind in bits 3-6 and its length minus one
// in bits 0-2; what follows depends on the kind:
//   15       no location (the line is unknown; the running line is unchanged)
//   14       long form: signed varint line delta, varint end line delta, varint column + 1,
//            varint end column + 1
//   13       no column: signed varint line delta
//   10-12    one-line form: line delta = kind - 10, then a column byte and an end column byte
//   0-9      short form: line delta 0, then one byte of columns
// A varint is 6 bits per byte, least significant first, bit 6 set on every byte but the last;
// a signed varint keeps the sign in its lowest bit. Lines start at `co_firstlineno`.
//
// The table comes from the target's memory: every byte is read bounds-checked, a varint is cut
// at 5 bytes (30 bits, more than any line), and the line is checked arithmetic, so a table that
// lies gives `.malformed`, never a trap.

enum PythonLineTable {
    enum Lookup: Equatable {
        case line(Int)
        /// The entry covering the instruction says it has no location (kind 15).
        case noLocation
        /// The table ends before the instruction.
        case notCovered
        /// The table is not in the format: an entry without its high bit, a varint or column
        /// cut by the table's end, a line out of range.
        case malformed
    }

    /// The line of the instruction at `byteOffset` bytes into the code.
    static func line(atByteOffset byteOffset: Int, firstLine: Int, table: [UInt8]) -> Lookup {
        var reader = Reader(table: table)
        var line = firstLine
        var end = 0
        while reader.index < table.count {
            guard let first = reader.byte(), first & 0x80 != 0 else { return .malformed }
            let kind = (first >> 3) & 0x0F
            let units = Int(first & 0x07) + 1
            var delta = 0
            switch kind {
            case 15:
                break
            case 14:
                guard let lineDelta = reader.signedVarint(), reader.varint() != nil, reader.varint() != nil,
                    reader.varint() != nil
                else { return .malformed }
                delta = lineDelta
            case 13:
                guard let lineDelta = reader.signedVarint() else { return .malformed }
                delta = lineDelta
            case 10...12:
                guard reader.byte() != nil, reader.byte() != nil else { return .malformed }
                delta = Int(kind) - 10
            default:
                guard reader.byte() != nil else { return .malformed }
            }
            guard let moved = line.checkedAdding(delta) else { return .malformed }
            line = moved
            end += units * 2  // at most 16 per byte of the table: no overflow
            if byteOffset < end { return kind == 15 ? .noLocation : .line(line) }
        }
        return .notCovered
    }

    private struct Reader {
        let table: [UInt8]
        var index = 0

        mutating func byte() -> UInt8? {
            guard index < table.count else { return nil }
            defer { index += 1 }
            return table[index]
        }

        mutating func varint() -> Int? {
            var value = 0
            var shift = 0
            while true {
                guard let byte = byte(), shift <= 24 else { return nil }
                value |= Int(byte & 0x3F) << shift
                if byte & 0x40 == 0 { return value }
                shift += 6
            }
        }

        mutating func signedVarint() -> Int? {
            guard let value = varint() else { return nil }
            return value & 1 != 0 ? -(value >> 1) : value >> 1
        }
    }
}
