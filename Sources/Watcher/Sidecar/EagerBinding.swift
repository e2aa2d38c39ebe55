// EagerBinding: the sidecar runs with its libraries' calls bound at start (LD_BIND_NOW), by
// executing itself again once with it set.
//
// crashport is linked with -z now, but that binds only its own calls: those of the shared
// libraries it loads (libunwind, libelf, zlib, liblzma) into libc and libm were bound lazily, by
// the loader, at their first call: in the middle of a crash, a sidecar's first report ran the
// loader's code and read libc's, libm's and the others' symbol tables, 0.5 MB of a storm's peak
// (measured: a first report's peak 9.5 -> 9.1 MB). Bound at start, those pages are touched
// while the sidecar starts, and given back with the rest of start-up's (ResidentMemory).
//
// The variable is for this process only: the process executed again takes it (and the marker)
// out of its environment first thing, so nothing it starts (a core hand-on, a tool) inherits
// it. The same process goes on: the same pid (systemd's LISTEN_PID holds), the same open
// descriptors, the same arguments. Where the execution fails, the sidecar goes on bound lazily.

#if canImport(Glibc)
import Glibc
#endif

public enum EagerBinding {
    /// Set in the environment of the execution that set LD_BIND_NOW, with whether it did.
    static let marker = "CRASHPORT_BIND_NOW"

    /// Executes this program again with LD_BIND_NOW set, unless it is set or this is that
    /// execution (which then restores the environment). Call it first, before any thread starts.
    public static func ensure(arguments: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        if let mark = getenv(marker) {
            if String(cString: mark) == "set" { unsetenv("LD_BIND_NOW") }
            unsetenv(marker)
            return
        }
        guard getenv("LD_BIND_NOW") == nil else { return }  // bound at start already
        setenv(marker, "set", 1)
        setenv("LD_BIND_NOW", "1", 1)
        execv("/proc/self/exe", arguments)
        // Not executed (no /proc, or the binary is gone): on as it is, lazily bound.
        unsetenv(marker)
        unsetenv("LD_BIND_NOW")
    }
}
