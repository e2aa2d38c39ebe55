// StackScan.endsWithCall: is a stack word right after a call instruction? The bytes before a
// candidate return address, as x86_64 encodes the calls compilers emit.

@testable import Unwinding
import XCTest

final class StackScanTests: XCTestCase {
    /// `instruction` as the last bytes before a return address, after `padding` unrelated bytes.
    func endsWithCall(_ instruction: [UInt8], padding: Int = 8) -> Bool {
        StackScan.endsWithCall(Array(repeating: 0x90, count: padding) + instruction)
    }

    func testCallRel32() {
        XCTAssertTrue(endsWithCall([0xE8, 0x10, 0x20, 0x00, 0x00]))  // call rel32
        XCTAssertTrue(StackScan.endsWithCall([0xE8, 0xFB, 0xFF, 0xFF, 0xFF]))  // exactly five bytes
    }

    func testCallThroughRegister() {
        XCTAssertTrue(endsWithCall([0xFF, 0xD0]))  // call *%rax
        XCTAssertTrue(endsWithCall([0x41, 0xFF, 0xD3]))  // call *%r11
        XCTAssertTrue(endsWithCall([0xFF, 0x10]))  // call *(%rax)
    }

    func testCallThroughMemoryWithDisplacement() {
        XCTAssertTrue(endsWithCall([0xFF, 0x53, 0x10]))  // call *0x10(%rbx)
        XCTAssertTrue(endsWithCall([0xFF, 0x14, 0xC5, 0x00, 0x10, 0x40, 0x00]))  // call *0x401000(,%rax,8)
        XCTAssertTrue(endsWithCall([0xFF, 0x15, 0x00, 0x10, 0x00, 0x00]))  // call *0x1000(%rip)
    }

    func testNotACall() {
        XCTAssertFalse(endsWithCall([]))
        XCTAssertFalse(endsWithCall([0x48, 0x89, 0xC7]))  // mov %rax,%rdi
        XCTAssertFalse(endsWithCall([0xFF, 0xE0]))  // jmp *%rax: FF /4, not /2
        XCTAssertFalse(endsWithCall([0xFF, 0xC0]))  // inc %eax: FF /0
        XCTAssertFalse(endsWithCall([0xE8, 0x00, 0x00, 0x00]))  // E8 one byte too close
        XCTAssertFalse(StackScan.endsWithCall([0xFF]))
        XCTAssertFalse(StackScan.endsWithCall([UInt8]()))
    }

    /// Only the last eight bytes count (the stack scan reads eight before each candidate).
    func testOnlyTheLastEightBytesAreExamined() {
        XCTAssertFalse(endsWithCall([0xFF, 0xD0] + Array(repeating: 0x90, count: 6)))
        XCTAssertTrue(endsWithCall([0xFF, 0x15] + Array(repeating: 0x90, count: 5)))  // disp32 ending at 7
    }
}
