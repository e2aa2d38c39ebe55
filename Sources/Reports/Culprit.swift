// Culprit: which frames are the program's own (in_app, Sentry's term), the first of them on the
// crashing thread (the report's culprit), and the one-line title built from it, the way Sentry,
// Crashlytics and Bugsnag lead with the program's frame rather than libc's abort machinery.
//
// The rule (docs/using.md, "Which frames are the program's"):
//  - a frame is not the program's when its module is a system or runtime library: a path under
//    /lib, /usr/lib, /lib64, /usr/lib64, /usr/libexec or /opt/swift, the dynamic loader, the vDSO,
//    or a file named like libc, libm, libstdc++, libgcc_s, libc++, libunwind, the Swift runtime
//    and Foundation, Rust's libstd, the JVM, Python (libpython and the python executables), Node,
//    or crashport's own stub;
//  - a Python frame is not the program's when its file is the interpreter's standard library,
//    an installed package or a frozen module (PythonFrames);
//  - nor when its function belongs to a language runtime linked into the program itself:
//    std::/core::/alloc:: and Rust's panic machinery, __gnu_cxx:: and the C++ ABI (__cxa_,
//    _Unwind_), the Swift standard library (Swift., the runtime's swift_ functions and its
//    "Swift runtime failure" trap frames), libc's start-up (_start, __libc_start_*), threads'
//    start (start_thread, clone), crashport's API (crashport_*, CrashPort.); nor when its source
//    file is a system or toolchain header inlined into the program (/usr/include, /usr/lib/gcc,
//    Rust's /rustc/<hash>/library, the Swift standard library's Swift/…);
//  - every other frame is: the main executable's and the program's own libraries'.
// `--in-app PATTERN` and `--not-in-app PATTERN` (fnmatch, against a module's path or its file
// name) decide first, not-in-app before in-app.

import BoundedBytes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public struct InAppRules: Sendable, Equatable {
    /// Modules that are the program's whatever the defaults say (fnmatch patterns).
    public var inApp: [String]
    /// Modules that are not.
    public var notInApp: [String]

    public init(inApp: [String] = [], notInApp: [String] = []) {
        self.inApp = inApp
        self.notInApp = notInApp
    }

    static let systemDirectories = ["/lib/", "/usr/lib/", "/lib64/", "/usr/lib64/", "/usr/libexec/", "/opt/swift/"]
    static let runtimeLibraries = [
        "libc.so*", "libc-*.so", "libm.so*", "libpthread*", "libdl.so*", "librt.so*", "ld-linux*", "ld-*.so*",
        "libstdc++*", "libgcc_s*", "libc++*", "libunwind*", "libswift*", "libFoundation*", "lib_Foundation*",
        "libdispatch*", "libBlocksRuntime*", "libstd-*", "libjvm*", "libpython*", "libnode*", "libcrashport*",
        "linux-vdso*", "[vdso]", "libasan*", "libtsan*", "libubsan*",
        // Interpreters, wherever installed (a pyenv's, a venv's): their C is the runtime's, the
        // program is the script (PythonFrames).
        "python", "python[0-9]*", "pypy*",
    ]
    /// Prefixes of runtime functions' names.
    static let runtimeFunctions = [
        "std::", "core::", "alloc::", "<std::", "<core::", "<alloc::", "__rust", "rust_panic", "rust_begin_unwind",
        "__gnu_cxx::", "__cxxabiv1::", "__cxa_", "_Unwind_", "__gxx_", "Swift.", "static Swift.", "swift_",
        "Swift runtime failure", "__libc_start", "crashport_", "static CrashPort.", "CrashPort.",
        // Go's runtime and its cgo glue.
        "runtime.", "runtime/", "internal/", "syscall.", "_cgo_", "x_cgo_", "crosscall",
        // V8's own code as a perf map names it (a JIT frame of the program's is `JS:…`).
        "Builtin:", "Stub:", "BytecodeHandler:", "Handler:", "RegExp:",
    ]
    /// Whole names (a program's own `clone_record` or `start_thread_pool` stays the program's).
    static let runtimeFunctionNames: Set<String> = [
        "_start", "start_thread", "clone", "clone3", "__clone", "__clone3", FrameRecord.signalHandlerCalled,
    ]

    static func matches(_ pattern: String, path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return fnmatch(pattern, path, 0) == 0 || fnmatch(pattern, name, 0) == 0
    }

    static let runtimeSources = ["/usr/include/", "/usr/lib/gcc/", "/rustc/", "Swift/", "/usr/src/"]

    /// Whether a frame of `module` (its full path when known, else its file name) running
    /// `function` (its mangled name `mangled`) from source `file` is the program's own.
    /// `staticLibC`: the C library is linked into the program (no libc.so is loaded), so its
    /// functions' names say what they are.
    public func isInApp(
        modulePath: String?, function: String?, file: String? = nil, mangled: String? = nil, staticLibC: Bool = false
    ) -> Bool {
        if let path = modulePath {
            if notInApp.contains(where: { Self.matches($0, path: path) }) { return false }
            if inApp.contains(where: { Self.matches($0, path: path) }) { return true }
        }
        if let function, Self.isRuntimeFunction(Signature.droppingCloneSuffixes(function), staticLibC: staticLibC) {
            return false
        }
        if let mangled, Self.isSwiftStandardLibrary(mangled: mangled) { return false }
        if let file, Self.isRuntimeSource(file, function: function) { return false }
        guard let path = modulePath else { return function != nil }
        if Self.systemDirectories.contains(where: { path.hasPrefix($0) }) { return false }
        // An interpreter's extension module of its own (lib-dynload) or of an installed package.
        if PythonFrames.isInterpreterFile(path) { return false }
        return !Self.runtimeLibraries.contains { Self.matches($0, path: path) }
    }

    /// Whether a Python frame running code from `file` is the program's own: not the
    /// interpreter's standard library, installed packages or frozen modules (PythonFrames), unless
    /// a pattern says otherwise.
    public func isInApp(pythonFile file: String?) -> Bool {
        guard let file else { return false }
        if notInApp.contains(where: { Self.matches($0, path: file) }) { return false }
        if inApp.contains(where: { Self.matches($0, path: file) }) { return true }
        return !PythonFrames.isInterpreterFile(file)
    }

    static func isRuntimeFunction(_ function: String, staticLibC: Bool) -> Bool {
        if runtimeFunctionNames.contains(function) || runtimeFunctions.contains(where: { function.hasPrefix($0) }) {
            return true
        }
        // A C identifier the C standard reserves for the implementation (`__strlen_evex`,
        // `_IO_file_write`), or, with the C library linked in, one of its functions.
        let isCIdentifier = function.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
        guard isCIdentifier, let first = function.first else { return false }
        if first == "_", let second = function.dropFirst().first, second == "_" || second.isUppercase { return true }
        return staticLibC && (staticLibCNames.contains(function) || Signature.cLibraryFunction(function) != nil)
    }

    /// Swift's standard library, from the mangled name: the module `Swift` (`$ss…`) or one of its
    /// standard types (`$sSa…` Array, `$sSD…` Dictionary, …), specialised into the program or not,
    /// unless the program extends it (`$sSa7MyAppE…`: an extension in module MyApp).
    static func isSwiftStandardLibrary(mangled: String) -> Bool {
        var rest = Substring(mangled)
        if rest.hasPrefix("_") { rest = rest.dropFirst() }
        guard rest.hasPrefix("$s") else { return false }
        rest = rest.dropFirst(2)
        if rest.hasPrefix("s") {
            rest = rest.dropFirst()
            // The type in module Swift: its length-prefixed name and kind (`5Int32V`).
            let digits = rest.prefix(while: \.isNumber)
            guard let length = Int(digits) else { return true }
            rest = rest.dropFirst(digits.count + length + 1)
        } else if rest.hasPrefix("Sc"), rest.count > 2 {
            rest = rest.dropFirst(3)
        } else if rest.hasPrefix("S"), let kind = rest.dropFirst().first, kind.isLetter, kind != "o", kind != "C" {
            rest = rest.dropFirst(2)
        } else {
            return false
        }
        // An extension in another module: `7MyAppE`.
        let digits = rest.prefix(while: \.isNumber)
        if let length = Int(digits), rest.count > digits.count + length,
            rest.dropFirst(digits.count + length).first == "E"
        {
            return false
        }
        return true
    }

    static func isRuntimeSource(_ file: String, function: String?) -> Bool {
        if runtimeSources.contains(where: { file.hasPrefix($0) }) { return true }
        // A trap frame Swift's compiler made for its standard library.
        if file.hasSuffix("<compiler-generated>"), function?.hasPrefix("Swift") == true { return true }
        // glibc's own sources, as its debug information names them ("./nptl/pthread_kill.c",
        // "../sysdeps/x86_64/multiarch/strlen-evex.S"), linked in statically or not.
        if file.hasPrefix("./") || file.hasPrefix("../") {
            let directory = file.split(separator: "/").first { $0 != "." && $0 != ".." }
            if let directory, glibcDirectories.contains(String(directory)) { return true }
        }
        // Go's standard library: a package whose path's first element has no dot, under a GOROOT.
        if file.hasSuffix(".go") || file.hasSuffix(".s"), let function {
            if file.containsUTF8("/go/src/") || file.containsUTF8("/go-") && file.containsUTF8("/src/") {
                let package = function.prefix { $0 != "." }
                let first = package.split(separator: "/").first ?? package
                return package != "main" && !first.containsUTF8(".")
            }
        }
        return false
    }

    static let glibcDirectories: Set<String> = [
        "sysdeps", "nptl", "csu", "stdlib", "string", "misc", "signal", "malloc", "libio", "assert", "stdio-common",
        "elf", "dlfcn", "posix", "io", "time", "wcsmbs", "iconv", "locale", "resolv", "debug", "setjmp",
    ]
    /// The C library's functions a crash stack shows (the allocator's and string functions are
    /// Signature's prefix list).
    static let staticLibCNames: Set<String> = [
        "abort", "raise", "exit", "puts", "printf", "fprintf", "vfprintf", "sprintf", "snprintf", "qsort", "bsearch",
        "malloc", "free", "calloc", "realloc", "pthread_kill", "pthread_create", "pthread_join", "gsignal",
        "malloc_printerr", "_int_free", "_int_malloc", "_int_realloc", "tcache_put", "tcache_get", "unlink_chunk",
        "sysmalloc", "cfree",
    ]
}

public enum Culprit {
    /// Marks every frame's `in_app`, and sets the event's `culprit` (the crashing thread's first
    /// in-app frame, else its first named frame) and `title`. Idempotent.
    public static func mark(_ event: inout Event, rules: InAppRules = InAppRules()) {
        var paths: [String: String] = [:]
        for module in event.modules ?? [] {
            guard let path = module.path else { continue }
            paths[path.split(separator: "/").last.map(String.init) ?? path] = path
        }
        // No libc.so among the modules (and some modules known): the C library is linked in.
        let modules = event.modules ?? []
        let staticLibC =
            !modules.isEmpty
            && !modules.contains {
                InAppRules.matches("libc.so*", path: $0.path ?? "") || InAppRules.matches("libc-*.so", path: $0.path ?? "")
            }
        for threadIndex in (event.threads ?? []).indices {
            for frameIndex in (event.threads?[threadIndex].frames ?? []).indices {
                let frame = event.threads![threadIndex].frames![frameIndex]
                if frame.language == FrameRecord.pythonLanguage {
                    event.threads![threadIndex].frames![frameIndex].inApp = rules.isInApp(pythonFile: frame.file)
                    continue
                }
                let path = frame.module.map { paths[$0] ?? $0 }
                event.threads![threadIndex].frames![frameIndex].inApp = rules.isInApp(
                    modulePath: path, function: frame.function, file: frame.file, mangled: frame.mangled,
                    staticLibC: staticLibC)
            }
        }
        let frames = event.crashedThreadRecord?.frames ?? []
        if let culprit = frames.first(where: { $0.inApp == true && $0.function != nil }) ?? outsideCulprit(frames) {
            event.culprit = CulpritRecord(
                function: culprit.function, file: culprit.file, line: culprit.line, module: culprit.module)
        }
        event.title = title(event)
        Signature.mark(&event)
    }

    /// The culprit of a stack with no frame of the program's: the first named frame that does
    /// more than deliver the signal (never `raise`, `abort`, `pthread_kill`, the signal
    /// trampoline: Signature's machinery), else the first named frame.
    static func outsideCulprit(_ frames: [FrameRecord]) -> FrameRecord? {
        frames.first { $0.function.map { !Signature.isMachinery(Signature.normalized($0)) } ?? false }
            ?? frames.first { $0.function != nil }
    }

    /// Where the title says a crash with no native frame of the program's happened: the
    /// runtime's crash log's word for it (RuntimeReport.location), when it has one.
    static func runtimeLocation(_ event: Event) -> String? {
        let native = event.crashedThreadRecord?.frames?.contains { $0.inApp == true && $0.function != nil && $0.language == nil }
        return native == true ? nil : RuntimeReport.location(event)
    }

    /// What a test crash's title starts with (crashport_test_crash()).
    public static let testPrefix = "test crash: "

    /// Sentry's kind of title: what happened, then where in the program.
    /// "SIGABRT: uncaught exception config_error: the config file is missing in load_config (config.cpp:42)",
    /// "SIGSEGV: stack overflow in thread 'worker' in recurse (main.rs:3)", "ParseError: line 3 in parse_config (app.c:82)",
    /// "SIGABRT: killed by the watchdog (inferred) in serve_forever (server.c:42)"; a termination:
    /// "killed by SIGKILL", "killed by the OOM killer (SIGKILL)", "exited with status 3 without saying goodbye";
    /// a test crash: "test crash: SIGSEGV: segmentation fault at 0x0 in check_crash_reporting (app.c:12)".
    public static func title(_ event: Event) -> String {
        var what: String
        if event.kind == .error {
            what = event.reason ?? "error"
        } else if event.kind == .termination {
            let signal = event.signal?.name
            switch event.cause {
            case "oom-kill": what = "killed by the OOM killer (\(signal ?? "SIGKILL"))"
            case Watchdog.cause where Watchdog.isInferred(event):
                what = "killed by the watchdog (inferred, \(signal ?? "a signal"))"
            case "exit": what = event.reason ?? event.exitCode.map { "exited with status \($0)" } ?? "exited"
            default: what = signal.map { "killed by \($0)" } ?? "ended without saying goodbye (exit status unknown)"
            }
        } else if event.kind == .hang {
            what = "hang: \(event.reason ?? "no heartbeat")"
        } else if event.cause == Watchdog.cause {
            let signal = event.signal?.name ?? "signal"
            what =
                Watchdog.isInferred(event)
                ? "\(signal): killed by the watchdog (inferred)" : "\(signal): killed by crashport's hang watchdog"
        } else {
            let signal = event.signal?.name ?? "signal"
            if event.signal?.stackOverflow == true {
                let thread = event.crashedThreadRecord?.name.map { " in thread '\($0)'" } ?? ""
                what = "\(signal): stack overflow\(thread)"
            } else if let reason = event.reason {
                what = "\(signal): \(reason)"
            } else {
                let short = event.signal?.number.map { SignalNames.meaning($0) } ?? "crashed"
                what = "\(signal): \(short)"
                if let number = event.signal?.number, let code = event.signal?.code, let address = event.signal?.faultAddress,
                    SignalNames.hasFaultAddress(signal: number, code: code)
                {
                    what += " at \(address)"
                }
            }
        }
        what = String(what.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
        if what.count > 160 { what = String(what.prefix(159)) + "…" }
        if event.test == true { what = Self.testPrefix + what }
        if let location = runtimeLocation(event) { return "\(what) in \(location)" }
        guard let culprit = event.culprit, let function = culprit.function else { return what }
        return "\(what) in \(function)\(location(file: culprit.file, line: culprit.line))" + pythonCaller(event)
    }

    /// " (file.c:42)", from a path.
    static func location(file: String?, line: Int?) -> String {
        guard let file else { return "" }
        return " (\(file.split(separator: "/").last.map(String.init) ?? file)\(line.map { ":\($0)" } ?? ""))"
    }

    /// When the culprit is native code of the program's (a C extension) called from Python: "
    /// from parse_row (loader.py:42)", the program's innermost Python frame below it.
    static func pythonCaller(_ event: Event) -> String {
        let frames = event.crashedThreadRecord?.frames ?? []
        guard let culprit = frames.firstIndex(where: { $0.inApp == true && $0.function != nil }),
            frames[culprit].language == nil,
            let caller = frames[culprit...].first(where: { $0.language == FrameRecord.pythonLanguage && $0.inApp == true }),
            let function = caller.function
        else { return "" }
        return " from \(function)\(location(file: caller.file, line: caller.line))"
    }
}
