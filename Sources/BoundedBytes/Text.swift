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
