// ProcessMemory: another process's memory as a MemoryReader, read with process_vm_readv,
// falling back to pread on /proc/PID/mem (which also works on pages process_vm_readv refuses,
// such as PROT_NONE guard regions it cannot fault in). Both need ptrace-attach permission.
// A reader opened for another user (ProcessAccess.openMemory) reads only through the
// descriptor opened with that user's credentials: process_vm_readv would check root's.

import BoundedBytes
import CShims
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

/// Not shared between threads: it opens /proc/PID/mem on first need and keeps it (one reader per
/// capture, used by the capturing thread).
public final class ProcessMemory: MemoryReader {
    public let pid: ProcessID
    private var memFD: Int32 = -1
    /// Whether `memFD` was opened by ProcessAccess for a user: the only way in, unless `frozen`.
    private let bound: Bool
    /// Set by capture once every thread of the process is stopped under ptrace and the kernel
    /// has let the user open its memory: nothing in it can run, so its credentials and memory
    /// are the ones the kernel judged, and process_vm_readv (faster than /proc/PID/mem, but
    /// checked against the watcher's own credentials) reads exactly what the descriptor would.
    var frozen = false

    public init(pid: ProcessID) {
        self.pid = pid
        bound = false
    }

    /// Reads through `fd`, /proc/PID/mem opened with the credentials that apply; owns it.
    init(pid: ProcessID, boundDescriptor fd: Int32) {
        self.pid = pid
        memFD = fd
        bound = true
    }

    deinit {
        if memFD >= 0 { close(memFD) }
    }

    public func readUpTo(from address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard buffer.count > 0, let base = buffer.baseAddress else { return 0 }
        if !bound || frozen {
            let count = cp_read_process_memory(pid.rawValue, address, base, UInt(buffer.count))
            if count > 0 { return count }
        }
        if memFD < 0 && !bound { memFD = open("/proc/\(pid)/mem", O_RDONLY | O_CLOEXEC) }
        guard memFD >= 0, address <= UInt64(Int64.max) else { return 0 }
        let read = pread(memFD, base, buffer.count, off_t(address))
        return max(read, 0)
    }
}
