// KernelLogSelection: of the kernel's records around a death, the ones about that process, and
// only what the report's owner may read of them.
//
// What is about the process:
// - its fault line, as the kernel prints it for a fatal signal nothing handled (with
//   debug.exception-trace 1, at most 10 in 5 s): `NAME[TID]: segfault at …`, `traps: NAME[TID]
//   trap invalid opcode …`, `NAME[TID]: potentially unexpected fatal signal N.`
//   (kernel.print-fatal-signals), and the `Code: …` record printed with it;
// - the OOM killer's report that killed it: every record from `X invoked oom-killer:` through
//   `… Killed process PID (NAME) …`, when PID is one of its threads, and the OOM reaper's line
//   about it (`oom_reaper: reaped process PID (NAME) …`).
//
// Who may read what (docs/security.md, "The system's log"): /dev/kmsg is root's
// (kernel.dmesg_restrict), and the report is its owner's. For a report of root's, the records
// above as they are. For another user's report, a record must name the process (one of its
// thread ids and, as the kernel's comm, its name or a thread's: a pid reused by someone else
// within the window does not match), and of its OOM report two parts are left out, with a line
// that says so: the invoking task's lines (its name, its kernel stack and registers) when the
// report's `CPU: … UID: U PID: P` line says it is neither the process nor a task of the user's,
// and the rows of the task table whose uid column is another user's (a global OOM lists every
// task on the machine: other users' pids, names and memory). The rest of the OOM report is the
// cgroup's or the machine's memory (what /proc/meminfo and the cgroup's files show anyone).
// Records of other processes interleaved in a block (another CPU's fault line) are left out for
// every owner.

public enum KernelLogViewer: Sendable, Equatable {
    /// The report is root's: it may read the whole log.
    case root
    /// The report is this user's.
    case user(uid: UInt32)
}

/// The process a selection is about.
public struct KernelLogSubject: Sendable, Equatable {
    public var pid: Int32
    /// Its thread ids, the pid among them: the kernel names a fault by the thread's id.
    public var threads: Set<Int32>
    /// Its names as the kernel's comm (at most 15 bytes): the executable's and each thread's.
    public var names: Set<String>

    public init(pid: Int32, threads: some Sequence<Int32> = [], names: some Sequence<String>) {
        self.pid = pid
        self.threads = Set(threads).union([pid])
        self.names = Set(names.map { String(decoding: Array($0.utf8.prefix(15)), as: UTF8.self) })
    }
}

public struct KernelLogSelection: Sendable, Equatable {
    /// The lines to show, in the log's order: records as dmesg prints them, and `[…]` lines
    /// where something was left out.
    public var lines: [String] = []
    /// How many fault lines and OOM reports (whole or in part) about the process were found.
    public var faultLines = 0
    public var oomReports = 0
    /// The victim's pid of an OOM report found for it (nil: none).
    public var oomKilled: Int32?
    /// A `… callbacks suppressed` line in the window: the kernel's rate limit dropped fault lines.
    public var suppressed = false

    /// The most records one OOM report may span (a global OOM's task table has a row a task).
    public static let blockLimit = 65_536

    public init() {}

    /// Selects from `records` (in sequence order) what is about `subject`, as `viewer` may read it.
    public static func select(
        _ records: [KernelLogRecord], about subject: KernelLogSubject, for viewer: KernelLogViewer
    ) -> KernelLogSelection {
        var selection = KernelLogSelection()
        var index = 0
        while index < records.count {
            let text = records[index].text
            if text.containsUTF8(" callbacks suppressed") { selection.suppressed = true }
            if text.containsUTF8(" invoked oom-killer: "), let end = blockEnd(records, from: index) {
                if let victim = killedProcess(records[end].text), names(victim, subject, viewer) {
                    selection.lines += oomReport(records[index...end], subject: subject, viewer: viewer)
                    selection.oomReports += 1
                    selection.oomKilled = victim.pid
                }
                index = end + 1
                continue
            }
            if let fault = faultLine(text), names(fault, subject, viewer) {
                selection.lines.append(records[index].line)
                selection.faultLines += 1
                if index + 1 < records.count, records[index + 1].sequence == records[index].sequence &+ 1,
                    records[index + 1].text.hasPrefix("Code: ")
                {
                    selection.lines.append(records[index + 1].line)
                    index += 1
                }
            } else if let reaped = reapedProcess(text), names(reaped, subject, viewer) {
                selection.lines.append(records[index].line)
            }
            index += 1
        }
        return selection
    }

    /// Whether a (thread id, comm) the kernel printed is the subject's, as `viewer` may see it:
    /// its thread; for a user, also one of its names.
    static func names(_ task: (pid: Int32, name: String), _ subject: KernelLogSubject, _ viewer: KernelLogViewer) -> Bool {
        guard subject.threads.contains(task.pid) else { return false }
        return viewer == .root || subject.names.contains(task.name)
    }

    /// The index of the `Killed process` record that ends the OOM report starting at `start`;
    /// nil when it does not end within `blockLimit` records (or another report starts first).
    static func blockEnd(_ records: [KernelLogRecord], from start: Int) -> Int? {
        var index = start + 1
        while index < records.count, index - start < blockLimit {
            let text = records[index].text
            if killedProcess(text) != nil { return index }
            if text.containsUTF8(" invoked oom-killer: ") { return nil }
            index += 1
        }
        return nil
    }

    /// The records of one OOM report as `viewer` may read them.
    static func oomReport(
        _ block: ArraySlice<KernelLogRecord>, subject: KernelLogSubject, viewer: KernelLogViewer
    ) -> [String] {
        var lines: [String] = []
        // The invoking task's part: its first line through its stack's `</TASK>` (or, without
        // one, up to the memory report).
        var invokerEnd = block.startIndex
        if case .user(let uid) = viewer, !invokerIsOwn(block, subject: subject, uid: uid) {
            invokerEnd =
                block.firstIndex { $0.text.trimmed == "</TASK>" }.map { $0 + 1 }
                ?? block.firstIndex { memoryReportStarts($0.text) } ?? block.startIndex + 1
            lines.append(
                "[… the OOM killer was invoked by a task of another user: its \(invokerEnd - block.startIndex) line(s) are left out]"
            )
        }
        var inTable = false
        var otherUsersRows = 0
        for record in block[invokerEnd...] {
            let text = record.text
            if text.hasPrefix("Tasks state ") { inTable = true }
            if let task = faultLine(text), !subject.threads.contains(task.pid) { continue }
            if inTable, let rowUID = taskRowUID(text) {
                if case .user(let uid) = viewer, rowUID != uid {
                    otherUsersRows += 1
                    continue
                }
            } else if inTable, !text.hasPrefix("Tasks state "), !text.hasPrefix("[  pid  ]") {
                inTable = false
                if otherUsersRows > 0 { lines.append("[… \(otherUsersRows) task row(s) of other users left out]") }
                otherUsersRows = 0
            }
            lines.append(record.line)
        }
        if otherUsersRows > 0 { lines.append("[… \(otherUsersRows) task row(s) of other users left out]") }
        return lines
    }

    /// Whether the OOM report's `CPU: N UID: U PID: P Comm: C` line names the subject, or a
    /// task of the user's. A kernel that prints no UID there (before 6.13) says nothing of
    /// the task's owner: then only the subject's own invocation counts.
    static func invokerIsOwn(_ block: ArraySlice<KernelLogRecord>, subject: KernelLogSubject, uid: UInt32) -> Bool {
        guard let line = block.prefix(4).first(where: { $0.text.hasPrefix("CPU: ") })?.text else { return false }
        let words = line.split(separator: " ")
        func value(after key: Substring) -> Substring? {
            words.firstIndex(of: key).flatMap { $0 + 1 < words.count ? words[$0 + 1] : nil }
        }
        if let pid = value(after: "PID:").flatMap({ Int32($0) }), subject.threads.contains(pid),
            let comm = value(after: "Comm:"), subject.names.contains(String(comm))
        {
            return true
        }
        return value(after: "UID:").flatMap { UInt32($0) } == uid
    }

    static func memoryReportStarts(_ text: String) -> Bool {
        text.hasPrefix("memory: ") || text.hasPrefix("Mem-Info:") || text.hasPrefix("Tasks state ")
    }

    /// A task table row's uid: `[  26576]     0 26576    17142 …` (pid, uid, tgid, …).
    static func taskRowUID(_ text: String) -> UInt32? {
        guard text.hasPrefix("["), let close = text.firstIndex(of: "]"),
            Int32(text[text.index(after: text.startIndex)..<close].trimmed) != nil
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ").first.flatMap { UInt32($0) }
    }

    /// The thread and comm of a fault line: `NAME[TID]: segfault at …`, `traps: NAME[TID] …`,
    /// `NAME[TID]: potentially unexpected fatal signal …`; nil for any other text.
    static func faultLine(_ text: String) -> (pid: Int32, name: String)? {
        let traps = text.hasPrefix("traps: ")
        let body = traps ? text.dropFirst(7) : Substring(text)
        guard let (task, rest) = bracketedTask(body) else { return nil }
        if traps || rest.hasPrefix(": segfault at ") || rest.hasPrefix(": potentially unexpected fatal signal") {
            return task
        }
        return nil
    }

    /// The `NAME[TID]` a text starts with (NAME 1 to 64 bytes), and what follows it.
    static func bracketedTask(_ text: Substring) -> ((pid: Int32, name: String), Substring)? {
        var search = text.startIndex
        while let open = text[search...].firstIndex(of: "["), text.distance(from: text.startIndex, to: open) <= 64 {
            let after = text.index(after: open)
            if let close = text[after...].firstIndex(of: "]"), open > text.startIndex,
                let pid = Int32(text[after..<close]), pid > 0
            {
                return ((pid, String(text[..<open])), text[text.index(after: close)...])
            }
            search = after
        }
        return nil
    }

    /// The victim of `… Killed process PID (NAME) …`.
    static func killedProcess(_ text: String) -> (pid: Int32, name: String)? {
        processInParentheses(text, after: "Killed process ")
    }

    /// The process of `oom_reaper: reaped process PID (NAME), …`.
    static func reapedProcess(_ text: String) -> (pid: Int32, name: String)? {
        guard text.hasPrefix("oom_reaper: ") else { return nil }
        return processInParentheses(text, after: "reaped process ")
    }

    /// `PID (NAME)` after `key` in `text`.
    static func processInParentheses(_ text: String, after key: String) -> (pid: Int32, name: String)? {
        guard let range = text.firstUTF8Range(of: key) else { return nil }
        let rest = text[range.upperBound...]
        guard let space = rest.firstIndex(of: " "), let pid = Int32(rest[..<space]), pid > 0 else { return nil }
        let named = rest[rest.index(after: space)...]
        guard named.hasPrefix("("), let close = named.lastIndex(of: ")") else { return nil }
        // The name may hold ") " itself; it ends at the last ")" before the record's next field.
        let end = named.firstUTF8Range(of: ") ")?.lowerBound ?? close
        return (pid, String(named[named.index(after: named.startIndex)..<end]))
    }
}
