// crashport core-handler: the pipe helper the kernel starts for each core dump when the host level
// runs in pipe mode (core_pattern "|crashport core-handler DIRECTORY %P %u %g %d [%F]"). It is
// not for people to run. It hands the core on its stdin, and the dying process's pidfd, to the
// running sidecar and waits (bounded) for it to be read; when no sidecar answers, it writes the
// report itself, with the sidecar's defaults.

import ArgumentParser
import Glibc
import Watcher

struct CoreHandler: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "core-handler",
        abstract: "The kernel's pipe helper for crashport watch --host (started by the kernel, not by hand).",
        shouldDisplay: false)

    /// The host level's directory (its handoff socket is there).
    @Argument var directory: String
    @Argument var pid: Int32
    @Argument var uid: UInt32
    @Argument var gid: UInt32
    @Argument var dumpMode: Int32
    /// %F: the descriptor the kernel put the pidfd on (3), absent before Linux 6.16.
    @Argument var pidfd: Int32?

    func run() throws {
        let handoff = CoreHandoff(pid: pid, uid: uid, gid: gid, dumpMode: dumpMode)
        let status = Watcher.CoreHandler.run(handoff: handoff, directory: directory, pidfd: pidfd ?? -1)
        throw ExitCode(status)
    }

    /// This crashport's own path, for the pattern the kernel runs.
    static func executablePath() -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBufferPointer {
            $0.withMemoryRebound(to: CChar.self) { readlink("/proc/self/exe", $0.baseAddress!, $0.count - 1) }
        }
        return count > 0 ? String(decoding: buffer.prefix(count), as: UTF8.self) : CommandLine.arguments[0]
    }
}
