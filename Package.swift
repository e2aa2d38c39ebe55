// swift-tools-version: 6.0
//
// crashport: an out-of-process crash reporter for Linux. The in-process stub (CSupport/stub) is
// built by tools/build-stub with the C compiler, so no Swift runtime is ever loaded into a
// watched process; SwiftPM compiles the same C sources only into Swift programs that use the
// CrashPort module (CCrashPort). Everything else here is the watcher side and its tests.
//
// The targets are layers, lowest first; each depends only on layers below it:
//   BoundedBytes  →  ObjectFile  →  ReportModel, Symbolication, Unwinding
//   →  Processes (child processes, credentials, /proc), SystemLog (the kernel's log, the journal), CoreDump (the kernel's core stream)
//      and Runtimes (Python frames, perf maps, runtime crash logs, read from outside)
//   →  LiveProcess (a live process: ptrace, capture)  and  Reports (never a live process)
//   →  Store (what is on disk)  →  Upload (what leaves the machine)
//   →  Watcher (its modes, a folder each: Serving, Reporting, Observing, Launcher, Sidecar, HostLevel,
//      Doctor)  →  crashport (the command line)
import PackageDescription

let package = Package(
    name: "crashport",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "crashport", targets: ["crashport"]),
        // The fuzz targets, for the libFuzzer package in Fuzz/ (built with -sanitize=fuzzer).
        .library(name: "FuzzTargets", targets: ["FuzzTargets"]),
        // The app-facing API for Swift programs: a thin layer over the stub's C API, with the
        // stub compiled in (CCrashPort); examples/swift-api uses it.
        .library(name: "CrashPort", targets: ["CrashPort"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0")
    ],
    targets: [
        // C modules.
        // The wire ABI shared with the stub (header only; protocol.c holds its static checks).
        .target(name: "CCrashPortProtocol", path: "CSupport/protocol"),
        // The stub itself, compiled into a Swift program that uses the CrashPort module, so that
        // `swift build` alone links it (no -L, no rpath, from a path or a URL dependency): the
        // objects of tools/build-stub's libcrashport.a (interpose.c is libcrashport.so's only).
        // No flags (SwiftPM refuses unsafeFlags in a dependency): the crash-path files carry
        // their own rules (a clang pragma: no stack protector, no sanitizer; safe.h keeps its
        // loops from becoming libc calls), and SwiftPackageTests runs tools/check-stub-safety on
        // the objects SwiftPM builds, debug and release. Public header: include/crashport.h.
        .target(name: "CCrashPort", dependencies: ["CCrashPortProtocol"], path: "CSupport/stub", exclude: ["interpose.c"]),
        // The app-facing Swift API; not a layer of the watcher, which never links the stub.
        .target(name: "CrashPort", dependencies: ["CCrashPort"]),
        // Thin C over what Swift cannot call (variadic ptrace, recvmsg control messages,
        // libunwind's macro API and callback table), and crashport_libraries.h: the headers of
        // the other C libraries Swift calls (zlib, liblzma, libiberty, the C++ and Swift
        // runtimes' demanglers). Links libunwind, which unwind.c calls.
        .target(
            name: "CShims",
            path: "CSupport/shims",
            linkerSettings: [.linkedLibrary("unwind-generic"), .linkedLibrary("unwind"), .linkedLibrary("z")]
        ),
        // crashport.toml (upload's settings): toml++, a kept TOML 1.0 parser (Debian's
        // libtomlplusplus-dev), compiled in header-only behind a C function that gives JSON.
        .target(name: "CTOML", path: "CSupport/toml", linkerSettings: [.linkedLibrary("stdc++")]),
        // libelf (Debian libelf-dev), found through pkg-config.
        .systemLibrary(name: "CLibELF", path: "CSupport/libelf", pkgConfig: "libelf", providers: [.apt(["libelf-dev"])]),
        // capstone's header (Debian libcapstone-dev): the faulting instruction's decoder. Chosen
        // over Zydis because one API decodes x86 and arm64 (Zydis is x86 only), with each
        // operand's registers, size and read/write access. Not linked: Reports loads
        // libcapstone.so.4 at the first decode (MachineInstruction.swift says why).
        .systemLibrary(name: "CCapstone", path: "CSupport/capstone", providers: [.apt(["libcapstone-dev"])]),

        // Bounds-checked byte reads, checked arithmetic, the one memory-reader protocol and
        // captured memory regions: what every reader of hostile bytes (files, target processes,
        // the socket) reads through; and the few helpers every layer shares (SystemCallError,
        // writeAll, the clocks). A leaf.
        .target(name: "BoundedBytes"),
        // Object files: ELF containers through libelf (CLibELF), notes and build-ids, symbol
        // tables, section decompression (zlib and liblzma, declared by CShims' headers and
        // linked here), .eh_frame indexing, the DWARF cursor, and the one model of a loaded
        // module.
        .target(
            name: "ObjectFile", dependencies: ["BoundedBytes", "CLibELF", "CShims"],
            linkerSettings: [.linkedLibrary("z"), .linkedLibrary("lzma")]),
        // The formats that cross a boundary, as plain values: the crash record on the wire
        // (CCrashPortProtocol's header), the captured snapshot, the event JSON, the minidump.
        // Modules are ObjectFile's model.
        .target(name: "ReportModel", dependencies: ["BoundedBytes", "CCrashPortProtocol", "ObjectFile"]),
        // Addresses to functions, files and lines: our DWARF reader over ObjectFile's sections,
        // debug files, demangling (libiberty and libstdc++ through CShims' headers, linked here).
        .target(
            name: "Symbolication", dependencies: ["BoundedBytes", "CShims", "ObjectFile"],
            linkerSettings: [.linkedLibrary("stdc++"), .linkedLibrary("iberty")]),
        // Call stacks from registers and memory: libunwind (through CShims) over ObjectFile's
        // unwind tables; the walk, its recovery and its stack scan are here, in Swift.
        .target(name: "Unwinding", dependencies: ["BoundedBytes", "CShims", "ObjectFile"]),
        // The kernel's ELF core stream (core_pattern's pipe or socket), read in one pass with
        // bounded memory into the notes and the few bytes a report keeps. ReportModel for the
        // registers, ids and mappings it fills, and CaptureWindows, the ranges a live capture
        // keeps too.
        .target(name: "CoreDump", dependencies: ["BoundedBytes", "ReportModel"]),
        // Language runtimes inside a process, read from outside it: CPython's frames from its
        // memory (any MemoryReader: a held process, a core), a JIT's perf map, the crash logs the
        // JVM and Node write. Hostile bytes each; what they give is ReportModel's RuntimeState.
        .target(name: "Runtimes", dependencies: ["BoundedBytes", "ObjectFile", "ReportModel"]),
        // Processes as the OS shows them, without ptrace: the one child-process type
        // (ChildProcess: spawn, held spawn, and the one wait, whose statuses ProcessExit decodes)
        // over CShims' spawn.c, a user's Credentials (credentials.c) and /proc's files
        // (ProcFiles). What Store and Upload need of processes, below the ptrace layer.
        .target(name: "Processes", dependencies: ["BoundedBytes", "CShims", "ReportModel"]),
        // The system's own log around a crash: the kernel's records about the process (/dev/kmsg:
        // fault lines, the OOM killer's report) and journald's lines of its unit (journalctl, a
        // Processes child run as the report's owner), selected for what the owner may read.
        // ObjectFile for WatcherIdentity (root's open of /dev/kmsg from a client's report thread).
        .target(name: "SystemLog", dependencies: ["BoundedBytes", "ObjectFile", "Processes"]),
        // A live process: process memory read as a user (ProcessAccess), ptrace sessions, and
        // capture (a crash record and a suspended process in, a ProcessSnapshot out). Processes
        // for /proc and Credentials; Unwinding for the layout of the kernel's signal frame, which
        // capture follows to the stacks signals interrupted; CoreDump for a capture from the
        // kernel's core stream, completed from /proc while the kernel holds the dying process.
        // Symbolication for the DWARF of a Python interpreter built another way (a debug build),
        // whose structures' offsets Runtimes is handed (PythonDWARFLayouts).
        .target(
            name: "LiveProcess",
            dependencies: [
                "BoundedBytes", "CShims", "CoreDump", "ObjectFile", "Processes", "ReportModel", "Runtimes", "Symbolication",
                "Unwinding",
            ]),
        // From a snapshot (live or a minidump) or an event to a report: unwinding,
        // symbolication, the event, the text crash log, offline symbolication. Never touches a
        // live process, so everything here runs the same on another machine.
        .target(
            name: "Reports",
            dependencies: [
                "BoundedBytes", "CCapstone", "ObjectFile", "ReportModel", "Runtimes", "Symbolication", "Unwinding",
            ]),
        // What is on disk: the reports directory (quota, atomic commit, lookup), each program's
        // run history and sessions, attachments copied into a report, a user's files read with a
        // bound (UserFile). Processes for Credentials (a root watcher writes a user's reports
        // with that user's credentials) and a program's path (/proc/PID/exe); ObjectFile for a
        // program's build-id in its run history. Never the ptrace layer.
        .target(name: "Store", dependencies: ["BoundedBytes", "ObjectFile", "Processes", "ReportModel"]),
        // What leaves the machine: destinations (a Crashpad or Breakpad collector, Sentry), the
        // consent decisions and each report's upload state, privacy (what leaves by default,
        // before_send), one upload pass over a Store, HTTP through libcurl (CShims' http.c, behind
        // HTTPClient), the processes it starts (its hooks and background uploads, through
        // Processes' ChildProcess) and crashport.toml (CTOML), and a report in Sentry's shape
        // (SentryEvent, SentryEnvelope: an event.json in, bytes out). Not Reports: what leaves is
        // the event a report already wrote; not the ptrace layer.
        .target(
            name: "Upload",
            dependencies: ["BoundedBytes", "CShims", "CTOML", "Processes", "ReportModel", "Store"]),
        // The watcher's modes, one folder each over two shared ones: Serving (the crash socket:
        // WireServer and its checks), Reporting (CrashCapturer and the one ReportWriter every mode
        // calls), Observing (hangs, memory pressure), Launcher, Sidecar (clients, tracing, abnormal
        // ends, the spool), HostLevel (the kernel's core handler: CoreDump reads its core streams),
        // Doctor (which asks Symbolication whether debug files are found).
        // Processes for every child it starts (ChildProcess). CShims for the socket, signalfd
        // and thread-naming calls, each behind one typed wrapper (UnixSocket, SignalDescriptor,
        // Threads), and the coredump socket's (coredump.c).
        .target(
            name: "Watcher",
            dependencies: [
                "CCrashPortProtocol", "CShims", "CoreDump", "LiveProcess", "ObjectFile", "Processes", "ReportModel", "Reports",
                "Store", "Symbolication", "SystemLog", "Upload",
            ],
            // libzstd (Debian's libzstd-dev): --keep-core's core, compressed as coredumpctl reads it.
            linkerSettings: [.linkedLibrary("zstd")]
        ),
        // The command line, thin: parses arguments and calls the layers below.
        .executableTarget(
            name: "crashport",
            dependencies: [
                "BoundedBytes", "Processes", "ReportModel", "Reports", "Store", "Upload", "Watcher",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // Helpers every test target shares: fixtures, the built crashport, and the byte builders
        // (CCrashPortProtocol for the wire ABI's layout, ReportModel for the minidump's).
        .target(name: "TestSupport", dependencies: ["CCrashPortProtocol", "ReportModel"], path: "Tests/TestSupport"),
        // One entry point per parser of hostile bytes; Fuzz/ drives them under libFuzzer, and
        // FuzzRegressionTests replays the committed seeds and past crashes through them. Upload
        // for the Sentry event a fuzzed crash record's report is also turned into.
        .target(
            name: "FuzzTargets",
            dependencies: [
                "BoundedBytes", "CCrashPortProtocol", "CoreDump", "LiveProcess", "ObjectFile", "ReportModel", "Reports",
                "Runtimes", "Symbolication", "SystemLog", "Unwinding", "Upload",
            ],
            path: "Tests/FuzzTargets"),
        // One test target per layer (EndToEndTests runs the built crashport on real crashes).
        .testTarget(name: "BoundedBytesTests", dependencies: ["BoundedBytes"]),
        .testTarget(name: "ObjectFileTests", dependencies: ["BoundedBytes", "FuzzTargets", "ObjectFile", "TestSupport"]),
        .testTarget(
            name: "ReportModelTests",
            dependencies: ["BoundedBytes", "CCrashPortProtocol", "ObjectFile", "ReportModel", "TestSupport"]),
        .testTarget(name: "SymbolicationTests", dependencies: ["BoundedBytes", "ObjectFile", "Symbolication", "TestSupport"]),
        .testTarget(
            name: "UnwindingTests", dependencies: ["BoundedBytes", "ObjectFile", "Symbolication", "Unwinding", "TestSupport"]),
        .testTarget(
            name: "CoreDumpTests", dependencies: ["BoundedBytes", "CoreDump", "FuzzTargets", "ReportModel", "TestSupport"]),
        // Real children: /bin/sh, /bin/cat and /bin/sleep started, held, waited for, killed.
        // The kernel's records and journalctl's lines as this machine prints them, selected.
        .testTarget(name: "SystemLogTests", dependencies: ["SystemLog"]),
        .testTarget(name: "ProcessesTests", dependencies: ["BoundedBytes", "Processes", "ReportModel", "TestSupport"]),
        // Reports: a capture from a real kernel core is checked through the report pipeline.
        .testTarget(
            name: "LiveProcessTests",
            dependencies: [
                "BoundedBytes", "CoreDump", "LiveProcess", "ObjectFile", "Processes", "ReportModel", "Reports", "TestSupport",
            ]),
        // Runtimes: a real python3 read while it runs (a debug build through its DWARF,
        // Symbolication's), synthetic interpreters, perf maps, crash logs.
        .testTarget(
            name: "RuntimesTests",
            dependencies: [
                "BoundedBytes", "FuzzTargets", "LiveProcess", "ObjectFile", "Processes", "ReportModel", "Runtimes",
                "Symbolication", "TestSupport",
            ]),
        .testTarget(name: "ReportsTests", dependencies: ["BoundedBytes", "ObjectFile", "ReportModel", "Reports", "TestSupport"]),
        .testTarget(name: "StoreTests", dependencies: ["ReportModel", "Store", "TestSupport"]),
        // (UploadTests is the end-to-end class that uploads to a server; these need none.)
        .testTarget(name: "UploadUnitTests", dependencies: ["ReportModel", "Store", "TestSupport", "Upload"]),
        .testTarget(
            name: "WatcherTests",
            dependencies: ["BoundedBytes", "Processes", "Store", "Upload", "Watcher", "ReportModel", "TestSupport"]),
        .testTarget(name: "FuzzRegressionTests", dependencies: ["FuzzTargets"]),
        // Upload: the Sentry tests convert real reports with its SentryEvent, as an upload will;
        // the layers below the watcher for a real kernel core read and reported in the test's
        // own process (KernelCoreCaptureTests).
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "BoundedBytes", "CoreDump", "LiveProcess", "ObjectFile", "Processes", "ReportModel", "Reports", "TestSupport",
                "Upload",
            ]),
    ]
)
