// Installs crashport before anything can crash, then crashes in a named function.
import CCrashport

// All defaults (the socket from CRASHPORT_SOCKET). On failure it returns -errno and has said
// why on stderr; the program carries on without crash reports.
_ = crashport_install(nil)

struct Inventory {
    var counts: [String: Int] = [:]

    // A force-unwrapped missing key: Swift traps (ud2 on x86-64: SIGILL; brk on arm64: SIGTRAP),
    // and crashport reports the thread with reserve(_:) on top.
    @inline(never)
    func reserve(_ item: String) -> Int {
        counts[item]! - 1
    }
}

print(Inventory().reserve("widget"))
