// LoadedModule: the one model of a module mapped into a process (an ELF image or the vDSO),
// from capture to report. Capture fills it from /proc/PID/maps and the mapped image; the
// minidump writer and reader carry it; the unwinder and the symbolizer search it; the event lists
// it. `object` is the module's ELF file when one was found (here, or offline by build-id).

/// A GNU build-id (the NT_GNU_BUILD_ID note's bytes): how a module is matched to its binary and
/// debug files on any machine. Never empty.
public struct BuildID: Sendable, Hashable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// nil for no bytes: a module without a build-id has none, not an empty one.
    public init?(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return nil }
        self.bytes = bytes
    }

    /// From lowercase or uppercase hex digits, as reports write it; nil when not hex.
    public init?(hex: String) {
        var bytes: [UInt8] = []
        var digits = hex.utf8.makeIterator()
        while let high = digits.next() {
            guard let low = digits.next(), let h = Self.nibble(high), let l = Self.nibble(low) else { return nil }
            bytes.append(h << 4 | l)
        }
        self.init(bytes)
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Lowercase hex, as `file`, `readelf -n` and debuginfod write it.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    public var description: String { hex }
}

public struct LoadedModule: Sendable {
    /// Full path as mapped; "[vdso]" for the vDSO.
    public var path: String
    /// Start of the mapping at file offset 0 (the ELF header), not of the executable mapping.
    public var base: UInt64
    /// End of the last contiguous mapping of the same file, minus `base`.
    public var size: UInt64
    public var buildID: BuildID?
    /// The module's ELF file, when one was found that is the code that ran.
    public var object: ELFFile?
    /// Why no object file, or why not this one, when that is worth a note in the report.
    public var problem: String?
    /// The package metadata note as read from the mapped image (capture reads it with the
    /// build-id): the package of a module whose file was not found or is not the code that
    /// ran. `object`'s own note is the one to use when there is an object.
    public var imagePackageNote: Result<PackageMetadata, PackageNote.Refusal>?

    public init(
        path: String, base: UInt64, size: UInt64, buildID: BuildID?, object: ELFFile? = nil, problem: String? = nil
    ) {
        self.path = path
        self.base = base
        self.size = size
        self.buildID = buildID
        self.object = object
        self.problem = problem
    }

    /// One past the last address (saturating).
    public var end: UInt64 {
        let (sum, overflow) = base.addingReportingOverflow(size)
        return overflow ? UInt64.max : sum
    }

    public func contains(_ address: UInt64) -> Bool { address >= base && address < end }

    /// The last path component: how reports name a module.
    public var name: String { path.split(separator: "/").last.map(String.init) ?? path }

    /// Runtime address − ELF virtual address, for the object file's addresses.
    public var loadBias: UInt64 { base &- (object?.imageVirtualBase ?? 0) }
}

extension LoadedModule: Equatable {
    /// Same module: same place, same identity, and the same object file (or none).
    public static func == (a: LoadedModule, b: LoadedModule) -> Bool {
        a.path == b.path && a.base == b.base && a.size == b.size && a.buildID == b.buildID && a.object === b.object
            && a.problem == b.problem
    }
}
