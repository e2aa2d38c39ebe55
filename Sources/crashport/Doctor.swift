// crashport doctor: why capture would or would not work here.

import ArgumentParser
import Watcher

struct Doctor: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor", abstract: "Why capture would or would not work here.")

    @OptionGroup var reportsOption: ReportsOption

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The sidecar's socket to check (default: $CRASHPORT_SOCKET, else crashport watch's default).", valueName: "PATH"))
    var socket: String?

    @OptionGroup var host: HostDirectoryOption

    func run() throws {
        let doctor = Watcher.Doctor()
        let findings =
            doctor.findings(store: reportsOption.store)
            + doctor.sidecarFindings(socket: socket ?? SidecarConfiguration.defaults().socketPath)
            + doctor.hostFindings(paths: host.paths)
        for finding in findings {
            let level = finding.level.rawValue
            print(level + String(repeating: " ", count: max(0, 8 - level.count)) + " " + finding.text)
        }
        if findings.contains(where: { $0.level == .problem }) { throw ExitCode(ExitStatus.failure) }
    }
}
