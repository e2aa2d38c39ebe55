// SafeMode: launch protection in Swift. Its launch crashes on a corrupt cache file; after three
// launch crashes in a row crashport runs its protect work (the cache is removed), then its
// launch work, in the same process, and it launches normally.
//
//   echo corrupt > cache
//   crashport run -- .build/debug/SafeMode cache     # three times: each launch crashes
//   crashport run -- .build/debug/SafeMode cache     # the fourth: safe mode, then it serves
import CrashPort

#if canImport(Glibc)
import Glibc
#endif

/// Prints a line and flushes it: what was said survives a crash.
func say(_ line: String) {
    print(line)
    fflush(nil)
}

let cachePath = CommandLine.arguments.dropFirst().first ?? "cache"
try? CrashPort.start()

// What crashport knows of the run before this one.
if let last = CrashPort.lastRun, let kind = last.kind {
    let by = last.signalName.map { " by \($0)" } ?? ""
    let title = last.title.map { ": \($0)" } ?? ""
    let memory = (last.oomKilled ? ", OOM-killed" : "") + (last.memoryPressure ? ", under memory pressure" : "")
    say("last run: \(kind)\(by), \(last.consecutiveLaunchCrashes) launch crash(es) in a row\(memory)\(title)")
    if let report = last.reportPath { say("its report: \(report)") }
}

try? CrashPort.registerTask("reset-settings") { say("task: settings reset") }

/// A cache that says "corrupt" stands for one the program cannot parse.
func loadCache(_ path: String) -> Int {
    guard let file = fopen(path, "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 64)
    guard fgets(&line, Int32(line.count), file) != nil else { return 0 }
    let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let entries: [String] = text.hasPrefix("corrupt") ? [] : [text]
    return entries[0].count  // an empty cache index: the launch crash
}

let how = CrashPort.launch(
    threshold: 3,
    protect: {
        say("safe mode: removing \(cachePath)")
        unlink(cachePath)
        CrashPort.runTask("reset-settings")
    },
    launch: {
        _ = loadCache(cachePath)
        CrashPort.launchCompleted()  // the milestone: from here a crash is not a launch crash
        say("launched: serving")
    })
say(how == .protected ? "launched after the protect work" : "launched normally")
