// crashport send: allows reports held by consent ask to be sent, and sends them.

import ArgumentParser
import BoundedBytes
import Upload

struct Send: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Allow reports held by crashport consent ask to be sent, and send them now.",
        discussion: """
            Records the decision beside each report; with a destination (as for crashport upload), sends them at \
            once, else the next crashport upload does. Exits 1, as crashport upload does, when a report failed for \
            good in that pass.
            """)

    @OptionGroup var reportsOption: ReportsOption

    @OptionGroup var uploadOptions: UploadOptions

    @Argument(help: "Report ids (or unique prefixes).")
    var ids: [String] = []

    @Flag(name: .long, help: "Every report awaiting consent.")
    var all = false

    func run() throws {
        let store = reportsOption.store
        let chosen = ConsentDecisions.decide(.granted, ids: ids, all: all, store: store, command: "send")
        print("\(chosen.count) report(s) allowed to be sent\(chosen.isEmpty ? "" : ": " + chosen.joined(separator: ", "))")
        guard !chosen.isEmpty, var uploader = uploadOptions.uploader(store: store, command: "send") else { return }
        uploader.now = true
        let outcome = uploader.run()
        StandardError.write(UploadOptions.summary(outcome))
        if outcome.failed > 0 { throw ExitCode(ExitStatus.failure) }
    }
}
