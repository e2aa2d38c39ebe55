// SignalNames: what a signal and its si_code mean, in words a person reads in a crash summary.

#if canImport(Glibc)
import Glibc
#endif

public enum SignalNames {
    static let names: [Int32: String] = [
        1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
        9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
        16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU",
        23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO",
        30: "SIGPWR", 31: "SIGSYS",
    ]

    public static func name(_ signal: Int32) -> String {
        if let name = names[signal] { return name }
        if signal >= 34 && signal <= 64 { return "SIGRTMIN+\(signal - 34)" }
        return "SIG\(signal)"
    }

    public static func number(_ name: String) -> Int32? {
        let upper = name.uppercased()
        let full = upper.hasPrefix("SIG") ? upper : "SIG" + upper
        if let entry = names.first(where: { $0.value == full }) { return entry.key }
        return Int32(name)
    }

    static let meanings: [Int32: String] = [
        4: "illegal instruction", 5: "trace/breakpoint trap", 6: "aborted", 7: "bus error", 8: "arithmetic exception",
        11: "segmentation fault", 31: "bad system call", 9: "killed", 15: "terminated", 3: "quit", 24: "CPU time limit exceeded",
        25: "file size limit exceeded",
    ]

    public static func meaning(_ signal: Int32) -> String { meanings[signal] ?? name(signal) }

    /// The symbolic si_code, per signal for positive (kernel) codes.
    public static func codeName(signal: Int32, code: Int32) -> String? {
        switch code {
        case 0: return "SI_USER"
        case Int32(SI_KERNEL): return "SI_KERNEL"
        case -1: return "SI_QUEUE"
        case -2: return "SI_TIMER"
        case -3: return "SI_MESGQ"
        case -4: return "SI_ASYNCIO"
        case -5: return "SI_SIGIO"
        case -6: return "SI_TKILL"
        default: break
        }
        let table: [String]
        switch signal {
        case 11:
            table = [
                "SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR", "SEGV_ACCADI", "SEGV_ADIDERR", "SEGV_ADIPERR",
                "SEGV_MTEAERR", "SEGV_MTESERR",
            ]
        case 7: table = ["BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"]
        case 4:
            table = [
                "ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC", "ILL_BADSTK",
                "ILL_BADIADDR",
            ]
        case 8:
            table = [
                "FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV", "FPE_FLTSUB",
                "FPE_FLTUNK", "FPE_CONDTRAP",
            ]
        case 5: table = ["TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT", "TRAP_UNK", "TRAP_PERF"]
        case 31: table = ["SYS_SECCOMP", "SYS_USER_DISPATCH"]
        default: return nil
        }
        guard code >= 1 && Int(code) <= table.count else { return nil }
        return table[Int(code) - 1]
    }

    static let codeMeanings: [String: String] = [
        "SEGV_MAPERR": "address not mapped", "SEGV_ACCERR": "invalid permissions for mapped object",
        "BUS_ADRALN": "invalid address alignment",
        "BUS_ADRERR": "nonexistent physical address (beyond the end of a mapped file?)",
        "BUS_OBJERR": "object-specific hardware error", "ILL_ILLOPC": "illegal opcode", "ILL_ILLOPN": "illegal operand",
        "FPE_INTDIV": "integer divide by zero", "FPE_INTOVF": "integer overflow", "FPE_FLTDIV": "floating-point divide by zero",
        "TRAP_BRKPT": "breakpoint", "SI_USER": "sent by kill()", "SI_TKILL": "sent by tkill()/raise()",
        "SI_KERNEL": "sent by the kernel", "SI_QUEUE": "sent by sigqueue()", "SYS_SECCOMP": "system call blocked by seccomp",
    ]

    /// A sentence such as "segmentation fault: address not mapped (SEGV_MAPERR)".
    public static func describe(signal: Int32, code: Int32) -> String {
        var text = meaning(signal)
        if let codeName = codeName(signal: signal, code: code) {
            if let extra = codeMeanings[codeName] { text += ": \(extra)" }
            text += " (\(codeName))"
        }
        return text
    }

    /// Whether si_addr is a data address worth showing (faults), rather than a PC or nothing.
    public static func hasFaultAddress(signal: Int32, code: Int32) -> Bool {
        code > 0 && code != Int32(SI_KERNEL) && [4, 5, 7, 8, 11].contains(signal)
    }
}
