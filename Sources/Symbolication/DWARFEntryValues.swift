// DWARFEntryValues: what a caller's call site passed to the function a frame is in, for the
// values its parameters had on entry (DW_OP_entry_value, DW_OP_GNU_entry_value,
// DW_OP_GNU_parameter_ref; DWARF 5 sections 2.5.1.7 and 3.4.2), read as gdb's dwarf2/loc.c reads
// them (value_of_dwarf_reg_entry, dwarf_expr_reg_to_entry_parameter).
//
// A frame's caller (DWARFFrameState.caller) returns to a call site of its own function: the
// DW_TAG_call_site (GCC's DW_TAG_GNU_call_site) whose DW_AT_call_return_pc (DW_AT_low_pc) is that
// return address. Its DW_TAG_call_site_parameter children name, by DW_AT_location, the register
// each argument was passed in (or, by DW_AT_call_parameter / DW_AT_abstract_origin, the callee's
// parameter DIE), and by DW_AT_call_value (DW_AT_GNU_call_site_value) and DW_AT_call_data_value
// what it held and what it pointed at, as expressions of the caller's frame. They are evaluated
// here, in the caller's state, before the callee's variables are read: the caller may be in
// another module, and each DWARFInfo is read behind its own mutex, so the callee's lookup never
// calls into another (or, the same module, its own) DWARFInfo.
//
// Trusted only as gdb trusts them: the site must be the only one returning there and be a call,
// not a tail call; it must call the frame's function directly (a function reached through a tail
// call from the one called has its target elsewhere, and then nothing is trusted); and the
// function must not be able to tail-call itself (its entry values would be another
// activation's). A call value that is itself an entry value of the caller is resolved through the
// caller's caller, at most `maximumDepth` callers out, else it is optimized out. Every read is
// bounded: one call site per caller, at most `maximumParameters` DIEs under it, each expression
// under the DWARFExpressionLimits, the search for a self tail call by `maximumTailCallSearch`.
//
// Values only: built for one variables lookup and dropped after it.

import BoundedBytes
import ObjectFile

/// A frame's caller, for the values the frame's parameters had on entry: the return address into
/// it and what the unwinder knows of its registers. A class because a DWARFFrameState holds its
/// caller's, which may hold its own caller (a chain, innermost first). Immutable; its memory
/// reader is read only during a variables lookup, on the caller's thread.
public final class DWARFCallerFrame {
    /// The return address into the caller: its pc as unwound (a process address for
    /// Symbolizer.variables; for DWARFInfo.variables too, where the file's load bias is
    /// `state.loadBias` of the callee).
    public let pc: UInt64
    /// The caller's own registers (sp, pc, the callee-saved ones its callee's CFI restored), its
    /// CFA and memory; its `caller` may go on. Its loadBias is set from the caller's module.
    public let state: DWARFFrameState

    public init(pc: UInt64, state: DWARFFrameState) {
        self.pc = pc
        self.state = state
    }
}

/// What one call site passed its callee, evaluated in the caller's frame (see the file's comment).
struct DWARFEntryValues: Sendable {
    /// DWARF register → its value on entry (DW_AT_call_value).
    var registers: [Int: UInt64] = [:]
    /// DWARF register → the bytes it pointed at on entry (DW_AT_call_data_value), little-endian.
    var pointees: [Int: UInt64] = [:]
    /// The .debug_info offset of the callee's parameter DIE → its value on entry (only where the
    /// caller is in the callee's file: the offsets are that file's).
    var parameters: [UInt64: UInt64] = [:]

    /// Callers followed out for a call value that is itself an entry value.
    static let maximumDepth = 4
    /// DIEs read under one call site.
    static let maximumParameters = 64
    /// Functions visited looking for a tail call of the callee to itself.
    static let maximumTailCallSearch = 256

    /// Register `register`'s value on entry, or with `size`, that many bytes of what it pointed at.
    func value(of register: Int, dereferencing size: Int?) -> UInt64? {
        guard let size else { return registers[register] }
        guard let value = pointees[register] else { return nil }
        return size >= 8 ? value : value & ((1 << UInt64(8 * size)) - 1)
    }

    /// A file whose DWARF may hold a frame: its DWARF, its symbols (a call's callee named, not
    /// addressed: declared in another module), its load bias.
    struct Source {
        let dwarf: DWARFInfo
        let image: DebugImage?
        let loadBias: UInt64
    }

    /// The entry values of the function in `callee` at `lookup` (a file address, the call
    /// instruction for a return address), from the call site `caller` returns to; nil when there
    /// is no caller or the call site cannot be trusted. `find` gives the file holding a process
    /// address (the caller's pc).
    static func resolve(
        callee: Source, at lookup: UInt64, caller: DWARFCallerFrame?, limits: DWARFVariableLimits, depth: Int = 0,
        find: (UInt64) -> Source?
    ) -> DWARFEntryValues? {
        guard let caller, depth < maximumDepth, let entry = callee.dwarf.functionEntry(containing: lookup),
            let source = find(caller.pc), caller.pc > source.loadBias
        else { return nil }
        let returnAddress = caller.pc &- source.loadBias
        var state = caller.state
        state.loadBias = source.loadBias
        // The caller's own entry values, for a call value that forwards one.
        let outer =
            state.caller == nil
            ? nil
            : resolve(
                callee: source, at: returnAddress - 1, caller: state.caller, limits: limits, depth: depth + 1, find: find)
        guard
            let (target, found) = source.dwarf.callSiteValues(
                returningTo: returnAddress, state: state, entryValues: outer, limits: limits)
        else { return nil }
        switch target {
        case .address(let address):
            guard address &+ source.loadBias == entry &+ callee.loadBias else { return nil }
        case .name(let name):
            guard let address = callee.image?.functionAddress(named: name), address == entry else { return nil }
        case .unknown:
            return nil
        }
        guard !callee.dwarf.mayTailCallItself(entry: entry) else { return nil }
        var result = found
        if source.dwarf !== callee.dwarf { result.parameters = [:] }
        return result
    }

    /// A call value's result as the value it pushes: the top of the stack, a register's contents,
    /// a constant of at most 8 bytes.
    static func number(_ location: DWARFLocation, state: DWARFFrameState) -> UInt64? {
        switch location {
        case .value(let value), .memory(let value): return value
        case .register(let number): return state.registers[number]
        case .implicit(let bytes) where !bytes.isEmpty && bytes.count <= 8:
            return bytes.reversed().reduce(0) { $0 << 8 | UInt64($1) }
        default: return nil
        }
    }
}

extension DWARFInfo {
    /// What the call site returning to `address` (a file address) passes, evaluated in `state`
    /// (the caller's, its loadBias set), with its call's target; nil when no single call site
    /// returns there.
    func callSiteValues(
        returningTo address: UInt64, state: DWARFFrameState, entryValues: DWARFEntryValues?, limits: DWARFVariableLimits
    ) -> (target: CallSite.Target, values: DWARFEntryValues)? {
        let passed = PassedState(state: state)
        return lookups.withLock {
            $0.callSiteValues(returningTo: address, state: passed.state, entryValues: entryValues, limits: limits)
        }
    }

    /// Whether the function entered at `entry` may tail-call itself, through at most
    /// `DWARFEntryValues.maximumTailCallSearch` functions of this file; true when the search
    /// could not finish.
    func mayTailCallItself(entry: UInt64) -> Bool {
        lookups.withLock { $0.mayTailCallItself(entry: entry) }
    }
}

extension DWARFLookups {
    /// DWARFInfo.callSiteValues(returningTo:state:entryValues:limits:).
    func callSiteValues(
        returningTo address: UInt64, state: DWARFFrameState, entryValues: DWARFEntryValues?, limits: DWARFVariableLimits
    ) -> (target: CallSite.Target, values: DWARFEntryValues)? {
        guard address > 0, let (unit, sites) = callSites(covering: address - 1),
            let site = sites.site(returningTo: address), site.isReturnPC, !site.isTailCall,
            Int(site.function) < sites.functions.count, let siteDIE = die(at: site.dieOffset)
        else { return nil }
        let target = callSite(site, unit: unit, sites: sites).target
        // The caller's frame base, for DW_OP_fbreg in a call value.
        var frameBase: DWARFLocation?
        if let function = die(at: sites.functions[Int(site.function)].dieOffset),
            let attribute = function.value(DW_AT_frame_base)
        {
            frameBase = evaluate(
                attribute, of: function, at: address - 1, state: state, frameBase: nil, entryValues: entryValues,
                limits: limits)
        }
        let context = expressionContext(
            unit: unit, state: state, frameBase: frameBase, entryValues: entryValues, limits: limits.expression)
        func evaluated(_ expression: ByteView?) -> UInt64? {
            expression.flatMap { DWARFEntryValues.number(DWARFExpression.evaluate($0, context: context), state: state) }
        }
        var values = DWARFEntryValues()
        var budget = DWARFEntryValues.maximumParameters
        for parameter in children(of: siteDIE, budget: &budget)
        where parameter.tag == DW_TAG_call_site_parameter || parameter.tag == DW_TAG_GNU_call_site_parameter {
            let value = evaluated(parameter.block(DW_AT_call_value) ?? parameter.block(DW_AT_GNU_call_site_value))
            if let location = parameter.block(DW_AT_location) {
                guard let register = Self.register(named: location) else { continue }
                values.registers[register] = value
                values.pointees[register] = evaluated(
                    parameter.block(DW_AT_call_data_value) ?? parameter.block(DW_AT_GNU_call_site_data_value))
            } else if let callee = parameter.reference(DW_AT_call_parameter)
                ?? parameter.reference(DW_AT_abstract_origin)
            {
                values.parameters[callee] = value
            }
        }
        return (target, values)
    }

    /// The register a call-site parameter's DW_AT_location names: DW_OP_regN or DW_OP_regx
    /// alone; nil for anything else (a stack slot).
    private static func register(named location: ByteView) -> Int? {
        var cursor = DWARFCursor(location)
        var register: UInt64?
        switch cursor.u8() {
        case let op? where op >= DW_OP_reg0 && op <= DW_OP_reg31: register = UInt64(op - DW_OP_reg0)
        case DW_OP_regx?: register = cursor.uleb()
        default: return nil
        }
        guard let register, register <= 1024, cursor.offset == location.count else { return nil }
        return Int(register)
    }

    /// DWARFInfo.mayTailCallItself(entry:): a breadth-first walk of the tail calls made from
    /// `entry`, by address within this file.
    func mayTailCallItself(entry: UInt64) -> Bool {
        var queue = [entry]
        var seen: Set<UInt64> = [entry]
        var next = 0
        while next < queue.count {
            guard next < DWARFEntryValues.maximumTailCallSearch,
                let calls = tailCalls(ofFunctionAt: queue[next], limit: 64)
            else { return true }
            next += 1
            for call in calls {
                guard case .address(let target) = call.target else { continue }
                if target == entry { return true }
                if seen.insert(target).inserted { queue.append(target) }
            }
        }
        return false
    }
}

// DWARF 5 section 7.5 (names verbatim) and GCC's GNU extensions.
let DW_TAG_call_site_parameter: UInt64 = 0x49
let DW_TAG_GNU_call_site_parameter: UInt64 = 0x410a
let DW_AT_call_value: UInt64 = 0x7e
let DW_AT_call_parameter: UInt64 = 0x80
let DW_AT_call_data_value: UInt64 = 0x86
let DW_AT_GNU_call_site_value: UInt64 = 0x2111
let DW_AT_GNU_call_site_data_value: UInt64 = 0x2112
