// SystemProbe: the machine's description for SystemInfo (uname, CPU vendor/family/model) and
// the machine's files a minidump keeps (cpuinfo, os-release), read once per watcher process.

import BoundedBytes
import FoundationEssentials
import Processes
import ReportModel
#if canImport(Glibc)
import Glibc
#endif

enum SystemProbe {
    nonisolated(unsafe) private static var cached: SystemInfo?

    /// /proc/cpuinfo as first read.
    static let cpuInfo = ProcFiles.read("/proc/cpuinfo")
    /// /etc/lsb-release, else /etc/os-release.
    static let lsbRelease = ProcFiles.read("/etc/lsb-release") ?? ProcFiles.read("/etc/os-release")

    static func current() -> SystemInfo {
        if let cached { return cached }
        var info = SystemInfo()
        var names = utsname()
        if uname(&names) == 0 {
            func field<T>(_ value: T) -> String {
                withUnsafeBytes(of: value) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            }
            info.sysname = field(names.sysname)
            info.release = field(names.release)
            info.version = field(names.version)
            info.machine = field(names.machine)
        }
        info.cpuCount = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        if let text = cpuInfo.map({ String(decoding: $0, as: UTF8.self) }) {
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmed }
                guard parts.count == 2 else {
                    if line.isEmpty { break }
                    continue
                }
                switch parts[0] {
                case "vendor_id": info.cpuVendor = parts[1]
                case "cpu family": info.cpuFamily = UInt16(parts[1]) ?? 0
                case "model": info.cpuModel = UInt16(parts[1]) ?? 0
                case "stepping": info.cpuStepping = UInt16(parts[1]) ?? 0
                default: break
                }
                if parts[0] == "flags" { break }  // first processor block is enough
            }
        }
        cached = info
        return info
    }
}
