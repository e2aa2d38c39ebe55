// ReportFormat: how one report is printed, by `crashport show` and `crashport symbolicate`
// alike: the full crash log (CrashLog.full, coloured on a terminal that wants it) or the
// event's JSON. One renderer, so the two commands cannot drift apart.

import FoundationEssentials
import ReportModel

public enum ReportFormat: String, Sendable {
    /// The crash log a person reads.
    case text
    /// The event, as event.json holds it.
    case json

    /// `event` in this format, without a final newline. `isTerminal` and `environment` decide
    /// whether the text is coloured (CrashLog.colourWanted); the JSON never is.
    public func render(_ event: Event, isTerminal: Bool, environment: [String: String]) throws -> String {
        switch self {
        case .text:
            return CrashLog.full(event, colour: CrashLog.colourWanted(isTerminal: isTerminal, environment: environment))
        case .json:
            return String(decoding: try event.jsonData(), as: UTF8.self)
        }
    }
}
