// The uploads a sidecar starts: `crashport upload` for a reports directory, after a report is
// written or a program's consent lets reports go.
//
// An upload runs as its reports' owner (UploadSpawner), who can make it last: a slow
// destination of their own configuration, a report's files edited, the process stopped. So an
// upload holds back only its own user's next one, and not for long: one runs at a time per
// owner (a storm of crashes starts one pass, which takes the reports written while it runs; one
// asked for meanwhile is owed, started when it ends), at most `maximumRunning` at once in all,
// each for at most its `deadline` (then killed: an upload killed mid-queue loses nothing, and the
// next pass sends what it left). Another user's upload never waits for one that lasts.

import LiveProcess
import Store
import Synchronization
import Upload

#if canImport(Glibc)
import Glibc
#endif

extension Sidecar {
    final class Children: Sendable {
        /// A pass asked for while its owner's was running.
        struct Owed: Sendable {
            var root: String
            var owner: ReportStore.Owner?
        }

        /// Each running upload's owner and start (CLOCK_MONOTONIC ns), and the passes owed.
        private let state = Mutex<(running: [pid_t: (owner: UInt32, started: UInt64)], owed: [UInt32: Owed])>(([:], [:]))
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

        /// Starts an upload of `store`'s reports, unless its owner's runs (one is then owed for
        /// when it ends) or `maximumRunning` do (the next report or consent starts it).
        func start(_ store: ReportStore, log: (String) -> Void) {
            start(Owed(root: store.root, owner: store.owner), log: log)
        }

        private func start(_ pass: Owed, log: (String) -> Void) {
            let owner = pass.owner?.uid ?? getuid()
            state.withLock { state in
                let owners = state.running.values.map(\.owner)
                guard Self.mayStart(for: owner, runningFor: owners) else {
                    if owners.contains(owner) { state.owed[owner] = pass }
                    return
                }
                guard let child = spawn(pass.root, pass.owner, log) else { return }
                state.running[child] = (owner, monotonicNanoseconds())
            }
        }

        /// Reaps the uploads that ended (by pid: a waitpid(-1) could take a traced thread's
        /// status from its tracer), kills those past `deadline` (reaped on a later call), then
        /// starts the passes owed to owners that have none running.
        func reap(now: UInt64, log: (String, UInt32) -> Void) {
            let due = state.withLock { state -> [Owed] in
                for (child, running) in state.running {
                    var status: Int32 = 0
                    let result = waitpid(child, &status, WNOHANG)
                    if result == child || (result < 0 && errno == ECHILD) {
                        state.running[child] = nil
                    } else if now &- running.started > deadline, kill(child, SIGKILL) == 0 {
                        log("upload (pid \(child)) ran past its \(deadline / 1_000_000_000) s: killed", running.owner)
                        state.running[child] = (running.owner, now)  // reaped once it has died
                    }
                }
                let owners = Set(state.running.values.map(\.owner))
                let due = state.owed.filter { !owners.contains($0.key) }
                for owner in due.keys { state.owed[owner] = nil }
                return Array(due.values)
            }
            for pass in due {
                start(pass, log: { log($0, pass.owner?.uid ?? getuid()) })
            }
        }

        /// The uploads running now and their owners.
        var running: [pid_t: UInt32] { state.withLock { $0.running.mapValues(\.owner) } }
    }
}
