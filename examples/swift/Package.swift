// swift-tools-version: 5.9
//
// A Swift program that reports its crashes through crashport: libcrashport is a system library
// found with pkg-config (crashport.pc, installed by crashport's tools/install --prefix DIR).
//
//   swift build                     # crashport installed in /usr/local or /usr
//   PKG_CONFIG_PATH=DIR/lib/pkgconfig swift build -Xlinker -rpath -Xlinker DIR/lib   # elsewhere
//
// SwiftPM drops crashport.pc's -Wl flags (the rpath among them) with a "prohibited flag(s)"
// warning; the App calls crashport_install, so it keeps libcrashport without them.
//   CRASHPORT_SOCKET=/run/crashport/crashport.sock .build/debug/App
import PackageDescription

let package = Package(
    name: "CrashportSwiftExample",
    targets: [
        // crashport.h and libcrashport, from crashport.pc (module.modulemap names shim.h).
        .systemLibrary(name: "CCrashport", path: "Sources/CCrashport", pkgConfig: "crashport"),
        .executableTarget(name: "App", dependencies: ["CCrashport"]),
    ]
)
