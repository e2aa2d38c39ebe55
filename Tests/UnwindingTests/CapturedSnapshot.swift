// A snapshot a real program took of itself (Tests/Fixtures/unwinding/snapshot.c): registers
// from getcontext in inner(), the stack above them, and its /proc/self/maps; with the modules
// of those maps opened, the same inputs the watcher's unwinder gets from a capture.

import BoundedBytes
import Foundation
import ObjectFile
import Symbolication
import TestSupport
import Unwinding

struct CapturedSnapshot {
    var executable: String
    var registers: [UInt64]
    var stack: MemoryRegion
    /// File-backed modules: path, load base (the mapping of file offset 0) and extent.
    var modules: [(path: String, base: UInt64, size: UInt64)]

    /// Compiles the fixture -O2 -g (with `linkFlags`), runs it (with `mode`), and reads what
    /// it wrote.
    static func take(label: String, linkFlags: [String] = [], mode: [String] = []) throws -> CapturedSnapshot {
        let directory = TestSupport.temporaryDirectory(label)
        let executable = try TestSupport.compile(
            [TestSupport.fixture("unwinding/snapshot.c")], output: directory + "/snapshot", linkFlags: linkFlags)
        let regsPath = directory + "/regs", mapsPath = directory + "/maps"
        let result = try TestSupport.run([executable, regsPath, mapsPath] + mode)
        guard result.status == .exited(0) else { throw TestFailure("snapshot fixture: \(result.status) \(result.stderr)") }
        let data = try Array(Data(contentsOf: URL(fileURLWithPath: regsPath)))
        guard data.count >= 29 * 8 else { throw TestFailure("short snapshot: \(data.count) bytes") }
        func u64(_ index: Int) -> UInt64 {
            (0..<8).reduce(UInt64(0)) { $0 | UInt64(data[index * 8 + $1]) << (8 * UInt64($1)) }
        }
        let registers = (0..<27).map(u64)
        let start = u64(27), length = Int(u64(28))
        guard data.count == 29 * 8 + length else { throw TestFailure("snapshot of \(data.count) bytes, stack \(length)") }
        let stack = MemoryRegion(start: start, bytes: Array(data[(29 * 8)...]))
        let maps = try String(contentsOfFile: mapsPath, encoding: .utf8)
        var modules: [(path: String, base: UInt64, size: UInt64)] = []
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count == 6 else { continue }
            let path = fields[5].trimmingCharacters(in: .whitespaces)
            guard path.hasPrefix("/") else { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard bounds.count == 2, let offset = UInt64(fields[2], radix: 16) else { continue }
            if let index = modules.firstIndex(where: { $0.path == path }) {
                modules[index].size = max(modules[index].size, bounds[1] - modules[index].base)
            } else if offset == 0 {
                modules.append((path, bounds[0], bounds[1] - bounds[0]))
            }
        }
        return CapturedSnapshot(executable: executable, registers: registers, stack: stack, modules: modules)
    }

    /// The modules with their object files opened (`path`'s replaced by `object`).
    func loadedModules(replacing path: String? = nil, with object: ELFFile? = nil) -> [LoadedModule] {
        modules.map { module in
            let file = module.path == path ? object : try? ELFFile(path: module.path)
            return LoadedModule(path: module.path, base: module.base, size: module.size, buildID: file?.buildID, object: file)
        }
    }

    /// The outermost function name at each frame's pc.
    func functionNames(of stack: UnwoundStack) -> [String] {
        let symbolizer = Symbolizer(modules: loadedModules())
        return stack.frames.enumerated().map { index, frame in
            symbolizer.symbolicate(pc: frame.pc, isReturnAddress: index > 0).last?.function ?? "?"
        }
    }
}
