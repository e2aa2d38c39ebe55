// crashport consent: whether reports may leave this machine; and the decision send and discard record.

import ArgumentParser
import Store
import Upload

struct Consent: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consent",
        abstract: "Whether reports may leave this machine: ask, always or never.",
        discussion: """
            always (the default once a destination is configured): crashport upload sends them. never: they are kept \
            here and never sent. ask: each waits until crashport send or crashport discard decides (App Center's \
            "send / don't send / always send").

            With --program, for that executable only. Kept in the reports directory (per user). With no choice, \
            prints the settings.
            """)

    @OptionGroup var reportsOption: ReportsOption

    @Argument(help: "ask, always or never.")
    var choice: ConsentSettings.Choice?

    @Option(name: .long, help: ArgumentHelp("For this executable only.", valueName: "PATH"))
    var program: String?

    func run() throws {
        let store = reportsOption.store
        var settings: ConsentSettings
        do {
            settings = try ConsentSettings.read(root: store.root)
        } catch {
            guard choice != nil else { fail("consent: \(error)", status: ExitStatus.failure) }
            settings = ConsentSettings()  // a choice made now replaces what cannot be read
        }
        guard let choice else {
            print("every program: \(settings.choice.rawValue)")
            for (path, choice) in settings.programs.sorted(by: { $0.key < $1.key }) { print("\(path): \(choice.rawValue)") }
            return
        }
        do {
            try ConsentDecisions.set(choice, program: program.map(RunHistory.realPath), store: store)
        } catch {
            fail("consent: \(error)", status: ExitStatus.failure)
        }
        print("\(program.map(RunHistory.realPath) ?? "every program"): \(choice.rawValue)")
    }
}

extension ConsentSettings.Choice: ExpressibleByArgument {}

/// `crashport send` and `crashport discard`: the user's decision on reports held under `ask`,
/// from the command line's ids or --all.
extension ConsentDecisions {
    static func decide(
        _ decision: ReportConsent, ids: [String], all: Bool, store: ReportStore, command: String
    ) -> [String] {
        guard all || !ids.isEmpty else { usageError("\(command): give report ids, or --all") }
        guard !all || ids.isEmpty else { usageError("\(command): give report ids or --all, not both") }
        var chosen: [String] = all ? ConsentDecisions.awaiting(store: store) : []
        for reference in ids {
            do {
                chosen.append(try store.resolve(reference))
            } catch {
                fail("\(command): \(error)", status: ExitStatus.failure)
            }
        }
        do {
            try ConsentDecisions.decide(decision, ids: chosen, store: store)
        } catch {
            fail("\(command): \(error)", status: ExitStatus.failure)
        }
        return chosen
    }
}
