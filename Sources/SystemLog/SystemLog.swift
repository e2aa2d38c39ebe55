// SystemLog: the system's own log around a crash, as one text file a report attaches
// (`system.log`): the kernel's records about the process (KernelLog, KernelLogSelection) and,
// where journald runs, its unit's last lines before the crash (JournalLog). Bounded as a whole
// (`limit` bytes, with a mark where it was cut); nil when neither says anything.
//
// The OOM killer prints its report as it kills, and the watcher may see the death first: for an
// OOM kill the kernel's log is read again, every 20 ms for at most `oomWait`, until the report
// that names the process is there.

import BoundedBytes

#if canImport(Glibc)
import Glibc
#endif

public struct SystemLog: Sendable, Equatable {
    /// The file's bytes.
    public var contents: [UInt8]
    /// Cut at `limit`.
    public var truncated: Bool
    /// Kernel lines and journal lines in it (the marks and headings not counted).
    public var kernelLines: Int
    public var journalLines: Int

    /// The most a system.log holds.
    public static let limit = 256 << 10
    /// How long an OOM kill waits for the killer's report (read again every 20 ms).
    public static let oomWait: UInt64 = 1_000_000_000
    /// How far before the crash the kernel's records are looked at (seconds).
    public static let window: UInt64 = 30

    public struct Request: Sendable {
        public var subject: KernelLogSubject
        public var viewer: KernelLogViewer
        /// The moment the watcher saw the crash or the death (CLOCK_MONOTONIC, nanoseconds).
        public var seen: UInt64
        /// Whether it was an OOM kill: the killer's report is waited for.
        public var oomKill: Bool
        /// The journal's lines to add; nil: none.
        public var journal: JournalLog.Query?

        public init(subject: KernelLogSubject, viewer: KernelLogViewer, seen: UInt64, oomKill: Bool, journal: JournalLog.Query?) {
            self.subject = subject
            self.viewer = viewer
            self.seen = seen
            self.oomKill = oomKill
            self.journal = journal
        }
    }

    /// Reads the kernel's log (and the journal) for `request`.
    public static func collect(_ request: Request) -> SystemLog? {
        let since = (request.seen / 1000).checkedSubtracting(window * 1_000_000) ?? 0
        let deadline = monotonicNanoseconds() &+ oomWait
        var kernel: Result<(KernelLog.Reading, KernelLogSelection), SystemCallError>
        repeat {
            kernel = Result { () throws(SystemCallError) in
                let reading = try KernelLog.read(since: since)
                return (reading, KernelLogSelection.select(reading.records, about: request.subject, for: request.viewer))
            }
            guard request.oomKill, case .success(let (_, selection)) = kernel, selection.oomKilled == nil,
                monotonicNanoseconds() < deadline
            else { break }
            usleep(20_000)
        } while true
        let journal = request.journal.flatMap { JournalLog.read($0) }
        return compose(kernel: kernel, journal: journal, request: request)
    }

    /// The file for what was read; nil when it would say nothing worth a file: no kernel line
    /// about the process and no journal (or the kernel's log unreadable, as for a watcher that
    /// is not root, and no journal).
    static func compose(
        kernel: Result<(KernelLog.Reading, KernelLogSelection), SystemCallError>, journal: JournalLog.Reading?,
        request: Request
    ) -> SystemLog? {
        var lines: [String] = []
        var kernelLines = 0
        switch kernel {
        case .success(let (reading, selection)):
            kernelLines = selection.lines.count
            if kernelLines > 0 {
                lines.append("== the kernel's log (/dev/kmsg) about pid \(request.subject.pid) ==")
                lines.append("# " + rule(request.viewer))
                lines += selection.lines
                if let cut = reading.cut { lines.append("[… \(cut)]") }
                if reading.malformed > 0 {
                    lines.append("[… \(reading.malformed) record(s) that were not the kernel's format skipped]")
                }
            } else if request.oomKill || journal != nil {
                lines.append("== the kernel's log (/dev/kmsg) about pid \(request.subject.pid) ==")
                lines.append("[nothing about this process in the \(window) s before the crash\(silence(selection, request))]")
                if let cut = reading.cut { lines.append("[… \(cut)]") }
            }
        case .failure(let error):
            if journal != nil {
                lines.append("== the kernel's log (/dev/kmsg) ==")
                lines.append("[not read: \(error)]")
            }
        }
        if let journal {
            if !lines.isEmpty { lines.append("") }
            let match = request.journal?.match ?? ""
            lines.append("== the journal (journalctl \(match), the last lines before the crash) ==")
            lines += journal.lines
            if journal.lines.isEmpty && journal.problem == nil { lines.append("[no lines]") }
            if let problem = journal.problem { lines.append("[… \(problem)]") }
        }
        guard !lines.isEmpty else { return nil }
        var contents = Array((lines.joined(separator: "\n") + "\n").utf8)
        var truncated = false
        if contents.count > limit {
            contents = Array(contents.prefix(limit)) + Array("\n[… cut: system.log holds at most \(limit >> 10) KiB]\n".utf8)
            truncated = true
        }
        return SystemLog(
            contents: contents, truncated: truncated, kernelLines: kernelLines, journalLines: journal?.lines.count ?? 0)
    }

    /// The who-may-read rule that applied, for the file's second line.
    static func rule(_ viewer: KernelLogViewer) -> String {
        switch viewer {
        case .root: return "the report is root's: the kernel's records about the process, whole"
        case .user(let uid):
            return
                "the report is uid \(uid)'s: only records that name the process (its thread ids and names); of an OOM report, another user's invoking task and task rows are left out"
        }
    }

    /// Why the kernel may have printed nothing, from its settings.
    static func silence(_ selection: KernelLogSelection, _ request: Request) -> String {
        if request.oomKill { return ": the OOM killer's report did not name it within \(oomWait / 1_000_000) ms" }
        if KernelLog.sysctl("debug/exception-trace") == 0 {
            return ": debug.exception-trace is 0, so the kernel prints no fault lines"
        }
        if selection.suppressed { return ": the kernel's rate limit suppressed fault lines then" }
        return ""
    }
}
