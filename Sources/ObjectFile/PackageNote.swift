// PackageNote: a module's package metadata note (systemd.io/ELF_PACKAGE_METADATA): a note of
// owner "FDO" and type 0xcafe1a7e (NT_FDO_PACKAGING_METADATA), in a `.note.package` section
// and its PT_NOTE segment, whose descriptor is a NUL-terminated UTF-8 JSON object naming the
// package the file was built for: `type`, `os`, `osVersion`, `name`, `version`,
// `architecture`, `debugInfoUrl`. `ld --package-metadata=JSON` writes it.
//
// Whoever built the file chose these bytes, and the watcher may be root: this is a parser of
// hostile input. The spec allows one flat object whose values are strings, and that is all it
// accepts, in one pass with no recursion: a nested object or array, a number, true, false or
// null is refused, not parsed. A descriptor over 64 KiB is not read. A key given twice refuses
// the note (two readers could each believe a different value). Text that is not UTF-8, not an
// object, or anything after the object refuses it too. Unknown keys are skipped. Each value kept
// is cut to 256 bytes (at a Unicode scalar boundary) with its control characters removed. A refusal
// says why in one line, for the report's notes.

/// A module's package: from its package metadata note, or (see the report builder) from the
/// package manager's database.
public struct PackageMetadata: Sendable, Equatable {
    public enum Source: String, Sendable { case note, dpkg }

    public var type: String?
    public var name: String?
    public var version: String?
    public var architecture: String?
    public var os: String?
    public var osVersion: String?
    /// The note's `debugInfoUrl`: a debuginfod server for this package's debug files.
    public var debugInfoURL: String?
    public var source: Source

    public init(
        type: String? = nil, name: String? = nil, version: String? = nil, architecture: String? = nil, os: String? = nil,
        osVersion: String? = nil, debugInfoURL: String? = nil, source: Source
    ) {
        self.type = type
        self.name = name
        self.version = version
        self.architecture = architecture
        self.os = os
        self.osVersion = osVersion
        self.debugInfoURL = debugInfoURL
        self.source = source
    }

    /// `name@version` (Sentry's release convention, `package@version`), or the name alone when
    /// no version is known; nil without a name.
    public var release: String? {
        guard let name else { return nil }
        return version.map { "\(name)@\($0)" } ?? name
    }
}

public enum PackageNote {
    /// The note's owner and type (NT_FDO_PACKAGING_METADATA).
    public static let owner = "FDO"
    public static let type: UInt32 = 0xcafe_1a7e
    /// A descriptor larger than this is not read.
    public static let maximumBytes = 64 * 1024
    /// A value is cut to this many bytes.
    public static let maximumValueBytes = 256

    /// Why a note was not believed; `description` is a phrase for a report's note.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public var reason: String
        public init(_ reason: String) { self.reason = reason }
        public var description: String { reason }
    }

    /// The package a note's descriptor names, or why it was refused.
    public static func parse(_ descriptor: [UInt8]) -> Result<PackageMetadata, Refusal> {
        descriptor.withUnsafeBytes { parse($0) }
    }

    public static func parse(_ descriptor: UnsafeRawBufferPointer) -> Result<PackageMetadata, Refusal> {
        guard descriptor.count <= maximumBytes else {
            return .failure(Refusal("its JSON is \(descriptor.count) bytes, more than the \(maximumBytes) read"))
        }
        // NUL-terminated: what follows the NUL is the note's padding.
        let text = descriptor.firstIndex(of: 0).map { UnsafeRawBufferPointer(rebasing: descriptor[..<$0]) } ?? descriptor
        guard String(validating: text, as: UTF8.self) != nil else { return .failure(Refusal("its JSON is not UTF-8")) }
        var parser = FlatObjectParser(text)
        let fields: [(key: String, value: String)]
        do {
            fields = try parser.object()
        } catch {
            return .failure(error)
        }
        var metadata = PackageMetadata(source: .note)
        for (key, value) in fields {
            let kept = clean(value)
            switch key {
            case "type": metadata.type = kept
            case "name": metadata.name = kept
            case "version": metadata.version = kept
            case "architecture": metadata.architecture = kept
            case "os": metadata.os = kept
            case "osVersion": metadata.osVersion = kept
            case "debugInfoUrl": metadata.debugInfoURL = kept
            default: continue
            }
        }
        guard metadata.name != nil else { return .failure(Refusal("its JSON names no package (no \"name\")")) }
        return .success(metadata)
    }

    /// A value without control characters (C0, DEL, C1), cut to `limit` bytes at a Unicode scalar
    /// boundary; nil when nothing is left.
    public static func clean(_ value: String, limit: Int = maximumValueBytes) -> String? {
        var kept = String.UnicodeScalarView()
        var bytes = 0
        for scalar in value.unicodeScalars where !(scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)) {
            bytes += UTF8.width(scalar)
            if bytes > limit { break }
            kept.append(scalar)
        }
        let text = String(kept)
        return text.isEmpty ? nil : text
    }
}

/// One JSON object whose values are all strings, read in one pass over UTF-8 text: no
/// recursion, so no input reaches deeper than this frame.
private struct FlatObjectParser {
    let text: UnsafeRawBufferPointer
    var at = 0

    init(_ text: UnsafeRawBufferPointer) { self.text = text }

    typealias Refusal = PackageNote.Refusal

    mutating func object() throws(Refusal) -> [(key: String, value: String)] {
        skipSpace()
        guard next() == UInt8(ascii: "{") else { throw Refusal("its JSON is not an object") }
        var fields: [(key: String, value: String)] = []
        var seen = Set<String>()
        skipSpace()
        if peek() == UInt8(ascii: "}") {
            at += 1
        } else {
            while true {
                skipSpace()
                guard peek() == UInt8(ascii: "\"") else { throw Refusal("its JSON is malformed (a key is not a string)") }
                let key = try string()
                skipSpace()
                guard next() == UInt8(ascii: ":") else { throw Refusal("its JSON is malformed (no ':' after a key)") }
                skipSpace()
                guard peek() == UInt8(ascii: "\"") else {
                    throw Refusal(
                        "the value of \(quoted(key)) is not a string (the spec allows only string values; nested objects, arrays, numbers, true, false and null are not read)"
                    )
                }
                let value = try string()
                guard seen.insert(key).inserted else { throw Refusal("its JSON gives the key \(quoted(key)) twice") }
                fields.append((key, value))
                skipSpace()
                let separator = next()
                if separator == UInt8(ascii: "}") { break }
                guard separator == UInt8(ascii: ",") else { throw Refusal("its JSON is malformed (no ',' or '}' after a value)") }
            }
        }
        skipSpace()
        guard at == text.count else { throw Refusal("its JSON has text after the object") }
        return fields
    }

    /// A key for a refusal: quoted, without control characters, at most 64 bytes.
    func quoted(_ key: String) -> String { "\"" + (PackageNote.clean(key, limit: 64) ?? "") + "\"" }

    func peek() -> UInt8? { at < text.count ? text[at] : nil }

    mutating func next() -> UInt8? {
        defer { at += 1 }
        return peek()
    }

    mutating func skipSpace() {
        while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { at += 1 }
    }

    /// A JSON string at `at` (its opening quote), with its escapes decoded.
    mutating func string() throws(Refusal) -> String {
        at += 1
        var bytes: [UInt8] = []
        while true {
            guard let byte = next() else { throw Refusal("its JSON is malformed (a string does not end)") }
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: bytes, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let escaped = next() else { throw Refusal("its JSON is malformed (a string does not end)") }
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(escaped)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        // A high surrogate: its low half must follow as \uDC00-\uDFFF.
                        guard next() == UInt8(ascii: "\\"), next() == UInt8(ascii: "u") else {
                            throw Refusal("its JSON has a lone surrogate escape")
                        }
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw Refusal("its JSON has a lone surrogate escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let decoded = Unicode.Scalar(scalar) else { throw Refusal("its JSON has a lone surrogate escape") }
                    bytes += Array(String(decoded).utf8)
                default:
                    throw Refusal("its JSON is malformed (an unknown escape in a string)")
                }
            case 0..<0x20:
                throw Refusal("its JSON is malformed (a control character inside a string)")
            default:
                bytes.append(byte)
            }
        }
    }

    /// Four hex digits after `\u`.
    mutating func hex4() throws(Refusal) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = next() else { throw Refusal("its JSON is malformed (a short \\u escape)") }
            let nibble: UInt8
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = digit - UInt8(ascii: "A") + 10
            default: throw Refusal("its JSON is malformed (a bad \\u escape)")
            }
            value = value << 4 | UInt32(nibble)
        }
        return value
    }
}
