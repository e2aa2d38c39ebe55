// ReportHooks: what a mode adds to each report, called by the report writer on the thread that
// writes it (a report pool's), so they are Sendable and the compiler checks what they touch.

import LiveProcess
import ReportModel
import Store

protocol ReportHooks: Sendable {
    /// The session a process's reports belong to, nil if none.
    func sessionID(of pid: ProcessID) -> String?
    /// Last words on an event before it is written (the launcher's watchdog and hang links).
    func amend(_ event: inout Event, record: CrashRecord)
    /// After a report is written, with its store.
    func wrote(_ report: WrittenReport, into store: ReportStore)
    /// A captured crash whose report cannot be written, with the record as received: the
    /// sidecar spools it rather than lose it. Not called, the failure is only logged.
    func unwritable(_ capture: Capture, recordBytes: [UInt8], error: Error, store: ReportStore) -> Bool
}

extension ReportHooks {
    func sessionID(of pid: ProcessID) -> String? { nil }
    func amend(_ event: inout Event, record: CrashRecord) {}
    func wrote(_ report: WrittenReport, into store: ReportStore) {}
    func unwritable(_ capture: Capture, recordBytes: [UInt8], error: Error, store: ReportStore) -> Bool { false }
}
