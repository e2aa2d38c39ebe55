// Culprit: which frames are the program's own (in_app, Sentry's term), the first of them on the
// crashing thread (the report's culprit), and the one-line title built from it, the way Sentry,
// Crashlytics and Bugsnag lead with the program's frame rather than libc's abort machinery.
//
// The rule (docs/using.md, "Which frames are the program's"):
//  - a frame is not the program's when its module is a system or runtime library: a path under
//    /lib, /usr/lib, /lib64, /usr/lib64, /usr/libexec or /opt/swift, the dynamic loader, the vDSO,
//    or a file named like libc, libm, libstdc++, libgcc_s, libc++, libunwind, the Swift runtime
//    and Foundation, Rust's libstd, the JVM, Python, Node, or crashport's own stub;
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
    ]
    /// Prefixes of runtime functions' names.
    static let runtimeFunctions = [
        "std::", "core::", "alloc::", "<std::", "<core::", "<alloc::", "__rust", "rust_panic", "rust_begin_unwind",
        "__gnu_cxx::", "__cxxabiv1::", "__cxa_", "_Unwind_", "__gxx_", "Swift.", "static Swift.", "swift_",
        "Swift runtime failure", "__libc_start", "crashport_", "static CrashPort.", "CrashPort.",
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
    /// `function` from source `file` is the program's own.
    public func isInApp(modulePath: String?, function: String?, file: String? = nil) -> Bool {
        if let path = modulePath {
            if notInApp.contains(where: { Self.matches($0, path: path) }) { return false }
            if inApp.contains(where: { Self.matches($0, path: path) }) { return true }
        }
        if let function,
            Self.runtimeFunctionNames.contains(function) || Self.runtimeFunctions.contains(where: { function.hasPrefix($0) })
        {
            return false
        }
        if let file, Self.runtimeSources.contains(where: { file.hasPrefix($0) }) { return false }
        guard let path = modulePath else { return function != nil }
        if Self.systemDirectories.contains(where: { path.hasPrefix($0) }) { return false }
        return !Self.runtimeLibraries.contains { Self.matches($0, path: path) }
    }
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
        for threadIndex in (event.threads ?? []).indices {
            for frameIndex in (event.threads?[threadIndex].frames ?? []).indices {
                let frame = event.threads![threadIndex].frames![frameIndex]
                let path = frame.module.map { paths[$0] ?? $0 }
                event.threads![threadIndex].frames![frameIndex].inApp = rules.isInApp(
                    modulePath: path, function: frame.function, file: frame.file)
            }
        }
        let frames = event.crashedThreadRecord?.frames ?? []
        if let culprit = frames.first(where: { $0.inApp == true && $0.function != nil })
            ?? frames.first(where: { $0.function != nil })
        {
            event.culprit = CulpritRecord(
                function: culprit.function, file: culprit.file, line: culprit.line, module: culprit.module)
        }
        event.title = title(event)
    }

    /// Sentry's kind of title: what happened, then where in the program.
    /// "SIGABRT: uncaught exception config_error: the config file is missing in load_config (config.cpp:42)",
    /// "SIGSEGV: stack overflow in thread 'worker' in recurse (main.rs:3)", "ParseError: line 3 in parse_config (app.c:82)",
    /// "SIGABRT: killed by the watchdog (inferred) in serve_forever (server.c:42)"; a termination:
    /// "killed by SIGKILL", "killed by the OOM killer (SIGKILL)", "exited with status 3 without saying goodbye".
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
        guard let culprit = event.culprit, let function = culprit.function else { return what }
        var location = ""
        if let file = culprit.file {
            location = " (\(file.split(separator: "/").last.map(String.init) ?? file)\(culprit.line.map { ":\($0)" } ?? ""))"
        }
        return "\(what) in \(function)\(location)"
    }
}
