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
