// RuntimeCrashLogs: the crash logs a runtime writes before it dies, where to look for them and
// what a report takes from them.
//
//  - HotSpot's fatal-error log (hs_err): `-XX:ErrorFile=PATH` (`%p` the pid, `%%` a percent
//    sign; relative to the working directory), else `hs_err_pidPID.log` in the working
//    directory, else in /tmp. A report takes its "# Problematic frame:" line and the frames of
//    the crashed thread: its "Java frames:" section, or, when it has none (the fault was in
//    compiled Java), the Java entries (J, j, v, A) of its "Native frames:" section.
//  - Node's diagnostic report (`--report-on-fatalerror`): `report.YYYYMMDD.HHMMSS.PID.0.NNN.json`
//    (or `--report-filename`) in `--report-directory`, else the working directory. A report takes
//    `javascriptStack.message` (or, when that only names the trigger, `header.event`) and
//    `javascriptStack.stack`.
//
// Both files are the process's user's: the parsers take any bytes (cut at the read limit, not
// UTF-8, not JSON) and keep at most `maximumFrames` frames of at most `maximumLineBytes` each.

import FoundationEssentials
import ReportModel

public enum RuntimeCrashLogs {
    /// The bytes of a crash log read and attached (a HotSpot log is 50-100 KB, Node's report
    /// 15-100 KB).
    public static let readLimit = 2 << 20
    public static let maximumFrames = 64
    public static let maximumLineBytes = 512
    /// Entries of a working directory looked at for Node's report.
    public static let maximumDirectoryEntries = 20_000

    public static let hsErrKind = "hs_err"
    public static let nodeReportKind = "node-report"

    /// A crash log's bytes as its record: `kind` decides the parser.
    public static func log(kind: String, path: String, contents: [UInt8], truncated: Bool) -> RuntimeCrashLog {
        var log = RuntimeCrashLog(kind: kind, path: path, contents: contents, truncated: truncated)
        switch kind {
        case hsErrKind: (log.problematicFrame, log.frames) = hsErr(contents)
        case nodeReportKind: (log.problematicFrame, log.frames) = nodeReport(contents) ?? (nil, [])
        default: break
        }
        return log
    }

    // MARK: HotSpot

    /// The problematic frame and the crashed thread's Java frames of an hs_err file.
    public static func hsErr(_ bytes: [UInt8]) -> (problematicFrame: String?, frames: [String]) {
        var problematic: String?
        var javaFrames: [String]?
        var nativeJavaFrames: [String] = []
        var section: Section = .none
        var previousWasProblematicHeading = false
        for raw in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            let line = text(raw)
            if previousWasProblematicHeading {
                previousWasProblematicHeading = false
                let frame = cleanedFrame(String(line.drop { $0 == "#" || $0 == " " }))
                if !frame.isEmpty { problematic = frame }
                continue
            }
            if line.hasPrefix("# Problematic frame:") {
                previousWasProblematicHeading = true
                continue
            }
            if line.hasPrefix("Java frames:") {
                section = javaFrames == nil ? .java : .none
                if javaFrames == nil { javaFrames = [] }
                continue
            }
            if line.hasPrefix("Native frames:") {
                section = nativeJavaFrames.isEmpty ? .native : .none
                continue
            }
            // A section ends at its first empty line (or the next heading).
            if line.isEmpty || line.hasPrefix("---------------") {
                section = .none
                continue
            }
            switch section {
            case .java:
                if javaFrames!.count < maximumFrames { javaFrames!.append(cleanedFrame(line)) }
            case .native:
                guard let kind = line.first, "JjvA".contains(kind), line.dropFirst().first == " " else { continue }
                if nativeJavaFrames.count < maximumFrames { nativeJavaFrames.append(cleanedFrame(line)) }
            case .none:
                break
            }
        }
        let frames = (javaFrames?.isEmpty == false ? javaFrames : nil) ?? nativeJavaFrames
        return (problematic, frames)
    }

    enum Section { case none, java, native }

    /// A line of at most `maximumLineBytes`, as text.
    static func text(_ raw: ArraySlice<UInt8>) -> String {
        var bytes = raw
        if bytes.last == UInt8(ascii: "\r") { bytes = bytes.dropLast() }
        let cut = bytes.count > maximumLineBytes
        let line = String(decoding: bytes.prefix(maximumLineBytes), as: UTF8.self)
        return cut ? line + "…" : line
    }

    /// An hs_err frame without what changes from run to run and says nothing to a reader: the
    /// blanks collapsed, and a compiled frame's size, pc and code range dropped
    /// (`J 9 c2 UnsafeCrash.writeThrough(JI)V (10 bytes) @ 0x00007f… [0x…+0x22]` →
    /// `J 9 c2 UnsafeCrash.writeThrough(JI)V`).
    public static func cleanedFrame(_ line: String) -> String {
        var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        if words.first == "J" || words.first == "A", let at = words.firstIndex(of: "@") {
            words.removeSubrange(at...)
            if let size = words.lastIndex(where: { $0.hasPrefix("(") }), words.last == "bytes)" {
                words.removeSubrange(size...)
            }
        }
        return words.joined(separator: " ")
    }

    /// Where a HotSpot JVM with these arguments writes its fatal-error log, in the order it
    /// tries them: paths as the process names them (a relative one is relative to its working
    /// directory). `pid` is its own pid (in its pid namespace).
    public static func hsErrPaths(arguments: [String], pid: Int32) -> [String] {
        let name = "hs_err_pid\(pid).log"
        // The last -XX:ErrorFile= wins, as with every -XX flag.
        if let flag = arguments.last(where: { $0.hasPrefix("-XX:ErrorFile=") }) {
            let pattern = String(flag.dropFirst("-XX:ErrorFile=".count))
            if !pattern.isEmpty {
                // When it cannot be written, HotSpot falls back to the temporary directory.
                return [expand(pattern, pid: pid), "/tmp/" + name]
            }
        }
        return [name, "/tmp/" + name]
    }

    /// HotSpot's `%p` (the pid) and `%%` in -XX:ErrorFile.
    static func expand(_ pattern: String, pid: Int32) -> String {
        var result = ""
        var percent = false
        for character in pattern {
            if percent {
                switch character {
                case "p": result += String(pid)
                case "%": result += "%"
                default: result += "%" + String(character)
                }
                percent = false
            } else if character == "%" {
                percent = true
            } else {
                result.append(character)
            }
        }
        return percent ? result + "%" : result
    }

    // MARK: Node

    /// The error message and JavaScript stack of a Node diagnostic report; nil when it is not
    /// one (not JSON, no javascriptStack and no header).
    public static func nodeReport(_ bytes: [UInt8]) -> (problematicFrame: String?, frames: [String])? {
        guard let report = try? JSONDecoder().decode(NodeReport.self, from: Data(bytes)) else { return nil }
        guard report.header != nil || report.javascriptStack != nil else { return nil }
        func clip(_ text: String) -> String {
            let line = text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
            return line.utf8.count > maximumLineBytes
                ? String(decoding: line.utf8.prefix(maximumLineBytes), as: UTF8.self) + "…" : line
        }
        var message = report.javascriptStack?.message.map(clip)
        if message == nil || message!.isEmpty || message == report.header?.trigger, let event = report.header?.event,
            !event.isEmpty
        {
            message = clip(event)
        }
        let frames = (report.javascriptStack?.stack ?? []).prefix(maximumFrames).map { clip($0) }
        return (message?.isEmpty == false ? message : nil, Array(frames))
    }

    struct NodeReport: Decodable {
        struct Header: Decodable {
            var event: String?
            var trigger: String?
        }
        struct Stack: Decodable {
            var message: String?
            var stack: [String]?
        }
        var header: Header?
        var javascriptStack: Stack?
    }

    /// Where Node writes its report: the directory as the process names it (nil: its working
    /// directory), and the file name when `--report-filename` fixes it.
    public static func nodeReportPlace(arguments: [String]) -> (directory: String?, filename: String?) {
        func value(of option: String) -> String? {
            var found: String?
            var index = 1
            while index < arguments.count {
                let argument = arguments[index]
                // Node's own options come before the script; the script's are its own.
                if !argument.hasPrefix("-") { break }
                if argument.hasPrefix(option + "=") {
                    found = String(argument.dropFirst(option.count + 1))
                } else if argument == "--report-directory" || argument == "--report-filename" {
                    if argument == option, index + 1 < arguments.count { found = arguments[index + 1] }
                    index += 1
                }
                index += 1
            }
            return found?.isEmpty == false ? found : nil
        }
        return (value(of: "--report-directory"), value(of: "--report-filename"))
    }

    /// Whether `name` is a report Node wrote for `pid`: report.YYYYMMDD.HHMMSS.PID.THREAD.SEQ.json.
    public static func isNodeReportName(_ name: String, pid: Int32) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 7, parts[0] == "report", parts[6] == "json", parts[3] == Substring(String(pid)) else { return false }
        return [parts[1], parts[2], parts[4], parts[5]].allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
    }
}
