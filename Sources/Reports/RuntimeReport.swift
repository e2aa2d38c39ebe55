// RuntimeReport: what the language runtimes in the process said (ReportModel's RuntimeState,
// captured by LiveProcess' RuntimeFiles) put into the event.
//
//  - JIT frames: a frame whose pc is in no module (a JIT's code) is named from the perf map's
//    symbols, with `language: "jit"`. Only such frames: a module's frame keeps its ELF name.
//    Offline, an event.json keeps these names (OfflineSymbolicator re-symbolicates module frames
//    only); a minidump holds no perf map, so a minidump unwound again has them unnamed.
//  - Crash logs: each becomes a RuntimeLogRecord (its bytes are attached by the report's
//    writer); Node's error message is the reason when nothing else gave one.
//  - The title's location when no frame is the program's (Culprit.title): the JVM's problematic
//    frame, or the first frame of Node's JavaScript stack.

import ReportModel
import Runtimes

public enum RuntimeReport {
    /// Names the frames no module holds from `symbols` (sorted, disjoint).
    public static func nameJITFrames(_ event: inout Event, symbols: [JITSymbol]) {
        guard !symbols.isEmpty, var threads = event.threads else { return }
        for threadIndex in threads.indices {
            guard var frames = threads[threadIndex].frames else { continue }
            for (position, frame) in frames.enumerated() where frame.module == nil && frame.function == nil {
                guard let pc = frame.pc?.value else { continue }
                // A caller's pc is a return address: the call is the byte before it.
                let isReturnAddress = position > 0 && frame.trust != .context && frame.trust != .signalFrame
                guard let symbol = PerfMap.lookup(isReturnAddress ? pc &- 1 : pc, in: symbols) else { continue }
                frames[position].function = symbol.name
                frames[position].functionOffset = HexAddress(pc &- symbol.start)
                frames[position].language = "jit"
            }
            threads[threadIndex].frames = frames
        }
        event.threads = threads
    }

    /// The runtimes' crash logs and notes, into the event.
    public static func record(_ runtime: RuntimeState, into event: inout Event) {
        if !runtime.notes.isEmpty { event.notes = (event.notes ?? []) + runtime.notes }
        guard !runtime.crashLogs.isEmpty else { return }
        event.runtimeLogs = runtime.crashLogs.map { log in
            RuntimeLogRecord(
                kind: log.kind, path: log.path, problematicFrame: log.problematicFrame,
                frames: log.frames.isEmpty ? nil : log.frames, truncated: log.truncated ? true : nil)
        }
        if event.reason == nil, let node = runtime.crashLogs.first(where: { $0.kind == RuntimeCrashLogs.nodeReportKind }),
            let message = node.problematicFrame
        {
            event.reason = message
        }
    }

    /// Where the runtime's crash log says the crash was, in a title's words: the JVM's
    /// problematic frame (`J 9 c2 UnsafeCrash.writeThrough(JI)V`), the first frame of Node's
    /// JavaScript stack (`crashInNative (/srv/app.js:2:106)`); nil when no log says.
    public static func location(_ event: Event) -> String? {
        for log in event.runtimeLogs ?? [] {
            switch log.kind {
            case RuntimeCrashLogs.hsErrKind?:
                if let frame = log.problematicFrame, !frame.isEmpty { return frame }
            case RuntimeCrashLogs.nodeReportKind?:
                if let first = log.frames?.first {
                    let frame = first.hasPrefix("at ") ? String(first.dropFirst(3)) : first
                    if !frame.isEmpty { return frame }
                }
            default: continue
            }
        }
        return nil
    }

    /// `crashport show`'s section for the runtimes' crash logs: where each was, the fault in
    /// its words and its frames (at most 16; all in the attached file).
    static func logSection(_ event: Event) -> [String] {
        var lines: [String] = []
        for log in event.runtimeLogs ?? [] {
            let name = log.kind == RuntimeCrashLogs.hsErrKind ? "The JVM's fatal-error log" : "Node's report"
            lines.append("\(name) (\(CrashLog.escaped(log.path ?? "?"))\(log.truncated == true ? ", cut" : "")):")
            if let frame = log.problematicFrame {
                let label = log.kind == RuntimeCrashLogs.hsErrKind ? "Problematic frame" : "Message"
                lines.append("  \(label): \(CrashLog.escaped(frame))")
            }
            let frames = log.frames ?? []
            if !frames.isEmpty {
                lines.append(log.kind == RuntimeCrashLogs.hsErrKind ? "  Java frames:" : "  JavaScript stack:")
                for frame in frames.prefix(16) { lines.append("    \(CrashLog.escaped(frame))") }
                if frames.count > 16 { lines.append("    … \(frames.count - 16) more") }
            }
            lines.append("")
        }
        return lines
    }
}
