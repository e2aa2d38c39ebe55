// PythonCapture: a CPython process's Python frames, read while it is held (a live capture, before
// the process is released) or while the kernel holds it for its core, through the memory reader
// opened as its user (ProcessAccess): the same reads the user could make, no others.
//
// Only a process with an interpreter's module mapped is read (a python executable, however built
// or installed, or a libpython an embedding program loads): for any other process this costs a
// look at its modules' names. For those, the interpreter's object file is parsed now, while the
// process waits, to find `_PyRuntime`; the ELF cache keeps it for the report's symbolication and
// for the next crash of the same interpreter, so only the first crash pays for the parse. An
// interpreter whose structures the built-in offsets do not fit is read by its DWARF
// (PythonDWARFLayouts), also parsed once.

import BoundedBytes
import ObjectFile
import Runtimes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

enum PythonCapture {
    /// `CRASHPORT_PYTHON_FRAMES=off` in the watcher's environment leaves Python frames unread
    /// (to measure what they cost, or should a reader ever misbehave on an interpreter).
    static let enabled: Bool = {
        guard let value = getenv("CRASHPORT_PYTHON_FRAMES") else { return true }
        return String(cString: value) != "off"
    }()

    /// The layout of an interpreter without `_Py_DebugOffsets` from its DWARF (libpython's, the
    /// python executable's, or their debug file's), read at its first crash and kept per
    /// build-id for the watcher's life (PythonDWARFLayouts.shared). Asked only when the built-in
    /// offsets are absent or do not fit (PythonStackReader's default order,
    /// `.whenBuiltInFails`), not before them as the issue first ordered it: the first parse
    /// costs 50–70 ms on pyenv's libpython3.11/3.12 (measured, PythonDWARFTests), paid while
    /// the crashed process is held, so the default builds never pay for it.
    static func dwarfLayout(_ module: LoadedModule, _ query: PythonStructureQuery) -> PythonStructureAnswers? {
        PythonDWARFLayouts.shared.answers(for: module, query: query)
    }

    /// The Python frames of a held process, from its pending modules (ModuleMap.pending); nil
    /// when it is no CPython process.
    static func read(
        memory: some MemoryReader, pending: [PendingModule], access: ProcessAccess, cache: ELFCache
    ) -> PythonStacks? {
        guard enabled else { return nil }
        let interpreters = pending.filter { PythonStackReader.mayBeInterpreter($0.module.name) }
        guard !interpreters.isEmpty else { return nil }
        return PythonStackReader.read(
            memory: memory, modules: ModuleMap.open(interpreters, access: access, cache: cache), dwarfLayout: dwarfLayout)
    }

    /// The Python frames of a process the kernel holds for its core, from its opened modules:
    /// its memory opened now as its user (nil when there is none to ask, or the kernel refuses
    /// the user: a note says so).
    static func read(access: ProcessAccess?, modules: [LoadedModule], notes: inout [String]) -> PythonStacks? {
        guard enabled, let access else { return nil }
        let interpreters = modules.filter { PythonStackReader.mayBeInterpreter($0.name) && $0.object != nil }
        guard !interpreters.isEmpty else { return nil }
        switch access.openMemory() {
        case .success(let memory):
            return PythonStackReader.read(memory: memory, modules: interpreters, dwarfLayout: dwarfLayout)
        case .failure(let error):
            notes.append("Python frames not read: the process's memory could not be opened as its user (\(error))")
            return nil
        }
    }
}
