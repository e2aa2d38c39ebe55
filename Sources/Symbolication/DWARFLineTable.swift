// DWARFLineTable: one line-number program of .debug_line (versions 2–5), run once into a
// matrix of rows grouped in sequences, then looked up by binary search.
//
// Lookups follow LLVM's DWARFDebugLine exactly, since `llvm-symbolizer` is the reference:
// sequences are sorted by their end address; the sequence for an address is the first whose
// end lies above it and whose start is at or below it; the row is the last one of that
// sequence whose address is <= the address (the end_sequence row excluded). File paths are
// built like LLVM's Prologue::getFileNameByIndex with absolute-path output: the name, its
// include directory and the unit's comp_dir, joined like llvm::sys::path::append.
//
// Bounds: every row costs at least one byte of program and every file entry at least one byte
// of header, so memory is bounded by the section size. DW_LNE_set_discriminator is ignored.
// The table is immutable after init except the path cache; it is kept behind DWARFInfo's mutex.

import BoundedBytes
import ObjectFile

/// Not Sendable: kept by its units, in the DWARFLookups behind their DWARFInfo's mutex.
final class DWARFLineTable {
    struct Row: Sendable {
        var address: UInt64
        var line: UInt32
        var file: UInt32
        var column: UInt16  // LLVM keeps 16 bits too
        var isEndSequence: Bool
    }

    /// A row without its address: rows are kept as two columns, so the sorted addresses are
    /// the search keys themselves and a row costs 20 bytes, not 24 plus a copy of its address.
    struct RowData: Sendable {
        var line: UInt32
        var file: UInt32
        var column: UInt16
        var isEndSequence: Bool
    }

    /// The rows as the program emits them: addresses and the rest, appended together.
    struct RowColumns {
        var addresses: [UInt64] = []
        var data: [RowData] = []

        var count: Int { addresses.count }

        mutating func reserveCapacity(_ count: Int) {
            addresses.reserveCapacity(count)
            data.reserveCapacity(count)
        }

        mutating func append(_ address: UInt64, _ row: RowData) {
            addresses.append(address)
            data.append(row)
        }

        mutating func removeSubrange(from start: Int) {
            addresses.removeSubrange(start...)
            data.removeSubrange(start...)
        }

        mutating func append(contentsOf other: RowColumns, _ range: Range<Int>) {
            addresses += other.addresses[range]
            data += other.data[range]
        }

        /// Moves rows `middle..<end` in front of rows `start..<middle`, in place.
        mutating func rotate(_ start: Int, _ middle: Int, _ end: Int) {
            Self.rotate(&addresses, start, middle, end)
            Self.rotate(&data, start, middle, end)
        }

        private static func rotate<T>(_ array: inout [T], _ start: Int, _ middle: Int, _ end: Int) {
            array.withUnsafeMutableBufferPointer { rows in
                func reverse(_ low: Int, _ high: Int) {
                    var (low, high) = (low, high - 1)
                    while low < high {
                        rows.swapAt(low, high)
                        low += 1
                        high -= 1
                    }
                }
                reverse(start, middle)
                reverse(middle, end)
                reverse(start, end)
            }
        }
    }

    /// Puts the rows of `sequences` (sorted by address, each still naming where its rows lie in
    /// `rows`, which they tile exactly in the order the program emitted them) in that order, in
    /// place, one rotation per sequence found out of place; false, leaving everything as it
    /// was, for more than 256 sequences or when the rotations would move more than three times
    /// the rows (many sequences out of order: copying is cheaper then).
    static func reorderInPlace(_ rows: inout RowColumns, _ sequences: inout [Sequence]) -> Bool {
        guard sequences.count <= 256 else { return false }  // the plan below is quadratic in them
        var starts = sequences.map(\.firstRow)
        var moves = 0
        var position = 0
        var plan: [(start: Int, middle: Int, end: Int)] = []
        for index in sequences.indices {
            let count = sequences[index].endRow - sequences[index].firstRow
            let start = starts[index]
            if start != position {
                plan.append((position, start, start + count))
                moves += start + count - position
                guard moves <= 3 * rows.count else { return false }
                for later in (index + 1)..<sequences.count where starts[later] >= position && starts[later] < start {
                    starts[later] += count
                }
            }
            position += count
        }
        for step in plan { rows.rotate(step.start, step.middle, step.end) }
        position = 0
        for index in sequences.indices {
            let count = sequences[index].endRow - sequences[index].firstRow
            sequences[index].firstRow = position
            sequences[index].endRow = position + count
            position += count
        }
        return true
    }

    struct Sequence: Sendable {
        var low: UInt64
        var high: UInt64
        var firstRow: Int
        var endRow: Int  // one past the end_sequence row
    }

    /// Where a path string lives; resolved only when a path is asked for.
    struct StringLocation: Sendable {
        enum Section: UInt8, Sendable { case none, line, str, lineStr }
        var section: Section
        var offset: UInt64
    }

    struct FileEntry: Sendable {
        var path: StringLocation
        var directory: UInt64
    }

    let version: UInt16
    let directories: [StringLocation]
    let files: [FileEntry]
    private let addresses: [UInt64]
    private let rowData: [RowData]
    /// Sorted by end address, as LLVM searches them.
    let sequences: [Sequence]
    /// The row addresses, when the sequences do not overlap: rows then form one sorted array.
    private let rowIndex: DWARFSortedIndex?
    private let sections: DWARFSections
    private let compDir: String?
    private var paths: [String?] = []
    private var pathKnown: [Bool] = []

    /// Parses the program at `offset`; nil when even its header is unreadable, or when its size
    /// exceeds `budget` (bytes of line programs still allowed; the size is deducted). A
    /// malformed program keeps the sequences completed before the fault.
    init?(unit: DWARFUnit, offset: UInt64, budget: inout Int) {
        sections = unit.sections
        compDir = unit.compDir
        let data = unit.sections.line
        guard offset < UInt64(data.count) else { return nil }
        unit.sections.prepareLineProgram(at: offset)
        var cursor = DWARFCursor(data, offset: offset)
        guard let (length, offsetSize) = cursor.initialLength() else { return nil }
        let end = cursor.offset + Int(min(length, UInt64(cursor.remaining)))
        guard end - Int(offset) <= budget else { return nil }
        budget -= end - Int(offset)
        guard let version = cursor.u16(), version >= 2, version <= 5 else { return nil }
        self.version = version
        if version >= 5 {
            // address_size and segment_selector_size: DW_LNE_set_address carries its own length.
            guard cursor.skip(2) else { return nil }
        }
        guard let headerLength = cursor.unsigned(size: offsetSize), cursor.offset <= end,
            headerLength <= UInt64(end - cursor.offset)
        else {
            return nil
        }
        let programStart = cursor.offset + Int(headerLength)
        guard let minimumInstructionLength = cursor.u8(),
            let maximumOperations = version >= 4 ? cursor.u8() : 1,
            cursor.u8() != nil,  // default_is_stmt: is_stmt does not affect lookups
            let lineBaseByte = cursor.u8(), let lineRange = cursor.u8(), let opcodeBase = cursor.u8()
        else { return nil }
        let lineBase = Int64(Int8(bitPattern: lineBaseByte))
        var standardLengths: [UInt8] = []
        if opcodeBase > 1 {
            for _ in 1..<opcodeBase {
                guard let count = cursor.u8() else { return nil }
                standardLengths.append(count)
            }
        }

        var directories: [StringLocation] = [], files: [FileEntry] = []
        if version >= 5 {
            guard
                DWARFLineTable.parseVersion5Entries(
                    &cursor, unit: unit, offsetSize: offsetSize, limit: programStart, directories: &directories, files: &files)
            else { return nil }
        } else {
            while cursor.offset < programStart, let start = cursor.skipCString(), cursor.offset - start > 1 {
                directories.append(StringLocation(section: .line, offset: UInt64(start)))
            }
            while cursor.offset < programStart, let start = cursor.skipCString(), cursor.offset - start > 1 {
                guard let directory = cursor.uleb(), cursor.uleb() != nil, cursor.uleb() != nil else { break }
                files.append(FileEntry(path: StringLocation(section: .line, offset: UInt64(start)), directory: directory))
            }
        }

        // Every row costs at least one byte of program, so this capacity is never outgrown: no
        // copy while the rows grow, and the pages never written are never touched. Capped (80 MB
        // of address space), so a hostile program's size cannot ask for more than a real one;
        // past it the rows just grow.
        var rows = RowColumns(), sequences: [Sequence] = []
        rows.reserveCapacity(min(max(end - programStart, 0), 1 << 22))
        let header = ProgramHeader(
            minimumInstructionLength: UInt64(minimumInstructionLength), maximumOperations: UInt64(max(maximumOperations, 1)),
            lineBase: lineBase, lineRange: UInt64(lineRange), opcodeBase: opcodeBase, standardLengths: standardLengths)
        DWARFLineTable.runProgram(
            DWARFCursor(data, offset: programStart), end: end, header: header, rows: &rows, sequences: &sequences,
            files: &files)
        // Regroup rows by sequence in address order (a program usually emits them in that order
        // already, and then they stay where they are). When no two sequences overlap (the normal
        // case in a linked file) all rows form one sorted array, searched through an index: the
        // last row at or below an address is then the same row LLVM's two-step search finds, and
        // an end_sequence row there means the address falls between sequences. Sequences tile
        // the rows in the order they were emitted (each starts where the last ended: appendRow
        // drops only an empty sequence's own rows); the rows after the last one belong to none
        // (an unterminated sequence).
        var inOrder = true
        for index in sequences.indices.dropFirst() where sequences[index].low < sequences[index - 1].high {
            inOrder = false
            break
        }
        rows.removeSubrange(from: sequences.last?.endRow ?? 0)
        if !inOrder {
            sequences.sort { ($0.low, $0.high) < ($1.low, $1.high) }
            // A few sequences out of order (a compiler's .text.startup or .text.unlikely parts
            // emitted after the unit's .text) are rotated into place; otherwise copied.
            if !DWARFLineTable.reorderInPlace(&rows, &sequences) {
                var ordered = RowColumns()
                ordered.reserveCapacity(rows.count)
                for index in sequences.indices {
                    let first = ordered.count
                    ordered.append(contentsOf: rows, sequences[index].firstRow..<sequences[index].endRow)
                    sequences[index].firstRow = first
                    sequences[index].endRow = ordered.count
                }
                rows = ordered
            }
        }
        var sorted = true
        for index in rows.addresses.indices.dropFirst() where rows.addresses[index - 1] > rows.addresses[index] {
            sorted = false
            break
        }
        rowIndex = sorted ? DWARFSortedIndex(keys: rows.addresses) : nil
        sequences.sort { $0.high < $1.high }
        self.addresses = rows.addresses
        self.rowData = rows.data
        self.sequences = sequences
        self.directories = directories
        self.files = files
        paths = Array(repeating: nil, count: files.count)
        pathKnown = Array(repeating: false, count: files.count)
    }

    /// DWARF 5 directory and file tables: entry formats of (content type, form) pairs.
    private static func parseVersion5Entries(
        _ cursor: inout DWARFCursor, unit: DWARFUnit, offsetSize: Int, limit: Int,
        directories: inout [StringLocation], files: inout [FileEntry]
    ) -> Bool {
        func formats(_ cursor: inout DWARFCursor) -> [(UInt64, UInt64)]? {
            guard let count = cursor.u8() else { return nil }
            var result: [(UInt64, UInt64)] = []
            for _ in 0..<count {
                guard let type = cursor.uleb(), let form = cursor.uleb() else { return nil }
                result.append((type, form))
            }
            return result
        }
        // One entry: its path and directory index; other content (MD5, sizes) skipped.
        func entry(_ cursor: inout DWARFCursor, _ formats: [(UInt64, UInt64)]) -> FileEntry? {
            var entry = FileEntry(path: StringLocation(section: .none, offset: 0), directory: 0)
            for (type, form) in formats {
                var location = StringLocation(section: .none, offset: 0)
                var number: UInt64 = 0
                switch form {
                case DW_FORM_string:
                    guard let start = cursor.skipCString() else { return nil }
                    location = StringLocation(section: .line, offset: UInt64(start))
                case DW_FORM_line_strp, DW_FORM_strp:
                    guard let value = cursor.unsigned(size: offsetSize) else { return nil }
                    location = StringLocation(section: form == DW_FORM_strp ? .str : .lineStr, offset: value)
                case DW_FORM_strx, DW_FORM_strx1, DW_FORM_strx2, DW_FORM_strx3, DW_FORM_strx4:
                    let index = form == DW_FORM_strx ? cursor.uleb() : cursor.unsigned(size: Int(form - DW_FORM_strx1) + 1)
                    guard let index else { return nil }
                    if let offset = unit.stringOffset(index: index) { location = StringLocation(section: .str, offset: offset) }
                case DW_FORM_udata: guard let value = cursor.uleb() else { return nil }; number = value
                case DW_FORM_data1: guard let value = cursor.u8() else { return nil }; number = UInt64(value)
                case DW_FORM_data2: guard let value = cursor.u16() else { return nil }; number = UInt64(value)
                case DW_FORM_data4: guard let value = cursor.u32() else { return nil }; number = UInt64(value)
                case DW_FORM_data8: guard let value = cursor.u64() else { return nil }; number = value
                case DW_FORM_data16: guard cursor.skip(16) else { return nil }
                case DW_FORM_block: guard let length = cursor.uleb(), cursor.skip(length) else { return nil }
                default: return nil
                }
                if type == DW_LNCT_path { entry.path = location }
                if type == DW_LNCT_directory_index { entry.directory = number }
            }
            return entry
        }
        guard let directoryFormats = formats(&cursor), let directoryCount = cursor.uleb() else { return false }
        // Each entry takes at least one byte of header, which bounds the loops; entries with no
        // content at all would have no path, so none are recorded.
        var index: UInt64 = 0
        while index < directoryCount, !directoryFormats.isEmpty, cursor.offset < limit {
            guard let directory = entry(&cursor, directoryFormats) else { return false }
            directories.append(directory.path)
            index += 1
        }
        guard let fileFormats = formats(&cursor), let fileCount = cursor.uleb() else { return false }
        index = 0
        while index < fileCount, !fileFormats.isEmpty, cursor.offset < limit {
            guard let file = entry(&cursor, fileFormats) else { return false }
            files.append(file)
            index += 1
        }
        return true
    }

    /// The line-number program header fields that drive the state machine (DWARF 5 §6.2.4).
    struct ProgramHeader {
        var minimumInstructionLength: UInt64
        var maximumOperations: UInt64
        var lineBase: Int64
        var lineRange: UInt64
        var opcodeBase: UInt8
        var standardLengths: [UInt8]
    }

    /// The state-machine registers (DWARF 5 §6.2.2) crashport keeps, and the rows and sequences
    /// they emit.
    struct StateMachine {
        let header: ProgramHeader
        var address: UInt64 = 0, operationIndex: UInt64 = 0
        var file: UInt32 = 1, line: UInt32 = 1, column: UInt16 = 0
        var sequenceStart = -1  // first row of the open sequence
        var sequenceLow: UInt64 = 0

        init(header: ProgramHeader) { self.header = header }

        mutating func advance(_ operations: UInt64) {
            if header.maximumOperations == 1 {
                address = address &+ header.minimumInstructionLength &* operations
            } else {
                let total = operationIndex &+ operations
                address = address &+ header.minimumInstructionLength &* (total / header.maximumOperations)
                operationIndex = total % header.maximumOperations
            }
        }

        mutating func appendRow(endSequence: Bool, rows: inout RowColumns, sequences: inout [Sequence]) {
            if sequenceStart < 0 {
                sequenceStart = rows.count
                sequenceLow = address
            }
            rows.append(address, RowData(line: line, file: file, column: column, isEndSequence: endSequence))
            guard endSequence else { return }
            if sequenceLow < address {
                sequences.append(Sequence(low: sequenceLow, high: address, firstRow: sequenceStart, endRow: rows.count))
            } else {
                rows.removeSubrange(from: sequenceStart)
            }
            self = StateMachine(header: header)
        }
    }

    private static func runProgram(
        _ start: DWARFCursor, end: Int, header: ProgramHeader, rows: inout RowColumns, sequences: inout [Sequence],
        files: inout [FileEntry]
    ) {
        var cursor = start
        var state = StateMachine(header: header)
        let (opcodeBase, lineRange, lineBase) = (header.opcodeBase, header.lineRange, header.lineBase)

        while cursor.offset < end, let opcode = cursor.u8() {
            if opcode >= opcodeBase {
                let adjusted = UInt64(opcode - opcodeBase)
                if lineRange != 0 {
                    state.advance(adjusted / lineRange)
                    state.line = UInt32(truncatingIfNeeded: Int64(state.line) + lineBase + Int64(adjusted % lineRange))
                }
                state.appendRow(endSequence: false, rows: &rows, sequences: &sequences)
                continue
            }
            switch opcode {
            case 0:
                guard let length = cursor.uleb(), cursor.offset <= end, length <= UInt64(end - cursor.offset) else { return }
                let next = cursor.offset + Int(length)
                guard length > 0, let subOpcode = cursor.u8() else { cursor.offset = next; continue }
                switch subOpcode {
                case DW_LNE_end_sequence: state.appendRow(endSequence: true, rows: &rows, sequences: &sequences)
                case DW_LNE_set_address:
                    let size = Int(length) - 1
                    if size >= 1 && size <= 8, let value = cursor.unsigned(size: size) {
                        state.address = value
                        state.operationIndex = 0
                    }
                case DW_LNE_define_file:
                    if let start = cursor.skipCString(), let directory = cursor.uleb() {
                        files.append(FileEntry(path: StringLocation(section: .line, offset: UInt64(start)), directory: directory))
                    }
                default: break  // DW_LNE_set_discriminator and vendor extensions
                }
                cursor.offset = next
            case DW_LNS_copy: state.appendRow(endSequence: false, rows: &rows, sequences: &sequences)
            case DW_LNS_advance_pc:
                guard let operations = cursor.uleb() else { return }
                state.advance(operations)
            case DW_LNS_advance_line:
                guard let delta = cursor.sleb() else { return }
                state.line = UInt32(truncatingIfNeeded: Int64(state.line) &+ delta)
            case DW_LNS_set_file:
                guard let value = cursor.uleb() else { return }
                state.file = UInt32(truncatingIfNeeded: value)
            case DW_LNS_set_column:
                guard let value = cursor.uleb() else { return }
                state.column = UInt16(truncatingIfNeeded: value)
            case DW_LNS_const_add_pc:
                if lineRange != 0 { state.advance(UInt64(255 - opcodeBase) / lineRange) }
            case DW_LNS_fixed_advance_pc:
                guard let delta = cursor.u16() else { return }
                state.address = state.address &+ UInt64(delta)
                state.operationIndex = 0
            case DW_LNS_negate_stmt, DW_LNS_set_basic_block, DW_LNS_set_prologue_end, DW_LNS_set_epilogue_begin:
                break
            default:
                // DW_LNS_set_isa and unknown standard opcodes: skip their ULEB operands.
                let count = Int(opcode) - 1 < header.standardLengths.count ? header.standardLengths[Int(opcode) - 1] : 0
                for _ in 0..<count { guard cursor.uleb() != nil else { return } }
            }
        }
    }

    /// The row covering `address`, or nil when no sequence contains it. With `skippingLineZero`,
    /// a row of line 0 (code no source line produced: a stack probe, a prologue's padding) gives
    /// way to the nearest row before it in its sequence with a line, as gdb shows such code
    /// (llvm-symbolizer and addr2line print line 0 and the row's file).
    @inline(__always)
    func row(for address: UInt64, skippingLineZero: Bool = false) -> Row? {
        guard var index = rowIndex(for: address) else { return nil }
        if skippingLineZero {
            var steps = 0
            while rowData[index].line == 0, index > 0, !rowData[index - 1].isEndSequence, steps < 256 {
                index -= 1
                steps += 1
            }
        }
        let row = rowData[index]
        return Row(
            address: addresses[index], line: row.line, file: row.file, column: row.column, isEndSequence: row.isEndSequence)
    }

    /// The index of the row covering `address`.
    @inline(__always)
    private func rowIndex(for address: UInt64) -> Int? {
        if let rowIndex {
            let index = rowIndex.upperBound(address)
            guard index > 0, !rowData[index - 1].isEndSequence else { return nil }
            return index - 1
        }
        var low = 0, high = sequences.count
        while low < high {
            let middle = (low + high) >> 1
            if sequences[middle].high <= address { low = middle + 1 } else { high = middle }
        }
        guard low < sequences.count else { return nil }
        let sequence = sequences[low]
        guard sequence.low <= address else { return nil }
        var first = sequence.firstRow + 1, last = sequence.endRow - 1
        while first < last {
            let middle = (first + last) >> 1
            if addresses[middle] <= address { first = middle + 1 } else { last = middle }
        }
        return first - 1
    }

    /// The absolute path of file `index` (1-based before DWARF 5, 0-based from 5), cached.
    func path(ofFile index: UInt64) -> String? {
        let entryIndex: Int
        if version >= 5 {
            guard index < UInt64(files.count) else { return nil }
            entryIndex = Int(index)
        } else {
            guard index != 0, index <= UInt64(files.count) else { return nil }
            entryIndex = Int(index - 1)
        }
        if entryIndex < pathKnown.count, pathKnown[entryIndex] { return paths[entryIndex] }
        let path = buildPath(files[entryIndex])
        if entryIndex < pathKnown.count {
            paths[entryIndex] = path
            pathKnown[entryIndex] = true
        }
        return path
    }

    private func string(_ location: StringLocation) -> String? {
        switch location.section {
        case .none: return nil
        case .line: return sections.line.cString(location.offset)
        case .str: return sections.str.cString(location.offset)
        case .lineStr: return sections.lineStr.cString(location.offset)
        }
    }

    private func buildPath(_ entry: FileEntry) -> String? {
        guard let name = string(entry.path) else { return nil }
        if name.hasPrefix("/") { return name }
        var includeDirectory = ""
        if version >= 5 {
            if entry.directory < UInt64(directories.count) { includeDirectory = string(directories[Int(entry.directory)]) ?? "" }
        } else if entry.directory > 0 && entry.directory <= UInt64(directories.count) {
            includeDirectory = string(directories[Int(entry.directory - 1)]) ?? ""
        }
        var path = ""
        // comp_dir only when the include directory is relative, and (v5) not for directory 0,
        // which is the compilation directory itself.
        if version < 5 || entry.directory != 0, let compDir, !compDir.isEmpty, !includeDirectory.hasPrefix("/") {
            DWARFLineTable.append(&path, compDir)
        }
        DWARFLineTable.append(&path, includeDirectory)
        DWARFLineTable.append(&path, name)
        return path
    }

    /// llvm::sys::path::append for POSIX paths: one separator between components.
    static func append(_ path: inout String, _ component: String) {
        if path.utf8.last == UInt8(ascii: "/") {
            path += component.drop { $0 == "/" }
            return
        }
        if !component.hasPrefix("/") && !path.isEmpty { path += "/" }
        path += component
    }
}
