// SidecarEnds: the ends of the sidecar's clients that no crash record describes.
//
// A client's process says GOODBYE as it exits normally (exit, _exit); a crash sends a record.
// A connection that closes with neither was closed by a death no handler saw (SIGKILL, the OOM
// killer, a handler bypassed), or on purpose by a process that lives on (an exec, a close of its
// descriptors). The sidecar tells them apart and learns what it can, without ever waiting on
// its serving thread:
//  - at HELLO it takes the client's pidfd (from the connection: SO_PEERPIDFD), its memory
//    cgroup's OOM-kill counter, and its arguments;
//  - while the client runs, at most once a second, it checks the client's app area and
//    re-reads it when the breadcrumb count or high-water marks moved (AppAreaMonitor), within a
//    per-second read allowance and a cap on what all clients' copies hold;
//  - when the connection closes, a process that is not exiting lives on (its session ends as
//    exited); otherwise its pidfd, polled with the clients, says when it has died, and the
//    kernel (PIDFD_INFO_EXIT, once the parent reaped it; a zombie's /proc/PID/stat after 2 s)
//    how. A SIGKILL, a core-dumping signal, a non-zero exit or an unknown end is abnormal: the
//    session says so and, unless the program turned reporting off or the per-user and
//    per-program limits are spent, a termination report is written on a report thread. An
//    exit with 0 or a death by another signal (SIGTERM, SIGINT...) is an ordinary end, as
//    `crashport run` counts it.

import BoundedBytes
import FoundationEssentials
import LiveProcess
import Processes
import ReportModel
import Reports
import Store

#if canImport(Glibc)
import Glibc
#endif

extension Sidecar {
    /// What an abnormal end of a client needs, taken at its HELLO and kept up while it runs.
    struct ClientWatch {
        /// Its pidfd; nil where the kernel gives none.
        var handle: ProcessHandle?
        /// The OOM-kill counter of each memory cgroup it was seen in, when first seen there.
        var oom: [OOMCounters.Reading]
        /// Its breadcrumbs and annotations, read while it runs; nil when HELLO named no area.
        var monitor: AppAreaMonitor?
        /// Why what the monitor read is not kept (the sidecar's cap), nil when it is.
        var dropped: String?
        /// Whether the first read that found something was logged.
        var announced = false
        /// Checks since HELLO (the cgroup is looked up again every tenth).
        var checks = 0
        /// crashport_set_enabled(0) is on record for its program: no report.
        var disabled: Bool
        var arguments: [String]
        /// Where its app area is (HELLO), 0 if none.
        var appArea: UInt64
        /// Kept traced until it exits (SidecarTracing.swift); why not, when it was asked.
        var traced = false
        var untraced: String?
        /// Its heartbeat's monitor, when watched; when to look next (CLOCK_MONOTONIC ns); whether
        /// a hang ends it with SIGABRT.
        var hang: HangMonitor?
        var nextHangLook: UInt64 = 0
        var hangKill = false
        /// The report of its death, captured at its exit stops (traced): nothing more to write.
        var exitReport: String?
        /// A fault of its the runtime turned into a call, written at its exit stop (traced): its crash.
        var heldFaultReport: String?
        /// Its cgroup and the container that is, named at HELLO (its death leaves nothing to
        /// read), and what could not be believed of the names.
        var container: ContainerIdentity?
        var containerNotes: [String] = []

        init(connection: Int32, access: ProcessAccess, appArea: UInt64, disabled: Bool) {
            let pid = access.pid
            self.appArea = appArea
            handle = ProcessHandle(peerOf: connection, pid: pid)
            oom = OOMCounters.reading(of: pid).map { [$0] } ?? []
            monitor = appArea == 0 ? nil : AppAreaMonitor(access: access, address: appArea, now: monotonicNanoseconds())
            self.disabled = disabled
            arguments = ProcFiles.arguments(cmdline: access.read("cmdline", limit: 4096) ?? [])
            container = access.read("cgroup", limit: 4096).flatMap {
                ContainerIdentity.parse(procCgroup: String(decoding: $0, as: UTF8.self))
            }
            if var named = container, named.isContainer {
                ContainerNames().name(&named, hostname: ContainerNames.ownHostname(access), notes: &containerNotes)
                container = named
            }
        }

        /// Its memory cgroup's OOM-kill counter then and now: the first cgroup where it moved,
        /// else the first it was seen in; nil when none could be read.
        func oomCount() -> AbnormalEnd.OOMCount? {
            let counts = oom.lazy.compactMap { before in
                OOMCounters.kills(inFile: before.file).map {
                    AbnormalEnd.OOMCount(cgroup: before.cgroup, before: before.kills, after: $0)
                }
            }
            return counts.first { $0.moved } ?? counts.first
        }
    }

    /// A client whose connection closed without GOODBYE or crash record, until its end is known.
    struct PendingEnd {
        var session: ClientSession
        var watch: ClientWatch
        var uid: UInt32
        /// CLOCK_MONOTONIC (ns) when the connection closed, and when the process was first seen dead.
        var closed: UInt64
        var died: UInt64?
        /// Whether it was exiting when its connection closed (decided at the first look).
        var exiting: Bool?

        init(session: ClientSession, watch: ClientWatch, uid: UInt32, closed: UInt64) {
            self.session = session
            self.watch = watch
            self.uid = uid
            self.closed = closed
        }
    }

    enum EndOutcome {
        /// It closed its connection and runs on.
        case livesOn
        case ended(ProcessHandle.ExitLookup)
    }

    /// What all clients' copies of their breadcrumbs and annotations may hold, and what the
    /// checks may read from clients in a second.
    static let appAreaCap = 32 << 20
    static let appAreaBytesPerSecond = 8 << 20
    /// Checks per turn of the serving loop (the rest wait for the next turn).
    static let appAreaChecksPerTurn = 512
    /// How long a dead client's parent gets to reap it (the kernel records the exit status for
    /// its pidfd then) before its zombie's /proc/PID/stat is read instead; and how long an end
    /// may take to settle at all.
    static let reapGrace: UInt64 = 2_000_000_000
    static let settleLimit: UInt64 = 10_000_000_000

    // MARK: - While clients run

    /// Checks the app areas of the clients that are due (once a second each, within this
    /// second's read allowance), and now and then which cgroup each is in.
    func checkAppAreas(now: UInt64) {
        let second = now / 1_000_000_000
        if appAreaBudget.second != second { appAreaBudget = (second, Self.appAreaBytesPerSecond) }
        var checked = 0
        for fd in clients.keys where checked < Self.appAreaChecksPerTurn {
            guard var watch = clients[fd]?.watch, let monitor = watch.monitor, monitor.isDue(at: now),
                let handle = watch.handle, !handle.hasExited
            else { continue }
            checked += 1
            watch.checks += 1
            var updated = monitor
            let held = updated.retainedBytes
            let outcome = updated.check(now: now, budget: watch.dropped == nil ? appAreaBudget.left : 0)
            // Read by pid: only what was read while the pidfd says the process still ran (so
            // the pid could not have been reused meanwhile) is kept.
            guard !handle.hasExited else { continue }
            if watch.checks % 10 == 0 { refreshCgroup(&watch, handle: handle) }
            // Read by pid: kept only while the pidfd says it still runs.
            if clients[fd]?.session?.memory?.watchesPeak == true, let peak = SidecarMemory.peak(of: handle.pid),
                !handle.hasExited
            {
                clients[fd]?.session?.memory?.keep(peak)
            }
            if case .read(let bytes) = outcome {
                appAreaBudget.left -= bytes
                appAreaBytes += updated.retainedBytes - held
                if appAreaBytes > Self.appAreaCap {
                    appAreaBytes -= updated.retainedBytes
                    updated.forget()
                    watch.dropped =
                        "the sidecar holds at most \(Self.appAreaCap >> 20) MiB of its clients' breadcrumbs and annotations, and had no room for this process's"
                    log.say("not keeping pid \(monitor.pid)'s breadcrumbs and annotations: \(watch.dropped!)")
                } else if !watch.announced, let area = updated.area, !area.breadcrumbs.isEmpty || !area.annotations.isEmpty {
                    watch.announced = true
                    log.say(
                        "read pid \(monitor.pid)'s app area: \(area.breadcrumbs.count) breadcrumb(s), \(area.annotations.count) annotation(s) (read again when they change, at most once a second)"
                    )
                }
            }
            watch.monitor = updated
            clients[fd]?.watch = watch
        }
    }

    /// Takes the OOM-kill counter of a cgroup the client moved to since it was last looked at
    /// (read by pid: kept only when the process still runs afterwards).
    func refreshCgroup(_ watch: inout ClientWatch, handle: ProcessHandle) {
        guard watch.oom.count < 4, let now = OOMCounters.reading(of: handle.pid), !handle.hasExited,
            !watch.oom.contains(where: { $0.file == now.file })
        else { return }
        watch.oom.append(now)
    }

    // MARK: - When a connection closes

    /// Settles the pending ends whose process is known to have ended (or to live on); with
    /// `stopping` (the sidecar exits), all of them, with what is known now.
    func settleEndings(now: UInt64, stopping: Bool = false) {
        guard !endings.isEmpty else { return }
        var waiting: [PendingEnd] = []
        for var end in endings {
            if let outcome = settle(&end, now: now, stopping: stopping) {
                finish(end, outcome, now: now)
            } else {
                waiting.append(end)
            }
        }
        endings = waiting
    }

    /// How a pending end came out, or nil while it is not known yet.
    func settle(_ end: inout PendingEnd, now: UInt64, stopping: Bool) -> EndOutcome? {
        guard let handle = end.watch.handle else {
            // No pidfd: the pid is not pinned, so nothing read by it now is trusted to be this
            // process's.
            return .ended(.unknown("this kernel gave no pidfd for it (SO_PEERPIDFD, pidfd_open)"))
        }
        if end.died == nil {
            if handle.hasExited {
                end.died = now
            } else {
                if end.exiting == nil { end.exiting = handle.isExiting }
                if end.exiting == false { return .livesOn }
                guard stopping || now &- end.closed > Self.settleLimit else { return nil }
                return handle.isExiting
                    ? .ended(
                        .unknown(
                            "it was still exiting \(stopping ? "when the sidecar stopped" : "10 s after its connection closed")"))
                    : .livesOn
            }
        }
        let waited = now &- (end.died ?? now)
        let lookup = handle.exitStatus(zombie: stopping || waited >= Self.reapGrace)
        if lookup == .notYet {
            guard stopping || waited > Self.settleLimit else { return nil }
            return .ended(
                .unknown(
                    "its parent had not reaped it \(stopping ? "when the sidecar stopped" : "10 s after it died"), and its zombie could not be read"
                ))
        }
        return .ended(lookup)
    }

    /// Ends a client's session as its end came out, and writes its termination report.
    func finish(_ end: PendingEnd, _ outcome: EndOutcome, now: UInt64) {
        let session = end.session
        let pid = session.pid
        let held = end.watch.monitor?.retainedBytes ?? 0
        appAreaBytes = max(0, appAreaBytes - held)
        guard case .ended(let lookup) = outcome else {
            // An exec (the connection is close-on-exec), or a close of its descriptors: an
            // ordinary end of this run of the program. Traced, it is let go, unless it said HELLO
            // again (the program it execed has the stub too).
            if end.watch.traced, connection(of: pid) == nil { traced.tracer(of: pid)?.detachEverything() }
            capturer.settleHeldFault(of: pid, exit: nil)
            endRun(session.record(status: .exited), store: session.store)
            return
        }
        var abnormal = Self.abnormalEnd(pid, executable: session.executable, lookup)
        // An abnormal end in its launch window is a launch crash (RunHistory): measured when its
        // connection closed, as its death is not timed more closely.
        let closedAt = realtimeNanoseconds() &- (now &- end.closed)
        let duringLaunch = session.endedDuringLaunch(app: end.watch.monitor?.area, ended: closedAt)
        // A fault Go's runtime turned into a panic, and the exit (status 2) that followed: the
        // fault, captured when it happened, is the crash; any other end drops it.
        if let report = end.watch.heldFaultReport
            ?? capturer.settleHeldFault(of: pid, exit: end.watch.disabled ? nil : abnormal.exit)
        {
            endRun(
                session.record(status: .crashed, crashedDuringLaunch: duringLaunch, reportID: report),
                store: session.store)
            return
        }
        // The OOM killer's SIGKILL: its cgroup's counter moved.
        let oomCount = end.watch.oomCount()
        let oomKilled = abnormal.exit?.signal == SIGKILL && oomCount?.moved == true
        // Traced, it was captured at its exit stops, and that report says it all.
        if let report = end.watch.exitReport {
            endRun(
                session.record(
                    status: .abnormal, crashedDuringLaunch: duringLaunch, reportID: report, signal: abnormal.exit?.signal,
                    oomKilled: oomKilled),
                store: session.store)
            return
        }
        // An exit with 0, or a death by a signal that ordinarily stops programs, is an end like
        // any other (as `crashport run` counts them).
        if let exit = abnormal.exit, exit == .exited(0) || exit.signal.map({ !Launcher.unexplainedDeaths.contains($0) }) == true {
            log.say("client pid \(pid) ended without a goodbye: \(TerminationReport.describe(exit))")
            endRun(session.record(status: .exited), store: session.store)
            return
        }
        abnormal.oomKills = oomCount
        describe(&abnormal, of: end)
        let id = mayReport(abnormal, of: end) ? ReportStore.newID(pid: pid.rawValue) : nil
        let writer = capturer.writer
        let ended = abnormal
        endRun(
            session.record(
                status: .abnormal, crashedDuringLaunch: duringLaunch, reportID: id, signal: abnormal.exit?.signal,
                oomKilled: oomKilled),
            store: session.store
        ) {
            if let id { writer.writeTermination(ended, store: session.store, id: id) }
        }
    }

    /// An end no crash record described, as far as its exit status is known.
    static func abnormalEnd(_ pid: ProcessID, executable: String, _ lookup: ProcessHandle.ExitLookup) -> AbnormalEnd {
        var abnormal = AbnormalEnd(pid: pid, executable: executable)
        switch lookup {
        case .known(let exit, let source):
            abnormal.exit = exit
            abnormal.exitSource = source
        case .unknown(let why):
            abnormal.exitUnknown = why
        case .notYet:
            abnormal.exitUnknown = "it had not ended"
        }
        return abnormal
    }

    /// What the termination report of an abnormal end says of its run: its arguments, program,
    /// session, and what its monitor last read of its app area.
    func describe(_ abnormal: inout AbnormalEnd, of end: PendingEnd) {
        let session = end.session
        abnormal.arguments = end.watch.arguments
        abnormal.buildID = session.buildID
        abnormal.release = session.release
        abnormal.session = session.sid
        if let untraced = end.watch.untraced {
            abnormal.notes.append("no stacks: crashport could not keep it traced (\(untraced)); crashport doctor says why")
        }
        abnormal.container = end.watch.container
        abnormal.notes += end.watch.containerNotes
        if let monitor = end.watch.monitor {
            abnormal.app = monitor.area
            abnormal.appCheckedBeforeEnd = monitor.confirmed.map { Double(end.closed &- $0) / 1e9 }
            abnormal.appProblem = end.watch.dropped ?? (monitor.area == nil ? monitor.problem : nil)
        }
    }

    /// Whether an abnormal end gets a termination report: not when its program turned reporting
    /// off, nor past the per-program and per-user limits (a fork bomb of SIGKILLed clients
    /// writes a few, not thousands). Says why not.
    func mayReport(_ abnormal: AbnormalEnd, of end: PendingEnd) -> Bool {
        let (pid, executable) = (end.session.pid, end.session.executable)
        let what = abnormal.exit.map(TerminationReport.describe) ?? "exit status unknown"
        let cause = abnormal.cause.map { ", cause \($0)" } ?? ""
        if end.watch.disabled {
            log.say("client pid \(pid) ended abnormally (\(what)\(cause)); its program turned reporting off: no report")
            return false
        }
        if !terminationsPerProgram.allows("\(end.uid) \(executable)") {
            log.say(
                "client pid \(pid) ended abnormally (\(what)\(cause)); not reported: more than \(terminationsPerProgram.perMinute) termination reports a minute for \(executable) (uid \(end.uid))"
            )
            return false
        }
        if !terminationsPerUser.allows(end.uid) {
            log.say(
                "client pid \(pid) ended abnormally (\(what)\(cause)); not reported: more than \(terminationsPerUser.perMinute) termination reports a minute for uid \(end.uid)"
            )
            return false
        }
        return true
    }
}
