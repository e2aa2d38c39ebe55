// crashport discard: reports held by consent ask are never sent.

import ArgumentParser
import Upload

struct Discard: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discard",
        abstract: "Never send reports held by crashport consent ask (they stay here).")

    @OptionGroup var reportsOption: ReportsOption

    @Argument(help: "Report ids (or unique prefixes).")
    var ids: [String] = []

    @Flag(name: .long, help: "Every report awaiting consent.")
    var all = false

    func run() throws {
        let chosen = ConsentDecisions.decide(.denied, ids: ids, all: all, store: reportsOption.store, command: "discard")
        print("\(chosen.count) report(s) will never be sent\(chosen.isEmpty ? "" : ": " + chosen.joined(separator: ", "))")
    }
}
