// CaptureSession.core on a core stream that says too little to capture. (A real kernel core,
// read and reported with the program's frames: EndToEndTests' KernelCoreCaptureTests.)

import CoreDump
import LiveProcess
import ObjectFile
import XCTest

final class CoreCaptureTests: XCTestCase {
    /// A dump with no thread (a stream that ended before any NT_PRSTATUS) is no capture.
    func testADumpWithNoThreadIsNoCapture() {
        XCTAssertNil(CaptureSession.core(CoreDump(), access: nil, cache: ELFCache()))
    }
}
