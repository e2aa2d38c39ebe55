// crashport symbolicate: a report offline, or addresses in one file.

import ArgumentParser
import BoundedBytes
import FoundationEssentials
import Glibc
import Reports

struct Symbolicate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "symbolicate",
        abstract: "Symbolicate a report offline, or addresses in one file (llvm-symbolizer's output format).",
        discussion: """
            crashport symbolicate FILE: FILE is an event.json or a minidump (crashport's, Breakpad's or Crashpad's), \
            or a report directory (its minidump.dmp, else its event.json); modules are matched by build-id in \
            --debug-dir (as DIR/.build-id/xx/rest.debug or any ELF file directly in DIR), /usr/lib/debug, and the \
            module's own path. --format text is a crash log, json the event with its frames filled in.

            crashport symbolicate --obj FILE [ADDRESS...]: ADDRESS is 0x-prefixed hex or decimal; without arguments, \
            one per line on stdin. --format text is llvm-symbolizer's output; json is an array of {"address", \
            "frames": [{function, file, line, column, inlined}]}, innermost frame first (from stdin, one object per \
            line).

            A --debug-dir that is not a directory, or a FILE that is missing, exits 1.
            """)

    @Option(name: .long, help: ArgumentHelp("Where to look for binaries and debug files (repeatable).", valueName: "DIR"))
    var debugDir: [String] = []

    @Option(name: .long, help: "text (a crash log) or json (the event, frames filled in).")
    var format: ReportFormat = .text

    @Option(name: .long, help: ArgumentHelp("Symbolicate ADDRESSes in this ELF file instead of a report.", valueName: "FILE"))
    var obj: String?

    @Flag(name: .long, help: "With --obj: print names as they are in the file.")
    var noDemangle = false

    @Flag(name: .long, help: "List, per module, the build-id looked for, where, and what was used (on stderr).")
    var verbose = false

    @Flag(
        name: .long,
        help:
            "Ask the debuginfod servers in $DEBUGINFOD_URLS for the debug files not found here (fetched into debuginfod's cache)."
    )
    var debuginfod = false

    @Argument(help: "FILE, or with --obj the addresses.")
    var inputs: [String] = []

    func run() throws {
        for directory in debugDir {
            var info = stat()
            guard stat(directory, &info) == 0 else {
                fail("symbolicate: --debug-dir \(directory): \(String(cString: strerror(errno)))", status: ExitStatus.failure)
            }
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                fail("symbolicate: --debug-dir \(directory): not a directory", status: ExitStatus.failure)
            }
        }
        if let obj {
            Self.symbolicateAddresses(
                in: obj, debugDirectories: debugDir, demangle: !noDemangle, json: format == .json, addresses: inputs)
            return
        }
        guard inputs.count == 1, var file = inputs.first else {
            usageError(
                "symbolicate: give one FILE (an event.json, a minidump or a report directory), or --obj FILE with addresses")
        }
        var info = stat()
        if stat(file, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR {
            // A report directory: the minidump has every thread to unwind again; else the event.
            guard let inside = ["minidump.dmp", "event.json"].map({ file + "/" + $0 }).first(where: { access($0, F_OK) == 0 })
            else {
                fail("symbolicate: \(file) is a directory without a minidump.dmp or an event.json", status: ExitStatus.failure)
            }
            file = inside
        }
        do {
            var symbolicator = OfflineSymbolicator(debugDirectories: debugDir)
            symbolicator.locator.useDebuginfod = debuginfod
            if debuginfod { requireDebuginfodServers(command: "symbolicate") }
            let event = try symbolicator.symbolicate(path: file)
            if verbose {
                for line in symbolicator.searchLog(for: event) {
                    StandardError.write("crashport: symbolicate: \(CrashLog.escaped(line))\n")
                }
            }
            print(try format.render(event, isTerminal: isatty(1) != 0, environment: ProcessInfo.processInfo.environment))
        } catch {
            fail("symbolicate: \(error)", status: ExitStatus.failure)
        }
    }
}

extension Symbolicate {
    /// `--obj FILE`: ADDRESSes (stdin's lines when there are none) in llvm-symbolizer's format.
    static func symbolicateAddresses(
        in object: String, debugDirectories: [String], demangle: Bool, json: Bool = false, addresses: [String]
    ) {
        do {
            var symbolicator = try AddressSymbolicator(
                object: object, debugDirectories: debugDirectories, demangle: demangle,
                batch: addresses.isEmpty || addresses.count > 64)
            symbolicator.json = json
            for refusal in symbolicator.refusals {
                StandardError.write("crashport: symbolicate: \(refusal)\n")
            }
            symbolicator.run(addresses: addresses)
        } catch {
            fail("symbolicate: \(error)", status: ExitStatus.failure)
        }
    }

    /// The plainest `symbolicate --obj` command lines (Crashport.main): `symbolicate`, then
    /// `--obj FILE` or `--obj=FILE`, `--no-demangle` at most once, and addresses that do not
    /// start with '-'; nil for anything else.
    struct AddressRequest {
        var object: String
        var demangle = true
        var addresses: [String] = []

        init?(_ arguments: [String]) {
            guard arguments.first == "symbolicate" else { return nil }
            var object: String?
            var rest = arguments.dropFirst()
            while let argument = rest.popFirst() {
                if argument == "--obj", object == nil, let value = rest.popFirst(), !value.hasPrefix("-") {
                    object = value
                } else if argument.hasPrefix("--obj="), object == nil, argument.count > 6 {
                    object = String(argument.dropFirst(6))
                } else if argument == "--no-demangle", demangle {
                    demangle = false
                } else if !argument.hasPrefix("-"), !argument.isEmpty {
                    addresses.append(argument)
                } else {
                    return nil
                }
            }
            guard let object else { return nil }
            self.object = object
        }
    }
}
