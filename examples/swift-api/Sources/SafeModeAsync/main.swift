// SafeModeAsync: launch protection for a program whose repair must wait, in Swift. Its launch
// crashes on a corrupt cache file; its own predicate asks for safe mode after two launch crashes
// in a row; the repair is asynchronous (here a configuration "fetched" in 300 ms) and the launch
// waits for it, at most 10 s; a keyed task runs once.
//
//   echo corrupt > cache
//   crashport run -- .build/debug/SafeModeAsync cache     # twice: each launch crashes
//   crashport run -- .build/debug/SafeModeAsync cache     # the third: the repair, then it serves
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
if let last = CrashPort.lastRun {
    say(
        "last run: \(last.consecutiveLaunchCrashes) launch crash(es) in a row, protected \(last.launchProtected), "
            + "protect timed out \(last.protectTimedOut)")
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

let clock = ContinuousClock()
let started = clock.now
let how = await CrashPort.launch(
    shouldProtect: { last in (last?.consecutiveLaunchCrashes ?? 0) >= 2 },
    protectTimeout: .seconds(10),
    protect: {
        say("safe mode: fetching a configuration")
        try? await Task.sleep(for: .milliseconds(300))
        unlink(cachePath)
        CrashPort.runTask("reset-settings")
        say("task again: \(CrashPort.runTask("reset-settings") ? "ran twice" : "gone (one-shot)")")
    },
    launch: {
        let waited = (clock.now - started).components
        say("launch: \(waited.seconds * 1000 + waited.attoseconds / 1_000_000_000_000_000) ms after the start")
        _ = loadCache(cachePath)
        CrashPort.launchCompleted()  // the milestone: from here a crash is not a launch crash
        say("launched: serving")
    })
say("result: \(how.map { "\($0)" } ?? "none")")
