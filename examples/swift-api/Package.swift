// swift-tools-version: 6.0
//
// Swift programs using crashport's CrashPort module: Ledger (annotations, breadcrumbs, a handled
// error, its last run, and a crash) and SafeMode (launch protection: safe mode after three
// launch crashes in a row; SafeModeAsync: the program's own predicate and an async repair) and
// ConsentDialog (the reports awaiting consent, a decision for each) and ScriptErrors (handled
// errors with stacks of their own).
// Copy this directory and point the dependency at your crashport
// checkout (or its git URL).
//
// The stub is compiled into the program from crashport's C sources: nothing to link by hand.
//   swift build
//   CRASHPORT_SOCKET=/run/crashport/crashport.sock .build/debug/Ledger     # a sidecar
//   crashport run -- .build/debug/Ledger                                   # or the launcher
import PackageDescription

let package = Package(
    name: "CrashPortExample",
    dependencies: [
        .package(name: "crashport", path: "../..")
    ],
    targets: [
        .executableTarget(name: "Ledger", dependencies: [.product(name: "CrashPort", package: "crashport")]),
        // Launch protection: safe mode after three launch crashes in a row.
        .executableTarget(name: "SafeMode", dependencies: [.product(name: "CrashPort", package: "crashport")]),
        // The same for a repair that must wait: the program's own predicate, an async protect.
        .executableTarget(name: "SafeModeAsync", dependencies: [.product(name: "CrashPort", package: "crashport")]),
        // A consent dialog: the reports awaiting consent, and a decision for each.
        .executableTarget(name: "ConsentDialog", dependencies: [.product(name: "CrashPort", package: "crashport")]),
        // Handled errors with their own stacks: a saved one, an interpreter's, one far too deep.
        .executableTarget(name: "ScriptErrors", dependencies: [.product(name: "CrashPort", package: "crashport")]),
    ]
)
