// What capture takes (--no-ptrace, --capture-environment, --no-journal, --debuginfod, --in-app): run and watch.

import ArgumentParser
import Reports

/// How much capture takes: shared by run and watch.
struct CaptureFlags: ParsableArguments {
    @Flag(name: .long, help: "Do not ptrace: report the crashing thread from the stub's record only.")
    var noPtrace = false

    @Flag(name: .long, help: "Also keep the process environment in the minidump (it may hold secrets).")
    var captureEnvironment = false

    @Flag(name: .long, help: "Do not also write each report to the journal (as systemd-coredump's entry, for coredumpctl).")
    var noJournal = false

    @Flag(
        name: .long,
        help:
            "After the verdict, ask the debuginfod servers in $DEBUGINFOD_URLS for the debug files not found here.")
    var debuginfod = false

    /// --debuginfod, checked: it needs servers to ask.
    func debuginfodWanted(command: String) -> Bool {
        if debuginfod { requireDebuginfodServers(command: command) }
        return debuginfod
    }

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Frames of modules matching PATTERN (fnmatch, path or file name) are the program's own (repeatable).",
            valueName: "PATTERN"))
    var inApp: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp("Frames of modules matching PATTERN are not the program's own (repeatable).", valueName: "PATTERN"))
    var notInApp: [String] = []

    var inAppRules: InAppRules { InAppRules(inApp: inApp, notInApp: notInApp) }
}
