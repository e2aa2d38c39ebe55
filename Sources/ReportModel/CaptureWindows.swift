// CaptureWindows: which bytes of a crashed process's memory a capture keeps, whoever reads it.
//
// A live capture (LiveProcess: ptrace and /proc/PID/mem) and a capture from the kernel's core
// stream (CoreDump: the loads streaming past) keep the same bytes, so a report's frames do not
// depend on which one saw the crash: each thread's stack from its stack pointer less the red
// zone up to the end of its mapping (found above a guard page after an overflow), cut at a
// limit; and a small window around an address that points into memory. Mappings here are
// address-sorted and disjoint (/proc/PID/maps is; a core's loads are sorted before they are
// asked), and every bound is computed with checked arithmetic: the addresses are the crashed
// program's registers.

import BoundedBytes

public enum CaptureWindows {
    /// The x86-64 System V red zone: a leaf function's data below its stack pointer.
    public static let redZone: UInt64 = 128
    /// How far below its stack's mapping an overflowed thread's sp may lie: a guard page
    /// (glibc's default is one page, Rust's and Go's runtimes use up to 64 KiB) plus a stack
    /// probe's step into it.
    public static let guardReach: UInt64 = 128 << 10
    /// Stack bytes kept for the crashing thread, from its stack pointer up. Its whole stack (a
    /// default 8 MiB main stack fits) is the evidence of a stack overflow: its outermost
    /// frames are kept only if its memory is.
    public static let crashedThreadStackLimit = 16 << 20
    /// Stack bytes kept for every other thread: deep enough for its frames, small enough for a
    /// process of thousands of threads.
    public static let threadStackLimit = 256 << 10
    /// Bytes kept on each side of an address (the faulting instruction, a register that points
    /// into memory): enough to show the instructions around a pc, or the object a register
    /// points at.
    public static let addressReach: UInt64 = 128

    /// The range of a thread's stack to keep: from `sp` less the red zone to the end of the
    /// readable mapping holding it, at most `limit` bytes, and none from `below` on; nil when
    /// no mapping holds it. After a stack overflow sp lies below its stack's mapping (in the gap
    /// the kernel keeps under a main stack, or in a thread's guard page): the stack is then the
    /// readable mapping starting at most `guardReach` above sp.
    public static func stack(
        from sp: UInt64, limit: Int, below: UInt64? = nil, in mappings: [MemoryMapping]
    ) -> Range<UInt64>? {
        let start = sp.checkedSubtracting(redZone) ?? 0
        guard
            let mapping = readableMapping(containing: start, in: mappings) ?? readableMapping(containing: sp, in: mappings)
                ?? firstReadableMapping(above: sp, in: mappings)
        else { return nil }
        let from = max(start, mapping.start)
        let end = min(mapping.end, below ?? mapping.end)
        guard from < end else { return nil }
        return from..<(from + min(UInt64(max(limit, 0)), end - from))
    }

    /// `addressReach` bytes on each side of `address`, clipped to the readable mapping holding
    /// it (never wrapped at either end of the address space); nil when none holds it.
    public static func window(around address: UInt64, in mappings: [MemoryMapping]) -> Range<UInt64>? {
        guard let mapping = readableMapping(containing: address, in: mappings) else { return nil }
        let from = max(mapping.start, address.checkedSubtracting(addressReach) ?? 0)
        let to = min(mapping.end, address.checkedAdding(addressReach) ?? .max)
        return from < to ? from..<to : nil
    }

    /// The mapping holding `address`, when it is readable.
    public static func readableMapping(containing address: UInt64, in mappings: [MemoryMapping]) -> MemoryMapping? {
        guard let index = mappings.lastIndex(atOrBelow: address, key: \.start), mappings[index].contains(address),
            mappings[index].readable
        else { return nil }
        return mappings[index]
    }

    /// The first readable mapping that starts above `sp`, at most `guardReach` above it.
    static func firstReadableMapping(above sp: UInt64, in mappings: [MemoryMapping]) -> MemoryMapping? {
        var index = mappings.lastIndex(atOrBelow: sp, key: \.start).map { $0 + 1 } ?? 0
        while index < mappings.count, mappings[index].start - sp <= guardReach {
            if mappings[index].readable { return mappings[index] }
            index += 1
        }
        return nil
    }
}
