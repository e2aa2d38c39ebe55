// Watchdog: a death that was a watchdog's doing, inferred from who sent the signal.
//
// systemd's WatchdogSec= ends a service that stopped sending WATCHDOG=1 with SIGABRT (its
// WatchdogSignal=), then SIGKILL, sent by kill(2) from the service manager, which is pid 1 of
// the service's pid namespace. No one else is pid 1 there: a SIGABRT or SIGKILL sent (si_code
// SI_USER, SI_QUEUE or SI_TKILL) by pid 1, as the process itself saw it (the stub records
// si_pid in the crashed process's own namespace), is taken for a watchdog kill. It is an
// inference, and the report says so: an init that forwards signals, or an administrator's kill
// from inside a container's pid 1, look the same.

import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public enum Watchdog {
    /// The event's `cause` for a watchdog kill.
    public static let cause = "watchdog"

    /// Whether a signal with this si_code, sent by `sender` (in the receiver's pid namespace),
    /// is how a watchdog (systemd's WatchdogSec=) ends a process.
    public static func inferred(signal: Int32, code: Int32, sender: ProcessID?) -> Bool {
        // SI_USER (kill), SI_QUEUE (sigqueue), SI_TKILL (tgkill): sent by a process, not the kernel.
        let sent: Set<Int32> = [0, -1, -6]
        return (signal == SIGABRT || signal == SIGKILL) && sent.contains(code) && sender == ProcessID(1)
    }

    /// Whether an event's signal is one a watchdog sent, by its sender (the `watchdog` cause is
    /// also crashport's own --hang-kill, which the launcher marks itself).
    public static func isInferred(_ event: Event) -> Bool {
        if (event.notes ?? []).contains(relayedNote) { return true }
        guard let signal = event.signal, let number = signal.number, let code = signal.code else { return false }
        return inferred(signal: number, code: code, sender: signal.senderPID)
    }

    /// The note of a SIGABRT that `crashport run` received from pid 1 and passed on to its
    /// program (the program saw crashport as the sender).
    public static let relayedNote =
        "watchdog (inferred): crashport run received this SIGABRT from pid 1 and passed it on to the program; pid 1 is how systemd's WatchdogSec= ends a service (here, crashport run was the service's main process); an init that relays signals, or a kill from pid 1 for another reason, looks the same"

    /// The note that says why: the event's cause is an inference.
    public static let note =
        "watchdog (inferred): the signal was sent by pid 1 of the process's pid namespace, which is how systemd's WatchdogSec= ends a service that stopped sending WATCHDOG=1; an init that relays signals, or a kill from pid 1 for another reason, looks the same"

    /// Marks a crash or termination event whose signal a watchdog sent: `cause` and the note.
    /// The title is Culprit's (call this before Culprit.mark).
    public static func mark(_ event: inout Event) {
        guard isInferred(event) else { return }
        event.cause = cause
        if !(event.notes ?? []).contains(note) { event.notes = (event.notes ?? []) + [note] }
    }
}
