// SymbolizerComparison: helpers to build fixture programs and to check DWARFInfo against
// llvm-symbolizer, the reference. Reusable by other targets (tools/bench-symbolicate can copy
// or depend on it): everything here is a real compiler and the real llvm-symbolizer.
//
// The comparison asks `llvm-symbolizer --obj=FILE --functions=linkage --inlining
// --no-demangle --output-style=JSON` (names stay mangled, as DWARFInfo returns them) and
// compares every frame's function, file, line and column. An address llvm-symbolizer answers
// from the symbol table alone (a single frame with no line, for code without DWARF such as
// crt files) is counted apart as `symbolTableOnly`: DWARFInfo returns [] there by design and
// the Symbolizer names it from the symbol table.

import ObjectFile
import Foundation
import Symbolication
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

enum SymbolicationFixtures {
    struct CommandResult {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs a command to completion (TestSupport's runner); stdin from `input`.
    @discardableResult
    static func run(_ command: [String], input: String? = nil) throws -> CommandResult {
        let result = try TestSupport.run(command, input: input, timeout: 300)
        let status: Int32
        switch result.status {
        case .exited(let code): status = code
        case .signaled(let signal): status = 128 + signal
        case .timedOut: status = -1
        }
        return CommandResult(status: status, stdout: result.stdout, stderr: result.stderr)
    }

    /// The first executable named `name` on PATH (or `preferred` when it exists).
    static func tool(_ name: String, preferred: String? = nil) -> String? {
        if let preferred, access(preferred, X_OK) == 0 { return preferred }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(name)"
            if access(path, X_OK) == 0 { return path }
        }
        return nil
    }

    static var llvmSymbolizer: String? { tool("llvm-symbolizer", preferred: "/opt/swift/usr/bin/llvm-symbolizer") }

    /// Requires the given tools; skips the test (XCTSkip) when one is missing.
    static func require(_ names: String...) throws -> [String] {
        try names.map { name in
            guard let path = name == "llvm-symbolizer" ? llvmSymbolizer : tool(name) else {
                throw XCTSkip("\(name) not found")
            }
            return path
        }
    }

    static func temporaryDirectory(_ label: String) -> String { TestSupport.temporaryDirectory(label) }

    /// Writes `source` to `directory/name` and compiles it with `compiler flags`; returns the output path.
    static func compile(
        source: String, name: String, in directory: String, compiler: String, flags: [String], output: String
    ) throws -> String {
        let sourcePath = directory + "/" + name
        if !FileManager.default.fileExists(atPath: sourcePath) {
            try source.write(toFile: sourcePath, atomically: true, encoding: .utf8)
        }
        let outputPath = directory + "/" + output
        let result = try run([compiler] + flags + [sourcePath, "-o", outputPath])
        guard result.status == 0 else {
            throw NSError(
                domain: "compile", code: Int(result.status),
                userInfo: [
                    NSLocalizedDescriptionKey: "\(compiler) \(flags.joined(separator: " ")) \(name) failed:\n\(result.stderr)"
                ])
        }
        return outputPath
    }

    /// Addresses across `.text` at `stride` bytes.
    static func textAddresses(_ elf: ELFFile, stride: UInt64) -> [UInt64] {
        guard let text = elf.section(named: ".text") else { return [] }
        return Array(Swift.stride(from: text.address, to: text.address + text.size, by: Int(stride)))
    }
}

struct SymbolizerComparison: CustomStringConvertible {
    var total = 0
    var agreeing = 0
    var symbolTableOnly = 0
    var disagreements: [String] = []

    /// Agreement over the addresses with DWARF answers (symbol-table-only ones excluded).
    var agreement: Double {
        let compared = total - symbolTableOnly
        return compared == 0 ? 1 : Double(agreeing) / Double(compared)
    }

    var description: String {
        let percent = (agreement * 100_000).rounded() / 1000
        var text = "\(agreeing)/\(total - symbolTableOnly) agree (\(percent)%), \(symbolTableOnly) symbol-table-only"
        if !disagreements.isEmpty {
            text += "; first disagreements:\n" + disagreements.prefix(20).joined(separator: "\n")
        }
        return text
    }

    /// One frame as both sides can express it.
    struct Frame: Equatable, CustomStringConvertible {
        var function: String
        var file: String
        var line: Int
        var column: Int

        init(function: String?, file: String?, line: Int?, column: Int?) {
            self.function = function ?? ""
            self.file = file ?? ""
            self.line = line ?? 0
            self.column = column ?? 0
        }

        var description: String { "\(function.isEmpty ? "??" : function) \(file.isEmpty ? "??" : file):\(line):\(column)" }
    }

    /// llvm-symbolizer's frames for each address, in order.
    static func llvmFrames(path: String, addresses: [UInt64], arguments: [String] = []) throws -> [[Frame]] {
        guard let symbolizer = SymbolicationFixtures.llvmSymbolizer else { throw XCTSkip("llvm-symbolizer not found") }
        let input = addresses.map { "0x" + String($0, radix: 16) }.joined(separator: "\n") + "\n"
        let result = try SymbolicationFixtures.run(
            [symbolizer, "--obj=" + path, "--functions=linkage", "--inlining", "--no-demangle", "--output-style=JSON"]
                + arguments,
            input: input)
        var frames: [[Frame]] = []
        for line in result.stdout.split(separator: "\n") {
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let symbols = object["Symbol"] as? [[String: Any]]
            else { continue }
            frames.append(
                symbols.map { symbol in
                    Frame(
                        function: symbol["FunctionName"] as? String, file: symbol["FileName"] as? String,
                        line: symbol["Line"] as? Int, column: symbol["Column"] as? Int)
                })
        }
        return frames
    }

    /// Compares `info.frames(at:)` with llvm-symbolizer on `path` for every address. A file
    /// without a slash in llvm's answer comes from an STT_FILE symbol, not from DWARF.
    /// `arguments` go to llvm-symbolizer as well (e.g. --debug-file-directory).
    static func compare(
        info: DWARFInfo, path: String, addresses: [UInt64], arguments: [String] = []
    ) throws -> SymbolizerComparison {
        let expected = try llvmFrames(path: path, addresses: addresses, arguments: arguments)
        var comparison = SymbolizerComparison()
        guard expected.count == addresses.count else {
            comparison.total = addresses.count
            comparison.disagreements = ["llvm-symbolizer answered \(expected.count) of \(addresses.count) addresses"]
            return comparison
        }
        for (address, llvm) in zip(addresses, expected) {
            comparison.total += 1
            let ours = info.frames(at: address).map {
                Frame(function: $0.function, file: $0.file, line: $0.line, column: $0.column)
            }
            if ours == llvm {
                comparison.agreeing += 1
            } else if ours.isEmpty, llvm.count == 1, llvm[0].line == 0, !llvm[0].file.contains("/") {
                comparison.symbolTableOnly += 1
            } else if ours.isEmpty && llvm == [Frame(function: nil, file: nil, line: 0, column: 0)] {
                comparison.agreeing += 1
            } else {
                comparison.disagreements.append(
                    "0x\(String(address, radix: 16)): llvm [\(llvm.map(\.description).joined(separator: " | "))]"
                        + " ours [\(ours.map(\.description).joined(separator: " | "))]")
            }
        }
        return comparison
    }
}
