// CrashLog: the text a person reads: the short summary printed when a report is written, and
// the full crash log of `crashport show` (reason first, the crashing thread, the other threads,
// modules last).

import BoundedBytes
import ReportModel

public enum CrashLog {
    /// "function (file:line)", "function (module+0x…)" or "module+0x…"; the kernel's signal
    /// frame as gdb prints it, "<signal handler called>".
    /// `fullPath`: the source file's whole path (`crashport show`), else its name (the summary).
    public static func describe(_ frame: FrameRecord, fullPath: Bool = false) -> String {
        escaped(describeRaw(frame, fullPath: fullPath))
    }

    /// The culprit as `list` shows it: from its frame in the crashing thread where it is one
    /// (a culprit record keeps no module offset: "plugin_crash (libplugin.so+0x1139)", not
    /// "libplugin.so+?"), else from the record alone.
    public static func describe(culprit: CulpritRecord, in event: Event) -> String {
        let frame = event.crashedThreadRecord?.frames?.first {
            $0.function == culprit.function && $0.module == culprit.module && $0.file == culprit.file
                && $0.line == culprit.line
        }
        return describe(
            frame ?? FrameRecord(module: culprit.module, function: culprit.function, file: culprit.file, line: culprit.line))
    }

    /// Names from the program's files (functions, files, modules) may hold anything: escaped.
    static func describeRaw(_ frame: FrameRecord, fullPath: Bool) -> String {
        if frame.trust == .signalFrame { return FrameRecord.signalHandlerCalled }
        let location: String? = frame.module.map { module in "\(module)+\(frame.moduleOffset?.description ?? "?")" }
        if let function = frame.function {
            if let file = frame.file {
                let name = fullPath ? file : file.split(separator: "/").last.map(String.init) ?? file
                return "\(function) (\(name)\(frame.line.map { ":\($0)" } ?? ""))"
            }
            return location.map { "\(function) (\($0))" } ?? function
        }
        return location ?? (frame.pc?.description ?? "??")
    }

    static func headline(_ event: Event) -> String {
        let program = escaped(event.process?.executable ?? "process")
        var text = "\(program) (pid \(event.process?.pid.map(String.init) ?? "?")) crashed: "
        if event.kind == .error {
            text =
                "\(program) (pid \(event.process?.pid.map(String.init) ?? "?")) reported an error: \(escaped(event.reason ?? "error"))"
            // The culprit: the program's frame that called crashport's API (C or Swift).
            if let function = event.culprit?.function { text += " in \(escaped(function))" }
            return text
        }
        if let signal = event.signal {
            text += signal.name ?? "signal \(signal.number ?? 0)"
            if signal.stackOverflow == true { text += ", stack overflow" }
            if let description = signal.description { text += (signal.stackOverflow == true ? ": " : ", ") + description }
            if let number = signal.number, let code = signal.code, let address = signal.faultAddress,
                SignalNames.hasFaultAddress(signal: number, code: code)
            {
                text += " at \(address)"
            }
            if let sender = signal.senderPID { text += ", sent by pid \(sender)" }
            let frames = event.crashedThreadRecord?.frames ?? []
            let original = signal.reraisedBy?.originalFrame.flatMap { frames.indices.contains($0) ? frames[$0] : nil }
            // The program's own frame (the culprit), unless a handler re-raised: then the fault's.
            if let function = original?.function ?? event.culprit?.function ?? frames.first?.function {
                text += " in \(escaped(function))"
            }
            if let reraise = signal.reraisedBy {
                let handler = reraise.function ?? reraise.handler?.description ?? "the program's handler"
                let raised = reraise.signal ?? "a signal"
                switch reraise.how {
                case .raised? where raised == "SIGABRT": text += ", aborted by \(handler) (SIGABRT)"
                case .raised?: text += ", re-raised by \(handler) as \(raised)"
                case .faulted?: text += ", faulted again in \(handler) (\(raised))"
                case .resetAndReturned?: text += ", not recovered by \(handler) (it reset the action and returned)"
                case .cameBack?, nil: text += ", not recovered by \(handler) (the same fault came back)"
                case .calledThenExited?:
                    text += ", turned into a call by \(handler), then exit status \(reraise.exitStatus.map(String.init) ?? "?")"
                }
            }
        }
        return text
    }

    /// What a program handler did instead of recovering: "re-raised it as SIGSEGV", "aborted
    /// (SIGABRT)", "faulted (SIGSEGV)", "reset it to SIG_DFL and returned", "returned and the
    /// same fault came back".
    public static func describe(reraise: ReraiseRecord) -> String {
        let signal = reraise.signal ?? "a signal"
        switch reraise.how {
        case .raised?: return signal == "SIGABRT" ? "aborted (SIGABRT)" : "re-raised it as \(signal)"
        case .faulted?: return "faulted (\(signal))"
        case .resetAndReturned?: return "reset it to SIG_DFL and returned"
        case .cameBack?: return "returned and the same fault came back"
        case .calledThenExited?:
            return "turned it into a call (Go's runtime.sigpanic), after which the process exited"
                + (reraise.exitStatus.map { " with status \($0)" } ?? "")
        case nil: return "did not recover"
        }
    }

    /// The crashed program's package, from its module's record: "crashfixture 1.2.3-1 (amd64,
    /// deb, debian 12; from its package note)"; nil when none is known.
    static func packageLine(_ event: Event) -> String? {
        let modules = event.modules ?? []
        let main = if let path = event.process?.executable { modules.first { $0.path == path } } else { modules.first }
        guard let package = main?.package, let name = package.name else { return nil }
        let os = [package.os, package.osVersion].compactMap { $0 }.joined(separator: " ")
        let details = [package.architecture, package.type, os.isEmpty ? nil : os].compactMap { $0 }
        let source =
            switch package.source {
            case "note": "from its package note"
            case "dpkg": "from dpkg's database"
            default: package.source.map { "from \($0)" }
            }
        let inside = (details.isEmpty ? [] : [details.joined(separator: ", ")]) + (source.map { [$0] } ?? [])
        return escaped(name + (package.version.map { " \($0)" } ?? ""))
            + (inside.isEmpty ? "" : " (" + escaped(inside.joined(separator: "; ")) + ")")
    }

    /// A report between a sidecar's two steps (Event.stage), said as such; nil for a whole one.
    public static func stageLine(_ event: Event) -> String? {
        guard let stage = event.stage else { return nil }
        guard stage == Event.capturedStage else { return escaped(stage) }
        return
            "captured, not yet unwound or symbolicated: the watcher replaces this event with the full one moments after the crash (one that stays so was left when its watcher stopped; its minidump is whole: crashport symbolicate REPORT/minidump.dmp)"
    }

    /// The headline on one line, with the uid when known: the sidecar's journal line.
    public static func oneLine(_ event: Event) -> String {
        if event.kind == .termination || event.kind == .hang, let line = titleLine(event) { return line }
        return headline(event) + (event.capturedFrom == "spool" ? " (from the spool: crashing thread only)" : "")
    }

    /// The first line of a crash's log: who crashed, and the title (what happened, in the
    /// program's own frame); the headline's signal details follow on the next line.
    static func titleLine(_ event: Event) -> String? {
        guard event.kind != .error, let title = event.title else { return nil }
        let program = escaped(event.process?.executable ?? "process")
        let pid = event.process?.pid.map(String.init) ?? "?"
        // A death no handler saw is a killing, not a crash: "… (pid 7) was killed by SIGKILL",
        // "… (pid 7) exited with status 3 without saying goodbye".
        if event.kind == .termination {
            return "\(program) (pid \(pid)) \(title.hasPrefix("killed") ? "was " : "")\(escaped(title))"
        }
        if event.kind == .hang { return "\(program) (pid \(pid)) \(escaped(title))" }
        return "\(program) (pid \(pid)) crashed: \(escaped(title))"
    }

    /// What the thread a report leads with did: crashed, reported the error, was where the
    /// kill found it, beat last before the hang.
    static func threadVerb(_ event: Event) -> String {
        switch event.kind {
        case .error?: return "reported it"
        case .termination?: return "was here"
        case .hang?: return "beat last"
        default: return "crashed"
        }
    }

    /// The headline's part after "crashed: ": the signal in full (code, address, sender, re-raise).
    static func signalDetail(_ event: Event) -> String {
        let line = headline(event)
        guard let range = line.firstUTF8Range(of: " crashed: ") else { return line }
        return String(line[range.upperBound...])
    }

    /// Whether to colour text for a terminal: only on one (`isTerminal`), never with NO_COLOR
    /// set (no-color.org) or TERM=dumb.
    public static func colourWanted(isTerminal: Bool, environment: [String: String]) -> Bool {
        guard isTerminal else { return false }
        if let noColour = environment["NO_COLOR"], !noColour.isEmpty { return false }
        return environment["TERM"] != "dumb"
    }

    /// Bold for the title, dim for frames that are not the program's (and folded runs of them).
    static func bold(_ text: String, _ colour: Bool) -> String { colour ? "\u{1b}[1m" + text + "\u{1b}[0m" : text }
    static func dim(_ text: String, _ colour: Bool) -> String { colour ? "\u{1b}[2m" + text + "\u{1b}[0m" : text }

    /// The few lines printed to stderr when a report is written; `colour` for a terminal.
    public static func summary(_ event: Event, reportPath: String, maxFrames: Int = 8, colour: Bool = false) -> String {
        var lines: [String]
        if let title = titleLine(event) {
            lines = ["crashport: " + bold(title, colour)] + (event.signal != nil ? ["  signal: " + signalDetail(event)] : [])
        } else {
            lines = ["crashport: " + headline(event)]
        }
        if let reason = event.reason { lines.append("  reason: " + escaped(reason)) }
        if let why = whyLine(event) { lines.append("  why: " + why) }
        if let stage = stageLine(event) { lines.append("  stage: " + stage) }
        if let thread = event.crashedThreadRecord {
            lines.append(
                "  thread \(thread.tid.map(String.init) ?? "?")\(thread.name.map { " \"\(escaped($0))\"" } ?? "") \(threadVerb(event)):"
            )
            // The program's frames first: runtime frames folded, recursion folded, then cut.
            let shown = frameLines(thread.frames ?? [], foldRuntime: true, colour: colour) { frame in
                dim("    #\(frame.index ?? 0)  " + describe(frame), colour && frame.inApp == false)
            }
            lines += shown.prefix(maxFrames)
            if shown.count > maxFrames {
                lines.append("    … \(shown.count - maxFrames) more lines (crashport show has them all)")
            }
        }
        // A handled error's own stack is no thread of its own: the reporting thread is not another.
        let others = (event.threads ?? []).filter { $0.errorStack != true }.count - 1
        if others > 0 { lines.append("  \(others) other thread\(others == 1 ? "" : "s") captured") }
        lines.append("  report: \(reportPath)")
        return lines.joined(separator: "\n")
    }

    static func threadSection(_ thread: ThreadRecord, verb: String = "crashed", colour: Bool) -> [String] {
        var lines = [
            "Thread \(thread.tid.map(String.init) ?? "?")\(thread.name.map { " \"\(escaped($0))\"" } ?? "")"
                + (thread.errorStack == true ? " (the error's own stack)" : thread.crashed == true ? " (\(verb))" : "")
                + (thread.holdsGIL == true ? " [holds the GIL]" : "")
        ]
        lines += frameLines(thread.frames ?? [], foldRuntime: false) { frame in
            let index = String(frame.index ?? 0).padding(toLength: 3)
            // A frame of the interpreter's has no pc: its language stands in the column.
            let pc = (frame.pc?.description ?? frame.language.map { "[\($0)]" } ?? "").padding(toLength: 18)
            var line = "  \(index) \(pc) \(describe(frame, fullPath: true))"
            if frame.inlined == true { line += " [inlined]" }
            if frame.tailCall == true { line += " [tail call]" }
            if let trust = frame.trust, trust != .context, trust != .cfi, trust != .signalFrame { line += " [\(trust.rawValue)]" }
            let variables = (frame.vars ?? []).map { "        " + describe(variable: $0) }
            return ([dim(line, colour && frame.inApp == false)] + variables).joined(separator: "\n")
        }
        if let truncated = thread.truncated { lines.append("      … \(truncated) frames not shown …") }
        return lines
    }

    /// The full crash log of `crashport show`; `colour` for a terminal.
    public static func full(_ event: Event, colour: Bool = false) -> String {
        var lines: [String] = []
        if let title = titleLine(event) {
            lines.append(bold(title, colour))
            if event.signal != nil { lines.append("Signal:    \(signalDetail(event))") }
            if let cause = event.cause { lines.append("Cause:     \(escaped(cause))") }
            if let related = event.related { lines.append("Follows:   \(escaped(related))") }
        } else {
            lines.append(headline(event))
        }
        if let stage = stageLine(event) { lines.append("Stage:     \(stage)") }
        if let id = event.id { lines.append("Report:    \(id)") }
        if let timestamp = event.timestamp { lines.append("Time:      \(timestamp)") }
        if let memory = event.memory, let line = describe(memory: memory) { lines.append("Memory:    \(line)") }
        if let taken = event.stackTaken { lines.append("Stack:     \(describe(stackTaken: taken, cause: event.cause))") }
        if let fingerprint = event.fingerprint {
            let signature = event.signature.flatMap { $0.isEmpty ? nil : escaped($0) } ?? "(no frames)"
            lines.append("Signature: \(signature) (fingerprint \(fingerprint))")
        }
        if let reason = event.reason { lines.append("Reason:    \(escaped(reason))") }
        lines += faultLines(event)
        if let arguments = event.process?.arguments, !arguments.isEmpty {
            lines.append("Command:   \(escaped(arguments.joined(separator: " ")))")
        }
        if let placement = event.process.flatMap(describe(placement:)) { lines.append("Container: \(escaped(placement))") }
        if let unit = event.process?.unit, event.process?.container == nil { lines.append("Unit:      \(escaped(unit))") }
        if let package = packageLine(event) { lines.append("Package:   \(package)") }
        for note in event.notes ?? [] { lines.append("Note:      \(escaped(note))") }
        lines.append("")
        lines += appSection(event)
        lines += RuntimeReport.logSection(event)
        let threads = event.threads ?? []
        let crashed = threads.filter { $0.crashed == true }
        for thread in crashed + threads.filter({ $0.crashed != true }) {
            lines += threadSection(thread, verb: threadVerb(event), colour: colour)
            lines.append("")
        }
        if let crashedThread = crashed.first, let registers = crashedThread.registers, !registers.isEmpty {
            lines.append("Registers of the crashed thread:")
            let order = [
                "rip", "rsp", "rbp", "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14",
                "r15", "eflags",
            ]
            let cells = order.compactMap { name in
                registers[name].map { "\(name.padding(toLength: 6)) \($0.description.padding(toLength: 18))" }
            }
            stride(from: 0, to: cells.count, by: 3).forEach {
                lines.append("  " + cells[$0..<min($0 + 3, cells.count)].joined(separator: " "))
            }
            lines.append("")
        }
        let chain = event.handlerChain ?? []
        let crashingSignal = event.signal?.name
        for entry in chain.filter({ $0.signal == crashingSignal }) + chain.filter({ $0.signal != crashingSignal }) {
            var text = "Handler chain for \(entry.signal ?? "?"): "
            func name(_ handler: HandlerRecord?) -> String {
                switch handler {
                case .disposition(let disposition)?: return disposition.rawValue
                case .function(let address, let symbol, let module, _)?:
                    return "\(symbol ?? address.description)\(module.map { " in \($0)" } ?? "")"
                case nil: return "none"
                }
            }
            if let above = entry.above { text += "above crashport: \(name(above)); " }
            text +=
                "previous: \(name(entry.previous)); \(entry.signal == crashingSignal ? "crashport" : "crashport would") \(entry.action?.rawValue ?? "?")"
            if entry.policy == .forwardFirst { text += " (forward-first)" }
            lines.append(text)
        }
        if !(event.handlerChain ?? []).isEmpty { lines.append("") }
        // A report with no modules (a termination seen from outside) has no heading for them.
        if let modules = event.modules, !modules.isEmpty {
            lines.append("Modules:")
            for module in modules {
                let base = (module.base?.description ?? "?").padding(toLength: 18)
                lines.append("  \(base) \(escaped(module.path ?? "?"))  \(module.buildID ?? "no build-id")")
            }
        }
        while lines.last == "" { lines.removeLast() }
        return lines.joined(separator: "\n")
    }
}

extension CrashLog {
    /// The diagnosis in a line, with the variable that held the bad value where known.
    static func whyLine(_ event: Event) -> String? {
        guard let summary = event.fault?.diagnosis?.summary else { return nil }
        var text = escaped(summary)
        if let variable = event.fault?.variable, let name = variable.expression ?? variable.variable {
            text += " (\(escaped(name))\(variable.function.map { " in \(escaped($0))" } ?? ""))"
        }
        return text
    }

    /// `crashport show`'s lines on the fault: the instruction, its access, why, and the
    /// variable.
    static func faultLines(_ event: Event) -> [String] {
        guard let fault = event.fault else { return [] }
        var lines: [String] = []
        if let instruction = fault.instruction, let text = instruction.text {
            var line = "Fault:     \(instruction.address?.description ?? "?"): \(escaped(text))"
            if let role = instruction.role { line += " (\(escaped(role)))" }
            lines.append(line)
        }
        if let access = fault.access {
            var line = "Access:    " + FaultExplanation.describe(access)
            if let expression = access.expression { line += " at \(escaped(expression))" }
            if let address = access.address { line += " = \(address)" }
            let registers = (access.registers ?? [:]).sorted { $0.key < $1.key }.map { "\(escaped($0.key)) = \($0.value)" }
            if !registers.isEmpty { line += "; " + registers.joined(separator: ", ") }
            lines.append(line)
        }
        if let why = whyLine(event) {
            lines.append("Why:       " + why)
            if let rule = fault.diagnosis?.rule {
                lines.append(
                    "Rule:      \(escaped(rule)): " + (fault.diagnosis?.evidence ?? []).map(escaped).joined(separator: "; "))
            }
        }
        for note in fault.notes ?? [] { lines.append("Note:      \(escaped(note))") }
        return lines
    }

    /// `name = value` as gdb prints a variable, with its type.
    static func describe(variable: VariableRecord) -> String {
        "\(escaped(variable.name)) = \(escaped(variable.value))" + (variable.type.map { "  (\(escaped($0)))" } ?? "")
    }

    /// A thread's frames as lines: a run of frames repeating (recursion; a cycle of up to 8
    /// frames, at least 3 times) is shown once, marked "× N"; with `foldRuntime`, a run of two or
    /// more frames that are not the program's (after the top one, always shown) becomes one
    /// line naming their modules. The event keeps every frame; only the text folds.
    static func frameLines(
        _ frames: [FrameRecord], foldRuntime: Bool, colour: Bool = false, _ describeFrame: (FrameRecord) -> String
    ) -> [String] {
        struct Key: Equatable {
            var function: String?, file: String?, line: Int?, module: String?
            /// A frame without a name is told apart by where it is.
            var offset: UInt64?
            init(_ frame: FrameRecord) {
                (function, file, line, module) = (frame.function, frame.file, frame.line, frame.module)
                if function == nil { offset = frame.moduleOffset?.value ?? frame.pc?.value }
            }
        }
        enum Item {
            case frame(FrameRecord)
            case cycle([FrameRecord], times: Int)
            case runtime(count: Int, modules: [String])
        }
        let keys = frames.map(Key.init)
        var items: [Item] = []
        var index = 0
        while index < frames.count {
            var folded = false
            for period in 1...8 where index + 3 * period <= frames.count {
                var times = 1
                while index + (times + 1) * period <= frames.count,
                    keys[(index + times * period)..<(index + (times + 1) * period)] == keys[index..<(index + period)]
                {
                    times += 1
                }
                if times >= 3 {
                    items.append(.cycle(Array(frames[index..<(index + period)]), times: times))
                    index += times * period
                    folded = true
                    break
                }
            }
            if !folded {
                items.append(.frame(frames[index]))
                index += 1
            }
        }
        if foldRuntime {
            var merged: [Item] = []
            var pending: [FrameRecord] = []
            func flush() {
                if pending.count >= 2 {
                    var modules: [String] = []
                    for module in pending.compactMap(\.module) where !modules.contains(module) { modules.append(module) }
                    merged.append(.runtime(count: pending.count, modules: modules))
                } else {
                    merged += pending.map { .frame($0) }
                }
                pending = []
            }
            for (position, item) in items.enumerated() {
                if case .frame(let frame) = item, frame.inApp == false, position > 0 {
                    pending.append(frame)
                } else {
                    flush()
                    merged.append(item)
                }
            }
            flush()
            items = merged
        }
        var lines: [String] = []
        for item in items {
            switch item {
            case .frame(let frame): lines.append(describeFrame(frame))
            case .cycle(let cycle, let times):
                if cycle.count == 1 {
                    lines.append(describeFrame(cycle[0]) + " × \(grouped(times))")
                } else {
                    lines += cycle.map(describeFrame)
                    lines.append("      ↑ these \(cycle.count) frames × \(grouped(times))")
                }
            case .runtime(let count, let modules):
                let names = modules.isEmpty ? "" : " in " + modules.map(escaped).joined(separator: ", ")
                lines.append(dim("    … \(count) frames\(names)", colour))
            }
        }
        return lines
    }

    /// 3179 as "3,179".
    static func grouped(_ number: Int) -> String {
        let digits = Array(String(number))
        var out = ""
        for (position, digit) in digits.enumerated() {
            if position > 0 && (digits.count - position) % 3 == 0 { out += "," }
            out.append(digit)
        }
        return out
    }

    /// What the program told crashport: a handled error's own properties, annotations, its last
    /// breadcrumbs (the newest 10; all in event.json), attachments (the error's own marked). The
    /// program's text is escaped (newlines, terminal escapes).
    static func appSection(_ event: Event) -> [String] {
        var lines: [String] = []
        if let properties = event.exception?.properties, !properties.isEmpty {
            let cut = Set(event.exception?.propertiesTruncated ?? [])
            lines.append("Error properties:")
            for key in properties.keys.sorted() {
                lines.append("  \(escaped(key)): \(escaped(properties[key] ?? ""))\(cut.contains(key) ? " [truncated]" : "")")
            }
            lines.append("")
        }
        let cut = Set(event.annotationsTruncated ?? [])
        if let annotations = event.annotations, !annotations.isEmpty {
            lines.append("Annotations:")
            for key in annotations.keys.sorted() {
                lines.append("  \(escaped(key)): \(escaped(annotations[key] ?? ""))\(cut.contains(key) ? " [truncated]" : "")")
            }
            lines.append("")
        }
        if let crumbs = event.breadcrumbs, !crumbs.isEmpty {
            let shown = crumbs.suffix(10)
            lines.append(
                "Breadcrumbs (\(shown.count == crumbs.count ? "" : "last \(shown.count) of ")\(crumbs.count), oldest first):")
            for crumb in shown {
                let category = crumb.category.map { $0.isEmpty ? "" : "[\(escaped($0))] " } ?? ""
                lines.append("  \(crumb.timestamp ?? "?")  \(category)\(escaped(crumb.message ?? ""))")
            }
            lines.append("")
        }
        if let attachments = event.attachments, !attachments.isEmpty {
            lines.append("Attachments:")
            for attachment in attachments {
                let what = attachment.file.map { "\($0), \(attachment.copied ?? 0) bytes" } ?? "not copied"
                let why = attachment.error.map { " (\($0))" } ?? ""
                let own: String
                switch attachment.scope {
                case AttachmentRecord.errorScope: own = " [the error's own]"
                case AttachmentRecord.runtimeScope: own = " [the runtime's crash log]"
                case AttachmentRecord.systemScope: own = " [the system's log around the crash]"
                case AttachmentRecord.memoryScope:
                    own =
                        " [from memory, \(escaped(attachment.contentType ?? "?"))"
                        + (attachment.partial == true ? ", being written at the crash" : "") + "]"
                default: own = ""
                }
                lines.append("  \(escaped(attachment.path ?? attachment.name ?? "?")): \(what)\(why)\(own)")
            }
            lines.append("")
        }
        return lines
    }

    /// When a death's stacks were taken: "at the kill", "12 ms before the kill (…)".
    public static func describe(stackTaken taken: StackTaken, cause: String?) -> String {
        let death = cause == "oom-kill" || cause == "SIGKILL" || cause == "watchdog" ? "the kill" : "the end"
        switch taken.when {
        case StackTaken.atDeath: return "at \(death)"
        case StackTaken.beforeDeath:
            let when = taken.millisecondsBefore.map { "\($0) ms" } ?? "some time"
            return "\(when) before \(death) (a snapshot taken under memory pressure: the stacks were gone at \(death))"
        case StackTaken.lost: return "lost: gone at \(death), and no snapshot was taken before it"
        default: return escaped(taken.when)
        }
    }

    /// Text from the program made safe for a terminal: control characters as \n, \t, \u{1b}.
    /// Where a process ran, in one line: "docker web-1 (nginx:1.27, id 3f2a…c9d1); pod shop/web-7d4f
    /// (uid …)"; nil outside any container.
    static func describe(placement process: ProcessInfoRecord) -> String? {
        var parts: [String] = []
        if process.container != nil || process.containerRuntime != nil || process.containerName != nil {
            var text = [process.containerRuntime, process.containerName].compactMap { $0 }.joined(separator: " ")
            let details = [process.containerImage, process.container.map { "id \($0.prefix(12))" }].compactMap { $0 }
            if !details.isEmpty { text += (text.isEmpty ? "" : " ") + "(" + details.joined(separator: ", ") + ")" }
            parts.append(text)
        }
        if let pod = process.pod {
            let name = pod.name.map { (pod.namespace.map { "\($0)/" } ?? "") + $0 }
            parts.append("pod " + (name.map { "\($0)" + (pod.uid.map { " (uid \($0))" } ?? "") } ?? "uid \(pod.uid ?? "?")"))
        }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }

    /// "peak 61.2 MB of a 64.0 MB limit (cgroup /sys/fs/cgroup/memory/app); process peak 60.8 MB;
    /// OOM kills 1; pressure some 12.5%, full 3.1% over 10 s (cgroup)".
    public static func describe(memory: MemoryRecord) -> String? {
        func megabytes(_ bytes: UInt64) -> String {
            let tenths = (bytes * 10 + 512 * 1024) / (1024 * 1024)
            return "\(tenths / 10).\(tenths % 10) MB"
        }
        var parts: [String] = []
        if let peak = memory.peak ?? memory.usage {
            let of = memory.limit.map { " of a \(megabytes($0)) limit" } ?? ", no limit"
            parts.append("peak \(megabytes(peak))\(of)" + (memory.cgroup.map { " (cgroup \(escaped($0)))" } ?? ""))
        }
        if let process = memory.processPeak { parts.append("process peak \(megabytes(process))") }
        let events = (memory.events ?? [:]).filter { $0.value > 0 }.sorted { $0.key < $1.key }
        if !events.isEmpty { parts.append(events.map { "\($0.key) \($0.value)" }.joined(separator: ", ")) }
        if let pressure = memory.pressure, let some = pressure.someAvg10 {
            let full = pressure.fullAvg10.map { ", full \($0)%" } ?? ""
            parts.append("pressure some \(some)%\(full) over 10 s (\(pressure.scope))")
        }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }

    public static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case "\\": out += "\\\\"
            default:
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                    out += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }
}

extension String {
    func padding(toLength length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }
}
