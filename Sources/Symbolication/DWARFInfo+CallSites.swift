// DWARFInfo+CallSites: the call-site questions tail-call reconstruction (TailCalls) asks of one
// file's DWARF: which call returns to this address, what does it call, which tail calls does a
// function make, which function holds an address.
//
// Each unit's call sites are read the first time one of these questions falls in it
// (DWARFCallSites) and kept on the unit, so they live as long as the DebugImage in its cache.
// Everything runs in the DWARFInfo's DWARFLookups, behind its mutex. A call's origin is resolved from the DIE it
// points at, which must lie in a unit of this file and be a subprogram: its address when it
// has code, the one concrete copy of an abstract instance, else its (linkage) name, to be found
// in a symbol table by the caller (a declaration: `free`, defined in another module).

import BoundedBytes
import ObjectFile

/// A call site as tail-call reconstruction sees it.
public struct CallSite: Sendable, Equatable {
    public enum Target: Sendable, Equatable {
        /// A function of this file, by its entry address.
        case address(UInt64)
        /// A function declared here and defined elsewhere: its linkage name, else its name.
        case name(String)
        /// An indirect call, or one the DWARF does not describe.
        case unknown
    }

    /// The return address of the call; or, when `isReturnPC` is false, the call instruction.
    public var pc: UInt64
    public var isReturnPC: Bool
    public var isTailCall: Bool
    public var target: Target
    /// The entry address of the function that makes the call.
    public var function: UInt64
    /// DW_AT_call_file / DW_AT_call_line of the site, when the compiler wrote them.
    public var file: String?
    public var line: Int?
}

extension DWARFInfo {
    /// The call that returns to `address` (an ELF virtual address), when exactly one site of
    /// the unit holding it says so.
    public func callSite(returningTo address: UInt64) -> CallSite? {
        lookups.withLock { $0.callSite(returningTo: address) }
    }

    /// The tail calls made by the function entered at `entry`; nil when there are more than
    /// `limit` (too many to follow: the caller gives up rather than guess).
    public func tailCalls(ofFunctionAt entry: UInt64, limit: Int) -> [CallSite]? {
        lookups.withLock { $0.tailCalls(ofFunctionAt: entry, limit: limit) }
    }

    /// The entry address of the innermost subprogram with code that holds `address`.
    public func functionEntry(containing address: UInt64) -> UInt64? {
        lookups.withLock { $0.functionEntry(containing: address) }
    }
}

extension DWARFLookups {
    /// DWARFInfo.callSite(returningTo:).
    func callSite(returningTo address: UInt64) -> CallSite? {
        guard address > 0, let (unit, sites) = callSites(covering: address - 1), let site = sites.site(returningTo: address)
        else { return nil }
        return callSite(site, unit: unit, sites: sites)
    }

    /// DWARFInfo.tailCalls(ofFunctionAt:limit:).
    func tailCalls(ofFunctionAt entry: UInt64, limit: Int) -> [CallSite]? {
        guard let (unit, sites) = callSites(covering: entry) else { return [] }
        let found = sites.tailCalls(ofFunctionAt: entry)
        guard found.count <= limit else { return nil }
        return found.map { callSite($0, unit: unit, sites: sites) }
    }

    /// DWARFInfo.functionEntry(containing:).
    func functionEntry(containing address: UInt64) -> UInt64? {
        callSites(covering: address)?.1.function(containing: address)?.entry
    }

    /// The unit holding `address` and its call sites, read on first use.
    func callSites(covering address: UInt64) -> (DWARFUnit, DWARFCallSites)? {
        guard let index = unitMap.lookup(address), index >= 0, Int(index) < units.count else { return nil }
        let unit = units[Int(index)]
        if let built = unit.callSites { return (unit, built) }
        let built = DWARFCallSites(unit: unit)
        unit.callSites = built
        return (unit, built)
    }

    func callSite(_ site: DWARFCallSite, unit: DWARFUnit, sites: DWARFCallSites) -> CallSite {
        var target = CallSite.Target.unknown
        if let address = site.targetAddress {
            target = .address(address)
        } else if !site.isIndirect, let origin = site.origin {
            if let known = sites.origins[origin] {
                target = known
            } else {
                target = self.target(ofOrigin: origin, sites: sites)
                if sites.origins.count < 4096 { sites.origins[origin] = target }
            }
        }
        var file: String?
        if site.callFile > 0, unit.lineTableLoaded { file = unit.lineTable?.path(ofFile: site.callFile) }
        return CallSite(
            pc: site.pc, isReturnPC: site.isReturnPC, isTailCall: site.isTailCall, target: target,
            function: sites.functions[Int(site.function)].entry, file: file,
            line: site.callLine > 0 && site.callLine <= UInt64(Int32.max) ? Int(site.callLine) : nil)
    }

    /// What the subprogram DIE at `origin` stands for (see the file's comment).
    private func target(ofOrigin origin: UInt64, sites: DWARFCallSites) -> CallSite.Target {
        guard let die = subprogramAttributes(at: origin) else { return .unknown }
        if let entry = die.entry { return .address(entry) }
        if !die.isDeclaration {
            let copies = Set(sites.concreteEntries(of: origin))
            if copies.count == 1, let entry = copies.first { return .address(entry) }
        }
        // The name, through DW_AT_abstract_origin / DW_AT_specification when the DIE has none.
        var current: SubprogramAttributes? = die
        var seen: Set<UInt64> = [origin]
        for _ in 0..<4 {
            guard let attributes = current else { break }
            if let name = attributes.linkageName ?? attributes.name, !name.isEmpty { return .name(name) }
            guard let next = attributes.abstractOrigin ?? attributes.specification, seen.insert(next).inserted else { break }
            current = subprogramAttributes(at: next)
        }
        return .unknown
    }

    private struct SubprogramAttributes {
        var entry: UInt64?
        var isDeclaration = false
        var name: String?
        var linkageName: String?
        var abstractOrigin: UInt64?
        var specification: UInt64?
    }

    /// The attributes of the DW_TAG_subprogram DIE at `offset`; nil when the offset is in no
    /// unit of this file, or the DIE there is not a subprogram.
    private func subprogramAttributes(at offset: UInt64) -> SubprogramAttributes? {
        guard let unit = unit(containing: offset) else { return nil }
        var cursor = DWARFCursor(sections.info, offset: offset)
        let table = unit.abbreviations
        guard let abbreviationCode = cursor.uleb(), let index = table.index(of: abbreviationCode),
            table.abbreviations[index].tag == DW_TAG_subprogram
        else { return nil }
        var result = SubprogramAttributes()
        var code = DWARFCodeAttributes()
        for specIndex in table.abbreviations[index].attributes {
            let spec = table.specs[specIndex]
            guard let value = unit.readValue(form: spec.form, implicitConst: spec.implicitConst, cursor: &cursor) else {
                return nil
            }
            if code.take(spec.attribute, value) { continue }
            switch spec.attribute {
            case DWARFCallSites.DW_AT_declaration: result.isDeclaration = value.value != 0
            case DW_AT_name: result.name = unit.string(value)
            case DW_AT_linkage_name, DW_AT_MIPS_linkage_name: result.linkageName = unit.string(value)
            case DW_AT_abstract_origin: result.abstractOrigin = unit.reference(value)
            case DW_AT_specification: result.specification = unit.reference(value)
            default: break
            }
        }
        var ranges: [DWARFRange] = []
        var budget = 64
        unit.addressRanges(of: code, into: &ranges, budget: &budget)
        result.entry = ranges.first?.low
        return result
    }
}
