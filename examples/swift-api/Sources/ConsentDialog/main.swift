// ConsentDialog: with `crashport consent ask`, its reports wait on the machine until its user
// decides. At start it shows them (id, kind, time, title: this program's only, newest first) and
// decides for each: here the newest is sent and the others discarded, as a user's answers would.
// `ConsentDialog crash` crashes, to have something to ask about.
import CrashPort

#if canImport(Glibc)
import Glibc
#endif

do {
    try CrashPort.start()
} catch {
    print("crash reporting is off: \(error)")
}
if CommandLine.arguments.dropFirst().first == "crash" {
    let nothing: [Int] = []
    print(nothing[CommandLine.arguments.count])  // out of range: the crash crashport reports
}

do {
    let pending = try CrashPort.listPendingReports()
    print("\(pending.count) report(s) await consent")
    for (index, report) in pending.enumerated() {
        print("report \(report.id) \(report.kind ?? "-") \(report.timeMilliseconds ?? 0) \(report.title)")
        if index == 0 {
            try CrashPort.send(reportID: report.id)  // the user said yes
            print("sent \(report.id)")
        } else {
            try CrashPort.discard(reportID: report.id)  // the user said no
            print("discarded \(report.id)")
        }
    }
    print("now \(try CrashPort.listPendingReports().count) await consent")
} catch {
    print("the reports awaiting consent could not be listed: \(error)")
}
