// HostGuard: the host level's guard process (CShims' hostguard.c), what keeps a dying process
// from being held past its deadline whatever state the sidecar is in. The kernel holds a dying
// process for as long as its connection to the coredump socket stays open; a sidecar that is
// stopped (SIGSTOP, a debugger), deadlocked or busy cannot close it. So the guard, a process of
// its own forked at start, is the one that accepts each connection: it hands it to the sidecar
// (one message on a SOCK_SEQPACKET pair, with the connection), keeps its own copy, and shuts the
// connection down (shutdown(2): the sidecar's copy ends too) when the sidecar has not said it
// took it within `takenNanoseconds`, or not said it is done within the hold deadline. It ends
// with the sidecar (its pidfd) or when the sidecar closes the pair, closing the listener with it:
// after a SIGKILL of the sidecar, crashes end at once (the socket refuses them).
//
// What covers which state, and for how long a process may be held:
//   the sidecar serving       its own deadline (HostLevelLimits.holdNanoseconds less a second)
//   stopped, or its serving   the guard, `takenNanoseconds` (5 s) after the arrival: nothing
//   thread stuck              took it
//   a dump thread stuck       the guard, at the hold deadline (30 s after the arrival)
//   dead (SIGKILL, a crash)   the kernel: the guard exits with it, the connections close at once
//   the guard itself killed   the sidecar starts another at its next look (within a second), and
//                             meanwhile accepts by itself (only its own deadline then)

import BoundedBytes
import CShims
import Processes
import ReportModel
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The guard process and the sidecar's end of its channel. Owned by the serving thread; `done`
/// may be called from any thread (one send on a socket).
final class HostGuard: Sendable {
    let pid: pid_t
    let channel: Int32
    /// The channel while it is open: dump threads tell the guard through it, and a closed
    /// channel's number may be another file's by then.
    private let open = Mutex(true)

    /// How long the guard waits for the sidecar to take a connection: a serving loop wakes for
    /// it within milliseconds, so 5 s means it does not run.
    static let takenNanoseconds: UInt64 = 5_000_000_000

    private init(pid: pid_t, channel: Int32) {
        self.pid = pid
        self.channel = channel
    }

    /// cp_host_guard_start: forks the guard over `listener` (which it accepts from from now on).
    static func start(listener: Int32) throws(SystemCallError) -> HostGuard {
        var channel: Int32 = -1
        let pid = cp_host_guard_start(listener, takenNanoseconds, HostLevelLimits.holdNanoseconds, &channel)
        guard pid > 0 else { throw SystemCallError("fork (the host level's guard)", errno: errno) }
        return HostGuard(pid: pid, channel: channel)
    }

    enum Message: Equatable {
        /// A connection the kernel made, accepted by the guard at `arrived` (CLOCK_MONOTONIC).
        case arrival(id: UInt64, arrived: UInt64, connection: Int32)
        /// The guard let a connection go: not taken in time, or past the hold deadline.
        case released(id: UInt64, arrived: UInt64, notTaken: Bool)
        /// Nothing waiting.
        case none
        /// The guard has gone (exited, or killed).
        case gone
    }

    /// cp_host_guard_receive: the next message, without blocking.
    func next() -> Message {
        while true {
            var message = cp_host_guard_message()
            var fd: Int32 = -1
            let result = cp_host_guard_receive(channel, &message, &fd)
            if result == 0 { return .gone }
            if result < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK { return .none }
                if errno == EBADMSG { continue }
                return .gone
            }
            switch Int(message.type) {
            case CP_HOST_GUARD_ARRIVAL where fd >= 0:
                return .arrival(id: message.id, arrived: message.arrived_ns, connection: fd)
            case CP_HOST_GUARD_RELEASED:
                if fd >= 0 { close(fd) }
                return .released(
                    id: message.id, arrived: message.arrived_ns, notTaken: message.reason == UInt32(CP_HOST_GUARD_NOT_TAKEN))
            default:
                if fd >= 0 { close(fd) }
            }
        }
    }

    /// The sidecar has the connection (sent as soon as it is received, before it waits for a place).
    func taken(_ id: UInt64) { tell(UInt32(CP_HOST_GUARD_TAKEN), id) }

    /// The sidecar is done with the connection (it has shut it down itself): the guard closes its copy.
    func done(_ id: UInt64) { tell(UInt32(CP_HOST_GUARD_DONE), id) }

    private func tell(_ type: UInt32, _ id: UInt64) {
        open.withLock { open in
            if open { _ = cp_host_guard_tell(channel, type, id) }
        }
    }

    /// Closes the sidecar's end of the channel (once).
    func closeChannel() {
        open.withLock { open in
            if open { close(channel) }
            open = false
        }
    }

    /// Whether the guard has exited (reaping it if so).
    func hasExited() -> Bool {
        ChildProcess(ProcessID(pid)).poll().exit != nil
    }

    /// Ends the guard: the pair closed, which it takes as the sidecar stopping (it exits, closing
    /// what it still holds), then reaped, waiting a second at most.
    func stop() {
        closeChannel()
        for _ in 0..<100 {
            if hasExited() { return }
            usleep(10_000)
        }
        let child = ChildProcess(ProcessID(pid))
        child.signal(SIGKILL)
        child.wait()
    }
}
