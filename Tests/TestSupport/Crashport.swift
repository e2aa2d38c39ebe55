// Running the real `crashport` executable on real programs and reading what it wrote.

import Foundation
import ReportModel

public struct CrashportRun {
    public var result: RunResult
    public var reportsDirectory: String
    /// Report directories written, oldest first.
    public var reportIDs: [String]

    public func event(_ index: Int = 0) throws -> Event {
        let path = reportsDirectory + "/" + reportIDs[index] + "/event.json"
        guard let data = FileManager.default.contents(atPath: path) else { throw TestFailure("no \(path)") }
        return try Event.decode(data)
    }

    public func minidumpPath(_ index: Int = 0) -> String {
        reportsDirectory + "/" + reportIDs[index] + "/minidump.dmp"
    }
}

extension TestSupport {
    /// `crashport run --reports DIR [options] -- command...` with the stub built from this tree.
    public static func crashportRun(
        _ command: [String], options: [String] = [], reports: String? = nil, environment: [String: String] = [:],
        input: String? = nil, timeout: TimeInterval = 60
    ) throws -> CrashportRun {
        let directory = reports ?? temporaryDirectory("reports")
        var environment = environment
        environment["CRASHPORT_STUB"] = try stub()
        let result = try run(
            [crashport, "run", "--reports", directory] + options + ["--"] + command,
            environment: environment, input: input, timeout: timeout)
        let ids = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
        return CrashportRun(result: result, reportsDirectory: directory, reportIDs: ids)
    }

    /// The crash corpus (Tests/Fixtures/corpus/crash.c) built -O2 with and without frame
    /// pointers, once per test process.
    public static func corpus() throws -> [(variant: String, path: String)] {
        lock.lock()
        defer { lock.unlock() }
        if let builtCorpus { return builtCorpus }
        let directory = temporaryDirectory("corpus")
        let source = fixture("corpus/crash.c")
        let built = [
            (
                "O2-frame-pointers",
                try compile([source], output: directory + "/crash-fp", flags: ["-O2", "-g", "-fno-omit-frame-pointer"])
            ),
            (
                "O2-no-frame-pointers",
                try compile([source], output: directory + "/crash-nofp", flags: ["-O2", "-g", "-fomit-frame-pointer"])
            ),
        ]
        builtCorpus = built
        return built
    }

    nonisolated(unsafe) private static var builtCorpus: [(variant: String, path: String)]?
}

extension Event {
    /// Function names of the crashed thread's frames, in order ("?" where unknown).
    public var crashedFunctions: [String] {
        crashedThreadRecord?.frames?.map { $0.function ?? "?" } ?? []
    }
}

/// Whether `expected` appears in `list` in order (not necessarily adjacent).
public func containsInOrder(_ list: [String], _ expected: [String]) -> Bool {
    var remaining = expected[...]
    for item in list where item == remaining.first {
        remaining = remaining.dropFirst()
        if remaining.isEmpty { return true }
    }
    return remaining.isEmpty
}

extension FrameRecord {
    /// Whether the frame is named `name`: its function, or the symbol that ran there. libc's
    /// `abort` is `__GI_abort` where its debug file is found (its DWARF's name, gdb's too) and
    /// `abort` where it is not; the symbol is `abort` either way.
    public func isNamed(_ name: String) -> Bool { function == name || symbol == name }

    /// libc's mutex lock: `___pthread_mutex_lock` in its DWARF, its public symbol
    /// `pthread_mutex_lock` (or `__pthread_mutex_lock` where that alias is the one kept).
    public var isMutexLock: Bool { isNamed("pthread_mutex_lock") || isNamed("__pthread_mutex_lock") }
}

extension Event {
    /// The crashed thread's frames (empty when there are none).
    public var crashedFrames: [FrameRecord] { crashedThreadRecord?.frames ?? [] }
}

/// Whether frames named `expected` (FrameRecord.isNamed) appear in `frames` in order.
public func containsInOrder(_ frames: [FrameRecord], _ expected: [String]) -> Bool {
    var remaining = expected[...]
    for frame in frames where remaining.first.map(frame.isNamed) == true {
        remaining = remaining.dropFirst()
        if remaining.isEmpty { return true }
    }
    return remaining.isEmpty
}
