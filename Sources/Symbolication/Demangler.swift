// Demangler: readable names for Swift, C++ (Itanium) and Rust (legacy and v0) symbols.
//
// Rust names, v0 (_R…) and legacy (_ZN…17h<16 hex>E), go through GNU libiberty's rust_demangle,
// the demangler of c++filt and gdb, without its verbose flag: "mycrate::Wrapper<T>::apply",
// "main::{{closure}}", "<main::Foo as core::fmt::Display>::fmt", with the legacy hash and v0's
// crate disambiguators left out, as rustc-demangle's alternate form ("{:#}") and Rust's own
// backtraces print them. Legacy names are tried as Rust before C++, in the order c++filt and
// gdb use: they are valid Itanium names too, which __cxa_demangle only half decodes (Rust's
// "$LT$" and "$u7b$" escapes, ".." for "::", stay as they are). libiberty recognises a legacy
// name by its hash segment, prints a segment's rest verbatim from a malformed escape on (as
// rustc-demangle does) and refuses a name whose lengths or hash do not parse; such a name is
// then read as C++, with the hash dropped when it is there (stripRustHash). One difference
// from rustc-demangle: libiberty (20230104, Debian 12) decodes only ASCII "$u…$" escapes, so the
// non-ASCII ones it leaves ("caf$ue9$") are decoded here ("café"), as rustc-demangle does.
// Swift names go through the Swift runtime's own demangler, in the simplified form Swift's
// backtracer prints (_swift_backtrace_demangle; swift_demangle's full form as a fallback);
// Itanium names through the C++ runtime's __cxa_demangle. A name that cannot be demangled is
// returned unchanged by `readable`.
//
// Names are untrusted bytes from a file or a process: every demangler here bounds its work
// (libiberty's Rust demangler checks lengths and limits recursion, and returns NULL on
// malformed input).

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
        if name.hasPrefix("_R") { return rust(name) }
        if name.hasPrefix("_ZN"), let text = rust(name) { return decodingUnicodeEscapes(text) }
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

    /// A Rust v0 or legacy name through libiberty's rust_demangle, or nil when libiberty does not
    /// take it for one. Without DMGL_VERBOSE: no legacy hash, no v0 crate disambiguators.
    static func rust(_ name: String) -> String? {
        guard let result = name.withCString({ rust_demangle($0, DMGL_PARAMS | DMGL_ANSI) }) else { return nil }
        defer { free(result) }
        return String(cString: result)
    }

    /// Rust legacy "$u<hex>$" escapes of non-ASCII characters (U+00A0 and above: no controls)
    /// that libiberty left in `text`, decoded; any other escape stays as it is.
    static func decodingUnicodeEscapes(_ text: String) -> String {
        let bytes = Array(text.utf8)
        guard bytes.count > 3 else { return text }
        let dollar = UInt8(ascii: "$")
        var result = String.UnicodeScalarView()
        var index = 0
        while index < bytes.count {
            if bytes[index] == dollar, index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") {
                var end = index + 2
                var value: UInt32 = 0
                while end < bytes.count, end - index - 2 < 6, let digit = Self.hexValue(bytes[end]) {
                    value = value << 4 | digit
                    end += 1
                }
                if end > index + 2, end < bytes.count, bytes[end] == dollar, value >= 0xA0, let scalar = Unicode.Scalar(value) {
                    result.append(scalar)
                    index = end + 1
                    continue
                }
            }
            // Copy one whole UTF-8 sequence: the text came from a String, so it is valid.
            var next = index + 1
            while next < bytes.count, bytes[next] & 0xC0 == 0x80 { next += 1 }
            result.append(contentsOf: String(decoding: bytes[index..<next], as: UTF8.self).unicodeScalars)
            index = next
        }
        return String(result)
    }

    static func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(byte - UInt8(ascii: "a") + 10)
        default: return nil
        }
    }

    static func isSwift(_ name: String) -> Bool {
        for prefix in ["$s", "_$s", "$S", "_$S", "$e", "_$e", "_T0"] where name.hasPrefix(prefix) { return true }
        return false
    }

    /// Rust legacy symbols end in "::h" + 16 hex digits: dropped from a name libiberty refused
    /// (a malformed escape) and __cxa_demangle read, a partial decode better than none.
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
