// swift-tools-version: 6.0
//
// The libFuzzer executable for crashport's parsers: a package of its own because every module
// it links is built with -sanitize=fuzzer (and address), which the root package's normal build
// must not be. Build and run it through tools/fuzz, which passes those flags:
//
//   swift build --package-path Fuzz --scratch-path .build-fuzz \
//       -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library
//
// The target to fuzz is chosen at run time by CRASHPORT_FUZZ_TARGET (see FuzzTarget).
import PackageDescription

let package = Package(
    name: "CrashportFuzz",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "crashport", path: "..")
    ],
    targets: [
        .executableTarget(
            name: "CrashportFuzzer",
            dependencies: [.product(name: "FuzzTargets", package: "crashport")]
        )
    ]
)
