// The independent readers: rust-minidump's minidump-stackwalk (fetched into tools/.cache by
// tools/fetch-validators), LLDB 14 (Debian's lldb-14, from tools/install) and pystack (PyPI,
// fetched by tools/fetch-validators).

import Foundation

extension TestSupport {
    /// pystack (PyPI, installed by tools/fetch-validators into tools/.cache/pystack): the
    /// directory to put on PYTHONPATH for `python3 -m pystack`, nil when it is not there.
    public static var pystack: String? {
        let directory = repositoryRoot + "/tools/.cache/pystack"
        return FileManager.default.fileExists(atPath: directory + "/.installed-pystack==1.7.2") ? directory : nil
    }

    public static var minidumpStackwalk: String {
        repositoryRoot + "/tools/.cache/mcp/minidumpmcp/tools/bin/minidump-stackwalk-linux"
    }

    /// `minidump-stackwalk --json --use-local-debuginfo FILE`, parsed.
    public static func stackwalk(_ minidump: String) throws -> [String: Any] {
        guard FileManager.default.isExecutableFile(atPath: minidumpStackwalk) else {
            throw TestFailure("minidump-stackwalk is missing: run tools/fetch-validators (tools/test does)")
        }
        let result = try run([minidumpStackwalk, "--json", "--use-local-debuginfo", minidump], timeout: 120)
        guard result.status == .exited(0),
            let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        else {
            throw TestFailure("minidump-stackwalk failed (\(result.status)): \(result.stderr.suffix(2000))")
        }
        return json
    }

    /// `minidump-stackwalk --dump FILE`: every stream's raw structs as text. CrashpadInfo's
    /// annotations are printed only here (`  simple_annotations["KEY"] = VALUE`); the --json of
    /// 0.25.0 has no field for them.
    public static func stackwalkDump(_ minidump: String) throws -> String {
        guard FileManager.default.isExecutableFile(atPath: minidumpStackwalk) else {
            throw TestFailure("minidump-stackwalk is missing: run tools/fetch-validators (tools/test does)")
        }
        let result = try run([minidumpStackwalk, "--dump", minidump], timeout: 120)
        guard result.status == .exited(0) else {
            throw TestFailure("minidump-stackwalk --dump failed (\(result.status)): \(result.stderr.suffix(2000))")
        }
        return result.stdout
    }

    /// `lldb-14 --batch -c FILE -o COMMAND...`, its output.
    public static func lldb(_ minidump: String, commands: [String]) throws -> String {
        let lldb = "/usr/bin/lldb-14"
        guard FileManager.default.isExecutableFile(atPath: lldb) else {
            throw TestFailure("lldb-14 is missing: apt-get install lldb-14 (tools/install does)")
        }
        let result = try run(
            [lldb, "--batch", "-c", minidump] + commands.flatMap { ["-o", $0] },
            environment: ["PYTHONPATH": "/usr/lib/llvm-14/lib/python3.11/dist-packages"], timeout: 120)
        return result.stdout + result.stderr
    }
}

/// Sentry's own code, installed from PyPI by tools/fetch-validators into tools/.cache: Relay's
/// event normalizer (sentry-relay 0.10.1) and symbolic (13.9.0, for debug ids of real files).
public enum SentryValidators {
    /// Why the validators are missing when PyPI could not be reached (the test skips, saying
    /// so); nil when they are there.
    public static func unavailable() -> String? {
        lock.lock()
        defer { lock.unlock() }
        if ready() { return nil }
        // Not fetched yet (a focused `swift test`): fetch them now, as tools/test would have.
        let fetch = try? TestSupport.run([TestSupport.repositoryRoot + "/tools/fetch-validators"], timeout: 600)
        if ready() { return nil }
        return "sentry-relay or symbolic could not be installed from PyPI: "
            + (fetch.map { String($0.stderr.suffix(1000)) } ?? "tools/fetch-validators did not run")
    }

    static let cache = TestSupport.repositoryRoot + "/tools/.cache"
    static let lock = NSLock()

    static func ready() -> Bool {
        FileManager.default.fileExists(atPath: cache + "/relay/.installed-sentry-relay==0.10.1")
            && FileManager.default.fileExists(atPath: cache + "/symbolic/.installed-symbolic==13.9.0")
    }

    /// `StoreNormalizer(project_id=1).normalize_event(raw_event=JSON)`: the event as Relay
    /// stores it, with `errors` where it found the schema broken.
    public static func normalize(_ event: Data) throws -> [String: Any] {
        let input = TestSupport.temporaryDirectory("relay") + "/event.json"
        try event.write(to: URL(fileURLWithPath: input))
        defer { try? FileManager.default.removeItem(atPath: (input as NSString).deletingLastPathComponent) }
        let script = """
            import json, sys
            from sentry_relay.processing import StoreNormalizer
            raw = open(sys.argv[1]).read()
            print(json.dumps(StoreNormalizer(project_id=1).normalize_event(raw_event=raw)))
            """
        let result = try TestSupport.run(
            ["python3", "-c", script, input], environment: ["PYTHONPATH": cache + "/relay"], timeout: 120)
        guard result.status == .exited(0),
            let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        else { throw TestFailure("sentry-relay failed (\(result.status)): \(result.stderr.suffix(2000))") }
        return json
    }

    /// symbolic's `Object.debug_id` (and `code_id`) of the ELF file at `path`.
    public static func debugID(of path: String) throws -> (debugID: String, codeID: String) {
        let script = """
            import sys
            from symbolic import Archive
            obj = next(Archive.open(sys.argv[1]).iter_objects())
            print(obj.debug_id, obj.code_id)
            """
        let result = try TestSupport.run(
            ["python3", "-c", script, path], environment: ["PYTHONPATH": cache + "/symbolic"], timeout: 120)
        let fields = result.stdout.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        guard result.status == .exited(0), fields.count == 2 else {
            throw TestFailure("symbolic failed (\(result.status)): \(result.stderr.suffix(2000))")
        }
        return (fields[0], fields[1])
    }
}
