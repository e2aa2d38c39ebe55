// WatcherIdentity: a root watcher's report thread, which reads for a client with the client's
// credentials (Processes' Credentials.perform), steps back into its own identity for one call
// that must be root's: a file of root's own cache (SectionCache), the kernel's log (SystemLog's
// open of /dev/kmsg). Here, the lowest layer that calls C (CShims' cp_thread_step_out and
// cp_thread_step_in), so that both use the one rule.

import CShims

public enum WatcherIdentity {
    /// Runs `body` with the thread's own credentials when it reads as a client (a root
    /// sidecar's report thread), else as it is. A thread that cannot step out, runs nothing
    /// (nil); one that cannot step back in stops the process: it must never read on for the
    /// client as root. `body` does one thing that needs root and reads nothing for the client.
    public static func run<T>(_ body: () -> T?) -> T? {
        let stepped = cp_thread_step_out()
        if stepped == -2 { fatalError("crashport: a report thread holds neither its client's credentials nor its own") }
        guard stepped >= 0 else { return nil }
        let result = body()
        if stepped == 1, cp_thread_step_in() != 0 {
            fatalError("crashport: a report thread could not take its client's credentials back on")
        }
        return result
    }
}
