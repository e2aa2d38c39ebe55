// SidecarTracing: what `crashport run --trace-exit` and `--hang-ms` do, for the sidecar's
// clients, chosen per client.
//
// A client is kept traced for its whole life when the sidecar was started with --trace-exit,
// or when the client asks in its HELLO (CRASHPORT_TRACE_EXIT=1, or `codes` for non-zero exits
// too), unless the sidecar runs with --no-ptrace. Its heartbeat is watched when it asks
// (CRASHPORT_HANG_MS) or the sidecar has a --hang-ms. The sidecar's serving thread is the tracer
// of every traced client (one TraceGroup: ptrace is per tracer thread), which is also the thread
// that captures crashes and hangs: a traced client's crash is captured through its tracer.
//
// At a traced client's death no handler saw, every thread stops at its exit event; the client
// is captured there (on this thread, released at once) and its report is written on a report
// thread, like a crash's. Its connection closes after that, and SidecarEnds sees that the end
// is reported already. A hang report is remembered by pid, so that the crash report of the
// SIGABRT that follows (--hang-kill's, or a systemd watchdog's) can point to it.

import BoundedBytes
import FoundationEssentials
import LiveProcess
import ReportModel
import Reports
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension Sidecar {
    /// What the sidecar watches of one client beyond its crashes: its exit, its heartbeat.
    struct ClientWatchOptions {
        var traceExit = false
        var traceExitCodes = false
        var hangMilliseconds: UInt64?
        var hangKill = false

        /// The sidecar's configuration, and what the client asked in its HELLO.
        init(configuration: SidecarConfiguration, hello: HelloMessage) {
            let tracing = configuration.capture.usePtrace
            traceExit = tracing && (configuration.traceExit || hello.wantsTraceExit)
            traceExitCodes = traceExit && (configuration.traceExitCodes || hello.wantsTraceExitCodes)
            let asked = hello.hangMilliseconds == 0 ? nil : UInt64(max(hello.hangMilliseconds, 10))
            hangMilliseconds = hello.appArea == 0 ? nil : asked ?? configuration.hangMilliseconds
            hangKill = hangMilliseconds != nil && (configuration.hangKill || hello.wantsHangKill)
        }
    }

    /// Starts watching a client that said HELLO: seizes it when it is to be traced (noting why
    /// it cannot be), and sets up its heartbeat's monitor.
    func startWatching(_ watch: inout ClientWatch, hello: HelloMessage, access: ProcessAccess) {
        let pid = access.pid
        let options = ClientWatchOptions(configuration: configuration, hello: hello)
        if let milliseconds = options.hangMilliseconds {
            watch.hang = HangMonitor(milliseconds: milliseconds)
            watch.hangKill = options.hangKill
            watch.nextHangLook = monotonicNanoseconds()
        }
        // Already traced: it execed (the tracer follows an exec), and the new program said HELLO.
        if traced.tracer(of: pid) != nil {
            watch.traced = true
            return
        }
        guard options.traceExit else { return }
        let tracer = ExitTracer(pid: pid, group: traced)
        tracer.holdFailedExits = options.traceExitCodes
        tracer.access = access
        do {
            try tracer.attach()
            // Seized as root: kept only when the kernel says its user may read it (checked
            // again at each exec it makes, ExitTracer).
            guard access.mayReadMemory() != false else {
                tracer.detachEverything()
                throw InspectionError.malformed(
                    "its memory is not its user's to read (setuid, setgid, file capabilities, or not dumpable)")
            }
            watch.traced = true
            log.say("tracing pid \(pid) until it exits (a SIGKILL or OOM kill is reported with its stacks)")
        } catch {
            watch.untraced = "\(error)"
            log.say(
                "cannot trace pid \(pid) (\(error)); it runs untraced, and a SIGKILL or OOM kill is reported without stacks (crashport doctor says why)"
            )
        }
    }

    /// The client (connection) whose process is `pid`.
    func connection(of pid: ProcessID) -> Int32? {
        clients.first { $0.value.peer.pid == pid }?.key
    }

    // MARK: - Traced exits

    /// Handles the traced clients' ptrace events: a death no handler saw is captured at the
    /// exit stops and reported; everything else goes on as untraced.
    func handleTraceEvents() {
        guard !traced.isEmpty else { return }
        for (tracer, event) in traced.pump() {
            let pid = tracer.processID
            if case .leftAtExec(let why) = event {
                log.say("pid \(pid): no longer traced: \(why)")
                if let fd = connection(of: pid) {
                    clients[fd]?.watch?.traced = false
                    clients[fd]?.watch?.untraced = why
                }
                continue
            }
            guard case .exiting(let tid, let status) = event else { continue }
            let fd = connection(of: pid)
            let client = fd.flatMap { clients[$0] }
            // Once per death; none for a crash the stub reported (its session ended with it), nor
            // for a program that turned reporting off.
            guard let fd, let client, let watch = client.watch, client.session != nil, watch.exitReport == nil,
                !watch.disabled, let store = store(for: client.peer)
            else {
                for held in tracer.exiting { tracer.release(exitOf: held) }
                continue
            }
            // A fault Go's runtime turned into a panic, now ending the process (exit 2): that
            // capture, taken at the fault, is the report, not this exit.
            if capturer.holdsFault(of: pid), let id = capturer.settleHeldFault(of: pid, exit: ProcessExit(waitStatus: status)) {
                for held in tracer.exiting { tracer.release(exitOf: held) }
                clients[fd]?.watch?.exitReport = id
                clients[fd]?.watch?.heldFaultReport = id
                continue
            }
            let oomKilled = watch.oomCount()?.moved == true
            let id = capturer.captureExit(
                of: tracer, status: status, first: tid, appArea: watch.appArea, oomKilled: oomKilled,
                access: client.peer.access(pid), store: store)
            clients[fd]?.watch?.exitReport = id
        }
    }

    // MARK: - Hangs

    /// How long the serving loop may sleep before a heartbeat is due to be looked at.
    func heartbeatTimeout(now: UInt64) -> Int32? {
        let due = clients.values.compactMap { $0.watch?.hang == nil ? nil : $0.watch?.nextHangLook }.min()
        return due.map { Int32(clamping: $0 > now ? ($0 - now) / 1_000_000 + 1 : 0) }
    }

    /// Looks at the heartbeat of every client that is due: a hang report when one stalled (and
    /// with hang-kill, SIGABRT).
    func checkHeartbeats(now: UInt64) {
        for fd in Array(clients.keys) {
            guard let client = clients[fd], var watch = client.watch, var monitor = watch.hang, now >= watch.nextHangLook,
                watch.handle?.hasExited != true, !watch.disabled
            else { continue }
            let pid = client.peer.pid
            watch.nextHangLook = now + UInt64(monitor.interval) * 1_000_000
            let access = client.peer.access(pid)
            let header = (try? access.openMemory().get()).flatMap {
                CaptureSession.readAppAreaHeader(at: watch.appArea, memory: $0)
            }
            let verdict = monitor.look(header: header, now: now)
            watch.hang = monitor
            clients[fd]?.watch = watch
            switch verdict {
            case .fine:
                break
            case .resumed:
                log.say("pid \(pid): the heartbeat resumed")
            case .suppressed:
                log.say(
                    "pid \(pid): another hang, not reported (more than \(HangMonitor.perWindow) in \(HangMonitor.window / 60_000_000_000) minutes)"
                )
            case .hung(let milliseconds, let thread, let ordinal):
                guard let store = store(for: client.peer) else { continue }
                let id = capturer.captureHang(
                    of: pid, milliseconds: milliseconds, beatLast: thread, ordinal: ordinal, appArea: watch.appArea,
                    access: access, holder: traced.tracer(of: pid), store: store)
                hangReports.hung(pid, report: id, killing: watch.hangKill)
                clients[fd]?.session?.hangs += 1
                if watch.hangKill {
                    log.say("pid \(pid): hang-kill: ending it with SIGABRT after hang report \(id)")
                    kill(pid.rawValue, SIGABRT)
                }
            }
        }
    }
}
