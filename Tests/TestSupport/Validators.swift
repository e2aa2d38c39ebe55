// The independent minidump readers: rust-minidump's minidump-stackwalk (fetched into
// tools/.cache by tools/fetch-validators) and LLDB 14 (Debian's lldb-14, from tools/install).

import Foundation

extension TestSupport {
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
