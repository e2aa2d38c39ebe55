// LaunchWindow: whether a run that ended without a crash record ended during its launch, for
// the launch-crash counter (RunHistory). A crash the stub reported says so itself (the app
// area's install time, CRASHPORT_LAUNCH_MS and crashport_launch_completed: AppArea
// .crashedDuringLaunch); a death the watcher saw from outside (SIGKILL, the OOM killer, a crash
// before the stub installed or in a program without it) is measured the same way from what is
// known of the process: its app area as last read, else the time since it started.

import ReportModel

public enum LaunchWindow {
    /// The window when nothing else says how long it is: the stub's default CRASHPORT_LAUNCH_MS.
    public static let defaultMilliseconds: UInt32 = 5000

    /// Whether an end at `ended` (ns since the epoch) of a process started at `started` fell
    /// inside its launch window. `app`: its app area as last read (nil when none was): its
    /// install time, window and crashport_launch_completed decide, as for a crash. Without it the
    /// window is `milliseconds` (CRASHPORT_LAUNCH_MS as the process was given it; nil or 0: the
    /// default, since nothing says when a launch that only the program ends was ended) from the
    /// start: a process that died before the stub installed, or without one, died this soon.
    public static func contains(
        ended: UInt64, started: UInt64, app: AppArea? = nil, milliseconds: UInt32? = nil
    ) -> Bool {
        if let app, let during = app.crashedDuringLaunch(at: ended) { return during }
        let window = UInt64(milliseconds.flatMap { $0 == 0 ? nil : $0 } ?? defaultMilliseconds) * 1_000_000
        return ended < started || ended - started < window
    }

    /// CRASHPORT_LAUNCH_MS as an environment gives it (nil: unset or not a number).
    public static func milliseconds(environment: [String: String]) -> UInt32? {
        environment["CRASHPORT_LAUNCH_MS"].flatMap { UInt32($0) }
    }
}
