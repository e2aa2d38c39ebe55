// RuntimeFiles: the files a language runtime in the crashed process wrote about itself, found and
// read at capture time, while the process (or the kernel, for its core) still holds its working
// directory and root: a JIT's perf map (/tmp/perf-PID.map), the JVM's hs_err file, Node's
// diagnostic report. Runtimes says where each is and parses it; this file reads them as the
// process's user (ProcessAccess.perform, one change of credentials for all of them), through
// RuntimeFile's checks (no symlink followed, nothing but a regular file, never blocking, the
// process's user's own, bounded, recent), in the process's own mount namespace and with its own
// pid (/proc/PID/root, /proc/PID/cwd, NSpid).
//
// Only what a runtime that is there would write is looked for: a perf map when some executable
// memory is no file's (a JIT's code), an hs_err file when libjvm.so is mapped, a Node report
// when the program is Node. The perf map is read while the process is held (its tail, at most
// PerfMap.readLimit) and parsed after it is released (`state`), keeping only the symbols the
// captured threads point into.

import BoundedBytes
import Processes
import ReportModel
import Runtimes

#if canImport(Glibc)
import Glibc
#endif

public struct RuntimeFiles: Sendable {
    /// The perf map's bytes as read (its tail), parsed by `state`.
    var perfMap: (path: String, contents: RuntimeFile.Contents)?
    var crashLogs: [RuntimeCrashLog] = []
    var notes: [String] = []

    /// Whether a runtime's file is worth looking for in a process with these mappings.
    static func wanted(
        mappings: [MemoryMapping], arguments: [String], executable: String?
    ) -> (
        perfMap: Bool, jvm: Bool, node: Bool
    ) {
        let jit = mappings.contains { $0.executable && isAnonymous($0.path) }
        let jvm = mappings.contains { $0.path.hasSuffix("/libjvm.so") }
        let program = (executable ?? arguments.first ?? "").split(separator: "/").last.map(String.init) ?? ""
        let node = program == "node" || program == "nodejs" || mappings.contains { $0.path.containsUTF8("/libnode.so") }
        return (jit, jvm, node)
    }

    /// Memory no file backs: "", "[anon:…]", "/memfd:…" (a JIT's double mapping), "//anon".
    static func isAnonymous(_ path: String) -> Bool {
        path.isEmpty || path.hasPrefix("[anon") || path.hasPrefix("/memfd:") || path.hasPrefix("//anon")
    }

    /// Finds and reads the runtimes' files of a process, as `access`'s user. `started`: the
    /// process's start (Unix seconds); `now`: the capture's time.
    public static func read(
        access: ProcessAccess, mappings: [MemoryMapping], arguments: [String], executable: String?, started: UInt32?,
        now: Int64 = Int64(time(nil))
    ) -> RuntimeFiles {
        var found = RuntimeFiles()
        let wanted = wanted(mappings: mappings, arguments: arguments, executable: executable)
        guard wanted.perfMap || wanted.jvm || wanted.node else { return found }
        let pid = access.pid
        // Its own pid, in its pid namespace: the one its runtime names files with.
        let ownPID = ProcFiles.namespaceIDs(of: pid)?.last ?? pid.rawValue
        // Its user's ids (real, effective, saved, filesystem): whoever of them made the file.
        guard let status = ProcFiles.read("/proc/\(pid)/status", limit: 16384), let owners = uids(status: status) else {
            return found
        }
        // A file from before the process started belongs to an earlier one with the same pid.
        let since = Int64(started ?? 0) - 1
        let root = "/proc/\(pid)/root"
        let cwd = "/proc/\(pid)/cwd"
        func place(_ path: String) -> String { path.hasPrefix("/") ? root + path : cwd + "/" + path }
        do {
            try access.perform {
                if wanted.perfMap {
                    found.readPerfMap(
                        named: "/tmp/perf-\(ownPID).map", at: place("/tmp/perf-\(ownPID).map"), owners: owners,
                        window: since...(now + 60))
                }
                // A crash log is written in the seconds before the death.
                let recent = max(since, now - 60)...(now + 60)
                if wanted.jvm {
                    for path in RuntimeCrashLogs.hsErrPaths(arguments: arguments, pid: ownPID) {
                        if found.readCrashLog(
                            kind: RuntimeCrashLogs.hsErrKind, named: path, at: place(path), owners: owners, window: recent)
                        {
                            break
                        }
                    }
                }
                if wanted.node {
                    found.readNodeReport(
                        arguments: arguments, pid: ownPID, place: place, cwd: cwd, owners: owners, window: recent)
                }
            }
        } catch {
            found.notes.append("the runtimes' files were not looked for: \(error)")
        }
        return found
    }

    /// The ids of /proc/PID/status's Uid: line.
    static func uids(status: [UInt8]) -> Set<UInt32>? {
        guard let line = status.split(separator: UInt8(ascii: "\n")).first(where: { $0.starts(with: "Uid:".utf8) }) else {
            return nil
        }
        let ids = line.dropFirst(4).split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") })
            .compactMap { UInt32(String(decoding: $0, as: UTF8.self)) }
        return ids.isEmpty ? nil : Set(ids)
    }

    mutating func readPerfMap(named name: String, at path: String, owners: Set<UInt32>, window: ClosedRange<Int64>) {
        do {
            guard
                let contents = try RuntimeFile.read(path, limit: PerfMap.readLimit, keep: .tail, owners: owners, modified: window)
            else { return }
            perfMap = (name, contents)
        } catch let refused as RuntimeFile.Refused {
            notes.append("the perf map \(name) was not read: \(refused.reason)")
        } catch {
            notes.append("the perf map \(name) was not read: \(error)")
        }
    }

    /// Whether a log was found there (read, or refused with a note).
    mutating func readCrashLog(
        kind: String, named name: String, at path: String, owners: Set<UInt32>, window: ClosedRange<Int64>
    ) -> Bool {
        do {
            guard
                let contents = try RuntimeFile.read(
                    path, limit: RuntimeCrashLogs.readLimit, owners: owners, modified: window)
            else { return false }
            crashLogs.append(
                RuntimeCrashLogs.log(kind: kind, path: name, contents: contents.bytes, truncated: contents.truncated))
            if contents.truncated {
                notes.append(
                    "the runtime's crash log \(name) is \(contents.size) bytes: only its first \(contents.bytes.count) were kept")
            }
            return true
        } catch let refused as RuntimeFile.Refused {
            // An old log (of an earlier process with this pid) is not this crash's, and not news.
            if !refused.stale { notes.append("the runtime's crash log \(name) was not read: \(refused.reason)") }
            return !refused.stale
        } catch {
            notes.append("the runtime's crash log \(name) was not read: \(error)")
            return true
        }
    }

    mutating func readNodeReport(
        arguments: [String], pid: Int32, place: (String) -> String, cwd: String, owners: Set<UInt32>,
        window: ClosedRange<Int64>
    ) {
        let where_ = RuntimeCrashLogs.nodeReportPlace(arguments: arguments)
        let directory = where_.directory.map(place) ?? cwd
        let shown = where_.directory ?? "its working directory"
        if let filename = where_.filename {
            // A fixed name: "stdout" and "stderr" are not files.
            guard filename != "stdout", filename != "stderr", !filename.contains("/") else { return }
            _ = readCrashLog(
                kind: RuntimeCrashLogs.nodeReportKind, named: shown + "/" + filename, at: directory + "/" + filename,
                owners: owners, window: window)
            return
        }
        guard let listed = RuntimeFile.names(in: directory, limit: RuntimeCrashLogs.maximumDirectoryEntries) else { return }
        if !listed.complete {
            notes.append(
                "Node's report was looked for among the first \(RuntimeCrashLogs.maximumDirectoryEntries) entries of \(shown) only"
            )
        }
        // The newest (the last sequence number) first: one report per crash.
        for name in listed.names.filter({ RuntimeCrashLogs.isNodeReportName($0, pid: pid) }).sorted().reversed() {
            if readCrashLog(
                kind: RuntimeCrashLogs.nodeReportKind, named: shown + "/" + name, at: directory + "/" + name,
                owners: owners, window: window)
            {
                return
            }
        }
    }

    /// What a report keeps: the crash logs, and of the perf map only the symbols that a
    /// thread's registers or a word of a captured stack point into.
    public func state(threads: [ThreadSnapshot]) -> RuntimeState {
        var state = RuntimeState(crashLogs: crashLogs, notes: notes)
        guard let perfMap else { return state }
        let parsed = PerfMap(parsing: perfMap.contents.bytes, startsMidLine: perfMap.contents.skipped > 0)
        var addresses: [UInt64] = []
        for thread in threads {
            addresses.append(contentsOf: thread.registers.gpr)
            guard let stack = thread.stack else { continue }
            stack.bytes.withUnsafeBytes { raw in
                var offset = (8 - Int(stack.start % 8)) % 8
                while offset + 8 <= raw.count {
                    addresses.append(raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                    offset += 8
                }
            }
        }
        state.jitSymbols = PerfMap.symbols(parsed.symbols, holding: addresses)
        if perfMap.contents.skipped > 0 {
            state.notes.append(
                "the perf map \(perfMap.path) is \(perfMap.contents.size) bytes: only its last \(perfMap.contents.bytes.count) (the newest names) were read; code named before them is unnamed"
            )
        }
        if parsed.malformedLines > 0 {
            state.notes.append("the perf map \(perfMap.path): \(parsed.malformedLines) line(s) that do not parse were skipped")
        }
        return state
    }
}
