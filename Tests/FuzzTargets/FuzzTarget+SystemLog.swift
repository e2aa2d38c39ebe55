// The SystemLog targets: the kernel's records and journalctl's lines, which any process can put
// bytes into (FuzzTarget.swift says what a target is).

import SystemLog

extension FuzzTarget {
    static func kmsg(_ input: UnsafeRawBufferPointer) {
        var records: [KernelLogRecord] = []
        var pid: Int32 = 1
        // A record's key/value lines start with a space and belong to the record before them.
        var record: [UInt8] = []
        for line in Array(input).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            if line.first == UInt8(ascii: " ") {
                record += [UInt8(ascii: "\n")] + line
                continue
            }
            if let parsed = KernelLogRecord(record) { records.append(parsed) }
            record = Array(line)
        }
        if let parsed = KernelLogRecord(record) { records.append(parsed) }
        for parsed in records {
            _ = parsed.line
            if let open = parsed.text.firstIndex(of: "["), let close = parsed.text[open...].firstIndex(of: "]"),
                let named = Int32(parsed.text[parsed.text.index(after: open)..<close]), named > 0
            {
                pid = named
                break
            }
        }
        let subject = KernelLogSubject(pid: pid, threads: [pid &+ 1], names: ["hog", "trace", "crash"])
        for viewer in [KernelLogViewer.root, .user(uid: 1000)] {
            let selection = KernelLogSelection.select(records, about: subject, for: viewer)
            if selection.lines.count > records.count * 2 + 2 { fatalError("more lines than records: \(selection.lines.count)") }
        }
    }

    static func journal(_ input: UnsafeRawBufferPointer) {
        let reading = JournalLog.parse(Array(input), lineLimit: 64)
        for line in reading.lines where line.utf8.count > 64 * 4 + 16 {
            fatalError("a line past its bound: \(line.utf8.count) bytes")
        }
    }
}
