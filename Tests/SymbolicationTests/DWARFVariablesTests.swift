// DWARFVariablesTests: the parameters and locals DWARFInfo.variables(at:) prints for the frames of
// a real crash, against gdb's `info args` / `info locals` for the same frames: C programs gcc
// compiles in the test run (at -O0 and -O2, so location lists, pieces, inlined frames and
// optimized-out values all occur), run under `gdb -batch` to their crash. The reader is fed what
// gdb shows for each frame (its registers, its CFA from `info frame`) and the process's memory
// from the core file gdb writes with `gcore`, with the binary's own segments under it. Then the
// evaluator and formatter alone on hostile input: loops, deep stacks, missing registers and
// memory.

import BoundedBytes
import Foundation
import ObjectFile
import Symbolication
import TestSupport
import XCTest

final class DWARFVariablesTests: XCTestCase {
    static let source = """
        #include <stdlib.h>
        #include <string.h>
        #include <stdbool.h>
        enum color { RED, GREEN = 5, BLUE };
        enum flags { F_A = 1, F_B = 2, F_C = 4 };
        struct inner { int x; short y; };
        struct order {
            const char *sku;
            int count;
            struct inner inner;
            double price;
            struct order *next;
            enum color color;
            unsigned bits : 3;
            int items[4];
            char name[16];
            bool ok;
            int (*fn)(int);
        };
        typedef struct order order_t;
        int twice(int v) { return v * 2; }
        volatile int sink;
        static int counter = 17;

        static inline int helper(order_t *h, int k) {
            int twiceK = k * 2;
            sink = twiceK;
            return h->next->count + twiceK;
        }

        __attribute__((noinline)) int crash(order_t *o, int n, const char *label, char c, float f, enum flags fl) {
            int local = n + 1;
            long big = -123456789012L;
            unsigned char uc = 200;
            struct inner copy = o->inner;
            int arr[12] = {1, 2};
            double d = 0.1;
            order_t whole = *o;
            const order_t *same = o;
            static int calls;
            calls++;
            { int inner_local = local * 3; sink = inner_local; }
            if (n > 2) {
                int block = n * 7;
                sink = block + copy.x + arr[1] + uc + (int)big + c + (int)f + fl + (int)d + counter + calls;
                sink = (int)(long)label + whole.count + same->count;
                return helper(o, block);
            }
            return 0;
        }
        int main(int argc, char **argv) {
            (void)argv;
            struct order *o = calloc(1, sizeof *o);
            o->sku = "SKU-42"; o->count = 3; o->inner.x = 7; o->inner.y = -2; o->price = 3.5; o->color = GREEN;
            o->bits = 5; o->items[2] = 9; strcpy(o->name, "abc"); o->ok = true; o->fn = twice;
            return crash(o, argc + 2, "label\\n", 'A', 1.25f, F_A | F_C);
        }

        """

    var directory = ""

    override func setUp() {
        directory = TestSupport.temporaryDirectory("dwarf-variables")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// One frame as gdb showed it.
    struct GDBFrameVariables {
        var registers: [Int: UInt64] = [:]
        var cfa: UInt64?
        var pc: UInt64?
        var lines: [String] = []
        var function = ""
    }

    static let registerNumbers: [String: Int] = [
        "rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7, "r8": 8, "r9": 9, "r10": 10,
        "r11": 11, "r12": 12, "r13": 13, "r14": 14, "r15": 15, "rip": 16,
    ].merging((0..<16).map { ("xmm\($0)", 17 + $0) }) { first, _ in first }

    /// Runs `program` under gdb to its crash; each frame's registers, CFA and variable lines,
    /// and the core gdb wrote.
    private func gdbFrames(_ program: String, frames: Int) throws -> ([GDBFrameVariables], String) {
        let core = directory + "/core"
        var arguments = ["gdb", "-batch", "-nx", "-ex", "set width 0", "-ex", "set pagination off", "-ex", "run"]
        for index in 0..<frames {
            arguments += [
                "-ex", "echo @@FRAME \(index)\\n", "-ex", "info frame", "-ex", "info registers",
            ]
            for xmm in 0..<16 {
                arguments += ["-ex", "printf \"xmm\(xmm) 0x%lx\\n\", $xmm\(xmm).v2_int64[0]"]
            }
            arguments += [
                "-ex", "echo @@VARS\\n",
                "-ex", "info args", "-ex", "info locals", "-ex", "echo @@END\\n", "-ex", "up",
            ]
        }
        arguments += ["-ex", "gcore " + core, program]
        let result = try TestSupport.run(arguments)
        var parsed: [GDBFrameVariables] = []
        var current: GDBFrameVariables?
        var inVariables = false
        for line in result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("@@FRAME") {
                current = GDBFrameVariables()
                inVariables = false
                continue
            }
            guard current != nil else { continue }
            if line == "@@VARS" {
                inVariables = true
                continue
            }
            if line == "@@END" {
                parsed.append(current!)
                current = nil
                continue
            }
            if inVariables {
                if line == "No arguments." || line == "No locals." { continue }
                current!.lines.append(line)
                continue
            }
            if line.hasPrefix("Stack level"), let range = line.range(of: "frame at 0x") {
                let hex = line[range.upperBound...].prefix { $0.isHexDigit }
                current!.cfa = UInt64(hex, radix: 16)
            }
            if line.hasPrefix(" rip = 0x") {
                let rest = line.dropFirst(" rip = 0x".count)
                current!.pc = UInt64(rest.prefix { $0.isHexDigit }, radix: 16)
                if let name = rest.split(separator: " ").dropFirst(2).first { current!.function = String(name) }
            }
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count >= 2, let number = Self.registerNumbers[String(fields[0])], fields[1].hasPrefix("0x"),
                let value = UInt64(fields[1].dropFirst(2), radix: 16)
            {
                current!.registers[number] = value
            }
        }
        return (parsed, core)
    }

    /// The PT_LOAD segments of an ELF core file, as captured memory.
    static func coreMemory(_ path: String) throws -> RegionMemory {
        let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(data[at + $1]) << (8 * UInt64($1)) } }
        func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(data[at + $1]) << (8 * UInt32($1)) } }
        func u16(_ at: Int) -> Int { Int(data[at]) | Int(data[at + 1]) << 8 }
        let phoff = Int(u64(0x20)), phentsize = u16(0x36), phnum = u16(0x38)
        var regions: [MemoryRegion] = []
        for index in 0..<phnum {
            let at = phoff + index * phentsize
            guard u32(at) == 1 else { continue }  // PT_LOAD
            let offset = Int(u64(at + 8)), address = u64(at + 16), size = Int(u64(at + 32))
            guard size > 0, offset + size <= data.count else { continue }
            regions.append(MemoryRegion(start: address, bytes: Array(data[offset..<(offset + size)])))
        }
        return RegionMemory(regions: regions)
    }

    /// Compares each frame gdb showed with the scopes the reader gives; returns the differences
    /// where the reader says `<optimized out>` and gdb has a value (gdb resolves entry values
    /// through the caller's call sites; the reader does not), and fails on any other.
    private func compare(
        flags: [String], output: String, file: StaticString = #filePath, line: UInt = #line
    ) throws
        -> (matched: Int, entryValues: [String])
    {
        guard TestSupport.which("gcc") != nil, TestSupport.which("gdb") != nil else { throw XCTSkip("no gcc or gdb") }
        let sourcePath = directory + "/crash.c"
        try Self.source.write(toFile: sourcePath, atomically: true, encoding: .utf8)
        let program = try TestSupport.compile(
            [sourcePath], output: directory + "/" + output, compiler: "gcc", flags: flags + ["-g"])
        let (frames, core) = try gdbFrames(program, frames: 3)
        XCTAssertFalse(frames.isEmpty, "gdb showed no frame", file: file, line: line)
        let elf = try ELFFile(path: program)
        let dwarf = try XCTUnwrap(DWARFInfo(elf: elf))
        // The load bias from main's address as the process had it.
        let nm = try TestSupport.run(["nm", program]).stdout
        let mainFile = try XCTUnwrap(
            nm.split(separator: "\n").first { $0.hasSuffix(" T main") }.flatMap { UInt64($0.prefix(16), radix: 16) })
        let gdbMain = try TestSupport.run(["gdb", "-batch", "-nx", "-ex", "p/x (long)&main", program, core]).stdout
        let mainLoaded = try XCTUnwrap(
            gdbMain.split(separator: "\n").last { $0.hasPrefix("$1 = 0x") }.flatMap { UInt64($0.dropFirst(7), radix: 16) })
        let bias = mainLoaded - mainFile
        let module = LoadedModule(path: program, base: bias + elf.imageVirtualBase, size: 0, buildID: elf.buildID, object: elf)
        let memory = LayeredMemory([try Self.coreMemory(core), ImageMemory(modules: [module], segments: .all)])

        var matched = 0
        var entryValues: [String] = []
        var scopes: [DWARFScopeVariables] = []
        var position = 0
        var started = Date()
        var elapsed: TimeInterval = 0
        for (index, frame) in frames.enumerated() {
            if position >= scopes.count {
                guard let pc = frame.registers[16] ?? frame.pc, pc >= bias else { break }
                let state = DWARFFrameState(registers: frame.registers, cfa: frame.cfa, loadBias: bias, memory: memory)
                started = Date()
                scopes = dwarf.variables(at: pc - bias, isReturnAddress: index > 0, state: state)
                elapsed += Date().timeIntervalSince(started)
                position = 0
                if scopes.isEmpty { break }  // libc: no DWARF here
            }
            let scope = scopes[position]
            position += 1
            let ours = scope.variables.map { "\($0.name) = \($0.value)" }
            XCTAssertEqual(scope.function, frame.function, "frame \(index)", file: file, line: line)
            XCTAssertEqual(ours.count, frame.lines.count, "frame \(index): \(ours) vs gdb \(frame.lines)", file: file, line: line)
            for (mine, theirs) in zip(ours, frame.lines) {
                if mine == theirs {
                    matched += 1
                } else if mine.hasSuffix(" = <optimized out>")
                    && mine.split(separator: " ").first == theirs.split(separator: " ").first
                {
                    entryValues.append("frame \(index): gdb \(theirs), ours <optimized out>")
                } else {
                    XCTFail("frame \(index) \(scope.function ?? "?"): ours `\(mine)`, gdb `\(theirs)`", file: file, line: line)
                }
            }
        }
        print(
            "DWARFVariablesTests \(flags): \(matched) values as gdb's, \(entryValues.count) entry values gdb resolved: \(entryValues); lookups took \(Int(elapsed * 1_000_000)) µs"
        )
        return (matched, entryValues)
    }

    func testMatchesGDBAtO0() throws {
        let (matched, entryValues) = try compare(flags: ["-O0"], output: "crash-O0")
        XCTAssertGreaterThanOrEqual(matched, 22)
        XCTAssertEqual(entryValues, [])
    }

    func testMatchesGDBAtO2() throws {
        let (matched, _) = try compare(flags: ["-O2"], output: "crash-O2")
        XCTAssertGreaterThanOrEqual(matched, 19)
    }
}
