// HostHandOn: `crashport watch --host --host-previous chain`, never the only hook at the host
// level either: each core is also handed on, unchanged, to the pipe handler crashport replaced
// (systemd-coredump, apport, ABRT), started as the kernel would have started it (its pattern's
// specifiers expanded from the kernel's word and /proc, the core on its stdin, RLIMIT_CORE 1 as
// the kernel's recursion guard, a minimal environment), while the dying process is still held,
// so that it can read /proc/PID as it expects. Its own choices (storage, compression) are its
// own: `coredumpctl gdb` works as before. A file pattern (`core`, `/var/crash/core.%p`) is not
// handed on: crashport says so at start and replaces it.
//
// Every write to the previous handler and the wait for it share the dump's deadline: a handler
// that stops reading cannot hold the dying process past it (it is killed, and the log says so).

import BoundedBytes
import FoundationEssentials
import LiveProcess
import Processes
import ReportModel
#if canImport(Glibc)
import Glibc
#endif

/// The replaced pipe handler, as a template.
public struct HostHandOn: Sendable {
    /// The pattern's words after `|`, specifiers not yet expanded.
    let words: [String]

    /// Nil for a pattern that is not a pipe handler (a file pattern is not handed on).
    public init?(pattern: String) {
        guard pattern.hasPrefix("|") else { return nil }
        let words = pattern.dropFirst().split(separator: " ").map(String.init)
        guard let first = words.first, first.hasPrefix("/") else { return nil }
        self.words = words
    }

    /// What the kernel knows of one dump, for the specifiers.
    struct Facts: Sendable {
        var pid: ProcessID
        var uid: UInt32
        var gid: UInt32
        var signal: Int32
        var dumpMode: Int
        var time = Int(Glibc.time(nil))
    }

    /// The arguments, with core(5)'s specifiers expanded (%% %c %d %e %E %g %h %i %I %p %P %s %t
    /// %u; %C and %F, which only the kernel can give, are left empty).
    func arguments(_ facts: Facts) -> [String] {
        let pid = facts.pid
        let comm = ProcFiles.read("/proc/\(pid)/comm", limit: 64).map {
            String(decoding: $0, as: UTF8.self).trimmingSuffix("\n")
        }
        let executable = ProcFiles.executable(of: pid) ?? ""
        let inner = ProcFiles.namespaceIDs(of: pid)?.last.map(String.init) ?? "\(pid)"
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count - 1)
        let hostname = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let values: [Character: String] = [
            "%": "%", "c": Self.coreLimit(of: pid), "d": "\(facts.dumpMode)", "e": comm ?? "",
            "E": String(executable.map { $0 == "/" ? "!" : $0 }), "g": "\(facts.gid)", "h": hostname, "i": inner,
            "I": "\(pid)", "p": inner, "P": "\(pid)", "s": "\(facts.signal)", "t": "\(facts.time)", "u": "\(facts.uid)",
            "C": "", "F": "",
        ]
        return words.map { word in
            var result = ""
            var iterator = word.makeIterator()
            while let character = iterator.next() {
                guard character == "%", let specifier = iterator.next() else {
                    result.append(character)
                    continue
                }
                result += values[specifier] ?? ""
            }
            return result
        }
    }

    /// /proc/PID/limits' soft "Max core file size" in bytes, as %c gives it ("unlimited": 2^64-1).
    static func coreLimit(of pid: ProcessID) -> String {
        guard let bytes = ProcFiles.read("/proc/\(pid)/limits", limit: 4096) else { return "0" }
        let line = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("Max core file size") }
        guard let soft = line?.dropFirst("Max core file size".count).split(separator: " ").first else { return "0" }
        return soft == "unlimited" ? "18446744073709551615" : String(soft)
    }

    /// Starts the handler for one dump; nil (with the log told why) when it cannot be.
    func start(_ facts: Facts, log: (String) -> Void) -> Running? {
        let argv = arguments(facts)
        let pipeEnds: [Int32]
        do {
            let ends = try HostProcessSettings.pipe()
            pipeEnds = [ends.read, ends.write]
        } catch {
            log("host: the previous handler could not be started: \(error)")
            return nil
        }
        var options = ChildProcess.Options()
        options.environment = ["HOME=/", "TERM=linux", "PATH=/sbin:/bin:/usr/sbin:/usr/bin"]
        options.standardInput = .descriptor(pipeEnds[0])
        options.standardOutput = .null
        options.standardError = .null
        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(argv[0], arguments: argv, options)
        } catch {
            close(pipeEnds[0])
            close(pipeEnds[1])
            log("host: the previous handler \(argv[0]) could not be started: \(error.reason)")
            return nil
        }
        close(pipeEnds[0])
        // The kernel's recursion guard: a handler that crashes dumps no core of its own.
        try? HostProcessSettings.limitCoreToOne(child.pid.rawValue)
        _ = fcntl(pipeEnds[1], F_SETFL, fcntl(pipeEnds[1], F_GETFL) | O_NONBLOCK)
        return Running(child: child, input: pipeEnds[1], name: argv[0])
    }

    /// One running handler: its stdin, written with the dump's deadline.
    final class Running {
        let child: ChildProcess
        private var input: Int32
        let name: String
        private(set) var failed: String?

        init(child: ChildProcess, input: Int32, name: String) {
            self.child = child
            self.input = input
            self.name = name
        }

        /// Writes `bytes` whole, or gives up at the deadline (the handler then gets no more).
        func write(_ bytes: UnsafeRawBufferPointer, deadline: UInt64) {
            guard failed == nil, let base = bytes.baseAddress else { return }
            var offset = 0
            while offset < bytes.count {
                let now = monotonicNanoseconds()
                guard now < deadline else {
                    failed = "it did not read its core in time"
                    return
                }
                var descriptor = pollfd(fd: input, events: Int16(POLLOUT), revents: 0)
                _ = poll(&descriptor, 1, Int32(min((deadline - now) / 1_000_000 + 1, 1000)))
                let written = Glibc.write(input, base + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EAGAIN || errno == EINTR { continue }
                    failed = "it stopped reading its core (\(String(cString: strerror(errno))))"
                    return
                }
                offset += written
            }
        }

        /// Closes its stdin and waits for it to exit, at most until the deadline (then it is
        /// killed); what went wrong, for the log, or nil.
        func finish(deadline: UInt64) -> String? {
            if input >= 0 { close(input) }
            input = -1
            if child.wait(until: deadline) == .running {
                child.signal(SIGKILL)
                child.wait()
                return "\(name) did not finish in time and was killed"
            }
            return failed.map { "\(name): \($0)" }
        }
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
