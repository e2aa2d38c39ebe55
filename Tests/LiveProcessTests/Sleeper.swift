// A real live process to capture: /bin/sleep, with its code mapped.

import Foundation
import LiveProcess
import Processes
import ReportModel
import XCTest

#if canImport(Glibc)
import Glibc
#endif

struct Sleeper {
    let process: Process
    let pid: ProcessID
    /// Its /proc/PID/maps once sleep's code is mapped.
    let maps: [MemoryMapping]

    /// Starts `/bin/sleep 60`; `stop()` ends it.
    static func start() throws -> Sleeper {
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["60"]
        try sleeper.run()
        let pid = ProcessID(sleeper.processIdentifier)
        // Until sleep's code is mapped (Process returns once it has spawned; /proc/PID/exe names
        // the new program before the kernel has mapped it). /proc files say size 0: read to
        // their end, as capture does.
        var maps: [MemoryMapping] = []
        for _ in 0..<500 {
            maps = MemoryMapping.parse(ProcFiles.read("/proc/\(pid)/maps") ?? [])
            if maps.contains(where: { $0.executable && $0.path.hasSuffix("sleep") }) { break }
            usleep(10_000)
        }
        return Sleeper(process: sleeper, pid: pid, maps: maps)
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
