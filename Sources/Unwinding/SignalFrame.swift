// SignalFrame: the x86_64 Linux kernel's signal frame, as the unwinder crosses it and capture
// follows it to the stack it interrupted.
//
// To run a handler the kernel pushes `struct rt_sigframe { char *pretcode; struct ucontext uc;
// siginfo_t info; }` (arch/x86/include/asm/sigframe.h) on the stack the handler runs on (the
// thread's own or its sigaltstack) and enters the handler as if `pretcode` had called it:
// `pretcode` is the sa_restorer, a trampoline that calls rt_sigreturn. So when unwinding the
// handler reaches a return address whose code is that trampoline, sp points at `uc`, and `uc`
// holds the registers of the code the signal interrupted, on whatever stack they point to.
// The trampoline is known by its code, not its name: glibc's __restore_rt is
// `mov $15,%rax; syscall`; other restorers (musl's, hand-written ones) use `mov $15,%eax`.
// The layout below was checked against a real handler (the ucontext 8 bytes above the return
// address slot, siginfo 304 bytes after it, the saved registers as ucontext_t's gregs).

import BoundedBytes
import CShims

/// What the kernel told a handler about the signal it delivered: `si_signo`, `si_code` and
/// `si_addr` of the `siginfo_t` in a signal frame.
public struct SignalInfo: Sendable, Equatable {
    public var signal: Int32
    public var code: Int32
    /// `si_addr`: the faulting address for SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGTRAP; for a signal
    /// sent by a process (code <= 0) the same bytes hold its pid and uid.
    public var address: UInt64

    public init(signal: Int32, code: Int32, address: UInt64) {
        self.signal = signal
        self.code = code
        self.address = address
    }
}

public enum SignalFrame {
    /// The rt_sigreturn trampolines, by their code bytes (15 is __NR_rt_sigreturn on x86_64).
    static let trampolines: [[UInt8]] = [
        [0x48, 0xC7, 0xC0, 0x0F, 0x00, 0x00, 0x00, 0x0F, 0x05],  // mov $15,%rax; syscall (glibc)
        [0xB8, 0x0F, 0x00, 0x00, 0x00, 0x0F, 0x05],  // mov $15,%eax; syscall
    ]
    /// How many code bytes `isTrampoline` needs at most.
    public static let trampolineLength = 9

    /// Whether `code`, the bytes at an address, begin with an rt_sigreturn trampoline.
    public static func isTrampoline(_ code: some Collection<UInt8>) -> Bool {
        trampolines.contains { code.starts(with: $0) }
    }

    /// Reads the trampoline's bytes at `address` (a shorter read is enough for the shorter
    /// encoding).
    public static func isTrampoline(at address: UInt64, in memory: some MemoryReader) -> Bool {
        var code = [UInt8](repeating: 0, count: trampolineLength)
        let count = code.withUnsafeMutableBytes { memory.readUpTo(from: address, into: $0) }
        return isTrampoline(code.prefix(count))
    }

    // Offsets from the ucontext: uc_flags (8), uc_link (8), uc_stack (24), then the sigcontext
    // whose first 18 words are r8 r9 r10 r11 r12 r13 r14 r15 rdi rsi rbp rbx rdx rax rcx rsp
    // rip eflags (256 bytes in all), uc_sigmask (8); the siginfo_t follows the ucontext.
    static let gregsOffset: UInt64 = 40
    static let gregsOrder = [
        CP_USER_REG_R8, CP_USER_REG_R9, CP_USER_REG_R10, CP_USER_REG_R11, CP_USER_REG_R12, CP_USER_REG_R13,
        CP_USER_REG_R14, CP_USER_REG_R15, CP_USER_REG_RDI, CP_USER_REG_RSI, CP_USER_REG_RBP, CP_USER_REG_RBX,
        CP_USER_REG_RDX, CP_USER_REG_RAX, CP_USER_REG_RCX, CP_USER_REG_RSP, CP_USER_REG_RIP, CP_USER_REG_EFLAGS,
    ].map { Int($0) }
    /// Where the interrupted stack pointer is saved, from the ucontext.
    public static let savedSPOffset: UInt64 = gregsOffset + 15 * 8
    static let siginfoOffset: UInt64 = 304
    /// The ucontext, rounded up: what capture keeps of a signal frame's ucontext and siginfo.
    public static let size: UInt64 = siginfoOffset + 128

    /// The interrupted thread's registers, in `struct user_regs_struct` order, from the ucontext
    /// at `ucontext`; the registers a sigcontext does not hold (segments, fs/gs base) are kept
    /// from `base`. Nil when the ucontext cannot be read.
    static func registers(ucontext: UInt64, base: [UInt64], memory: some MemoryReader) -> [UInt64]? {
        guard let start = ucontext.checkedAdding(gregsOffset) else { return nil }
        var gregs = [UInt64](repeating: 0, count: gregsOrder.count)
        let wanted = gregs.count * 8
        guard gregs.withUnsafeMutableBytes({ memory.readUpTo(from: start, into: $0) }) == wanted else { return nil }
        var registers = base
        for (position, index) in gregsOrder.enumerated() { registers[index] = UInt64(littleEndian: gregs[position]) }
        return registers
    }

    /// si_signo, si_code and si_addr of the siginfo_t after the ucontext at `ucontext`; nil when
    /// unreadable or not a signal number.
    static func signalInfo(ucontext: UInt64, memory: some MemoryReader) -> SignalInfo? {
        guard let start = ucontext.checkedAdding(siginfoOffset) else { return nil }
        // si_signo (int), si_errno (int), si_code (int), padding, then the union: si_addr.
        var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let count = withUnsafeMutableBytes(of: &words) { memory.readUpTo(from: start, into: $0) }
        guard count == 24 else { return nil }
        let signal = Int32(truncatingIfNeeded: UInt64(littleEndian: words.0))
        let code = Int32(truncatingIfNeeded: UInt64(littleEndian: words.1))
        guard (1...64).contains(signal) else { return nil }
        return SignalInfo(signal: signal, code: code, address: UInt64(littleEndian: words.2))
    }
}
