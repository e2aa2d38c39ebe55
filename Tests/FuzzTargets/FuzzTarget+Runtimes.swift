// The Runtimes targets: a JIT's perf map and a runtime's crash log, as a capture reads them from
// files the process's user wrote (FuzzTarget.swift says what a target is).

import ReportModel
import Reports
import Runtimes

extension FuzzTarget {
    static func perfMap(_ input: UnsafeRawBufferPointer) {
        let bytes = Array(input)
        for startsMidLine in [false, true] {
            let map = PerfMap(parsing: bytes, startsMidLine: startsMidLine)
            // Sorted and disjoint, whatever the lines said: a lookup's binary search relies on it.
            for (a, b) in zip(map.symbols, map.symbols.dropFirst()) where a.end > b.start || a.size == 0 {
                fatalError("perf map symbols overlap or are empty: \(a) \(b)")
            }
            for symbol in map.symbols.prefix(64) {
                _ = PerfMap.lookup(symbol.start, in: map.symbols)
                _ = PerfMap.lookup(symbol.end &- 1, in: map.symbols)
                _ = PerfMap.lookup(symbol.end, in: map.symbols)
            }
            _ = PerfMap.symbols(map.symbols, holding: map.symbols.prefix(16).map(\.start) + [0, UInt64.max])
        }
    }

    static func runtimeLog(_ input: UnsafeRawBufferPointer) {
        let bytes = Array(input)
        for kind in [RuntimeCrashLogs.hsErrKind, RuntimeCrashLogs.nodeReportKind] {
            let log = RuntimeCrashLogs.log(kind: kind, path: "fuzz.log", contents: bytes, truncated: false)
            var event = Event()
            event.kind = .crash
            event.signal = SignalRecord(number: 6, name: "SIGABRT")
            event.threads = [ThreadRecord(tid: ThreadID(1), name: "main", crashed: true, frames: [])]
            RuntimeReport.record(RuntimeState(crashLogs: [log]), into: &event)
            Culprit.mark(&event)
            _ = CrashLog.full(event)
            _ = try? Event.decode(event.jsonData())
        }
    }
}
