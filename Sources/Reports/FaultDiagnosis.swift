// FaultDiagnosis: the line that says why (`fault.diagnosis`), and the rule that decided it.
//
// Two kinds of rule. Those of a fault read the decoded access, the registers and the memory
// map (FaultExplanation's facts): null and near-null dereferences, non-canonical and wild
// addresses, writes to read-only memory, jumps to NULL or into data, stack overflows, misaligned
// accesses, divisions, traps, and a use after free only where glibc's free-list link is the bad
// pointer. Those of an abort read the event: the frames (`__stack_chk_fail`, glibc's
// `malloc_printerr`) and the runtime's message (glibc's heap checks, a Rust panic, a Swift
// runtime failure). Each verdict says its evidence; where no rule holds there is no line.

import BoundedBytes
import ObjectFile
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

extension FaultExplanation {
    /// The verdict of a fault from its facts; nil when no rule holds.
    static func diagnose(_ facts: Facts, instruction: MachineInstruction?, access: AccessRecord?) -> DiagnosisRecord? {
        let what = describe(access)
        let address = access?.address?.value ?? facts.faultAddress
        let base = badRegister(access, facts: facts)
        let through = base.map { " through \($0.name) = \($0.value == 0 ? "NULL" : HexAddress($0.value).description)" } ?? ""

        if facts.stackOverflow {
            return DiagnosisRecord(
                rule: "stack-overflow", summary: "stack overflow: \(what) at \(HexAddress(address)), past the end of the stack",
                evidence: [
                    "the fault address lies in the guard below the crashed thread's stack, within reach of sp = \(HexAddress(facts.sp))"
                ])
        }
        switch facts.signal {
        case SIGFPE:
            let divisor = instruction?.operandText ?? "the divisor"
            if facts.code == FPE_INTDIV {
                return DiagnosisRecord(
                    rule: "division-by-zero",
                    summary: "integer division by zero: \(instruction?.text ?? "a division") with \(divisor) = 0",
                    evidence: ["SIGFPE FPE_INTDIV"])
            }
            if facts.code == FPE_INTOVF {
                return DiagnosisRecord(
                    rule: "division-overflow",
                    summary:
                        "integer division overflow: \(instruction?.text ?? "a division") (the most negative value divided by -1)",
                    evidence: ["SIGFPE FPE_INTOVF"])
            }
            return nil
        case SIGILL, SIGTRAP:
            guard let instruction, instruction.kind == .trap else { return nil }
            return DiagnosisRecord(
                rule: "trap",
                summary: "a deliberate trap: \(instruction.mnemonic) (__builtin_trap, an unreachable path, a failed check)",
                evidence: ["the instruction at the pc is \(instruction.text)"])
        default: break
        }
        // SIGSEGV and SIGBUS from here.
        if access?.kind == .execute {
            return diagnoseJump(to: facts.pc, facts: facts, access: access)
        }
        if facts.signal == SIGBUS && facts.code == BUS_ADRALN
            || instruction?.needsAlignment == true && address % UInt64(max(access?.size ?? 16, 1)) != 0
        {
            return DiagnosisRecord(
                rule: "misaligned",
                summary:
                    "misaligned access: \(what) at \(HexAddress(address)), which \(instruction?.mnemonic ?? "the instruction") needs aligned to \(access?.size ?? 16) bytes",
                evidence: [instruction.map { "the instruction at the pc is \($0.text)" } ?? "SIGBUS BUS_ADRALN"])
        }
        if access?.kind == .call || access?.kind == .jump {
            return diagnoseJump(to: address, facts: facts, access: access)
        }
        if !isCanonical(address) {
            return DiagnosisRecord(
                rule: "non-canonical",
                summary:
                    "\(what) at non-canonical address \(HexAddress(address))\(through): no pointer holds such an address (garbage, or a pointer overwritten)",
                evidence: ["x86-64 addresses have their top 17 bits equal; \(HexAddress(address)) does not"])
        }
        if let base, let freed = freedChunkLink(base.value, facts: facts) {
            return DiagnosisRecord(
                rule: "use-after-free",
                summary:
                    "likely use after free: \(what) at \(HexAddress(address))\(through), which is glibc's free-list link of a freed chunk",
                evidence: [freed])
        }
        if address < facts.nullReach {
            let evidence = ["\(HexAddress(address)) is below \(HexAddress(facts.nullReach)), where nothing is mapped"]
            if let base, base.value == 0, address != 0 {
                return DiagnosisRecord(
                    rule: "near-null",
                    summary:
                        "null pointer dereference: \(what) at \(HexAddress(address)) = NULL + \(address)\(through): a field of a null pointer",
                    evidence: evidence + ["\(base.name) was 0"])
            }
            return DiagnosisRecord(
                rule: address == 0 || base?.value == 0 ? "null-dereference" : "near-null",
                summary: "null pointer dereference: \(what) at \(HexAddress(address))\(through)",
                evidence: evidence + (base?.value == 0 ? ["\(base!.name) was 0"] : []))
        }
        if let mapping = facts.mapping(containing: address) {
            let name = describe(mapping: mapping, address: address, facts: facts)
            if (access?.kind == .write || access?.kind == .readWrite) && !mapping.writable {
                return DiagnosisRecord(
                    rule: "write-to-read-only",
                    summary: "write to read-only memory: \(what) at \(HexAddress(address)), in \(name)",
                    evidence: ["the mapping \(mapping.rangeText) \(mapping.permissions) holds it"])
            }
            if !mapping.readable {
                return DiagnosisRecord(
                    rule: "guard-page",
                    summary: "\(what) at \(HexAddress(address)) in a guard page (\(mapping.permissions))\(through)",
                    evidence: ["the mapping \(mapping.rangeText) \(mapping.permissions) holds it"])
            }
            return nil
        }
        return DiagnosisRecord(
            rule: "wild-address",
            summary: "\(what) at \(HexAddress(address))\(through), which no mapping holds: a wild or dangling pointer",
            evidence: ["no mapping of the process holds \(HexAddress(address))"])
    }

    /// A call or jump to a bad target: NULL, a non-canonical address, data, or nothing.
    static func diagnoseJump(to target: UInt64, facts: Facts, access: AccessRecord?) -> DiagnosisRecord? {
        let via = access?.expression.map { " through \($0)" } ?? ""
        let verb = access?.kind == .jump ? "jump" : "call"
        if target < facts.nullReach {
            return DiagnosisRecord(
                rule: "jump-to-null",
                summary: "\(verb) through a null function pointer: to \(HexAddress(target))\(via)",
                evidence: ["\(HexAddress(target)) is below \(HexAddress(facts.nullReach)), where nothing is mapped"])
        }
        if !isCanonical(target) {
            return DiagnosisRecord(
                rule: "non-canonical", summary: "\(verb) to non-canonical address \(HexAddress(target))\(via): not code",
                evidence: ["x86-64 addresses have their top 17 bits equal; \(HexAddress(target)) does not"])
        }
        if let mapping = facts.mapping(containing: target) {
            guard !mapping.executable else { return nil }
            return DiagnosisRecord(
                rule: "execute-non-executable",
                summary:
                    "\(verb) into non-executable memory: \(HexAddress(target)) is in \(describe(mapping: mapping, address: target, facts: facts))\(via)",
                evidence: ["the mapping \(mapping.rangeText) \(mapping.permissions) holds it"])
        }
        return DiagnosisRecord(
            rule: "wild-address",
            summary: "\(verb) to \(HexAddress(target))\(via), which no mapping holds: a wild function pointer",
            evidence: ["no mapping of the process holds \(HexAddress(target))"])
    }

    /// "read of 8 bytes", "write of 4 bytes", "an instruction fetch".
    static func describe(_ access: AccessRecord?) -> String {
        let size = access?.size.map { " of \($0) byte\($0 == 1 ? "" : "s")" } ?? ""
        switch access?.kind {
        case .read?: return "read" + size
        case .write?: return "write" + size
        case .readWrite?: return "read and write" + size
        case .execute?: return "instruction fetch"
        case .call?: return "call"
        case .jump?: return "jump"
        default: return "access"
        }
    }

    /// A mapping as a person knows it: `.rodata of inventory` (a string literal "…" when the
    /// bytes there are one), `the code of libc.so.6`, `[heap]`, an anonymous mapping.
    static func describe(mapping: MemoryMapping, address: UInt64, facts: Facts) -> String {
        if let module = facts.modules.first(where: { $0.contains(address) }), let object = module.object {
            let fileAddress = address &- module.loadBias
            if let section = object.sections.first(where: {
                $0.address != 0 && fileAddress >= $0.address && fileAddress - $0.address < $0.size
            }) {
                if section.name.hasPrefix(".rodata"), let literal = stringLiteral(at: address, facts: facts) {
                    return "the string literal \(literal) in \(section.name) of \(module.name)"
                }
                return "\(section.name) of \(module.name)"
            }
            return module.name
        }
        if mapping.path.isEmpty { return "an anonymous mapping (\(mapping.permissions))" }
        return "\(mapping.path) (\(mapping.permissions))"
    }

    /// The NUL-terminated text at `address` (at most 40 characters shown), quoted; nil when
    /// the bytes there are not text.
    static func stringLiteral(at address: UInt64, facts: Facts) -> String? {
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = bytes.withUnsafeMutableBytes { facts.memory.readUpTo(from: address, into: $0) }
        let text = bytes.prefix(count).prefix { $0 != 0 }
        guard !text.isEmpty, text.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else { return nil }
        let shown = String(decoding: text.prefix(40), as: UTF8.self)
        return "\"" + shown + (text.count > 40 ? "…" : "") + "\""
    }

    /// glibc (2.32 and later) stores a freed chunk's free-list link "safe-linked": the link
    /// slot's address shifted right by 12, XORed with the next free chunk (NULL at the end of
    /// a list). A bad pointer `p` that is `(slot >> 12) ^ next` for a slot in a page of the heap
    /// and a `next` that is NULL or a 16-byte aligned chunk of the same heap was read out of a
    /// chunk that had been freed: the evidence of a use after free. Heaps of up to 2^16 pages
    /// are searched (each page one XOR).
    static func freedChunkLink(_ pointer: UInt64, facts: Facts) -> String? {
        guard pointer != 0, isCanonical(pointer) else { return nil }
        let heaps = facts.mappings.filter { $0.writable && $0.readable && ($0.path == "[heap]" || $0.path.isEmpty) }
        for heap in heaps where heap.path == "[heap]" || heap.contains(pointer << 12) {
            var page = heap.start >> 12
            let last = min(heap.end >> 12, page &+ (1 << 16))
            while page < last {
                let next = pointer ^ page
                if next == 0 || next % 16 == 0 && heap.contains(next) {
                    return
                        "\(HexAddress(pointer)) = \(HexAddress(page << 12)) >> 12 XOR \(next == 0 ? "NULL" : HexAddress(next).description): glibc's safe-linked free-list link (slot address >> 12, XOR the next free chunk) in a chunk of \(heap.path.isEmpty ? "an anonymous heap mapping" : "[heap]") that was freed"
                }
                page += 1
            }
        }
        return nil
    }

    // MARK: Aborts

    /// An abort's or a runtime trap's verdict put into the event: it replaces only a bare
    /// `trap` (a Swift or Rust trap's reason says more than its ud2) or an earlier abort verdict
    /// (made before the runtime's message was read).
    public static func diagnoseAbort(_ event: inout Event) {
        let replaceable: Set<String> = ["trap", "abort", "heap-corruption", "double-free", "stack-protector", "runtime-trap"]
        guard event.kind == .crash || event.kind == nil,
            event.fault?.diagnosis.map({ replaceable.contains($0.rule ?? "") }) ?? true,
            let verdict = diagnoseAbort(event)
        else { return }
        if event.fault == nil { event.fault = FaultRecord() }
        event.fault?.diagnosis = verdict
    }

    /// The verdict of an abort or a runtime's trap, from the event's frames and reason: nil for
    /// any other signal. glibc's heap checks say their words in `__abort_msg` (the reason) and
    /// stand in the frames as `malloc_printerr`.
    public static func diagnoseAbort(_ event: Event) -> DiagnosisRecord? {
        let frames = event.crashedThreadRecord?.frames ?? []
        let functions = frames.compactMap(\.function)
        let reason = event.reason ?? ""
        let protector: Set<String> = ["__stack_chk_fail", "__stack_chk_fail_local", "__fortify_fail"]
        if let index = frames.lastIndex(where: { protector.contains($0.function ?? "") }) {
            let victim = frames[(index + 1)...].first { $0.function != nil }
            return DiagnosisRecord(
                rule: "stack-protector",
                summary:
                    "stack smashing: a buffer on the stack of \(victim?.function ?? "the caller") was overrun (its stack protector's canary changed)",
                evidence: ["\(frames[index].function ?? "__stack_chk_fail") is on the crashed thread's stack"])
        }
        let heapMessage = [
            "double free", "free(): ", "malloc(): ", "realloc(): ", "corrupted ", "munmap_chunk(): ", "malloc_consolidate(): ",
            "_int_free", "_int_malloc",
        ]
        if functions.contains("malloc_printerr") || heapMessage.contains(where: { reason.contains($0) }) {
            let message = reason.isEmpty ? "glibc's malloc_printerr" : reason
            let evidence =
                (functions.contains("malloc_printerr") ? ["malloc_printerr is on the crashed thread's stack"] : [])
                + (reason.isEmpty ? [] : ["glibc said: \(reason)"])
            if reason.contains("double free") {
                return DiagnosisRecord(
                    rule: "double-free", summary: "double free: \(message)", evidence: evidence)
            }
            return DiagnosisRecord(rule: "heap-corruption", summary: "heap corruption: \(message)", evidence: evidence)
        }
        if event.exception?.type == "panic" {
            return DiagnosisRecord(
                rule: "runtime-trap", summary: "Rust panic: \(event.exception?.message ?? "panicked")",
                evidence: ["the panic machinery is on the crashed thread's stack"])
        }
        if reason.hasPrefix("Swift runtime failure: ") || reason.hasPrefix("Fatal error") {
            return DiagnosisRecord(rule: "runtime-trap", summary: reason, evidence: ["the Swift runtime's trap reason"])
        }
        if event.exception?.type != nil, event.exception?.handled != true {
            return nil
        }
        guard event.signal?.name == "SIGABRT" else { return nil }
        let caller = frames.first { $0.inApp == true }?.function
        return DiagnosisRecord(
            rule: "abort",
            summary: "abort() called\(caller.map { " from \($0)" } ?? "")\(reason.isEmpty ? "" : ": \(reason)")",
            evidence: ["SIGABRT with abort on the crashed thread's stack"].filter { _ in functions.contains("abort") })
    }
}

extension MemoryMapping {
    /// `r--p`, as /proc/PID/maps writes it.
    var permissions: String {
        (readable ? "r" : "-") + (writable ? "w" : "-") + (executable ? "x" : "-") + "p"
    }
    var rangeText: String { "\(HexAddress(start))-\(HexAddress(end))" }
}
