// End-to-end: a report explains its fault as gdb does on the same crash (issue 49). Each mode of
// Tests/Fixtures/explain (explain.c, explain.cpp, explain.rs, each built -O0 and -O2) is run
// plainly, under `crashport run` and under gdb, and the report's `fault` and its top frames'
// `vars` are compared with gdb's `x/i $pc`, `info registers`, `info args` and `info locals`:
//
// - the exit status is the one without crashport;
// - the instruction is gdb's at the pc (or, where the pc is not code, after a call through a
//   NULL or wild pointer, the call before frame 1's return address, with a role saying so);
// - the access (kind, size, the address expression and each of its registers) is the one that
//   instruction makes with gdb's registers;
// - the diagnosis is the mode's rule, and the bad value's variable is the one gdb shows holding
//   that register's value, in the function gdb names;
// - every parameter and local gdb prints in the top frames (matched by name, inlined ones
//   included, as gdb shows them) has the value gdb prints, `<optimized out>` where gdb says so.
//
// Addresses: gdb runs the program with ASLR off, so crashport runs it under `setarch -R` too.
// Even so the runs do not share every address: crashport preloads its stub (libraries and
// mmap'd blocks move) and the environments differ (the stack moves). So a value gdb shows
// inside one of its mappings is compared exactly only in the executable, where both runs load
// it at the same base (checked); anywhere else (stack, heap, libraries) only as NULL or not.
// A value in no mapping (0x8, 0x414141414140, an int) is layout-free and compared exactly.
//
// Skipped, saying so, where gdb is missing; the Rust builds are left out, saying so, where
// rustc is.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class FaultExplanationTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("explain")

    /// One build of a fixture.
    struct Program {
        var language: String
        var level: String
        var path: String

        var label: String { "\(language) \(level)" }
        var source: String { language == "C" ? "explain.c" : language == "C++" ? "explain.cpp" : "explain.rs" }
    }

    /// What a mode must give.
    struct Mode {
        var name: String
        /// The signal gdb stops at (the first one; Rust's stack overflow then aborts).
        var signal: String
        var rule: String
        /// The variables that may hold the bad value, in the faulting frame or, for a call
        /// through a bad pointer, the caller's; none where the fault is libc's own.
        var holders: [String] = []
        /// The access in the program's words, by language (null-field's `o->sku`).
        var expressions: [String: [String]] = [:]
        /// Whether the access's registers and address are gdb's: not where they are stack
        /// addresses past the stack's end (a stack overflow: the runs' environments start the
        /// stack apart, and the address is then in no mapping, compared exactly), nor a value
        /// made of heap addresses (glibc's free-list link: the preloaded stub moves the heap).
        var comparesAddresses = true
    }

    static let lock = NSLock()
    nonisolated(unsafe) static var built: (programs: [Program], left: [String])?

    /// Every fixture built once per test process: C and C++ with -g -fstack-protector-strong
    /// at -O0 and -O2 (explain.c says why nothing is inlined), Rust with -g at opt-level 0
    /// and 2 (explain.rs says why debug assertions are off and how its stack is protected).
    static func programs() throws -> (programs: [Program], left: [String]) {
        lock.lock()
        defer { lock.unlock() }
        if let built { return built }
        var programs: [Program] = []
        var left: [String] = []
        for level in ["O0", "O2"] {
            let flags = ["-g", "-" + level, "-fstack-protector-strong"]
            programs.append(
                Program(
                    language: "C", level: level,
                    path: try TestSupport.compile(
                        [TestSupport.fixture("explain/explain.c")], output: directory + "/explain-c-\(level)", flags: flags)))
            programs.append(
                Program(
                    language: "C++", level: level,
                    path: try TestSupport.compile(
                        [TestSupport.fixture("explain/explain.cpp")], output: directory + "/explain-cpp-\(level)",
                        compiler: "g++", flags: flags)))
        }
        let home = ProcessInfo.processInfo.environment["HOME"] ?? "/root"
        if let rustc = TestSupport.which("rustc", also: [home + "/.cargo/bin", "/root/.cargo/bin"]) {
            for level in ["0", "2"] {
                let output = directory + "/explain-rs-O\(level)"
                // -Z stack-protector is not stable: RUSTC_BOOTSTRAP lets this rustc take it.
                let result = try TestSupport.run(
                    [
                        rustc, "--edition", "2021", "-g", "-C", "opt-level=\(level)", "-C", "debug-assertions=off",
                        "-Z", "stack-protector=strong", "-o", output, TestSupport.fixture("explain/explain.rs"),
                    ], environment: ["RUSTC_BOOTSTRAP": "1"], timeout: 300)
                guard result.status == .exited(0) else { throw TestFailure("rustc explain.rs failed:\n\(result.stderr)") }
                programs.append(Program(language: "Rust", level: "O\(level)", path: output))
            }
        } else {
            left.append("rustc not found (looked in PATH and ~/.cargo/bin): the Rust builds are left out")
        }
        built = (programs, left)
        return (programs, left)
    }

    // MARK: - One test per mode

    func testNullField() throws {
        // 0x8 = NULL + 8: near-null, the rule for a field of a NULL pointer (null-dereference is
        // an access at 0 itself).
        try check(
            Mode(
                name: "null-field", signal: "SIGSEGV", rule: "near-null", holders: ["o"],
                expressions: ["C": ["o->sku"], "C++": ["o->sku"], "Rust": ["(*o).sku", "o->sku"]]))
    }

    func testNullCall() throws {
        try check(Mode(name: "null-call", signal: "SIGSEGV", rule: "jump-to-null", holders: ["callback"]))
    }

    func testLiteralWrite() throws {
        try check(Mode(name: "literal-write", signal: "SIGSEGV", rule: "write-to-read-only", holders: ["label"]))
    }

    func testStackOverflow() throws {
        try check(Mode(name: "stack-overflow", signal: "SIGSEGV", rule: "stack-overflow", comparesAddresses: false))
    }

    func testDoubleFree() throws {
        try check(Mode(name: "double-free", signal: "SIGABRT", rule: "double-free"))
    }

    func testStackSmash() throws {
        try check(Mode(name: "stack-smash", signal: "SIGABRT", rule: "stack-protector"))
    }

    /// A call to 0x414141414140: canonical, mapped nowhere (a non-canonical target would fault
    /// on the call itself, with the pc still at it).
    func testWildJump() throws {
        try check(Mode(name: "wild-jump", signal: "SIGSEGV", rule: "wild-address", holders: ["target", "address"]))
    }

    func testUseAfterFree() throws {
        // The bad pointer is glibc's free-list link, read out of the freed node `stock`.
        try check(
            Mode(
                name: "use-after-free", signal: "SIGSEGV", rule: "use-after-free",
                expressions: ["C": ["stock->next"], "C++": ["stock->next"], "Rust": ["stock->next", "(*stock).next"]],
                comparesAddresses: false))
    }

    /// `crashport symbolicate` on the report's minidump, with the binaries, explains the crash
    /// as the live report did: the same instruction, access, diagnosis, bad value's variable and
    /// frame variables (and the variables are the report's own: CRASHPORT_VARIABLES=off leaves
    /// them out).
    func testOfflineSymbolicationExplainsTheSame() throws {
        let (programs, _) = try Self.programs()
        for program in programs where program.language == "C" {
            let watched = try TestSupport.crashportRun([program.path, "null-field"])
            defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
            XCTAssertEqual(watched.reportIDs.count, 1, program.label)
            guard watched.reportIDs.count == 1 else { continue }
            let live = try watched.event()
            let result = try TestSupport.run(
                [TestSupport.crashport, "symbolicate", "--format", "json", watched.minidumpPath()])
            XCTAssertEqual(result.status, .exited(0), "\(program.label): \(result.stderr)")
            let offline = try Event.decode(Data(result.stdout.utf8))
            XCTAssertNotNil(live.fault?.diagnosis, program.label)
            XCTAssertEqual(offline.fault, live.fault, program.label)
            XCTAssertEqual(
                offline.crashedThreadRecord?.frames?.prefix(5).map(\.vars),
                live.crashedThreadRecord?.frames?.prefix(5).map(\.vars),
                program.label)
            XCTAssertEqual(live.crashedThreadRecord?.frames?.first?.vars?.first?.name, "o", program.label)

            let private_ = try TestSupport.crashportRun(
                [program.path, "null-field"], environment: ["CRASHPORT_VARIABLES": "off"])
            defer { try? FileManager.default.removeItem(atPath: private_.reportsDirectory) }
            let withoutVariables = try private_.event()
            XCTAssertTrue(withoutVariables.crashedThreadRecord?.frames?.allSatisfy { $0.vars == nil } == true, program.label)
            XCTAssertEqual(withoutVariables.fault?.diagnosis?.rule, "near-null", program.label)
        }
    }

    /// Every build of the fixture in `mode`, each mismatch reported as "MODE LANGUAGE LEVEL: …".
    func check(_ mode: Mode) throws {
        guard TestSupport.which("gdb") != nil else {
            print("FaultExplanationTests: gdb is not installed: no reference to compare the reports with")
            throw XCTSkip("gdb is not installed: no reference to compare the reports with")
        }
        let (programs, left) = try Self.programs()
        for reason in left { print("FaultExplanationTests: \(reason)") }
        for program in programs {
            for problem in try compare(mode, program) { XCTFail("\(mode.name) \(program.label): \(problem)") }
        }
    }

    // MARK: - One build, three runs

    func compare(_ mode: Mode, _ program: Program) throws -> [String] {
        let command = [program.path, mode.name]
        let plain = try TestSupport.run(command)
        let machine = try TestSupport.run(["uname", "-m"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let watched = try TestSupport.crashportRun(["setarch", machine, "-R"] + command)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let gdb = try TestSupport.gdbFaultState(command)

        var problems: [String] = []
        // Rust's own handler turns its stack overflow into an abort.
        let dies = mode.signal == "SIGABRT" || (program.language == "Rust" && mode.name == "stack-overflow") ? SIGABRT : SIGSEGV
        if plain.status != .signaled(dies) {
            problems.append("the fixture itself ended with \(plain.status), not signal \(dies): \(plain.stderr.suffix(300))")
        }
        if watched.result.status != plain.status {
            problems.append("under crashport the program ended with \(watched.result.status), without it \(plain.status)")
        }
        guard gdb.signal == mode.signal else {
            return problems + ["gdb stopped at \(gdb.signal ?? "no signal"), not \(mode.signal): \(gdb.output.suffix(500))"]
        }
        guard watched.reportIDs.count == 1 else {
            return problems + ["\(watched.reportIDs.count) reports: \(watched.result.stderr.suffix(500))"]
        }
        let event = try watched.event()
        let layout = Layout(gdb, event, program: program.path)
        var explanation = Explanation(mode: mode, program: program, gdb: gdb, event: event, layout: layout)
        problems += try explanation.checkFault()
        problems += explanation.checkFrames()
        return problems
    }

    // MARK: - Addresses

    /// Which values the two runs share: see the top of the file.
    struct Layout {
        var mappings: [GDBMapping]
        var executable: String
        /// Where the executable starts in gdb's run and in crashport's (nil where not found).
        var gdbBase: UInt64?
        var crashportBase: UInt64?

        init(_ gdb: GDBFaultState, _ event: Event, program: String) {
            mappings = gdb.mappings
            executable = URL(fileURLWithPath: program).resolvingSymlinksInPath().path
            let executable = executable
            gdbBase = gdb.mappings.filter { $0.path == executable }.map(\.start).min()
            crashportBase =
                event.modules?.first {
                    $0.path.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path } == executable
                }?.base?.value
        }

        var sameExecutable: Bool { gdbBase != nil && gdbBase == crashportBase }

        /// Whether crashport's `ours` may stand for gdb's `theirs`.
        func agree(_ theirs: UInt64, _ ours: UInt64) -> Bool {
            if theirs == ours { return true }
            guard let mapping = mappings.first(where: { $0.contains(theirs) }) else { return false }
            if mapping.path == executable && sameExecutable { return false }
            return theirs != 0 && ours != 0
        }

        /// Whether two values as gdb prints them agree: the same text around their hex numbers,
        /// and each number agreeing as an address.
        func agree(_ theirs: String, _ ours: String) -> Bool {
            let a = Self.split(theirs)
            let b = Self.split(ours)
            guard a.text == b.text, a.numbers.count == b.numbers.count else { return false }
            return zip(a.numbers, b.numbers).allSatisfy { agree($0, $1) }
        }

        static let hex = try! NSRegularExpression(pattern: "0x[0-9a-fA-F]+")

        static func split(_ value: String) -> (text: [String], numbers: [UInt64]) {
            var text: [String] = []
            var numbers: [UInt64] = []
            var rest = value.startIndex
            for match in hex.matches(in: value, range: NSRange(value.startIndex..., in: value)) {
                guard let range = Range(match.range, in: value) else { continue }
                text.append(String(value[rest..<range.lowerBound]))
                numbers.append(UInt64(value[range].dropFirst(2), radix: 16) ?? 0)
                rest = range.upperBound
            }
            text.append(String(value[rest...]))
            return (text, numbers)
        }
    }

    // MARK: - Comparing one report with gdb

    struct Explanation {
        var mode: Mode
        var program: Program
        var gdb: GDBFaultState
        var event: Event
        var layout: Layout
        /// The report's pc is not gdb's (a stack overflow stops wherever the guard page is
        /// first touched, and the runs' stacks start apart): its instruction is then checked
        /// against gdb's disassembly at its own address, and frame 0's variables not at all.
        var elsewhere = false

        func hex(_ value: UInt64?) -> String { value.map { "0x" + String($0, radix: 16) } ?? "none" }

        mutating func checkFault() throws -> [String] {
            guard let fault = event.fault else {
                return ["event.json has no fault (title \(event.title ?? "none"))"]
            }
            var problems: [String] = []
            let instruction = fault.instruction
            let ours = instruction?.text.map(TestSupport.normalizeInstruction)
            // The reference instruction: gdb's at the pc, else the call that went there.
            let reference: (address: UInt64, text: String, call: Bool)
            if let text = gdb.instruction, let pc = gdb.pc {
                reference = (pc, text, false)
                if instruction?.role != nil { problems.append("the instruction at the pc has role \(instruction?.role ?? "")") }
            } else if let call = gdb.callerCall {
                reference = (call.address, call.text, true)
                if instruction?.role == nil { problems.append("the call before the return address has no role") }
            } else {
                return ["gdb has neither the instruction at the pc nor the call before frame 1's pc:\n\(gdb.output.suffix(800))"]
            }
            // The instruction the access is read from: gdb's, at the report's pc where that is
            // not gdb's (a stack overflow).
            var accessText = reference.text
            if instruction?.text == nil {
                problems.append("no instruction, gdb's x/i `\(reference.text)` at \(hex(reference.address))")
            } else if let address = instruction?.address?.value, address != reference.address,
                mode.name == "stack-overflow", layout.sameExecutable, let base = layout.crashportBase
            {
                elsewhere = true
                let theirs = try TestSupport.gdbInstruction(at: address - base, in: program.path)
                // gdb disassembles the file there: a direct call's target is a file offset, so
                // such a call is compared by its mnemonic.
                func direct(_ text: String?) -> String? {
                    let parts = (text ?? "").split(whereSeparator: \.isWhitespace)
                    return parts.count >= 2 && parts[1].hasPrefix("0x") ? String(parts[0]) : nil
                }
                let differs =
                    direct(instruction?.text).map { $0 != direct(theirs) }
                    ?? (ours != theirs.map(TestSupport.normalizeInstruction))
                if differs {
                    problems.append(
                        "instruction at \(hex(address)) (not gdb's pc \(hex(reference.address))) `\(instruction?.text ?? "none")`, gdb's x/i there `\(theirs ?? "none")`"
                    )
                }
                accessText = theirs ?? accessText
            } else {
                if ours != TestSupport.normalizeInstruction(reference.text) {
                    problems.append("instruction `\(instruction?.text ?? "none")`, gdb `\(reference.text)`")
                }
                if !layout.agree(reference.address, instruction?.address?.value ?? 0) {
                    problems.append("instruction address \(hex(instruction?.address?.value)), gdb \(hex(reference.address))")
                }
            }
            if mode.signal == "SIGSEGV" { problems += checkAccess(fault.access, accessText, call: reference.call) }
            if fault.diagnosis?.rule != mode.rule {
                problems.append(
                    "diagnosis \(fault.diagnosis?.rule ?? "none") (\(fault.diagnosis?.summary ?? "")), expected \(mode.rule)")
            }
            problems += checkVariable(fault, reference.text, call: reference.call)
            return problems
        }

        /// The access `text` (gdb's) makes: kind, size, expression, registers, address.
        func checkAccess(_ access: AccessRecord?, _ text: String, call: Bool) -> [String] {
            guard let expected = ExpectedAccess(text, call: call) else { return [] }
            guard let access else { return ["no access, gdb's instruction `\(text)` makes a \(expected.kind.rawValue)"] }
            var problems: [String] = []
            // For a call through a bad pointer the fault is the fetch at the target (`execute`),
            // the instruction shown the call (`call`): either names it.
            if access.kind != expected.kind && !(call && access.kind == .execute) {
                problems.append("access kind \(access.kind?.rawValue ?? "none"), `\(text)` makes a \(expected.kind.rawValue)")
            }
            if let size = expected.size, access.size != size {
                problems.append("access size \(access.size.map(String.init) ?? "none"), `\(text)` \(size)")
            }
            guard let operand = expected.operand else { return problems }
            let ours = access.expression.map { ExpectedAccess.operand(TestSupport.normalizeInstruction($0)) }
            if ours != operand {
                problems.append("access expression `\(access.expression ?? "none")`, gdb's instruction `\(text)`")
            }
            guard !elsewhere, mode.comparesAddresses else { return problems }
            for name in registers(in: operand) {
                // The call's own rsp is the one before it pushed its return address.
                let theirs = (gdb.register(name) ?? 0) &+ (call && name == "rsp" ? 8 : 0)
                guard let value = access.registers?[name]?.value else {
                    problems.append("access registers have no \(name) (gdb \(hex(theirs)))")
                    continue
                }
                if !layout.agree(theirs, value) {
                    problems.append("access register \(name) = \(hex(value)), gdb \(hex(theirs))")
                }
            }
            let target = call ? gdb.pc : address(of: operand)
            if let target, access.address.map({ layout.agree(target, $0.value) }) != true {
                problems.append("access address \(hex(access.address?.value)), gdb's registers give \(hex(target))")
            }
            return problems
        }

        /// The names in a normalized operand that are registers gdb has.
        func registers(in operand: String) -> [String] {
            var names: [String] = []
            var current = ""
            for character in operand + " " {
                if character.isLetter || (character.isNumber && !current.isEmpty) {
                    current.append(character)
                } else {
                    if !current.isEmpty, gdb.register(current) != nil, !names.contains(current) { names.append(current) }
                    current = ""
                }
            }
            return names
        }

        /// `[base+index*scale+displacement]` with gdb's registers; nil for rip, a segment or a
        /// register gdb does not have.
        func address(of operand: String) -> UInt64? {
            guard operand.hasPrefix("["), operand.hasSuffix("]"), !operand.contains("rip"), !operand.contains(":") else {
                return nil
            }
            var sum: UInt64 = 0
            var sign: UInt64 = 1
            var term = ""
            func add() -> Bool {
                guard !term.isEmpty else { return true }
                let parts = term.split(separator: "*")
                var value: UInt64
                if let number = UInt64(parts[0]) {
                    value = number
                } else if let register = gdb.register(String(parts[0])) {
                    value = register
                } else {
                    return false
                }
                if parts.count == 2, let scale = UInt64(parts[1]) { value = value &* scale }
                sum = sum &+ (sign == 1 ? value : 0 &- value)
                term = ""
                return true
            }
            for character in operand.dropFirst().dropLast() {
                if character == "+" || character == "-" {
                    guard add() else { return nil }
                    sign = character == "+" ? 1 : 0
                } else {
                    term.append(character)
                }
            }
            return add() ? sum : nil
        }

        /// The variable gdb shows holding the bad register's value must be the one named.
        func checkVariable(_ fault: FaultRecord, _ text: String, call: Bool) -> [String] {
            // A bad value no variable holds (a field loaded through one) is named by its expression.
            if mode.holders.isEmpty, !elsewhere, let allowed = mode.expressions[program.language],
                !allowed.contains(fault.variable?.expression ?? "")
            {
                return ["the bad value's expression is \(fault.variable?.expression ?? "none"), expected \(allowed[0])"]
            }
            guard !mode.holders.isEmpty, !elsewhere, let operand = ExpectedAccess(text, call: call)?.operand else { return [] }
            var problems: [String] = []
            let values = Set(registers(in: operand).compactMap { gdb.register($0) })
            guard let frame = gdb.frames.first(where: { $0.index == (call ? 1 : 0) }) else { return [] }
            let shown = (frame.arguments ?? []) + (frame.locals ?? [])
            let holders = shown.filter { variable in
                mode.holders.contains(variable.name) && Self.integer(variable.value).map(values.contains) == true
            }
            let named = fault.variable
            if !holders.isEmpty {
                if !holders.contains(where: { $0.name == named?.variable }) {
                    problems.append(
                        "the bad value's variable is \(named?.variable ?? "none"), gdb shows \(holders.map(\.description).joined(separator: ", ")) in \(frame.function)"
                    )
                } else if !FaultExplanationTests.isNamed(named?.function, frame.function) {
                    problems.append("the bad value's function is \(named?.function ?? "none"), gdb \(frame.function)")
                }
                if let allowed = mode.expressions[program.language], !allowed.contains(named?.expression ?? "") {
                    problems.append("the bad value's expression is \(named?.expression ?? "none"), expected \(allowed[0])")
                }
            }
            if let register = named?.register, mode.comparesAddresses {
                let theirs = gdb.register(register)
                let agrees = theirs.flatMap { theirs in named?.value.map { layout.agree(theirs, $0.value) } } ?? false
                if !agrees {
                    problems.append("the bad value \(register) = \(hex(named?.value?.value)), gdb \(hex(theirs))")
                }
            }
            return problems
        }

        /// A value gdb prints as a number (`0x0`, `71748523475264`, `0x5555… "paid"`).
        static func integer(_ value: String) -> UInt64? {
            let head = value.prefix { !$0.isWhitespace }
            if head.hasPrefix("0x") { return UInt64(head.dropFirst(2), radix: 16) }
            return UInt64(head)
        }

        /// Each of gdb's top frames against the report's frame of that name.
        func checkFrames() -> [String] {
            var problems: [String] = []
            let ours = event.crashedFrames
            var cursor = 0
            for frame in gdb.frames where frame.function != "??" {
                guard
                    let found = ours[min(cursor, ours.count)...].firstIndex(where: { record in
                        FaultExplanationTests.isNamed(record.function, frame.function)
                            || FaultExplanationTests.isNamed(record.symbol, frame.function)
                    })
                else {
                    problems.append(
                        "gdb's \(frame) is not among the report's frames \(ours.prefix(8).map { $0.function ?? "?" })")
                    continue
                }
                cursor = found + 1
                // A stack overflow's crashed frame has its variables where the stack ran out:
                // partly past the stack's mapping, which neither run reads alike.
                if frame.index == 0 && (elsewhere || mode.name == "stack-overflow") { continue }
                // A function that left the stack by a tail call is put back from the DWARF's call
                // sites, with no registers or stack of its own: the report reads no variables
                // for it (gdb guesses them from its callee's).
                if ours[found].tailCall == true { continue }
                problems += checkVariables(frame, ours[found], index: found)
            }
            return problems
        }

        /// gdb's `info args` and `info locals` of `frame` against the report's `vars`. In a
        /// frame of libc (not the fixture's source) a local is compared only where gdb has it
        /// `<optimized out>`: its bytes may be ones the function has not written yet (abort's
        /// `act`, pthread_kill's `old_mask`), left by whatever ran there before in a run whose
        /// environment is not gdb's.
        func checkVariables(_ frame: GDBFrameState, _ record: FrameRecord, index: Int) -> [String] {
            guard frame.arguments != nil || frame.locals != nil else { return [] }
            let label = "#\(index) \(frame.function)"
            let shown = (frame.arguments ?? []).map { ($0, true) } + (frame.locals ?? []).map { ($0, false) }
            guard let vars = record.vars else {
                return shown.isEmpty
                    ? [] : ["\(label) has no vars; gdb shows \(shown.map(\.0.description).joined(separator: ", "))"]
            }
            let inFixture = frame.location?.contains("explain/" + program.source + ":") == true
            var problems: [String] = []
            var used = Set<Int>()
            for (variable, parameter) in shown {
                guard
                    let position = vars.indices.first(where: {
                        !used.contains($0) && vars[$0].name == variable.name && (vars[$0].parameter ?? false) == parameter
                    })
                else {
                    problems.append("\(label): no \(parameter ? "parameter" : "local") \(Self.clip(variable.description))")
                    continue
                }
                used.insert(position)
                let value = vars[position].value
                if variable.value.hasPrefix("<error reading variable") { continue }  // gdb's own failure
                if variable.value == value { continue }
                if Self.isKnownGap(
                    ours: value, gdb: variable.value, outerFrame: index > 0, parameter: parameter, inFixture: inFixture)
                {
                    continue
                }
                if !inFixture && !parameter && variable.value != "<optimized out>" { continue }
                if !layout.agree(variable.value, value) {
                    problems.append("\(label): \(variable.name) = \(Self.clip(value)), gdb \(Self.clip(variable.value))")
                }
            }
            for (position, variable) in vars.enumerated() where !used.contains(position) {
                problems.append("\(label): \(variable.name) = \(Self.clip(variable.value)), which gdb does not show")
            }
            return problems
        }

        /// Where the report knowingly says less than gdb, and why:
        /// - a Rust `&str` whose bytes the capture does not hold (a heap string of `main`'s)
        ///   keeps its pointer and length, where gdb reads the live process;
        /// - in an outer frame, a variable in a caller-saved register (rdi, rdx…) is
        ///   `<unavailable>` (or a slice whose pointer is): gdb takes such a register as unchanged
        ///   since the inner frame (its "same value" rule for registers the CFI does not
        ///   describe), a guess the report does not make;
        /// - in libc, a parameter gdb finds on entry through a chain of tail calls
        ///   (`__pthread_kill_implementation`'s `no_tid` through `__pthread_kill_internal`):
        ///   the report follows one caller's call site, not tail-call chains.
        static func isKnownGap(ours: String, gdb: String, outerFrame: Bool, parameter: Bool, inFixture: Bool) -> Bool {
            if ours.hasPrefix("&str {data_ptr: "), gdb.hasPrefix("\""),
                let length = ours.split(separator: " ").last.flatMap({ Int($0.dropLast()) })
            {
                return gdb.utf8.count - 2 == length || gdb.hasSuffix("...")
            }
            if outerFrame && (ours == "<unavailable>" || ours.hasSuffix("<error reading variable: value has been optimized out>"))
            {
                return true
            }
            return !inFixture && parameter && ours == "<optimized out>"
        }

        static func clip(_ text: String) -> String { text.count > 160 ? text.prefix(160) + "…" : text }
    }

    /// Whether crashport's `name` is gdb's `function`: equal, or equal without C++'s
    /// parameter list (`shop::read_sku(shop::Order const*, int)`).
    static func isNamed(_ name: String?, _ function: String) -> Bool {
        guard let name else { return false }
        if name == function { return true }
        guard name.hasSuffix(")"), let open = name.firstIndex(of: "(") else { return false }
        return name[..<open] == function
    }
}

/// The access an instruction gdb shows makes.
struct ExpectedAccess {
    var kind: AccessRecord.Kind
    var size: Int?
    /// The normalized operand: `[rdi+8]`, or the register a call goes through.
    var operand: String?

    static let prefixes: Set<String> = ["lock", "rep", "repz", "repnz", "repe", "repne", "bnd", "notrack", "data16"]

    /// nil where the instruction accesses no memory (lea, nop, a register move).
    init?(_ text: String, call: Bool) {
        var words = text.lowercased().split(whereSeparator: \.isWhitespace).map(String.init)
        while let first = words.first, Self.prefixes.contains(first) { words.removeFirst() }
        guard let mnemonic = words.first else { return nil }
        let operands = Self.split(TestSupport.normalizeInstruction(words.dropFirst().joined(separator: " ")))
        if call {
            kind = mnemonic.hasPrefix("j") ? .jump : .call
            operand = operands.first.map(Self.operand)
            return
        }
        if mnemonic == "push" || mnemonic == "call" {
            // The return address or the value, stored below rsp.
            kind = .write
            size = 8
            return
        }
        guard mnemonic != "lea", !mnemonic.hasPrefix("nop"),
            let memory = operands.firstIndex(where: { $0.contains("[") })
        else { return nil }
        operand = Self.operand(operands[memory])
        let sizes = [
            ("xmmword", 16), ("ymmword", 32), ("zmmword", 64), ("tbyte", 10), ("qword", 8), ("dword", 4), ("word", 2),
            ("byte", 1),
        ]
        size = sizes.first { operands[memory].hasPrefix($0.0 + "ptr") }?.1
        if mnemonic == "cmp" || mnemonic == "test" || memory > 0 {
            kind = .read
        } else if mnemonic.hasPrefix("mov") || mnemonic.hasPrefix("stos") || mnemonic.hasPrefix("set") {
            kind = .write
        } else {
            kind = .readWrite
        }
    }

    /// The operands of a normalized instruction's operand text, split at the commas outside
    /// brackets.
    static func split(_ text: String) -> [String] {
        var parts: [String] = []
        var current = ""
        var depth = 0
        for character in text {
            if character == "[" { depth += 1 }
            if character == "]" { depth -= 1 }
            if character == "," && depth == 0 {
                parts.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        if !current.isEmpty { parts.append(current) }
        return parts
    }

    /// `qwordptr[rdi+8]` → `[rdi+8]`; `rax` stays.
    static func operand(_ text: String) -> String {
        guard let open = text.firstIndex(of: "[") else { return text }
        return String(text[open...])
    }
}
