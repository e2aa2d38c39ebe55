// DWARFVariables: the parameters and locals of the frames at one address, with their values as
// gdb's `info args` and `info locals` print them (issue 49: a crash report explains the fault).
//
// The lookup reuses the address map and each unit's inline tree (DWARFInlineTree): the chain of
// inlined subroutines out to the concrete subprogram, one DWARFScopeVariables per frame that
// DWARFInfo.frames(at:) reports, innermost first. For each, one walk over that DIE's own subtree
// (not the unit) collects its formal parameters and the variables of the lexical blocks that
// cover the address (a block without ranges lends its children to its parent, as gdb reads it),
// stepping over nested inlined subroutines (their own frames) and everything else. A variable's
// name, type and other attributes are taken from its DW_AT_abstract_origin / DW_AT_specification
// when it has none (as gdb's dwarf2_attr). Its location is its DW_AT_location expression or the
// entry of its location list covering the address (.debug_loclists, every DW_LLE_* kind, or
// .debug_loc), evaluated by DWARFExpression against the frame's state, DW_OP_fbreg against the
// subprogram's DW_AT_frame_base; DW_AT_const_value is a value of its own. Values are written by
// DWARFValueFormatter. An entry value (DW_OP_entry_value) is what the caller's call site passed:
// with `state.caller` given, DWARFEntryValues reads that call site before the lookup.
//
// Bounds: a walk visits at most `DWARFVariableLimits.dies` DIEs, keeps at most `variables`
// variables a frame, follows origins at most 4 deep; location lists are read at most `listEntries`
// entries. Everything runs in the DWARFInfo's DWARFLookups, behind its mutex.

import BoundedBytes
import ObjectFile

/// The caps of one `variables(at:)` call.
public struct DWARFVariableLimits: Sendable, Equatable {
    /// Aggregates nested deeper than this print as `{...}`.
    public var depth = 8
    /// Characters of one value; past them the value ends with `...`.
    public var bytesPerVariable = 1024
    /// Characters of all the values of one frame; the variables past them print `<...>`.
    public var bytesPerFrame = 16 * 1024
    /// Array elements and string characters printed (gdb's `print elements`).
    public var elements = 200
    /// Variables kept per frame.
    public var variables = 256
    /// DIEs one scope walk may visit.
    public var dies = 1 << 16
    /// Entries of one location list read.
    public var listEntries = 4096
    /// Steps through typedefs, qualifiers and pointers when naming or printing one type.
    public var typeChain = 64
    public var expression = DWARFExpressionLimits()

    public init() {}
}

/// Where a variable was at the pc, for matching the register or address a fault used.
public enum DWARFResolvedLocation: Sendable, Equatable {
    /// In DWARF register n (DWARFFrameState.registerName(n) names it).
    case register(Int)
    /// In memory, `size` bytes (its type's size, when known) at `address`.
    case memory(address: UInt64, size: UInt64?)
    /// Elsewhere: a computed or constant value, pieces, optimized out, unavailable.
    case other
}

/// One parameter or local of a frame.
public struct DWARFVariable: Sendable, Equatable {
    public var name: String
    /// Its type as gdb's `whatis` writes it (`struct order *`, `const char *`, `int [4]`).
    public var typeName: String?
    /// Its value as gdb's `info args` / `info locals` print it.
    public var value: String
    public var isParameter: Bool
    public var location: DWARFResolvedLocation
    /// The location as the expression gave it (a refusal's or unavailability's reason).
    public var evaluated: DWARFLocation?
    /// When its type is a pointer to a structure, union or class: the pointee's members.
    var pointee: DWARFMemberLayout?

    public init(
        name: String, typeName: String?, value: String, isParameter: Bool, location: DWARFResolvedLocation,
        evaluated: DWARFLocation? = nil
    ) {
        self.name = name
        self.typeName = typeName
        self.value = value
        self.isParameter = isParameter
        self.location = location
        self.evaluated = evaluated
    }

    /// The register's name when the variable was in one (`rax`).
    public var registerName: String? {
        if case .register(let number) = location { return DWARFFrameState.registerName(number) }
        return nil
    }

    /// For a variable whose type is a pointer to a structure (through typedefs and qualifiers):
    /// the member at byte `offset` of what it points at, as a path (`sku`, `inner.count`,
    /// `items[3]`); nil when the type is not such a pointer or no member lies there.
    public func memberPath(atOffset offset: UInt64) -> String? {
        pointee?.path(at: offset)
    }
}

/// The variables of one frame: an inlined subroutine, or the function that was really called.
public struct DWARFScopeVariables: Sendable, Equatable {
    /// As DWARFInfo.frames(at:) names the frame (the linkage name, else the name).
    public var function: String?
    public var inlined: Bool
    /// Parameters in declaration order, then locals from the innermost block out.
    public var variables: [DWARFVariable]

    public init(function: String?, inlined: Bool, variables: [DWARFVariable]) {
        self.function = function
        self.inlined = inlined
        self.variables = variables
    }
}

extension DWARFInfo {
    /// The variables of the frames at `fileAddress` (an ELF virtual address of this file: the
    /// pc less the module's load bias), innermost first, one entry per frame `frames(at:)`
    /// reports. For a return address (every frame but the crashed one), scopes and location
    /// lists are looked up at the call instruction (`fileAddress - 1`), as gdb does. Empty when
    /// no subprogram covers the address.
    ///
    /// Entry values are read from `state.caller` only where the caller is in this file too (its
    /// pc less `state.loadBias` in this file's DWARF); Symbolizer.variables finds the caller's
    /// module wherever it is.
    public func variables(
        at fileAddress: UInt64, isReturnAddress: Bool, state: DWARFFrameState,
        limits: DWARFVariableLimits = DWARFVariableLimits()
    ) -> [DWARFScopeVariables] {
        let lookup = fileAddress &- (isReturnAddress ? 1 : 0)
        let bias = state.loadBias
        let entryValues = DWARFEntryValues.resolve(
            callee: DWARFEntryValues.Source(dwarf: self, image: nil, loadBias: bias), at: lookup, caller: state.caller,
            limits: limits
        ) { pc in
            pc >= bias && self.functionEntry(containing: pc &- bias &- 1) != nil
                ? DWARFEntryValues.Source(dwarf: self, image: nil, loadBias: bias) : nil
        }
        return variables(at: lookup, state: state, entryValues: entryValues, limits: limits)
    }

    /// variables(at:isReturnAddress:state:limits:) at the lookup address, with the entry values
    /// already resolved.
    func variables(
        at lookup: UInt64, state: DWARFFrameState, entryValues: DWARFEntryValues?, limits: DWARFVariableLimits
    ) -> [DWARFScopeVariables] {
        let passed = PassedState(state: state)
        return lookups.withLock {
            $0.variables(at: lookup, state: passed.state, entryValues: entryValues, limits: limits)
        }
    }
}

extension Symbolizer {
    /// The variables of the frames at `pc` (an address of the process), as `symbolicate(pc:)`
    /// lines them up: one entry per frame it returns when DWARF covers the pc, innermost first,
    /// function names demangled as there. `state.loadBias` is set from the module, and so is
    /// each caller's in the `state.caller` chain, whose modules are found here too (libc's call
    /// into the program, or the program's into libc). Empty when no module or no DWARF covers
    /// the pc.
    public func variables(
        pc: UInt64, isReturnAddress: Bool, state: DWARFFrameState, limits: DWARFVariableLimits = DWARFVariableLimits()
    ) -> [DWARFScopeVariables] {
        guard let module = module(containing: pc), let object = module.object else { return [] }
        let debug = cache.image(for: object, locator: locator)
        guard let dwarf = debug.dwarf else { return [] }
        var state = state
        state.loadBias = module.loadBias
        let lookup = pc &- module.loadBias &- (isReturnAddress ? 1 : 0)
        let entryValues = DWARFEntryValues.resolve(
            callee: DWARFEntryValues.Source(dwarf: dwarf, image: debug, loadBias: module.loadBias), at: lookup,
            caller: state.caller, limits: limits
        ) { pc in
            guard let module = self.module(containing: pc), let object = module.object else { return nil }
            let image = self.cache.image(for: object, locator: self.locator)
            return image.dwarf.map { DWARFEntryValues.Source(dwarf: $0, image: image, loadBias: module.loadBias) }
        }
        var scopes = dwarf.variables(at: lookup, state: state, entryValues: entryValues, limits: limits)
        for index in scopes.indices {
            if let name = scopes[index].function, let demangled = debug.demangled(name) {
                scopes[index].function = demangled
            }
        }
        return scopes
    }
}

/// The frame state handed into the DWARFLookups' lock: its memory reader (not Sendable) is read
/// only during the call, on the caller's thread, and nothing that holds it outlives the call.
struct PassedState: @unchecked Sendable {
    let state: DWARFFrameState
}

/// A DIE's attributes as read, each value with the offset just past it (a block's end).
struct DWARFDIE {
    var unit: DWARFUnit
    var offset: UInt64
    var tag: UInt64
    var hasChildren: Bool
    var attributes: [(attribute: UInt64, value: DWARFFormValue, end: Int)]
    /// Where its first child (or its next sibling) begins.
    var end: Int

    func value(_ attribute: UInt64) -> DWARFFormValue? {
        attributes.first { $0.attribute == attribute }?.value
    }

    /// The bytes of a block or exprloc attribute.
    func block(_ attribute: UInt64) -> ByteView? {
        guard let found = attributes.first(where: { $0.attribute == attribute }) else { return nil }
        switch found.value.form {
        case DW_FORM_exprloc, DW_FORM_block, DW_FORM_block1, DW_FORM_block2, DW_FORM_block4, DW_FORM_data16:
            let start = found.value.value
            guard UInt64(found.end) >= start else { return nil }
            return unit.sections.info.slice(start, UInt64(found.end) - start)
        default: return nil
        }
    }

    func reference(_ attribute: UInt64) -> UInt64? { value(attribute).flatMap { unit.reference($0) } }
    func constant(_ attribute: UInt64) -> UInt64? { value(attribute).flatMap { unit.constant($0) } }
    func string(_ attribute: UInt64) -> String? { value(attribute).flatMap { unit.string($0) } }
    func flag(_ attribute: UInt64) -> Bool { value(attribute).map { $0.value != 0 } ?? false }
}

/// What DWARFVariables keeps in a DWARFLookups between calls: type DIEs as read.
struct DWARFVariableCaches {
    var types: [UInt64: DWARFTypeNode] = [:]
    static let maximumTypes = 1 << 16
    /// Per C++ unit (by index): each named type DIE's enclosing namespaces and classes
    /// (`shop::`), as gdb qualifies C++ names.
    var qualifiers: [Int: [UInt64: String]] = [:]
}

extension DWARFLookups {
    /// The DIE at `offset` of .debug_info with all its attributes; nil outside every unit or
    /// where it does not decode.
    func die(at offset: UInt64) -> DWARFDIE? {
        guard let unit = unit(containing: offset) else { return nil }
        var cursor = DWARFCursor(sections.info, offset: offset)
        let table = unit.abbreviations
        guard let code = cursor.uleb(), code != 0, let index = table.index(of: code) else { return nil }
        let abbreviation = table.abbreviations[index]
        var die = DWARFDIE(
            unit: unit, offset: offset, tag: abbreviation.tag, hasChildren: abbreviation.hasChildren, attributes: [], end: 0)
        die.attributes.reserveCapacity(abbreviation.attributes.count)
        for specIndex in abbreviation.attributes {
            let spec = table.specs[specIndex]
            guard let value = unit.readValue(form: spec.form, implicitConst: spec.implicitConst, cursor: &cursor) else {
                return nil
            }
            die.attributes.append((spec.attribute, value, cursor.offset))
        }
        die.end = cursor.offset
        return die
    }

    /// The namespaces and classes enclosing each named type DIE of a C++ unit (`shop::`, empty at
    /// the top), read by one walk over the unit on first use and kept.
    func qualifiers(of unit: DWARFUnit) -> [UInt64: String] {
        if let known = variableCaches.qualifiers[unit.index] { return known }
        let table = unit.abbreviations
        var prefixes: [String] = []
        var found: [UInt64: String] = [:]
        unit.walkDIEs { offset, abbreviation, scope, cursor in
            let prefix = scope >= 0 && Int(scope) < prefixes.count ? prefixes[Int(scope)] : ""
            switch abbreviation.tag {
            case DW_TAG_namespace, DW_TAG_structure_type, DW_TAG_class_type, DW_TAG_union_type, DW_TAG_enumeration_type,
                DW_TAG_typedef:
                var name: String?
                for specIndex in abbreviation.attributes {
                    let spec = table.specs[specIndex]
                    guard let value = unit.readValue(form: spec.form, implicitConst: spec.implicitConst, cursor: &cursor)
                    else { return nil }
                    if spec.attribute == DW_AT_name { name = unit.string(value) }
                }
                found[UInt64(offset)] = prefix
                guard abbreviation.hasChildren, abbreviation.tag != DW_TAG_typedef else { return scope }
                let inner = name ?? (abbreviation.tag == DW_TAG_namespace ? "(anonymous namespace)" : nil)
                prefixes.append(inner.map { prefix + $0 + "::" } ?? prefix)
                return Int32(truncatingIfNeeded: prefixes.count - 1)
            default:
                guard unit.skipAttributes(abbreviation, cursor: &cursor) else { return nil }
                // What a function declares locally is not named from outside it.
                return abbreviation.tag == DW_TAG_subprogram ? -1 : scope
            }
        }
        if variableCaches.qualifiers.count > 64 { variableCaches.qualifiers.removeAll() }
        variableCaches.qualifiers[unit.index] = found
        return found
    }

    /// The children of `parent`, in order, each read whole; their own subtrees are stepped over.
    /// At most `budget` DIEs are visited (children and what they hold).
    func children(of parent: DWARFDIE, budget: inout Int) -> [DWARFDIE] {
        guard parent.hasChildren else { return [] }
        var result: [DWARFDIE] = []
        var offset = parent.end
        let end = parent.unit.dieEnd
        while offset < end, budget > 0 {
            budget -= 1
            var cursor = DWARFCursor(sections.info, offset: offset)
            guard let code = cursor.uleb(), code != 0, let child = die(at: UInt64(offset)) else { break }
            result.append(child)
            guard child.hasChildren else {
                offset = child.end
                continue
            }
            if let sibling = child.reference(DW_AT_sibling), sibling > UInt64(offset), sibling <= UInt64(end) {
                offset = Int(sibling)
                continue
            }
            guard let after = child.unit.skipSubtree(from: child.end, in: sections.info, budget: &budget) else { break }
            offset = after
        }
        return result
    }

    /// DWARFInfo.variables(at:isReturnAddress:state:limits:), at the lookup address.
    func variables(
        at address: UInt64, state: DWARFFrameState, entryValues: DWARFEntryValues?, limits: DWARFVariableLimits
    ) -> [DWARFScopeVariables] {
        guard let unitIndex = unitMap.lookup(address), Int(unitIndex) < units.count else { return [] }
        let unit = units[Int(unitIndex)]
        let tree = inlineTree(of: unit)
        var chain: [Int32] = []
        tree.chain(for: address, into: &chain)
        guard let outermost = chain.last else { return [] }
        // Every frame of the chain shares the concrete subprogram's frame base.
        let subprogram = die(at: tree.nodes[Int(outermost)].dieOffset)
        var frameBase: DWARFLocation?
        if let subprogram, let attribute = subprogram.value(DW_AT_frame_base) {
            frameBase = evaluate(
                attribute, of: subprogram, at: address, state: state, frameBase: nil, entryValues: entryValues, limits: limits)
        }
        var formatter = DWARFValueFormatter(lookups: self, state: state, limits: limits)
        var result: [DWARFScopeVariables] = []
        for nodeIndex in chain {
            let node = tree.nodes[Int(nodeIndex)]
            let name = tree.name(of: nodeIndex) { self.subroutineName(at: $0) }
            formatter.frameBudget = limits.bytesPerFrame
            var variables: [DWARFVariable] = []
            for found in scopeVariables(of: node.dieOffset, unit: unit, at: address, limits: limits) {
                variables.append(
                    variable(
                        found, at: address, state: state, frameBase: frameBase, entryValues: entryValues,
                        formatter: &formatter, limits: limits))
            }
            result.append(DWARFScopeVariables(function: name, inlined: node.isInlined, variables: variables))
        }
        return result
    }

    /// A variable DIE as the scope walk found it, with what its origins add.
    struct FoundVariable {
        var die: DWARFDIE
        var isParameter: Bool
        var name: String
        var type: UInt64?
        var location: (DWARFFormValue, DWARFDIE)?
        var constValue: (DWARFFormValue, DWARFDIE)?
    }

    /// One open DIE of the scope walk: the block level whose variables its children add to (-1:
    /// skipped), and for a concrete DIE with an abstract origin, the origin's children its own
    /// children stand for.
    private struct OpenScope {
        var level: Int
        var origin: UInt64?
        var referenced: [UInt64] = []
    }

    /// The parameters and in-scope locals of the subroutine DIE at `scope`, in gdb's order.
    ///
    /// As gdb's inherit_abstract_dies: a concrete scope (an inlined subroutine, an out-of-line
    /// copy, a block) with a DW_AT_abstract_origin also holds the origin's parameters and
    /// variables that none of its own children stands for, after its own, without a location
    /// (`<optimized out>`).
    func scopeVariables(
        of scope: UInt64, unit: DWARFUnit, at address: UInt64, limits: DWARFVariableLimits
    )
        -> [FoundVariable]
    {
        let table = unit.abbreviations
        guard let top = die(at: scope), top.hasChildren else { return [] }
        var cursor = DWARFCursor(sections.info, offset: top.end)
        var open: [OpenScope] = [OpenScope(level: 0, origin: top.reference(DW_AT_abstract_origin))]
        var parameters: [FoundVariable] = []
        var locals: [[FoundVariable]] = [[]]
        var kept = 0
        var budget = limits.dies
        let end = unit.dieEnd

        func add(_ found: FoundVariable, level: Int) {
            guard kept < limits.variables else { return }
            kept += 1
            if found.isParameter && level == 0 { parameters.append(found) } else { locals[level].append(found) }
        }
        /// The origin's variables that no child of the closing scope stood for.
        func inherit(_ closing: OpenScope) {
            guard closing.level >= 0, let origin = closing.origin, let originDIE = die(at: origin) else { return }
            for child in children(of: originDIE, budget: &budget)
            where (child.tag == DW_TAG_formal_parameter || child.tag == DW_TAG_variable)
                && !closing.referenced.contains(child.offset)
            {
                if let found = resolveVariable(child, isParameter: child.tag == DW_TAG_formal_parameter) {
                    add(found, level: closing.level)
                }
            }
        }

        while cursor.offset < end, let current = open.last, budget > 0 {
            budget -= 1
            let offset = cursor.offset
            guard let code = cursor.uleb() else { break }
            if code == 0 {
                inherit(open.removeLast())
                continue
            }
            guard let index = table.index(of: code) else { break }
            let abbreviation = table.abbreviations[index]
            if current.level < 0 {
                guard unit.skipAttributes(abbreviation, cursor: &cursor) else { break }
                if abbreviation.hasChildren { open.append(OpenScope(level: -1)) }
                continue
            }
            switch abbreviation.tag {
            case DW_TAG_formal_parameter, DW_TAG_variable, DW_TAG_lexical_block:
                guard let die = die(at: UInt64(offset)) else { return parameters + locals.reversed().joined() }
                cursor.offset = die.end
                let origin = die.reference(DW_AT_abstract_origin)
                if let origin, open[open.count - 1].referenced.count < 4096 { open[open.count - 1].referenced.append(origin) }
                guard abbreviation.tag == DW_TAG_lexical_block else {
                    if let found = resolveVariable(die, isParameter: abbreviation.tag == DW_TAG_formal_parameter) {
                        add(found, level: current.level)
                    }
                    if abbreviation.hasChildren { open.append(OpenScope(level: -1)) }
                    continue
                }
                guard abbreviation.hasChildren else { continue }
                var code = DWARFCodeAttributes()
                for attribute in die.attributes { _ = code.take(attribute.attribute, attribute.value) }
                if code.lowPC == nil && code.ranges == nil {
                    // No ranges: its children are its parent's (gdb's read_lexical_block_scope).
                    open.append(OpenScope(level: current.level, origin: origin))
                    continue
                }
                var ranges: [DWARFRange] = []
                var rangeBudget = 256
                unit.addressRanges(of: code, into: &ranges, budget: &rangeBudget)
                if ranges.contains(where: { address >= $0.low && address < $0.high }) {
                    let level = current.level + 1
                    if locals.count <= level { locals.append([]) }
                    open.append(OpenScope(level: level, origin: origin))
                } else {
                    open.append(OpenScope(level: -1))
                }
            default:
                // Nested inlined subroutines are frames of their own; types, labels, call sites
                // hold no variables of this scope.
                guard unit.skipAttributes(abbreviation, cursor: &cursor) else { break }
                if abbreviation.hasChildren { open.append(OpenScope(level: -1)) }
            }
        }
        return parameters + locals.reversed().joined()
    }

    /// Name, type, location and constant value, from the DIE or its origins (at most 4 deep);
    /// nil for what gdb does not list: nameless, artificial (but `this`) and declarations.
    private func resolveVariable(_ die: DWARFDIE, isParameter: Bool) -> FoundVariable? {
        var name: String?, type: UInt64?, artificial = false, declaration = false
        var location: (DWARFFormValue, DWARFDIE)?, constValue: (DWARFFormValue, DWARFDIE)?
        var current: DWARFDIE? = die
        var seen: [UInt64] = []
        while let entry = current, seen.count < 4, !seen.contains(entry.offset) {
            seen.append(entry.offset)
            if name == nil { name = entry.string(DW_AT_name) }
            if type == nil { type = entry.reference(DW_AT_type) }
            if location == nil, let value = entry.value(DW_AT_location) { location = (value, entry) }
            if constValue == nil, let value = entry.value(DW_AT_const_value) { constValue = (value, entry) }
            artificial = artificial || entry.flag(DW_AT_artificial)
            if entry.offset == die.offset { declaration = entry.flag(DW_AT_declaration) }
            current = (entry.reference(DW_AT_abstract_origin) ?? entry.reference(DW_AT_specification)).flatMap {
                self.die(at: $0)
            }
        }
        guard let name, !name.isEmpty, !declaration, !artificial || name == "this" else { return nil }
        // gdb's info locals lists no LOC_CONST_BYTES symbol: a local whose only value is a
        // constant block (a double, a structure) is not shown; `info args` shows parameters.
        if !isParameter, location == nil, let (value, _) = constValue, die.unit.constant(value) == nil { return nil }
        return FoundVariable(
            die: die, isParameter: isParameter, name: name, type: type, location: location, constValue: constValue)
    }

    /// One variable, located and printed.
    private func variable(
        _ found: FoundVariable, at address: UInt64, state: DWARFFrameState, frameBase: DWARFLocation?,
        entryValues: DWARFEntryValues?, formatter: inout DWARFValueFormatter, limits: DWARFVariableLimits
    ) -> DWARFVariable {
        let typeName = found.type.map { formatter.typeName($0) }
        var evaluated: DWARFLocation?
        let value: String
        if let (attribute, owner) = found.location {
            let location = evaluate(
                attribute, of: owner, at: address, state: state, frameBase: frameBase, entryValues: entryValues,
                limits: limits)
            evaluated = location
            value = formatter.value(of: found.type, at: location)
        } else if let (attribute, owner) = found.constValue {
            value = formatter.constant(attribute, of: owner, type: found.type)
        } else {
            value = "<optimized out>"
        }
        var resolved = DWARFResolvedLocation.other
        switch evaluated {
        case .register(let number)?: resolved = .register(number)
        case .memory(let address)?: resolved = .memory(address: address, size: found.type.flatMap { formatter.byteSize(of: $0) })
        default: break
        }
        var result = DWARFVariable(
            name: found.name, typeName: typeName, value: value, isParameter: found.isParameter, location: resolved,
            evaluated: evaluated)
        result.pointee = found.type.flatMap { formatter.pointeeLayout(of: $0) }
        return result
    }

    /// Evaluates a location attribute (an expression, or a list whose entry covers `address`).
    func evaluate(
        _ attribute: DWARFFormValue, of die: DWARFDIE, at address: UInt64, state: DWARFFrameState,
        frameBase: DWARFLocation?, entryValues: DWARFEntryValues? = nil, limits: DWARFVariableLimits
    ) -> DWARFLocation {
        let unit = die.unit
        let expression: ByteView
        switch attribute.form {
        case DW_FORM_exprloc, DW_FORM_block, DW_FORM_block1, DW_FORM_block2, DW_FORM_block4:
            guard
                let bytes = die.attributes.first(where: { $0.value.form == attribute.form && $0.value.value == attribute.value })
                    .flatMap({ entry -> ByteView? in
                        let start = entry.value.value
                        guard UInt64(entry.end) >= start else { return nil }
                        return unit.sections.info.slice(start, UInt64(entry.end) - start)
                    })
            else { return .refused("location block out of bounds") }
            expression = bytes
        case DW_FORM_loclistx, DW_FORM_sec_offset, DW_FORM_data4, DW_FORM_data8:
            switch locationListEntry(attribute, unit: unit, at: address, limits: limits) {
            case .found(let bytes): expression = bytes
            case .none: return .optimizedOut
            case .malformed(let reason): return .refused(reason)
            }
        default:
            return .refused("location of form 0x\(String(attribute.form, radix: 16))")
        }
        let context = expressionContext(
            unit: unit, state: state, frameBase: frameBase, entryValues: entryValues, limits: limits.expression)
        return DWARFExpression.evaluate(expression, context: context)
    }

    /// What an expression of `unit` is evaluated with.
    func expressionContext(
        unit: DWARFUnit, state: DWARFFrameState, frameBase: DWARFLocation?, entryValues: DWARFEntryValues?,
        limits: DWARFExpressionLimits
    ) -> DWARFExpression.Context {
        var context = DWARFExpression.Context(state: state, frameBase: frameBase, limits: limits)
        context.addressSize = Int(unit.format.addressSize)
        context.offsetSize = Int(unit.format.version <= 2 ? unit.format.addressSize : unit.format.offsetSize)
        context.indexedAddress = { unit.indexedAddress($0) }
        context.entryValues = entryValues
        context.unitOffset = unit.offset
        context.baseType = { offset in
            guard let die = self.die(at: unit.offset &+ offset), let encoding = die.constant(DW_AT_encoding),
                let size = die.constant(DW_AT_byte_size), size >= 1, size <= 16
            else { return nil }
            return DWARFBaseType(
                isFloat: encoding == DW_ATE_float, isSigned: encoding == DW_ATE_signed || encoding == DW_ATE_signed_char,
                size: Int(size))
        }
        return context
    }

    enum ListEntry {
        case found(ByteView)
        /// No entry covers the address: the variable is optimized out there.
        case none
        case malformed(String)
    }

    /// The expression of the entry of a location list that covers `address`.
    func locationListEntry(
        _ attribute: DWARFFormValue, unit: DWARFUnit, at address: UInt64, limits: DWARFVariableLimits
    )
        -> ListEntry
    {
        let size = Int(unit.format.addressSize)
        if unit.format.version < 5 {
            // .debug_loc: (start, end) relative to the base address, all-ones start selects a
            // base, (0, 0) ends; each entry's expression has a 2-byte length.
            let section = sections.loc
            guard attribute.value < UInt64(section.count) else { return .malformed("location list past .debug_loc") }
            var cursor = DWARFCursor(section, offset: attribute.value)
            let selection: UInt64 = size == 8 ? .max : UInt64(UInt32.max)
            var base = unit.baseAddress ?? 0
            for _ in 0..<limits.listEntries {
                guard let start = cursor.unsigned(size: size), let end = cursor.unsigned(size: size) else {
                    return .malformed("truncated location list")
                }
                if start == 0 && end == 0 { return .none }
                if start == selection {
                    base = end
                    continue
                }
                guard let length = cursor.u16(), let bytes = section.slice(UInt64(cursor.offset), UInt64(length)),
                    cursor.skip(Int(length))
                else { return .malformed("truncated location list") }
                if address >= start &+ base && address < end &+ base { return .found(bytes) }
            }
            return .malformed("location list longer than \(limits.listEntries) entries")
        }
        let section = sections.loclists
        var offset = attribute.value
        if attribute.form == DW_FORM_loclistx {
            let offsetSize = UInt64(unit.format.offsetSize)
            let base = unit.loclistsBase ?? (offsetSize == 8 ? 20 : 12)
            let entry = attribute.value.checkedMultiplying(offsetSize).flatMap { base.checkedAdding($0) }
            if let entry { sections.prepareLocationList(entry..<(entry &+ offsetSize)) }
            guard let at = entry,
                let relative = offsetSize == 8 ? section.u64(at) : section.u32(at).map(UInt64.init),
                let absolute = base.checkedAdding(relative)
            else { return .malformed("location list index \(attribute.value) out of bounds") }
            offset = absolute
        }
        guard offset < UInt64(section.count) else { return .malformed("location list past .debug_loclists") }
        // A list's entries are a few bytes each: 64 KiB covers every list `listEntries` allows
        // in practice; past it an on-demand section reads as zeros (the list's end).
        sections.prepareLocationList(offset..<(offset &+ (64 << 10)))
        var cursor = DWARFCursor(section, offset: offset)
        var base = unit.baseAddress ?? 0
        var fallback: ByteView?
        for _ in 0..<limits.listEntries {
            guard let kind = cursor.u8() else { return .malformed("truncated location list") }
            var range: (UInt64, UInt64)?
            switch kind {
            case DW_LLE_end_of_list: return fallback.map { .found($0) } ?? .none
            case DW_LLE_base_addressx:
                guard let index = cursor.uleb() else { return .malformed("truncated location list") }
                base = unit.indexedAddress(index) ?? 0
                continue
            case DW_LLE_base_address:
                guard let value = cursor.unsigned(size: size) else { return .malformed("truncated location list") }
                base = value
                continue
            case DW_LLE_GNU_view_pair:
                guard cursor.uleb() != nil, cursor.uleb() != nil else { return .malformed("truncated location list") }
                continue
            case DW_LLE_startx_endx:
                guard let first = cursor.uleb(), let second = cursor.uleb() else { return .malformed("truncated location list") }
                if let low = unit.indexedAddress(first), let high = unit.indexedAddress(second) { range = (low, high) }
            case DW_LLE_startx_length:
                guard let first = cursor.uleb(), let length = cursor.uleb() else {
                    return .malformed("truncated location list")
                }
                if let low = unit.indexedAddress(first) { range = (low, low &+ length) }
            case DW_LLE_offset_pair:
                guard let start = cursor.uleb(), let end = cursor.uleb() else { return .malformed("truncated location list") }
                range = (base &+ start, base &+ end)
            case DW_LLE_default_location: break
            case DW_LLE_start_end:
                guard let low = cursor.unsigned(size: size), let high = cursor.unsigned(size: size) else {
                    return .malformed("truncated location list")
                }
                range = (low, high)
            case DW_LLE_start_length:
                guard let low = cursor.unsigned(size: size), let length = cursor.uleb() else {
                    return .malformed("truncated location list")
                }
                range = (low, low &+ length)
            default: return .malformed("location list entry kind \(kind)")
            }
            guard let length = cursor.uleb(), let bytes = section.slice(UInt64(cursor.offset), length), cursor.skip(length)
            else { return .malformed("truncated location list") }
            if kind == DW_LLE_default_location {
                fallback = bytes
            } else if let (low, high) = range, address >= low && address < high {
                return .found(bytes)
            }
        }
        return .malformed("location list longer than \(limits.listEntries) entries")
    }
}

// DWARF 5 section 7 (names verbatim).
let DW_TAG_formal_parameter: UInt64 = 0x05
let DW_TAG_lexical_block: UInt64 = 0x0b
let DW_TAG_variable: UInt64 = 0x34
let DW_AT_location: UInt64 = 0x02
let DW_AT_const_value: UInt64 = 0x1c
let DW_AT_frame_base: UInt64 = 0x40
let DW_AT_artificial: UInt64 = 0x34
let DW_AT_declaration: UInt64 = 0x3c
let DW_AT_type: UInt64 = 0x49
let DW_TAG_namespace: UInt64 = 0x39
let DW_LLE_end_of_list: UInt8 = 0x00
let DW_LLE_base_addressx: UInt8 = 0x01
let DW_LLE_startx_endx: UInt8 = 0x02
let DW_LLE_startx_length: UInt8 = 0x03
let DW_LLE_offset_pair: UInt8 = 0x04
let DW_LLE_default_location: UInt8 = 0x05
let DW_LLE_base_address: UInt8 = 0x06
let DW_LLE_start_end: UInt8 = 0x07
let DW_LLE_start_length: UInt8 = 0x08
let DW_LLE_GNU_view_pair: UInt8 = 0x09
