// CloneSuffixes: the suffixes GCC gives the symbols of a function's clones and split parts.
//
// GCC names the code it makes from one source function after it: `f.cold` (the unlikely part
// split off), `f.hot`, `f.constprop.0` (a copy specialised for a constant argument),
// `f.isra.0` (scalar replacement of aggregates), `f.part.0` (partial inlining's outlined rest),
// `f.lto_priv.0` (a local renamed by LTO), `f.localalias` (a local alias of a global), and
// combinations (`f.constprop.0.isra.0`, `f.part.0.cold`). gdb, addr2line and the DWARF call
// all of these `f`. Only these suffixes, at the end of the name, go: a Swift, Rust or C++ name
// keeps its dots elsewhere, and a mangled C++ name with such a suffix (`_ZN3foo3barEv.cold`)
// keeps its mangling, so it demangles as the function's own.

public enum CloneSuffixes {
    /// GCC's clone and split-part suffixes, without the dot and the number after them.
    static let kinds: Set<Substring> = ["cold", "hot", "constprop", "isra", "part", "lto_priv", "localalias"]

    /// `name` without its trailing GCC clone suffixes (`worker_loop.cold` → `worker_loop`,
    /// `bind_port.constprop.0.isra.0` → `bind_port`); nil when it has none.
    public static func stripped(_ name: String) -> String? {
        var end = name.endIndex
        while let dot = name[..<end].lastIndex(of: ".") {
            var component = name[name.index(after: dot)..<end]
            var start = dot
            // A number belongs to the suffix before it: `.constprop.0`, `.cold.1`.
            if !component.isEmpty, component.allSatisfy(\.isASCIIDigitCharacter) {
                guard let kindDot = name[..<dot].lastIndex(of: ".") else { break }
                component = name[name.index(after: kindDot)..<dot]
                start = kindDot
            }
            guard kinds.contains(component), start > name.startIndex else { break }
            end = start
        }
        return end == name.endIndex ? nil : String(name[..<end])
    }
}

extension Character {
    fileprivate var isASCIIDigitCharacter: Bool { isASCII && isNumber }
}
