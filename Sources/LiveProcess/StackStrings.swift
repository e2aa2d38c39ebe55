// StackStrings: texts the crashed thread's stack points at, read while the process is held, for
// a reason that lives in memory a report does not keep. A Rust panic's message is one: the
// panic machinery's frames (still on the stack when panic=abort aborts) hold it as a
// (pointer, length) pair, its bytes on the heap (a formatted message) or in .rodata (a literal).
// Which pair is the message is decided after unwinding, from the frames (RustPanic); here every
// pair near the stack pointer that points at readable, printable UTF-8 is read.
//
// Bounded: only for SIGABRT, the words of the first 2 KiB above the stack pointer, pairs whose
// pointer lies in a readable mapping with the length inside it, at most 8 texts of 1 KiB.

import BoundedBytes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

enum StackStrings {
    static let window = 2048
    static let longest = 4096
    static let kept = 1024
    static let most = 8

    static func read(
        record: CrashRecord, threads: [ThreadSnapshot], mappings: [MemoryMapping], memory: some MemoryReader
    ) -> [StackString] {
        guard record.signal == SIGABRT,
            let stack = threads.first(where: { $0.tid == record.tid })?.stack,
            let sp = threads.first(where: { $0.tid == record.tid })?.registers.rsp,
            sp >= stack.start
        else { return [] }
        let first = Int(clamping: (sp - stack.start + 7) & ~7)
        let last = min(stack.bytes.count - 16, first + window)
        guard first <= last else { return [] }
        let readable = mappings.filter(\.readable)
        var found: [StackString] = []
        var offset = first
        while offset <= last && found.count < most {
            defer { offset += 8 }
            let pointer = word(stack.bytes, offset)
            let length = word(stack.bytes, offset + 8)
            guard length >= 2, length <= UInt64(longest),
                readable.contains(where: { $0.contains(pointer) && pointer &+ length <= $0.end && pointer &+ length > pointer })
            else { continue }
            let bytes = memory.bytes(at: pointer, count: Int(min(length, UInt64(kept))))
            guard bytes.count == Int(min(length, UInt64(kept))), let text = printable(bytes) else { continue }
            found.append(StackString(slot: stack.start + UInt64(offset), text: text, truncated: length > UInt64(kept)))
        }
        return found
    }

    static func word(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in (0..<8).reversed() { value = value << 8 | UInt64(bytes[offset + index]) }
        return value
    }

    /// Valid UTF-8 with no control characters but newline and tab (a cut multi-byte sequence at
    /// the end is dropped), else nil.
    static func printable(_ bytes: [UInt8]) -> String? {
        var bytes = bytes[...]
        for _ in 0..<3 where String(validating: bytes, as: UTF8.self) == nil && !bytes.isEmpty { bytes = bytes.dropLast() }
        guard let text = String(validating: bytes, as: UTF8.self), !text.isEmpty,
            text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F || $0 == "\n" || $0 == "\t" })
        else { return nil }
        return text
    }
}
