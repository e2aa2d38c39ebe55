// DebugFileLocatorTests: separate debug files made the way distributions make them
// (objcopy --only-keep-debug, strip, objcopy --add-gnu-debuglink) are found by build-id, by
// scanning a flat directory and by .gnu_debuglink; impostors (another program's debug file, a
// file whose CRC does not match) are rejected; MiniDebugInfo is unpacked.

import ObjectFile
import Foundation
import Symbolication
import XCTest

final class DebugFileLocatorTests: XCTestCase {
    static let source = """
        #include <stdio.h>
        static inline __attribute__((always_inline)) int square(int x) { return x * x + 1; }
        __attribute__((noinline)) int sum_squares(int n) {
            int total = 0;
            for (int i = 0; i < n; i++) total += square(i);
            return total;
        }
        int main(int argc, char **argv) { printf("%d\\n", sum_squares(argc * 10)); return 0; }

        """

    var directory = ""
    var gcc = "", objcopy = "", strip = "", xz = ""

    override func setUpWithError() throws {
        let tools = try SymbolicationFixtures.require("gcc", "objcopy", "strip", "xz")
        (gcc, objcopy, strip, xz) = (tools[0], tools[1], tools[2], tools[3])
        directory = SymbolicationFixtures.temporaryDirectory("debug-locator")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    struct Build {
        var full: String  // with DWARF
        var debug: String  // objcopy --only-keep-debug
        var linked: String  // stripped, with .gnu_debuglink to `debug`
        var stripped: String  // stripped, no debuglink
        var buildID: String
    }

    /// Builds `name` from source (a `variant` changes the code, hence the build-id).
    private func build(_ name: String, variant: Int = 0) throws -> Build {
        let subdirectory = directory + "/" + name
        try FileManager.default.createDirectory(atPath: subdirectory, withIntermediateDirectories: true)
        let source = Self.source + (variant == 0 ? "" : "int variant_\(variant)(void) { return \(variant); }\n")
        let full = try SymbolicationFixtures.compile(
            source: source, name: name + ".c", in: subdirectory, compiler: gcc,
            flags: ["-O2", "-g", "-Wl,--build-id"], output: name)
        let debug = full + ".debug"
        let stripped = full + ".stripped"
        let linked = full + ".linked"
        for command in [
            [objcopy, "--only-keep-debug", full, debug],
            [strip, "-o", stripped, full],
            [objcopy, "--add-gnu-debuglink=" + debug, stripped, linked],
        ] {
            let result = try SymbolicationFixtures.run(command)
            XCTAssertEqual(result.status, 0, "\(command.joined(separator: " ")): \(result.stderr)")
        }
        let id = try XCTUnwrap(try ELFFile(path: full).buildID, "the linker wrote no build-id")
        return Build(
            full: full, debug: debug, linked: linked, stripped: stripped,
            buildID: id.hex)
    }

    private func place(_ file: String, atBuildID buildID: String, under root: String) throws -> String {
        let directory = root + "/.build-id/" + buildID.prefix(2)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/" + buildID.dropFirst(2) + ".debug"
        try FileManager.default.copyItem(atPath: file, toPath: path)
        return path
    }

    /// The debug file gives the same frames as the unstripped program.
    private func assertSameFrames(_ found: ELFFile, as full: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let reference = try ELFFile(path: full)
        let expected = try XCTUnwrap(DWARFInfo(elf: reference), file: file, line: line)
        let actual = try XCTUnwrap(DWARFInfo(elf: found), "found file has no DWARF", file: file, line: line)
        var nonEmpty = 0
        for address in SymbolicationFixtures.textAddresses(reference, stride: 3) {
            XCTAssertEqual(actual.frames(at: address), expected.frames(at: address), file: file, line: line)
            if !expected.frames(at: address).isEmpty { nonEmpty += 1 }
        }
        XCTAssertGreaterThan(nonEmpty, 0, file: file, line: line)
    }

    func testStrippedBinaryHasNoDWARFButItsBuildIDFileIsFound() throws {
        let program = try build("byid")
        let stripped = try ELFFile(path: program.stripped)
        XCTAssertNil(DWARFInfo(elf: stripped))
        let root = directory + "/debug-root"
        let expectedPath = try place(program.debug, atBuildID: program.buildID, under: root)
        let found = try XCTUnwrap(DebugFileLocator(debugDirectories: [root]).debugFile(for: stripped))
        XCTAssertEqual(found.path, expectedPath)
        try assertSameFrames(found, as: program.full)
    }

    func testSeparateDebugFileMatchesLLVMSymbolizer() throws {
        _ = try SymbolicationFixtures.require("llvm-symbolizer")
        let program = try build("versus-llvm")
        let root = directory + "/llvm-root"
        _ = try place(program.debug, atBuildID: program.buildID, under: root)
        let stripped = try ELFFile(path: program.stripped)
        let found = try XCTUnwrap(DebugFileLocator(debugDirectories: [root]).debugFile(for: stripped))
        // The stripped binary's own (here: dynamic) symbols name the outermost frame, as in llvm.
        let info = try XCTUnwrap(DWARFInfo(elf: found, symbolFile: stripped))
        let comparison = try SymbolizerComparison.compare(
            info: info, path: program.stripped, addresses: SymbolicationFixtures.textAddresses(stripped, stride: 1),
            arguments: ["--debug-file-directory=" + root])
        XCTAssertGreaterThanOrEqual(comparison.agreement, 0.995, "\(comparison)")
        XCTAssertGreaterThan(comparison.agreeing, 50, "\(comparison)")
    }

    func testDebugFileWithWrongBuildIDIsRejected() throws {
        let program = try build("victim")
        let impostor = try build("impostor", variant: 1)
        XCTAssertNotEqual(program.buildID, impostor.buildID)
        let root = directory + "/wrong-root"
        _ = try place(impostor.debug, atBuildID: program.buildID, under: root)
        XCTAssertNil(DebugFileLocator(debugDirectories: [root]).debugFile(for: try ELFFile(path: program.stripped)))
        // The same impostor as a .gnu_debuglink target is rejected too (build-id and CRC differ).
        try FileManager.default.removeItem(atPath: program.debug)
        try FileManager.default.copyItem(atPath: impostor.debug, toPath: program.debug)
        XCTAssertNil(DebugFileLocator(debugDirectories: [root]).debugFile(for: try ELFFile(path: program.linked)))
    }

    func testFlatDirectoryIsMatchedByBuildID() throws {
        let program = try build("flat")
        let other = try build("flat-other", variant: 2)
        let flat = directory + "/flat-dir"
        try FileManager.default.createDirectory(atPath: flat + "/nested", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: other.debug, toPath: flat + "/aaa.dbg")
        try FileManager.default.copyItem(atPath: program.debug, toPath: flat + "/nested/whatever-name.dbg")
        let locator = DebugFileLocator(debugDirectories: [flat])
        let found = try XCTUnwrap(locator.debugFile(for: try ELFFile(path: program.stripped)))
        XCTAssertEqual(found.path, flat + "/nested/whatever-name.dbg")
        try assertSameFrames(found, as: program.full)
        // A second lookup comes from the cached scan and finds the other one as well.
        XCTAssertEqual(locator.debugFile(for: try ELFFile(path: other.stripped))?.path, flat + "/aaa.dbg")
    }

    func testDebugLinkNextToBinaryAndInDotDebug() throws {
        let program = try build("linked")
        let elf = try ELFFile(path: program.linked)
        XCTAssertEqual(elf.debugLink?.name, "linked.debug")
        let found = try XCTUnwrap(DebugFileLocator().debugFile(for: elf))
        XCTAssertEqual(found.path, program.debug.replacingOccurrences(of: "//", with: "/"))
        try assertSameFrames(found, as: program.full)

        let dotDebug = directory + "/linked/.debug"
        try FileManager.default.createDirectory(atPath: dotDebug, withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: program.debug, toPath: dotDebug + "/linked.debug")
        let inDotDebug = try XCTUnwrap(DebugFileLocator().debugFile(for: elf))
        XCTAssertTrue(inDotDebug.path.hasSuffix("/.debug/linked.debug"), inDotDebug.path)
    }

    func testDebugLinkUnderDebugDirectoryMirror() throws {
        let program = try build("mirrored")
        let root = directory + "/mirror-root"
        let binaryDirectory = URL(fileURLWithPath: program.linked).resolvingSymlinksInPath().deletingLastPathComponent().path
        try FileManager.default.createDirectory(atPath: root + binaryDirectory, withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: program.debug, toPath: root + binaryDirectory + "/mirrored.debug")
        let found = try XCTUnwrap(DebugFileLocator(debugDirectories: [root]).debugFile(for: try ELFFile(path: program.linked)))
        XCTAssertEqual(found.path, root + binaryDirectory + "/mirrored.debug")
    }

    func testDebugLinkWithWrongCRCIsRejected() throws {
        let program = try build("crc")
        // Same build-id, different bytes: only the CRC can tell.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: program.debug))
        bytes.append(0)
        try bytes.write(to: URL(fileURLWithPath: program.debug))
        XCTAssertNil(DebugFileLocator().debugFile(for: try ELFFile(path: program.linked)))
    }

    func testMiniDebugInfoIsDecompressed() throws {
        let program = try build("mini")
        // As Fedora makes it: the symbol table of the debug file, xz-compressed, in .gnu_debugdata.
        let symbols = program.full + ".symbols"
        let withMini = program.full + ".minidebuginfo"
        for command in [
            [strip, "--strip-debug", "-o", symbols, program.debug],
            [xz, "-k", "-f", symbols],
            [objcopy, "--add-section", ".gnu_debugdata=" + symbols + ".xz", program.stripped, withMini],
        ] {
            let result = try SymbolicationFixtures.run(command)
            XCTAssertEqual(result.status, 0, "\(command.joined(separator: " ")): \(result.stderr)")
        }
        let reference = try ELFFile(path: program.full)
        let address = try XCTUnwrap(
            SymbolicationFixtures.textAddresses(reference, stride: 1).first {
                reference.symbols.lookup($0)?.name == "sum_squares"
            })
        let stripped = try ELFFile(path: withMini)
        XCTAssertNil(stripped.symbols.lookup(address))
        let mini = try XCTUnwrap(DebugFileLocator().miniDebugInfo(for: stripped))
        XCTAssertEqual(mini.symbols.lookup(address)?.name, "sum_squares")
        XCTAssertNil(DebugFileLocator().miniDebugInfo(for: reference))
    }
}
