// TailCalls: the frames of functions that left the stack by a tail call, put back between two
// physical frames the way gdb does it (its tail-call frames, call_site_find_chain).
//
// A function whose last act is a call ends in a jump: its frame is gone, and the unwinder goes
// from the callee C straight to the caller's caller P. P's pc is a return address; the DWARF
// call site at that return address names what P called: T. When T is C's function, nothing
// was elided. Otherwise T (and what T tail-called, and so on) jumped on to C: every chain of
// tail-call sites from T that ends in a tail call to C's function is followed, through the
// call-site entries of each function (DWARFInfo+CallSites). What all the chains agree on is
// put back, as gdb keeps it: all of it when there is one chain; from several, the sites they
// share at P's end and at C's end; nothing when they share none. Nothing is invented: no
// chain, a target that cannot be known (an indirect tail call anywhere on the way, a name no
// symbol table resolves), or a search that would go past its bounds give no frames at all.
//
// Functions are compared by entry address in their own image; a callee declared in one module
// and defined in another (`free`, called from the program, defined in libc) is found by name
// in the symbol table of the module holding C's frame, so aliases (free, __libc_free, cfree)
// compare equal. C's function is the DWARF subprogram holding its pc, or the ELF symbol
// covering it (a `.cold` part's symbol differs from its DWARF entry: either may match).
//
// Each elided function is one frame, at the tail call's return pc, file and line those of the
// jump (the address before the return pc, as for any return address), marked `tailCall`. Where
// the jump sits in inlined code, the frame is named as gdb names its tail-call frames: by the
// innermost function there (marked `inlined` too), without the functions it is inlined into
// (gdb's `bt` of every abort shows `__pthread_kill_internal`, inlined into `pthread_kill`, and
// not `pthread_kill`; so does crashport).
//
// Cost: nothing here runs for `symbolicate --obj`; the call sites of a unit are read only when
// a reported frame's return address falls in it, and kept with the image's DWARF.

import BoundedBytes
import ObjectFile
import Synchronization

/// One physical frame of a stack, placed in its image.
public struct TailCallEnd: Sendable {
    public var image: DebugImage
    /// The module's name, as frames carry it.
    public var module: String?
    /// The pc in the process, and the same address as an ELF virtual address of `image`.
    public var pc: UInt64
    public var virtualPC: UInt64
    /// Whether `pc` is a return address (every caller's, unless a signal interrupted it).
    public var isReturnAddress: Bool

    public init(image: DebugImage, module: String?, pc: UInt64, virtualPC: UInt64, isReturnAddress: Bool) {
        self.image = image
        self.module = module
        self.pc = pc
        self.virtualPC = virtualPC
        self.isReturnAddress = isReturnAddress
    }
}

/// A frame put back by TailCalls: its pc in the process and what symbolication says there.
public struct TailCallFrame: Sendable, Equatable {
    public var pc: UInt64
    public var frame: SymbolicatedFrame
}

public enum TailCalls {
    /// Bounds of one search (per pair of frames): tail calls followed in a row, functions
    /// visited, chains found, tail-call sites per function. Past any of them, no frames.
    static let maxDepth = 16
    static let maxFunctions = 512
    static let maxChains = 16
    static let maxTailCallsPerFunction = 64

    /// The frames elided between `callee` and its caller's caller `caller`, innermost first.
    public static func frames(callee: TailCallEnd, caller: TailCallEnd, demangle: Bool = true) -> [TailCallFrame] {
        var frames: [TailCallFrame] = []
        for step in chain(callee: callee, caller: caller) {
            let end = step.inCallee ? callee : caller
            let image = end.image
            var template = SymbolicatedFrame()
            template.module = end.module
            template.moduleOffset = step.site.pc &- image.elf.imageVirtualBase
            let symbols = Symbolizer.frames(
                in: image, virtualAddress: step.site.pc, isReturnAddress: step.site.isReturnPC, template: template,
                demangle: demangle)
            guard var symbol = symbols.first else { continue }
            if let line = step.site.line {
                symbol.line = line
                symbol.column = nil
                if let file = step.site.file { symbol.file = file }
            }
            symbol.tailCall = true
            frames.append(TailCallFrame(pc: step.site.pc &+ (end.pc &- end.virtualPC), frame: symbol))
        }
        return frames
    }

    /// One tail call of a chain: the site, in the callee's image or the caller's.
    struct Step: Equatable {
        var inCallee: Bool
        var site: CallSite

        static func == (a: Step, b: Step) -> Bool {
            a.inCallee == b.inCallee && a.site.pc == b.site.pc && a.site.isReturnPC == b.site.isReturnPC
        }
    }

    /// A function: its entry address in the callee's image or the caller's.
    struct Function: Hashable {
        var inCallee: Bool
        var entry: UInt64
    }

    /// The tail calls elided between `callee` and `caller`, innermost first (see the file's
    /// comment); empty when there are none or they cannot be known for sure.
    static func chain(callee: TailCallEnd, caller: TailCallEnd) -> [Step] {
        guard caller.isReturnAddress, let callerDWARF = caller.image.dwarf,
            let site = callerDWARF.callSite(returningTo: caller.virtualPC), site.isReturnPC, !site.isTailCall
        else { return [] }
        // Where both frames are in one image, every function counts as the callee's side.
        let callerInCallee = caller.image === callee.image
        let lookup = callee.virtualPC &- (callee.isReturnAddress ? 1 : 0)
        var calleeEntries: Set<UInt64> = []
        if let entry = callee.image.dwarf?.functionEntry(containing: lookup) { calleeEntries.insert(entry) }
        if callee.image.symbolsMatch, let symbol = callee.image.symbolSource.symbols.lookup(lookup) {
            calleeEntries.insert(symbol.address)
        }
        guard !calleeEntries.isEmpty else { return [] }

        func resolve(_ target: CallSite.Target, inCallee: Bool) -> Function? {
            switch target {
            case .address(let entry): return Function(inCallee: inCallee, entry: entry)
            case .name(let name):
                if let entry = callee.image.functionAddress(named: name) { return Function(inCallee: true, entry: entry) }
                let image = inCallee ? callee.image : caller.image
                if image !== callee.image, let entry = image.functionAddress(named: name) {
                    return Function(inCallee: false, entry: entry)
                }
                return nil
            case .unknown: return nil
            }
        }
        func isCallee(_ function: Function) -> Bool { function.inCallee && calleeEntries.contains(function.entry) }

        guard let first = resolve(site.target, inCallee: callerInCallee), !isCallee(first) else { return [] }
        var chains: [[Step]] = []
        var visited = 0
        var failed = false
        var path: [Step] = []
        var onPath: Set<Function> = [first]

        func explore(_ function: Function) {
            guard !failed else { return }
            visited += 1
            guard visited <= maxFunctions, path.count < maxDepth else {
                failed = true
                return
            }
            let image = function.inCallee ? callee.image : caller.image
            guard let dwarf = image.dwarf else { return }  // nothing known of its calls: a dead end
            guard let sites = dwarf.tailCalls(ofFunctionAt: function.entry, limit: maxTailCallsPerFunction) else {
                failed = true
                return
            }
            for site in sites {
                // A tail call that cannot be followed might be the one taken: then no chain is sure.
                guard let next = resolve(site.target, inCallee: function.inCallee) else {
                    failed = true
                    return
                }
                let step = Step(inCallee: function.inCallee, site: site)
                if isCallee(next) {
                    chains.append(path + [step])
                    if chains.count > maxChains { failed = true }
                } else if !onPath.contains(next) {
                    path.append(step)
                    onPath.insert(next)
                    explore(next)
                    onPath.remove(next)
                    path.removeLast()
                }
                if failed { return }
            }
        }
        explore(first)
        guard !failed, let some = chains.first else { return [] }

        // What every chain agrees on, from P's end (prefix) and from C's end (suffix).
        let shortest = chains.map(\.count).min() ?? 0
        var prefix = 0
        while prefix < shortest, chains.allSatisfy({ $0[prefix] == some[prefix] }) { prefix += 1 }
        var suffix = 0
        while prefix + suffix < shortest,
            chains.allSatisfy({ $0[$0.count - 1 - suffix] == some[some.count - 1 - suffix] })
        {
            suffix += 1
        }
        let agreed = Array(some[..<prefix]) + Array(some[(some.count - suffix)...])
        return agreed.reversed()
    }
}

extension Symbolizer {
    /// The frames elided by tail calls between the frame at `calleePC` and its caller's frame at
    /// `callerPC` (a return address), innermost first; see TailCalls.
    public func tailCallFrames(calleePC: UInt64, calleeIsReturnAddress: Bool, callerPC: UInt64) -> [TailCallFrame] {
        guard let callee = end(pc: calleePC, isReturnAddress: calleeIsReturnAddress),
            let caller = end(pc: callerPC, isReturnAddress: true)
        else { return [] }
        return TailCalls.frames(callee: callee, caller: caller)
    }

    private func end(pc: UInt64, isReturnAddress: Bool) -> TailCallEnd? {
        guard let module = module(containing: pc), let object = module.object else { return nil }
        return TailCallEnd(
            image: cache.image(for: object, locator: locator), module: module.name, pc: pc, virtualPC: pc &- module.loadBias,
            isReturnAddress: isReturnAddress)
    }
}

extension DebugImage {
    /// The entry of the function named `name` here (a call's callee declared elsewhere), from
    /// the symbol table symbolication uses, else the file's own: the one global (or weak)
    /// definition, else the one local; nil when there is none or the name is ambiguous.
    /// Answers are kept per image.
    func functionAddress(named name: String) -> UInt64? {
        if let known = functionAddresses.withLock({ $0[name] }) { return known }
        var files = [elf]
        if symbolsMatch && symbolSource !== elf { files.insert(symbolSource, at: 0) }
        var found: UInt64?
        for file in files {
            let all = file.functionAddresses(named: name)
            guard !all.isEmpty else { continue }
            let globals = Set(all.filter(\.global).map(\.address))
            let candidates = globals.isEmpty ? Set(all.map(\.address)) : globals
            if candidates.count == 1 { found = candidates.first }
            break
        }
        functionAddresses.withLock { cache in
            if cache.count >= 4096 { cache.removeAll() }
            cache[name] = .some(found)
        }
        return found
    }
}
