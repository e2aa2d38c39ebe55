// The package metadata note (PackageNote): the flat-object parser on good and hostile
// descriptors, and ELFFile reading the note `ld --package-metadata` writes into a real program.

import BoundedBytes
import Foundation
import ObjectFile
import TestSupport
import XCTest

final class PackageNoteTests: XCTestCase {
    static let metadata =
        #"{"type":"deb","name":"crashfixture","version":"1.2.3-1","architecture":"amd64","os":"debian","osVersion":"12","debugInfoUrl":"https://debuginfod.debian.net"}"#

    func parse(_ text: String) -> Result<PackageMetadata, PackageNote.Refusal> {
        PackageNote.parse(Array(text.utf8) + [0, 0, 0])
    }

    func refusal(_ text: String) -> String? {
        refusal(Array(text.utf8) + [0])
    }

    func refusal(_ bytes: [UInt8]) -> String? {
        if case .failure(let refusal) = PackageNote.parse(bytes) { return refusal.reason }
        return nil
    }

    func testEveryFieldOfTheSpecIsRead() throws {
        let metadata = try parse(Self.metadata).get()
        XCTAssertEqual(
            metadata,
            PackageMetadata(
                type: "deb", name: "crashfixture", version: "1.2.3-1", architecture: "amd64", os: "debian", osVersion: "12",
                debugInfoURL: "https://debuginfod.debian.net", source: .note))
        XCTAssertEqual(metadata.release, "crashfixture@1.2.3-1")
    }

    func testWhitespaceEscapesAndUnknownKeys() throws {
        let metadata = try parse(
            " {\n \"name\" : \"caf\\u00e9\\ud83d\\ude00\\/x\" ,\t\"appIdentifier\": \"ignored\", \"version\":\"1\\\"2\"}\n"
        ).get()
        XCTAssertEqual(metadata.name, "café😀/x")
        XCTAssertEqual(metadata.version, "1\"2")
        XCTAssertNil(metadata.type)
    }

    func testControlCharactersAreRemovedAndValuesCut() throws {
        let long = String(repeating: "é", count: 300)  // 600 bytes
        let metadata = try parse(#"{"name":"a\u001b[31mb\nc\u0085d","version":""# + long + #""}"#).get()
        XCTAssertEqual(metadata.name, "a[31mbcd")
        XCTAssertEqual(metadata.version, String(repeating: "é", count: 128))
        // A raw control character inside a string is not JSON.
        XCTAssertEqual(refusal("{\"name\":\"a\u{7}b\"}"), "its JSON is malformed (a control character inside a string)")
    }

    func testHugeDescriptorIsNotRead() {
        let huge = Array(#"{"name":"x","pad":""#.utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 70_000) + Array(#""}"#.utf8)
        XCTAssertEqual(refusal(huge), "its JSON is \(huge.count) bytes, more than the 65536 read")
        // Just under the cap: read.
        let fits = Array(#"{"name":"x","pad":""#.utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 65_000) + Array(#""}"#.utf8)
        XCTAssertEqual(try PackageNote.parse(fits).get().name, "x")
    }

    func testNestingIsRefusedWithoutRecursion() {
        // 30 000 levels (within the 64 KiB read): a recursive parser would overflow its stack.
        let deep = #"{"name":"x","a":"# + String(repeating: "[", count: 30_000) + String(repeating: "]", count: 30_000) + "}"
        XCTAssertEqual(
            refusal(deep),
            "the value of \"a\" is not a string (the spec allows only string values; nested objects, arrays, numbers, true, false and null are not read)"
        )
        XCTAssertNotNil(refusal(#"{"name":{"inner":"x"}}"#))
        XCTAssertNotNil(refusal(#"{"name":"x","n":1}"#))
        XCTAssertNotNil(refusal(#"{"name":"x","n":null}"#))
    }

    func testNotUTF8NotAnObjectAndMalformed() {
        XCTAssertEqual(refusal([UInt8](#"{"name":""#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8) + [0]), "its JSON is not UTF-8")
        XCTAssertEqual(refusal(#"["name","x"]"#), "its JSON is not an object")
        XCTAssertEqual(refusal(#""crashfixture""#), "its JSON is not an object")
        XCTAssertEqual(refusal(""), "its JSON is not an object")
        XCTAssertEqual(refusal(#"{"name":"x"} {"#), "its JSON has text after the object")
        XCTAssertEqual(refusal(#"{"name":"x""#), "its JSON is malformed (no ',' or '}' after a value)")
        XCTAssertEqual(refusal(#"{"name":"x"#), "its JSON is malformed (a string does not end)")
        XCTAssertEqual(refusal(#"{"name":"\ud800"}"#), "its JSON has a lone surrogate escape")
        XCTAssertEqual(refusal(#"{"name":"\q"}"#), "its JSON is malformed (an unknown escape in a string)")
        XCTAssertEqual(refusal(#"{name:"x"}"#), "its JSON is malformed (a key is not a string)")
        XCTAssertEqual(refusal(#"{}"#), "its JSON names no package (no \"name\")")
    }

    func testDuplicatedKeyRefusesTheNote() {
        XCTAssertEqual(refusal(#"{"name":"good","version":"1","name":"evil"}"#), "its JSON gives the key \"name\" twice")
    }

    /// What ld 2.40 writes for `--package-metadata`, read by ELFFile from the file, and from
    /// the same note area as a process's memory holds it.
    func testTheLinkersNoteIsReadFromARealProgram() throws {
        let directory = TestSupport.temporaryDirectory("package-note")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let source = directory + "/p.c"
        try "int main(void) { return 0; }\n".write(toFile: source, atomically: true, encoding: .utf8)
        // -Xlinker: -Wl, would split the JSON at its commas.
        let output = try TestSupport.compile(
            [source], output: directory + "/p", flags: ["-O1"], linkFlags: ["-Xlinker", "--package-metadata=" + Self.metadata])
        let elf = try ELFFile(path: output)
        XCTAssertEqual(try elf.packageNote?.get(), try parse(Self.metadata).get())
        XCTAssertNotNil(elf.buildID)

        let section = try XCTUnwrap(elf.sections.first { $0.name == ".note.package" })
        let area = try XCTUnwrap(elf.view.slice(section.offset, section.size))
        XCTAssertEqual(try ELFFile.packageNote(inNotes: area)?.get().name, "crashfixture")

        // From the image as a process maps it (what capture reads, with the build-id, for a
        // module whose file it cannot use).
        let base: UInt64 = 0x5555_0000_0000
        let image = ImageMemory(
            modules: [LoadedModule(path: output, base: base, size: 0, buildID: elf.buildID, object: elf)], segments: .all)
        let mapped = ELFFile.imageNotes(ofImageAt: base, in: image)
        XCTAssertEqual(mapped.buildID, elf.buildID)
        XCTAssertEqual(try mapped.package?.get(), try elf.packageNote?.get())

        // A program without the note has none.
        let plain = try TestSupport.compile([source], output: directory + "/plain", flags: ["-O1"])
        XCTAssertNil(try ELFFile(path: plain).packageNote)
    }
}
