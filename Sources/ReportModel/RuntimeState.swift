// RuntimeState: what a language runtime inside the crashed process said about itself, read while
// the process was held (or while the kernel held it for its core): the Python frames each
// thread's interpreter was running, the names a JIT gave its code (the perf map), the crash log
// the runtime wrote before it died (the JVM's hs_err file, Node's diagnostic report).
//
// Plain values, filled by LiveProcess through Runtimes' readers and read by Reports, which puts
// the frames among the native ones and the log's names in the title. Everything here came from
// memory or files the process's user controls: each reader bounds what it keeps and says what it
// could not read (`problem`, `notes`), and a report keeps its native frames whatever they say.

/// One frame a CPython interpreter was running.
public struct PythonFrame: Sendable, Equatable {
    /// The code object's name (`co_name`).
    public var function: String
    /// Its qualified name (`co_qualname`, 3.11+), when the version has one.
    public var qualifiedName: String?
    /// `co_filename`.
    public var file: String
    /// The line of the instruction the frame was at (from `co_linetable`), nil when unknown.
    public var line: Int?
    /// The outermost frame of one C-level call of the eval loop (3.11's `is_entry`; from 3.12 a
    /// frame whose previous one is the C stack's shim): the frames from the innermost up to
    /// and including an entry frame ran in one `_PyEval_EvalFrameDefault` native frame.
    public var entry: Bool

    public init(function: String, qualifiedName: String? = nil, file: String, line: Int?, entry: Bool) {
        self.function = function
        self.qualifiedName = qualifiedName
        self.file = file
        self.line = line
        self.entry = entry
    }
}

/// One Python thread state: the interpreter's frames for one native thread.
public struct PythonThread: Sendable, Equatable {
    /// The native thread it runs on (`native_thread_id`): the Linux tid, nil when unknown.
    public var threadID: ThreadID?
    /// Innermost first.
    public var frames: [PythonFrame]
    /// It held the GIL when the process stopped.
    public var holdsGIL: Bool
    /// What could not be read of this thread (a frame chain that loops, is cut or too long).
    public var problem: String?

    public init(threadID: ThreadID?, frames: [PythonFrame], holdsGIL: Bool = false, problem: String? = nil) {
        self.threadID = threadID
        self.frames = frames
        self.holdsGIL = holdsGIL
        self.problem = problem
    }
}

/// Every thread's Python frames in a CPython process.
public struct PythonStacks: Sendable, Equatable {
    /// The interpreter's version ("3.11.7"), from `Py_Version`.
    public var version: String
    /// Where the structures' layout came from: `_Py_DebugOffsets`, the DWARF of a file, or the
    /// offsets crashport knows for this minor version.
    public var layout: String
    public var threads: [PythonThread]
    /// What could not be read of the interpreter as a whole.
    public var notes: [String]

    public init(version: String, layout: String, threads: [PythonThread], notes: [String] = []) {
        self.version = version
        self.layout = layout
        self.threads = threads
        self.notes = notes
    }
}

/// One line of a perf map (`/tmp/perf-PID.map`: "START SIZE NAME", hexadecimal): code a JIT
/// generated at run time, and its name.
public struct JITSymbol: Sendable, Equatable {
    public var start: UInt64
    public var size: UInt64
    public var name: String

    public init(start: UInt64, size: UInt64, name: String) {
        self.start = start
        self.size = size
        self.name = name
    }

    public var end: UInt64 { start.addingReportingOverflow(size).overflow ? UInt64.max : start + size }
}

/// A crash log the runtime wrote before it died (the JVM's hs_err file, Node's diagnostic
/// report), as found and read for its user.
public struct RuntimeCrashLog: Sendable, Equatable {
    /// `hs_err` or `node-report`.
    public var kind: String
    /// Where it was found.
    public var path: String
    /// Its bytes, at most the reader's bound.
    public var contents: [UInt8]
    /// The file is longer than `contents`.
    public var truncated: Bool
    /// What it names as the fault, in its words: the JVM's "Problematic frame" (`J 42 C2
    /// Crash.crash()V`), Node's error message.
    public var problematicFrame: String?
    /// The runtime's own frames of the crashed thread, innermost first (the JVM's "Java frames",
    /// Node's JavaScript stack), as the log gives them.
    public var frames: [String]

    public init(
        kind: String, path: String, contents: [UInt8], truncated: Bool, problematicFrame: String? = nil, frames: [String] = []
    ) {
        self.kind = kind
        self.path = path
        self.contents = contents
        self.truncated = truncated
        self.problematicFrame = problematicFrame
        self.frames = frames
    }
}

/// Everything the runtimes in a process said, as captured.
public struct RuntimeState: Sendable, Equatable {
    public var python: PythonStacks?
    /// The perf map's symbols, sorted by start, overlaps removed (RuntimeReaders' PerfMap).
    public var jitSymbols: [JITSymbol] = []
    public var crashLogs: [RuntimeCrashLog] = []
    /// What could not be read, for the report's notes.
    public var notes: [String] = []

    public init(
        python: PythonStacks? = nil, jitSymbols: [JITSymbol] = [], crashLogs: [RuntimeCrashLog] = [], notes: [String] = []
    ) {
        self.python = python
        self.jitSymbols = jitSymbols
        self.crashLogs = crashLogs
        self.notes = notes
    }

    public var isEmpty: Bool { python == nil && jitSymbols.isEmpty && crashLogs.isEmpty && notes.isEmpty }
}

extension FrameRecord {
    /// `language` of a CPython frame.
    public static let pythonLanguage = "python"
    /// `language` of a frame of code a JIT generated, named by the process's perf map.
    public static let jitLanguage = "jit"
}
