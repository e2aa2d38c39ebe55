// Symbolizer: from an address in a process's address space to module, function and offset.
//
// Works on module images (path, base, ELF file), never on a live process, so the same code
// serves the watcher right after capture and `crashport symbolicate` offline.

public struct SymbolicatedFrame: Sendable, Equatable {
    public var module: String?
    public var moduleOffset: UInt64?
    public var function: String?
    public var mangled: String?
    public var functionOffset: UInt64?
    public var file: String?
    public var line: Int?
    public var column: Int?
    public var inlined = false

    public init() {}
}

public final class Symbolizer: @unchecked Sendable {
    public struct Image: @unchecked Sendable {
        public var path: String
        public var base: UInt64
        public var size: UInt64
        public var elf: ELFFile?

        public init(path: String, base: UInt64, size: UInt64, elf: ELFFile?) {
            self.path = path
            self.base = base
            self.size = size
            self.elf = elf
        }

        public var name: String { path.split(separator: "/").last.map(String.init) ?? path }
    }

    let images: [Image]

    public init(images: [Image]) {
        self.images = images.sorted { $0.base < $1.base }
    }

    public func image(containing address: UInt64) -> Image? {
        var low = 0, high = images.count
        while low < high {
            let middle = (low + high) / 2
            if images[middle].base <= address { low = middle + 1 } else { high = middle }
        }
        guard low > 0 else { return nil }
        let image = images[low - 1]
        return address - image.base < image.size ? image : nil
    }

    /// The frames at `pc`: the innermost inlined function first, when debug information
    /// knows of inlining, then the function that contains the address. For a return address
    /// (every frame but the first), lookups use pc − 1, the call instruction itself.
    public func symbolicate(pc: UInt64, isReturnAddress: Bool) -> [SymbolicatedFrame] {
        var frame = SymbolicatedFrame()
        guard let image = image(containing: pc) else { return [frame] }
        frame.module = image.name
        frame.moduleOffset = pc - image.base
        guard let elf = image.elf else { return [frame] }
        let lookup = (pc &- (isReturnAddress ? 1 : 0)) &- image.base &+ elf.imageVirtualBase
        if let match = elf.symbols.lookup(lookup) {
            let demangled = Demangler.demangle(match.name)
            frame.function = demangled ?? match.name
            frame.mangled = demangled == nil ? nil : match.name
            frame.functionOffset = (pc &- image.base &+ elf.imageVirtualBase) &- match.address
        }
        return [frame]
    }
}
