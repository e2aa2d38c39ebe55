// RustPanic: a Rust panic that aborted the process (panic=abort, a panic in a function that
// cannot unwind, a panic while panicking) is named as one, with its message when the stack
// still points at it; any other fault of a Rust program is the fault it is.
//
// A panic ends in abort(): SIGABRT, with the panic machinery's frames (core::panicking::*,
// std::panicking::*, rust_begin_unwind) between abort and the program's frame that panicked.
// The machinery's frames alone say nothing: every thread std::thread starts runs its closure
// under std::panicking::catch_unwind, so a worker thread's segfault has std::panicking frames
// below the program's frame that faulted, and that is no panic. So: a panic is a SIGABRT whose
// crashed thread shows panic machinery before (inner to) its first in-app frame, or anywhere
// when no frame is the program's.
//
// Its payload, a FormatStringPayload whose String the default hook filled, or a
// StaticStrPayload's &str, is a (pointer, length) pair in those frames: the first printable text
// the stack points at above the stack pointer (StackStrings, read while the process was held).
// Tried on rustc 1.95 at opt-level 0 and 3, for panic!, unwrap, expect, index out of bounds, a
// Result's unwrap and a thread's panic, editions 2015 and 2021: the first text of at least four
// characters was the message each time (the first of two or three, now and then, was a pointer
// and a small number that happened to lie side by side: "R ").

import ReportModel

#if canImport(Glibc)
import Glibc
#endif

enum RustPanic {
    /// Whether `function` is the Rust panic machinery.
    static func isPanicMachinery(_ function: String) -> Bool {
        function.hasPrefix("core::panicking::") || function.hasPrefix("std::panicking::")
            || function == "rust_panic" || function.hasSuffix("rust_begin_unwind")
    }

    /// Whether the crashed thread's `frames` (in-app marked: Culprit.mark) show a panic that
    /// ended in the abort of `signal`.
    static func panicked(frames: [FrameRecord], signal: Int32?) -> Bool {
        guard signal == SIGABRT else { return false }
        for frame in frames {
            if frame.function.map(isPanicMachinery) == true { return true }
            if frame.inApp == true { return false }
        }
        return false
    }

    /// The panic's message, "" when the crashed thread panicked but no text was found, nil when
    /// it did not panic (see `panicked`).
    static func message(frames: [FrameRecord], signal: Int32?, strings: [StackString]) -> String? {
        guard panicked(frames: frames, signal: signal) else { return nil }
        // A pair that only happens to be a pointer beside a small number reads as text of two
        // or three printable bytes about one time in seven (ASLR decides which, run by run):
        // a text of four characters or more first, a shorter one only when there is no other.
        guard let text = strings.first(where: { $0.text.unicodeScalars.count >= 4 }) ?? strings.first else { return "" }
        return text.text + (text.truncated ? "…" : "")
    }
}
