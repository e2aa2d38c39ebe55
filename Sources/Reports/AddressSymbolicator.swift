// AddressSymbolicator: `crashport symbolicate --obj FILE [ADDRESS...]`, a drop-in for
// llvm-symbolizer and addr2line in scripts. Output is llvm-symbolizer's default format: for
// each address, a function line and a file:line:column line per frame, innermost inlined
// frame first, then a blank line; "??" where unknown. Addresses come from the arguments, or
// one per line on stdin (answered as each chunk of input arrives, so it works interactively).

import ObjectFile
import Symbolication
#if canImport(Glibc)
import Glibc
#endif

public struct AddressSymbolicator {
    let debug: DebugImage
    let demangle: Bool

    /// Debug data of the object that was not decompressed (SectionCompression's caps).
    public var refusals: [DebugDataRefusal] { debug.refusals }

    public init(object path: String, debugDirectories: [String], demangle: Bool) throws {
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

    func append(_ address: UInt64?, to output: inout [UInt8]) {
        guard let address else {
            output.append(contentsOf: Array("??\n??:0:0\n\n".utf8))
            return
        }
        for frame in Symbolizer.frames(
            in: debug, virtualAddress: address, isReturnAddress: false, demangle: demangle, symbolFile: true)
        {
            let name = frame.function
            output.append(contentsOf: Array((name ?? "??").utf8))
            output.append(10)
            let location = "\(frame.file ?? "??"):\(frame.line ?? 0):\(frame.column ?? 0)\n"
            output.append(contentsOf: Array(location.utf8))
        }
        output.append(10)
    }

    static func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(1, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }

    public func run(addresses: [String]) {
        var output: [UInt8] = []
        if !addresses.isEmpty {
            for text in addresses { append(Self.parse(Substring(text)), to: &output) }
            Self.write(output)
            return
        }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            pending.append(contentsOf: chunk[0..<count])
            guard let lastNewline = pending.lastIndex(of: 10) else { continue }
            for line in pending[...lastNewline].split(separator: 10, omittingEmptySubsequences: false).dropLast() {
                append(Self.parse(Substring(String(decoding: line, as: UTF8.self))), to: &output)
            }
            pending.removeSubrange(...lastNewline)
            Self.write(output)
            output.removeAll(keepingCapacity: true)
        }
        if !pending.isEmpty { append(Self.parse(Substring(String(decoding: pending, as: UTF8.self))), to: &output) }
        Self.write(output)
    }
}
