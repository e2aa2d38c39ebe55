// ProcessMemory: reads another process's memory with process_vm_readv, falling back to
// pread on /proc/PID/mem (which also works on pages process_vm_readv refuses, such as
// PROT_NONE guard regions it cannot fault in). Both need ptrace-attach permission.

import CShims
#if canImport(Glibc)
import Glibc
#endif

/// Not shared between threads: it opens /proc/PID/mem on first need and keeps it (one reader per
/// capture, used by the capturing thread).
public final class ProcessMemory {
    public let pid: Int32
    private var memFD: Int32 = -1

    public init(pid: Int32) {
        self.pid = pid
    }

    deinit {
        if memFD >= 0 { close(memFD) }
    }

    /// Copies up to buffer.count bytes from `address`; returns how many were copied (a short
    /// count means the range ran into unmapped memory).
    public func readPartial(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard buffer.count > 0, let base = buffer.baseAddress else { return 0 }
        let count = cp_read_process_memory(pid, address, base, UInt(buffer.count))
        if count > 0 { return count }
        if memFD < 0 { memFD = open("/proc/\(pid)/mem", O_RDONLY | O_CLOEXEC) }
        guard memFD >= 0, address <= UInt64(Int64.max) else { return 0 }
        let read = pread(memFD, base, buffer.count, off_t(address))
        return max(read, 0)
    }

    public func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        readPartial(address, into: buffer) == buffer.count
    }

    public func bytes(at address: UInt64, count: Int) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        let copied = result.withUnsafeMutableBytes { readPartial(address, into: $0) }
        result.removeLast(count - copied)
        return result
    }
}
