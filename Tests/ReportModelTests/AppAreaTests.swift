// The app area is the crashed process's memory: decoded as the stub lays it out, and hostile
// bytes (a slot mid-write, forged breadcrumb numbers, text without a NUL, a key twice, a wrong
// magic or size) are skipped or refused, never trusted.

import CCrashPortProtocol
import Foundation
import ReportModel
import TestSupport
import XCTest

final class AppAreaTests: XCTestCase {
    /// An area as Tests/Fuzz/make-wire-seeds.c writes it through the C header, built and run now
    /// (so it always has this tree's layout); the committed seed must have the same size.
    func seed() throws -> [UInt8] {
        let directory = TestSupport.temporaryDirectory("app-area")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let generator = try TestSupport.compile(
            [TestSupport.repositoryRoot + "/Tests/Fuzz/make-wire-seeds.c"], output: directory + "/seeds",
            flags: ["-O0", "-I", TestSupport.repositoryRoot + "/CSupport/protocol/include"])
        let made = try TestSupport.run([generator, directory + "/hello.bin", directory + "/crash.bin", directory + "/area.bin"])
        XCTAssertEqual(made.status, .exited(0), made.stderr)
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: directory + "/area.bin")))
        let committed = try Data(
            contentsOf: URL(fileURLWithPath: TestSupport.repositoryRoot + "/Tests/Fuzz/seeds/wire/app-area.bin"))
        XCTAssertEqual(committed.count, bytes.count, "regenerate Tests/Fuzz/seeds/wire with make-wire-seeds.c")
        return bytes
    }

    func offset<T>(_ path: KeyPath<cp_app_area, T>) -> Int { MemoryLayout<cp_app_area>.offset(of: path)! }

    func testDecodesWhatTheStubWrites() throws {
        let area = try AppArea(bytes: try seed())
        XCTAssertEqual(area.annotations.map(\.key), ["user", "build", "region"])
        XCTAssertEqual(area.annotations[1], Annotation(key: "build", value: "nightly\n\u{1b}[31m", truncated: true))
        XCTAssertEqual(area.breadcrumbs.map(\.message), (30..<130).map { "step \($0)" })
        XCTAssertEqual(area.attachments, ["/var/log/app.log"])
        XCTAssertEqual(area.exception, UncaughtException(type: "config_error", message: "the config file is missing"))
        XCTAssertEqual(area.slotsInFlux, 0)
        XCTAssertEqual(area.release, "app@1.2.3")
        XCTAssertEqual(area.launchMilliseconds, 5000)
        XCTAssertFalse(area.launchCompleted)
        XCTAssertEqual(area.crashedDuringLaunch(at: area.installTimeNanoseconds + 2_000_000_000), true)
        XCTAssertEqual(area.crashedDuringLaunch(at: area.installTimeNanoseconds + 6_000_000_000), false)
    }

    /// Capture reads only what was ever used; a header that claims more is clamped.
    func testOnlyTheUsedSlotsAreRead() throws {
        var bytes = try seed()
        let header = Array(bytes.prefix(AppArea.headerSize))
        let ranges = AppArea.rangesToRead(header: header)
        let read = ranges.reduce(0) { $0 + $1.count }
        XCTAssertEqual(
            read,
            AppArea.headerSize + 3 * MemoryLayout<cp_annotation>.size + 100 * MemoryLayout<cp_breadcrumb>.size
                + MemoryLayout<cp_attachment>.size + (offset(\.error_details) - offset(\.abort_message_address))
                + (AppArea.size - offset(\.memory_attachments_used)))
        // Only those ranges, the rest zeros: the same area, but for the handled error's own
        // block, read for an ERROR record only.
        var sparse = [UInt8](repeating: 0, count: bytes.count)
        for range in ranges { sparse.replaceSubrange(range, with: bytes[range]) }
        var whole = try AppArea(bytes: bytes)
        XCTAssertNotNil(whole.handledErrorDetails)
        whole.handledErrorDetails = nil
        XCTAssertEqual(try AppArea(bytes: sparse), whole)
        for range in AppArea.rangesToRead(header: header, errorDetails: true) {
            sparse.replaceSubrange(range, with: bytes[range])
        }
        XCTAssertEqual(try AppArea(bytes: sparse), try AppArea(bytes: bytes))
        // A program that never annotated: header and tail only (the memory attachments' table
        // is part of the tail).
        var quiet = header
        quiet.put(0, at: offset(\.annotations_used), size: 4)
        quiet.put(0, at: offset(\.attachments_used), size: 4)
        quiet.put(0, at: offset(\.breadcrumb_count), size: 8)
        XCTAssertEqual(
            AppArea.rangesToRead(header: quiet).reduce(0) { $0 + $1.count },
            AppArea.headerSize + offset(\.error_details) - offset(\.abort_message_address)
                + (AppArea.size - offset(\.memory_attachments_used)))
        // Hostile high-water marks stay inside the area.
        bytes.put(UInt64(UInt32.max), at: offset(\.annotations_used), size: 4)
        bytes.put(UInt64(UInt32.max), at: offset(\.attachments_used), size: 4)
        bytes.put(UInt64.max, at: offset(\.breadcrumb_count), size: 8)
        XCTAssertTrue(
            AppArea.rangesToRead(header: Array(bytes.prefix(AppArea.headerSize))).allSatisfy { $0.upperBound <= AppArea.size })
    }

    func testSlotsBeingWrittenAreSkippedAndCounted() throws {
        var bytes = try seed()
        let annotation = offset(\.annotations) + MemoryLayout<cp_annotation>.size  // "build"
        bytes.put(3, at: annotation, size: 4)
        let crumb = offset(\.breadcrumbs) + 40 * MemoryLayout<cp_breadcrumb>.size  // breadcrumb 40
        bytes.put(2 * 40 + 1, at: crumb, size: 8)
        let area = try AppArea(bytes: bytes)
        XCTAssertEqual(area.annotations.map(\.key), ["user", "region"])
        XCTAssertFalse(area.breadcrumbs.map(\.message).contains("step 40"))
        XCTAssertEqual(area.breadcrumbs.count, 99)
        XCTAssertEqual(area.slotsInFlux, 2)
    }

    func testForgedAndStaleBreadcrumbsAreIgnored() throws {
        var bytes = try seed()
        let size = MemoryLayout<cp_breadcrumb>.size
        // Slot 5 claims breadcrumb 6 (it can only hold 5, 105, ...), slot 6 a number past the count.
        bytes.put(2 * 6 + 2, at: offset(\.breadcrumbs) + 5 * size, size: 8)
        bytes.put(2 * 1006 + 2, at: offset(\.breadcrumbs) + 6 * size, size: 8)
        let area = try AppArea(bytes: bytes)
        XCTAssertEqual(area.breadcrumbs.count, 98)
        XCTAssertEqual(
            area.breadcrumbs.map(\.message), area.breadcrumbs.map(\.message).filter { $0 != "step 105" && $0 != "step 106" })
        // A count that claims more than ever fit: only what is consistent with it survives.
        bytes.put(UInt64.max, at: offset(\.breadcrumb_count), size: 8)
        XCTAssertEqual(try AppArea(bytes: bytes).breadcrumbs, [])
    }

    func testTextWithoutTerminatorAndKeysTwice() throws {
        var bytes = try seed()
        let size = MemoryLayout<cp_annotation>.size
        let value = MemoryLayout<cp_annotation>.offset(of: \cp_annotation.value)!
        // The value fills its whole array, no NUL: cut at the array's end.
        for index in 0..<Int(CP_ANNOTATION_VALUE_BYTES) { bytes[offset(\.annotations) + value + index] = 0x41 }
        // Slot 2's key becomes "user" too: reported once.
        let key = MemoryLayout<cp_annotation>.offset(of: \cp_annotation.key)!
        for (index, byte) in Array("user\0".utf8).enumerated() { bytes[offset(\.annotations) + 2 * size + key + index] = byte }
        // Invalid UTF-8 in the exception's type is replaced, not trusted.
        bytes[offset(\.exception_type)] = 0xFF
        let area = try AppArea(bytes: bytes)
        XCTAssertEqual(area.annotations.first?.value, String(repeating: "A", count: Int(CP_ANNOTATION_VALUE_BYTES)))
        XCTAssertEqual(area.annotations.map(\.key), ["user", "build"])
        XCTAssertEqual(area.exception?.type.unicodeScalars.first, "\u{FFFD}")
    }

    func testAreasThatAreNotOneAreRefused() throws {
        let good = try seed()
        XCTAssertThrowsError(try AppArea(bytes: Array(good.prefix(100)))) { XCTAssertTrue("\($0)".contains("expected")) }
        var magic = good
        magic[0] ^= 0xFF
        XCTAssertThrowsError(try AppArea(bytes: magic)) { XCTAssertTrue("\($0)".contains("magic")) }
        var version = good
        version[4] = 9
        XCTAssertThrowsError(try AppArea(bytes: version)) { XCTAssertTrue("\($0)".contains("version 9")) }
        var size = good
        size.put(16, at: 8, size: 4)
        XCTAssertThrowsError(try AppArea(bytes: size)) { XCTAssertTrue("\($0)".contains("declares 16")) }
        XCTAssertFalse(AppArea.inUse(header: Array(magic.prefix(AppArea.headerSize))))
        XCTAssertTrue(AppArea.inUse(header: Array(good.prefix(AppArea.headerSize))))
    }

    func detail<T>(_ path: KeyPath<cp_error_details, T>) -> Int {
        offset(\.error_details) + MemoryLayout<cp_error_details>.offset(of: path)!
    }

    /// The handled error's own block as crashport_report_error_with leaves it during its report.
    func testErrorDetailsAreDecoded() throws {
        let area = try AppArea(bytes: try seed())
        XCTAssertEqual(area.handledError, UncaughtException(type: "OrderError", message: "order 1234 refused"))
        XCTAssertEqual(
            area.handledErrorDetails,
            HandledErrorDetails(
                thread: ThreadID(4242),
                properties: [Annotation(key: "order", value: "1234"), Annotation(key: "note", value: "cut", truncated: true)],
                files: ["/var/log/order.log"], propertiesLeftOut: 3, filesLeftOut: 1))
    }

    /// An area from a stub before the block (its declared size ends where the block starts) is
    /// read as before, whole, and never for a block; a header that does not cover the block
    /// keeps capture from reading it.
    func testAnAreaWithoutTheBlockIsStillRead() throws {
        var bytes = try seed()
        bytes.put(UInt64(AppArea.minimumSize), at: offset(\.size), size: 4)
        let older = Array(bytes.prefix(AppArea.minimumSize))
        let area = try AppArea(bytes: older)
        XCTAssertEqual(area.annotations.map(\.key), ["user", "build", "region"])
        XCTAssertEqual(area.handledError?.type, "OrderError")
        XCTAssertNil(area.handledErrorDetails)
        XCTAssertNil(try AppArea(bytes: bytes).handledErrorDetails, "the declared size decides, not the bytes read")
        let ranges = AppArea.rangesToRead(header: Array(bytes.prefix(AppArea.headerSize)), errorDetails: true)
        XCTAssertTrue(ranges.allSatisfy { $0.upperBound <= AppArea.minimumSize }, "\(ranges)")
        bytes.put(UInt64(AppArea.minimumSize - 8), at: offset(\.size), size: 4)
        XCTAssertThrowsError(try AppArea(bytes: bytes)) { XCTAssertTrue("\($0)".contains("declares")) }
    }

    /// Hostile blocks: one being written, one naming no thread, counts past the arrays, unused
    /// slots, empty and repeated keys, text without its NUL, relative and repeated paths.
    func testHostileErrorDetails() throws {
        let good = try seed()
        var writing = good
        writing.put(5, at: detail(\.sequence), size: 4)
        let inFlux = try AppArea(bytes: writing)
        XCTAssertNil(inFlux.handledErrorDetails)
        XCTAssertEqual(inFlux.slotsInFlux, 1)

        var free = good
        free.put(0, at: detail(\.flags), size: 4)
        XCTAssertNil(try AppArea(bytes: free).handledErrorDetails)
        var nobody = good
        nobody.put(0, at: detail(\.tid), size: 4)
        XCTAssertNil(try AppArea(bytes: nobody).handledErrorDetails)

        var bytes = good
        bytes.put(UInt64(UInt32.max), at: detail(\.property_count), size: 4)
        bytes.put(UInt64(UInt32.max), at: detail(\.file_count), size: 4)
        let property = MemoryLayout<cp_error_property>.size
        let key = MemoryLayout<cp_error_property>.offset(of: \cp_error_property.key)!
        let value = MemoryLayout<cp_error_property>.offset(of: \cp_error_property.value)!
        func putText(_ text: String, at start: Int) {
            for (index, byte) in Array(text.utf8).enumerated() { bytes[start + index] = byte }
        }
        // Slot 2: "order" again; slot 3: an empty key; slot 4: unused; slot 15: no NUL anywhere.
        for (slot, name) in [(2, "order\0"), (3, "\0"), (4, "unused\0"), (15, String(repeating: "K", count: 64))] {
            let start = detail(\.properties) + slot * property
            bytes.put(slot == 4 ? 0 : UInt64(CP_SLOT_USED), at: start, size: 4)
            putText(name, at: start + key)
        }
        putText(String(repeating: "V", count: 1024), at: detail(\.properties) + 15 * property + value)
        let file = MemoryLayout<cp_error_file>.size
        for (slot, path) in [(1, "relative/path\0"), (2, "/var/log/order.log\0"), (3, "/tmp/b\0")] {
            let start = detail(\.files) + slot * file
            bytes.put(UInt64(CP_SLOT_USED), at: start, size: 4)
            putText(path, at: start + MemoryLayout<cp_error_file>.offset(of: \cp_error_file.path)!)
        }
        let details = try XCTUnwrap(try AppArea(bytes: bytes).handledErrorDetails)
        XCTAssertEqual(
            details.properties,
            [
                Annotation(key: "order", value: "1234"), Annotation(key: "note", value: "cut", truncated: true),
                Annotation(key: String(repeating: "K", count: 64), value: String(repeating: "V", count: 1024)),
            ])
        XCTAssertEqual(details.files, ["/var/log/order.log", "/tmp/b"])
        XCTAssertEqual(details.propertiesLeftOut, 3)
    }

    /// A handled error's own stack block (cp_error_stack), as the stub writes it and hostile:
    /// being written, free, naming no thread, a count past the array or past the bytes read,
    /// unused and empty frames, text without its NUL.
    func testHandledErrorStack() throws {
        func field<T>(_ path: KeyPath<cp_error_stack, T>) -> Int { MemoryLayout<cp_error_stack>.offset(of: path)! }
        func frame<T>(_ index: Int, _ path: KeyPath<cp_error_frame, T>) -> Int {
            HandledErrorStack.headerSize + index * HandledErrorStack.frameSize
                + MemoryLayout<cp_error_frame>.offset(of: path)!
        }
        var block = [UInt8](repeating: 0, count: HandledErrorStack.headerSize + 4 * HandledErrorStack.frameSize)
        block.put(2, at: field(\.sequence), size: 4)
        block.put(UInt64(CP_SLOT_USED), at: field(\.flags), size: 4)
        block.put(77, at: field(\.tid), size: 4)
        block.put(UInt64(UInt32.max), at: field(\.count), size: 4)
        block.put(999_488, at: field(\.left_out), size: 8)
        block.put(0x401000, at: frame(0, \.address), size: 8)
        block.put(UInt64(CP_SLOT_USED), at: frame(0, \.flags), size: 4)
        block.put(UInt64(CP_SLOT_USED | CP_SLOT_TRUNCATED), at: frame(1, \.flags), size: 4)
        block.put(42, at: frame(1, \.line), size: 4)
        for (index, byte) in Array("handle\n".utf8).enumerated() { block[frame(1, \.function) + index] = byte }
        for index in 0..<Int(CP_ERROR_FILE_BYTES) { block[frame(1, \.file) + index] = UInt8(ascii: "f") }
        block.put(UInt64(CP_SLOT_USED), at: frame(2, \.flags), size: 4)  // neither address nor function
        block.put(0x10, at: frame(3, \.address), size: 8)  // unused slot
        XCTAssertEqual(HandledErrorStack.size(header: block), block.count - 4 * HandledErrorStack.frameSize + 512 * 400)
        let stack = try XCTUnwrap(HandledErrorStack(bytes: block))
        XCTAssertEqual(
            stack,
            HandledErrorStack(
                thread: ThreadID(77),
                frames: [
                    .init(address: 0x401000),
                    .init(function: "handle\n", file: String(repeating: "f", count: 256), line: 42, truncated: true),
                ], leftOut: 999_488))
        for (path, value) in [(field(\.sequence), UInt64(3)), (field(\.flags), 0), (field(\.tid), 0)] {
            var hostile = block
            hostile.put(value, at: path, size: 4)
            XCTAssertNil(HandledErrorStack(bytes: hostile))
        }
        XCTAssertNil(HandledErrorStack(bytes: Array(block.prefix(HandledErrorStack.headerSize - 1))))
        XCTAssertEqual(HandledErrorStack(bytes: Array(block.prefix(HandledErrorStack.headerSize + 10)))?.frames, [])
    }

    /// The runtimes' messages are followed through the process's memory, bounded.
    func testAbortMessagesAreFollowedAndBounded() throws {
        var bytes = try seed()
        bytes.put(0x1000, at: offset(\.abort_message_address), size: 8)
        bytes.put(0x3000, at: offset(\.swift_message_address), size: 8)
        var memory: [UInt64: [UInt8]] = [
            0x1000: [0x00, 0x20, 0, 0, 0, 0, 0, 0],  // __abort_msg -> 0x2000
            0x2000: [0x00, 0x10, 0, 0] + Array("app: a.c:3: main: Assertion `x' failed.\n\0junk".utf8),
            0x3000: [0x00, 0x40, 0, 0, 0, 0, 0, 0],
            0x4000: Array(repeating: 0x42, count: 10_000),
        ]
        var largest = 0
        let read: (UInt64, Int) -> [UInt8] = { address, count in
            largest = max(largest, count)
            for (start, data) in memory where address >= start && address < start + UInt64(data.count) {
                return Array(data[Int(address - start)...].prefix(count))
            }
            return []
        }
        var messages = AppArea.readMessages(area: bytes, read)
        XCTAssertEqual(messages.abort, "app: a.c:3: main: Assertion `x' failed.\n")
        XCTAssertEqual(messages.swift?.count, 4096, "a message without its NUL is cut at 4 KiB")
        XCTAssertLessThanOrEqual(largest, 4096)
        memory[0x1000] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]  // a pointer that would wrap
        messages = AppArea.readMessages(area: bytes, read)
        XCTAssertNil(messages.abort)
    }

    /// The memory attachments' slots: the seed's wrapped ring read oldest first; hostile slots
    /// (a capacity past the cap, a length past the capacity, an address that would wrap, a name
    /// twice or with '/', a content type that could break a header) checked, never trusted.
    func testMemoryAttachmentsAreReadBounded() throws {
        var bytes = try seed()
        var largest = 0
        let memory = Array(0..<200).map { UInt8($0) }
        let read: (UInt64, Int) -> [UInt8] = { address, count in
            largest = max(largest, count)
            guard address >= 0x10000, address < 0x10000 + UInt64(memory.count) else { return [] }
            return Array(memory[Int(address - 0x10000)...].prefix(count))
        }
        var attachments = AppArea.readMemoryAttachments(area: bytes, read)
        XCTAssertEqual(attachments.count, 1)
        XCTAssertEqual(attachments.first?.contents, Array(memory[36..<64] + memory[0..<36]), "oldest first")
        XCTAssertEqual(attachments.first?.dropped, 36)
        XCTAssertEqual(attachments.first?.contentType, "text/plain")

        let table = offset(\.memory_attachments)
        let stride = MemoryLayout<cp_memory_attachment>.size
        func field<T>(_ path: KeyPath<cp_memory_attachment, T>) -> Int { MemoryLayout<cp_memory_attachment>.offset(of: path)! }
        func slot(_ index: Int, name: String, type: String, address: UInt64, capacity: UInt64, length: UInt64, flags: UInt32) {
            let start = table + index * stride
            bytes.replaceSubrange(start..<start + stride, with: [UInt8](repeating: 0, count: stride))
            bytes.put(UInt64(flags), at: start + field(\.flags), size: 4)
            bytes.replaceSubrange(start + field(\.name)..<start + field(\.name) + name.utf8.count, with: Array(name.utf8))
            let typeBytes = Array(type.utf8.prefix(63))
            bytes.replaceSubrange(
                start + field(\.content_type)..<start + field(\.content_type) + typeBytes.count, with: typeBytes)
            bytes.put(address, at: start + field(\.address), size: 8)
            bytes.put(capacity, at: start + field(\.capacity), size: 8)
            bytes.put(length, at: start + field(\.length), size: 8)
        }
        let used = CP_SLOT_USED
        slot(0, name: "huge", type: "text/plain\r\nX-Evil: 1", address: 0x10000, capacity: 1 << 40, length: 1 << 40, flags: used)
        slot(1, name: "huge", type: "text/plain", address: 0x10000, capacity: 10, length: 10, flags: used)
        slot(2, name: "a/b", type: "text/plain", address: 0x10000, capacity: 10, length: 10, flags: used)
        slot(3, name: "wrap", type: "x", address: UInt64.max - 4, capacity: 100, length: 1 << 62, flags: used | CP_SLOT_RING)
        slot(4, name: "..", type: "text/plain", address: 0x10000, capacity: 10, length: 10, flags: used)
        bytes.put(20, at: offset(\.memory_attachments_used), size: 4)
        largest = 0
        attachments = AppArea.readMemoryAttachments(area: bytes, read)
        XCTAssertEqual(attachments.map(\.name), ["huge", "wrap"], "a name once, none with '/' or '..'")
        XCTAssertEqual(attachments.first?.contentType, "application/octet-stream", "no header injection")
        XCTAssertEqual(attachments.first?.contents.count, 200, "what memory holds of the capped 7 MiB")
        XCTAssertNotNil(attachments.first?.note)
        XCTAssertLessThanOrEqual(largest, Int(MemoryAttachment.cap), "never more than the cap at once")
        XCTAssertEqual(attachments.last?.contents, [], "an address that would wrap reads nothing")
        XCTAssertEqual(attachments.last?.contentType, "application/octet-stream")
    }
}
