// PythonStructureQuery: what the stack reader asks of an interpreter's debug information (the
// DWARF of libpython, of the python executable or of their debug files) when the interpreter
// does not describe itself (before 3.13, no `_Py_DebugOffsets`): the byte offsets of the members
// it follows and the sizes of str's headers, by C type name and member path, for one minor
// version. The caller answers (LiveProcess asks Symbolication's DWARF reader: Runtimes reads no
// debug information itself), and the answers become a PythonLayout whose route is "DWARF of
// <file>", checked against memory as the built-in offsets are.
//
// One list serves both sides: `layout(minor:offset:)` builds the layout from a lookup, and the
// query is that same builder run with a lookup that records what it is asked. So the query
// cannot ask for less than the layout needs.

public struct PythonStructureQuery: Sendable, Hashable {
    /// A member path inside a named type (`interpreters.head` in `_PyRuntimeState`), or the
    /// type's size when `path` is nil. Names are C's: a typedef or a struct's tag.
    public struct Member: Sendable, Hashable, CustomStringConvertible {
        public var type: String
        public var path: String?

        public init(type: String, path: String?) {
            self.type = type
            self.path = path
        }

        public var description: String { path.map { type + "." + $0 } ?? "sizeof(\(type))" }
    }

    /// The minor version (3.`minor`) the members are those of.
    public let minor: UInt32
    /// Every member offset and type size the layout needs, in the order the builder asks.
    public let members: [Member]
    /// The type names the members start from.
    public var typeNames: Set<String> { Set(members.map(\.type)) }

    /// The query for CPython 3.`minor`; nil for a version whose layout is not read this way
    /// (3.13 and later describe themselves; before 3.11 there are no frames crashport reads).
    public static func forMinor(_ minor: UInt32) -> PythonStructureQuery? {
        guard minor == 11 || minor == 12 else { return nil }
        var asked: [Member] = []
        _ = build(minor: minor, route: "") { member in
            if !asked.contains(member) { asked.append(member) }
            return 0
        }
        return PythonStructureQuery(minor: minor, members: asked)
    }

    /// The layout the answers give, or the first member they lack (or give past
    /// PythonLayout.maximumOffset). `source` names the file the answers came from.
    func layout(from answers: PythonStructureAnswers) -> Result<PythonLayout, Missing> {
        var missing: Member?
        let layout = Self.build(minor: minor, route: "DWARF of " + answers.source) { member in
            guard let value = answers.values[member], value <= PythonLayout.maximumOffset else {
                if missing == nil { missing = member }
                return nil
            }
            return value
        }
        if let layout, missing == nil { return .success(layout) }
        return .failure(Missing(member: missing ?? Member(type: "?", path: nil)))
    }

    struct Missing: Error, Equatable {
        var member: Member
    }

    /// The layout of 3.`minor` (11 or 12) from `offset`, which answers each member.
    private static func build(minor: UInt32, route: String, _ offset: (Member) -> UInt64?) -> PythonLayout? {
        // Every member is asked, even after one is missing: the query is this list.
        var complete = true
        func at(_ type: String, _ path: String) -> UInt64 {
            guard let value = offset(Member(type: type, path: path)) else {
                complete = false
                return 0
            }
            return value
        }
        func size(_ type: String) -> UInt64 {
            guard let value = offset(Member(type: type, path: nil)) else {
                complete = false
                return 0
            }
            return value
        }
        let v11 = minor == 11
        let gil: PythonLayout.GIL
        if v11 {
            // 3.11: one GIL, in _PyRuntime.ceval.
            gil = .runtime(
                holder: at("_PyRuntimeState", "ceval.gil.last_holder"), locked: at("_PyRuntimeState", "ceval.gil.locked"))
        } else {
            // 3.12: interp->ceval.gil points to the GIL the interpreter uses.
            gil = .interpreterPointer(
                pointer: at("PyInterpreterState", "ceval.gil"), holder: at("_gil_runtime_state", "last_holder"),
                locked: at("_gil_runtime_state", "locked"))
        }
        let layout = PythonLayout(
            route: route,
            interpretersHead: at("_PyRuntimeState", "interpreters.head"),
            interpreterNext: at("PyInterpreterState", "next"),
            threadsHead: at("PyInterpreterState", "threads.head"),
            threadNext: at("PyThreadState", "next"),
            threadInterpreter: at("PyThreadState", "interp"),
            nativeThreadID: at("PyThreadState", "native_thread_id"),
            cframe: at("PyThreadState", "cframe"),
            currentFrame: at("_PyCFrame", "current_frame"),
            frameCode: at("_PyInterpreterFrame", "f_code"),
            framePrevious: at("_PyInterpreterFrame", "previous"),
            frameInstruction: at("_PyInterpreterFrame", "prev_instr"),
            frameOwner: at("_PyInterpreterFrame", "owner"),
            frameIsEntry: v11 ? at("_PyInterpreterFrame", "is_entry") : nil,
            codeIsTagged: false,
            firstShimOwner: v11 ? nil : 3,
            codeFilename: at("PyCodeObject", "co_filename"),
            codeName: at("PyCodeObject", "co_name"),
            codeQualname: at("PyCodeObject", "co_qualname"),
            codeLinetable: at("PyCodeObject", "co_linetable"),
            codeFirstLine: at("PyCodeObject", "co_firstlineno"),
            codeAdaptive: at("PyCodeObject", "co_code_adaptive"),
            codeFirstTraceable: at("PyCodeObject", "_co_firsttraceable"),
            objectType: at("PyObject", "ob_type"),
            typeName: at("PyTypeObject", "tp_name"),
            unicodeLength: at("PyASCIIObject", "length"),
            unicodeState: at("PyASCIIObject", "state"),
            asciiHeader: size("PyASCIIObject"),
            compactHeader: size("PyCompactUnicodeObject"),
            bytesSize: at("PyBytesObject", "ob_base.ob_size"),
            bytesData: at("PyBytesObject", "ob_sval"),
            gil: gil)
        return complete ? layout : nil
    }
}

/// A caller's answers to a PythonStructureQuery: a value for each member it could find.
public struct PythonStructureAnswers: Sendable, Equatable {
    /// The file the answers were read from, as the layout's route names it ("libpython3.11.so.1.0").
    public var source: String
    public var values: [PythonStructureQuery.Member: UInt64]

    public init(source: String, values: [PythonStructureQuery.Member: UInt64]) {
        self.source = source
        self.values = values
    }
}
