// PythonDWARFLayouts: the answers to the Python stack reader's PythonStructureQuery, read from
// the DWARF of the module that defines `_PyRuntime` (libpython or the python executable) or of
// its separate debug file (Symbolication's DWARFTypeLayout, its debug file found by build-id or
// .gnu_debuglink), and kept per build-id and minor version for the watcher's life: this runs
// while the crashed process is held, so an interpreter's DWARF is read once, at its first crash.
//
// Thread-safety: shared; the cache is behind a mutex, not held while a file is read (two first
// crashes of one interpreter at once may both read it; the answers are the same).

import ObjectFile
import Runtimes
import Symbolication
import Synchronization

public final class PythonDWARFLayouts: Sendable {
    /// The watcher's cache.
    public static let shared = PythonDWARFLayouts()

    private struct Key: Hashable {
        var buildID: BuildID
        var minor: UInt32
    }

    /// Answers (nil: the module has no DWARF that answers) by build-id and minor version.
    private let answers = Mutex<[Key: PythonStructureAnswers?]>([:])
    private let locator: DebugFileLocator
    /// Interpreters kept at most; past it, the cache starts over (a watcher sees a few).
    static let capacity = 32

    public init(locator: DebugFileLocator = DebugFileLocator()) {
        self.locator = locator
    }

    /// The answers to `query` from `module`'s DWARF or its debug file's; nil when the module has
    /// no object file, no DWARF is found, or none of the query's types is in it. Cached when
    /// the module has a build-id.
    public func answers(for module: LoadedModule, query: PythonStructureQuery) -> PythonStructureAnswers? {
        guard let object = module.object else { return nil }
        let key = (module.buildID ?? object.buildID).map { Key(buildID: $0, minor: query.minor) }
        if let key, let cached = answers.withLock({ $0[key] }) { return cached }
        let found = Self.read(object, query: query, locator: locator)
        if let key {
            answers.withLock {
                if $0.count >= Self.capacity { $0.removeAll() }
                $0[key] = .some(found)
            }
        }
        return found
    }

    /// Reads the answers from `object`'s DWARF, or its debug file's, now (no cache).
    public static func read(
        _ object: ELFFile, query: PythonStructureQuery, locator: DebugFileLocator
    ) -> PythonStructureAnswers? {
        guard let layout = DWARFTypeLayout.open(elf: object, locator: locator, typeNames: query.typeNames) else {
            return nil
        }
        var values: [PythonStructureQuery.Member: UInt64] = [:]
        for member in query.members {
            let value = member.path.map { layout.offset(of: $0, in: member.type) } ?? layout.size(of: member.type)
            if let value { values[member] = value }
        }
        guard !values.isEmpty else { return nil }
        let source = layout.file === object ? object.fileName : "\(object.fileName)'s debug file \(layout.file.path)"
        return PythonStructureAnswers(source: source, values: values)
    }
}
