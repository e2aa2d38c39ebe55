// Demangler: readable names for Swift, C++ (Itanium) and Rust (legacy) symbols.
//
// Rust v0 names (_R…) go through GNU libiberty's rust_demangle, the demangler binutils uses,
// without its verbose flag: "mycrate::foo::bar", as Rust's own backtraces print them.
// Swift names go through the Swift runtime's own demangler, in the simplified form Swift's
// backtracer prints (_swift_backtrace_demangle; swift_demangle's full form as a fallback);
// Itanium names through the C++ runtime's __cxa_demangle. Rust legacy names are
// Itanium-mangled with a trailing "::h<16 hex>" hash, which is dropped as rustfilt does. A
// name that cannot be demangled is returned unchanged by `readable`.

// The C functions are declared by CShims' crashport_libraries.h.

import ObjectFile
import CShims
#if canImport(Glibc)
import Glibc
#endif

public enum Demangler {
    /// The demangled form of `name`, or nil when it is not a mangled name we can read.
    public static func demangle(_ name: String) -> String? {
        if isSwift(name) {
            return name.withCString { pointer -> String? in
                if let simplified = _swift_backtrace_demangle(pointer, strlen(pointer), nil, nil) {
                    defer { free(simplified) }
                    let text = String(cString: simplified)
                    if text != name { return text }
                }
                guard let result = swift_demangle(pointer, strlen(pointer), nil, nil, 0) else { return nil }
                defer { free(result) }
                let text = String(cString: result)
                return text == name ? nil : text
            }
        }
        if name.hasPrefix("_R") {
            // Parameters, no crate disambiguator hashes (no DMGL_VERBOSE).
            guard let result = name.withCString({ rust_demangle($0, DMGL_PARAMS | DMGL_ANSI) }) else { return nil }
            defer { free(result) }
            return String(cString: result)
        }
        if name.hasPrefix("_Z") {
            var status: Int32 = 0
            guard let result = name.withCString({ __cxa_demangle($0, nil, nil, &status) }), status == 0 else { return nil }
            defer { free(result) }
            return stripRustHash(String(cString: result))
        }
        return nil
    }

    /// `demangle(name) ?? name`.
    public static func readable(_ name: String) -> String { demangle(name) ?? name }

    static func isSwift(_ name: String) -> Bool {
        for prefix in ["$s", "_$s", "$S", "_$S", "$e", "_$e", "_T0"] where name.hasPrefix(prefix) { return true }
        return false
    }

    /// Rust legacy symbols end in "::h" + 16 hex digits.
    static func stripRustHash(_ text: String) -> String {
        let scalars = Array(text.utf8)
        guard scalars.count > 19 else { return text }
        let hashStart = scalars.count - 16
        guard scalars[hashStart - 3] == UInt8(ascii: ":"), scalars[hashStart - 2] == UInt8(ascii: ":"),
            scalars[hashStart - 1] == UInt8(ascii: "h"),
            scalars[hashStart...].allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) })
        else { return text }
        return String(decoding: scalars[..<(hashStart - 3)], as: UTF8.self)
    }
}
