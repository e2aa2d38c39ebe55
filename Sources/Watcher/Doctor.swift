// Doctor: `crashport doctor`, why capture would or would not work on this machine, checked
// for real (a child is actually traced), not guessed from settings alone.

import CShims
import Foundation
import LiveProcess
import ReportModel
import ObjectFile
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

    public func findings(store: ReportStore) -> [Finding] {
        var findings: [Finding] = []
        var names = utsname()
        uname(&names)
        let release = withUnsafeBytes(of: names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        findings.append(Finding(level: .ok, text: "kernel \(release)"))

        if let scope = ProcFiles.readText("/proc/sys/kernel/yama/ptrace_scope")?.trimmingCharacters(in: .whitespacesAndNewlines) {
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

        do {
            let stub = try Launcher.locateStub()
            findings.append(Finding(level: .ok, text: "stub: \(stub)"))
        } catch {
            findings.append(Finding(level: .problem, text: "\(error)"))
        }
        do {
            try store.prepare()
            findings.append(Finding(level: .ok, text: "reports: \(store.root) (writable)"))
        } catch {
            findings.append(Finding(level: .problem, text: "\(error)"))
        }
        if let pattern = ProcFiles.readText("/proc/sys/kernel/core_pattern")?.trimmingCharacters(in: .whitespacesAndNewlines) {
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
        return findings
    }

    func hasPtraceCapability() -> Bool {
        guard let status = ProcFiles.readText("/proc/self/status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let mask = UInt64(line.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return mask & (1 << 19) != 0
    }

    /// Forks a child that sleeps, and seizes it as the watcher would.
    func tryTracing() -> Finding {
        let child = fork()
        if child == 0 {
            sleep(5)
            _exit(0)
        }
        guard child > 0 else { return Finding(level: .warning, text: "could not fork to test ptrace") }
        defer {
            kill(child, SIGKILL)
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
        let session = PtraceSession(pid: ProcessID(child))
        do {
            let threads = try session.suspendAll(timeoutMilliseconds: 1000)
            let registers = try session.registers(of: ThreadID(child))
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
