// PythonStackReader: every thread's Python frames, read from a CPython process's memory from
// outside it (a held process, a core), for CPython 3.11 and later.
//
// The walk is CPython's own traceback walk done remotely: `_PyRuntime` (a symbol of the python
// executable or of libpython) → its interpreters → each interpreter's thread states (`next`) →
// each thread's current frame (3.11/3.12 through `cframe`) → `previous`, innermost first. Each
// _PyInterpreterFrame names its code object, whose `co_name`, `co_qualname` and `co_filename`
// are str objects and whose `co_linetable` turns the frame's instruction into a line
// (PythonLineTable). Frames CPython's traceback code skips are skipped here too: the C stack's
// shim frames (3.12+) and frames that have not started their first instruction
// (_PyFrame_IsIncomplete). The offsets come from PythonLayout, or from the interpreter's DWARF
// through a caller's answers to a PythonStructureQuery.
//
// The memory is hostile: it belongs to the process's user, and a crashed interpreter's own
// structures may be half-written. So every list is walked with a visited set and a bound
// (Limits), every read goes through the MemoryReader and may come back short, every offset and
// length from memory goes through checked arithmetic, nothing is allocated by a size read from
// memory without a bound, and what could not be read becomes a thread's `problem` or a note, not
// a failure: the reader returns what it could.
//
// Not thread-safe per call (it keeps caches for one read); `read` itself may be called from any
// thread. Never in a signal handler: it allocates.

import BoundedBytes
import ObjectFile
import ReportModel

public enum PythonStackReader {
    /// How much the reader follows and keeps: what hostile memory can cost at most.
    public struct Limits: Sendable, Equatable {
        /// Interpreters (the main one and subinterpreters).
        public var interpreters = 64
        /// Thread states, over all interpreters.
        public var threads = 1024
        /// Frames of one thread (shim frames included); the outer ones past it are not read.
        public var framesPerThread = 4096
        /// Frames over all threads.
        public var totalFrames = 65536
        /// Bytes of one str's characters (a longer name is cut, marked with "…").
        public var stringBytes = 1024
        /// Bytes of one code object's line table.
        public var lineTableBytes = 64 * 1024
        /// Distinct code objects decoded (names, file, line table); frames of others get a
        /// placeholder.
        public var codeObjects = 4096
        /// Bytes read from the target in all.
        public var totalBytes = 32 * 1024 * 1024
        /// Time spent reading, at most: the reader runs while the crashed process is held, and a
        /// hostile interpreter state that stays inside every count above (1024 thread states
        /// sharing one chain of 4096 frames) took 460 ms of a debug build's reading. A real
        /// interpreter's frames take a few milliseconds.
        public var nanoseconds: UInt64 = 100_000_000

        public init() {}
    }

    /// What a name reads as when its object could not be read as a str.
    public static let unreadable = "<unreadable>"

    /// Every thread's Python frames; nil when no module of the process defines `_PyRuntime`
    /// (not a CPython process). The version is read from `Py_Version` (3.11+), not from a file
    /// name. `memory` is the process's memory as its user may read it; `modules` as captured,
    /// with their object files (symbols are looked up in .symtab, then .dynsym).
    ///
    /// `dwarfLayout`, when given, answers a PythonStructureQuery from the debug information of
    /// the module that defines `_PyRuntime` (its DWARF or its debug file's), for an interpreter
    /// without `_Py_DebugOffsets`: see
    /// `read(memory:runtimeAddress:versionHex:limits:dwarfLayout:dwarfOrder:)`.
    public static func read(
        memory: some MemoryReader, modules: [LoadedModule], limits: Limits = Limits(),
        dwarfLayout: ((LoadedModule, PythonStructureQuery) -> PythonStructureAnswers?)? = nil,
        dwarfOrder: DWARFOrder = .whenBuiltInFails
    ) -> PythonStacks? {
        // The python executable and libpython first (where `_PyRuntime` is, unless a program
        // links CPython in), so that a CPython process costs a look at one or two symbol tables.
        let likely = modules.filter { mayBeInterpreter($0.name) }
        for module in likely + modules.filter({ !likely.contains($0) }) {
            guard let object = module.object, let runtime = object.dataSymbolAddress(named: "_PyRuntime") else { continue }
            let version = object.dataSymbolAddress(named: "Py_Version").flatMap { address in
                try? memory.fetch(UInt32.self, from: address &+ module.loadBias)
            }
            return read(
                memory: memory, runtimeAddress: runtime &+ module.loadBias, versionHex: version, limits: limits,
                dwarfLayout: dwarfLayout.map { answer in { answer(module, $0) } }, dwarfOrder: dwarfOrder)
        }
        return nil
    }

    /// Whether a module's file name may be a CPython interpreter's: `python3.11`, `python3`,
    /// `python`, `libpython3.11.so.1.0`.
    public static func mayBeInterpreter(_ name: String) -> Bool {
        name.hasPrefix("python") || name.hasPrefix("libpython")
    }

    /// Every thread's Python frames, given where `_PyRuntime` is and the interpreter's
    /// PY_VERSION_HEX (`Py_Version`; nil when the process has none, before 3.11). For callers
    /// that found the runtime themselves, and for synthetic memory.
    ///
    /// The layout comes from `_Py_DebugOffsets` (3.13+); else (3.11, 3.12) from the built-in
    /// offsets of the default build and from `dwarfLayout`'s answers to the version's
    /// PythonStructureQuery (an interpreter built another way, a debug build), in `dwarfOrder`.
    /// Offsets not read from the interpreter itself are checked against memory, and the next
    /// route is tried when they do not fit; `dwarfLayout` is not called when the built-in
    /// offsets come first and fit.
    public static func read(
        memory: some MemoryReader, runtimeAddress: UInt64, versionHex: UInt32?, limits: Limits = Limits(),
        dwarfLayout: ((PythonStructureQuery) -> PythonStructureAnswers?)? = nil, dwarfOrder: DWARFOrder = .whenBuiltInFails
    ) -> PythonStacks {
        var notes: [String] = []
        let debugOffsets = PythonLayout.fromDebugOffsets(memory: memory, runtime: runtimeAddress)
        let hex: UInt32
        if let versionHex {
            hex = versionHex
        } else if case .success = debugOffsets, let fromTable = try? memory.fetch(UInt32.self, from: runtimeAddress &+ 8) {
            hex = fromTable
        } else {
            return PythonStacks(
                version: "unknown", layout: "none", threads: [],
                notes: ["no Py_Version: CPython before 3.11, whose frames crashport does not read"])
        }
        let version = versionString(hex)
        let minor = (hex >> 16) & 0xFF
        guard hex >> 24 == 3, minor >= 11 else {
            return PythonStacks(
                version: version, layout: "none", threads: [],
                notes: ["CPython \(version): crashport reads the frames of 3.11 and later"])
        }
        if case .success(let found) = debugOffsets { return walk(found, memory, runtimeAddress, version, limits, notes).stacks }
        if case .failure(let refusal) = debugOffsets, minor >= 13 {
            return PythonStacks(version: version, layout: "none", threads: [], notes: [refusal.description])
        }
        let builtIn = PythonLayout.builtIn(minor: minor)
        // Each candidate in turn until one fits the memory; the last one's result stands.
        var candidates: [() -> PythonLayout?] = [{ builtIn }]
        if let dwarfLayout, minor < 13 {
            let ask: () -> PythonLayout? = {
                guard let query = PythonStructureQuery.forMinor(minor), let answers = dwarfLayout(query) else { return nil }
                switch query.layout(from: answers) {
                case .success(let layout): return layout
                case .failure(let missing):
                    notes.append("DWARF of \(answers.source): no \(missing.member)")
                    return nil
                }
            }
            candidates.insert(ask, at: dwarfOrder == .beforeBuiltIn ? 0 : 1)
        }
        var result: PythonStacks?
        for candidate in candidates {
            guard let layout = candidate() else {
                // A route that gave no layout says why in `notes`.
                result?.notes = notes
                continue
            }
            let (stacks, fits) = walk(layout, memory, runtimeAddress, version, limits, notes)
            result = stacks
            if fits { break }
            notes = stacks.notes
        }
        return result
            ?? PythonStacks(version: version, layout: "none", threads: [], notes: notes + ["no offsets for CPython \(version)"])
    }

    /// The threads `layout` reads, and whether it fits the memory: it found a thread, and the
    /// first thread state pointed back at its interpreter (a running interpreter has at least
    /// the thread that started it).
    private static func walk(
        _ layout: PythonLayout, _ memory: some MemoryReader, _ runtime: UInt64, _ version: String, _ limits: Limits,
        _ notes: [String]
    ) -> (stacks: PythonStacks, fits: Bool) {
        var walk = Walk(memory: memory, layout: layout, limits: limits)
        let threads = walk.threads(runtime: runtime)
        let stacks = PythonStacks(version: version, layout: layout.route, threads: threads, notes: notes + walk.notes)
        return (stacks, !walk.layoutRefused && !threads.isEmpty)
    }

    /// When the layout from an interpreter's DWARF is tried (interpreters without
    /// `_Py_DebugOffsets`).
    public enum DWARFOrder: Sendable, Equatable {
        /// Before the built-in offsets: the order, for a caller whose DWARF is cheap.
        case beforeBuiltIn
        /// Only when there are no built-in offsets for the version, or they do not fit the
        /// memory: the default builds never pay for reading DWARF.
        case whenBuiltInFails
    }

    /// "3.11.7", "3.13.0rc2" from a PY_VERSION_HEX.
    static func versionString(_ hex: UInt32) -> String {
        var text = "\(hex >> 24).\((hex >> 16) & 0xFF).\((hex >> 8) & 0xFF)"
        let serial = hex & 0x0F
        switch (hex >> 4) & 0x0F {
        case 0xA: text += "a\(serial)"
        case 0xB: text += "b\(serial)"
        case 0xC: text += "rc\(serial)"
        default: break
        }
        return text
    }
}

/// One read of one process: the layout, the limits, what has been spent, and caches of what was
/// decoded (code objects and type names are shared by many frames).
struct Walk<Memory: MemoryReader> {
    let memory: Memory
    let layout: PythonLayout
    let limits: PythonStackReader.Limits
    var notes: [String] = []
    private var bytesRead = 0
    private var budgetNoted = false
    /// CLOCK_MONOTONIC past which nothing more is read (`limits.nanoseconds`).
    private let deadline: UInt64
    private var framesRead = 0
    private var typeNames: [UInt64: String?] = [:]
    private var codes: [UInt64: Code] = [:]
    /// Whether the layout was found not to fit this interpreter (its first thread state does
    /// not point back at its interpreter): another layout may be tried.
    private(set) var layoutRefused = false

    init(memory: Memory, layout: PythonLayout, limits: PythonStackReader.Limits) {
        self.memory = memory
        self.layout = layout
        self.limits = limits
        deadline = monotonicNanoseconds() &+ limits.nanoseconds
    }

    /// A code object as decoded, with what went wrong.
    struct Code {
        var function: String
        var qualifiedName: String?
        var file: String
        var firstLine: Int
        var lineTable: [UInt8]?
        /// Where `co_code_adaptive` starts in the target.
        var instructions: UInt64
        var firstTraceable: Int?
        var problem: String?
    }

    // MARK: Reading through the budget

    /// Up to `count` bytes at `address` (fewer when memory ends or the budget does).
    private mutating func bytes(at address: UInt64, count: Int) -> [UInt8] {
        let allowed = min(count, limits.totalBytes - bytesRead)
        let late = monotonicNanoseconds() > deadline
        guard allowed > 0, !late else {
            if !budgetNoted {
                notes.append(
                    late
                        ? "stopped after \(limits.nanoseconds / 1_000_000) ms of reading the process"
                        : "stopped after reading \(limits.totalBytes) bytes of the process")
                budgetNoted = true
            }
            return []
        }
        let read = memory.bytes(at: address, count: allowed)
        bytesRead += read.count
        return read
    }

    /// Exactly `span` bytes at `address`, or nil.
    private mutating func block(at address: UInt64, span: UInt64) -> Block? {
        guard address != 0, let count = Int(checkedCount: span, limit: 1 << 21) else { return nil }
        let read = bytes(at: address, count: count)
        return read.count == count ? Block(bytes: read) : nil
    }

    private mutating func pointer(at address: UInt64) -> UInt64? {
        block(at: address, span: 8)?.u64(0)
    }

    // MARK: Threads

    mutating func threads(runtime: UInt64) -> [PythonThread] {
        guard let firstInterpreter = pointer(at: runtime &+ layout.interpretersHead), firstInterpreter != 0 else {
            notes.append("no interpreter: _PyRuntime.interpreters.head is unreadable or NULL")
            return []
        }
        let holder = gilHolder(runtime: runtime, interpreter: firstInterpreter)
        var threads: [PythonThread] = []
        var interpreters = Set<UInt64>()
        var states = Set<UInt64>()
        var interpreter = firstInterpreter
        while interpreter != 0 {
            guard interpreters.insert(interpreter).inserted else {
                notes.append("the interpreter list loops")
                break
            }
            guard interpreters.count <= limits.interpreters else {
                notes.append("more than \(limits.interpreters) interpreters: the rest not read")
                break
            }
            guard let interpreterState = block(at: interpreter, span: max(layout.threadsHead, layout.interpreterNext) + 8),
                let head = interpreterState.u64(layout.threadsHead), let next = interpreterState.u64(layout.interpreterNext)
            else {
                notes.append("interpreter at \(hex(interpreter)) unreadable")
                break
            }
            var state = head
            while state != 0 {
                guard states.insert(state).inserted else {
                    notes.append("the thread list of interpreter \(hex(interpreter)) loops")
                    break
                }
                guard states.count <= limits.threads else {
                    notes.append("more than \(limits.threads) threads: the rest not read")
                    return threads
                }
                guard let thread = block(at: state, span: layout.threadSpan),
                    let back = thread.u64(layout.threadInterpreter), let following = thread.u64(layout.threadNext)
                else {
                    notes.append("thread state at \(hex(state)) unreadable")
                    break
                }
                guard back == interpreter else {
                    // The check that keeps built-in offsets honest: a thread state read by the
                    // wrong offsets does not point back at its interpreter.
                    if threads.isEmpty && interpreter == firstInterpreter {
                        notes.append(
                            "\(layout.route) do not fit this interpreter: its first thread state's interp is not the interpreter")
                        layoutRefused = true
                        return []
                    }
                    notes.append("thread state at \(hex(state)) belongs to no interpreter read: the rest not read")
                    break
                }
                threads.append(read(thread: thread, at: state, holdsGIL: holder == state))
                state = following
            }
            interpreter = next
        }
        // A running interpreter has at least the thread that started it.
        if threads.isEmpty && notes.isEmpty { notes.append("no thread state in the interpreter's list") }
        return threads
    }

    /// The thread state holding the GIL, when the GIL is locked and the layout says where.
    private mutating func gilHolder(runtime: UInt64, interpreter: UInt64) -> UInt64? {
        let base: UInt64
        let holder: UInt64
        let locked: UInt64
        switch layout.gil {
        case nil: return nil
        case .runtime(let h, let l): (base, holder, locked) = (runtime, h, l)
        case .interpreter(let h, let l): (base, holder, locked) = (interpreter, h, l)
        case .interpreterPointer(let p, let h, let l):
            guard let gil = pointer(at: interpreter &+ p), gil != 0 else { return nil }
            (base, holder, locked) = (gil, h, l)
        }
        guard let isLocked = block(at: base &+ locked, span: 4)?.u32(0), isLocked != 0 else { return nil }
        return pointer(at: base &+ holder)
    }

    private mutating func read(thread: Block, at state: UInt64, holdsGIL: Bool) -> PythonThread {
        let native = thread.u64(layout.nativeThreadID).flatMap { Int32(exactly: $0) }.flatMap { $0 > 0 ? $0 : nil }
        var result = PythonThread(threadID: native.map { ThreadID(rawValue: $0) }, frames: [], holdsGIL: holdsGIL)
        var first: UInt64?
        if let cframe = layout.cframe {
            if let pointer = thread.u64(cframe), pointer != 0 {
                first = self.pointer(at: pointer &+ layout.currentFrame)
                if first == nil { result.problem = "its cframe at \(hex(pointer)) is unreadable" }
            } else {
                first = 0
            }
        } else {
            first = thread.u64(layout.currentFrame)
        }
        guard let first, first != 0 else { return result }
        var problems: [String] = []
        result.frames = frames(from: first, problems: &problems)
        if !problems.isEmpty {
            // The first few say what happened; the rest are the same story.
            result.problem = problems.prefix(4).joined(separator: "; ") + (problems.count > 4 ? "; …" : "")
        }
        return result
    }

    // MARK: Frames

    private mutating func frames(from first: UInt64, problems: inout [String]) -> [PythonFrame] {
        var frames: [PythonFrame] = []
        var visited = Set<UInt64>()
        var address = first
        // Whether the last frame kept is the one just before `address` in the chain (not a
        // skipped incomplete frame): a shim then makes it an entry frame.
        var keptLast = false
        while address != 0 {
            guard visited.count < limits.framesPerThread else {
                problems.append("more than \(limits.framesPerThread) frames: the outer ones not read")
                break
            }
            guard framesRead < limits.totalFrames else {
                problems.append("the reader's frame limit (\(limits.totalFrames), all threads) reached")
                break
            }
            guard visited.insert(address).inserted else {
                problems.append("the frame chain loops at \(hex(address))")
                break
            }
            framesRead += 1
            guard let frame = block(at: address, span: layout.frameSpan), let previous = frame.u64(layout.framePrevious),
                let owner = frame.u8(layout.frameOwner), let rawCode = frame.u64(layout.frameCode),
                let instruction = frame.u64(layout.frameInstruction)
            else {
                problems.append("frame at \(hex(address)) unreadable")
                break
            }
            if let shim = layout.firstShimOwner, owner >= shim {
                if keptLast, !frames.isEmpty { frames[frames.count - 1].entry = true }
                keptLast = false
                address = previous
                continue
            }
            let codeAddress = layout.codeIsTagged ? rawCode & ~3 : rawCode
            let code = self.code(at: codeAddress)
            // _PyFrame_IsIncomplete: a frame (not a generator's) whose first traceable
            // instruction has not started is being set up, and tracebacks skip it.
            if owner != 1, let firstTraceable = code.firstTraceable,
                let start = code.instructions.checkedAdding(UInt64(firstTraceable) * 2), instruction < start
            {
                keptLast = false
                address = previous
                continue
            }
            if let problem = code.problem { problems.append(problem) }
            var line: Int?
            if let table = code.lineTable {
                if let offset = instruction.checkedSubtracting(code.instructions),
                    let byteOffset = Int(checkedCount: offset, limit: Int(Int32.max))
                {
                    switch PythonLineTable.line(atByteOffset: byteOffset, firstLine: code.firstLine, table: table) {
                    case .line(let found): line = found
                    case .noLocation: break
                    case .notCovered: problems.append("\(code.function): its line table ends before the instruction")
                    case .malformed: problems.append("\(code.function): its line table is malformed")
                    }
                } else {
                    problems.append("\(code.function): the instruction is not in its code")
                }
            }
            let entry = layout.frameIsEntry.flatMap { frame.u8($0) }.map { $0 != 0 } ?? false
            frames.append(
                PythonFrame(function: code.function, qualifiedName: code.qualifiedName, file: code.file, line: line, entry: entry)
            )
            keptLast = true
            address = previous
        }
        return frames
    }

    // MARK: Objects

    private mutating func code(at address: UInt64) -> Code {
        if let cached = codes[address] { return cached }
        let decoded = decodeCode(at: address)
        if codes.count < limits.codeObjects { codes[address] = decoded }
        return decoded
    }

    private mutating func decodeCode(at address: UInt64) -> Code {
        var code = Code(
            function: PythonStackReader.unreadable, file: PythonStackReader.unreadable, firstLine: 0,
            instructions: address &+ layout.codeAdaptive)
        guard codes.count < limits.codeObjects else {
            code.problem = "more than \(limits.codeObjects) code objects: not decoded"
            return code
        }
        guard let block = block(at: address, span: layout.codeSpan) else {
            code.problem = "code object at \(hex(address)) unreadable"
            return code
        }
        guard let type = block.u64(layout.objectType), typeName(type) == "code" else {
            code.problem = "the object at \(hex(address)) is not a code object"
            return code
        }
        var problems: [String] = []
        code.function = name(of: block, at: layout.codeName, "co_name", &problems) ?? PythonStackReader.unreadable
        code.qualifiedName = name(of: block, at: layout.codeQualname, "co_qualname", &problems)
        code.file = name(of: block, at: layout.codeFilename, "co_filename", &problems) ?? PythonStackReader.unreadable
        code.firstLine = block.u32(layout.codeFirstLine).map { Int(Int32(bitPattern: $0)) } ?? 0
        code.firstTraceable = layout.codeFirstTraceable.flatMap { block.u32($0) }.flatMap {
            Int(exactly: Int32(bitPattern: $0)).flatMap { $0 >= 0 ? $0 : nil }
        }
        if let table = block.u64(layout.codeLinetable) {
            switch bytesObject(at: table) {
            case .success(let bytes): code.lineTable = bytes
            case .failure(let why): problems.append("co_linetable \(why.description)")
            }
        }
        if !problems.isEmpty { code.problem = "\(code.function): " + problems.joined(separator: ", ") }
        return code
    }

    /// The str a code object's field points to, or nil and why.
    private mutating func name(of code: Block, at offset: UInt64, _ field: String, _ problems: inout [String]) -> String? {
        guard let object = code.u64(offset) else { return nil }
        switch string(at: object) {
        case .success(let text): return text
        case .failure(let why):
            problems.append("\(field) \(why.description)")
            return nil
        }
    }

    enum ObjectFailure: Error {
        case unreadable(UInt64)
        case wrongType(String?)
        case notText

        var description: String {
            switch self {
            case .unreadable(let address): return "unreadable at \(hex(address))"
            case .wrongType(let name?): return "is a '\(name.prefix(40))', not a str"
            case .wrongType(nil): return "has no readable type"
            case .notText: return "is not text"
            }
        }
    }

    /// The name of the type at `address` (its `tp_name`), cached: one type serves many objects.
    private mutating func typeName(_ address: UInt64) -> String? {
        if let cached = typeNames[address] { return cached }
        var name: String?
        if let pointer = pointer(at: address &+ layout.typeName) {
            let text = bytes(at: pointer, count: 64)
            if let end = text.firstIndex(of: 0) { name = String(decoding: text[..<end], as: UTF8.self) }
        }
        if typeNames.count < 256 { typeNames[address] = name }
        return name
    }

    /// A compact str's characters (every name and file name of a code object is one), at most
    /// `stringBytes` of them; a longer one ends in "…".
    mutating func string(at address: UInt64) -> Result<String, ObjectFailure> {
        guard let header = block(at: address, span: max(layout.unicodeState, layout.unicodeLength, layout.objectType) + 8)
        else { return .failure(.unreadable(address)) }
        guard let type = header.u64(layout.objectType), let length = header.u64(layout.unicodeLength),
            let state = header.u32(layout.unicodeState)
        else { return .failure(.unreadable(address)) }
        let name = typeName(type)
        guard name == "str" else { return .failure(.wrongType(name)) }
        // state: interned:2, kind:3, compact:1, ascii:1 (the same bits 3.11 to 3.14).
        let kind = Int((state >> 2) & 0x7)
        let compact = (state >> 5) & 1 == 1
        let ascii = (state >> 6) & 1 == 1
        guard compact, kind == 1 || kind == 2 || kind == 4, !(ascii && kind != 1) else { return .failure(.notText) }
        let data = address &+ (ascii ? layout.asciiHeader : layout.compactHeader)
        let wanted = min(length, UInt64(max(0, limits.stringBytes) / kind))
        let count = Int(wanted) * kind  // both bounded just above
        let raw = bytes(at: data, count: count)
        guard raw.count == count else { return .failure(.unreadable(data)) }
        var text = String.UnicodeScalarView()
        switch kind {
        case 1:
            // ASCII or latin-1: each byte is its code point.
            for byte in raw { text.append(Unicode.Scalar(byte)) }
        case 2:
            for index in stride(from: 0, to: raw.count, by: 2) {
                let unit = UInt16(raw[index]) | UInt16(raw[index + 1]) << 8
                text.append(Unicode.Scalar(unit) ?? "\u{FFFD}")  // a lone surrogate
            }
        default:
            for index in stride(from: 0, to: raw.count, by: 4) {
                let value = (0..<4).reduce(UInt32(0)) { $0 | UInt32(raw[index + $1]) << (8 * $1) }
                text.append(Unicode.Scalar(value) ?? "\u{FFFD}")
            }
        }
        var result = String(text)
        if wanted < length { result += "…" }
        return .success(result)
    }

    /// A bytes object's contents, at most `lineTableBytes` of them (the line table is the only
    /// bytes object read).
    mutating func bytesObject(at address: UInt64) -> Result<[UInt8], ObjectFailure> {
        guard let header = block(at: address, span: max(layout.bytesSize, layout.objectType) + 8),
            let type = header.u64(layout.objectType), let size = header.u64(layout.bytesSize)
        else { return .failure(.unreadable(address)) }
        let name = typeName(type)
        guard name == "bytes" else { return .failure(.wrongType(name)) }
        // ob_size is a Py_ssize_t: a negative one is a lie, read as a huge one and cut.
        let count = Int(min(size, UInt64(max(0, limits.lineTableBytes))))
        let data = address &+ layout.bytesData
        let contents = bytes(at: data, count: count)
        guard contents.count == count else { return .failure(.unreadable(data)) }
        return .success(contents)
    }
}

/// Bytes read in one go from the target, its fields read bounds-checked.
struct Block {
    let bytes: [UInt8]

    func u8(_ offset: UInt64) -> UInt8? {
        guard offset < UInt64(bytes.count) else { return nil }
        return bytes[Int(offset)]
    }

    func u32(_ offset: UInt64) -> UInt32? { load(offset, UInt32.self) }
    func u64(_ offset: UInt64) -> UInt64? { load(offset, UInt64.self) }

    private func load<T: FixedWidthInteger>(_ offset: UInt64, _ type: T.Type) -> T? {
        let size = UInt64(MemoryLayout<T>.size)
        guard let end = offset.checkedAdding(size), end <= UInt64(bytes.count) else { return nil }
        return bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: Int(offset), as: T.self)) }
    }
}

private func hex(_ address: UInt64) -> String { "0x" + String(address, radix: 16) }
