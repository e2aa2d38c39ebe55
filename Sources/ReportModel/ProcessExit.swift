// ProcessExit: how a process ended, as waitpid(2) reports it to a parent (and the kernel to a
// pidfd's holder since Linux 6.15): an exit code, or the signal that killed it.

/// A process's end in waitpid's terms.
public enum ProcessExit: Equatable, Sendable, CustomStringConvertible {
    /// exit() or _exit() with this code (the low byte of what the program passed).
    case exited(Int32)
    /// Killed by this signal (a core dump or not).
    case signaled(Int32)

    /// A wait status as waitpid(2) fills it (WIFEXITED / WIFSIGNALED); nil for a stopped or
    /// continued status, which is not an end.
    public init?(waitStatus status: Int32) {
        let signal = status & 0x7F
        if signal == 0 {
            self = .exited((status >> 8) & 0xFF)
        } else if signal != 0x7F && status & 0xFFFF != 0xFFFF {
            self = .signaled(signal)
        } else {
            return nil
        }
    }

    /// Whether a wait status of a death by a signal says the kernel dumped a core (WCOREDUMP).
    public static func coreDumped(waitStatus status: Int32) -> Bool {
        ProcessExit(waitStatus: status)?.signal != nil && status & 0x80 != 0
    }

    /// The signal that ended the process, nil when it exited.
    public var signal: Int32? {
        if case .signaled(let signal) = self { return signal }
        return nil
    }

    /// The exit code, nil when a signal ended it.
    public var exitCode: Int32? {
        if case .exited(let code) = self { return code }
        return nil
    }

    public var description: String {
        switch self {
        case .exited(let code): return "exit code \(code)"
        case .signaled(let signal): return "signal \(signal)"
        }
    }
}
