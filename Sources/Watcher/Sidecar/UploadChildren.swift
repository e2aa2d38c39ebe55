// The uploads a sidecar starts: `crashport upload` for a reports directory, after a report is
// written or a program's consent lets reports go.
//
// An upload runs as its reports' owner (UploadSpawner), who can make it last: a slow
// destination of their own configuration, a report's files edited, the process stopped. So one
// runs at a time per owner (a storm of crashes starts one pass, which takes the reports written
// while it runs), at most `maximumRunning` at once in all, each for at most its `deadline` (then
// its process group is killed: an upload killed mid-queue loses nothing, and the next pass sends
// what it left). A pass that cannot start now is owed, one per owner, and started as soon as
// its owner has none running and a place is free: another user's upload waits for one that
// lasts at most until a place frees, never for good. Spawning (a fork, the owner's passwd entry)
// happens outside the lock.
//
// A report thread only asks (`request`): it writes a report as the client (its filesystem ids,
// no capabilities), and a child forked there could not take the owner's ids. The sidecar's own
// thread starts what was asked (`reap`), as root, at its next wake (within a second).

import BoundedBytes
import Processes
import ReportModel
import Store
import Synchronization
import Upload

#if canImport(Glibc)
import Glibc
#endif

extension Sidecar {
    final class Children: Sendable {
        /// A pass of one reports directory, as its owner.
        struct Pass: Sendable {
            var root: String
            var owner: ReportStore.Owner?
            var uid: UInt32 { owner?.uid ?? getuid() }
        }

        private struct State {
            /// Each running upload's owner and start (CLOCK_MONOTONIC ns).
            var running: [pid_t: (owner: UInt32, started: UInt64)] = [:]
            /// The pass owed to each owner whose last could not start.
            var owed: [UInt32: Pass] = [:]
        }

        private let state = Mutex(State())
        /// Starts `crashport upload` for a reports directory as its owner; its pid, or nil.
        private let spawn: @Sendable (_ root: String, _ owner: ReportStore.Owner?, _ log: (String) -> Void) -> pid_t?

        /// The most uploads running at once, whoever they are for.
        static let maximumRunning = 4
        /// The longest an upload runs before it is killed, in nanoseconds (by default ten
        /// minutes: a pass of a full reports directory to a slow destination, each request
        /// bounded by its own timeout).
        let deadline: UInt64

        init(
            deadline: UInt64 = 600_000_000_000,
            spawn: @escaping @Sendable (String, ReportStore.Owner?, (String) -> Void) -> pid_t? = {
                UploadSpawner.spawn(reports: $0, owner: $1, log: $2)
            }
        ) {
            self.deadline = deadline
            self.spawn = spawn
        }

        /// Whether an upload for `owner` may start now, given the owners of those running.
        static func mayStart(for owner: UInt32, runningFor owners: some Collection<UInt32>) -> Bool {
            owners.count < maximumRunning && !owners.contains(owner)
        }

        /// Asks for an upload of `store`'s reports: owed until `reap` starts it. Any thread.
        func request(_ store: ReportStore) {
            let pass = Pass(root: store.root, owner: store.owner)
            state.withLock { $0.owed[pass.uid] = pass }
        }

        /// Reaps the uploads that ended (by pid: a waitpid(-1) could take a traced thread's
        /// status from its tracer), kills those past `deadline` (reaped on a later call), then
        /// starts the passes owed that may start, outside the lock. Only on the sidecar's own
        /// thread (as root): it alone starts uploads, so no place is taken between the choice
        /// and the spawn.
        func reap(now: UInt64, log: (String, UInt32) -> Void) {
            let due = state.withLock { state -> [Pass] in
                for (child, running) in state.running {
                    let upload = ChildProcess(ProcessID(child))
                    let result = upload.poll()
                    if result.exit != nil || result == .notAChild {
                        state.running[child] = nil
                    } else if now > running.started, now - running.started > deadline {
                        // Its session's group (setsid: the pid), else the process alone.
                        if !upload.signal(SIGKILL, group: true) { upload.signal(SIGKILL) }
                        log("upload (pid \(child)) ran past its \(deadline / 1_000_000_000) s: killed", running.owner)
                        state.running[child] = (running.owner, now)  // reaped once it has died
                    }
                }
                var owners = state.running.values.map(\.owner)
                var due: [Pass] = []
                for (owner, pass) in state.owed.sorted(by: { $0.key < $1.key })
                where Self.mayStart(for: owner, runningFor: owners) {
                    owners.append(owner)
                    due.append(pass)
                }
                for pass in due { state.owed[pass.uid] = nil }
                return due
            }
            for pass in due {
                guard let child = spawn(pass.root, pass.owner, { log($0, pass.uid) }) else { continue }
                state.withLock { $0.running[child] = (pass.uid, monotonicNanoseconds()) }
            }
        }

        /// The uploads running now and their owners.
        var running: [pid_t: UInt32] { state.withLock { $0.running.mapValues(\.owner) } }
    }
}
