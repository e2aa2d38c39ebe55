// MemoryAttachments: the program's attachments from memory (crashport_attach_bytes,
// crashport_attach_ring; cp_memory_attachment), found in its app area and read out of the
// process while it is held. Everything in the slots is the process's word: names and content
// types are checked before they name a file or go into a header, sizes are clamped to the
// stub's cap and the report's budget, and a slot being written when the process stopped is
// taken all the same, marked partial.

import CCrashPortProtocol

#if canImport(Glibc)
import Glibc
#endif

/// One attachment from memory, as read: its bytes and what became of them.
public struct MemoryAttachment: Sendable, Equatable {
    public var name: String
    public var contentType: String
    /// The bytes held, oldest first for a ring.
    public var contents: [UInt8]
    /// A ring the program appended to.
    public var ring: Bool
    /// Bytes the program gave that are not in `contents`: a ring's older bytes, or what the
    /// stub's cap or the report's budget cut.
    public var dropped: UInt64
    /// The stub cut what the program set to its cap (7 MiB), or the report's budget cut it.
    public var truncated: Bool
    /// A thread was writing it when the process stopped: its last write may be partial.
    public var partial: Bool
    /// Why it holds less than it should (unreadable memory, the budget), nil when whole.
    public var note: String?

    public init(
        name: String, contentType: String, contents: [UInt8], ring: Bool = false, dropped: UInt64 = 0,
        truncated: Bool = false, partial: Bool = false, note: String? = nil
    ) {
        self.name = name
        self.contentType = contentType
        self.contents = contents
        self.ring = ring
        self.dropped = dropped
        self.truncated = truncated
        self.partial = partial
        self.note = note
    }

    /// Bytes one attachment from memory holds at most (the stub's CP_MEMORY_ATTACHMENT_CAP).
    public static let cap = UInt64(CP_MEMORY_ATTACHMENT_CAP)
    /// Bytes of all a report's attachments, files and memory (memory's first).
    public static let budget: UInt64 = 20 << 20

    /// A content type as the program gave it, if it is one a header can carry (a type/subtype
    /// and parameters of visible ASCII); else application/octet-stream.
    public static func checkedContentType(_ text: String) -> String {
        let allowed = text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
        let parts = text.split(separator: ";", maxSplits: 1)
        guard allowed, let type = parts.first, type.split(separator: "/").count == 2, !type.contains(" ") else {
            return "application/octet-stream"
        }
        return text
    }
}

/// A used cp_memory_attachment slot, decoded from an app area: where its bytes are.
public struct MemoryAttachmentSlot: Sendable, Equatable {
    public var name: String
    public var contentType: String
    public var address: UInt64
    public var capacity: UInt64
    public var length: UInt64
    public var ring: Bool
    public var truncated: Bool
    public var partial: Bool

    /// The used slots of an area's table (`bytes`: the whole area), checked: a name is not
    /// empty, has no '/' and is not "." or ".." and appears once; a slot with no buffer is left
    /// out; the capacity is clamped to the stub's cap.
    static func slots(area bytes: [UInt8], table: Int, used: Int) -> [MemoryAttachmentSlot] {
        let stride = MemoryLayout<cp_memory_attachment>.size
        func field<T>(_ path: KeyPath<cp_memory_attachment, T>) -> Int { MemoryLayout<cp_memory_attachment>.offset(of: path)! }
        let wire = WireBytes(bytes: bytes)
        func text(_ start: Int, _ capacity: Int) -> String {
            String(decoding: bytes[start..<start + capacity].prefix { $0 != 0 }, as: UTF8.self)
        }
        var names = Set<String>()
        var slots: [MemoryAttachmentSlot] = []
        for index in 0..<min(used, Int(CP_MEMORY_ATTACHMENT_MAX)) {
            let start = table + index * stride
            guard start + stride <= bytes.count else { break }
            let flags = wire.u32(start + field(\.flags))
            guard flags & CP_SLOT_USED != 0 else { continue }
            let name = text(start + field(\.name), Int(CP_MEMORY_NAME_BYTES))
            let address = wire.u64(start + field(\.address))
            guard !name.isEmpty, !name.contains("/"), name != ".", name != "..", address != 0,
                names.insert(name).inserted
            else { continue }
            slots.append(
                MemoryAttachmentSlot(
                    name: name,
                    contentType: MemoryAttachment.checkedContentType(
                        text(start + field(\.content_type), Int(CP_CONTENT_TYPE_BYTES))),
                    address: address, capacity: min(wire.u64(start + field(\.capacity)), MemoryAttachment.cap),
                    length: wire.u64(start + field(\.length)), ring: flags & CP_SLOT_RING != 0,
                    truncated: flags & CP_SLOT_TRUNCATED != 0, partial: wire.u32(start + field(\.sequence)) & 1 != 0))
        }
        return slots
    }

    /// Reads the slot's bytes with `read` (the held process's memory), at most `budget` of
    /// them: a plain buffer's first `length`, a ring's last, oldest first.
    func read(budget: UInt64, _ read: (UInt64, Int) -> [UInt8]) -> MemoryAttachment {
        var attachment = MemoryAttachment(
            name: name, contentType: contentType, contents: [], ring: ring, truncated: truncated, partial: partial)
        guard capacity > 0 else { return attachment }
        // The pieces to read, in order: [start, end) offsets into the buffer.
        var pieces: [(UInt64, UInt64)]
        var held: UInt64
        if !ring {
            held = min(length, capacity)
            pieces = [(0, held)]
        } else if length <= capacity {
            held = length
            pieces = [(0, length)]
        } else {
            held = capacity
            let oldest = length % capacity
            pieces = [(oldest, capacity), (0, oldest)]
            attachment.dropped = length - capacity
        }
        if held > budget {
            // The budget keeps a ring's newest bytes and a buffer's first.
            attachment.truncated = true
            attachment.dropped += held - budget
            attachment.note = "cut at the report's 20 MiB for all attachments"
            var skip = ring ? held - budget : 0
            var keep = budget
            pieces = pieces.compactMap { start, end in
                let length = end - start
                if skip >= length {
                    skip -= length
                    return nil
                }
                let from = start + skip
                skip = 0
                let to = min(end, from + keep)
                keep -= to - from
                return to > from ? (from, to) : nil
            }
        }
        for (start, end) in pieces where end > start {
            let (address, overflow) = self.address.addingReportingOverflow(start)
            guard !overflow else { break }
            let part = read(address, Int(end - start))
            attachment.contents += part
            if part.count < Int(end - start) {
                attachment.note = "only \(attachment.contents.count) of \(held) bytes could be read from the process"
                break
            }
        }
        return attachment
    }
}

extension AppArea {
    /// The memory attachments' table in an area's raw bytes: nil for an area from a stub before
    /// them (its declared size ends before the table).
    static func memoryAttachmentSlots(area bytes: [UInt8]) -> [MemoryAttachmentSlot]? {
        let table = MemoryLayout<cp_app_area>.offset(of: \cp_app_area.memory_attachments)!
        let usedOffset = MemoryLayout<cp_app_area>.offset(of: \cp_app_area.memory_attachments_used)!
        let wire = WireBytes(bytes: bytes)
        guard bytes.count >= size, Int(wire.u32(MemoryLayout<cp_app_area>.offset(of: \cp_app_area.size)!)) >= size else {
            return nil
        }
        return MemoryAttachmentSlot.slots(area: bytes, table: table, used: Int(wire.u32(usedOffset)))
    }

    /// Reads the program's attachments from memory (while the process is held): each slot's
    /// bytes with `read`, all of them within MemoryAttachment.budget.
    public static func readMemoryAttachments(area bytes: [UInt8], _ read: (UInt64, Int) -> [UInt8]) -> [MemoryAttachment] {
        var budget = MemoryAttachment.budget
        return (memoryAttachmentSlots(area: bytes) ?? []).map { slot in
            let attachment = slot.read(budget: budget, read)
            budget -= min(budget, UInt64(attachment.contents.count))
            return attachment
        }
    }
}
