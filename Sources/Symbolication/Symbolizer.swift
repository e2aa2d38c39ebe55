// Symbolizer: from an address in a process's address space to module, function and offset.
//
// Works on loaded modules (path, base, object file), never on a live process, so the same code
// serves the watcher right after capture and `crashport symbolicate` offline.

import BoundedBytes
import ObjectFile
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

public struct SymbolicatedFrame: Sendable, Equatable {
    public var module: String?
    public var moduleOffset: UInt64?
    public var function: String?
    public var mangled: String?
    /// The raw name of the ELF symbol that ran, on the outermost frame of a pc, when it names
    /// something other than `function`: a GCC clone or split part (`worker_loop.cold`,
    /// `_ZN3foo3barEv.constprop.0`) or another alias of the code (`abort` where DWARF says
    /// `__GI_abort`). `functionOffset` counts from its start.
    public var symbol: String?
    public var functionOffset: UInt64?
    public var file: String?
    public var line: Int?
    public var column: Int?
    public var inlined = false
    /// A function that left the stack by a tail call, put back from call-site information.
    public var tailCall = false

    public init() {}
}

/// What symbolication knows about one ELF image, found once per build-id (or path) and kept:
/// the symbol table to use (the file's .symtab, else its separate debug file's, else its
/// MiniDebugInfo, else .dynsym), and the DWARF (from the file itself or its debug file).
public final class DebugImage: Sendable {
    public let elf: ELFFile
    public let debugFile: ELFFile?
    public let symbolSource: ELFFile
    public let dwarf: DWARFInfo?
    /// Where symbols and lines came from, for reports ("debug file /usr/lib/debug/…").
    public let provenance: String
    /// Debug data of this image that was not decompressed because it would inflate past its cap
    /// (SectionCompression): reports and symbolicate say so, "module X: debug data refused: …".
    public let refusals: [DebugDataRefusal]
    /// Function entries by name, for calls to functions declared elsewhere (TailCalls).
    let functionAddresses = Mutex<[String: UInt64?]>([:])

    init(elf: ELFFile, locator: DebugFileLocator) {
        self.elf = elf
        let hasSymtab = elf.section(named: ".symtab") != nil
        let hasDWARF = elf.section(named: ".debug_info") != nil
        let debugFile = (hasSymtab && hasDWARF) ? nil : locator.debugFile(for: elf)
        self.debugFile = debugFile
        var refusals: [DebugDataRefusal] = []
        if hasSymtab {
            symbolSource = elf
        } else if let debugFile, debugFile.section(named: ".symtab") != nil {
            symbolSource = debugFile
        } else {
            switch locator.loadMiniDebugInfo(for: elf) {
            case .success(let mini)?: symbolSource = mini
            case .failure(let refusal)?:
                refusals.append(refusal)
                symbolSource = elf
            case nil: symbolSource = elf
            }
        }
        // Compressed DWARF sections past their cap are not inflated (DWARFSections gets nil);
        // their headers say so before anything is allocated.
        if let dwarfFile = hasDWARF ? elf : debugFile { refusals += SectionCompression.sectionRefusals(in: dwarfFile) }
        self.refusals = refusals
        // From a separate debug file, the outermost frame is still named from the binary's own
        // symbols, as llvm-symbolizer does (setbuffer, not the debug file's _IO_setbuffer).
        dwarf = hasDWARF ? DWARFInfo(elf: elf) : debugFile.flatMap { DWARFInfo(elf: $0, symbolFile: elf) }
        provenance = debugFile.map { "debug file \($0.path)" } ?? (hasDWARF ? "DWARF in the file" : "symbol table only")
    }

    /// Demangled names already asked for (nil: not a mangled name), so that 20,000 addresses in
    /// 5,000 functions demangle 5,000 names. Bounded: emptied when it reaches `demangledLimit`.
    private let demangledNames = Mutex<[String: String?]>([:])
    static let demangledLimit = 1 << 16

    /// `Demangler.demangle(name)`, remembered for this image.
    func demangled(_ name: String) -> String? {
        if let known = demangledNames.withLock({ $0[name] }) { return known }
        let result = Demangler.demangle(name)
        demangledNames.withLock { names in
            if names.count >= Self.demangledLimit { names.removeAll() }
            names[name] = .some(result)
        }
        return result
    }

    /// Whether a file of this image changed while it was read (ELFFile.torn): the binary, its
    /// debug file or the file its symbols come from.
    public var torn: Bool { elf.torn || debugFile?.torn == true || symbolSource.torn }

    /// Whether the symbol source agrees with the image's own layout (same build-id or none).
    var symbolsMatch: Bool {
        symbolSource === elf || symbolSource.buildID == nil || symbolSource.buildID == elf.buildID
    }
}

/// Debug images by build-id (root's files that no one else may write; any other file's by its
/// ELFFile), shared by every Symbolizer of this process: a long-running watcher parses each
/// library's tables once. An image one of whose files changed while it was read (DebugImage.torn)
/// is loaded again for the next file that asks and is whole itself. Loading is once per
/// image, also when several report threads want the same one at the same time (a crash storm of
/// one program): the others wait for it rather than inflate the same debug file beside it.
public final class DebugImageCache: Sendable {
    public static let shared = DebugImageCache()

    /// One image's place: empty until its first loader has loaded it, under its own lock so
    /// that loading one image does not hold up lookups of the others.
    final class Slot: Sendable {
        let image = Mutex<DebugImage?>(nil)
    }

    private let slots = Mutex<[String: Slot]>([:])

    public init() {}

    /// The build-id shares an image between reports (and, in a root sidecar, users) only for a
    /// file of root's that no one else may write: another file can claim any build-id (a
    /// user's library with libc's, and DWARF of its own making), so its image is its own, as is
    /// that of a file without a build-id (the image keeps its file, whose identity is then not
    /// reused while the slot lasts).
    static func key(for elf: ELFFile, locator: DebugFileLocator) -> String {
        let shared = elf.file.ownedWithoutOthersWriting(byRootOr: 0) ? elf.buildID?.hex : nil
        return (shared ?? "\(ObjectIdentifier(elf))") + "|" + locator.debugDirectories.joined(separator: ":")
    }

    /// The image if it was already loaded; never loads one, nor waits for a load under way.
    public func loadedImage(for elf: ELFFile, locator: DebugFileLocator) -> DebugImage? {
        let key = Self.key(for: elf, locator: locator)
        guard let slot = slots.withLock({ $0[key] }), let found = slot.image.withLockIfAvailable({ $0 }) ?? nil else {
            return nil
        }
        return found
    }

    /// The image of `elf`, loaded once (under its slot's lock, not the cache's: loading reads
    /// debug files).
    public func image(for elf: ELFFile, locator: DebugFileLocator) -> DebugImage {
        let key = Self.key(for: elf, locator: locator)
        let slot = slots.withLock { slots in
            if let slot = slots[key] { return slot }
            if slots.count > 256 { slots.removeAll() }
            let slot = Slot()
            slots[key] = slot
            return slot
        }
        return slot.image.withLock { image in
            // A torn image is kept for a file that is torn itself (its report says so; loading
            // again at each lookup would only parse the same zeros).
            if let image, !image.torn || elf.torn { return image }
            let loaded = DebugImage(elf: elf, locator: locator)
            image = loaded
            return loaded
        }
    }
}

public final class Symbolizer: Sendable {
    let modules: [LoadedModule]
    let locator: DebugFileLocator
    let cache: DebugImageCache

    public init(modules: [LoadedModule], locator: DebugFileLocator = DebugFileLocator(), cache: DebugImageCache = .shared) {
        self.modules = modules.sorted { $0.base < $1.base }
        self.locator = locator
        self.cache = cache
    }

    /// The refusals of the debug data of this symbolizer's images loaded so far (after
    /// symbolicating; nothing is loaded to answer), named by the module's own path rather than
    /// the file it was opened through: "module X: debug data refused: …".
    public var refusals: [DebugDataRefusal] {
        var found: [DebugDataRefusal] = []
        for module in modules {
            guard let object = module.object, let loaded = cache.loadedImage(for: object, locator: locator) else { continue }
            for var refusal in loaded.refusals {
                refusal.module = module.name
                if !found.contains(refusal) { found.append(refusal) }
            }
        }
        return found
    }

    /// The modules one of whose files changed while this symbolizer's images read them (the
    /// module's own, a debug file: ELFFile.torn), by name; nothing is loaded to answer.
    public var tornModules: [String] {
        modules.compactMap { module in
            guard let object = module.object else { return nil }
            let image = cache.loadedImage(for: object, locator: locator)
            return object.torn || image?.torn == true ? module.name : nil
        }
    }

    public func module(containing address: UInt64) -> LoadedModule? {
        guard let found = modules.lastIndex(atOrBelow: address, key: \.base) else { return nil }
        return modules[found].contains(address) ? modules[found] : nil
    }

    /// The frames at `pc`: the innermost inlined function first, when debug information
    /// knows of inlining, then the function that contains the address. For a return address
    /// (every frame but the first), lookups use pc − 1, the call instruction itself.
    public func symbolicate(pc: UInt64, isReturnAddress: Bool) -> [SymbolicatedFrame] {
        var frame = SymbolicatedFrame()
        guard let module = module(containing: pc) else { return [frame] }
        frame.module = module.name
        frame.moduleOffset = pc - module.base
        guard let object = module.object else { return [frame] }
        let debug = cache.image(for: object, locator: locator)
        let virtualPC = pc &- module.loadBias
        return Self.frames(in: debug, virtualAddress: virtualPC, isReturnAddress: isReturnAddress, template: frame)
    }

    /// Symbolicates an ELF virtual address of one image (the offline and addr2line paths).
    /// With `demangle` false, names stay as they are in the file (and cost nothing more);
    /// with `symbolFile`, a frame without DWARF takes its file from the preceding STT_FILE
    /// symbol, as llvm-symbolizer does (line 0).
    ///
    /// Reports name each frame as gdb does: from DWARF where it covers the address (a clone's
    /// or split part's source function: `worker_loop`, not `worker_loop.cold`), else from the
    /// symbol table without GCC's clone suffixes (CloneSuffixes); the symbol that ran is kept in
    /// `symbol`. `asLLVMSymbolizer` keeps llvm-symbolizer's answer instead: the outermost frame
    /// named by the symbol as it is, and for code of line 0 its row's file and no line (where
    /// reports show gdb's, the line before it); and it skips the function offset, which its
    /// output has no place for.
    public static func frames(
        in debug: DebugImage, virtualAddress: UInt64, isReturnAddress: Bool, template: SymbolicatedFrame = SymbolicatedFrame(),
        demangle: Bool = true, symbolFile: Bool = false, asLLVMSymbolizer: Bool = false
    ) -> [SymbolicatedFrame] {
        var frame = template
        let lookup = virtualAddress &- (isReturnAddress ? 1 : 0)
        let sources =
            debug.dwarf?.frames(at: lookup, skippingLineZero: !asLLVMSymbolizer, namingOutermostBySymbol: asLLVMSymbolizer) ?? []
        let symbols = debug.symbolsMatch ? debug.symbolSource.symbols : nil
        // The symbol that ran, for the outermost frame's `symbol`.
        var ran: String?
        // The symbol's name (a string made, maybe demangled) only when a frame will show it:
        // DWARF usually names every frame, and then only the symbol's start and name are needed.
        if sources.isEmpty || sources.contains(where: { $0.function == nil }) {
            if let symbol = symbols?.lookup(lookup) {
                let name = asLLVMSymbolizer ? symbol.name : (CloneSuffixes.stripped(symbol.name) ?? symbol.name)
                let demangled = demangle ? debug.demangled(name) : nil
                frame.function = demangled ?? name
                frame.mangled = demangled == nil ? nil : name
                if name != symbol.name { frame.symbol = symbol.name }
                frame.functionOffset = virtualAddress &- symbol.address
                if !asLLVMSymbolizer { ran = symbol.name }
                if sources.isEmpty {
                    if symbolFile, let file = symbol.symbolFile { frame.file = file }
                    return [frame]
                }
            }
        } else if !asLLVMSymbolizer, let symbol = symbols?.lookup(lookup) {
            frame.functionOffset = virtualAddress &- symbol.address
            ran = symbol.name
        }
        guard !sources.isEmpty else { return [frame] }
        var result: [SymbolicatedFrame] = []
        for (position, source) in sources.enumerated() {
            var entry = frame
            let outermost = position == sources.count - 1
            // As llvm-symbolizer, DWARFInfo names the outermost frame from the symbol covering
            // the address (f.cold, f.constprop.0, the right constructor alias); for reports, by
            // its DWARF name (f), and the symbol that ran is kept when it reads otherwise.
            if let name = source.function {
                let demangled = demangle ? debug.demangled(name) : nil
                entry.function = demangled ?? name
                entry.mangled = demangled == nil ? nil : name
                if !outermost { entry.functionOffset = nil }
            }
            if !outermost {
                entry.symbol = nil
            } else if let ran, source.function != nil {
                let readable = demangle ? (debug.demangled(ran) ?? ran) : ran
                entry.symbol = readable == entry.function ? nil : ran
            }
            entry.file = source.file
            entry.line = source.line.flatMap { $0 > 0 ? $0 : nil }
            entry.column = source.column.flatMap { $0 > 0 ? $0 : nil }
            entry.inlined = source.inlined
            result.append(entry)
        }
        return result
    }
}
