// InterruptedStacks: the stacks signal handlers interrupted, read while the process is held.
//
// A handler on a sigaltstack runs far from the stack it interrupted (the faulting code and its
// callers, down to main), and a thread's captured stack is read only from its sp. So every
// captured stack is searched for the kernel's signal frames (a word pointing at code that is an
// rt_sigreturn trampoline, Unwinding's SignalFrame), and the stack its saved rsp points to is
// read too, the same way (and searched in turn: a handler interrupted by another signal). The
// regions go into the snapshot's extra memory, so the minidump holds them and an offline
// unwind crosses the same signal frames as the live one.
//
// Cheap while the process is stopped: a candidate is a word with a zero two words above it (the
// ucontext's uc_link, which the kernel always writes as 0) that lies inside an executable
// mapping, and each candidate address has its code read once.

import BoundedBytes
import ReportModel
import Unwinding

struct InterruptedStacks {
    /// Signal frames followed per thread (a forged frame may point anywhere, or at itself).
    static let maxSignalFrames = 16

    let stacks: CaptureSession.StackReader
    /// Executable mappings, sorted by start.
    let code: [MemoryMapping]
    /// Whether the code at an address is a trampoline.
    private var trampolines: [UInt64: Bool] = [:]
    /// Every region captured so far: the threads' stacks, then the ones found here.
    private var captured: [MemoryRegion]
    private(set) var found: [MemoryRegion] = []

    init(stacks: CaptureSession.StackReader, threads: [ThreadSnapshot], extra: [MemoryRegion]) {
        self.stacks = stacks
        code = stacks.mappings.filter(\.executable).sorted { $0.start < $1.start }
        captured = threads.compactMap(\.stack) + extra
    }

    /// Follows the signal frames on `thread`'s stack, reading each interrupted stack up to `limit`
    /// bytes.
    mutating func follow(_ thread: ThreadSnapshot, limit: Int) {
        guard var pending = thread.stack.map({ [$0] }) else { return }
        var followed = 0
        while let region = pending.popLast() {
            for savedSP in interruptedStackPointers(in: region) {
                guard followed < Self.maxSignalFrames else { return }
                followed += 1
                guard !captured.contains(where: { $0.contains(savedSP) }),
                    let stack = stacks.stack(from: savedSP, limit: limit, below: nextCapturedStart(after: savedSP))
                else { continue }
                captured.append(stack)
                found.append(stack)
                pending.append(stack)
            }
        }
    }

    /// The saved stack pointers of the signal frames in `region`: words that point at a
    /// trampoline, followed by a ucontext (in the region too) whose uc_link is 0, as the kernel
    /// writes it.
    private mutating func interruptedStackPointers(in region: MemoryRegion) -> [UInt64] {
        guard let first = code.first?.start, let last = code.last?.end else { return [] }
        var found: [UInt64] = []
        // From the slot: the trampoline's address, uc_flags, uc_link, ... the saved rsp.
        let ucLink = 16, savedSP = 8 + Int(SignalFrame.savedSPOffset)
        let skip = Int((8 - region.start % 8) % 8)
        region.bytes.withUnsafeBytes { bytes in
            func word(_ offset: Int) -> UInt64 {
                UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            }
            var offset = skip
            while offset + savedSP + 8 <= bytes.count {
                defer { offset += 8 }
                guard word(offset + ucLink) == 0 else { continue }
                let value = word(offset)
                if value >= first && value < last && isTrampoline(value) { found.append(word(offset + savedSP)) }
            }
        }
        return found
    }

    private mutating func isTrampoline(_ address: UInt64) -> Bool {
        guard let index = code.lastIndex(atOrBelow: address, key: \.start), code[index].contains(address) else {
            return false
        }
        if let known = trampolines[address] { return known }
        let isTrampoline = SignalFrame.isTrampoline(at: address, in: stacks.memory)
        trampolines[address] = isTrampoline
        return isTrampoline
    }

    /// The lowest start of a captured region above `address`: where a new stack read stops, so
    /// regions do not overlap.
    private func nextCapturedStart(after address: UInt64) -> UInt64? {
        captured.map(\.start).filter { $0 > address }.min()
    }
}
