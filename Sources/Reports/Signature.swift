// Signature: what identifies a bug, so that 40 reports read as 3 bugs on the machine and on the
// server alike. Every report gets a readable `signature` (Socorro's form: the frames that decide
// it, joined by " | ") and a `fingerprint` (16 hex digits) over that signature and the kind of
// fault, computed from nothing that varies between runs, machines or builds: no addresses,
// offsets, lines, thread ids, clone suffixes or template arguments.
//
// The rules (README, "Which reports are one bug"):
//  - the culprit: the crashing thread's first in-app frame (Culprit's rule), its function
//    normalised: GCC's clone and split suffixes dropped (`.cold`, `.constprop.0`, `.isra.0`,
//    `.part.0`), C++ argument lists, return types and template arguments dropped
//    (`int lookup<int>(std::vector<int> const&, unsigned long)` → `lookup`), Swift's
//    `specialized`/`merged` prefixes dropped, Go's `.abi0` dropped;
//  - before it, Socorro's prefix rule: when the frame the program called is one of the C library's
//    memory, string or allocator functions (`strlen`, `memcpy`, `free`, …), it leads the signature
//    (`strlen | parse_records`), named as the C library declares it, whatever variant ran
//    (`__strlen_evex`, `__memmove_avx_unaligned_erms`: the machine's CPU chooses those);
//  - the machinery that only delivers the fault is never part of it: abort, raise, assert's and
//    malloc's reporting, the signal trampoline, std::terminate, Swift's and Rust's panic paths;
//  - the fault: the kind, the signal, and what the runtime said of it where that is the same in
//    every build: the C++ exception's type, the Swift runtime failure ("Index out of range");
//    a termination's cause (SIGKILL, oom-kill, the exit status), except that a fatal signal no
//    handler reported (no stub) is the crash it was;
//  - the module the culprit is in, by file name without its version (`libplugin.so`), so that a
//    function called `main` is two bugs in two programs.
// No in-app frame: the first frame that is not machinery stands in; no frames at all: the
// program's name and the fault alone.
//
// FNV-1a (64 bits) makes the fingerprint: not a secret, only a stable name that needs no
// library; the signature is kept beside it for people.

import BoundedBytes
import ReportModel
import Symbolication

public enum Signature {
    /// Sets the event's `signature` and `fingerprint` from its frames (marked in-app and with a
    /// culprit by Culprit.mark) and its fault. Idempotent.
    public static func mark(_ event: inout Event) {
        let parts = self.parts(of: event)
        event.signature = parts.signature
        event.fingerprint = fingerprint(parts)
    }

    struct Parts: Equatable {
        var signature: String
        var fault: String
        var module: String
    }

    static func parts(of event: Event) -> Parts {
        let frames = (event.crashedThreadRecord?.frames ?? []).filter { $0.function != nil }
        var names: [String] = []
        var module = ""
        if let culpritIndex = frames.firstIndex(where: { $0.inApp == true }) {
            let culprit = frames[culpritIndex]
            // The function the program called, if it is one of the C library's prefix functions.
            if let called = frames[..<culpritIndex].last(where: { !isMachinery(normalized($0.function!)) }),
                let name = cLibraryFunction(normalized(called.function!))
            {
                names.append(name)
            }
            names.append(normalized(culprit.function!))
            // A Python frame's module is its source file.
            module = moduleName(culprit.language == FrameRecord.pythonLanguage ? culprit.file : culprit.module)
        } else if let first = frames.first(where: { !isMachinery(normalized($0.function!)) }) {
            names.append(cLibraryFunction(normalized(first.function!)) ?? normalized(first.function!))
            module = moduleName(first.module)
        }
        if names.isEmpty { module = moduleName(event.process?.executable) }
        return Parts(signature: names.joined(separator: " | "), fault: fault(of: event), module: module)
    }

    static func fingerprint(_ parts: Parts) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "crashport-signature-1\n\(parts.fault)\n\(parts.module)\n\(parts.signature)".utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    // MARK: The fault

    /// What went wrong, in words that are the same in every build of the same bug.
    static func fault(of event: Event) -> String {
        let kind = event.kind?.rawValue ?? "crash"
        switch event.kind {
        case .termination? where event.cause == "signal":
            // A fatal signal no handler reported (no stub, or before it installed): a crash.
            return "crash \(event.signal?.name ?? "-")"
        case .termination?:
            let detail = event.cause == "exit" ? "exit \(event.exitCode.map(String.init) ?? "?")" : event.cause ?? "?"
            return "\(kind) \(event.signal?.name ?? "-") \(detail)"
        case .hang?:
            return kind
        case .error?:
            return "\(kind) \(event.exception?.type ?? firstWord(event.reason) ?? "-")"
        default:
            var text = "\(kind) \(event.signal?.name ?? "-")"
            if let type = event.exception?.type {
                text += " \(type)"
            } else if let failure = runtimeFailure(event) {
                text += " \(failure)"
            }
            return text
        }
    }

    /// Swift's runtime failure, the same at -Onone ("…/ContiguousArrayBuffer.swift:692: Fatal
    /// error: Index out of range") and at -O (its trap frame, "Swift runtime failure: Index out of
    /// range").
    static func runtimeFailure(_ event: Event) -> String? {
        let trap = "Swift runtime failure: "
        if let frame = event.crashedThreadRecord?.frames?.first(where: { $0.function?.hasPrefix(trap) == true }) {
            return String(frame.function!.dropFirst(trap.count))
        }
        guard let reason = event.reason else { return nil }
        for marker in ["Fatal error: ", trap] {
            if let range = reason.firstUTF8Range(of: marker) {
                let message = reason[range.upperBound...].split(separator: "\n").first.map(String.init) ?? ""
                return message.isEmpty ? nil : message
            }
        }
        return nil
    }

    static func firstWord(_ text: String?) -> String? {
        text?.split(whereSeparator: { $0 == ":" || $0 == " " || $0 == "\n" }).first.map(String.init)
    }

    // MARK: Names

    /// A function's name with what varies between builds taken out.
    public static func normalized(_ function: String) -> String {
        var name = function
        for prefix in ["specialized ", "merged ", "partial apply for ", "reabstraction thunk helper from "]
        where name.hasPrefix(prefix) {
            name.removeFirst(prefix.count)
        }
        name = droppingCloneSuffixes(name)
        if name.hasSuffix(".abi0") { name.removeLast(5) }
        if looksLikeCxx(name) { name = simplifiedCxx(name) }
        return name
    }

    /// `f.cold`, `f.constprop.0`, `f.isra.0`, `f.part.0.isra.0`, `f.lto_priv.0`: `f`
    /// (Symbolication's CloneSuffixes), for reports written before frames were named so.
    public static func droppingCloneSuffixes(_ name: String) -> String { CloneSuffixes.stripped(name) ?? name }

    /// A demangled C++ name: has `::` or an argument list, and is not Swift's (`(_:)`, `(at:)`).
    static func looksLikeCxx(_ name: String) -> Bool {
        guard name.containsUTF8("::") || name.containsUTF8("(") else { return false }
        // Go's methods: `main.(*ledger).credit`.
        if !name.containsUTF8("::") && name.containsUTF8(".(") { return false }
        return !name.containsUTF8(":)") && !name.containsUTF8(" in ") && !name.hasPrefix("<")
    }

    /// `int lookup<int>(std::vector<int> const&, unsigned long)` → `lookup`;
    /// `Ledger::credit(std::string const&, long) const` → `Ledger::credit`;
    /// `main::{lambda()#1}::operator()() const` → `main::{lambda()#1}::operator()`.
    static func simplifiedCxx(_ name: String) -> String {
        var output = ""
        var angle = 0
        var paren = 0
        var characters = Array(name)
        // The argument list: the last top-level "(…)", and the qualifiers after it.
        if let close = characters.lastIndex(of: ")") {
            var depth = 0
            var index = close
            while index >= 0 {
                if characters[index] == ")" { depth += 1 }
                if characters[index] == "(" {
                    depth -= 1
                    if depth == 0 { break }
                }
                index -= 1
            }
            let isOperatorCall = index >= 8 && String(characters[(index - 8)..<index]) == "operator"
            if index > 0 && !isOperatorCall { characters = Array(characters[..<index]) }
        }
        var index = 0
        while index < characters.count {
            let character = characters[index]
            let rest = String(characters[index...])
            if rest.hasPrefix("operator") {
                // Operators' own angle brackets and parentheses are part of the name.
                let operators = [
                    "operator<<=", "operator>>=", "operator<<", "operator>>", "operator<=", "operator>=",
                    "operator->", "operator<", "operator>", "operator()",
                ]
                if angle == 0, let op = operators.first(where: { rest.hasPrefix($0) }) {
                    output += op
                    index += op.count
                    continue
                }
            }
            switch character {
            case "<": angle += 1
            case ">": angle = max(0, angle - 1)
            case "(" where angle == 0:
                paren += 1
                output.append(character)
            case ")" where angle == 0:
                paren = max(0, paren - 1)
                output.append(character)
            case " " where angle == 0 && paren == 0:
                // A return type before the name: keep what follows the last top-level space
                // (not the space between an operator and its template arguments).
                if characters.dropFirst(index + 1).first != "<" { output = "" }
            default:
                if angle == 0 { output.append(character) }
            }
            index += 1
        }
        return output.isEmpty ? name : output
    }

    /// glibc's CPU-specific variants under the name the C library declares: `__strlen_evex`,
    /// `__memmove_avx_unaligned_erms`, `__libc_free` and `__GI___libc_free` read `strlen`,
    /// `memmove`, `free`; nil for a function that is not one of the prefix functions.
    static func cLibraryFunction(_ name: String) -> String? {
        var base = name
        if base.hasPrefix("__GI_") { base.removeFirst(5) }
        while base.hasPrefix("_") { base.removeFirst() }
        if base.hasPrefix("libc_") { base.removeFirst(5) }
        if base == "cfree" { return "free" }
        if prefixFunctions.contains(base) { return base }
        // strlen_evex, memmove_avx_unaligned_erms, strchr_sse2_no_bsf.
        let words = base.split(separator: "_")
        guard let first = words.first, prefixFunctions.contains(String(first)), words.count > 1,
            words.dropFirst().allSatisfy({ variantWords.contains(String($0)) || $0.allSatisfy(\.isNumber) })
        else { return nil }
        return String(first)
    }

    /// Socorro's prefix list, for the C library: the functions whose crash is the caller's bug.
    static let prefixFunctions: Set<String> = [
        "memcpy", "memmove", "memset", "memcmp", "memchr", "memrchr", "mempcpy", "bcmp", "strlen", "strnlen", "strcpy",
        "strncpy", "stpcpy", "stpncpy", "strcat", "strncat", "strcmp", "strncmp", "strcasecmp", "strncasecmp", "strchr",
        "strrchr", "strchrnul", "strstr", "strspn", "strcspn", "strpbrk", "strdup", "strndup", "strtok", "rawmemchr",
        "wcslen", "wcscpy", "wcscmp", "wmemset", "wmemcpy", "malloc", "calloc", "realloc", "free", "cfree",
        "reallocarray", "memalign", "posix_memalign", "aligned_alloc", "qsort", "bsearch", "printf", "fprintf",
        "sprintf", "snprintf", "vfprintf", "vsnprintf", "fputs", "fwrite", "fread", "fclose", "fflush", "puts",
        "sscanf", "atoi", "strtol", "strtoul", "strtod", "getenv", "setenv",
    ]
    static let variantWords: Set<String> = [
        "avx", "avx2", "avx512", "avx512f", "avx512bw", "evex", "evex512", "sse", "sse2", "sse3", "sse4", "ssse3",
        "erms", "unaligned", "aligned", "rtm", "vzeroupper", "no", "bsf", "bmi2", "fsrm", "nt", "generic", "chk",
        "internal", "impl", "back", "l",
    ]

    /// Frames that only deliver the fault.
    static func isMachinery(_ name: String) -> Bool {
        if machineryNames.contains(name) { return true }
        return machineryPrefixes.contains { name.hasPrefix($0) }
    }

    static let machineryNames: Set<String> = [
        FrameRecord.signalHandlerCalled, "raise", "abort", "gsignal", "__GI_raise", "__GI_abort", "__pthread_kill",
        "pthread_kill", "__pthread_kill_implementation", "__pthread_kill_internal", "__restore_rt", "__libc_message",
        "__libc_message_impl", "malloc_printerr", "__assert_fail", "__assert_fail_base", "__assert_perror_fail",
        "__fortify_fail", "__chk_fail", "__stack_chk_fail", "std::terminate", "__cxa_throw", "__cxa_rethrow",
        "_Unwind_RaiseException", "_Unwind_Resume", "__gnu_cxx::__verbose_terminate_handler", "_assertionFailure",
        "_fatalErrorMessage", "swift_reportFatalError", "runtime.raise", "runtime.dieFromSignal", "runtime.crash",
        "runtime.fatalthrow", "runtime.fatalpanic", "runtime.throw", "runtime.sigpanic", "runtime.gopanic",
        "runtime.sighandler", "runtime.sigtrampgo", "runtime.sigtramp", "rust_panic", "rust_begin_unwind",
        "crashport_report_error", "crashport_report_errorf",
    ]
    static let machineryPrefixes = [
        "__cxxabiv1::", "Swift runtime failure", "closure #1 in closure #1 in _assertionFailure", "std::panicking::",
        "core::panicking::", "std::rt::", "std::sys::", "std::sys_common::backtrace::", "core::option::unwrap_failed",
        "core::option::expect_failed", "core::result::unwrap_failed", "__rust_",
        "std::__throw_", "std::__terminate", "crashport_",
    ]

    /// `libplugin.so.1.2` → `libplugin.so`; a path → its file name.
    static func moduleName(_ module: String?) -> String {
        guard var name = module?.split(separator: "/").last.map(String.init) else { return "" }
        if let range = name.firstUTF8Range(of: ".so.") { name = String(name[..<range.upperBound].dropLast()) }
        return name
    }
}
