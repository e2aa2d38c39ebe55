// SignalDescriptor: signals taken as events on a descriptor instead of by handlers (CShims'
// signalfd calls): the launcher's relayed signals and its child's SIGCHLD, the sidecar's
// SIGTERM, SIGHUP and SIGCHLD. The one Watcher file that calls them.

import BoundedBytes
import CShims
#if canImport(Glibc)
import Glibc
#endif

/// A non-blocking signalfd for signals the calling thread blocks. Owns the descriptor until
/// `close()`; read on the thread that blocked them.
struct SignalDescriptor {
    let fd: Int32

    /// cp_block_signals_to_fd: blocks `signals` in the calling thread (the mask it had before in
    /// `previousMask`) and opens a signalfd for them.
    static func blocking(_ signals: [Int32], previousMask: inout sigset_t) throws(SystemCallError) -> SignalDescriptor {
        let fd = signals.withUnsafeBufferPointer {
            cp_block_signals_to_fd($0.baseAddress, Int32($0.count), &previousMask)
        }
        guard fd >= 0 else { throw SystemCallError("signalfd", errno: errno) }
        return SignalDescriptor(fd: fd)
    }

    /// A signal read from the descriptor: its number, si_code, and si_pid (the sender, for a
    /// signal a process sent).
    struct Received {
        var signal: Int32
        var code: Int32
        var sender: Int32
    }

    /// cp_read_signal: the next pending signal, nil when none is.
    func next() -> Received? {
        var code: Int32 = 0, sender: Int32 = 0
        let signal = cp_read_signal(fd, &code, &sender)
        return signal > 0 ? Received(signal: signal, code: code, sender: sender) : nil
    }

    /// Reads every pending signal, for a descriptor whose signals only say "look" (SIGCHLD's,
    /// before waitpid or the tracer reads what happened).
    func discardPending() {
        while next() != nil {}
    }

    func close() { _ = Glibc.close(fd) }
}
