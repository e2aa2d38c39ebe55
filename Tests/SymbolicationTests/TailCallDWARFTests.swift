// TailCallDWARFTests: call sites that lie are skipped, never trusted. The chain fixture
// (Tests/Fixtures/tailcall/chain.c: main calls first, which tail-calls second, third, then
// crash_here) is built -O2 -g with GCC (DWARF 5) and its .debug_info patched in memory: a tail
// call's return pc moved outside its function, an origin pointing out of the section, a cycle
// of tail calls. Each must give no tail-call frame (and not trap or hang); the file as built
// gives the three. The bytes are found by value: a DW_FORM_addr return pc is followed by its
// DW_FORM_ref4 DW_AT_call_origin in GCC's call-site abbreviations.

import BoundedBytes
import Foundation
import ObjectFile
import Symbolication
import TestSupport
import XCTest

final class TailCallDWARFTests: XCTestCase {
    struct Chain {
        var bytes: [UInt8]
        var info: Range<Int>  // .debug_info in the file
        var entries: [String: UInt64]
        var mainReturn: UInt64  // main's return address from its call to first
    }

    func chain() throws -> Chain {
        let gcc = try SymbolicationFixtures.require("gcc")[0]
        let directory = SymbolicationFixtures.temporaryDirectory("tailcall-dwarf")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let program = directory + "/chain"
        let result = try SymbolicationFixtures.run(
            [gcc, "-O2", "-g", TestSupport.fixture("tailcall/chain.c"), "-o", program])
        XCTAssertEqual(result.status, 0, result.stderr)
        let elf = try ELFFile(path: program)
        var entries: [String: UInt64] = [:]
        for name in ["main", "first", "second", "third", "crash_here"] {
            entries[name] = try XCTUnwrap(elf.functionAddresses(named: name).first?.address, name)
        }
        let section = try XCTUnwrap(elf.section(named: ".debug_info"))
        let dwarf = try XCTUnwrap(DWARFInfo(elf: elf))
        let main = entries["main"]!
        let mainReturn = try XCTUnwrap(
            (main...(main + 64)).first { dwarf.callSite(returningTo: $0)?.target == .address(entries["first"]!) })
        return Chain(
            bytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: program))),
            info: Int(section.offset)..<Int(section.offset + section.size), entries: entries, mainReturn: mainReturn)
    }

    /// The tail-call frames TailCalls puts between crash_here and main in a file of `bytes`.
    func tailCallFunctions(_ chain: Chain, bytes: [UInt8]) throws -> [String] {
        let elf = try ELFFile(file: MappedFile(bytes: bytes, name: "chain-patched"))
        // A cache of its own: the patched file has the original's build-id.
        let image = DebugImageCache().image(for: elf, locator: DebugFileLocator())
        let crash = chain.entries["crash_here"]!
        let callee = TailCallEnd(image: image, module: "chain", pc: crash + 4, virtualPC: crash + 4, isReturnAddress: false)
        let caller = TailCallEnd(
            image: image, module: "chain", pc: chain.mainReturn, virtualPC: chain.mainReturn, isReturnAddress: true)
        let frames = TailCalls.frames(callee: callee, caller: caller)
        XCTAssertTrue(frames.allSatisfy { $0.frame.tailCall })
        return frames.map { $0.frame.function ?? "?" }
    }

    /// The offset in the file of the one DW_FORM_addr value `address` in .debug_info.
    func addressField(_ address: UInt64, in chain: Chain) throws -> Int {
        let pattern = [UInt8](littleEndian: address)
        let found = chain.info.dropLast(7).filter { Array(chain.bytes[$0..<($0 + 8)]) == pattern }
        XCTAssertEqual(found.count, 1, "the return pc \(address) should appear once in .debug_info")
        return try XCTUnwrap(found.first)
    }

    /// The tail call (return pc) that `function` makes.
    func tailCallReturnPC(of function: String, in chain: Chain) throws -> UInt64 {
        let elf = try ELFFile(file: MappedFile(bytes: chain.bytes, name: "chain"))
        let sites = try XCTUnwrap(DWARFInfo(elf: elf)?.tailCalls(ofFunctionAt: chain.entries[function]!, limit: 8))
        XCTAssertEqual(sites.count, 1, function)
        return try XCTUnwrap(sites.first?.pc)
    }

    /// What the tail call of `function` calls, in a file of `bytes`.
    func target(of function: String, chain: Chain, bytes: [UInt8]) throws -> CallSite.Target? {
        let elf = try ELFFile(file: MappedFile(bytes: bytes, name: "chain-target"))
        return DWARFInfo(elf: elf)?.tailCalls(ofFunctionAt: chain.entries[function]!, limit: 8)?.first?.target
    }

    func testCallSitesThatLieGiveNoTailCallFrame() throws {
        let chain = try chain()
        XCTAssertEqual(try tailCallFunctions(chain, bytes: chain.bytes), ["third", "second", "first"])

        // second's jump to third, said to return inside main: not second's call, dropped.
        var moved = chain.bytes
        let secondSite = try addressField(try tailCallReturnPC(of: "second", in: chain), in: chain)
        moved.put(u64: chain.entries["main"]! + 1, at: secondSite)
        XCTAssertEqual(try tailCallFunctions(chain, bytes: moved), [])
        let movedELF = try ELFFile(file: MappedFile(bytes: moved, name: "moved"))
        XCTAssertNil(DWARFInfo(elf: movedELF)?.callSite(returningTo: chain.entries["main"]! + 1))

        // third's jump to crash_here with its origin out of the section: the target is unknown,
        // and an unknown tail call on the way means no chain is sure.
        let thirdSite = try addressField(try tailCallReturnPC(of: "third", in: chain), in: chain)
        var outside = chain.bytes
        outside.put(u32: 0xFFFF_FFF0, at: thirdSite + 8)
        XCTAssertEqual(try tailCallFunctions(chain, bytes: outside), [])
        XCTAssertEqual(try target(of: "third", chain: chain, bytes: outside), .unknown)

        // third's jump made to go back to first (main's call site's origin): a cycle of tail
        // calls that never reaches crash_here. The search ends, with nothing.
        let mainSite = try addressField(chain.mainReturn, in: chain)
        var cycle = chain.bytes
        cycle.replaceSubrange((thirdSite + 8)..<(thirdSite + 12), with: chain.bytes[(mainSite + 8)..<(mainSite + 12)])
        XCTAssertNotEqual(Array(cycle), chain.bytes)
        XCTAssertEqual(try tailCallFunctions(chain, bytes: cycle), [])
        XCTAssertEqual(try target(of: "third", chain: chain, bytes: cycle), .address(chain.entries["first"]!))
    }
}
