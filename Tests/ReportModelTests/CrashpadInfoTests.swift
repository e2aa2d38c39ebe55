// CrashpadInfoTests: the program's annotations in the minidump's CrashpadInfo stream (spec §2.10),
// written as Crashpad writes them and read back by crashport and by rust-minidump.
//
// Layout checks read the bytes at the spec's offsets, not through the reader. The hostile tests
// point the stream's RVAs, counts and string lengths out of the file or make them wrap: the reader
// must skip the annotation or the stream with a warning, keep the rest of the dump, and never trap.

import Foundation
import TestSupport
import XCTest

@testable import ReportModel

private typealias MD = MinidumpFormat

final class CrashpadInfoTests: XCTestCase {
    static let annotations = [
        Annotation(key: "build", value: "1.2.3-rc1"),
        Annotation(key: "user", value: "Zoë 🚀 日本語"),
        Annotation(key: "empty", value: ""),
        Annotation(key: "multi\nline key", value: "first\nsecond"),
        // The strings carry their length, so a NUL inside a value survives.
        Annotation(key: "ключ", value: "a\u{0}b"),
    ]

    static func snapshot(_ annotations: [Annotation] = annotations) -> ProcessSnapshot {
        var snapshot = MinidumpTests.snapshot()
        snapshot.annotations = annotations
        return snapshot
    }

    static func u32(_ bytes: [UInt8], _ offset: Int) -> Int { Int(MinidumpTests.u32(bytes, offset)) }

    /// A MINIDUMP_UTF8_STRING decoded by hand: its text, and whether a NUL follows the bytes.
    static func utf8String(_ bytes: [UInt8], _ rva: Int) -> (text: String, terminated: Bool) {
        let length = u32(bytes, rva)
        return (String(decoding: bytes[(rva + 4)..<(rva + 4 + length)], as: UTF8.self), bytes[rva + 4 + length] == 0)
    }

    /// The CrashpadInfo stream's RVA and its dictionary's RVA in a written dump.
    static func locate(_ bytes: [UInt8]) throws -> (stream: Int, dictionary: Int) {
        let stream = try XCTUnwrap(MinidumpTests.entry(bytes, MD.MINIDUMP_STREAM_TYPE.CrashpadInfo))
        return (Int(stream.rva), u32(bytes, Int(stream.rva) + 40))
    }

    // MARK: Writer

    func testStreamLayout() throws {
        let bytes = MinidumpWriter().bytes(for: Self.snapshot())
        let stream = try XCTUnwrap(MinidumpTests.entry(bytes, MD.MINIDUMP_STREAM_TYPE.CrashpadInfo))
        XCTAssertEqual(stream.size, 52)
        let s = Int(stream.rva)
        XCTAssertEqual(Self.u32(bytes, s), 1, "version")
        XCTAssertEqual(Array(bytes[(s + 4)..<(s + 36)]), [UInt8](repeating: 0, count: 32), "report_id, client_id")
        XCTAssertEqual([Self.u32(bytes, s + 44), Self.u32(bytes, s + 48)], [0, 0], "module_list: none")

        let dictionarySize = Self.u32(bytes, s + 36)
        let dictionary = Self.u32(bytes, s + 40)
        XCTAssertEqual(dictionarySize, 4 + 8 * Self.annotations.count, "count and entries, no padding")
        XCTAssertEqual(Self.u32(bytes, dictionary), Self.annotations.count)
        for (index, annotation) in Self.annotations.enumerated() {
            let entry = dictionary + 4 + 8 * index
            for (rva, text) in [(Self.u32(bytes, entry), annotation.key), (Self.u32(bytes, entry + 4), annotation.value)] {
                XCTAssertEqual(Self.u32(bytes, rva), text.utf8.count, "length in bytes of \(text.debugDescription)")
                XCTAssertEqual(Self.utf8String(bytes, rva).text, text)
                XCTAssertTrue(Self.utf8String(bytes, rva).terminated, "NUL after \(text.debugDescription)")
            }
        }
        let directory = MinidumpTests.directory(bytes)
        XCTAssertEqual(Set(directory.map(\.type)).count, directory.count, "duplicate stream type")
        for entry in directory {
            XCTAssertLessThanOrEqual(Int(entry.rva) + Int(entry.size), bytes.count, "stream past EOF")
        }
    }

    func testNoAnnotationsWriteNoStream() {
        let type = MD.MINIDUMP_STREAM_TYPE.CrashpadInfo
        XCTAssertNil(MinidumpTests.entry(MinidumpWriter().bytes(for: MinidumpTests.snapshot()), type))
        // Nothing writable (an empty key) is no annotation either.
        let unusable = Self.snapshot([Annotation(key: "", value: "a value without a key")])
        XCTAssertNil(MinidumpTests.entry(MinidumpWriter().bytes(for: unusable), type))
    }

    func testWriterBoundsWhatItWrites() throws {
        let longKey = "k" + String(repeating: "🚀", count: 100)  // 401 bytes
        let longValue = String(repeating: "é", count: 100_000)  // 200,000 bytes
        let annotations =
            [
                Annotation(key: longKey, value: longValue),
                Annotation(key: "", value: "no key"),
                Annotation(key: "twice", value: "first"),
                Annotation(key: "twice", value: "second"),
            ] + (0..<1000).map { Annotation(key: "key\($0)", value: "\($0)") }
        let bytes = MinidumpWriter().bytes(for: Self.snapshot(annotations))
        let unannotated = MinidumpWriter().bytes(for: MinidumpTests.snapshot()).count
        XCTAssertLessThan(bytes.count - unannotated, 256 * 64 + 300 + 4096 + 64, "the stream stays small")

        let read = try Minidump(bytes: bytes).annotations
        guard read.count == MinidumpWriter.maximumAnnotationCount else {
            return XCTFail("\(read.count) annotations read, not \(MinidumpWriter.maximumAnnotationCount)")
        }
        XCTAssertEqual(read[0].key, "k" + String(repeating: "🚀", count: 63), "cut to 256 bytes, no scalar split")
        XCTAssertEqual(read[0].value, String(repeating: "é", count: 2048), "cut to 4096 bytes")
        XCTAssertEqual(read[1], Annotation(key: "twice", value: "first"), "no empty key, the first of a repeated key")
        XCTAssertEqual(read[2].key, "key0")
        XCTAssertEqual(read.last?.key, "key253")

        let written = MinidumpWriter.writtenAnnotations(annotations)
        XCTAssertEqual(written.map(\.truncated).prefix(3), [true, false, false], "a cut is recorded")
    }

    // MARK: Reader

    func testAnnotationsRoundTrip() throws {
        let dump = try Minidump(bytes: MinidumpWriter().bytes(for: Self.snapshot()))
        XCTAssertEqual(dump.annotations, Self.annotations)
        XCTAssertEqual(dump.warnings, [])
        XCTAssertEqual(dump.threads.count, 3, "the rest of the dump is unchanged")

        var marked = Self.annotations
        marked[1].truncated = true
        let unmarked = try Minidump(bytes: MinidumpWriter().bytes(for: Self.snapshot(marked))).annotations
        XCTAssertEqual(unmarked, Self.annotations, "the stream has no place for `truncated`")

        XCTAssertEqual(try Minidump(bytes: MinidumpWriter().bytes(for: MinidumpTests.snapshot())).annotations, [])
    }

    /// Crashpad leaves simple_annotations {0, 0} when it has none.
    func testEmptyDictionaryLocationMeansNoAnnotations() throws {
        var bytes = MinidumpWriter().bytes(for: Self.snapshot())
        let (stream, _) = try Self.locate(bytes)
        bytes.put(u32: 0, at: stream + 36)
        bytes.put(u32: 0, at: stream + 40)
        let dump = try Minidump(bytes: bytes)
        XCTAssertEqual(dump.annotations, [])
        XCTAssertEqual(dump.warnings, [])
    }

    func testHostileStreamIsIgnoredWithAWarning() throws {
        let valid = MinidumpWriter().bytes(for: Self.snapshot())
        let (stream, dictionary) = try Self.locate(valid)
        let end = UInt32(valid.count)
        let cases: [(String, (inout [UInt8]) -> Void)] = [
            ("dictionary past the end", { $0.put(u32: end, at: stream + 40) }),
            ("dictionary size wraps", { $0.put(u32: 0xFFFF_FFF8, at: stream + 36) }),
            ("dictionary rva wraps", { $0.put(u32: 0xFFFF_FFFC, at: stream + 40) }),
            ("dictionary too short for its count", { $0.put(u32: 3, at: stream + 36) }),
            ("huge count", { $0.put(u32: 0xFFFF_FFFF, at: dictionary) }),
            ("count one too many", { $0.put(u32: UInt32(Self.annotations.count + 1), at: dictionary) }),
            (
                "stream shorter than MINIDUMP_CRASHPAD_INFO",
                { bytes in
                    let index = MinidumpTests.directory(bytes).firstIndex { $0.type == MD.MINIDUMP_STREAM_TYPE.CrashpadInfo }!
                    bytes.put(u32: 51, at: 32 + 12 * index + 4)
                }
            ),
        ]
        for (name, corrupt) in cases {
            var bytes = valid
            corrupt(&bytes)
            let dump = try Minidump(bytes: bytes)
            XCTAssertEqual(dump.annotations, [], name)
            XCTAssertEqual(dump.threads.count, 3, "\(name): the rest of the dump still reads")
            XCTAssertEqual(dump.warnings.count, 1, name)
            XCTAssertTrue(dump.warnings.first?.hasPrefix("CrashpadInfo stream ignored: malformed minidump") ?? false, name)
        }
    }

    func testHostileAnnotationIsSkippedAndTheOthersKept() throws {
        let valid = MinidumpWriter().bytes(for: Self.snapshot())
        let (_, dictionary) = try Self.locate(valid)
        let keyOfFirst = dictionary + 4
        let valueOfLast = dictionary + 4 + 8 * (Self.annotations.count - 1) + 4
        let end = UInt32(valid.count)
        let cases: [(String, Int, (inout [UInt8]) -> Void)] = [
            ("key past the end", 0, { $0.put(u32: end, at: keyOfFirst) }),
            ("key at the last byte", 0, { $0.put(u32: end - 1, at: keyOfFirst) }),
            ("key rva wraps", 0, { $0.put(u32: 0xFFFF_FFFE, at: keyOfFirst) }),
            ("value past the end", Self.annotations.count - 1, { $0.put(u32: end, at: valueOfLast) }),
            (
                "key length wraps", 0,
                { bytes in bytes.put(u32: 0xFFFF_FFFF, at: Self.u32(bytes, keyOfFirst)) }
            ),
            (
                "value length one past the end", Self.annotations.count - 1,
                { bytes in
                    let rva = Self.u32(bytes, valueOfLast)
                    bytes.put(u32: UInt32(bytes.count - rva - 4 + 1), at: rva)
                }
            ),
        ]
        for (name, skipped, corrupt) in cases {
            var bytes = valid
            corrupt(&bytes)
            let dump = try Minidump(bytes: bytes)
            var expected = Self.annotations
            expected.remove(at: skipped)
            XCTAssertEqual(dump.annotations, expected, name)
            XCTAssertEqual(dump.warnings.count, 1, name)
            XCTAssertTrue(
                dump.warnings.first?.hasPrefix("CrashpadInfo: 1 unreadable annotation(s) skipped") ?? false,
                "\(name): \(dump.warnings)")
        }
    }

    /// Entries that all point at one large string must not multiply the memory used.
    func testSharedStringAmplificationIsBounded() throws {
        var bytes = MinidumpWriter().bytes(for: Self.snapshot())
        let (stream, _) = try Self.locate(bytes)
        let length = 256 << 10
        let entries = 200
        let string = UInt32(bytes.count)
        bytes += MinidumpBytes.utf8String([UInt8](repeating: UInt8(ascii: "x"), count: length))
        let dictionary = UInt32(bytes.count)
        bytes.append(u32: UInt32(entries))
        for _ in 0..<entries {
            bytes.append(u32: string)
            bytes.append(u32: string)
        }
        bytes.put(u32: UInt32(4 + 8 * entries), at: stream + 36)
        bytes.put(u32: dictionary, at: stream + 40)

        // 200 × 2 × 256 KiB would be 100 MiB.
        let dump = try Minidump(bytes: bytes)
        XCTAssertGreaterThan(dump.annotations.count, 0)
        XCTAssertLessThan(dump.annotations.count, entries)
        XCTAssertLessThanOrEqual(dump.annotations.count * 2 * length, 4 * bytes.count + (1 << 20))
        XCTAssertEqual(dump.warnings.count, 1)
        XCTAssertTrue(dump.warnings.first?.contains("far more data than the file holds") ?? false, "\(dump.warnings)")
    }

    /// Random bytes written over the stream, its dictionary and its strings: the stream is optional,
    /// so the dump must still read, whatever the annotations become.
    func testMutatedCrashpadInfoNeverTrapsNorFailsTheDump() throws {
        let valid = MinidumpWriter().bytes(for: Self.snapshot())
        let (stream, dictionary) = try Self.locate(valid)
        let firstString = Self.u32(valid, dictionary + 4)
        let region = firstString..<(stream + MD.MINIDUMP_CRASHPAD_INFO.size)
        let interesting: [UInt32] = [
            0, 1, 0x7FFF_FFFF, 0xFFFF_FFFF, 0xFFFF_FFFC, UInt32(valid.count), UInt32(valid.count - 1), UInt32(stream),
        ]
        var rng = SplitMix64(seed: 0x0C7A_5BAD)
        for round in 0..<2000 {
            var bytes = valid
            for _ in 0..<(1 + rng.below(6)) {
                if rng.below(2) == 0 {
                    let at = region.lowerBound + (rng.below(region.count - 4) & ~3)
                    bytes.put(u32: interesting[rng.below(interesting.count)], at: at)
                } else {
                    bytes[region.lowerBound + rng.below(region.count)] = UInt8.random(in: 0...255, using: &rng)
                }
            }
            let dump: Minidump
            do {
                dump = try Minidump(bytes: bytes)
            } catch {
                return XCTFail("round \(round): a corrupt CrashpadInfo cost the dump: \(error)")
            }
            XCTAssertEqual(dump.threads.count, 3, "round \(round)")
            XCTAssertLessThanOrEqual(dump.annotations.count, valid.count / 8, "round \(round)")
        }
    }

    // MARK: rust-minidump

    /// minidump-stackwalk 0.25.0 decodes the stream in `--dump` (its `--json` has no field for
    /// annotations), and the processed report is unaffected by it. A validator fetched by
    /// tools/fetch-validators, which tools/test runs and tools/test --unit does not: skipped,
    /// saying so, where it is not there.
    func testMinidumpStackwalkReadsTheAnnotations() throws {
        try XCTSkipUnless(
            FileManager.default.isExecutableFile(atPath: TestSupport.minidumpStackwalk),
            "minidump-stackwalk is not fetched here (tools/fetch-validators; tools/test fetches it)")
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cp-\(UUID().uuidString).dmp").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try MinidumpWriter().write(Self.snapshot(), to: path)

        let text = try TestSupport.stackwalkDump(path)
        let start = try XCTUnwrap(text.range(of: "MDRawCrashpadInfo\n"), "no CrashpadInfo in --dump:\n\(text.suffix(3000))")
        // The section ends at the first blank line (no annotation here holds one).
        let rest = text[start.lowerBound...]
        let section = String(rest[..<(rest.range(of: "\n\n")?.upperBound ?? rest.endIndex)])
        XCTAssertTrue(section.contains("\n  version = 1\n"), section)
        XCTAssertTrue(section.contains("\n  report_id = 00000000-0000-0000-0000-000000000000\n"), section)
        for annotation in Self.annotations {
            XCTAssertTrue(
                section.contains("\n  simple_annotations[\"\(annotation.key)\"] = \(annotation.value)\n"),
                "\(annotation.key.debugDescription) not in:\n\(section.prefix(1500))")
        }

        let json = try TestSupport.stackwalk(path)
        XCTAssertEqual(json["status"] as? String, "OK")
        XCTAssertEqual(json["thread_count"] as? Int, 3)
    }
}
