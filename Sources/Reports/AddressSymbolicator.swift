// AddressSymbolicator: `crashport symbolicate --obj FILE [ADDRESS...]`, a drop-in for
// llvm-symbolizer and addr2line in scripts. Output is llvm-symbolizer's default format: for
// each address, a function line and a file:line:column line per frame, innermost inlined
// frame first, then a blank line; "??" where unknown. Addresses come from the arguments, or
// one per line on stdin (answered as each chunk of input arrives, so it works interactively).
// With `--format json`, as llvm-symbolizer's --output-style=JSON arranges it: the addresses
// given as arguments are answered as one array, those read from stdin as one object per line;
// each object is {"address", "frames": [{function, file, line, column, inlined}]}, innermost
// frame first, a field missing where it is unknown.

import BoundedBytes
import FoundationEssentials
import ObjectFile
import Symbolication
#if canImport(Glibc)
import Glibc
#endif

public struct AddressSymbolicator {
    let debug: DebugImage
    let demangle: Bool
    /// JSON instead of llvm-symbolizer's text (see the top of this file).
    public var json = false

    /// Debug data of the object that was not decompressed (SectionCompression's caps).
    public var refusals: [DebugDataRefusal] { debug.refusals }

    /// `batch`: the addresses will be many (stdin), so a compressed debug file's DWARF is
    /// inflated whole at once rather than unit by unit (DWARFInfo.inflateCompressedSectionsOnDemand).
    public init(object path: String, debugDirectories: [String], demangle: Bool, batch: Bool = false) throws {
        DWARFInfo.inflateCompressedSectionsOnDemand(!batch)
        let elf = try ELFFile(path: path)
        debug = DebugImageCache.shared.image(for: elf, locator: DebugFileLocator(debugDirectories: debugDirectories))
        self.demangle = demangle
    }

    /// "0x1f3a" (hex), "1f3a"-style bare hex is not accepted, decimal otherwise, as
    /// llvm-symbolizer reads them.
    static func parse(_ text: Substring) -> UInt64? {
        let trimmed = text.drop { $0 == " " || $0 == "\t" }.prefix { $0 != " " && $0 != "\t" && $0 != "\r" }
        if trimmed.hasPrefix("0x") || trimmed.hasPrefix("0X") { return UInt64(trimmed.dropFirst(2), radix: 16) }
        return UInt64(trimmed)
    }

    /// `parse` straight from the bytes of one input line, without making a String: plain hex
    /// after 0x and plain decimal digits are decoded here (overflow is nil, as UInt64(_:) says);
    /// anything else (a sign, say) goes through `parse`.
    static func parse(line: UnsafeRawBufferPointer) -> UInt64? {
        var start = 0, end = line.count
        while start < end && (line[start] == 0x20 || line[start] == 0x09) { start += 1 }
        var stop = start
        while stop < end && line[stop] != 0x20 && line[stop] != 0x09 && line[stop] != 0x0D { stop += 1 }
        end = stop
        var value: UInt64 = 0
        if end - start > 2 && line[start] == 0x30 && (line[start + 1] | 0x20) == 0x78 {
            for index in (start + 2)..<end {
                let byte = line[index]
                let digit: UInt8
                switch byte {
                case 0x30...0x39: digit = byte - 0x30
                case 0x61...0x66: digit = byte - 0x61 + 10
                case 0x41...0x46: digit = byte - 0x41 + 10
                default: return parse(Substring(String(decoding: line, as: UTF8.self)))
                }
                guard value >> 60 == 0 else { return nil }
                value = value << 4 | UInt64(digit)
            }
            return value
        }
        guard end > start else { return nil }
        for index in start..<end {
            let byte = line[index]
            guard byte >= 0x30 && byte <= 0x39 else { return parse(Substring(String(decoding: line, as: UTF8.self))) }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - 0x30))
            guard !overflow1, !overflow2 else { return nil }
            value = sum
        }
        return value
    }

    /// Appends a decimal number (0 for a negative one: lines and columns are positive).
    @inline(__always)
    static func appendDecimal(_ number: Int, to output: inout [UInt8]) {
        let first = output.count
        var rest = max(number, 0)
        repeat {
            output.append(UInt8(truncatingIfNeeded: 0x30 + rest % 10))
            rest /= 10
        } while rest > 0
        output[first...].reverse()
    }

    func append(_ address: UInt64?, to output: inout [UInt8]) {
        guard let address else {
            output.append(contentsOf: "??\n??:0:0\n\n".utf8)
            return
        }
        for frame in Symbolizer.frames(
            in: debug, virtualAddress: address, isReturnAddress: false, demangle: demangle, symbolFile: true,
            asLLVMSymbolizer: true)
        {
            output.append(contentsOf: (frame.function ?? "??").utf8)
            output.append(10)
            output.append(contentsOf: (frame.file ?? "??").utf8)
            output.append(0x3A)
            Self.appendDecimal(frame.line ?? 0, to: &output)
            output.append(0x3A)
            Self.appendDecimal(frame.column ?? 0, to: &output)
            output.append(10)
        }
        output.append(10)
    }

    /// One address's answer in JSON.
    struct Answer: Encodable {
        struct Frame: Encodable {
            var function: String?
            var file: String?
            var line: Int?
            var column: Int?
            var inlined: Bool
        }
        var address: String
        var frames: [Frame] = []
        var error: String?
    }

    /// The JSON object of `text` (its value `address`, nil when it is not one), on one line.
    func appendJSON(_ text: String, _ address: UInt64?, to output: inout [UInt8]) {
        var answer = Answer(address: text.trimmed)
        if let address {
            answer.address = "0x" + String(address, radix: 16)
            answer.frames = Symbolizer.frames(
                in: debug, virtualAddress: address, isReturnAddress: false, demangle: demangle, symbolFile: true,
                asLLVMSymbolizer: true
            ).map { Answer.Frame(function: $0.function, file: $0.file, line: $0.line, column: $0.column, inlined: $0.inlined) }
        } else {
            answer.error = "not an address: 0x-prefixed hex or decimal"
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let encoded: [UInt8] = (try? encoder.encode(answer)).map { Array($0) } ?? Array("{}".utf8)
        output.append(contentsOf: encoded)
    }

    static func write(_ bytes: [UInt8]) {
        writeAll(STDOUT_FILENO, bytes)
    }

    public func run(addresses: [String]) {
        var output: [UInt8] = []
        if !addresses.isEmpty {
            if json {
                output.append(contentsOf: "[\n".utf8)
                for (index, text) in addresses.enumerated() {
                    if index > 0 { output.append(contentsOf: ",\n".utf8) }
                    appendJSON(text, Self.parse(Substring(text)), to: &output)
                }
                output.append(contentsOf: "\n]\n".utf8)
            } else {
                for text in addresses { append(Self.parse(Substring(text)), to: &output) }
            }
            Self.write(output)
            return
        }
        // From stdin, in JSON: one object per line, each as its line arrives.
        func answer(_ line: UnsafeRawBufferPointer) {
            if json {
                appendJSON(String(decoding: line, as: UTF8.self), Self.parse(line: line), to: &output)
                output.append(10)
            } else {
                append(Self.parse(line: line), to: &output)
            }
        }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            pending.append(contentsOf: chunk[0..<count])
            guard let lastNewline = pending.lastIndex(of: 10) else { continue }
            pending.withUnsafeBytes { bytes in
                var start = 0
                for index in 0...lastNewline where bytes[index] == 10 {
                    answer(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
                    start = index + 1
                }
            }
            pending.removeSubrange(...lastNewline)
            Self.write(output)
            output.removeAll(keepingCapacity: true)
        }
        if !pending.isEmpty { pending.withUnsafeBytes { answer($0) } }
        Self.write(output)
    }
}
