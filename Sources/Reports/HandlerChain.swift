// HandlerChain: what crashport does with a signal after reporting it, given the action it saved
// at install (the handler below it) and the signal's policy. Mirrors the stub's
// cp_handler_continue_chain and forward-first path; a pure function so the table is tested.

import ReportModel

public enum HandlerChain {
    /// - previous: the saved action (nil: none saved, i.e. SIG_DFL).
    /// - forwardFirst: the signal's policy; `previousGaveUp`: under forward-first, the previous
    ///   handler ran and chose the ending itself (reset its action or raised again).
    /// - isFault: a kernel-generated fault (si_code > 0), which recurs when ignored.
    public static func continuation(
        previous: WireAction?, forwardFirst: Bool, previousGaveUp: Bool = false, isFault: Bool
    ) -> ChainAction {
        guard let previous, previous.handler != 0 else { return .defaultAction }
        if previous.handler == 1 {
            // SIG_IGN: the kernel forces the default action on a fault it cannot ignore; a
            // sent signal is simply ignored, as the previous disposition says.
            return isFault ? .defaultAction : .forwardedToPrevious
        }
        if forwardFirst {
            // The previous handler already had the signal: either it chose how the process
            // ends, or the same fault came back and crashport ends it by the default action.
            return previousGaveUp ? .forwardedToPrevious : .defaultAction
        }
        return .forwardedToPrevious
    }
}
