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

final class DWARFVariablesTests: XCTestCase, GDBComparing {
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
            char *const cp = (char *)label;
            const char *const *volatile cq = &label;
            int (*fp)(int) = twice;
            int grid[3][2] = {{1, 2}, {3, 4}, {5, 6}};
            int (*row)[2] = grid;
            static int calls;
            calls++;
            { int inner_local = local * 3; sink = inner_local; }
            if (n > 2) {
                int block = n * 7;
                sink = block + copy.x + arr[1] + uc + (int)big + c + (int)f + fl + (int)d + counter + calls;
                sink = (int)(long)label + whole.count + same->count + cp[0] + (cq != 0) + fp(1) + row[1][1];
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

    func testMatchesGDBAtO0() throws {
        let (matched, entryValues, scopes) = try compare(flags: ["-O0"], output: "crash-O0")
        XCTAssertGreaterThanOrEqual(matched, 22)
        XCTAssertEqual(entryValues, [])
        // helper(h, k): `h` is an order_t * on the stack; the members at each offset of what it
        // points at, as the fault explanation names them (`h->inner.y`).
        let helper = try XCTUnwrap(scopes.first)
        XCTAssertEqual(helper.function, "helper")
        let h = try XCTUnwrap(helper.variables.first { $0.name == "h" })
        XCTAssertEqual(h.typeName, "order_t *")
        XCTAssertTrue(h.isParameter)
        guard case .memory(_, let size) = h.location else { return XCTFail("h at -O0 is in memory: \(h.location)") }
        XCTAssertEqual(size, 8)
        XCTAssertEqual(h.memberPath(atOffset: 0), "sku")
        XCTAssertEqual(h.memberPath(atOffset: 8), "count")
        XCTAssertEqual(h.memberPath(atOffset: 16), "inner.y")
        XCTAssertEqual(h.memberPath(atOffset: 32), "next")
        XCTAssertEqual(h.memberPath(atOffset: 44), "bits")
        XCTAssertEqual(h.memberPath(atOffset: 60), "items[3]")
        XCTAssertEqual(h.memberPath(atOffset: 67), "name[3]")
        XCTAssertNil(h.memberPath(atOffset: 4096))
        // Type names as gdb's whatis writes them.
        let crash = try XCTUnwrap(scopes.count > 1 ? scopes[1] : nil)
        XCTAssertEqual(crash.function, "crash")
        let types = Dictionary(uniqueKeysWithValues: crash.variables.map { ($0.name, $0.typeName ?? "") })
        XCTAssertEqual(types["label"], "const char *")
        XCTAssertEqual(types["cp"], "char * const")
        XCTAssertEqual(types["cq"], "const char * const * volatile")
        XCTAssertEqual(types["fp"], "int (*)(int)")
        XCTAssertEqual(types["grid"], "int [3][2]")
        XCTAssertEqual(types["row"], "int (*)[2]")
        XCTAssertEqual(types["whole"], "order_t")
        XCTAssertEqual(types["copy"], "struct inner")
        XCTAssertEqual(types["fl"], "enum flags")
    }

    func testMatchesGDBAtO2() throws {
        let (matched, _, scopes) = try compare(flags: ["-O2"], output: "crash-O2")
        XCTAssertGreaterThanOrEqual(matched, 19)
        // helper is inlined into crash: two frames at one pc, innermost first; crash's `o`
        // lives in rdi there, the register a fault through it names.
        XCTAssertEqual(scopes.map(\.function), ["helper", "crash"])
        XCTAssertEqual(scopes.map(\.inlined), [true, false])
        let o = try XCTUnwrap(scopes.last?.variables.first { $0.name == "o" })
        XCTAssertEqual(o.location, .register(5))
        XCTAssertEqual(o.registerName, "rdi")
        XCTAssertEqual(o.memberPath(atOffset: 32), "next")
    }

    // MARK: - Hostile expressions

    /// 64 bytes of captured memory at 0x1000 (byte i = i), rsp = 0x1008 known, the rest not.
    private static func state(cfa: UInt64? = 0x1020) -> DWARFFrameState {
        DWARFFrameState(
            registers: [7: 0x1008], cfa: cfa, loadBias: 0x5555_0000_0000,
            memory: RegionMemory(regions: [MemoryRegion(start: 0x1000, bytes: (0..<64).map { UInt8($0) })]))
    }

    private func evaluate(
        _ bytes: [UInt8], frameBase: DWARFLocation? = nil, limits: DWARFExpressionLimits = .init()
    )
        -> DWARFLocation
    {
        DWARFExpression.evaluate(bytes, state: Self.state(), frameBase: frameBase, limits: limits)
    }

    func testExpressionsGiveLocations() {
        XCTAssertEqual(evaluate([0x50]), .register(0))  // DW_OP_reg0
        XCTAssertEqual(evaluate([0x90, 0x11]), .register(17))  // DW_OP_regx xmm0
        XCTAssertEqual(evaluate([0x77, 0x08]), .memory(0x1010))  // DW_OP_breg7 +8
        XCTAssertEqual(evaluate([0x9c, 0x23, 0x08]), .memory(0x1028))  // call_frame_cfa; plus_uconst 8
        XCTAssertEqual(evaluate([0x91, 0x70], frameBase: .memory(0x1020)), .memory(0x1010))  // fbreg -16
        XCTAssertEqual(evaluate([0x91, 0x08], frameBase: .register(7)), .memory(0x1010))  // frame base rsp
        XCTAssertEqual(evaluate([0x35, 0x9f]), .value(5))  // lit5; stack_value
        XCTAssertEqual(evaluate([0x03, 0x10, 0, 0, 0, 0, 0, 0, 0]), .memory(0x5555_0000_0010))  // addr + bias
        XCTAssertEqual(evaluate([0x77, 0x00, 0x06, 0x9f]), .value(0x0f0e_0d0c_0b0a_0908))  // deref
        XCTAssertEqual(evaluate([0x77, 0x00, 0x94, 0x02, 0x9f]), .value(0x0908))  // deref_size 2
        XCTAssertEqual(evaluate([0x9e, 0x02, 0xab, 0xcd]), .implicit([0xab, 0xcd]))
        XCTAssertEqual(evaluate([]), .optimizedOut)
        XCTAssertEqual(evaluate([0xa3, 0x01, 0x55, 0x9f]), .optimizedOut)  // entry_value(reg5)
        XCTAssertEqual(
            evaluate([0x50, 0x93, 0x04, 0x93, 0x04]),
            .pieces([
                DWARFPiece(bitSize: 32, bitOffset: 0, location: .register(0)),
                DWARFPiece(bitSize: 32, bitOffset: 0, location: .optimizedOut),
            ]))
        // Arithmetic, comparison and a taken branch: (1 + 2) * 3 < 10, so the drop is skipped.
        XCTAssertEqual(
            evaluate([0x31, 0x32, 0x22, 0x33, 0x1e, 0x12, 0x3a, 0x2d, 0x28, 0x01, 0x00, 0x13, 0x9f]), .value(9))
        XCTAssertEqual(DWARFFrameState.registerName(5), "rdi")
        XCTAssertEqual(DWARFFrameState.registerName(16), "rip")
        XCTAssertEqual(DWARFFrameState.registerName(18), "xmm1")
        XCTAssertNil(DWARFFrameState.registerName(99))
    }

    func testHostileExpressionsEndWithAReason() {
        func assertRefused(_ location: DWARFLocation, _ text: String, line: UInt = #line) {
            guard case .refused(let reason) = location else { return XCTFail("\(location)", line: line) }
            XCTAssertTrue(reason.contains(text), reason, line: line)
        }
        func assertUnavailable(_ location: DWARFLocation, _ text: String, line: UInt = #line) {
            guard case .unavailable(let reason) = location else { return XCTFail("\(location)", line: line) }
            XCTAssertTrue(reason.contains(text), reason, line: line)
        }
        // A loop through DW_OP_skip, and one through DW_OP_bra, stop at the operation cap.
        let started = Date()
        assertRefused(evaluate([0x2f, 0xfd, 0xff]), "operations")
        assertRefused(evaluate([0x31, 0x12, 0x28, 0xfc, 0xff]), "operations")
        // A million operations with a cap above them run, quickly; with the default cap they stop.
        var large = DWARFExpressionLimits()
        large.operations = 1_000_001
        XCTAssertEqual(evaluate([UInt8](repeating: 0x96, count: 1_000_000), limits: large), .optimizedOut)
        assertRefused(evaluate([UInt8](repeating: 0x96, count: 1_000_000)), "operations")
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
        assertRefused(evaluate([UInt8](repeating: 0x31, count: 100)), "stack deeper")
        assertRefused(evaluate([UInt8](repeating: 0x12, count: 4)), "underflow")
        assertRefused(evaluate((0..<200).map { $0 % 2 == 0 ? 0x93 : 1 }), "pieces")
        assertRefused(evaluate([0x2f, 0x10, 0x00]), "branch")
        assertRefused(evaluate([0x31, 0x30, 0x1b]), "division by zero")
        assertRefused(evaluate([0x0e, 0x01]), "truncated")
        assertRefused(evaluate([0x50, 0x31]), "after a location")
        assertRefused(evaluate([0x9b]), "thread-local")
        assertRefused(evaluate([0x98, 0x00, 0x00]), "call")
        assertRefused(evaluate([0xe1]), "unknown operation")
        assertUnavailable(evaluate([0x73, 0x00]), "rbx")  // breg3: rbx not known
        assertUnavailable(evaluate([0x91, 0x00]), "frame base")
        assertUnavailable(evaluate([0x30, 0x06]), "not captured")  // deref of 0
        assertUnavailable(evaluate([0x77, 0x3c, 0x06]), "not captured")  // runs off the region's end
        assertUnavailable(DWARFExpression.evaluate([0x9c], state: Self.state(cfa: nil)), "CFA")
    }

    // MARK: - Hostile types

    /// A typedef that names itself and a pointer to itself (DW_AT_type patched to point at its
    /// own DIE in a real program's .debug_info): names and values end with `<cycle>`, promptly.
    func testCyclicTypesEnd() throws {
        guard TestSupport.which("gcc") != nil, TestSupport.which("objdump") != nil else { throw XCTSkip("no gcc or objdump") }
        let source = directory + "/cycle.c"
        try """
        typedef int loop_t;
        struct node { int value; struct node *next; };
        volatile int sink;
        __attribute__((noinline)) int crash(loop_t looped, struct node *n) {
            static int huge[1 << 28];
            sink = looped + huge[looped];
            return n->next->value;
        }
        int main(void) { struct node a = {1, 0}; return crash(5, &a); }

        """.write(toFile: source, atomically: true, encoding: .utf8)
        let program = try TestSupport.compile([source], output: directory + "/cycle", compiler: "gcc", flags: ["-O0", "-g"])
        // Each first typedef and pointer DIE, and the offset of its DW_AT_type (a ref4 in the one unit).
        let dump = try TestSupport.run(["objdump", "--dwarf=info", program]).stdout.split(separator: "\n")
        var patches: [(die: UInt64, attribute: UInt64)] = []
        for tag in ["(DW_TAG_typedef)", "(DW_TAG_pointer_type)"] {
            let start = try XCTUnwrap(dump.firstIndex { $0.hasSuffix(tag) })
            func offset(_ line: Substring, after marker: String) -> UInt64? {
                guard let range = line.range(of: marker) else { return nil }
                return UInt64(line[range.upperBound...].prefix { $0.isHexDigit }, radix: 16)
            }
            let die = try XCTUnwrap(offset(dump[start], after: "><"))
            let typeLine = try XCTUnwrap(dump[(start + 1)...].first { $0.contains("DW_AT_type") })
            patches.append((die, try XCTUnwrap(offset(typeLine, after: "<"))))
        }
        var image = ELFImage(bytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: program))))
        let info = try XCTUnwrap(image.section(".debug_info"))
        for patch in patches { image.put(patch.die, at: info.offset + Int(patch.attribute), size: 4) }
        let elf = try ELFFile(file: MappedFile(bytes: image.bytes, name: "cycle"))
        let dwarf = try XCTUnwrap(DWARFInfo(elf: elf))
        let nm = try TestSupport.run(["nm", program]).stdout
        let crash = try XCTUnwrap(
            nm.split(separator: "\n").first { $0.hasSuffix(" T crash") }.flatMap { UInt64($0.prefix(16), radix: 16) })
        let memory = RegionMemory(regions: [MemoryRegion(start: 0x7000, bytes: [UInt8](repeating: 0x11, count: 256))])
        let state = DWARFFrameState(
            registers: [6: 0x7080, 7: 0x7040, 16: crash + 8], cfa: 0x7090, loadBias: 0, memory: memory)
        let started = Date()
        let scopes = dwarf.variables(at: crash + 8, isReturnAddress: false, state: state)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)
        let variables = try XCTUnwrap(scopes.first?.variables)
        XCTAssertEqual(variables.map(\.name), ["looped", "n", "huge"])
        XCTAssertEqual(variables.first?.value, "<cycle>")
        XCTAssertEqual(variables.first?.typeName, "loop_t")  // whatis names the typedef itself
        XCTAssertTrue(variables[1].typeName?.contains("<cycle>") == true, "\(variables[1].typeName ?? "nil")")
        XCTAssertEqual(variables[1].value, "0x1111111111111111")
        XCTAssertNil(variables[1].memberPath(atOffset: 0))
        // 2^28 elements the capture does not hold: equal to each other, but the scan for
        // repeats stops at its cap and the value at its length.
        XCTAssertTrue(variables[2].value.hasPrefix("{<unavailable> <repeats "), variables[2].value)
        XCTAssertTrue(variables[2].value.hasSuffix("..."))
        XCTAssertLessThanOrEqual(variables[2].value.utf8.count, DWARFVariableLimits().bytesPerVariable + 3)
    }

    /// Entry values (DW_OP_entry_value) resolved through the caller's call site, as gdb does:
    /// explain.c's faults at -O2, where the faulting function's and its callers' parameters are
    /// dead at the call and only the caller's DW_AT_call_value says what they were.
    func testEntryValuesMatchGDB() throws {
        let source = try String(contentsOfFile: TestSupport.fixture("explain/explain.c"), encoding: .utf8)
        // (null-call and wild-jump fault outside any function, where this harness stops;
        // use-after-free's `fill` is `slot * 0.25` of an entry value: floating-point arithmetic,
        // refused.)
        for mode in ["null-field", "literal-write"] {
            let (matched, entryValues, _) = try compare(
                source: source, sourceName: "explain.c", flags: ["-O2", "-fstack-protector-strong"],
                output: "explain-O2", arguments: [mode])
            XCTAssertGreaterThanOrEqual(matched, 8, mode)
            XCTAssertEqual(entryValues, [], mode)
        }
        // Without the callers, they are optimized out as before.
        let (_, unresolved, _) = try compare(
            source: source, sourceName: "explain.c", flags: ["-O2", "-fstack-protector-strong"], output: "explain-O2",
            arguments: ["null-field"], callers: false)
        XCTAssertGreaterThanOrEqual(unresolved.count, 5)
        // Callers whose return addresses have no call site: the same.
        let (_, noSite, _) = try compare(
            source: source, sourceName: "explain.c", flags: ["-O2", "-fstack-protector-strong"], output: "explain-O2",
            arguments: ["null-field"], callerPCDelta: 1)
        XCTAssertEqual(noSite, unresolved)
    }

    /// DWARF 4: location lists in .debug_loc, GNU entry values.
    func testMatchesGDBWithDWARF4() throws {
        let (matched, _, scopes) = try compare(flags: ["-O2", "-gdwarf-4"], output: "crash-O2-dwarf4")
        XCTAssertGreaterThanOrEqual(matched, 19)
        XCTAssertEqual(scopes.map(\.function), ["helper", "crash"])
    }

    /// clang: DWARF 5 location lists through .debug_addr (DW_LLE_base_addressx,
    /// DW_LLE_offset_pair, DW_LLE_startx_length) and DW_FORM_loclistx.
    func testMatchesGDBWithClang() throws {
        let (matched, _, _) = try compare(compiler: "clang", flags: ["-O2"], output: "crash-O2-clang")
        XCTAssertGreaterThanOrEqual(matched, 10)
    }

    static let cplusplusSource = """
        #include <cstdlib>
        namespace shop {
        enum class Kind { Book, Toy = 7 };
        enum Color { Red, Green };
        struct Base { int id = 11; };
        struct Item : Base {
            const char *title;
            Kind kind;
            Color color;
            bool fragile;
            Item *next;
            int lookup(int &slot, const Item &other) const;
        };
        volatile int sink;
        __attribute__((noinline)) int Item::lookup(int &slot, const Item &other) const {
            int local = slot + other.id;
            sink = local;
            return next->id + local;
        }
        }
        int main(int argc, char **) {
            shop::Item a; a.title = "tin drum"; a.kind = shop::Kind::Toy; a.color = shop::Green; a.fragile = true;
            a.next = nullptr;
            int slot = argc + 4;
            return a.lookup(slot, a);
        }

        """

    /// C++: `this`, references (`@0x…: 5`), base classes and enumerators by their qualified
    /// names (`<shop::Base> = {…}`, `shop::Kind::Toy`), bool.
    func testMatchesGDBForCPlusPlus() throws {
        let (matched, entryValues, scopes) = try compare(
            source: Self.cplusplusSource, sourceName: "crash.cc", compiler: "g++", flags: ["-O0"], output: "crash-cc")
        XCTAssertGreaterThanOrEqual(matched, 8)
        XCTAssertEqual(entryValues, [])
        let this = try XCTUnwrap(scopes.first?.variables.first)
        XCTAssertEqual(this.name, "this")
        XCTAssertEqual(this.typeName, "const shop::Item * const")
        XCTAssertEqual(this.memberPath(atOffset: 0), "id")
        XCTAssertEqual(this.memberPath(atOffset: 8), "title")
    }

    /// What a lookup costs in a large real file, libc's separate debug file (libc6-dbg): the
    /// first in a unit (its inline tree is built) and the next ones. Printed, not asserted.
    func testCostInLibc() throws {
        let libc = "/lib/x86_64-linux-gnu/libc.so.6"
        guard FileManager.default.fileExists(atPath: libc), TestSupport.which("nm") != nil else { throw XCTSkip("no libc") }
        let elf = try ELFFile(path: libc)
        guard let debug = DebugFileLocator().debugFile(for: elf) else { throw XCTSkip("no libc6-dbg") }
        let opened = Date()
        let dwarf = try XCTUnwrap(DWARFInfo(elf: debug, symbolFile: elf))
        let openTime = Date().timeIntervalSince(opened)
        let nm = try TestSupport.run(["nm", "-D", libc]).stdout.split(separator: "\n")
        let memory = RegionMemory(regions: [MemoryRegion(start: 0x7000, bytes: [UInt8](repeating: 0, count: 4096))])
        let state = DWARFFrameState(
            registers: Dictionary(uniqueKeysWithValues: (0...16).map { ($0, UInt64(0x7100 + $0 * 8)) }), cfa: 0x7800,
            memory: memory)
        for name in ["qsort", "getaddrinfo", "fopen"] {
            guard let line = nm.first(where: { $0.hasSuffix(" T " + name) || $0.contains(" T " + name + "@") }),
                let address = UInt64(line.prefix(16), radix: 16)
            else { continue }
            let cold = Date()
            let scopes = dwarf.variables(at: address + 16, isReturnAddress: false, state: state)
            let coldTime = Date().timeIntervalSince(cold)
            let warm = Date()
            for _ in 0..<20 { _ = dwarf.variables(at: address + 16, isReturnAddress: false, state: state) }
            let warmTime = Date().timeIntervalSince(warm) / 20
            let count = scopes.map(\.variables.count).reduce(0, +)
            print(
                "DWARFVariablesTests libc \(name): \(scopes.count) frames, \(count) variables; first lookup "
                    + "\(Int(coldTime * 1e6)) µs, then \(Int(warmTime * 1e6)) µs (opening the DWARF: \(Int(openTime * 1e6)) µs)")
        }
    }
}

/// A test that compares the reader's variables with gdb's for a program it builds in `directory`
/// (DWARFVariablesTests, DWARFRustValuesTests).
protocol GDBComparing: XCTestCase {
    var directory: String { get }
}

extension GDBComparing {
    /// Runs `program` under gdb to its crash; each frame's registers, CFA and variable lines,
    /// and the core gdb wrote.
    func gdbFrames(
        _ program: String, arguments programArguments: [String] = [], frames: Int
    ) throws -> (
        [DWARFVariablesTests.GDBFrameVariables], String
    ) {
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
        arguments += ["-ex", "gcore " + core] + (programArguments.isEmpty ? [program] : ["--args", program] + programArguments)
        let result = try TestSupport.run(arguments)
        var parsed: [DWARFVariablesTests.GDBFrameVariables] = []
        var current: DWARFVariablesTests.GDBFrameVariables?
        var inVariables = false
        for line in result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("@@FRAME") {
                current = DWARFVariablesTests.GDBFrameVariables()
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
            if fields.count >= 2, let number = DWARFVariablesTests.registerNumbers[String(fields[0])], fields[1].hasPrefix("0x"),
                let value = UInt64(fields[1].dropFirst(2), radix: 16)
            {
                current!.registers[number] = value
            }
        }
        return (parsed, core)
    }

    /// Compares each of the top `frames` frames gdb showed with the scopes the reader gives,
    /// each frame given its callers as a report's unwind knows them (sp, pc, the callee-saved
    /// registers, the CFA: `callers` false gives none); returns the differences where the
    /// reader says `<optimized out>` and gdb has a value (an entry value the reader could not
    /// resolve through the caller's call site), and fails on any other. The compiler is a name
    /// in PATH or a path; the program runs with `arguments`.
    func compare(
        source: String = DWARFVariablesTests.source, sourceName: String = "crash.c", compiler: String = "gcc",
        flags: [String], output: String, arguments: [String] = [], frames frameCount: Int = 3, callers: Bool = true,
        callerPCDelta: UInt64 = 0, file: StaticString = #filePath, line: UInt = #line
    ) throws
        -> (matched: Int, entryValues: [String], first: [DWARFScopeVariables])
    {
        guard TestSupport.which(compiler) != nil || FileManager.default.isExecutableFile(atPath: compiler),
            TestSupport.which("gdb") != nil
        else {
            throw XCTSkip("no \(compiler) or gdb")
        }
        let sourcePath = directory + "/" + sourceName
        try source.write(toFile: sourcePath, atomically: true, encoding: .utf8)
        let program = try TestSupport.compile(
            [sourcePath], output: directory + "/" + output, compiler: compiler, flags: flags + ["-g"])
        // One frame more than compared: the outermost compared frame's caller.
        let (frames, core) = try gdbFrames(program, arguments: arguments, frames: frameCount + 1)
        XCTAssertFalse(frames.isEmpty, "gdb showed no frame", file: file, line: line)
        let elf = try ELFFile(path: program)
        let dwarf = try XCTUnwrap(DWARFInfo(elf: elf))
        // The load bias from main's address as the process had it.
        let nm = try TestSupport.run(["nm", program]).stdout
        let mainFile = try XCTUnwrap(
            nm.split(separator: "\n").first { $0.hasSuffix(" T main") }.flatMap { UInt64($0.prefix(16), radix: 16) })
        let gdbMain = try TestSupport.run([
            "gdb", "-batch", "-nx", "-ex", "set language c", "-ex", "p/x (long)&main", program, core,
        ]).stdout
        let mainLoaded = try XCTUnwrap(
            gdbMain.split(separator: "\n").last { $0.hasPrefix("$1 = 0x") }.flatMap { UInt64($0.dropFirst(7), radix: 16) })
        let bias = mainLoaded - mainFile
        let module = LoadedModule(
            path: program, base: bias + elf.imageVirtualBase, size: 1 << 24, buildID: elf.buildID, object: elf)
        let memory = LayeredMemory([try DWARFVariablesTests.coreMemory(core), ImageMemory(modules: [module], segments: .all)])

        /// The caller of the function of frame `index`, past the frames inlined in it (gdb gives
        /// those its CFA): what the unwinder knows of it (rbx, rbp, rsp, r12–r15, rip; the CFA),
        /// with its own callers.
        func caller(of index: Int) -> DWARFCallerFrame? {
            guard callers, let next = frames.indices.first(where: { $0 > index && frames[$0].cfa != frames[index].cfa }),
                let pc = frames[next].registers[16] ?? frames[next].pc
            else { return nil }
            let known = frames[next].registers.filter { [3, 6, 7, 12, 13, 14, 15, 16].contains($0.key) }
            return DWARFCallerFrame(
                pc: pc &+ callerPCDelta,
                state: DWARFFrameState(registers: known, cfa: frames[next].cfa, memory: memory, caller: caller(of: next)))
        }

        var matched = 0
        var entryValues: [String] = []
        var first: [DWARFScopeVariables] = []  // every frame's, in gdb's order
        var scopes: [DWARFScopeVariables] = []
        var position = 0
        var started = Date()
        var elapsed: TimeInterval = 0
        for (index, frame) in frames.prefix(frameCount).enumerated() {
            if position >= scopes.count {
                guard let pc = frame.registers[16] ?? frame.pc, pc >= bias else { break }
                let state = DWARFFrameState(
                    registers: frame.registers, cfa: frame.cfa, loadBias: bias, memory: memory, caller: caller(of: index))
                started = Date()
                scopes = dwarf.variables(at: pc - bias, isReturnAddress: index > 0, state: state)
                elapsed += Date().timeIntervalSince(started)
                position = 0
                if scopes.isEmpty { break }  // libc: no DWARF here
                if index == 0 {
                    // The same through the Symbolizer, by process address (names demangled).
                    let viaSymbolizer = Symbolizer(modules: [module]).variables(pc: pc, isReturnAddress: false, state: state)
                    XCTAssertEqual(viaSymbolizer.map(\.variables), scopes.map(\.variables), file: file, line: line)
                    // Warm lookups (the unit's tree and types already read): what a report pays
                    // per frame once its module's DWARF is in use.
                    let warm = Date()
                    for _ in 0..<100 { _ = dwarf.variables(at: pc - bias, isReturnAddress: false, state: state) }
                    let each = Int(Date().timeIntervalSince(warm) * 10_000)
                    print("DWARFVariablesTests \(flags): a warm lookup of \(scopes.count) frames' variables takes \(each) µs")
                }
            }
            let scope = scopes[position]
            position += 1
            first.append(scope)
            let ours = scope.variables.map { "\($0.name) = \($0.value)" }
            // gdb names a C++ frame without its parameters; DWARFInfo by the linkage name.
            let function = scope.function.map { Demangler.demangle($0) ?? $0 }?.prefix { $0 != "(" }
            XCTAssertEqual(function.map(String.init), frame.function, "frame \(index)", file: file, line: line)
            XCTAssertEqual(ours.count, frame.lines.count, "frame \(index): \(ours) vs gdb \(frame.lines)", file: file, line: line)
            for (mine, theirs) in zip(ours, frame.lines) {
                if mine == theirs {
                    matched += 1
                } else if theirs.contains("<synthetic pointer>"), mine.contains("<optimized out>"),
                    !mine.contains("<synthetic pointer>")
                {
                    // gdb shows the bytes of a composite past its last piece as `<synthetic
                    // pointer>` (clang's `reg11; piece 4` for an 8-byte struct); they are missing.
                    entryValues.append("frame \(index): gdb \(theirs), ours \(mine)")
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
        return (matched, entryValues, first)
    }
}
