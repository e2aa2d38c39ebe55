// PythonImage: a fake CPython interpreter's memory, built in code, for PythonStackReader's
// synthetic and hostile tests and the `python` fuzz target's seeds: `_PyRuntime`, one
// interpreter, thread states, _PyInterpreterFrames, code objects, str and bytes objects and the
// three type objects the reader checks ("code", "str", "bytes"), in one region at `base`.
//
// Two layouts, with their offsets written here independently of the reader's: CPython 3.11's
// default x86_64 build (read off 3.11.7's DWARF), which the reader must know built in, and
// 3.13.0's, which the image describes itself with a `_Py_DebugOffsets` table at `_PyRuntime`
// (the values are the real 3.13.0 build's). Objects are placed one after another, 16-aligned;
// each builder returns the address it placed its object at, and `put` patches any field after,
// so a test can make a list loop or a pointer go astray.

import BoundedBytes

public struct PythonImage: Sendable {
    public enum Flavor: Sendable {
        /// 3.11.7: built-in offsets, `cframe`, `is_entry`, PyASCIIObject of 48 bytes.
        case python311
        /// 3.13.0: `_Py_DebugOffsets`, `current_frame` in the thread, shim frames (owner 3).
        case python313
    }

    /// The offsets of one layout.
    public struct Offsets: Sendable {
        public var interpretersHead: UInt64
        public var threadsHead: UInt64
        public var interpreterSize: Int
        public var gilHolder: UInt64, gilLocked: UInt64  // 3.11: in _PyRuntime; 3.13: in the interpreter
        public var threadNext: UInt64, threadInterp: UInt64, nativeThreadID: UInt64
        public var cframe: UInt64?, currentFrame: UInt64
        public var frameCode: UInt64, framePrevious: UInt64, frameInstruction: UInt64, frameOwner: UInt64
        public var frameIsEntry: UInt64?
        public var codeFilename: UInt64, codeName: UInt64, codeQualname: UInt64, codeLinetable: UInt64
        public var codeFirstLine: UInt64, codeAdaptive: UInt64, codeFirstTraceable: UInt64?
        public var asciiHeader: UInt64, compactHeader: UInt64

        static let python311 = Offsets(
            interpretersHead: 40, threadsHead: 16, interpreterSize: 512, gilHolder: 368, gilLocked: 376,
            threadNext: 8, threadInterp: 16, nativeThreadID: 160, cframe: 56, currentFrame: 8,
            frameCode: 32, framePrevious: 48, frameInstruction: 56, frameOwner: 69, frameIsEntry: 68,
            codeFilename: 112, codeName: 120, codeQualname: 128, codeLinetable: 136, codeFirstLine: 72,
            codeAdaptive: 184, codeFirstTraceable: 168, asciiHeader: 48, compactHeader: 72)
        static let python313 = Offsets(
            interpretersHead: 632, threadsHead: 7344, interpreterSize: 7776, gilHolder: 7760, gilLocked: 7768,
            threadNext: 8, threadInterp: 16, nativeThreadID: 160, cframe: nil, currentFrame: 72,
            frameCode: 0, framePrevious: 8, frameInstruction: 56, frameOwner: 70, frameIsEntry: nil,
            codeFilename: 112, codeName: 120, codeQualname: 128, codeLinetable: 136, codeFirstLine: 68,
            codeAdaptive: 200, codeFirstTraceable: nil, asciiHeader: 40, compactHeader: 56)
    }

    /// Where the image's memory starts (the fuzz target's `pythonBase`), and `_PyRuntime`.
    public static let base: UInt64 = 0x10000

    public let flavor: Flavor
    public let offsets: Offsets
    public private(set) var bytes: [UInt8] = []
    public let versionHex: UInt32
    public var runtime: UInt64 { Self.base }
    public private(set) var interpreter: UInt64 = 0
    public private(set) var strType: UInt64 = 0
    public private(set) var bytesType: UInt64 = 0
    public private(set) var codeType: UInt64 = 0
    /// A type named "int": what a name that is not a str points to.
    public private(set) var intType: UInt64 = 0

    public init(_ flavor: Flavor) {
        self.flavor = flavor
        switch flavor {
        case .python311:
            offsets = .python311
            versionHex = 0x030B_07F0
            bytes = [UInt8](repeating: 0, count: 1024)  // _PyRuntime (its first 1 KiB)
        case .python313:
            offsets = .python313
            versionHex = 0x030D_00F0
            bytes = [UInt8](repeating: 0, count: 1024)
            writeDebugOffsets()
        }
        interpreter = allocate(offsets.interpreterSize)
        put(interpreter, at: runtime + offsets.interpretersHead)
        strType = type(named: "str")
        bytesType = type(named: "bytes")
        codeType = type(named: "code")
        intType = type(named: "int")
    }

    /// The bytes the fuzz target takes: the version selector, then the memory.
    public var fuzzInput: [UInt8] { [flavor == .python311 ? 0 : 2] + bytes }

    public var memory: RegionMemory { RegionMemory(regions: [MemoryRegion(start: Self.base, bytes: bytes)]) }

    // MARK: Placing and patching

    /// `size` zero bytes, 16-aligned; their address.
    public mutating func allocate(_ size: Int) -> UInt64 {
        bytes.align(to: 16)
        let address = Self.base + UInt64(bytes.count)
        bytes.append(zeros: size)
        return address
    }

    public mutating func put(_ value: UInt64, at address: UInt64, size: Int = 8) {
        bytes.put(value, at: Int(address - Self.base), size: size)
    }

    public func u64(at address: UInt64) -> UInt64 { bytes.u64(at: Int(address - Self.base)) }

    // MARK: Objects

    private mutating func type(named name: String) -> UInt64 {
        let type = allocate(64)
        let text = allocate(name.utf8.count + 1)
        bytes.replaceSubrange(Int(text - Self.base)..<Int(text - Self.base) + name.utf8.count, with: Array(name.utf8))
        put(text, at: type + 24)  // tp_name
        return type
    }

    /// A compact str of `kind` 1 (ASCII when every scalar is, else latin-1), 2 or 4 bytes per
    /// character; `type` replaces its type (a name that is not a str).
    public mutating func str(_ text: String, kind: Int = 1, type: UInt64? = nil) -> UInt64 {
        let scalars = text.unicodeScalars.map(\.value)
        let ascii = kind == 1 && scalars.allSatisfy { $0 < 0x80 }
        let header = ascii ? offsets.asciiHeader : offsets.compactHeader
        let object = allocate(Int(header) + scalars.count * kind + kind)
        put(type ?? strType, at: object + 8)
        put(UInt64(scalars.count), at: object + 16)
        let state: UInt64 = UInt64(kind) << 2 | 1 << 5 | (ascii ? 1 << 6 : 0)
        put(state, at: object + 32, size: 4)
        for (index, scalar) in scalars.enumerated() {
            put(UInt64(scalar), at: object + header + UInt64(index * kind), size: kind)
        }
        return object
    }

    public mutating func bytesObject(_ contents: [UInt8]) -> UInt64 {
        let object = allocate(32 + contents.count + 1)
        put(bytesType, at: object + 8)
        put(UInt64(contents.count), at: object + 16)
        bytes.replaceSubrange(Int(object - Self.base + 32)..<Int(object - Self.base + 32) + contents.count, with: contents)
        return object
    }

    /// A code object of `instructions` code units; its line table maps them (see `lineTable`).
    public mutating func code(
        name: String, qualifiedName: String, file: String, firstLine: Int, lineTable: [UInt8], instructions: Int = 32
    ) -> UInt64 {
        let nameObject = str(name), qualifiedObject = str(qualifiedName), fileObject = str(file)
        let table = bytesObject(lineTable)
        let code = allocate(Int(offsets.codeAdaptive) + instructions * 2)
        put(codeType, at: code + 8)
        put(nameObject, at: code + offsets.codeName)
        put(qualifiedObject, at: code + offsets.codeQualname)
        put(fileObject, at: code + offsets.codeFilename)
        put(table, at: code + offsets.codeLinetable)
        put(UInt64(firstLine), at: code + offsets.codeFirstLine, size: 4)
        if let firstTraceable = offsets.codeFirstTraceable { put(1, at: code + firstTraceable, size: 4) }
        return code
    }

    /// A frame running `code` at code unit `unit`, owned by the thread (owner 0) unless told.
    public mutating func frame(code: UInt64, unit: Int, previous: UInt64 = 0, entry: Bool = false, owner: UInt8 = 0) -> UInt64 {
        let frame = allocate(80)
        put(code, at: frame + offsets.frameCode)
        put(previous, at: frame + offsets.framePrevious)
        put(code + offsets.codeAdaptive + UInt64(unit * 2), at: frame + offsets.frameInstruction)
        put(UInt64(owner), at: frame + offsets.frameOwner, size: 1)
        if let isEntry = offsets.frameIsEntry { put(entry ? 1 : 0, at: frame + isEntry, size: 1) }
        return frame
    }

    /// The C stack's shim frame (3.12+: owner 3) before `previous`.
    public mutating func shim(previous: UInt64) -> UInt64 {
        let frame = allocate(80)
        put(previous, at: frame + offsets.framePrevious)
        put(3, at: frame + offsets.frameOwner, size: 1)
        return frame
    }

    /// A thread state running `frame` (0: no Python frame), first in the interpreter's list.
    @discardableResult
    public mutating func thread(nativeID: Int32, frame: UInt64) -> UInt64 {
        let state = allocate(320)
        put(interpreter, at: state + offsets.threadInterp)
        put(UInt64(nativeID), at: state + offsets.nativeThreadID)
        if let cframe = offsets.cframe {
            let block = allocate(24)
            put(block, at: state + cframe)
            put(frame, at: block + offsets.currentFrame)
        } else {
            put(frame, at: state + offsets.currentFrame)
        }
        put(u64(at: interpreter + offsets.threadsHead), at: state + offsets.threadNext)
        put(state, at: interpreter + offsets.threadsHead)
        return state
    }

    /// Marks `state` as holding the GIL.
    public mutating func holdGIL(_ state: UInt64) {
        let base = flavor == .python311 ? runtime : interpreter
        put(state, at: base + offsets.gilHolder)
        put(1, at: base + offsets.gilLocked, size: 4)
    }

    // MARK: Line tables

    /// A location table (3.11+) of entries covering `units` code units each at the line
    /// `delta` below the previous (the first from `co_firstlineno`), in the no-column form
    /// (kind 13, signed varint); `nil` delta: an entry with no location (kind 15).
    public static func lineTable(_ entries: [(units: Int, delta: Int?)]) -> [UInt8] {
        var table: [UInt8] = []
        for (units, delta) in entries {
            guard let delta else {
                table.append(0x80 | 15 << 3 | UInt8(units - 1))
                continue
            }
            table.append(0x80 | 13 << 3 | UInt8(units - 1))
            var value = delta < 0 ? UInt(-delta) << 1 | 1 : UInt(delta) << 1
            while value >= 0x40 {
                table.append(UInt8(value & 0x3F) | 0x40)
                value >>= 6
            }
            table.append(UInt8(value))
        }
        return table
    }

    // MARK: _Py_DebugOffsets (3.13.0's values)

    private mutating func writeDebugOffsets() {
        let fields: [UInt64] = [
            0,  // cookie, written below
            UInt64(versionHex), 0,
            283320, 608, offsets.interpretersHead,  // runtime_state
            UInt64(offsets.interpreterSize), 7272, 7264, offsets.threadsHead, 7400, 7656, 7640, 7648, 16, 7752, 0,
            offsets.gilLocked, offsets.gilHolder,  // interpreter_state
            304, 0, offsets.threadNext, offsets.threadInterp, offsets.currentFrame, 152, offsets.nativeThreadID, 232, 32,
            80, offsets.framePrevious, offsets.frameCode, offsets.frameInstruction, 72, offsets.frameOwner,  // interpreter_frame
            208, offsets.codeFilename, offsets.codeName, offsets.codeQualname, offsets.codeLinetable, offsets.codeFirstLine,
            52, 96, 104, offsets.codeAdaptive,  // code_object
            16, 8,  // pyobject
            416, 24, 88, 168,  // type_object
            32, 24, 16, 40, 24, 16, 48, 32, 40, 24, 16, 32, 16, 24,  // tuple, list, dict, float, long
            40, 16, 32,  // bytes_object
            64, 32, 16, offsets.asciiHeader,  // unicode_object
            240, 200,  // gc
        ]
        for (index, value) in fields.enumerated() { put(value, at: runtime + UInt64(index * 8)) }
        bytes.replaceSubrange(0..<8, with: Array("xdebugpy".utf8))
    }
}
