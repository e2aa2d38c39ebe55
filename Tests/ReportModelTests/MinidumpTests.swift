// MinidumpTests: the minidump writer and reader on synthetic snapshots.
//
// Layout checks read the bytes directly at the spec's offsets (shared/reference/minidump.md), not
// through the reader, so writer and reader cannot agree on a mistake. The reader is also fed
// truncated, corrupted and random files, which must throw and never trap. The obj2yaml test runs
// LLVM's minidump parser (the one LLDB uses) over a written file.

import BoundedBytes
import Foundation
import ObjectFile
import TestSupport
import XCTest

@testable import ReportModel

private typealias MD = MinidumpFormat

final class MinidumpTests: XCTestCase {
    // MARK: Fixtures

    static let exeBuildID: [UInt8] = hexBytes("83dd4c0499a7344aea26eab21d918e112edaeac0")
    static let vdsoBuildID: [UInt8] = hexBytes("0123456789abcdef0123456789abcdef01234567")
    static let maps = Array(
        """
        555555554000-555555555000 r--p 00000000 08:01 1234 /usr/bin/crashme
        555555555000-555555559000 r-xp 00001000 08:01 1234 /usr/bin/crashme
        7ffff7dd0000-7ffff7df0000 r-xp 00000000 08:01 99 /opt/lib/libnobuildid.so
        7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0 [vdso]
        7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]

        """.utf8)

    static func hexBytes(_ hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    static func registers(seed: UInt64, fxsave: Bool) -> X86_64Registers {
        let gpr = (0..<X86_64Registers.gprCount).map { 0x1000_0000_0000_0000 &+ seed << 32 &+ UInt64($0) * 0x1111 }
        var registers = X86_64Registers(gpr: gpr)
        // Fields the context stores narrower than user_regs_struct get values that fit.
        registers["cs"] = 0x33
        registers["ss"] = 0x2B
        registers["ds"] = 0
        registers["es"] = 0
        registers["fs"] = 0
        registers["gs"] = 0
        registers["eflags"] = 0x10246
        if fxsave {
            var image = (0..<512).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ Int(seed)) }
            image[24..<28] = [0x80, 0x1F, 0, 0]  // mxcsr = 0x1f80
            registers.fxsave = image
        }
        return registers
    }

    static func stack(at start: UInt64, count: Int, seed: UInt8) -> MemoryRegion {
        MemoryRegion(start: start, bytes: (0..<count).map { UInt8(truncatingIfNeeded: $0) ^ seed })
    }

    /// Three threads (the crashed one first, one without FP state or name), three modules (the
    /// executable with the spec's example build id, a library without one, the vDSO), the Linux
    /// files, and extra memory of which part overlaps a stack.
    static func snapshot() -> ProcessSnapshot {
        let threads = [
            ThreadSnapshot(
                tid: 4242, name: "crashme", registers: registers(seed: 1, fxsave: true),
                stack: stack(at: 0x7FFF_FFFD_E000, count: 4096 + 13, seed: 0x11)),
            ThreadSnapshot(
                tid: 4243, name: "worker-🚀", registers: registers(seed: 2, fxsave: true),
                stack: stack(at: 0x7FFF_F000_0000, count: 8192, seed: 0x22)),
            ThreadSnapshot(
                tid: 4244, name: "", registers: registers(seed: 3, fxsave: false),
                stack: stack(at: 0x7FFF_E000_0000, count: 1000, seed: 0x33)),
        ]
        let modules = [
            LoadedModule(path: "/usr/bin/crashme", base: 0x5555_5555_4000, size: 0x5000, buildID: BuildID(exeBuildID)),
            LoadedModule(path: "/opt/lib/libnobuildid.so", base: 0x7FFF_F7DD_0000, size: 0x20000, buildID: nil),
            LoadedModule(path: "[vdso]", base: 0x7FFF_F7FC_1000, size: 0x2000, buildID: BuildID(vdsoBuildID)),
        ]
        var files = LinuxFiles()
        files.cpuInfo = Array("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n".utf8)
        files.procStatus = Array("Name:\tcrashme\nTgid:\t4242\nPid:\t4242\n".utf8)
        files.lsbRelease = Array("ID=debian\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\n".utf8)
        files.cmdLine = Array("/usr/bin/crashme\0--crash\0".utf8)
        files.environ = Array("HOME=/root\0API_TOKEN=secret\0".utf8)
        files.auxv = (0..<32).map { UInt8($0) }
        files.maps = maps
        var system = SystemInfo()
        system.cpuCount = 2
        system.cpuFamily = 25
        system.cpuModel = 17
        system.cpuStepping = 1
        system.cpuVendor = "AuthenticAMD"
        system.release = "6.1.0-13-amd64"
        system.version = "#1 SMP PREEMPT_DYNAMIC Debian 6.1.55-1 (2023-09-29)"
        return ProcessSnapshot(
            pid: 4242, crashedThreadID: 4242,
            exception: ExceptionInfo(signal: 11, code: 1, faultAddress: 0x10),
            threads: threads, modules: modules,
            extraMemory: [
                // Around the faulting PC.
                stack(at: 0x5555_5555_5100, count: 256, seed: 0x44),
                // Straddles the end of thread 4244's stack: only the part past it is new.
                stack(at: 0x7FFF_E000_0000 + 900, count: 300, seed: 0x55),
            ],
            system: system, linuxFiles: files, captureTime: 1_700_000_000, processStartTime: 1_699_999_990)
    }

    /// The registers a minidump can give back: orig_rax and gs_base have no slot in CONTEXT_AMD64.
    static func expectedAfterRoundTrip(_ registers: X86_64Registers) -> X86_64Registers {
        var expected = registers
        expected["orig_rax"] = 0
        expected["gs_base"] = 0
        return expected
    }

    // MARK: Raw access for layout checks

    struct Entry { var type: UInt32; var size: UInt32; var rva: UInt32 }

    static func u16(_ bytes: [UInt8], _ offset: Int) -> UInt16 { bytes.u16(at: offset) }
    static func u32(_ bytes: [UInt8], _ offset: Int) -> UInt32 { bytes.u32(at: offset) }
    static func u64(_ bytes: [UInt8], _ offset: Int) -> UInt64 { bytes.u64(at: offset) }

    static func directory(_ bytes: [UInt8]) -> [Entry] {
        let count = Int(u32(bytes, 8))
        let rva = Int(u32(bytes, 12))
        return (0..<count).map { index in
            let at = rva + index * 12
            return Entry(type: u32(bytes, at), size: u32(bytes, at + 4), rva: u32(bytes, at + 8))
        }
    }

    static func entry(_ bytes: [UInt8], _ type: UInt32) -> Entry? { directory(bytes).first { $0.type == type } }

    /// A MINIDUMP_STRING decoded by hand.
    static func string(_ bytes: [UInt8], _ rva: Int) -> String {
        let length = Int(u32(bytes, rva))
        let units = (0..<length / 2).map { u16(bytes, rva + 4 + 2 * $0) }
        return String(decoding: units, as: UTF16.self)
    }

    // MARK: Layout

    func testHeaderAndDirectory() throws {
        let bytes = MinidumpWriter().bytes(for: Self.snapshot())
        XCTAssertEqual(Array(bytes[0..<4]), Array("MDMP".utf8))
        XCTAssertEqual(Self.u32(bytes, 4), 0xA793)
        XCTAssertEqual(Self.u32(bytes, 12), 32, "the directory follows the 32-byte header")
        XCTAssertEqual(Self.u32(bytes, 16), 0, "checksum")
        XCTAssertEqual(Self.u32(bytes, 20), 1_700_000_000)
        XCTAssertEqual(Self.u64(bytes, 24), 0, "flags")

        let directory = Self.directory(bytes)
        let type = MD.MINIDUMP_STREAM_TYPE.self
        XCTAssertEqual(
            directory.map(\.type),
            [
                type.ThreadList, type.ModuleList, type.MemoryList, type.Exception, type.SystemInfo, type.MiscInfo,
                type.LinuxCpuInfo, type.LinuxProcStatus, type.LinuxLsbRelease, type.LinuxCmdLine, type.LinuxAuxv,
                type.LinuxMaps, type.ThreadNames,
            ])
        XCTAssertEqual(Int(Self.u32(bytes, 8)), directory.count)
        // Stream data lies after the 12-byte entries.
        XCTAssertGreaterThanOrEqual(directory.map { Int($0.rva) }.min() ?? 0, 32 + 12 * directory.count)
        assertDirectoryIntegrity(bytes)
    }

    func assertDirectoryIntegrity(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
        let directory = Self.directory(bytes)
        for entry in directory {
            XCTAssertLessThanOrEqual(
                Int(entry.rva) + Int(entry.size), bytes.count,
                "stream \(MD.MINIDUMP_STREAM_TYPE.name(entry.type)) past EOF", file: file, line: line)
            XCTAssertEqual(entry.rva % 8, 0, "streams are 8-byte aligned", file: file, line: line)
            XCTAssertNotEqual(entry.type, 0, "no nullified entries", file: file, line: line)
        }
        XCTAssertEqual(Set(directory.map(\.type)).count, directory.count, "duplicate stream type", file: file, line: line)
    }

    func testOptionalStreamsAreOmittedOrOptIn() throws {
        var snapshot = Self.snapshot()
        snapshot.linuxFiles.maps = nil
        snapshot.linuxFiles.auxv = nil
        var bytes = MinidumpWriter().bytes(for: snapshot)
        var types = Self.directory(bytes).map(\.type)
        XCTAssertFalse(types.contains(MD.MINIDUMP_STREAM_TYPE.LinuxMaps))
        XCTAssertFalse(types.contains(MD.MINIDUMP_STREAM_TYPE.LinuxAuxv))
        XCTAssertFalse(types.contains(MD.MINIDUMP_STREAM_TYPE.LinuxEnviron), "environ is opt-in")
        XCTAssertEqual(types.count, 11)
        assertDirectoryIntegrity(bytes)

        bytes = MinidumpWriter(includeEnvironment: true).bytes(for: snapshot)
        types = Self.directory(bytes).map(\.type)
        XCTAssertEqual(types.last, MD.MINIDUMP_STREAM_TYPE.LinuxEnviron)
        XCTAssertEqual(types.count, 12)
        let dump = try Minidump(bytes: bytes)
        XCTAssertEqual(dump.stream(MD.MINIDUMP_STREAM_TYPE.LinuxEnviron), snapshot.linuxFiles.environ)
        XCTAssertNil(dump.stream(MD.MINIDUMP_STREAM_TYPE.LinuxMaps))
        assertDirectoryIntegrity(bytes)

        // Opted in but unreadable: still no entry.
        snapshot.linuxFiles.environ = nil
        bytes = MinidumpWriter(includeEnvironment: true).bytes(for: snapshot)
        XCTAssertFalse(Self.directory(bytes).map(\.type).contains(MD.MINIDUMP_STREAM_TYPE.LinuxEnviron))
        assertDirectoryIntegrity(bytes)
    }

    func testThreadListAndContextLayout() throws {
        let snapshot = Self.snapshot()
        let bytes = MinidumpWriter().bytes(for: snapshot)
        let list = try XCTUnwrap(Self.entry(bytes, MD.MINIDUMP_STREAM_TYPE.ThreadList))
        XCTAssertEqual(Int(list.size), 4 + 48 * snapshot.threads.count)
        XCTAssertEqual(Int(Self.u32(bytes, Int(list.rva))), snapshot.threads.count)

        for (index, thread) in snapshot.threads.enumerated() {
            let entry = Int(list.rva) + 4 + 48 * index
            XCTAssertEqual(Self.u32(bytes, entry), UInt32(thread.tid.rawValue))
            XCTAssertEqual(Self.u64(bytes, entry + 16), thread.registers["fs_base"], "teb holds fs_base")
            XCTAssertEqual(Self.u64(bytes, entry + 24), thread.stack!.start)
            let stackSize = Int(Self.u32(bytes, entry + 32))
            let stackRVA = Int(Self.u32(bytes, entry + 36))
            XCTAssertEqual(Array(bytes[stackRVA..<(stackRVA + stackSize)]), thread.stack!.bytes)
            XCTAssertEqual(Self.u32(bytes, entry + 40), 1232)
            let context = Int(Self.u32(bytes, entry + 44))
            XCTAssertEqual(context % 8, 0)

            let registers = thread.registers
            let hasFP = !registers.fxsave.isEmpty
            XCTAssertEqual(Self.u32(bytes, context + 0x30), hasFP ? 0x0010_000F : 0x0010_0007, "context_flags")
            XCTAssertEqual(Self.u64(bytes, context + 0xF8), registers.rip, "rip @0xF8")
            XCTAssertEqual(Self.u64(bytes, context + 0x98), registers.rsp, "rsp @0x98")
            XCTAssertEqual(Self.u64(bytes, context + 0xA0), registers.rbp, "rbp @0xA0")
            XCTAssertEqual(Self.u64(bytes, context + 0x78), registers["rax"], "rax @0x78")
            XCTAssertEqual(Self.u64(bytes, context + 0x90), registers["rbx"], "rbx @0x90")
            XCTAssertEqual(Self.u64(bytes, context + 0xB8), registers["r8"], "r8 @0xB8")
            XCTAssertEqual(Self.u64(bytes, context + 0xF0), registers["r15"], "r15 @0xF0")
            XCTAssertEqual(Self.u16(bytes, context + 0x38), 0x33, "cs @0x38")
            XCTAssertEqual(Self.u16(bytes, context + 0x42), 0x2B, "ss @0x42")
            XCTAssertEqual(Self.u32(bytes, context + 0x44), 0x10246, "eflags @0x44")
            XCTAssertEqual(Array(bytes[context..<(context + 0x30)]), [UInt8](repeating: 0, count: 0x30), "p1..p6_home")
            if hasFP {
                XCTAssertEqual(Self.u32(bytes, context + 0x34), 0x1F80, "mx_csr @0x34")
                XCTAssertEqual(Array(bytes[(context + 0x100)..<(context + 0x300)]), registers.fxsave, "FXSAVE @0x100")
            } else {
                XCTAssertEqual(Self.u32(bytes, context + 0x34), 0)
                XCTAssertEqual(Array(bytes[(context + 0x100)..<(context + 0x300)]), [UInt8](repeating: 0, count: 512))
            }
        }
    }

    func testModuleListLayout() throws {
        let snapshot = Self.snapshot()
        let bytes = MinidumpWriter().bytes(for: snapshot)
        let list = try XCTUnwrap(Self.entry(bytes, MD.MINIDUMP_STREAM_TYPE.ModuleList))
        XCTAssertEqual(Int(list.size), 4 + 108 * 3)
        XCTAssertEqual(Self.u32(bytes, Int(list.rva)), 3)
        let names = ["/usr/bin/crashme", "/opt/lib/libnobuildid.so", "linux-gate.so"]
        for (index, module) in snapshot.modules.enumerated() {
            let entry = Int(list.rva) + 4 + 108 * index
            XCTAssertEqual(Self.u64(bytes, entry), module.base)
            XCTAssertEqual(UInt64(Self.u32(bytes, entry + 8)), module.size)
            let nameRVA = Int(Self.u32(bytes, entry + 20))
            XCTAssertEqual(Self.string(bytes, nameRVA), names[index])
            XCTAssertEqual(Int(Self.u32(bytes, nameRVA)), names[index].utf16.count * 2, "byte length without NUL")
            XCTAssertEqual(Self.u16(bytes, nameRVA + 4 + names[index].utf16.count * 2), 0, "terminator")
            XCTAssertEqual(Array(bytes[(entry + 24)..<(entry + 76)]), [UInt8](repeating: 0, count: 52), "VS_FIXEDFILEINFO")
            let cvSize = Int(Self.u32(bytes, entry + 76))
            let cvRVA = Int(Self.u32(bytes, entry + 80))
            if let buildID = module.buildID {
                XCTAssertEqual(cvSize, 24, "4 + a 20-byte build id, no padding")
                XCTAssertEqual(Array(bytes[cvRVA..<(cvRVA + 4)]), Array("LEpB".utf8))
                XCTAssertEqual(Array(bytes[(cvRVA + 4)..<(cvRVA + cvSize)]), buildID.bytes)
            } else {
                XCTAssertEqual(cvSize, 0)
                XCTAssertEqual(cvRVA, 0)
            }
            XCTAssertEqual(Array(bytes[(entry + 84)..<(entry + 108)]), [UInt8](repeating: 0, count: 24), "misc + reserved")
        }
    }

    func testMemoryListSharesStacksAndHasNoOverlaps() throws {
        let snapshot = Self.snapshot()
        let bytes = MinidumpWriter().bytes(for: snapshot)
        let threads = try XCTUnwrap(Self.entry(bytes, MD.MINIDUMP_STREAM_TYPE.ThreadList))
        let memory = try XCTUnwrap(Self.entry(bytes, MD.MINIDUMP_STREAM_TYPE.MemoryList))
        let count = Int(Self.u32(bytes, Int(memory.rva)))
        XCTAssertEqual(Int(memory.size), 4 + 16 * count)
        var ranges: [(start: UInt64, size: UInt32, rva: UInt32)] = (0..<count).map { index in
            let entry = Int(memory.rva) + 4 + 16 * index
            return (Self.u64(bytes, entry), Self.u32(bytes, entry + 8), Self.u32(bytes, entry + 12))
        }
        // Each stack: the same descriptor as its thread entry.
        for index in snapshot.threads.indices {
            let entry = Int(threads.rva) + 4 + 48 * index
            let descriptor = (Self.u64(bytes, entry + 24), Self.u32(bytes, entry + 32), Self.u32(bytes, entry + 36))
            XCTAssertTrue(ranges.contains { $0 == descriptor }, "stack of thread \(index) listed with its RVA")
        }
        XCTAssertEqual(count, 5, "3 stacks + the PC region + the part of the straddling region past the stack")
        // No overlaps, and each range's bytes are the target's.
        ranges.sort { $0.start < $1.start }
        for (left, right) in zip(ranges, ranges.dropFirst()) {
            XCTAssertLessThanOrEqual(left.start + UInt64(left.size), right.start, "overlapping memory ranges")
        }
        let straddling = snapshot.extraMemory[1]
        let stackEnd = snapshot.threads[2].stack!.end
        let clipped = try XCTUnwrap(ranges.first { $0.start == stackEnd })
        XCTAssertEqual(UInt64(clipped.size), straddling.end - stackEnd)
        XCTAssertEqual(
            Array(bytes[Int(clipped.rva)..<(Int(clipped.rva) + Int(clipped.size))]),
            Array(straddling.bytes[Int(stackEnd - straddling.start)...]))
    }

    func testExceptionSystemInfoMiscInfoAndThreadNamesLayout() throws {
        var snapshot = Self.snapshot()
        snapshot.exception = ExceptionInfo(signal: 6, code: -6, faultAddress: 0)  // SIGABRT, SI_TKILL
        let bytes = MinidumpWriter().bytes(for: snapshot)

        let exception = try XCTUnwrap(Self.entry(bytes, MD.MINIDUMP_STREAM_TYPE.Exception))
        XCTAssertEqual(exception.size, 168)
        let e = Int(exception.rva)
        XCTAssertEqual(Self.u32(bytes, e), 4242)
        XCTAssertEqual(Self.u32(bytes, e + 8), 6)
        XCTAssertEqual(Self.u32(bytes, e + 12), 0xFFFF_FFFA)
        XCTAssertEqual(Self.u64(bytes, e + 24), 0)
        let threads = try XCTUnwrap(Self.entry(bytes, MD.MINIDUMP_STREAM_TYPE.ThreadList))
        XCTAssertEqual(Self.u32(bytes, e + 160), 1232)
        XCTAssertEqual(Self.u32(bytes, e + 164), Self.u32(bytes, Int(threads.rva) + 4 + 44), "the crashed thread's context blob")

        let system = try XCTUnwrap(Self.entry(bytes, MD.MINIDUMP_STREAM_TYPE.SystemInfo))
        XCTAssertEqual(system.size, 56)
        let s = Int(system.rva)
        XCTAssertEqual(Self.u16(bytes, s), 9, "AMD64")
        XCTAssertEqual(Self.u16(bytes, s + 2), 25, "family")
        XCTAssertEqual(Self.u16(bytes, s + 4), 17 << 8 | 1, "model << 8 | stepping")
        XCTAssertEqual(bytes[s + 6], 2, "CPUs")
        XCTAssertEqual([Self.u32(bytes, s + 8), Self.u32(bytes, s + 12), Self.u32(bytes, s + 16)], [6, 1, 0])
        XCTAssertEqual(Self.u32(bytes, s + 20), 0x8201)
        XCTAssertEqual(
            Self.string(bytes, Int(Self.u32(bytes, s + 24))),
            "Linux 6.1.0-13-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.55-1 (2023-09-29) x86_64")
        XCTAssertEqual(Array(bytes[(s + 32)..<(s + 44)]), Array("AuthenticAMD".utf8))

        let misc = try XCTUnwrap(Self.entry(bytes, MD.MINIDUMP_STREAM_TYPE.MiscInfo))
        XCTAssertEqual(misc.size, 24)
        XCTAssertEqual((0..<6).map { Self.u32(bytes, Int(misc.rva) + 4 * $0) }, [24, 3, 4242, 1_699_999_990, 0, 0])
        snapshot.processStartTime = nil
        let withoutStart = MinidumpWriter().bytes(for: snapshot)
        let misc2 = try XCTUnwrap(Self.entry(withoutStart, MD.MINIDUMP_STREAM_TYPE.MiscInfo))
        XCTAssertEqual(Self.u32(withoutStart, Int(misc2.rva) + 4), 1, "PROCESS_ID only")

        let names = try XCTUnwrap(Self.entry(bytes, MD.MINIDUMP_STREAM_TYPE.ThreadNames))
        XCTAssertEqual(names.size, 4 + 12 * 2, "the unnamed thread is left out")
        let n = Int(names.rva)
        XCTAssertEqual(Self.u32(bytes, n), 2)
        XCTAssertEqual(Self.u32(bytes, n + 4), 4242)
        XCTAssertEqual(Self.string(bytes, Int(Self.u64(bytes, n + 8))), "crashme")
        XCTAssertEqual(Self.u32(bytes, n + 16), 4243)
        let rocketRVA = Int(Self.u64(bytes, n + 20))
        XCTAssertEqual(Self.string(bytes, rocketRVA), "worker-🚀")
        XCTAssertEqual(Self.u32(bytes, rocketRVA), UInt32("worker-🚀".utf16.count * 2), "a surrogate pair counts 4 bytes")

        for (type, file) in [
            (MD.MINIDUMP_STREAM_TYPE.LinuxMaps, snapshot.linuxFiles.maps),
            (MD.MINIDUMP_STREAM_TYPE.LinuxCmdLine, snapshot.linuxFiles.cmdLine),
        ] {
            let entry = try XCTUnwrap(Self.entry(bytes, type))
            XCTAssertEqual(Array(bytes[Int(entry.rva)..<Int(entry.rva + entry.size)]), file, "raw bytes, no padding")
        }
    }

    func testBreakpadDebugID() {
        XCTAssertEqual(breakpadDebugID(buildID: Self.exeBuildID), "044CDD83A7994A34EA26EAB21D918E110")
        XCTAssertEqual(breakpadDebugID(buildID: [0x01, 0x02]), "00000201000000000000000000000000" + "0")
        XCTAssertEqual(breakpadDebugID(buildID: []).count, 33)
    }

    // MARK: Round trip

    func testRoundTrip() throws {
        let snapshot = Self.snapshot()
        let dump = try Minidump(bytes: MinidumpWriter().bytes(for: snapshot))

        XCTAssertEqual(dump.timeDateStamp, 1_700_000_000)
        XCTAssertEqual(dump.pid, 4242)
        XCTAssertEqual(dump.processCreateTime, 1_699_999_990)
        XCTAssertEqual(dump.threads.map(\.tid), [4242, 4243, 4244])
        for (read, written) in zip(dump.threads, snapshot.threads) {
            XCTAssertEqual(read.registers, Self.expectedAfterRoundTrip(written.registers), "registers of \(written.tid)")
            XCTAssertEqual(read.stack, written.stack)
            XCTAssertEqual(read.name, written.name.isEmpty ? nil : written.name)
            XCTAssertEqual(read.context.dataSize, 1232)
        }
        XCTAssertEqual(dump.threadNames, [4242: "crashme", 4243: "worker-🚀"])

        XCTAssertEqual(dump.modules, snapshot.modules, "[vdso] comes back from linux-gate.so")

        let exception = try XCTUnwrap(dump.exception)
        XCTAssertEqual(exception.threadID, 4242)
        XCTAssertEqual(exception.info, snapshot.exception)
        XCTAssertEqual(exception.registers, Self.expectedAfterRoundTrip(snapshot.threads[0].registers))
        XCTAssertEqual(exception.context, dump.threads[0].context)
        XCTAssertFalse(exception.isDumpRequested)

        let system = try XCTUnwrap(dump.systemInfo)
        XCTAssertEqual(system.processorArchitecture, 9)
        XCTAssertEqual(system.platformID, 0x8201)
        XCTAssertEqual([system.majorVersion, system.minorVersion, system.buildNumber], [6, 1, 0])
        XCTAssertEqual(system.system, snapshot.system)

        for stack in snapshot.threads.compactMap(\.stack) {
            XCTAssertTrue(dump.memory.regions.contains(stack), "stack at \(stack.start) in the MemoryList")
        }
        XCTAssertTrue(dump.memory.regions.contains(snapshot.extraMemory[0]))
        XCTAssertEqual(dump.memory.bytes(at: 0x5555_5555_5100 + 8, count: 4), Array(snapshot.extraMemory[0].bytes[8..<12]))
        XCTAssertEqual(dump.memory.bytes(at: 0x1000, count: 1), [])

        XCTAssertEqual(dump.warnings, [])
        XCTAssertEqual(dump.stream(MD.MINIDUMP_STREAM_TYPE.LinuxMaps), snapshot.linuxFiles.maps)
        XCTAssertEqual(dump.stream(MD.MINIDUMP_STREAM_TYPE.LinuxCpuInfo), snapshot.linuxFiles.cpuInfo)
        XCTAssertEqual(dump.stream(MD.MINIDUMP_STREAM_TYPE.LinuxProcStatus), snapshot.linuxFiles.procStatus)
        XCTAssertEqual(dump.stream(MD.MINIDUMP_STREAM_TYPE.LinuxLsbRelease), snapshot.linuxFiles.lsbRelease)
        XCTAssertEqual(dump.stream(MD.MINIDUMP_STREAM_TYPE.LinuxCmdLine), snapshot.linuxFiles.cmdLine)
        XCTAssertEqual(dump.stream(MD.MINIDUMP_STREAM_TYPE.LinuxAuxv), snapshot.linuxFiles.auxv)
        XCTAssertNil(dump.stream(MD.MINIDUMP_STREAM_TYPE.LinuxEnviron))
    }

    func testRoundTripOfEdgeCases() throws {
        // No stacks, no modules, a crashed thread missing from the list, an empty release.
        var snapshot = Self.snapshot()
        snapshot.threads[1].stack = nil
        snapshot.threads[2].stack = MemoryRegion(start: 0x1000, bytes: [])
        snapshot.modules = []
        snapshot.extraMemory = []
        snapshot.crashedThreadID = 9999
        snapshot.system.release = ""
        snapshot.linuxFiles = LinuxFiles()
        let bytes = MinidumpWriter().bytes(for: snapshot)
        assertDirectoryIntegrity(bytes)
        let dump = try Minidump(bytes: bytes)
        XCTAssertNil(dump.threads[1].stack)
        XCTAssertNil(dump.threads[2].stack)
        XCTAssertEqual(dump.memory.regions.count, 1)
        XCTAssertEqual(dump.modules, [])
        XCTAssertEqual(dump.exception?.threadID, 9999)
        XCTAssertNil(dump.exception?.registers, "no context for a thread that is not in the list")
        XCTAssertEqual(dump.exception?.context, Minidump.Location(dataSize: 0, rva: 0))
        XCTAssertEqual(dump.systemInfo.map { [$0.majorVersion, $0.minorVersion, $0.buildNumber] }, [0, 0, 0])
        XCTAssertEqual(dump.pid, 4242)
    }

    /// What Breakpad writes: nullified entries, no ThreadNames, no MiscInfo (pid from ProcStatus).
    func testReaderToleratesBreakpadStyleDumps() throws {
        var bytes = MinidumpWriter().bytes(for: Self.snapshot())
        let directory = Self.directory(bytes)
        for (index, entry) in directory.enumerated()
        where entry.type == MD.MINIDUMP_STREAM_TYPE.ThreadNames || entry.type == MD.MINIDUMP_STREAM_TYPE.MiscInfo {
            let at = 32 + 12 * index
            bytes.replaceSubrange(at..<(at + 12), with: [UInt8](repeating: 0, count: 12))
        }
        let dump = try Minidump(bytes: bytes)
        XCTAssertEqual(dump.streams.filter { $0.type == 0 }.count, 2)
        XCTAssertEqual(dump.threadNames, [:])
        XCTAssertEqual(dump.threads.map(\.name), [nil, nil, nil])
        XCTAssertEqual(dump.pid, 4242, "from the Pid: line of LinuxProcStatus")
        XCTAssertNil(dump.processCreateTime)
        XCTAssertNil(dump.stream(0))
    }

    /// rust-minidump and LLVM read exactly 4 spare bytes in a list stream as padding after the count.
    func testReaderSkipsPaddingAfterListCount() throws {
        var bytes = MinidumpWriter().bytes(for: Self.snapshot())
        let index = try XCTUnwrap(Self.directory(bytes).firstIndex { $0.type == MD.MINIDUMP_STREAM_TYPE.ModuleList })
        let list = Self.directory(bytes)[index]
        // A copy of the list with 4 bytes of padding after the count, appended at the end.
        let rva = bytes.count
        let original = Array(bytes[Int(list.rva)..<Int(list.rva + list.size)])
        bytes += original.prefix(4) + [0, 0, 0, 0] + original.dropFirst(4)
        let at = 32 + 12 * index
        bytes.put(u32: list.size + 4, at: at + 4)
        bytes.put(u32: UInt32(rva), at: at + 8)
        XCTAssertEqual(try Minidump(bytes: bytes).modules, Self.snapshot().modules)
    }

    // MARK: Files

    func testWriteToFileIsAtomicAndReadable() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("md-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("minidump.dmp").path

        try MinidumpWriter().write(Self.snapshot(), to: path)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: directory.path), ["minidump.dmp"],
            "no temporary file left behind")
        let written = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(Array(written.prefix(4)), Array("MDMP".utf8))
        XCTAssertEqual(Array(written), MinidumpWriter().bytes(for: Self.snapshot()))
        let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        XCTAssertEqual(permissions, 0o600)
        XCTAssertEqual(try Minidump(path: path).threads.count, 3)

        // Overwriting an existing dump works the same way.
        try MinidumpWriter().write(Self.snapshot(), to: path)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path), ["minidump.dmp"])
    }

    func testWriteAndReadFailuresCarryErrno() {
        XCTAssertThrowsError(try MinidumpWriter().write(Self.snapshot(), to: "/nonexistent-dir-\(UUID())/x.dmp")) { error in
            guard case .system(let call, _, let code) = error as? MinidumpError else {
                return XCTFail("unexpected \(error)")
            }
            XCTAssertEqual(call, "open")
            XCTAssertEqual(code, ENOENT)
            XCTAssertTrue("\(error)".contains("errno \(ENOENT)"))
        }
        let missing = "/nonexistent-\(UUID()).dmp"
        XCTAssertThrowsError(try Minidump(path: missing)) { error in
            XCTAssertEqual(error as? MinidumpError, .system(call: "open", path: missing, errno: ENOENT))
        }
    }

    // MARK: Malformed input

    func assertMalformed(_ bytes: [UInt8], _ message: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try Minidump(bytes: bytes), message, file: file, line: line) { error in
            guard case .malformed(let text)? = error as? MinidumpError else {
                return XCTFail("\(message): unexpected error \(error)", file: file, line: line)
            }
            XCTAssertFalse(text.isEmpty, file: file, line: line)
        }
    }

    func testTruncatedDumpsThrow() {
        let bytes = MinidumpWriter().bytes(for: Self.snapshot())
        for length in stride(from: 0, to: bytes.count, by: 97) {
            assertMalformed(Array(bytes.prefix(length)), "truncated to \(length) of \(bytes.count) bytes")
        }
        assertMalformed(Array(bytes.dropLast()), "one byte short")
    }

    func testDirectoryEntryPastEndThrows() {
        var bytes = MinidumpWriter().bytes(for: Self.snapshot())
        // Stream 0's rva + data_size: one byte past the end of the file.
        let size = Self.u32(bytes, 32 + 4)
        let rva = UInt32(bytes.count) - size + 1
        bytes.put(u32: rva, at: 40)
        assertMalformed(bytes, "entry past EOF")
        // A huge rva + size that wraps 32 bits.
        bytes.replaceSubrange(36..<44, with: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        assertMalformed(bytes, "wrapping entry")
    }

    func testHugeCountsThrowWithoutAllocating() throws {
        let original = MinidumpWriter().bytes(for: Self.snapshot())
        // The header's stream count.
        var bytes = original
        bytes.replaceSubrange(8..<12, with: [0xFF, 0xFF, 0xFF, 0xFF])
        assertMalformed(bytes, "huge stream count")
        // Each list stream's count.
        for type in [
            MD.MINIDUMP_STREAM_TYPE.ThreadList, MD.MINIDUMP_STREAM_TYPE.ModuleList,
            MD.MINIDUMP_STREAM_TYPE.MemoryList,
        ] {
            bytes = original
            let entry = try XCTUnwrap(Self.entry(bytes, type))
            bytes.replaceSubrange(Int(entry.rva)..<Int(entry.rva + 4), with: [0xFF, 0xFF, 0xFF, 0x7F])
            assertMalformed(bytes, "huge count in \(MD.MINIDUMP_STREAM_TYPE.name(type))")
        }
        // ThreadNames is optional: the names are dropped with a warning, the rest still reads.
        bytes = original
        let names = try XCTUnwrap(Self.entry(bytes, MD.MINIDUMP_STREAM_TYPE.ThreadNames))
        bytes.replaceSubrange(Int(names.rva)..<Int(names.rva + 4), with: [0xFF, 0xFF, 0xFF, 0x7F])
        let dump = try Minidump(bytes: bytes)
        XCTAssertEqual(dump.threadNames, [:])
        XCTAssertEqual(dump.threads.count, 3)
        XCTAssertEqual(dump.warnings.count, 1)
        XCTAssertTrue(dump.warnings[0].contains("ThreadNames claims 2147483647 entries"), dump.warnings[0])
        // A huge string length.
        bytes = original
        let modules = try XCTUnwrap(Self.entry(bytes, MD.MINIDUMP_STREAM_TYPE.ModuleList))
        let nameRVA = Int(Self.u32(bytes, Int(modules.rva) + 4 + 20))
        bytes.replaceSubrange(nameRVA..<(nameRVA + 4), with: [0xFE, 0xFF, 0xFF, 0xFF])
        assertMalformed(bytes, "huge string length")
        // An odd string length.
        bytes = original
        bytes.replaceSubrange(nameRVA..<(nameRVA + 4), with: [3, 0, 0, 0])
        assertMalformed(bytes, "odd string length")
    }

    /// Many thread entries that all point at one large stack must not multiply the memory used.
    func testSharedBlobAmplificationIsRefused() {
        let threadCount: UInt32 = 20_000
        let stackSize: UInt32 = 1 << 20
        let listRVA: UInt32 = 32 + 12
        let stackRVA = listRVA + 4 + threadCount * 48
        var out = MinidumpBytes.header(streams: 1, directory: 32)
        out += MinidumpBytes.directoryEntry(type: MD.MINIDUMP_STREAM_TYPE.ThreadList, size: 4 + threadCount * 48, rva: listRVA)
        out.append(u32: threadCount)
        for tid in 0..<threadCount {
            out.append(u32: tid); out.append(u32: 0); out.append(u32: 0); out.append(u32: 0); out.append(u64: 0)
            out.append(u64: 0x7000_0000); out.append(u32: stackSize); out.append(u32: stackRVA)
            out.append(u32: 0); out.append(u32: 0)
        }
        out += [UInt8](repeating: 0xAB, count: Int(stackSize))
        // 20,000 × 1 MiB would be 20 GiB.
        assertMalformed(out, "amplified stacks")
    }

    func testRandomAndCorruptedBytesNeverTrap() {
        var rng = SplitMix64(seed: 0xC0FFEE)
        // Random files, some with a valid header in front.
        for round in 0..<400 {
            var bytes = (0..<Int.random(in: 0..<2048, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if round % 2 == 0, bytes.count >= 16 {
                bytes.replaceSubrange(0..<8, with: Array("MDMP".utf8) + [0x93, 0xA7, 0, 0])
                bytes[8] = UInt8.random(in: 0...20, using: &rng)
                bytes[9...11] = [0, 0, 0]
                bytes[12...15] = [32, 0, 0, 0]
            }
            _ = try? Minidump(bytes: bytes)
        }
        assertMalformed((0..<4096).map { _ in UInt8.random(in: 0...255, using: &rng) }, "random bytes")
        // A valid dump with random bytes overwritten: it may still parse, but must not trap.
        let valid = MinidumpWriter().bytes(for: Self.snapshot())
        for _ in 0..<400 {
            var bytes = valid
            for _ in 0..<Int.random(in: 1...8, using: &rng) {
                let at = Int.random(in: 0..<min(bytes.count, 4096), using: &rng)
                bytes[at] = UInt8.random(in: 0...255, using: &rng)
            }
            _ = try? Minidump(bytes: bytes)
        }
    }

    // MARK: LLVM's parser

    /// obj2yaml-14 uses the parser LLDB uses; it rejects a file for any directory error.
    func testObj2YAMLAcceptsTheDump() throws {
        guard let tool = Self.findExecutable("obj2yaml-14") else {
            return XCTFail("obj2yaml-14 not found on PATH; install it with `apt-get install lldb-14` (it pulls in llvm-14)")
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("md-\(UUID().uuidString).dmp").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let snapshot = Self.snapshot()
        try MinidumpWriter().write(snapshot, to: path)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = [path]
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()

        XCTAssertEqual(process.terminationStatus, 0, "obj2yaml-14 failed: \(errorText)")
        XCTAssertTrue(text.contains("--- !minidump"), text)
        // obj2yaml prints `Thread Id:       0x1092` and `Module Name:     '/usr/bin/crashme'`.
        func values(_ key: String) -> [String] {
            text.split(separator: "\n").compactMap { line in
                let trimmed = line.drop { $0 == " " || $0 == "-" }
                guard trimmed.hasPrefix(key + ":") else { return nil }
                return trimmed.dropFirst(key.count + 1).trimmingCharacters(in: CharacterSet(charactersIn: " '"))
            }
        }
        XCTAssertEqual(values("Thread Id"), snapshot.threads.map { "0x" + String($0.tid.rawValue, radix: 16, uppercase: true) })
        XCTAssertEqual(values("Module Name"), ["/usr/bin/crashme", "/opt/lib/libnobuildid.so", "linux-gate.so"])
        XCTAssertEqual(values("CodeView Record").first, "4C457042" + Self.exeBuildID.map { String(format: "%02X", $0) }.joined())
        XCTAssertEqual(values("Processor Arch"), ["AMD64"])
        XCTAssertEqual(values("Platform ID"), ["Linux"])
        XCTAssertEqual(
            values("CSD Version"),
            ["Linux 6.1.0-13-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.55-1 (2023-09-29) x86_64"])
        XCTAssertTrue(values("Type").contains("LinuxMaps"))
    }

    static func findExecutable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let directories = path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/lib/llvm-14/bin"]
        return directories.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
