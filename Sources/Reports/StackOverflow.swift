// StackOverflow: whether a fault is a stack overflow, decided from the memory map at the crash,
// the fault address and the faulting stack pointer (`signal.stack_overflow`, docs/using.md).
//
// The map is /proc/PID/maps as the capture read it while the process was stopped; a minidump
// keeps the same text in its LinuxMaps stream, so a report built offline reaches the same
// verdict. Two shapes of stack are recognised:
//
// - a thread stack (pthread, or crashport's own alternate stacks): a writable mapping with a
//   PROT_NONE guard mapping directly below it. A fault in that guard, taken with the stack
//   pointer in the stack or its guard, is an overflow whatever the distance from the pointer.
// - the main thread's `[stack]`, which grows down: the kernel grows it on a fault until the
//   rlimit (or another mapping within stack_guard_gap) stops it, so the overflowing access lands
//   in unmapped memory below it. Such a fault is an overflow when it lies below the stack's
//   mapping and within a page of the stack pointer (a `call` pushes 8 bytes below it, a probe
//   touches it; the pointer itself may already be below the mapping after `sub rsp`).
//
// Anything else is not: a fault far from the stack pointer (NULL, 0x10, a wild heap address), a
// fault inside a mapping other than the guard below this thread's stack. Input that cannot
// support a verdict (no maps, maps that do not parse or overlap, a stack pointer of 0 or in no
// stack) gives none, never a guess.

import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public enum StackOverflow {
    /// "Within a page of the stack pointer" (x86_64 pages).
    static let pageSize: UInt64 = 4096
    /// How far below a grows-down `[stack]` a stack pointer may already be and still belong to
    /// it: the kernel's default stack_guard_gap (256 pages), and a page more.
    static let maximumGap: UInt64 = 257 * 4096

    /// The verdict for a snapshot: nil unless the signal is a fault the kernel raised (SIGSEGV
    /// with a positive si_code) and the maps and the crashed thread's stack pointer are known.
    /// `mappings`: the snapshot's maps already parsed, when the caller has them.
    public static func verdict(_ snapshot: ProcessSnapshot, mappings parsed: [MemoryMapping]? = nil) -> Bool? {
        let exception = snapshot.exception
        guard exception.signal == SIGSEGV, exception.code > 0, let maps = snapshot.linuxFiles.maps,
            let crashed = snapshot.threads.first(where: { $0.tid == snapshot.crashedThreadID })
        else { return nil }
        return verdict(
            faultAddress: exception.faultAddress, stackPointer: crashed.registers.rsp,
            mappings: parsed ?? MemoryMapping.parse(maps))
    }

    /// Whether a fault at `faultAddress` with the stack pointer at `stackPointer` overflowed the
    /// stack, given the process's mappings; nil when they cannot tell.
    public static func verdict(faultAddress: UInt64, stackPointer: UInt64, mappings: [MemoryMapping]) -> Bool? {
        guard stackPointer != 0, !mappings.isEmpty else { return nil }
        let sorted = mappings.sorted { $0.start < $1.start }
        // Overlapping lines are not a map the kernel wrote.
        for (lower, upper) in zip(sorted, sorted.dropFirst()) where lower.end > upper.start { return nil }
        guard let stack = stackMapping(of: stackPointer, in: sorted) else { return nil }

        if let hit = sorted.first(where: { $0.contains(faultAddress) }) {
            // Mapped: an overflow only into the guard directly below this thread's stack.
            return hit.isProtNone && hit.end == stack.start
        }
        // Unmapped: below the stack's mapping and within a page of the stack pointer.
        let lowest = stackPointer >= pageSize ? stackPointer - pageSize : 0
        return faultAddress < stack.start && faultAddress >= lowest
    }

    /// The mapping of the stack `stackPointer` is on: the writable mapping holding it; or, when
    /// it is in a guard, the writable mapping directly above the guard; or, when it is unmapped
    /// (already moved past a grows-down `[stack]`), the `[stack]` a gap above it.
    static func stackMapping(of stackPointer: UInt64, in sorted: [MemoryMapping]) -> MemoryMapping? {
        if let index = sorted.firstIndex(where: { $0.contains(stackPointer) }) {
            let holder = sorted[index]
            if holder.writable { return holder }
            guard holder.isProtNone, index + 1 < sorted.count else { return nil }
            let above = sorted[index + 1]
            return above.start == holder.end && above.writable ? above : nil
        }
        guard let above = sorted.first(where: { $0.start > stackPointer }), above.path == "[stack]", above.writable,
            above.start - stackPointer <= maximumGap
        else { return nil }
        return above
    }
}

extension MemoryMapping {
    /// No access at all: a guard (`---p`).
    var isProtNone: Bool { !readable && !writable && !executable }
}
