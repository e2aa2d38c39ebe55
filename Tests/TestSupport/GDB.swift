// gdb's `bt` as the reference for frames: what crashport's reports must equal (issue 17).

import Foundation

/// One line of gdb's backtrace: the function as gdb names it, and its `file:line` if shown.
public struct GDBFrame: Equatable, CustomStringConvertible {
    public var function: String
    public var location: String?

    public var description: String { location.map { "\(function) at \($0)" } ?? function }

    /// Whether `name`, crashport's name for a frame, is the function gdb shows. Compared only
    /// where gdb's name is a plain path (`deep::recurse`, `start_thread`): gdb names generic
    /// and closure frames from DWARF (`call_once<…>`, `{closure#1}`) where crashport demangles
    /// the linkage name. libc's frames are compared too: with its debug file both name them
    /// from its DWARF (`__GI_raise`, `__libc_start_main_impl`), without it from its symbols.
    public func isNamed(_ name: String?) -> Bool {
        let plain = function.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" }
        guard plain else { return true }
        return name == function
    }
}

extension GDBFrame {
    /// How crashport's frames (`names`, innermost first, inline ones too) differ from gdb's
    /// `reference`: a count that is not gdb's, or frames named otherwise; nil when they agree.
    public static func differences(_ reference: [GDBFrame], _ names: [String?]) -> String? {
        var problems: [String] = []
        if names.count != reference.count { problems.append("\(names.count) frames where gdb shows \(reference.count)") }
        let differing = zip(reference, names).enumerated().filter { !$0.element.0.isNamed($0.element.1) }
        problems += differing.prefix(5).map { "#\($0.offset) gdb \($0.element.0) crashport \($0.element.1 ?? "?")" }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }
}

extension TestSupport {
    /// gdb's backtrace of the crashing thread at the program's first fatal signal, innermost
    /// first. Callers skip, saying so, where `which("gdb")` finds none. `settings` are gdb
    /// commands run before the program starts (a Go program's `handle SIGURG nostop noprint`:
    /// its runtime preempts goroutines with SIGURG, where gdb would stop first).
    public static func gdbBacktrace(
        _ command: [String], settings: [String] = [], environment: [String: String] = [:]
    ) throws -> [GDBFrame] {
        guard let gdb = which("gdb") else { throw TestFailure("gdb is not installed") }
        let result = try run(
            [gdb, "-q", "-batch", "-nx", "-ex", "set pagination off", "-ex", "set backtrace past-main on"]
                + settings.flatMap { ["-ex", $0] } + ["-ex", "run", "-ex", "bt", "--args"] + command,
            environment: environment, timeout: 300)
        // "#12 0x00007f… in name (args) at file:line" or, for frame 0, "#0  name (args) at …".
        let pattern = try NSRegularExpression(pattern: #"^#\d+\s+(?:0x[0-9a-f]+ in )?(.+?) \(.*\)(?: at (\S+))?(?: from \S+)?$"#)
        let frames = result.stdout.split(separator: "\n").compactMap { line -> GDBFrame? in
            let text = String(line)
            guard let match = pattern.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)),
                let function = Range(match.range(at: 1), in: text).map({ String(text[$0]) })
            else { return nil }
            return GDBFrame(function: function, location: Range(match.range(at: 2), in: text).map { String(text[$0]) })
        }
        guard !frames.isEmpty else { throw TestFailure("gdb showed no backtrace:\n\(result.stdout)\n\(result.stderr)") }
        return frames
    }
}

// gdb's view of a fault as the reference for a report's explanation (issue 49): `x/i $pc`,
// `info registers`, and each top frame's `info args` and `info locals`.

/// A variable as gdb's `info args` or `info locals` prints it: `name = value`, the value's
/// lines joined; `<optimized out>` and `<error reading variable …>` kept as gdb prints them.
public struct GDBVariable: Equatable, CustomStringConvertible {
    public var name: String
    public var value: String

    public var description: String { "\(name) = \(value)" }

    /// gdb has a value: not `<optimized out>`, not an error of its own reading the DWARF.
    public var hasValue: Bool { value != "<optimized out>" && !value.hasPrefix("<error reading variable") }
}

/// One frame as gdb's `frame N` selects it.
public struct GDBFrameState: CustomStringConvertible {
    public var index: Int
    /// gdb's name (`read_sku`, `shop::read_sku`, `explain::read_sku`, `??`).
    public var function: String
    public var pc: UInt64?
    /// `file:line`, where gdb shows one.
    public var location: String?
    /// nil where gdb has no symbols for the frame ("No symbol table info available.").
    public var arguments: [GDBVariable]?
    public var locals: [GDBVariable]?

    public var description: String { "#\(index) \(function)" + (location.map { " at \($0)" } ?? "") }
}

/// A mapping of the process as `info proc mappings` lists it.
public struct GDBMapping {
    public var start: UInt64
    public var end: UInt64
    public var path: String?

    public func contains(_ address: UInt64) -> Bool { address >= start && address < end }
}

/// gdb's state at the program's first fatal signal.
public struct GDBFaultState {
    /// `SIGSEGV`, from "Program received signal SIGSEGV, …".
    public var signal: String?
    /// The pc `x/i $pc` showed, and its instruction in Intel syntax (`mov    rax,QWORD PTR
    /// [rdi+0x8]`); the text is nil where gdb could not read the code ("Cannot access memory").
    public var pc: UInt64?
    public var instruction: String?
    /// `info registers`: each register's value (rip, eflags and the segment registers too).
    public var registers: [String: UInt64]
    /// The frames gdb could select, innermost first (fewer than asked where the stack ends).
    public var frames: [GDBFrameState]
    /// The instruction before frame 1's pc: the call that made frame 0 (`call   rcx`), from
    /// `disassemble` in frame 1, and its address.
    public var callerCall: (address: UInt64, text: String)?
    public var mappings: [GDBMapping]
    /// gdb's whole output, for failure messages.
    public var output: String

    /// The value of `name` as gdb has it, a 32-, 16- or 8-bit register (`eax`, `r8d`, `di`,
    /// `al`) taken from its 64-bit register.
    public func register(_ name: String) -> UInt64? {
        if let value = registers[name] { return value }
        let legacy = ["ax", "bx", "cx", "dx", "si", "di", "bp", "sp"]
        for base in legacy {
            let full = registers["r" + base]
            if name == "e" + base { return full.map { $0 & 0xffff_ffff } }
            if name == base { return full.map { $0 & 0xffff } }
        }
        for base in ["ax", "bx", "cx", "dx"] where name == String(base.prefix(1)) + "l" {
            return registers["r" + base].map { $0 & 0xff }
        }
        for (suffix, mask) in [("d", UInt64(0xffff_ffff)), ("w", 0xffff), ("b", 0xff)] where name.hasSuffix(suffix) {
            if let full = registers[String(name.dropLast())], name.hasPrefix("r") { return full & mask }
        }
        return nil
    }
}

extension TestSupport {
    /// gdb's state at the first fatal signal of `command` (run under gdb, which disables ASLR):
    /// the instruction at the pc (Intel syntax), the registers, the mappings, and for the top
    /// `frames` frames the function, `info args` and `info locals`. Entry values are not
    /// printed (`set print entry-values no`): a parameter's value is its value at the pc, as a
    /// report has it. Callers skip, saying so, where `which("gdb")` finds none.
    public static func gdbFaultState(
        _ command: [String], frames: Int = 5, environment: [String: String] = [:]
    ) throws -> GDBFaultState {
        guard let gdb = which("gdb") else { throw TestFailure("gdb is not installed") }
        // Every section is headed by a marker echoed to stdout: gdb's errors ("Cannot access
        // memory", "No frame at level 4.") go to stderr, out of order with it.
        var commands = [
            "set pagination off", "set width 0", "set confirm off", "set print entry-values no",
            "set disassembly-flavor intel", "run", "echo @@x\\n", "x/i $pc", "echo @@registers\\n", "info registers",
            "echo @@mappings\\n", "info proc mappings",
        ]
        for index in 0..<frames {
            commands += [
                "echo @@frame \(index)\\n", "frame \(index)", "echo @@args\\n", "info args", "echo @@locals\\n",
                "info locals",
            ]
            if index == 1 { commands += ["echo @@disassemble\\n", "disassemble"] }
        }
        commands.append("echo @@end\\n")
        let result = try run(
            [gdb, "-q", "-batch", "-nx"] + commands.flatMap { ["-ex", $0] } + ["--args"] + command,
            environment: environment, timeout: 300)
        guard result.stdout.contains("@@x") else {
            throw TestFailure("gdb did not run \(command):\n\(result.stdout)\n\(result.stderr)")
        }
        return parseGDBFaultState(result.stdout)
    }

    /// Parses the marked output of gdbFaultState (internal; public for tests of the parser).
    public static func parseGDBFaultState(_ output: String) -> GDBFaultState {
        var state = GDBFaultState(registers: [:], frames: [], mappings: [], output: output)
        var section = ""
        var frame: GDBFrameState?
        var variables: [GDBVariable]?
        var disassembly: [String] = []
        // A marker echoed after output that ended without a newline ("=> 0x0:\t" where x/i
        // could not read the code) starts a line of its own.
        let output = output.replacingOccurrences(of: #"(?<=[^\n])@@"#, with: "\n@@", options: .regularExpression)
        func finishVariables() {
            guard var current = frame, let list = variables else { return }
            if section == "args" { current.arguments = list } else if section == "locals" { current.locals = list }
            frame = current
            variables = nil
        }
        func finishFrame() {
            finishVariables()
            if let frame { state.frames.append(frame) }
            frame = nil
        }
        for line in output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("@@") {
                finishVariables()
                let marker = line.dropFirst(2)
                if marker.hasPrefix("frame ") || marker == "end" {
                    finishFrame()
                    section = marker == "end" ? "end" : "frame"
                } else {
                    section = String(marker)
                    if section == "args" || section == "locals" { variables = frame == nil ? nil : [] }
                }
                continue
            }
            switch section {
            case "":
                if let range = line.range(of: "Program received signal ") {
                    state.signal = line[range.upperBound...].split(separator: ",").first.map(String.init)
                }
            case "x":
                // "=> 0x5555555552a6 <read_sku+22>:\tadd    rax,QWORD PTR [rdi+0x8]"
                guard line.hasPrefix("=> ") else { continue }
                let address = line.dropFirst(3).prefix { !$0.isWhitespace && $0 != ":" }
                state.pc = parseHex(String(address))
                if let tab = line.firstIndex(of: "\t") {
                    let text = line[line.index(after: tab)...].trimmingCharacters(in: .whitespaces)
                    state.instruction = text.isEmpty || text.hasPrefix("Cannot access memory") ? nil : text
                }
            case "registers":
                let fields = line.split(whereSeparator: \.isWhitespace)
                if fields.count >= 2, let value = parseHex(String(fields[1])) { state.registers[String(fields[0])] = value }
            case "mappings":
                let fields = line.split(whereSeparator: \.isWhitespace).map(String.init)
                if fields.count >= 4, let start = parseHex(fields[0]), let end = parseHex(fields[1]) {
                    let path = fields.count >= 6 ? fields[5...].joined(separator: " ") : nil
                    state.mappings.append(GDBMapping(start: start, end: end, path: path))
                }
            case "frame":
                if frame == nil, let parsed = parseFrameLine(line) { frame = parsed }
            case "args", "locals":
                guard variables != nil else { continue }
                if line.hasPrefix("No symbol table info available") {
                    variables = nil
                } else if line.hasPrefix("No arguments.") || line.hasPrefix("No locals.") {
                    continue
                } else if let equals = line.range(of: " = "), isVariableName(line[..<equals.lowerBound]) {
                    variables?.append(
                        GDBVariable(name: String(line[..<equals.lowerBound]), value: String(line[equals.upperBound...])))
                } else if !line.isEmpty, let last = variables?.popLast() {
                    // A value gdb broke over lines.
                    variables?.append(
                        GDBVariable(name: last.name, value: last.value + " " + line.trimmingCharacters(in: .whitespaces)))
                }
            case "disassemble":
                disassembly.append(line)
            default:
                continue
            }
        }
        finishFrame()
        // "   0x000055555555533e <+79>:\tcall   rcx" then "=> 0x0000555555555340 <+81>:\t…".
        if let marked = disassembly.firstIndex(where: { $0.hasPrefix("=> ") }), marked > 0 {
            let line = disassembly[marked - 1]
            let address = line.trimmingCharacters(in: .whitespaces).prefix { !$0.isWhitespace }
            if let value = parseHex(String(address)), let tab = line.firstIndex(of: "\t") {
                state.callerCall = (value, line[line.index(after: tab)...].trimmingCharacters(in: .whitespaces))
            }
        }
        return state
    }

    /// "#1  0x0000555555555302 in fill_order (found=0x0, …) at /…/explain.c:62", or for a
    /// frame at the start of a line "#0  explain::read_sku (o=0x0, …) at …".
    static func parseFrameLine(_ line: String) -> GDBFrameState? {
        guard line.hasPrefix("#"), let space = line.firstIndex(of: " "),
            let index = Int(line[line.index(after: line.startIndex)..<space])
        else { return nil }
        var rest = line[space...].trimmingCharacters(in: .whitespaces)[...]
        var pc: UInt64?
        if rest.hasPrefix("0x"), let inRange = rest.range(of: " in ") {
            pc = parseHex(String(rest[..<inRange.lowerBound]))
            rest = rest[inRange.upperBound...]
        }
        guard let open = rest.range(of: " (") else { return nil }
        let function = String(rest[..<open.lowerBound])
        let location = rest.range(of: ") at ", options: .backwards).map { String(rest[$0.upperBound...]) }
        return GDBFrameState(index: index, function: function, pc: pc, location: location)
    }

    static func isVariableName(_ text: Substring) -> Bool {
        guard let first = text.first, first.isLetter || first == "_" else { return false }
        return text.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "@" || $0 == ":" || $0 == "$" }
    }

    static func parseHex(_ text: String) -> UInt64? {
        let digits = text.hasPrefix("0x") ? text.dropFirst(2) : text[...]
        return UInt64(digits, radix: 16)
    }
}

extension TestSupport {
    /// An x86-64 instruction in Intel syntax in one form for comparing capstone's text
    /// (`mov rax, qword ptr [rbx + 8]`) with gdb's (`mov    rax,QWORD PTR [rbx+0x8]`): lower
    /// case, no spaces, gdb's `<symbol+offset>` and `# 0x…` comments dropped, every number in
    /// decimal (64-bit values with the top bit set as negative, as capstone prints
    /// displacements), a segment's brackets as gdb writes them (`fs:0x28`), an index's `*1`
    /// and a displacement `+0` dropped (`[rax+rax*1+0x0]` is capstone's `[rax + rax]`).
    public static func normalizeInstruction(_ text: String) -> String {
        var text = text.lowercased()
        if let comment = text.firstIndex(of: "#") { text = String(text[..<comment]) }
        text = text.replacingOccurrences(of: #"<[^>]*>"#, with: "", options: .regularExpression)
        text = text.replacingOccurrences(of: #"\b([cdefgs]s):\[([^\]]*)\]"#, with: "$1:$2", options: .regularExpression)
        text = text.filter { !$0.isWhitespace }
        // Numbers: a run of digits (or 0x and hex digits) not inside a name (r8, xmm0, r13d).
        var result = ""
        var characters = text[...]
        var previous: Character?
        while let character = characters.first {
            let startsName = previous.map { $0.isLetter || $0.isNumber || $0 == "_" } ?? false
            if character.isNumber && !startsName {
                var token: Substring
                var value: UInt64?
                if characters.hasPrefix("0x") {
                    token = characters.dropFirst(2).prefix { $0.isHexDigit }
                    value = UInt64(token, radix: 16)
                    characters = characters.dropFirst(2 + token.count)
                } else {
                    token = characters.prefix { $0.isNumber }
                    value = UInt64(token)
                    characters = characters.dropFirst(token.count)
                }
                if let value {
                    if value >= 1 << 63 {
                        if result.hasSuffix("+") { result.removeLast() }
                        result += "-" + String(0 &- value)
                    } else {
                        result += String(value)
                    }
                } else {
                    result += token
                }
                previous = "0"
                continue
            }
            result.append(character)
            previous = character
            characters = characters.dropFirst()
        }
        result = result.replacingOccurrences(of: #"\*1(?![0-9])"#, with: "", options: .regularExpression)
        result = result.replacingOccurrences(of: "+0]", with: "]")
        return result
    }
}

extension TestSupport {
    /// gdb's `x/i` (Intel syntax) at `address` of `binary` not running: for a position
    /// independent executable, an offset from where it is loaded. nil where gdb shows none.
    public static func gdbInstruction(at address: UInt64, in binary: String) throws -> String? {
        guard let gdb = which("gdb") else { throw TestFailure("gdb is not installed") }
        let result = try run(
            [
                gdb, "-q", "-batch", "-nx", "-ex", "set disassembly-flavor intel", "-ex", "x/i 0x" + String(address, radix: 16),
                binary,
            ])
        let line = result.stdout.split(separator: "\n").first { $0.contains(":\t") }
        guard let line, let tab = line.firstIndex(of: "\t") else { return nil }
        let text = line[line.index(after: tab)...].trimmingCharacters(in: .whitespaces)
        return text.isEmpty ? nil : text
    }
}
