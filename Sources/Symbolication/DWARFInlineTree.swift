// DWARFInlineTree: the subprograms and inlined subroutines of one unit, as a flat preorder
// array with parent links, and an address map from every code address to the innermost of them.
//
// Built by a single walk over the unit's DIEs, the first time an address falls in the unit.
// The walk decodes only subprogram and inlined-subroutine DIEs; every other DIE is stepped over
// (with one addition when its abbreviation has only fixed-size values). Lexical blocks are not
// recorded, but their children are: a node's parent is its nearest enclosing subroutine. The
// chain for an address is LLVM's DWARFUnit::getInlinedChainForAddress: the innermost node, then
// its parents up to and including the first subprogram.
//
// Memory: one node per subroutine DIE, one range per address range, with the range count capped
// by a budget DWARFInfo derives from the section sizes. Names are resolved on demand by
// DWARFInfo and cached here; the tree is kept by its unit, behind DWARFInfo's mutex.

import BoundedBytes
import ObjectFile

/// Not Sendable: kept by its DWARFUnit, in the DWARFLookups behind its DWARFInfo's mutex.
final class DWARFInlineTree {
    struct Node: Sendable {
        var dieOffset: UInt64  // in .debug_info
        var parent: Int32  // nearest enclosing node, or -1
        var isInlined: Bool  // DW_TAG_inlined_subroutine (else DW_TAG_subprogram)
        var callFile: UInt32
        var callLine: UInt32
        var callColumn: UInt32
    }

    let nodes: [Node]
    let map: DWARFAddressMap
    private var names: [String?] = []
    private var nameKnown: [Bool] = []

    /// Walks the unit's DIEs; collects at most `budget` ranges, deducting what it collects.
    init(unit: DWARFUnit, budget: inout Int) {
        let table = unit.abbreviations
        var ranges: [DWARFRange] = []
        var owners: [Int32] = []
        var nodes: [Node] = []

        unit.walkDIEs { dieOffset, abbreviation, current, cursor in
            guard abbreviation.isSubroutine else { return unit.skipAttributes(abbreviation, cursor: &cursor) ? current : nil }
            var code = DWARFCodeAttributes()
            var callFile: UInt64 = 0, callLine: UInt64 = 0, callColumn: UInt64 = 0
            for specIndex in abbreviation.attributes {
                let spec = table.specs[specIndex]
                guard let value = unit.readValue(form: spec.form, implicitConst: spec.implicitConst, cursor: &cursor)
                else { return nil }
                if code.take(spec.attribute, value) { continue }
                switch spec.attribute {
                case DW_AT_call_file: callFile = unit.constant(value) ?? 0
                case DW_AT_call_line: callLine = unit.constant(value) ?? 0
                case DW_AT_call_column: callColumn = unit.constant(value) ?? 0
                default: break
                }
            }
            let owner = Int32(truncatingIfNeeded: nodes.count)
            nodes.append(
                Node(
                    dieOffset: UInt64(dieOffset), parent: current, isInlined: abbreviation.tag == DW_TAG_inlined_subroutine,
                    callFile: UInt32(truncatingIfNeeded: callFile), callLine: UInt32(truncatingIfNeeded: callLine),
                    callColumn: UInt32(truncatingIfNeeded: callColumn)))
            let before = ranges.count
            unit.addressRanges(of: code, into: &ranges, budget: &budget)
            for _ in before..<ranges.count { owners.append(owner) }
            return owner
        }
        self.nodes = nodes
        map = DWARFAddressMap(ranges: ranges, owners: owners, ownerCount: nodes.count, winner: .highest)
        names = Array(repeating: nil, count: nodes.count)
        nameKnown = Array(repeating: false, count: nodes.count)
    }

    /// Appends the chain of node indexes for `address` to `chain`, innermost first; ends with
    /// the containing subprogram. Parents always precede children, so the walk terminates.
    @inline(__always)
    func chain(for address: UInt64, into chain: inout [Int32]) {
        guard var index = map.lookup(address) else { return }
        while index >= 0 && Int(index) < nodes.count {
            chain.append(index)
            let node = nodes[Int(index)]
            if !node.isInlined { return }
            guard node.parent < index else { return }
            index = node.parent
        }
    }

    /// The cached name of node `index`, computing it once with `resolve`.
    @inline(__always)
    func name(of index: Int32, _ resolve: (UInt64) -> String?) -> String? {
        let at = Int(index)
        if nameKnown[at] { return names[at] }
        let name = resolve(nodes[at].dieOffset)
        names[at] = name
        nameKnown[at] = true
        return name
    }
}
