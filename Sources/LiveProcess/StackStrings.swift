// StackStrings: texts the crashed thread's stack points at, read while the process is held, for
// a reason that lives in memory a report does not keep. A Rust panic's message is one: the
// panic machinery's frames (still on the stack when panic=abort aborts) hold it as a
// (pointer, length) pair, its bytes on the heap (a formatted message) or in .rodata (a literal).
// Which pair is the message is decided after unwinding, from the frames (RustPanic); here every
// pair near the stack pointer that points at readable, printable UTF-8 is read.
//
// Bounded: only for SIGABRT, the words of the first 2 KiB above the stack pointer, pairs whose
// pointer lies in a readable mapping with the length inside it, at most 8 texts of 1 KiB.
//
// Every value here is the crashed process's word (its registers and stack copy come in its
// crash record, the pairs from its memory): an sp below or far above the stack, a stack at 0 or
// at the top of the address space, a pair whose end wraps, give no text, never a trap.

import BoundedBytes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public enum StackStrings {
    static let window = 2048
    static let longest = 4096
    static let kept = 1024
    static let most = 8

    /// The texts the record's own stack copy points at, read from that copy only: for a
    /// process that is gone or must not be read (a spooled crash; the record-to-report fuzz
    /// target). `mappings` are the process's as it reported them (its /proc/self/maps copy).
    public static func read(record: CrashRecord, mappings: [MemoryMapping]) -> [StackString] {
        let crashed = ThreadSnapshot(tid: record.tid, name: record.threadName, registers: record.registers, stack: record.stack)
        return read(record: record, threads: [crashed], mappings: mappings, memory: RegionMemory(regions: [record.stack]))
    }

    static func read(
        record: CrashRecord, threads: [ThreadSnapshot], mappings: [MemoryMapping], memory: some MemoryReader
    ) -> [StackString] {
        // The first word at or above sp (sp rounded up to 8 within the stack); none when sp is
        // below the stack or past its end.
        guard record.signal == SIGABRT, let thread = threads.first(where: { $0.tid == record.tid }),
            let stack = thread.stack,
            let above = thread.registers.rsp.checkedSubtracting(stack.start),
            let aligned = above.checkedAligned(to: 8),
            let first = Int(checkedCount: aligned, limit: stack.bytes.count)
        else { return [] }
        // first <= bytes.count and window is 2 KiB: neither sum nor difference can overflow.
        let last = min(stack.bytes.count - 16, first + window)
        guard first <= last else { return [] }
        let readable = mappings.filter(\.readable)
        var found: [StackString] = []
        var offset = first
        while offset <= last && found.count < most {
            defer { offset += 8 }
            let pointer = word(stack.bytes, offset)
            let length = word(stack.bytes, offset + 8)
            guard length >= 2, length <= UInt64(longest), let end = pointer.checkedAdding(length),
                readable.contains(where: { $0.contains(pointer) && end <= $0.end }),
                let slot = stack.start.checkedAdding(UInt64(offset))
            else { continue }
            let count = Int(min(length, UInt64(kept)))  // at most `kept`
            let bytes = memory.bytes(at: pointer, count: count)
            guard bytes.count == count, let text = printable(bytes, cut: length > UInt64(kept)) else { continue }
            found.append(StackString(slot: slot, text: text, truncated: length > UInt64(kept)))
        }
        return found
    }

    /// The little-endian word at `offset` (the caller keeps `offset + 8 <= bytes.count`).
    static func word(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in (0..<8).reversed() { value = value << 8 | UInt64(bytes[offset + index]) }
        return value
    }

    /// Valid UTF-8 of at least two characters, with no control characters but newline and tab,
    /// else nil. Only text that was `cut` (longer than what is kept) may end in a cut multi-byte
    /// sequence, which is dropped: a pair whose bytes are not all text is no message (a pointer
    /// and a length that only happen to lie side by side on the stack read as one or two
    /// printable bytes followed by others far more often than as a text of their length).
    static func printable(_ bytes: [UInt8], cut: Bool = false) -> String? {
        var bytes = bytes[...]
        if cut {
            for _ in 0..<3 where String(validating: bytes, as: UTF8.self) == nil && !bytes.isEmpty { bytes = bytes.dropLast() }
        }
        guard let text = String(validating: bytes, as: UTF8.self), text.unicodeScalars.count >= 2,
            text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F || $0 == "\n" || $0 == "\t" })
        else { return nil }
        return text
    }
}
