// PerfMap: the names a JIT gave the code it generated, from its perf map (`/tmp/perf-PID.map`,
// the format Linux perf reads: one "START SIZE NAME" line per piece of code, START and SIZE in
// hexadecimal without or with 0x). `node --perf-basic-prof`, `python3.12 -X perf` and the JVM's
// perf-map agents append to it as they compile, so a later line describes code that moved into
// addresses an earlier line named: the later one wins wherever they overlap.
//
// The file is the process's user's to write, so every byte is hostile: a line that does not
// parse is skipped and counted, a name is cut at `maximumNameBytes`, and the caller reads at
// most a bound of the file, its tail (the newest names; `skippedBytes` says how much came
// before, and the first, partial line is dropped). The result is sorted and has no overlaps, so
// a lookup is a binary search.

import BoundedBytes
import ReportModel

public struct PerfMap: Sendable, Equatable {
    /// Sorted by start, none overlapping; a symbol an older line named and a newer one partly
    /// took over is kept in the pieces no newer line covers.
    public var symbols: [JITSymbol]
    /// Lines that did not parse (no two hexadecimal fields, a size of 0), skipped.
    public var malformedLines: Int
    /// Names cut at `maximumNameBytes`.
    public var longNames: Int

    /// The bytes a capture reads of a perf map: its last 8 MiB (a long-running Node process's
    /// map grows by megabytes; the code that crashed is usually among the newest).
    public static let readLimit = 8 << 20
    /// A name's bytes; longer names are cut (a C++ or Java signature rarely reaches it).
    public static let maximumNameBytes = 512

    public init(symbols: [JITSymbol] = [], malformedLines: Int = 0, longNames: Int = 0) {
        self.symbols = symbols
        self.malformedLines = malformedLines
        self.longNames = longNames
    }

    /// Parses a perf map's text. `startsMidLine`: the bytes are a tail of the file that does not
    /// begin at a line's start, so everything up to the first newline is dropped.
    public init(parsing bytes: [UInt8], startsMidLine: Bool = false) {
        var lines: [JITSymbol] = []
        var malformed = 0
        var long = 0
        var lineStart = bytes.startIndex
        if startsMidLine {
            guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else {
                self.init()
                return
            }
            lineStart = newline + 1
        }
        while lineStart < bytes.endIndex {
            let lineEnd = bytes[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
            defer { lineStart = lineEnd + 1 }
            let line = bytes[lineStart..<lineEnd]
            if line.isEmpty { continue }
            switch Self.parseLine(line) {
            case .symbol(let symbol, let cut):
                lines.append(symbol)
                if cut { long += 1 }
            case .malformed: malformed += 1
            }
        }
        self.init(symbols: Self.resolved(lines), malformedLines: malformed, longNames: long)
    }

    enum Line {
        case symbol(JITSymbol, cut: Bool)
        case malformed
    }

    /// "START SIZE NAME": fields separated by one or more spaces or tabs; the name is the rest
    /// of the line (it may hold spaces), without a trailing carriage return.
    static func parseLine(_ line: ArraySlice<UInt8>) -> Line {
        var rest = line
        guard let start = hexField(&rest), let size = hexField(&rest), size > 0 else { return .malformed }
        var name = rest
        while let last = name.last, last == UInt8(ascii: "\r") || last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") {
            name = name.dropLast()
        }
        guard !name.isEmpty else { return .malformed }
        let cut = name.count > maximumNameBytes
        var text = String(decoding: name.prefix(maximumNameBytes), as: UTF8.self)
        if cut { text += "…" }
        return .symbol(JITSymbol(start: start, size: size, name: text), cut: cut)
    }

    /// A hexadecimal number (at most 16 digits, an optional 0x) and the blanks after it.
    static func hexField(_ rest: inout ArraySlice<UInt8>) -> UInt64? {
        func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        rest = rest.drop(while: isBlank)
        if rest.starts(with: "0x".utf8) || rest.starts(with: "0X".utf8) { rest = rest.dropFirst(2) }
        var value: UInt64 = 0
        var digits = 0
        while let byte = rest.first, !isBlank(byte) {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            digits += 1
            guard digits <= 16 else { return nil }
            value = value << 4 | UInt64(digit)
            rest = rest.dropFirst()
        }
        guard digits > 0, let next = rest.first, isBlank(next) else { return nil }
        rest = rest.drop(while: isBlank)
        return value
    }

    /// The lines in file order made sorted and disjoint, each address named by the last line
    /// that covers it: a sweep over the lines' ends and starts, with a heap of the lines that
    /// cover the current address, newest on top. O(n log n) whatever the overlaps.
    static func resolved(_ lines: [JITSymbol]) -> [JITSymbol] {
        guard !lines.isEmpty else { return [] }
        let order = lines.indices.sorted { lines[$0].start < lines[$1].start }
        var points = lines.flatMap { [$0.start, $0.end] }
        points.sort()
        var heap = MaxHeap<Int>()  // line numbers: the newest line on top
        var segments: [(start: UInt64, end: UInt64, line: Int)] = []
        var next = 0  // into `order`
        for (index, point) in points.enumerated() where index + 1 < points.count && points[index + 1] != point {
            while next < order.count, lines[order[next]].start <= point {
                heap.push(order[next])
                next += 1
            }
            // Lines that ended are dropped when they come to the top: one below a newer line
            // that still covers the address does not name it anyway.
            while let top = heap.top, lines[top].end <= point { heap.pop() }
            guard let top = heap.top else { continue }
            let end = points[index + 1]
            if let last = segments.last, last.line == top, last.end == point {
                segments[segments.count - 1].end = end
            } else {
                segments.append((point, end, top))
            }
        }
        return segments.map { JITSymbol(start: $0.start, size: $0.end - $0.start, name: lines[$0.line].name) }
    }

    /// The symbol that holds `address` among sorted, disjoint `symbols`; nil when none does.
    public static func lookup(_ address: UInt64, in symbols: [JITSymbol]) -> JITSymbol? {
        var low = 0
        var high = symbols.count
        // The first symbol that starts after `address`.
        while low < high {
            let middle = low + (high - low) / 2
            if symbols[middle].start <= address { low = middle + 1 } else { high = middle }
        }
        guard low > 0, address < symbols[low - 1].end else { return nil }
        return symbols[low - 1]
    }

    /// The symbols that hold one of `addresses`: what a report can use of a map of 100,000
    /// lines is the few its threads' pcs and stacks point into.
    public static func symbols(_ symbols: [JITSymbol], holding addresses: some Sequence<UInt64>) -> [JITSymbol] {
        guard !symbols.isEmpty else { return [] }
        var kept = Set<UInt64>()
        for address in addresses {
            if let symbol = lookup(address, in: symbols) { kept.insert(symbol.start) }
        }
        return symbols.filter { kept.contains($0.start) }
    }
}
