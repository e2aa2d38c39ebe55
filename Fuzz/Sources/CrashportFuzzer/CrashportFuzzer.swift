// CrashportFuzzer: libFuzzer's entry points over FuzzTarget. CRASHPORT_FUZZ_TARGET names the
// target to run; every argument is libFuzzer's (-max_total_time=, -runs=, corpus folders).
//
// Who owns main: the module is built with -parse-as-library, so it defines no main of its own.
// SwiftPM links every Linux executable with `--defsym main=<Module>_main` (so tests can link an
// executable's code), which leaves `CrashportFuzzer_main` undefined under -parse-as-library
// (swiftlang/swift-package-manager#8731). So we define it, and hand control to libFuzzer's
// driver through LLVMFuzzerRunDriver, its documented entry point for programs with their own
// main; libFuzzer's main (in its archive) is then never linked.

import FuzzTargets

#if canImport(Glibc)
import Glibc
#endif

/// Set once, by LLVMFuzzerInitialize, before the first input.
nonisolated(unsafe) private var selected: FuzzTarget?

@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@_cdecl("CrashportFuzzer_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in fuzzerTestOneInput(data, size) }
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzerInitialize(
    _ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?
) -> CInt {
    let name = getenv("CRASHPORT_FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        let message = "CrashportFuzzer: set CRASHPORT_FUZZ_TARGET to one of: \(names)\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        exit(2)
    }
    selected = target
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    selected?.run(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    return 0
}
