// DWARFCallSites: the call sites of one unit, for rebuilding the frames of tail calls.
//
// A function whose last act is a call ends in a jump, so its frame is not on the stack; the
// compiler's call-site entries say where each call returns to, what it calls and whether it is
// a tail call, and that is how gdb puts such a frame back (TailCalls does the same). Read here:
// DWARF 5 DW_TAG_call_site (DW_AT_call_return_pc or DW_AT_call_pc, DW_AT_call_tail_call,
// DW_AT_call_origin, DW_AT_call_target) and GCC's DWARF 4 DW_TAG_GNU_call_site (DW_AT_low_pc,
// DW_AT_GNU_tail_call, DW_AT_abstract_origin, DW_AT_GNU_call_site_target), wherever they nest
// (in inlined subroutines and lexical blocks too), with the concrete subprogram each belongs to.
//
// Built lazily, once per unit, only for the units that hold a reported frame (never for the
// addresses of `symbolicate --obj`), by one walk over the unit's DIEs that decodes only
// subprograms and call sites. A call site that does not lie in its own subprogram, or sits in
// no subprogram with code, is dropped: a hostile entry is never trusted. Memory is bounded by
// the unit's size (at most one entry per DIE, ranges by a budget).
//
// Ownership and threads: kept by its DWARFUnit (`callSites`), built and read under the
// DWARFInfo's mutex (DWARFLookups); `origins` is a cache filled behind that mutex too.

import BoundedBytes
import ObjectFile

/// One call-site entry of a unit, as read (its origin not yet resolved).
struct DWARFCallSite: Sendable {
    /// DW_AT_call_return_pc (DW_AT_low_pc in the GNU form): the address the call returns to; or,
    /// when `isReturnPC` is false, DW_AT_call_pc: the call (or jump) instruction itself.
    var pc: UInt64
    var isReturnPC: Bool
    var isTailCall: Bool
    /// DW_AT_call_origin / DW_AT_abstract_origin: the .debug_info offset of the callee's DIE.
    var origin: UInt64?
    /// DW_AT_call_target when it is a constant (DW_OP_addr, DW_OP_addrx).
    var targetAddress: UInt64?
    /// A DW_AT_call_target that is not a constant: an indirect call, whatever the origin says.
    var isIndirect: Bool
    /// Index of the enclosing concrete subprogram in `DWARFCallSites.functions`.
    var function: Int32
    var callFile: UInt64
    var callLine: UInt64
    /// The .debug_info offset of the call site's DIE (its parameters are its children).
    var dieOffset: UInt64
}

/// A subprogram with code in the unit.
struct DWARFCallSiteFunction: Sendable {
    var dieOffset: UInt64
    /// Where it is entered: DW_AT_low_pc, else the first range of its DW_AT_ranges.
    var entry: UInt64
    var abstractOrigin: UInt64?
    /// Its ranges in `DWARFCallSites.ranges`.
    var ranges: Range<Int>
}

/// Not Sendable: kept by its DWARFUnit, in the DWARFLookups behind its DWARFInfo's mutex.
final class DWARFCallSites {
    let sites: [DWARFCallSite]
    let functions: [DWARFCallSiteFunction]
    let ranges: [DWARFRange]
    /// Return pc → site; -1 when several sites claim the same return pc (then none is trusted).
    private let byReturnPC: [UInt64: Int32]
    /// Entry of a function → its tail-call sites.
    private let tailCallsByEntry: [UInt64: [Int32]]
    /// Every function range, sorted by start: (low, high, function).
    private let sortedRanges: [(low: UInt64, high: UInt64, function: Int32)]
    /// Resolved origins (DIE offset → target), filled as call sites are asked for.
    var origins: [UInt64: CallSite.Target] = [:]

    static let DW_TAG_call_site: UInt64 = 0x48
    static let DW_TAG_GNU_call_site: UInt64 = 0x4109
    static let DW_AT_declaration: UInt64 = 0x3c
    static let DW_AT_call_return_pc: UInt64 = 0x7d
    static let DW_AT_call_origin: UInt64 = 0x7f
    static let DW_AT_call_pc: UInt64 = 0x81
    static let DW_AT_call_tail_call: UInt64 = 0x82
    static let DW_AT_call_target: UInt64 = 0x83
    static let DW_AT_GNU_call_site_target: UInt64 = 0x2113
    static let DW_AT_GNU_tail_call: UInt64 = 0x2115
    static let DW_OP_addr: UInt8 = 0x03
    static let DW_OP_addrx: UInt8 = 0xa1
    static let DW_OP_GNU_addr_index: UInt8 = 0xfb

    /// Walks the unit's DIEs once.
    init(unit: DWARFUnit) {
        let table = unit.abbreviations
        // Ranges a well-formed unit can hold at most (one per DIE is already generous).
        var budget = max(0, unit.dieEnd - Int(unit.dieOffset)) / 4 + 64
        var sites: [DWARFCallSite] = []
        var functions: [DWARFCallSiteFunction] = []
        var ranges: [DWARFRange] = []

        unit.walkDIEs { dieOffset, abbreviation, current, cursor in
            switch abbreviation.tag {
            case DW_TAG_subprogram:
                var code = DWARFCodeAttributes()
                var abstractOrigin: UInt64?
                for specIndex in abbreviation.attributes {
                    let spec = table.specs[specIndex]
                    guard let value = unit.readValue(form: spec.form, implicitConst: spec.implicitConst, cursor: &cursor)
                    else { return nil }
                    if spec.attribute == DW_AT_abstract_origin {
                        abstractOrigin = unit.reference(value)
                    } else {
                        _ = code.take(spec.attribute, value)
                    }
                }
                let before = ranges.count
                unit.addressRanges(of: code, into: &ranges, budget: &budget)
                // A declaration or an abstract instance has no code, so nothing below it is a
                // call of this unit's code.
                guard ranges.count > before else { return -1 }
                functions.append(
                    DWARFCallSiteFunction(
                        dieOffset: UInt64(dieOffset), entry: ranges[before].low, abstractOrigin: abstractOrigin,
                        ranges: before..<ranges.count))
                return Int32(truncatingIfNeeded: functions.count - 1)
            case Self.DW_TAG_call_site, Self.DW_TAG_GNU_call_site:
                var returnPC: UInt64?, callPC: UInt64?, lowPC: UInt64?
                var site = DWARFCallSite(
                    pc: 0, isReturnPC: true, isTailCall: false, origin: nil, targetAddress: nil, isIndirect: false,
                    function: current, callFile: 0, callLine: 0, dieOffset: UInt64(dieOffset))
                for specIndex in abbreviation.attributes {
                    let spec = table.specs[specIndex]
                    guard let value = unit.readValue(form: spec.form, implicitConst: spec.implicitConst, cursor: &cursor)
                    else { return nil }
                    switch spec.attribute {
                    case Self.DW_AT_call_return_pc: returnPC = unit.address(value)
                    case DW_AT_low_pc: lowPC = unit.address(value)
                    case Self.DW_AT_call_pc: callPC = unit.address(value)
                    case Self.DW_AT_call_tail_call, Self.DW_AT_GNU_tail_call: site.isTailCall = value.value != 0
                    case Self.DW_AT_call_origin, DW_AT_abstract_origin: site.origin = unit.reference(value)
                    case Self.DW_AT_call_target, Self.DW_AT_GNU_call_site_target:
                        site.targetAddress = Self.constantTarget(value, end: cursor.offset, unit: unit)
                        site.isIndirect = site.targetAddress == nil
                    case DW_AT_call_file: site.callFile = unit.constant(value) ?? 0
                    case DW_AT_call_line: site.callLine = unit.constant(value) ?? 0
                    default: break
                    }
                }
                if let pc = returnPC ?? lowPC {
                    site.pc = pc
                } else if let callPC {
                    site.pc = callPC
                    site.isReturnPC = false
                } else {
                    return current
                }
                if Self.lies(site, in: functions, ranges: ranges) { sites.append(site) }
                return current
            default:
                return unit.skipAttributes(abbreviation, cursor: &cursor) ? current : nil
            }
        }

        var byReturnPC: [UInt64: Int32] = [:]
        var tailCallsByEntry: [UInt64: [Int32]] = [:]
        for (index, site) in sites.enumerated() {
            let number = Int32(truncatingIfNeeded: index)
            if site.isReturnPC { byReturnPC[site.pc] = byReturnPC[site.pc] == nil ? number : -1 }
            if site.isTailCall { tailCallsByEntry[functions[Int(site.function)].entry, default: []].append(number) }
        }
        var sortedRanges: [(low: UInt64, high: UInt64, function: Int32)] = []
        sortedRanges.reserveCapacity(ranges.count)
        for (index, function) in functions.enumerated() {
            for range in ranges[function.ranges] {
                sortedRanges.append((range.low, range.high, Int32(truncatingIfNeeded: index)))
            }
        }
        sortedRanges.sort { ($0.low, $0.function) < ($1.low, $1.function) }
        self.sites = sites
        self.functions = functions
        self.ranges = ranges
        self.byReturnPC = byReturnPC
        self.tailCallsByEntry = tailCallsByEntry
        self.sortedRanges = sortedRanges
    }

    /// Whether a site lies in its own subprogram: the instruction before its return pc (or
    /// its call pc) is inside one of the subprogram's ranges.
    private static func lies(_ site: DWARFCallSite, in functions: [DWARFCallSiteFunction], ranges: [DWARFRange]) -> Bool {
        guard site.function >= 0, Int(site.function) < functions.count else { return false }
        let at: UInt64
        if site.isReturnPC {
            guard site.pc > 0 else { return false }
            at = site.pc - 1
        } else {
            at = site.pc
        }
        return ranges[functions[Int(site.function)].ranges].contains { at >= $0.low && at < $0.high }
    }

    /// The address a DW_AT_call_target expression names when it is nothing but a constant:
    /// DW_OP_addr ADDRESS, or DW_OP_addrx / DW_OP_GNU_addr_index INDEX; else nil (a register,
    /// a memory load: an indirect call). `end` is the offset just past the value in .debug_info.
    private static func constantTarget(_ value: DWARFFormValue, end: Int, unit: DWARFUnit) -> UInt64? {
        switch value.form {
        case DW_FORM_exprloc, DW_FORM_block, DW_FORM_block1, DW_FORM_block2, DW_FORM_block4: break
        default: return nil  // a location list: the target depends on where the program was
        }
        guard value.value <= UInt64(end) else { return nil }
        var expression = DWARFCursor(unit.sections.info, offset: value.value)
        let address: UInt64?
        let operation = expression.u8()
        if operation == Self.DW_OP_addr {
            address = expression.unsigned(size: Int(unit.format.addressSize))
        } else if operation == Self.DW_OP_addrx || operation == Self.DW_OP_GNU_addr_index {
            address = expression.uleb().flatMap { unit.indexedAddress($0) }
        } else {
            return nil
        }
        return expression.offset == end ? address : nil
    }

    /// The site whose return pc is `address`, if exactly one claims it.
    func site(returningTo address: UInt64) -> DWARFCallSite? {
        guard let index = byReturnPC[address], index >= 0 else { return nil }
        return sites[Int(index)]
    }

    /// The tail-call sites of the function entered at `entry` (none when it has none here).
    func tailCalls(ofFunctionAt entry: UInt64) -> [DWARFCallSite] {
        (tailCallsByEntry[entry] ?? []).map { sites[Int($0)] }
    }

    /// The innermost subprogram with code whose ranges hold `address`.
    func function(containing address: UInt64) -> DWARFCallSiteFunction? {
        guard var index = sortedRanges.lastIndex(atOrBelow: address, key: \.low) else { return nil }
        // Nested subprograms start later than their parents: the first range found, walking
        // back from the last start at or below the address, is the innermost (bounded walk).
        var steps = 0
        while steps < 64 {
            let range = sortedRanges[index]
            if address < range.high { return functions[Int(range.function)] }
            guard index > 0 else { return nil }
            index -= 1
            steps += 1
        }
        return nil
    }

    /// The entries of the concrete out-of-line copies of the abstract subprogram at `origin`.
    func concreteEntries(of origin: UInt64) -> [UInt64] {
        functions.filter { $0.abstractOrigin == origin }.map(\.entry)
    }
}
