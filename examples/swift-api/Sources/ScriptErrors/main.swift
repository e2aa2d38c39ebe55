// ScriptErrors: handled errors that carry a stack of their own (CrashPort.report(_:stack:)): one
// whose stack was saved where it was found (Thread.callStackReturnAddresses), one from an
// embedded interpreter, named by its frames (function, file, line), and one far too deep, which
// the report cuts to 512 frames and says so.
import CrashPort
import Foundation

struct ScriptError: Error, CustomStringConvertible {
    var description: String
}

/// The stack where an error was found, kept to report later.
@inline(never) func savedStack() -> [UInt] {
    Thread.callStackReturnAddresses.map(\.uintValue)
}

@inline(never) func checkEntry(_ entry: Int) -> [UInt]? {
    entry < 0 ? savedStack() : nil
}

do {
    try CrashPort.start()
} catch {
    print("crash reporting is off: \(error)")
}
if let stack = checkEntry(-1) {
    print("saved", CrashPort.report(ScriptError(description: "a negative entry"), stack: stack))
}
// What an interpreter's traceback says, innermost first.
let traceback: [CrashPort.Frame] = [
    .init(function: "close_books", file: "scripts/close.py", line: 12),
    .init(function: "<module>", file: "scripts/close.py", line: 30),
]
print("script", CrashPort.report(ScriptError(description: "NameError: name 'ledger' is not defined"), stack: traceback))
let deep = [UInt](repeating: 0x10, count: 1_000_000)
print("deep", CrashPort.report(ScriptError(description: "a million frames"), stack: deep))
