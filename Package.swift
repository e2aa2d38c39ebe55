// swift-tools-version: 6.0
//
// crashport: an out-of-process crash reporter for Linux. The in-process stub (CSupport/stub) is
// built by tools/build-stub with the C compiler, not by SwiftPM, so no Swift runtime is ever
// loaded into a watched process. Everything here is the watcher side and its tests.
import PackageDescription

let package = Package(
    name: "crashport",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "crashport", targets: ["crashport"]),
        // The fuzz targets, for the libFuzzer package in Fuzz/ (built with -sanitize=fuzzer).
        .library(name: "FuzzTargets", targets: ["FuzzTargets"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0")
    ],
    targets: [
        // The wire ABI shared with the stub (header only; protocol.c holds its static checks).
        .target(name: "CCrashPortProtocol", path: "CSupport/protocol"),
        // Thin C over what Swift cannot call: variadic ptrace, recvmsg control messages,
        // libunwind's macro API. (ELF and DWARF are read by Symbolication's own readers.)
        .target(
            name: "CShims",
            path: "CSupport/shims",
            linkerSettings: [
                .linkedLibrary("unwind-generic"),
                .linkedLibrary("unwind"),
                .linkedLibrary("lzma"),
            ]
        ),
        // Bounds-checked byte reads and checked arithmetic: what every parser of hostile bytes
        // (files, target processes, the socket) reads through. A leaf.
        .target(name: "BoundedBytes"),
        .target(name: "ReportModel", dependencies: ["BoundedBytes"]),
        .target(name: "Inspection", dependencies: ["CShims"]),
        .target(
            name: "Symbolication", dependencies: ["BoundedBytes", "CShims"],
            linkerSettings: [.linkedLibrary("stdc++"), .linkedLibrary("z"), .linkedLibrary("iberty")]),
        .target(name: "Unwinding", dependencies: ["BoundedBytes", "CShims", "Symbolication"]),
        .target(
            name: "Watcher",
            dependencies: [
                "BoundedBytes", "CCrashPortProtocol", "CShims", "ReportModel", "Inspection", "Unwinding", "Symbolication",
            ]
        ),
        .executableTarget(
            name: "crashport",
            dependencies: ["Watcher", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .target(name: "TestSupport", dependencies: ["ReportModel"], path: "Tests/TestSupport"),
        // One entry point per parser of hostile bytes; Fuzz/ drives them under libFuzzer, and
        // FuzzRegressionTests replays the committed seeds and past crashes through them.
        .target(
            name: "FuzzTargets",
            dependencies: ["BoundedBytes", "CCrashPortProtocol", "ReportModel", "Symbolication", "Unwinding", "Watcher"],
            path: "Tests/FuzzTargets"),
        .testTarget(name: "FuzzRegressionTests", dependencies: ["FuzzTargets"]),
        .testTarget(name: "ReportModelTests", dependencies: ["ReportModel", "TestSupport"]),
        .testTarget(name: "WatcherTests", dependencies: ["Watcher", "CCrashPortProtocol", "TestSupport"]),
        .testTarget(name: "EndToEndTests", dependencies: ["ReportModel", "TestSupport"]),
        .testTarget(name: "SymbolicationTests", dependencies: ["BoundedBytes", "FuzzTargets", "Symbolication", "TestSupport"]),
        .testTarget(name: "InspectionTests", dependencies: ["Inspection", "TestSupport"]),
        .testTarget(name: "UnwindingTests", dependencies: ["Unwinding", "Symbolication", "BoundedBytes", "TestSupport"]),
    ]
)
