// LastRunDetail: the last run as the watcher hands it to the stub (crashport_last_run_detail),
// the same under `crashport run` (CRASHPORT_LAST_RUN_DETAIL) and the sidecar (HELLO_REPLY).

import ReportModel
import Reports

extension LastRunInfo {
    /// The run's signal named where its report did not name it (a kill seen only by its
    /// parent: SIGKILL, the OOM killer).
    func namingItsSignal() -> LastRunInfo {
        var named = self
        if named.detail.signal != 0, named.detail.signalName.isEmpty {
            named.detail.signalName = SignalNames.name(named.detail.signal)
        }
        return named
    }
}
