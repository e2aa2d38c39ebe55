// The deaths and hangs watched beyond crashes (--trace-exit, --hang-ms): run and watch.

import ArgumentParser
import FoundationEssentials
import Watcher

/// The deaths and hangs watched beyond crashes: shared by run and watch (whose clients may
/// also ask for them: CRASHPORT_TRACE_EXIT, CRASHPORT_HANG_MS, CRASHPORT_HANG_KILL).
struct DeathFlags: ParsableArguments {
    @Flag(
        name: .long,
        help: "Keep the program traced for its whole life: a SIGKILL or an OOM kill is reported with every thread's stack.")
    var traceExit = false

    @Flag(name: .long, help: "With --trace-exit: an exit() with a non-zero status is reported too.")
    var traceExitCodes = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Report a hang when crashport_heartbeat() has not been called for MS (default: $CRASHPORT_HANG_MS; off).",
            valueName: "MS"))
    var hangMs: UInt64?

    @Flag(name: .long, help: "With --hang-ms: after the hang report, end the program with SIGABRT (a watchdog's kill).")
    var hangKill = false

    /// The flags checked (a usage error, exit 64, otherwise), with CRASHPORT_HANG_MS.
    /// `clientsNameTheirs`: --hang-kill may come alone (watch: for the clients that name their
    /// own hang time).
    func validated(
        command: String, clientsNameTheirs: Bool = false
    ) -> (
        traceExit: Bool, traceExitCodes: Bool, hangMilliseconds: UInt64?, hangKill: Bool
    ) {
        if traceExitCodes && !traceExit { usageError("\(command): --trace-exit-codes needs --trace-exit") }
        var hang = hangMs
        if hang == nil, let text = ProcessInfo.processInfo.environment["CRASHPORT_HANG_MS"], !text.isEmpty {
            guard let value = UInt64(text) else {
                usageError("\(command): CRASHPORT_HANG_MS=\(text) is not a number of milliseconds")
            }
            hang = value
        }
        let range = SidecarConfiguration.hangMillisecondsRange
        if let hang, hang < range.lowerBound { usageError("\(command): --hang-ms must be at least \(range.lowerBound)") }
        if let hang, hang > range.upperBound {
            usageError("\(command): --hang-ms must be at most \(range.upperBound) (a day)")
        }
        if hangKill && hang == nil && !clientsNameTheirs {
            usageError("\(command): --hang-kill needs --hang-ms (or CRASHPORT_HANG_MS)")
        }
        return (traceExit, traceExitCodes, hang, hangKill)
    }
}
