// swift-tools-version: 6.0
//
// A Swift program using crashport's CrashPort module: annotations, breadcrumbs, a handled error,
// its last run, and a crash. Copy this directory and point the dependency at your crashport
// checkout (or its git URL).
//
// CrashPort links libcrashport: give the linker its directory (DIR/lib after
// `tools/install --prefix DIR`, or a build tree's `.build/release`):
//   swift build -Xlinker -L -Xlinker DIR/lib -Xlinker -rpath -Xlinker DIR/lib
//   CRASHPORT_SOCKET=/run/crashport/crashport.sock .build/debug/Ledger     # a sidecar
//   crashport run -- .build/debug/Ledger                                   # or the launcher
import PackageDescription

let package = Package(
    name: "CrashPortExample",
    dependencies: [
        .package(name: "crashport", path: "../..")
    ],
    targets: [
        .executableTarget(name: "Ledger", dependencies: [.product(name: "CrashPort", package: "crashport")])
    ]
)
