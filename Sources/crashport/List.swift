// crashport list: one line per report, newest first (or a JSON array).

import ArgumentParser
import BoundedBytes
import FoundationEssentials
import Glibc
import ReportModel
import Reports
import Store
import Upload

/// "crashed during launch (3 launch crashes in a row), report ID" and the like.
func describeLastRun(_ runs: ProgramRuns) -> String {
    var text = "ended without a crash"
    if runs.lastCrashed {
        text =
            runs.lastTestCrash == true
            ? "crashed on purpose (a test crash)" : (runs.lastEndedAbnormally == true ? "ended abnormally" : "crashed")
        if runs.lastCrashedDuringLaunch { text += " during launch" }
    }
    if runs.consecutiveLaunchCrashes > 0 {
        text += " (\(runs.consecutiveLaunchCrashes) launch crash\(runs.consecutiveLaunchCrashes == 1 ? "" : "es") in a row)"
    }
    if let last = runs.last {
        if last.kind == "hang" { text = "hung, then ended without a crash" }
        if last.kind == "errors" { text += " after \(last.errors ?? 0) handled error\(last.errors == 1 ? "" : "s")" }
        if !runs.lastCrashed, let code = last.exitCode, code != 0 { text += " (exit code \(code))" }
    }
    if let id = runs.lastReportID { text += ", report \(id)" }
    if let title = runs.last?.title { text += " (\(title))" }
    if runs.last?.launchProtected == true { text += "; it ran its launch protection" }
    if runs.lastOOMKilled == true {
        text += "; the OOM killer ended it"
    } else if runs.lastMemoryPressure == true {
        text += "; its memory was under pressure"
    }
    if runs.disabled { text += "; crash reporting is disabled for it (crashport_set_enabled)" }
    return text
}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "One line per report, newest first.",
        discussion: """
            With no reports, says so on stderr (naming the directory) and exits 0. --format json prints an array, \
            newest first, one object per report: id, path, timestamp, program, executable, signal or kind, title, stage (while a sidecar has not yet symbolicated it), \
            culprit (the program's own frame that crashed), top_frame (the crashing thread's first frame), signature \
            and fingerprint (which bug it is: see the README, "Which reports are one bug"), container and pod (where it ran). \
            --container and --pod keep the reports of one container (its name, or its id or an id prefix of 12 or more \
            digits) or one Kubernetes pod (NAMESPACE/NAME, NAME or its uid).

            --group prints one line per bug instead, the most reported first: the count, the fingerprint, the \
            programs, the newest report's title with the signature, and when it was first and last seen; in JSON, \
            one object per bug with its reports' ids.

            Given a root sidecar's reports directory (one directory per uid), lists the reports of every user whose \
            directory the caller may read, as coredumpctl does: root sees all, a user their own.
            """)

    enum Format: String, ExpressibleByArgument { case text, json }

    /// One report in `list --format json`.
    struct Entry: Encodable {
        var id: String
        var path: String
        var timestamp: String?
        var program: String?
        var executable: String?
        var signal: String?
        var kind: String?
        var title: String?
        /// Event.stage: `captured` while a sidecar has not yet symbolicated it.
        var stage: String?
        var culprit: String?
        var topFrame: String?
        var signature: String?
        var fingerprint: String?
        /// Where it ran: the container (runtime, name, id) and the pod (namespace/name).
        var container: String?
        var pod: String?

        /// The container and the pod in a text line ("  docker web-1 3f2a9c0d1e2b  pod shop/web-1").
        var placement: String {
            var text = ""
            if let container { text += "  " + CrashLog.escaped(container) }
            if let pod { text += "  pod " + CrashLog.escaped(pod) }
            return text
        }
        /// Per destination: pending, sent (with the server's id), failed (upload.json).
        var upload: [String: String]?
    }

    @OptionGroup var reportsOption: ReportsOption

    @Option(name: .long, help: ArgumentHelp("Only this program's reports, after how its last run ended.", valueName: "PATH"))
    var program: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Only the reports of processes in this container: its name, its id or an id prefix of 12 or more digits.",
            valueName: "NAME|ID"))
    var container: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Only the reports of processes in this Kubernetes pod: NAMESPACE/NAME, NAME or its uid.", valueName: "POD"))
    var pod: String?

    @Option(name: .long, help: "text (one line per report) or json (an array of reports).")
    var format: Format = .text

    @Flag(name: .long, help: "One line per bug (per fingerprint) with a count, first and last seen.")
    var group = false

    func run() throws {
        let store = reportsOption.store
        let only = program.map(RunHistory.realPath)
        // In JSON, stdout holds the array alone; what is said about it goes to stderr.
        func say(_ line: String) {
            if format == .json { StandardError.write("crashport: \(line)\n") } else { print(line) }
        }
        if let only {
            let runs = reportsOption.stores.flatMap { RunHistory(store: $0).programs() }.filter { $0.executable == only }
            if runs.isEmpty { say("no run of \(only) on record in \(store.root)") }
            for record in runs {
                say("last run of \(only)\(record.buildID.map { " (build-id \($0))" } ?? ""): \(describeLastRun(record))")
            }
        }
        if group { return try printGroups(store: store, only: only) }
        var entries: [Entry] = []
        let consent = (try? ConsentSettings.read(root: store.root)) ?? ConsentSettings()
        let reports = reportsOption.stores.flatMap { store in store.ids().map { (store, $0) } }.sorted { $0.1 > $1.1 }
        for (store, id) in reports {
            do {
                let event = try store.event(id: id)
                if let only, event.process?.executable.map(RunHistory.realPath) != only { continue }
                if let container, event.process?.ranIn(container: container) != true { continue }
                if let pod, event.process?.ranIn(pod: pod) != true { continue }
                entries.append(
                    Entry(
                        id: id, path: store.path(of: id), timestamp: event.timestamp,
                        program: event.process?.executable.map { $0.pathBaseName },
                        executable: event.process?.executable, signal: event.signal?.name, kind: event.kind?.rawValue,
                        title: event.title, stage: event.stage,
                        culprit: event.culprit.map { CrashLog.describe(culprit: $0, in: event) },
                        topFrame: event.crashedThreadRecord?.frames?.first.map { CrashLog.describe($0) },
                        signature: event.signature, fingerprint: event.fingerprint,
                        container: Self.container(of: event.process), pod: Self.pod(of: event.process),
                        upload: Self.uploadStates(
                            directory: store.path(of: id),
                            asked: consent.choice(for: event.process?.executable) == .ask)))
            } catch {
                StandardError.write("crashport: \(error)\n")
            }
        }
        if entries.isEmpty {
            var info = stat()
            let missing = stat(store.root, &info) != 0
            let what = only.map { "no reports of \($0)" } ?? "no reports"
            StandardError.write("crashport: \(what) in \(store.root)\(missing ? " (the directory does not exist)" : "")\n")
            if let hint = store.unreadableUsersHint() { StandardError.write("crashport: \(hint)\n") }
        }
        switch format {
        case .text:
            for entry in entries {
                print(
                    [
                        entry.id, entry.timestamp ?? "?", entry.program ?? "?", entry.signal ?? entry.kind ?? "?",
                        CrashLog.escaped(entry.culprit ?? entry.topFrame ?? "no frames")
                            + (entry.stage.map { " (\(CrashLog.escaped($0)): not yet symbolicated)" } ?? ""),
                    ].joined(separator: "  ")
                        + entry.placement
                        + (entry.upload.map { states in
                            "  ["
                                + states.sorted { $0.key < $1.key }.map {
                                    "\($0.key.split(separator: " ").first ?? ""): \($0.value)"
                                }
                                .joined(separator: ", ") + "]"
                        } ?? ""))
            }
        case .json:
            let encoder = JSONEncoder()
            encoder.keyEncodingStrategy = .convertToSnakeCase
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(entries.isEmpty ? "[]" : String(decoding: try encoder.encode(entries), as: UTF8.self))
        }
    }
}

extension List {
    /// "docker web-1 3f2a9c0d1e2b": a report's container in a list line; nil outside one.
    static func container(of process: ProcessInfoRecord?) -> String? {
        guard let process, process.container != nil || process.containerName != nil else { return nil }
        return [process.containerRuntime, process.containerName, process.container.map { String($0.prefix(12)) }]
            .compactMap { $0 }.joined(separator: " ")
    }

    /// "shop/web-7d4f": a report's pod (its uid when it has no name); nil outside one.
    static func pod(of process: ProcessInfoRecord?) -> String? {
        guard let pod = process?.pod else { return nil }
        guard let name = pod.name else { return pod.uid }
        return (pod.namespace.map { $0 + "/" } ?? "") + name
    }

    func printGroups(store: ReportStore, only: String?) throws {
        let groups = ReportGroup.of(reportsOption.stores, executable: only) { StandardError.write("crashport: \($0)\n") }
        if groups.isEmpty {
            StandardError.write("crashport: \(only.map { "no reports of \($0)" } ?? "no reports") in \(store.root)\n")
        }
        switch format {
        case .text: for group in groups { print(group.line) }
        case .json:
            let encoder = JSONEncoder()
            encoder.keyEncodingStrategy = .convertToSnakeCase
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(groups.isEmpty ? "[]" : String(decoding: try encoder.encode(groups), as: UTF8.self))
        }
    }

    /// A report's upload state per destination ("sent bp-…", "pending (2 attempts)", "failed:
    /// HTTP 413…"), and under `consent` the user's decision, or that it awaits one (`asked`:
    /// crashport consent ask applies to it); nil when there is nothing to say.
    static func uploadStates(directory: String, asked: Bool) -> [String: String]? {
        let state = (try? UploadState.read(directory: directory)) ?? UploadState()
        var states: [String: String] = [:]
        switch state.consent {
        case .granted?: states["consent"] = "granted"
        case .denied?: states["consent"] = "discarded"
        case nil where asked: states["consent"] = "awaiting"
        case nil: break
        }
        return states.merging(uploadedStates(state), uniquingKeysWith: { first, _ in first }).nilIfEmpty
    }

    static func uploadedStates(_ state: UploadState) -> [String: String] {
        state.destinations.mapValues { entry in
            switch entry.status {
            case .sent: return "sent" + (entry.serverID.map { " \($0)" } ?? "")
            case .pending: return "pending (\(entry.attempts) attempt\(entry.attempts == 1 ? "" : "s"))"
            case .failed: return "failed: " + (entry.lastError ?? "")
            }
        }
    }
}

extension Dictionary {
    var nilIfEmpty: Self? { isEmpty ? nil : self }
}
