// PythonLayout: where a CPython interpreter keeps what the stack reader follows, as byte offsets
// into its structures (_PyRuntimeState, PyInterpreterState, PyThreadState, _PyInterpreterFrame,
// PyCodeObject, str, bytes), and which route gave them.
//
// Three routes. From 3.13 the interpreter describes itself: `_PyRuntime` starts with
// `_Py_DebugOffsets` (cookie "xdebugpy", PY_VERSION_HEX, then one sub-struct of u64 offsets per
// structure; Include/internal/pycore_debug_offsets.h), so a build with other options (a debug
// build's bigger object header, free threading) is read by its own offsets. Before 3.13 there is
// no such table, and crashport carries the offsets of the default x86_64 build of each minor
// version it knows (3.11, 3.12; read off the DWARF of CPython 3.11.7 and 3.12.1 built by pyenv).
// Those are a guess about someone else's binary, so the reader checks them against the memory
// they read before it trusts them (a thread state's `interp` points back to its interpreter, a
// code object's type is named "code", a name's type "str"). When they do not fit (an
// interpreter built another way), the caller may hand the reader the offsets it read from the
// interpreter's DWARF (PythonStructureQuery): a layout whose route is "DWARF of <file>", checked
// the same way.
//
// Everything here is a number crashport chose or a number read from the target; the offsets read
// from the target are bounded (`maximumOffset`) before use, so a hostile table can make the
// reader read the wrong bytes, never compute an address that traps.

import BoundedBytes

/// The offsets the stack reader needs, for one interpreter.
struct PythonLayout: Sendable, Equatable {
    /// How the offsets were found, as PythonStacks.layout says it.
    var route: String

    // _PyRuntimeState
    var interpretersHead: UInt64
    // PyInterpreterState
    var interpreterNext: UInt64
    var threadsHead: UInt64
    // PyThreadState
    var threadNext: UInt64
    var threadInterpreter: UInt64
    var nativeThreadID: UInt64
    /// 3.11 and 3.12: the offset of the thread's `cframe` pointer, and `currentFrame` is then the
    /// offset of `current_frame` inside _PyCFrame. From 3.13, nil: `current_frame` is the
    /// thread's own.
    var cframe: UInt64?
    var currentFrame: UInt64

    // _PyInterpreterFrame
    var frameCode: UInt64
    var framePrevious: UInt64
    /// 3.11/3.12 `prev_instr` (the last instruction started), 3.13 `instr_ptr` (the current one):
    /// either way, minus the start of `co_code_adaptive`, the byte offset PyCode_Addr2Line takes.
    var frameInstruction: UInt64
    var frameOwner: UInt64
    /// 3.11's `is_entry`; later versions mark an entry by the C stack's shim frame instead.
    var frameIsEntry: UInt64?
    /// 3.14's `f_executable` is a _PyStackRef: a pointer with tag bits in its low two bits.
    var codeIsTagged: Bool
    /// From 3.12, frames whose `owner` is at least this are not Python code but the shim each
    /// C-level call of the eval loop pushes (3.12/3.13 FRAME_OWNED_BY_CSTACK = 3; 3.14 adds
    /// FRAME_OWNED_BY_INTERPRETER = 3 and moves CSTACK to 4). nil for 3.11, which has none.
    var firstShimOwner: UInt8?

    // PyCodeObject
    var codeFilename: UInt64
    var codeName: UInt64
    var codeQualname: UInt64
    var codeLinetable: UInt64
    var codeFirstLine: UInt64
    var codeAdaptive: UInt64
    /// `_co_firsttraceable`, for CPython's test of an incomplete frame (_PyFrame_IsIncomplete);
    /// not in `_Py_DebugOffsets`, so nil there.
    var codeFirstTraceable: UInt64?

    // PyObject, PyTypeObject, str, bytes
    var objectType: UInt64
    var typeName: UInt64
    var unicodeLength: UInt64
    var unicodeState: UInt64
    /// sizeof(PyASCIIObject): where an ASCII string's characters start.
    var asciiHeader: UInt64
    /// sizeof(PyCompactUnicodeObject): where a compact non-ASCII string's characters start.
    var compactHeader: UInt64
    var bytesSize: UInt64
    var bytesData: UInt64

    /// Where the GIL's holder and lock word are, when the layout knows.
    var gil: GIL?

    enum GIL: Sendable, Equatable {
        /// 3.11: `_PyRuntime.ceval.gil`, one for the process.
        case runtime(holder: UInt64, locked: UInt64)
        /// 3.12: `interp->ceval.gil`, a pointer to the GIL the interpreter uses.
        case interpreterPointer(pointer: UInt64, holder: UInt64, locked: UInt64)
        /// 3.13+: `interp->_gil`, the interpreter's own.
        case interpreter(holder: UInt64, locked: UInt64)
    }

    /// The most any offset read from the target may be: every structure here is well under it
    /// (_PyRuntimeState, the biggest, is 160 KiB in 3.11).
    static let maximumOffset: UInt64 = 1 << 20

    /// How many bytes of a thread state, a frame and a code object hold every field read, so
    /// that each is one read of the target.
    /// (Each offset is at most `maximumOffset`, so the sums do not overflow.)
    var threadSpan: UInt64 { max(threadNext, threadInterpreter, nativeThreadID, cframe ?? 0, currentFrame) + 8 }
    var frameSpan: UInt64 { max(frameCode, framePrevious, frameInstruction, frameOwner, frameIsEntry ?? 0) + 8 }
    var codeSpan: UInt64 {
        max(objectType, codeFilename, codeName, codeQualname, codeLinetable, codeFirstLine, codeFirstTraceable ?? 0) + 8
    }

    // MARK: - Built-in offsets

    /// The offsets of the default x86_64 build of `minor` (3.`minor`), when crashport knows them.
    static func builtIn(minor: UInt32) -> PythonLayout? {
        switch minor {
        case 11:
            // CPython 3.11.7's DWARF; the same in Debian's 3.11.2 (checked by the live test).
            return PythonLayout(
                route: "built-in 3.11 offsets", interpretersHead: 40, interpreterNext: 0, threadsHead: 16,
                threadNext: 8, threadInterpreter: 16, nativeThreadID: 160, cframe: 56, currentFrame: 8,
                frameCode: 32, framePrevious: 48, frameInstruction: 56, frameOwner: 69, frameIsEntry: 68,
                codeIsTagged: false, firstShimOwner: nil,
                codeFilename: 112, codeName: 120, codeQualname: 128, codeLinetable: 136, codeFirstLine: 72,
                codeAdaptive: 184, codeFirstTraceable: 168,
                objectType: 8, typeName: 24, unicodeLength: 16, unicodeState: 32, asciiHeader: 48, compactHeader: 72,
                bytesSize: 16, bytesData: 32, gil: .runtime(holder: 368, locked: 376))
        case 12:
            // CPython 3.12.1's DWARF: the interpreter's fields moved, `wstr` left str's header.
            return PythonLayout(
                route: "built-in 3.12 offsets", interpretersHead: 40, interpreterNext: 0, threadsHead: 72,
                threadNext: 8, threadInterpreter: 16, nativeThreadID: 144, cframe: 56, currentFrame: 0,
                frameCode: 0, framePrevious: 8, frameInstruction: 56, frameOwner: 70, frameIsEntry: nil,
                codeIsTagged: false, firstShimOwner: 3,
                codeFilename: 112, codeName: 120, codeQualname: 128, codeLinetable: 136, codeFirstLine: 68,
                codeAdaptive: 192, codeFirstTraceable: 176,
                objectType: 8, typeName: 24, unicodeLength: 16, unicodeState: 32, asciiHeader: 40, compactHeader: 56,
                bytesSize: 16, bytesData: 32, gil: .interpreterPointer(pointer: 384, holder: 8, locked: 16))
        default:
            return nil
        }
    }

    // MARK: - _Py_DebugOffsets (3.13+)

    /// `_Py_DebugOffsets` as pycore_debug_offsets.h declares it, one sub-struct of u64 fields
    /// after another, names verbatim: the position of a field is its index in this list.
    /// 3.13's, then what 3.14 added (interpreter_state.threads_main, code_object_generation,
    /// tlbc_generation; interpreter_frame.stackpointer, tlbc_index; code_object.co_tlbc;
    /// set_object).
    static func debugOffsetsFields(minor: UInt32) -> [(name: String, fields: [String])] {
        let v14 = minor >= 14
        return [
            ("", ["cookie", "version", "free_threaded"]),
            ("runtime_state", ["size", "finalizing", "interpreters_head"]),
            (
                "interpreter_state",
                ["size", "id", "next", "threads_head"] + (v14 ? ["threads_main"] : [])
                    + [
                        "gc", "imports_modules", "sysdict", "builtins", "ceval_gil", "gil_runtime_state",
                        "gil_runtime_state_enabled", "gil_runtime_state_locked", "gil_runtime_state_holder",
                    ] + (v14 ? ["code_object_generation", "tlbc_generation"] : [])
            ),
            (
                "thread_state",
                ["size", "prev", "next", "interp", "current_frame", "thread_id", "native_thread_id", "datastack_chunk", "status"]
            ),
            (
                "interpreter_frame",
                ["size", "previous", "executable", "instr_ptr", "localsplus", "owner"]
                    + (v14 ? ["stackpointer", "tlbc_index"] : [])
            ),
            (
                "code_object",
                [
                    "size", "filename", "name", "qualname", "linetable", "firstlineno", "argcount", "localsplusnames",
                    "localspluskinds", "co_code_adaptive",
                ] + (v14 ? ["co_tlbc"] : [])
            ),
            ("pyobject", ["size", "ob_type"]),
            ("type_object", ["size", "tp_name", "tp_repr", "tp_flags"]),
            ("tuple_object", ["size", "ob_item", "ob_size"]),
            ("list_object", ["size", "ob_item", "ob_size"]),
        ] + (v14 ? [("set_object", ["size", "used", "table", "mask"])] : []) + [
            ("dict_object", ["size", "ma_keys", "ma_values"]),
            ("float_object", ["size", "ob_fval"]),
            ("long_object", ["size", "lv_tag", "ob_digit"]),
            ("bytes_object", ["size", "ob_size", "ob_sval"]),
            ("unicode_object", ["size", "state", "length", "asciiobject_size"]),
        ]
    }

    /// The cookie `_Py_DebugOffsets` starts with.
    static let debugCookie: [UInt8] = Array("xdebugpy".utf8)

    /// The layout `_Py_DebugOffsets` at `runtime` gives, or why there is none: nil and a reason
    /// when the cookie is not there (before 3.13, or not CPython's runtime), the table is cut,
    /// or an offset is past `maximumOffset`.
    static func fromDebugOffsets(memory: some MemoryReader, runtime: UInt64) -> Result<PythonLayout, LayoutRefusal> {
        let head = memory.bytes(at: runtime, count: 16)
        guard head.count == 16, Array(head[0..<8]) == debugCookie else { return .failure(.noDebugOffsets) }
        let hex = UInt32(
            truncatingIfNeeded: UInt64(
                littleEndian: head.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self) }))
        let minor = (hex >> 16) & 0xFF
        guard hex >> 24 == 3, minor >= 13 else { return .failure(.unknownDebugOffsets(version: hex)) }
        var positions: [String: Int] = [:]
        var position = 0
        for (structure, fields) in debugOffsetsFields(minor: minor) {
            for field in fields {
                positions[structure.isEmpty ? field : structure + "." + field] = position
                position += 8
            }
        }
        let table = memory.bytes(at: runtime, count: position)
        guard table.count == position else { return .failure(.cut) }
        var tooBig: String?
        func offset(_ name: String) -> UInt64 {
            // Every name asked for is in the list above (a crashport constant), so the position is.
            guard let at = positions[name] else { return 0 }
            let value = table.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: UInt64.self)) }
            if value > maximumOffset, tooBig == nil { tooBig = name }
            return value
        }
        let asciiHeader = offset("unicode_object.asciiobject_size")
        let layout = PythonLayout(
            route: "_Py_DebugOffsets",
            interpretersHead: offset("runtime_state.interpreters_head"),
            interpreterNext: offset("interpreter_state.next"),
            threadsHead: offset("interpreter_state.threads_head"),
            threadNext: offset("thread_state.next"),
            threadInterpreter: offset("thread_state.interp"),
            nativeThreadID: offset("thread_state.native_thread_id"),
            cframe: nil,
            currentFrame: offset("thread_state.current_frame"),
            frameCode: offset("interpreter_frame.executable"),
            framePrevious: offset("interpreter_frame.previous"),
            frameInstruction: offset("interpreter_frame.instr_ptr"),
            frameOwner: offset("interpreter_frame.owner"),
            frameIsEntry: nil,
            codeIsTagged: minor >= 14,
            firstShimOwner: 3,
            codeFilename: offset("code_object.filename"),
            codeName: offset("code_object.name"),
            codeQualname: offset("code_object.qualname"),
            codeLinetable: offset("code_object.linetable"),
            codeFirstLine: offset("code_object.firstlineno"),
            codeAdaptive: offset("code_object.co_code_adaptive"),
            codeFirstTraceable: nil,
            objectType: offset("pyobject.ob_type"),
            typeName: offset("type_object.tp_name"),
            unicodeLength: offset("unicode_object.length"),
            unicodeState: offset("unicode_object.state"),
            asciiHeader: asciiHeader,
            // PyCompactUnicodeObject adds `utf8_length` and `utf8` to PyASCIIObject (3.12+).
            compactHeader: asciiHeader &+ 16,
            bytesSize: offset("bytes_object.ob_size"),
            bytesData: offset("bytes_object.ob_sval"),
            gil: .interpreter(
                holder: offset("interpreter_state.gil_runtime_state_holder"),
                locked: offset("interpreter_state.gil_runtime_state_locked")))
        if let tooBig { return .failure(.offsetTooBig(field: tooBig)) }
        return .success(layout)
    }

    enum LayoutRefusal: Error, Equatable {
        case noDebugOffsets
        case unknownDebugOffsets(version: UInt32)
        case cut
        case offsetTooBig(field: String)

        var description: String {
            switch self {
            case .noDebugOffsets: return "no _Py_DebugOffsets at _PyRuntime"
            case .unknownDebugOffsets(let version):
                return "_Py_DebugOffsets of an unknown version (0x\(String(version, radix: 16)))"
            case .cut: return "_Py_DebugOffsets cut short"
            case .offsetTooBig(let field): return "_Py_DebugOffsets: \(field) is past any structure's size"
            }
        }
    }
}
