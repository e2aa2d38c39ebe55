// HandlerChain: what crashport does with a signal after reporting it, given the program's action
// at the crash. Mirrors the stub's cp_forward_deliver: crashport keeps the kernel's slot and does
// what the kernel would have done with the program's action. A pure function so the table is
// tested.

import ReportModel

public enum HandlerChain {
    /// - program: the program's action at the crash (nil: SIG_DFL).
    /// - changed: the program set it after crashport installed (else it is the one saved then).
    /// - isFault: a kernel-generated fault (si_code > 0), which recurs when ignored.
    public static func continuation(program: WireAction?, changed: Bool, isFault: Bool) -> ChainAction {
        guard let program, program.handler != 0 else { return .defaultAction }
        if program.handler == 1 {
            // SIG_IGN: the kernel forces the default action on a fault it cannot ignore; a sent
            // signal is simply discarded.
            return isFault ? .defaultAction : .ignored
        }
        return changed ? .forwardedToProgram : .forwardedToPrevious
    }

    /// The program's handler runs before crashport reports: every handler it installed after
    /// crashport (`ranFirst`: one did, for the crashing signal), and a forward-first signal's.
    public static func policy(program: WireAction?, changed: Bool, forwardFirst: Bool, ranFirst: Bool = false) -> SignalPolicy {
        let isFunction = (program?.handler ?? 0) > 1
        return forwardFirst || ranFirst || (isFunction && changed) ? .forwardFirst : .reportThenForward
    }
}
