// RustPanic: a Rust panic that aborted the process (panic=abort, a panic in a function that
// cannot unwind, a panic while panicking) is named as one, with its message when the stack
// still points at it.
//
// The panic machinery's frames (core::panicking::*, std::panicking::*) are still on the crashed
// thread's stack under abort(). Its payload, a FormatStringPayload whose String the default hook
// filled, or a StaticStrPayload's &str, is a (pointer, length) pair in those frames: the first
// printable text the stack points at above the stack pointer (StackStrings, read while the
// process was held). Tried on rustc 1.95 at opt-level 0 and 3, for panic!, unwrap, expect,
// index out of bounds, a Result's unwrap and a thread's panic, editions 2015 and 2021: the
// first text of at least two characters was the message each time.

import ReportModel

enum RustPanic {
    /// Whether `function` is the Rust panic machinery.
    static func isPanicMachinery(_ function: String) -> Bool {
        function.hasPrefix("core::panicking::") || function.hasPrefix("std::panicking::")
            || function == "rust_panic" || function.hasSuffix("rust_begin_unwind")
    }

    /// The panic's message, "" when the crashed thread panicked but no text was found, nil when
    /// the crashed thread's frames show no panic.
    static func message(frames: [FrameRecord], strings: [StackString]) -> String? {
        guard frames.contains(where: { $0.function.map(isPanicMachinery) == true }) else { return nil }
        guard let text = strings.first else { return "" }
        return text.text + (text.truncated ? "…" : "")
    }
}
