// The few text helpers the watcher took from Foundation. crashport links FoundationEssentials
// only: full Foundation brings ICU's tables (34 MB) and its own start-up, which a cold
// `crashport symbolicate` read from disk and a sidecar kept in memory (docs/architecture.md).

extension StringProtocol {
    /// The text without leading or trailing whitespace and newlines (`\r` included, which an
    /// HTTP header line or a /proc file may end with).
    public var trimmed: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }),
            let last = lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(self[first...last])
    }

    /// The last component of a path, as NSString's `lastPathComponent`: the text after the
    /// last slash, trailing slashes ignored; "/" for the root and "" for "".
    public var pathBaseName: String {
        guard let last = lastIndex(where: { $0 != "/" }) else { return isEmpty ? "" : "/" }
        let head = self[...last]
        guard let slash = head.lastIndex(of: "/") else { return String(head) }
        return String(head[head.index(after: slash)...])
    }
}

extension Optional where Wrapped == String {
    /// The string, nil when it is missing or empty (an environment variable set to "" counts as
    /// unset).
    public var nonEmpty: String? { self.flatMap { $0.isEmpty ? nil : $0 } }
}

extension StringProtocol {
    /// The first range of `other` in the text, matched byte for byte in UTF-8 (no canonical
    /// equivalence: the texts searched are symbol names, paths and runtime messages, the
    /// needles ASCII). The standard library's `firstRange(of:)` and `contains(_:)` for strings
    /// come from _StringProcessing, whose code (387 KB in one section, not orderable) a
    /// sidecar then maps in the middle of a crash storm.
    public func firstUTF8Range(of other: some StringProtocol) -> Range<Index>? {
        let needle = Array(other.utf8)
        let text = utf8
        guard let head = needle.first else { return startIndex..<startIndex }
        var start = text.startIndex
        while let found = text[start...].firstIndex(of: head) {
            var cursor = found
            var matched = 0
            while matched < needle.count, cursor != text.endIndex, text[cursor] == needle[matched] {
                cursor = text.index(after: cursor)
                matched += 1
            }
            if matched == needle.count { return found..<cursor }
            start = text.index(after: found)
        }
        return nil
    }

    /// Whether `other` occurs in the text (as `firstUTF8Range(of:)` finds it).
    public func containsUTF8(_ other: some StringProtocol) -> Bool { firstUTF8Range(of: other) != nil }
}
