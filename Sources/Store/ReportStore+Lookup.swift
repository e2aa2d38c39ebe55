// ReportStore+Lookup: what a person may type to name a report (`crashport show`), and the one
// report it names.
//
// A reference is a report id, a prefix of exactly one id, `latest` or `last` (the newest), or
// the path of a report directory as the crash summary prints it (`/x/reports/<id>`, also with a
// trailing slash or `/event.json`, `/minidump.dmp` appended). A path names its own directory,
// whatever --reports says. A miss names the directory searched and the ids closest to what was
// typed, so a mistyped id can be corrected without listing the whole store.

import FoundationEssentials
import Glibc

extension ReportStore {
    /// The store and the name in it that `reference` designates: for a path, the report
    /// directory's parent and its last component; for anything else, this store and the
    /// reference as given.
    public func locating(_ reference: String) -> (store: ReportStore, name: String) {
        var path = Substring(reference)
        func dropTrailingSlashes() { while path.count > 1 && path.hasSuffix("/") { path = path.dropLast() } }
        dropTrailingSlashes()
        for file in ["/event.json", "/minidump.dmp"] where path.hasSuffix(file) {
            path = path.dropLast(file.count)
            dropTrailingSlashes()
        }
        guard let slash = path.lastIndex(of: "/") else { return (self, String(path)) }
        let parent = slash == path.startIndex ? "/" : String(path[..<slash])
        var store = ReportStore(root: parent)
        store.maxReports = maxReports
        store.maxBytes = maxBytes
        return (store, String(path[path.index(after: slash)...]))
    }

    /// The id of the one report `reference` names here: an id, a unique prefix of one, or
    /// `latest`/`last`. A path is not resolved here: see `locating`. Throws `notFound` (with the
    /// nearest ids) or `ambiguous` (with every match).
    public func resolve(_ reference: String, prefixes: Bool = true) throws -> String {
        try resolve(reference, prefixes: prefixes, among: ids())
    }

    /// `resolve` over `ids` (newest first), a miss or an ambiguity naming this directory.
    func resolve(_ reference: String, prefixes: Bool, among ids: [String]) throws -> String {
        func miss() -> StoreError {
            var info = stat()
            let exists = stat(root, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
            return .notFound(
                reference: reference, directory: root, nearest: Self.nearest(to: reference, among: ids), directoryExists: exists)
        }
        if reference == "latest" || reference == "last" {
            guard let newest = ids.first else { throw miss() }
            return newest
        }
        if ids.contains(reference) { return reference }
        let matches = prefixes && !reference.isEmpty ? ids.filter { $0.hasPrefix(reference) } : []
        if matches.count == 1 { return matches[0] }
        if matches.count > 1 { throw StoreError.ambiguous(prefix: reference, directory: root, matches: matches) }
        throw miss()
    }

    /// At most three of `ids` (newest first) closest to `reference`: the longest common prefix
    /// first, the newest among equals; with nothing in common, the most recent.
    static func nearest(to reference: String, among ids: [String]) -> [String] {
        func common(_ id: String) -> Int { zip(id.utf8, reference.utf8).prefix { $0 == $1 }.count }
        return ids.enumerated().sorted { a, b in
            let (ca, cb) = (common(a.element), common(b.element))
            return ca != cb ? ca > cb : a.offset < b.offset
        }.prefix(3).map(\.element)
    }
}
