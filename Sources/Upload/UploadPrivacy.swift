// UploadPrivacy: what leaves the machine by default. Not the program's arguments beyond its
// name, not its environment (never captured into a minidump unless asked), not the user names in
// home-directory paths; `crashport upload --send-pii` sends them as captured. Then an optional
// `before_send` hook, as Sentry's SDKs have: an executable given the request's JSON on stdin that
// answers with it (edited or not) on stdout, or exits non-zero to drop the report.
//
// The minidump is edited in place, never re-laid out: its LinuxCmdLine stream is cut to argv[0]
// (its directory entry's size shortened, the rest zeroed); the same argument strings where the
// kernel put them, at the top of the main thread's stack memory, are zeroed from there to the end
// of that memory (the environment strings follow them there); and every `/home/NAME/`, in ASCII
// or UTF-16, has NAME overwritten with `*` of the same length, so no offset or size moves. JSON and
// form fields get `~/` for `/home/NAME/`.

import FoundationEssentials
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public enum UploadPrivacy {
    /// `/home/NAME/…` as `~/…`, wherever it occurs in `text`.
    public static func scrubbed(_ text: String) -> String {
        guard text.contains("/home/") else { return text }
        var result = ""
        var rest = Substring(text)
        while let range = rest.firstRange(of: "/home/") {
            result += rest[..<range.lowerBound]
            let after = rest[range.upperBound...]
            if let slash = after.firstIndex(of: "/"), after[..<slash].allSatisfy(isNameCharacter), slash != after.startIndex {
                result += "~/"
                rest = after[after.index(after: slash)...]
            } else {
                result += "/home/"
                rest = after
            }
        }
        return result + rest
    }

    static func isNameCharacter(_ character: Character) -> Bool {
        character.isLetter || character.isNumber || "._-".contains(character)
    }

    /// Every string in a JSON value (JSONObject's loose values) scrubbed, keys too.
    public static func scrubbed(json value: Any) -> Any {
        switch value {
        case let text as String: return scrubbed(text)
        case let array as [Any]: return array.map { scrubbed(json: $0) }
        case let object as [String: Any]:
            return Dictionary(
                object.map { (scrubbed($0.key), scrubbed(json: $0.value)) }, uniquingKeysWith: { first, _ in first })
        default: return value
        }
    }

    /// The minidump with its command line cut to the program and home directories' user names
    /// masked; the bytes unchanged when they are not a minidump.
    public static func scrubbed(minidump: [UInt8]) -> [UInt8] {
        var bytes = minidump
        func u32(_ offset: Int) -> Int? {
            guard offset >= 0, offset + 4 <= bytes.count else { return nil }
            return Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16 | Int(bytes[offset + 3]) << 24
        }
        guard bytes.count >= 32, bytes[0..<4] == [0x4D, 0x44, 0x4D, 0x50], let count = u32(8), let directory = u32(12),
            count <= 4096
        else { return bytes }
        func u64(_ offset: Int) -> Int? {
            guard let low = u32(offset), let high = u32(offset + 4), high < 1 << 20 else { return nil }
            return low | high << 32
        }
        let cmdLine = 0x4767_0006  // MD_LINUX_CMD_LINE
        var arguments: (whole: [UInt8], first: Int)?
        var memory: [Range<Int>] = []
        for index in 0..<count {
            let entry = directory + index * 12
            guard let type = u32(entry), let size = u32(entry + 4), let rva = u32(entry + 8), rva + size <= bytes.count
            else { continue }
            switch type {
            case cmdLine:
                // argv[0] and its NUL stay; the arguments after it are zeroed and left out of the size.
                guard let end = bytes[rva..<rva + size].firstIndex(of: 0) else { continue }
                arguments = (Array(bytes[rva..<rva + size]), end + 1 - rva)
                for offset in (end + 1)..<(rva + size) { bytes[offset] = 0 }
                let kept = end + 1 - rva
                for shift in 0..<4 { bytes[entry + 4 + shift] = UInt8(truncatingIfNeeded: kept >> (8 * shift)) }
            case 5:  // MemoryListStream: count, then (start u64, size u32, rva u32) each
                guard let ranges = u32(rva), ranges <= 1 << 16 else { continue }
                for range in 0..<ranges {
                    let at = rva + 4 + range * 16
                    if let size = u32(at + 8), let data = u32(at + 12), data + size <= bytes.count {
                        memory.append(data..<data + size)
                    }
                }
            case 9:  // Memory64ListStream: count u64, base rva u64, then (start u64, size u64) each, back to back
                guard let ranges = u64(rva), ranges <= 1 << 16, var data = u64(rva + 8) else { continue }
                for range in 0..<ranges {
                    guard let size = u64(rva + 16 + range * 16 + 8), data + size <= bytes.count else { break }
                    memory.append(data..<data + size)
                    data += size
                }
            default: continue
            }
        }
        // The same strings at the top of the main thread's stack (where the kernel put argv and,
        // after it, the environment): zeroed from the end of argv[0] to the end of that memory.
        if let arguments, arguments.whole.count > arguments.first {
            for region in memory {
                var start = region.lowerBound
                while let found = find(arguments.whole, in: bytes, from: start, before: region.upperBound) {
                    for offset in (found + arguments.first)..<region.upperBound { bytes[offset] = 0 }
                    start = region.upperBound
                }
            }
        }
        maskHomeNames(&bytes, stride: 1)
        maskHomeNames(&bytes, stride: 2)
        return bytes
    }

    /// Where `needle` first starts in bytes[from..<before], if it does.
    static func find(_ needle: [UInt8], in bytes: [UInt8], from: Int, before: Int) -> Int? {
        guard let first = needle.first, before - from >= needle.count else { return nil }
        var index = from
        while index + needle.count <= before {
            if bytes[index] == first && bytes[index..<index + needle.count].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    /// Overwrites NAME in every `/home/NAME/` with `*`: ASCII (stride 1) or UTF-16LE (stride 2).
    static func maskHomeNames(_ bytes: inout [UInt8], stride: Int) {
        let pattern = Array("/home/".utf8)
        let width = pattern.count * stride
        var index = 0
        while index + width < bytes.count {
            var matches = true
            for (offset, byte) in pattern.enumerated() {
                if bytes[index + offset * stride] != byte || (stride == 2 && bytes[index + offset * stride + 1] != 0) {
                    matches = false
                    break
                }
            }
            guard matches else {
                index += 1
                continue
            }
            var end = index + width
            while end + stride <= bytes.count, isNameByte(bytes[end]), stride == 1 || bytes[end + 1] == 0,
                end - index < width + 256
            {
                end += stride
            }
            if end > index + width, end < bytes.count, bytes[end] == UInt8(ascii: "/") {
                var position = index + width
                while position < end {
                    bytes[position] = UInt8(ascii: "*")
                    position += stride
                }
            }
            index = end
        }
    }

    static func isNameByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    /// The `before_send` hook: `program` given `json` on stdin. Its stdout, when it exits 0 and
    /// prints a JSON object; nil with why when it drops the report (non-zero exit), fails, or
    /// takes longer than `timeout` seconds (then it is killed).
    public static func beforeSend(_ program: String, json: Data, timeout: Double = 10) -> Result<Data, UploadError> {
        switch Hook.run(program, input: Array(json), seconds: timeout) {
        case .cannotRun(let why):
            return .failure(UploadError("before_send \(program) cannot be run: \(why)"))
        case .timedOut:
            return .failure(UploadError("before_send \(program) took longer than \(seconds(timeout)) s; not sent"))
        case .finished(let exit, let answer, _):
            switch exit {
            case .exited(0): break
            case .exited(let code): return .failure(UploadError("dropped by before_send \(program) (it exited \(code))"))
            case .signaled(let signal):
                return .failure(UploadError("dropped by before_send \(program) (it exited \(128 + signal))"))
            case nil: return .failure(UploadError("dropped by before_send \(program)"))
            }
            guard JSONObject.parseObject(answer) != nil else {
                return .failure(UploadError("before_send \(program) did not answer with a JSON object; not sent"))
            }
            return .success(Data(answer))
        }
    }

    /// A hook's time as said: `10`, `0.3`.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
