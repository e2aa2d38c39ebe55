// MappedFile: a read-only mmap of a whole file, the byte source every parser here reads from.
//
// Ownership: the mapping lives as long as the object. Reads are bounds-checked and never trap on
// a hostile offset; a file that shrinks under us could still SIGBUS, which is why report files
// and debug files are opened read-only and parsed promptly.

#if canImport(Glibc)
import Glibc
#endif

public enum SymbolicationError: Error, CustomStringConvertible, Equatable {
    case cannotOpen(path: String, errno: Int32)
    case notELF(path: String, reason: String)
    case malformed(path: String, reason: String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let errno): return "cannot open \(path): \(String(cString: strerror(errno)))"
        case .notELF(let path, let reason): return "\(path) is not an ELF file: \(reason)"
        case .malformed(let path, let reason): return "\(path) is malformed: \(reason)"
        }
    }
}

public final class MappedFile: @unchecked Sendable {
    public let path: String
    public let bytes: UnsafeRawBufferPointer

    public init(path: String) throws {
        self.path = path
        owned = false
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SymbolicationError.cannotOpen(path: path, errno: errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw SymbolicationError.cannotOpen(path: path, errno: errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw SymbolicationError.notELF(path: path, reason: "not a regular file")
        }
        let size = Int(info.st_size)
        if size == 0 {
            bytes = UnsafeRawBufferPointer(start: nil, count: 0)
            return
        }
        guard let base = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
            throw SymbolicationError.cannotOpen(path: path, errno: errno)
        }
        bytes = UnsafeRawBufferPointer(start: base, count: size)
    }

    private let owned: Bool

    /// An in-memory image (for example the vDSO copied out of a process), kept by this object.
    public init(bytes source: [UInt8], name: String) {
        path = name
        owned = true
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(source.count, 1), alignment: 16)
        source.withUnsafeBytes { copy.copyMemory(from: $0) }
        bytes = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(copy)[0..<source.count])
    }

    deinit {
        guard let base = bytes.baseAddress else { return }
        if owned {
            UnsafeMutableRawPointer(mutating: base).deallocate()
        } else {
            munmap(UnsafeMutableRawPointer(mutating: base), bytes.count)
        }
    }
}

/// Bounds-checked little-endian reads over a byte buffer. Every accessor returns nil instead of
/// reading out of bounds; offsets are checked for overflow.
public struct ByteView: @unchecked Sendable {
    public let bytes: UnsafeRawBufferPointer

    public init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    public var count: Int { bytes.count }

    @inline(__always)
    public func has(_ offset: UInt64, _ size: UInt64) -> Bool {
        let (end, overflow) = offset.addingReportingOverflow(size)
        return !overflow && end <= UInt64(bytes.count)
    }

    @inline(__always)
    public func load<T: FixedWidthInteger>(_ offset: UInt64, as type: T.Type = T.self) -> T? {
        guard has(offset, UInt64(MemoryLayout<T>.size)) else { return nil }
        return T(littleEndian: bytes.loadUnaligned(fromByteOffset: Int(offset), as: T.self))
    }

    public func u8(_ offset: UInt64) -> UInt8? { load(offset) }
    public func u16(_ offset: UInt64) -> UInt16? { load(offset) }
    public func u32(_ offset: UInt64) -> UInt32? { load(offset) }
    public func u64(_ offset: UInt64) -> UInt64? { load(offset) }

    public func slice(_ offset: UInt64, _ size: UInt64) -> ByteView? {
        guard has(offset, size) else { return nil }
        return ByteView(UnsafeRawBufferPointer(rebasing: bytes[Int(offset)..<Int(offset + size)]))
    }

    /// A NUL-terminated string starting at offset, bounded by the view.
    public func cString(_ offset: UInt64) -> String? {
        guard offset < UInt64(bytes.count) else { return nil }
        let start = Int(offset)
        var end = start
        while end < bytes.count && bytes[end] != 0 { end += 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    public func array(_ offset: UInt64, _ size: UInt64) -> [UInt8]? {
        guard has(offset, size) else { return nil }
        return Array(bytes[Int(offset)..<Int(offset + size)])
    }
}
