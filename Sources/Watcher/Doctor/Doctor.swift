// Doctor: `crashport doctor`, why capture would or would not work on this machine, checked
// for real (a child is actually traced), not guessed from settings alone.

import BoundedBytes
import FoundationEssentials
import LiveProcess
import Processes
import ReportModel
import ObjectFile
import Store
import Symbolication
#if canImport(Glibc)
import Glibc
#endif

public struct Doctor {
    public enum Level: String { case ok, warning, problem }

    public struct Finding {
        public var level: Level
        public var text: String
    }

    public init() {}

    /// Whether a sidecar answers on `socket` (CRASHPORT_SOCKET, else the default for this
    /// user), as whom, whether it would serve the caller, and whether it could capture the
    /// caller's processes (Yama, dumpable, its privileges).
    /// The host level (crashport watch --host): whether it is the machine's core handler, in which
    /// kernel mode, and whether another tool has replaced its pattern since.
    public func hostFindings(paths: HostPaths = HostPaths()) -> [Finding] {
        switch HostPattern(paths: paths).state() {
        case .notInstalled(let now):
            return [
                Finding(
                    level: .ok,
                    text:
                        "host level: not installed (core_pattern \"\(now)\"); crashport watch --host would use \(HostMode.best().rawValue) mode on this kernel"
                )
            ]
        case .stale(let now):
            return [
                Finding(
                    level: .warning,
                    text:
                        "host level: core_pattern is crashport's (\(now)) but no sidecar recorded it: a stale pattern; crashes go nowhere until crashport watch --host starts again"
                )
            ]
        case .replaced(let now, let installation):
            return [
                Finding(
                    level: .problem,
                    text:
                        "host level: another tool set core_pattern to \"\(now)\" after crashport installed \(installation.mode.rawValue) mode (\(installation.since)); crashes no stub reports are not seen until crashport watch --host restarts"
                )
            ]
        case .installed(let installation, let running):
            return [
                Finding(
                    level: running ? .ok : .warning,
                    text:
                        "host level: \(installation.mode.rawValue) mode since \(installation.since) (pid \(installation.pid)\(running ? "" : ", not running")); it replaced \"\(installation.replaced)\""
                )
            ]
        }
    }

    public func sidecarFindings(socket: String) -> [Finding] {
        let connection: UnixSocket
        do {
            connection = try UnixSocket.connect(to: socket)
        } catch {
            return [
                Finding(
                    level: .warning,
                    text:
                        "sidecar: none listening on \(socket) (\(error.reason)); programs with CRASHPORT_SOCKET=\(socket) will spool their crashes until one starts (crashport watch, or systemctl enable --now crashport.socket)"
                )
            ]
        }
        let fd = connection.fd
        defer { close(fd) }
        let peer = try? connection.peer()
        let (pid, uid) = (peer?.pid.rawValue ?? 0, peer?.uid ?? 0)
        var findings = [Finding(level: .ok, text: "sidecar: listening on \(socket), pid \(pid), uid \(uid)")]
        if uid != 0 && uid != getuid() {
            findings.append(
                Finding(
                    level: .problem,
                    text:
                        "sidecar: it runs as uid \(uid), neither root nor you (uid \(getuid())): the stub will not connect to it")
            )
            return findings
        }
        // Say HELLO as the stub would and read the reply: does it serve us, and where is its spool.
        let hello = HelloMessage.encode(pid: getpid())
        _ = hello.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = poll(&entry, 1, 2000) == 1 ? recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT)) : -1
        if count > 0, let reply = try? HelloReply(bytes: Array(buffer.prefix(count))) {
            findings.append(
                reply.accepted
                    ? Finding(level: .ok, text: "sidecar: serves you (uid \(getuid())); its spool is \(reply.spool)")
                    : Finding(level: .problem, text: "sidecar: refuses you: \(reply.message)"))
        } else {
            findings.append(Finding(level: .warning, text: "sidecar: did not answer HELLO within 2 s"))
        }
        let scope = ProcFiles.readText("/proc/sys/kernel/yama/ptrace_scope")?.trimmed
        let capture: (Level, String)
        switch scope {
        case nil, "0"?:
            capture = uid == 0 || uid == getuid() ? (.ok, "it can ptrace your processes") : (.warning, "it cannot ptrace them")
        case "1"?: capture = (.ok, "Yama 1: the stub names it with PR_SET_PTRACER, so it can ptrace your processes")
        case "2"?:
            capture =
                uid == 0
                ? (.ok, "Yama 2: it can ptrace if it kept CAP_SYS_PTRACE (the unit grants it)")
                : (.warning, "Yama 2: a sidecar without CAP_SYS_PTRACE reports only the crashing thread")
        default: capture = (.warning, "Yama 3: no ptrace at all; reports hold only the crashing thread")
        }
        findings.append(
            Finding(
                level: capture.0,
                text: "sidecar: capture: \(capture.1); the stub makes a crashing process dumpable (except setuid programs)"))
        return findings
    }

    /// Processes that `crashport run --trace-exit` keeps traced: a debugger cannot attach to
    /// them (ptrace allows one tracer), and gdb's or strace's "Operation not permitted" is why.
    func tracedByCrashport() -> [Finding] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        var findings: [Finding] = []
        for entry in entries where entry.first?.isNumber == true {
            guard let status = ProcFiles.readText("/proc/\(entry)/status"),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("TracerPid:") }),
                let tracer = Int32(line.dropFirst("TracerPid:".count).trimmed), tracer > 0,
                let tracerPath = ProcFiles.executable(of: ProcessID(tracer)), tracerPath.hasSuffix("/crashport"),
                ProcFiles.readText("/proc/\(tracer)/cmdline")?.contains("--trace-exit") == true
            else { continue }
            let name = ProcFiles.executable(of: ProcessID(Int32(entry) ?? 0)) ?? "pid \(entry)"
            findings.append(
                Finding(
                    level: .ok,
                    text:
                        "pid \(entry) (\(name)) is traced by crashport run --trace-exit (pid \(tracer)) for its whole life: a debugger cannot attach to it (one tracer per process); run it without --trace-exit to debug it"
                ))
            if findings.count >= 20 { break }
        }
        return findings
    }

    public func findings(store: ReportStore) -> [Finding] {
        var findings: [Finding] = []
        var names = utsname()
        uname(&names)
        let release = withUnsafeBytes(of: names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        findings.append(Finding(level: .ok, text: "kernel \(release)"))

        if let scope = ProcFiles.readText("/proc/sys/kernel/yama/ptrace_scope")?.trimmed {
            let meaning =
                [
                    "0": "classic: any process of the same user",
                    "1": "restricted: ancestors, or a process named by PR_SET_PTRACER (the stub names its watcher)",
                    "2": "admin-only: needs CAP_SYS_PTRACE", "3": "no attach at all: only the record's own stack copy",
                ][scope] ?? "unknown"
            findings.append(
                Finding(
                    level: scope == "3" || (scope == "2" && !hasPtraceCapability()) ? .warning : .ok,
                    text: "Yama ptrace_scope \(scope) (\(meaning))"))
        } else {
            findings.append(Finding(level: .ok, text: "no Yama: ptrace is allowed over processes of the same user"))
        }
        findings.append(
            Finding(
                level: .ok,
                text: hasPtraceCapability()
                    ? "CAP_SYS_PTRACE: yes (can capture other users' processes)"
                    : "CAP_SYS_PTRACE: no (captures processes of its own user)"))
        findings.append(tryTracing())
        findings += tracedByCrashport()

        do {
            let stub = try Launcher.locateStub()
            findings.append(Finding(level: .ok, text: "stub: \(stub)"))
        } catch {
            findings.append(Finding(level: .problem, text: "\(error)"))
        }
        findings.append(Self.reportsFinding(root: store.root))
        if let pattern = ProcFiles.readText("/proc/sys/kernel/core_pattern")?.trimmed {
            findings.append(Finding(level: .ok, text: "core_pattern: \(pattern) (crashport leaves core dumps as they are)"))
        }
        let candidates: [String] = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"]
        let libc = candidates.first { FileManager.default.isReadableFile(atPath: $0) }
        if let libc, let elf = try? ELFFile(path: libc) {
            let named = DebugFileLocator().debugFile(for: elf) != nil
            findings.append(
                Finding(
                    level: named ? .ok : .warning,
                    text: named
                        ? "libc debug symbols: found (libc's own frames get names and lines)"
                        : "libc debug symbols: missing (install libc6-dbg to name libc's internal frames)"))
        }
        findings.append(debuginfodFinding())
        findings.append(Self.goFinding(traceback: ProcessInfo.processInfo.environment["GOTRACEBACK"]))
        return findings
    }

    /// What Go programs started with this environment's GOTRACEBACK get reported (advice, never
    /// a problem: Go's default works too). Go's runtime handles its own faults: one it cannot
    /// recover (in cgo code) or that no one recovers ends the process with exit(2), reported from
    /// the fault; a fatal error without a signal (panic(), a deadlock) is an exit(2) with nothing
    /// to report. GOTRACEBACK=crash makes every fatal error abort (SIGABRT) after printing.
    static func goFinding(traceback: String?) -> Finding {
        let value = traceback.flatMap { $0.isEmpty ? nil : $0 }
        if value == "crash" {
            return Finding(
                level: .ok,
                text:
                    "Go: GOTRACEBACK=crash: a Go program's fatal error or unrecovered panic ends in SIGABRT, reported with its stack (a fault's report names the fault too); its exit status is SIGABRT's, not 2, and the kernel may dump core"
            )
        }
        return Finding(
            level: .ok,
            text:
                "Go: GOTRACEBACK=\(value ?? "single (unset)"): a fault Go's runtime ends with exit status 2 (in cgo code, or a nil dereference no one recovers) is reported from the fault; a fatal error without a signal (panic(), a deadlock) exits 2 with nothing to report. GOTRACEBACK=crash makes every one abort with SIGABRT, reported with its stack"
        )
    }

    /// What `--debuginfod` would ask (`symbolicate`, and `run`/`watch` after the verdict, never
    /// during capture): the servers, and whether elfutils' client is there to ask them.
    func debuginfodFinding() -> Finding {
        let servers = ProcessInfo.processInfo.environment["DEBUGINFOD_URLS"] ?? ""
        let client =
            dlopen("libdebuginfod.so.1", RTLD_LAZY | RTLD_NOLOAD) != nil
            || ["/usr/lib/x86_64-linux-gnu/libdebuginfod.so.1", "/lib/x86_64-linux-gnu/libdebuginfod.so.1"].contains {
                FileManager.default.fileExists(atPath: $0)
            }
        if servers.isEmpty {
            return Finding(
                level: .ok,
                text:
                    "debuginfod: DEBUGINFOD_URLS is not set; --debuginfod (symbolicate, run, watch) asks the servers it names for missing debug files"
            )
        }
        return Finding(
            level: client ? .ok : .warning,
            text: client
                ? "debuginfod: crashport symbolicate --debuginfod asks \(servers) for debug files not found here (run and watch with --debuginfod too, after the verdict, never during capture)"
                : "debuginfod: DEBUGINFOD_URLS is set but libdebuginfod.so.1 is missing (Debian: apt-get install libdebuginfod1)")
    }

    func hasPtraceCapability() -> Bool {
        guard let status = ProcFiles.readText("/proc/self/status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let mask = UInt64(line.dropFirst(7).trimmed, radix: 16)
        else { return false }
        return mask & (1 << 19) != 0
    }

    /// Whether reports can be written under `root`, asked without writing anything: a
    /// diagnosis leaves no directory behind (a package's purge would find it). A root that does
    /// not exist yet is fine when its nearest existing parent is writable (crashport creates it).
    static func reportsFinding(root: String) -> Finding {
        var path = root
        while !FileManager.default.fileExists(atPath: path), path.count > 1 {
            let parent = path[..<(path.lastIndex(of: "/") ?? path.startIndex)]
            path = parent.isEmpty ? "/" : String(parent)
        }
        guard access(path, W_OK | X_OK) == 0 else {
            return Finding(
                level: .problem, text: "reports: \(root) cannot be written (\(path): \(String(cString: strerror(errno))))")
        }
        return Finding(
            level: .ok,
            text: path == root
                ? "reports: \(root) (writable)" : "reports: \(root) (made at the first report: \(path) is writable)")
    }

    /// Forks a child that waits, and seizes it as the watcher would: a child held before its
    /// exec (ChildProcess.spawnHeld), a copy of crashport blocked on a pipe, never released (so
    /// /bin/true never runs), then killed and reaped.
    func tryTracing() -> Finding {
        guard let held = try? ChildProcess.spawnHeld("/bin/true", arguments: ["true"]) else {
            return Finding(level: .warning, text: "could not fork to test ptrace")
        }
        defer { held.cancel() }
        let child = held.child.pid
        let session = PtraceSession(pid: child)
        do {
            let threads = try session.suspendAll(timeoutMilliseconds: 1000)
            let registers = try session.registers(of: child.mainThread)
            session.detachAll()
            return Finding(
                level: .ok,
                text:
                    "ptrace: a test child was suspended (\(threads.count) thread) and its registers read (rip 0x\(String(registers.gpr[X86_64Registers.ripIndex], radix: 16)))"
            )
        } catch {
            return Finding(
                level: .warning,
                text: "ptrace: denied (\(error)); reports will hold only the crashing thread, from the stub's record")
        }
    }
}
