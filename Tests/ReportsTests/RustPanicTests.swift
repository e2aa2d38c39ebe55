// Which abort is a Rust panic (RustPanic): the machinery inner to the program's first frame of
// a SIGABRT, never the catch_unwind below a thread's fault; and which stack text is its message.

import ReportModel
import XCTest

@testable import Reports

#if canImport(Glibc)
import Glibc
#endif

final class RustPanicTests: XCTestCase {
    func frame(_ function: String, inApp: Bool) -> FrameRecord {
        var frame = FrameRecord(function: function)
        frame.inApp = inApp
        return frame
    }

    var panicking: [FrameRecord] {
        [
            frame("abort", inApp: false), frame("std::process::abort", inApp: false),
            frame("std::panicking::rust_panic_with_hook", inApp: false), frame("core::panicking::panic_fmt", inApp: false),
            frame("app::parse", inApp: true), frame("std::panicking::try", inApp: false), frame("main", inApp: true),
        ]
    }

    func testAPanicIsTheMachineryAboveTheProgramsFrameOfAnAbort() {
        XCTAssertTrue(RustPanic.panicked(frames: panicking, signal: SIGABRT))
        XCTAssertFalse(RustPanic.panicked(frames: panicking, signal: SIGSEGV), "a fault is the fault")
        // A thread's own abort: catch_unwind is below the program's frame.
        let aborted = [
            frame("abort", inApp: false), frame("app::apply_update", inApp: true), frame("std::panicking::try", inApp: false),
        ]
        XCTAssertFalse(RustPanic.panicked(frames: aborted, signal: SIGABRT))
        // No frame of the program's at all: the machinery anywhere says it.
        XCTAssertTrue(RustPanic.panicked(frames: panicking.filter { $0.inApp == false }, signal: SIGABRT))
    }

    func testTheMessageIsTheFirstTextOfFourCharactersOrMore() {
        let texts = [
            StackString(slot: 0x10, text: "R ", truncated: false),
            StackString(slot: 0x18, text: "called `Option::unwrap()` on a `None` value", truncated: false),
        ]
        XCTAssertEqual(
            RustPanic.message(frames: panicking, signal: SIGABRT, strings: texts), "called `Option::unwrap()` on a `None` value")
        XCTAssertEqual(
            RustPanic.message(frames: panicking, signal: SIGABRT, strings: [StackString(slot: 0, text: "ok", truncated: false)]),
            "ok", "a short one when it is all there is")
        XCTAssertEqual(RustPanic.message(frames: panicking, signal: SIGABRT, strings: []), "")
        XCTAssertNil(RustPanic.message(frames: panicking, signal: SIGSEGV, strings: texts))
    }
}
