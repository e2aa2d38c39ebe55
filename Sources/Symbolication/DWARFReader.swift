// DWARFReader: source frames (function, file, line, column, inlining) for an address, from the
// DWARF 2–5 debug information of one ELF file. The public face of the DWARF* files.
//
// Design, for speed on thousands of lookups per file:
//  - DWARFInfo.init reads the unit headers, each unit DIE, and builds one sorted map from
//    address to unit (.debug_aranges where present, else the unit DIE's ranges, as LLVM does).
//  - The first lookup in a unit runs its line program once (DWARFLineTable) and walks its DIEs
//    once (DWARFInlineTree); both are kept.
//  - A lookup is then a binary search in each, a walk up the parent links, and cached names:
//    nothing is allocated but the result.
// What each frame holds follows `llvm-symbolizer --inlining --functions=linkage` (the
// reference the tests compare against): see `frames(at:)`.
//
// Threads: a DWARFInfo may be shared. What its lookups build (units, their line tables and
// inline trees, names) is kept by a DWARFLookups that only the DWARFInfo's mutex reaches: lookups
// serialize on it, and the compiler checks that nothing built is reached from outside. Malformed
// DWARF yields fewer or empty results, never a trap: every read is bounds-checked (DWARFCursor,
// ByteView), every loop is bounded by the bytes it consumes, every allocation by a section size.

import ObjectFile
import BoundedBytes
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One source-level frame at an address.
public struct SourceFrame: Sendable, Equatable {
    /// The linkage (mangled) name if the debug information has one, else DW_AT_name.
    public var function: String?
    /// Absolute path as the compiler recorded it (comp_dir and include directory joined).
    public var file: String?
    public var line: Int?
    public var column: Int?
    /// True for an inlined subroutine; false for the function that was really called.
    public var inlined: Bool

    public init(function: String? = nil, file: String? = nil, line: Int? = nil, column: Int? = nil, inlined: Bool = false) {
        self.function = function
        self.file = file
        self.line = line
        self.column = column
        self.inlined = inlined
    }
}

/// The DWARF of one ELF file, shared by the threads that symbolicate with it: what its lookups
/// build is behind its mutex (DWARFLookups).
public final class DWARFInfo: Sendable {
    public let elf: ELFFile
    /// The file whose symbol table names the outermost frame (see init).
    public let symbolFile: ELFFile
    /// What lookups build and keep, one lookup at a time.
    let lookups: Mutex<DWARFLookups>

    /// Reads the DWARF of `elf`; nil when it has no readable .debug_info unit.
    ///
    /// `symbolFile` (by default `elf` itself) is the file whose symbols name the outermost
    /// frame when `frames(at:)` is asked to, as llvm-symbolizer does. When `elf` is a separate
    /// debug file, passing the binary it belongs to gives llvm-symbolizer's answers exactly
    /// (it reads the symbols of the file it was given: .dynsym names such as `setbuffer` for
    /// a stripped libc, where the debug file's .symtab says `_IO_setbuffer`).
    public init?(elf: ELFFile, symbolFile: ELFFile? = nil) {
        let symbolFile = symbolFile ?? elf
        self.elf = elf
        self.symbolFile = symbolFile
        let (sections, collected) = DWARFSections.open(elf: elf)
        guard sections.info.count > 0 else { return nil }
        let tables = DWARFAbbreviationTables(sections: sections)
        let units = DWARFUnits(sections: sections, collected: collected, tables: tables)
        tables.starts = Array(Set(units.headers.map(\.abbrevOffset))).sorted()
        guard !units.isEmpty else { return nil }
        // What a well-formed file can hold at most (see DWARFLookups' budgets); beyond it, a file
        // is hostile and gets fewer answers rather than unbounded memory or time.
        var rangeBudget =
            sections.info.count / 2 + sections.ranges.count / 8 + sections.rnglists.count
            + sections.aranges.count / 8 + 4096
        let lineBudget = 4 * sections.line.count + (1 << 20)
        let unitMap = DWARFInfo.buildUnitMap(units: units, sections: sections, budget: &rangeBudget)
        lookups = Mutex(
            DWARFLookups(
                sections: sections, units: units, unitMap: unitMap, symbolFile: symbolFile, rangeBudget: rangeBudget,
                lineBudget: lineBudget))
    }

    /// Whether large zlib DWARF sections of the files opened from now on are inflated on
    /// demand (the default, for reports: only the units their frames fall in) or whole at open
    /// (for a batch that will visit most units: one pass instead of two). Process-wide.
    public static func inflateCompressedSectionsOnDemand(_ onDemand: Bool) {
        DWARFSections.inflatesOnDemand.store(onDemand, ordering: .relaxed)
    }

    /// The source frames at `address` (an ELF virtual address of this file), innermost first:
    /// each inlined subroutine with its own position, then the function it was inlined into,
    /// positioned at the call site (DW_AT_call_file/line/column), out to the real function.
    /// Empty when no unit covers the address.
    ///
    /// As llvm-symbolizer: the first frame's position is the line-table row for the address (no
    /// file, line or column when there is none); a frame's function is its DIE's linkage name,
    /// else its name, searched through DW_AT_specification and DW_AT_abstract_origin; when no
    /// subroutine covers the address, one frame with the row alone.
    ///
    /// With `skippingLineZero`, a row of line 0 takes the line before it, as gdb shows it
    /// (DWARFLineTable.row(for:skippingLineZero:)): reports do; `symbolicate --obj` answers as
    /// llvm-symbolizer.
    ///
    /// With `namingOutermostBySymbol` (the default, as in llvm-symbolizer with linkage names),
    /// the outermost frame's function is the ELF symbol of `symbolFile` covering the address
    /// when there is one: it names the code actually run (`f.cold`, `f.constprop.0`) where
    /// DWARF names the source function `f`. Without it, every frame has DWARF's name, as gdb
    /// shows it (reports).
    public func frames(at address: UInt64, skippingLineZero: Bool = false, namingOutermostBySymbol: Bool = true) -> [SourceFrame]
    {
        lookups.withLock {
            $0.frames(at: address, skippingLineZero: skippingLineZero, namingOutermostBySymbol: namingOutermostBySymbol)
        }
    }

    // MARK: - Unit map

    /// Address → unit: each .debug_aranges set for the unit it names; units no set names
    /// contribute their unit DIE's ranges (LLVM's DWARFDebugAranges::generate).
    private static func buildUnitMap(units: DWARFUnits, sections: DWARFSections, budget: inout Int) -> DWARFAddressMap {
        var ranges: [DWARFRange] = []
        var owners: [Int32] = []
        var covered = [Bool](repeating: false, count: units.count)

        let aranges = sections.aranges
        var offset = 0
        while offset < aranges.count {
            var cursor = DWARFCursor(aranges, offset: offset)
            guard let (length, offsetSize) = cursor.initialLength(), length <= UInt64(cursor.remaining) else { break }
            let end = cursor.offset + Int(length)
            defer { offset = end }
            guard cursor.u16() != nil, let unitOffset = cursor.unsigned(size: offsetSize),
                let addressSize = cursor.u8(), let segmentSize = cursor.u8(),
                addressSize == 4 || addressSize == 8, segmentSize == 0,
                let unitIndex = units.index(ofUnitAt: unitOffset)
            else { continue }
            covered[unitIndex] = true
            // Tuples are aligned to twice the address size from the start of the set.
            let tupleSize = 2 * Int(addressSize)
            let header = cursor.offset - offset
            guard cursor.skip((tupleSize - header % tupleSize) % tupleSize) else { continue }
            while cursor.offset + tupleSize <= end, let start = cursor.unsigned(size: Int(addressSize)),
                let size = cursor.unsigned(size: Int(addressSize))
            {
                if start == 0 && size == 0 { break }
                let (high, overflow) = start.addingReportingOverflow(size)
                if !overflow && size > 0 && budget > 0 {
                    budget -= 1
                    ranges.append(DWARFRange(low: start, high: high))
                    owners.append(Int32(unitIndex))
                }
            }
        }

        // (Made for their ranges only, then let go: a file without .debug_aranges, clang's
        // default, would otherwise keep every unit's object from the start.)
        for index in 0..<units.count where !covered[index] {
            let type = units.headers[index].unitType
            guard type == DW_UT_compile || type == DW_UT_partial || type == DW_UT_skeleton else { continue }
            let unit = units[index]
            if unit.isCodeUnit {
                let before = ranges.count
                unit.unitRanges(into: &ranges, budget: &budget)
                for _ in before..<ranges.count { owners.append(Int32(index)) }
            }
            units.forget(index)
        }
        return DWARFAddressMap(ranges: ranges, owners: owners, ownerCount: units.count, winner: .lowest)
    }
}

/// What a DWARFInfo's lookups build on first use and keep: its units (each with its line table,
/// inline tree and call sites, DWARFUnit), the names of DIEs and symbols, and the budgets that
/// bound them all. Not Sendable: only its DWARFInfo's mutex reaches it, one lookup at a time.
final class DWARFLookups {
    let sections: DWARFSections
    let units: DWARFUnits
    let unitMap: DWARFAddressMap
    let symbolFile: ELFFile
    private var symbolNames: DWARFSymbolNames?
    private var nameCache: [UInt64: String?] = [:]
    private var chain: [Int32] = []
    private var lineTables: [LineTableKey: DWARFLineTable] = [:]
    /// Address ranges still allowed to be collected, over all units (ranges of low/high pairs
    /// and of range lists, which DIEs can share: hostile sharing must not multiply memory).
    private var rangeBudget: Int
    /// Bytes of line programs still allowed to be run, over all units.
    private var lineBudget: Int
    /// Type DIEs as DWARFVariables read them.
    var variableCaches = DWARFVariableCaches()

    init(
        sections: DWARFSections, units: DWARFUnits, unitMap: DWARFAddressMap, symbolFile: ELFFile, rangeBudget: Int,
        lineBudget: Int
    ) {
        self.sections = sections
        self.units = units
        self.unitMap = unitMap
        self.symbolFile = symbolFile
        self.rangeBudget = rangeBudget
        self.lineBudget = lineBudget
    }

    private struct LineTableKey: Hashable {
        var offset: UInt64
        var compDir: String?
    }

    /// DWARFInfo.frames(at:skippingLineZero:namingOutermostBySymbol:).
    func frames(at address: UInt64, skippingLineZero: Bool, namingOutermostBySymbol: Bool) -> [SourceFrame] {
        guard let unitIndex = unitMap.lookup(address), Int(unitIndex) < units.count else { return [] }
        let unit = units[Int(unitIndex)]
        let tree = inlineTree(of: unit)
        let lineTable = self.lineTable(of: unit)
        chain.removeAll(keepingCapacity: true)
        tree.chain(for: address, into: &chain)

        var frames: [SourceFrame] = []
        if chain.isEmpty {
            guard let lineTable, let row = lineTable.row(for: address, skippingLineZero: skippingLineZero),
                let file = lineTable.path(ofFile: UInt64(row.file))
            else { return [] }
            frames.append(SourceFrame(file: file, line: Int(row.line), column: Int(row.column)))
        } else {
            frames.reserveCapacity(chain.count)
            for (position, nodeIndex) in chain.enumerated() {
                let node = tree.nodes[Int(nodeIndex)]
                var frame = SourceFrame(
                    function: tree.name(of: nodeIndex) { self.subroutineName(at: $0) }, inlined: node.isInlined)
                if position == 0 {
                    if let lineTable, let row = lineTable.row(for: address, skippingLineZero: skippingLineZero),
                        let file = lineTable.path(ofFile: UInt64(row.file))
                    {
                        frame.file = file
                        frame.line = Int(row.line)
                        frame.column = Int(row.column)
                    }
                } else {
                    let callee = tree.nodes[Int(chain[position - 1])]
                    frame.file = lineTable?.path(ofFile: UInt64(callee.callFile))
                    frame.line = Int(callee.callLine)
                    frame.column = Int(callee.callColumn)
                }
                frames.append(frame)
            }
        }
        if namingOutermostBySymbol {
            if symbolNames == nil { symbolNames = DWARFSymbolNames(elf: symbolFile) }
            if let name = symbolNames?.name(at: address) { frames[frames.count - 1].function = name }
        }
        return frames
    }

    /// The unit's inline tree, built on first use.
    func inlineTree(of unit: DWARFUnit) -> DWARFInlineTree {
        if let built = unit.tree { return built }
        let tree = DWARFInlineTree(unit: unit, budget: &rangeBudget)
        unit.tree = tree
        return tree
    }

    /// The unit's line table; units with the same stmt_list and comp_dir share one.
    private func lineTable(of unit: DWARFUnit) -> DWARFLineTable? {
        if !unit.lineTableLoaded {
            unit.lineTableLoaded = true
            if let offset = unit.stmtList {
                let key = LineTableKey(offset: offset, compDir: unit.compDir)
                if let shared = lineTables[key] {
                    unit.lineTable = shared
                } else if let table = DWARFLineTable(unit: unit, offset: offset, budget: &lineBudget) {
                    lineTables[key] = table
                    unit.lineTable = table
                }
            }
        }
        return unit.lineTable
    }

    // MARK: - Names

    /// The unit whose DIEs span `offset` of .debug_info.
    func unit(containing offset: UInt64) -> DWARFUnit? {
        var low = 0, high = units.count
        while low < high {
            let middle = (low + high) >> 1
            if units.headers[middle].offset <= offset { low = middle + 1 } else { high = middle }
        }
        guard low > 0 else { return nil }
        let header = units.headers[low - 1]
        guard offset >= header.offset + UInt64(header.dieStart), offset < header.endOffset else { return nil }
        return units[low - 1]
    }

    private struct NameAttributes {
        var unit: DWARFUnit
        var name: DWARFFormValue?
        var linkageName: DWARFFormValue?
        var abstractOrigin: UInt64?
        var specification: UInt64?
    }

    private func nameAttributes(at offset: UInt64) -> NameAttributes? {
        guard let unit = unit(containing: offset) else { return nil }
        var cursor = DWARFCursor(sections.info, offset: offset)
        let table = unit.abbreviations
        guard let code = cursor.uleb(), let index = table.index(of: code) else { return nil }
        var result = NameAttributes(unit: unit)
        for specIndex in table.abbreviations[index].attributes {
            let spec = table.specs[specIndex]
            guard
                let value = unit.readValue(
                    form: spec.form, implicitConst: spec.implicitConst, cursor: &cursor)
            else { break }
            switch spec.attribute {
            case DW_AT_name: if result.name == nil { result.name = value }
            case DW_AT_linkage_name, DW_AT_MIPS_linkage_name: if result.linkageName == nil { result.linkageName = value }
            case DW_AT_abstract_origin: result.abstractOrigin = unit.reference(value)
            case DW_AT_specification: result.specification = unit.reference(value)
            default: break
            }
        }
        return result
    }

    /// LLVM's DWARFDie::getName(LinkageName): the first linkage name, else the first name,
    /// found depth-first through DW_AT_specification and DW_AT_abstract_origin (at most 32 DIEs).
    func subroutineName(at offset: UInt64, depth: Int = 0) -> String? {
        if let cached = nameCache[offset] { return cached }
        guard let first = nameAttributes(at: offset) else {
            nameCache[offset] = .some(nil)
            return nil
        }
        // A DIE that only points elsewhere (an inlined instance, a concrete out-of-line copy)
        // has the name of its target: share the target's cache entry.
        if first.name == nil, first.linkageName == nil, depth < 16,
            (first.abstractOrigin == nil) != (first.specification == nil),
            let target = first.abstractOrigin ?? first.specification, target != offset
        {
            let name = subroutineName(at: target, depth: depth + 1)
            nameCache[offset] = .some(name)
            return name
        }
        var stack: [UInt64] = []
        var seen: [UInt64] = [offset]
        var current: NameAttributes? = first
        var name: (DWARFUnit, DWARFFormValue)?
        var linkage: (DWARFUnit, DWARFFormValue)?
        var visits = 0
        while visits < 32 {
            visits += 1
            if let die = current {
                if name == nil, let value = die.name { name = (die.unit, value) }
                if let value = die.linkageName {
                    linkage = (die.unit, value)
                    break
                }
                for target in [die.abstractOrigin, die.specification] {
                    if let target, !seen.contains(target) {
                        seen.append(target)
                        stack.append(target)
                    }
                }
            }
            guard let next = stack.popLast() else { break }
            current = nameAttributes(at: next)
        }
        let result = linkage.flatMap { $0.0.string($0.1) } ?? name.flatMap { $0.0.string($0.1) }
        nameCache[offset] = .some(result)
        return result
    }
}
