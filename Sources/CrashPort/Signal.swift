#if canImport(Glibc)
import Glibc
#endif

extension CrashPort {
    /// A signal crashport reports (`Options.signals`): one of the stub's default set, or any
    /// other signal by its number. SIGKILL and SIGSTOP cannot be handled; `start` refuses them.
    public struct Signal: Hashable, Sendable, CustomStringConvertible {
        /// The signal's number (`SIGSEGV` is 11).
        public var rawValue: Int32

        public init(_ rawValue: Int32) { self.rawValue = rawValue }

        /// SIGSEGV: an access to memory the process may not touch.
        public static let segmentationFault = Signal(SIGSEGV)
        /// SIGBUS: a bad memory access (a truncated mapped file, a misaligned access).
        public static let busError = Signal(SIGBUS)
        /// SIGILL: an illegal instruction (Swift's traps: a failed precondition, an overflow).
        public static let illegalInstruction = Signal(SIGILL)
        /// SIGFPE: an arithmetic fault (an integer division by zero).
        public static let arithmeticFault = Signal(SIGFPE)
        /// SIGABRT: abort() (a C or C++ assertion, an uncaught C++ exception).
        public static let abort = Signal(SIGABRT)
        /// SIGTRAP: a breakpoint trap.
        public static let trap = Signal(SIGTRAP)
        /// SIGSYS: a system call a seccomp filter refused.
        public static let badSystemCall = Signal(SIGSYS)

        /// The set crashport reports unless told otherwise (`CRASHPORT_SIGNALS`, the options).
        public static let defaults: Set<Signal> = [
            .segmentationFault, .busError, .illegalInstruction, .arithmeticFault, .abort, .trap, .badSystemCall,
        ]

        public var description: String { "signal \(rawValue)" }
    }
}
