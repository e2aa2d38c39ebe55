// ReportStore+Users: a root sidecar's reports directory, as the commands that read reports see
// it. `crashport watch` as root keeps each user's reports in ROOT/<uid> (0700, owned by that
// uid), so `crashport list --reports ROOT` would otherwise find none. Like coredumpctl, the
// readers show every report the caller may read: ROOT's own and those of each ROOT/<uid> the
// kernel lets the caller open (root: all; a user: their own). Permissions decide, nothing else:
// another user's directory is named in a hint, never read.

import FoundationEssentials
import Glibc

extension ReportStore {
    /// The per-user directories in this one (a root sidecar's layout): those the caller may
    /// read, as stores, and the uids of those it may not. A directory counts when its name is a
    /// uid, it is a real directory (not a symlink) and that uid owns it, as the sidecar makes it.
    /// The sidecar's directory is 0711: a user may not list it, and finds their own directory
    /// by its name (their uid), learning nothing of the others.
    public func userStores() -> (readable: [ReportStore], unreadable: [UInt32]) {
        let listed = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        let own = String(getuid())
        var readable: [(UInt32, ReportStore)] = []
        var unreadable: [UInt32] = []
        for name in listed.contains(own) ? listed : listed + [own] {
            guard name.count <= 10, name.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                let uid = UInt32(name)
            else { continue }
            let path = root + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == uid else { continue }
            if access(path, R_OK | X_OK) == 0 {
                var store = ReportStore(root: path)
                store.maxReports = maxReports
                store.maxBytes = maxBytes
                readable.append((uid, store))
            } else {
                unreadable.append(uid)
            }
        }
        return (readable.sorted { $0.0 < $1.0 }.map(\.1), unreadable.sorted())
    }

    /// This store and every per-user one in it the caller may read (`userStores`).
    public func readableStores() -> [ReportStore] { [self] + userStores().readable }

    /// What to say when a reader found nothing here: where the per-user reports are that the
    /// caller may not read ("reports of uid 1001 are in ROOT/1001, which only that user (or
    /// root) may read"); nil when there are none.
    public func unreadableUsersHint() -> String? {
        let uids = userStores().unreadable
        guard !uids.isEmpty else { return nil }
        let which =
            uids.count == 1
            ? "uid \(uids[0]) are in \(root)/\(uids[0])"
            : "uids \(uids.map(String.init).joined(separator: ", ")) are in \(root)/<uid>"
        return "reports of \(which), which only \(uids.count == 1 ? "that user" : "each user") or root may read"
    }

    /// The store and id of the one report `reference` names among this store and the per-user
    /// stores in it the caller may read (an id, a unique prefix of one, `latest`/`last`): as
    /// `resolve`, over all of them; a miss or an ambiguity names this directory.
    public func resolveAmongUsers(_ reference: String, prefixes: Bool = true) throws -> (store: ReportStore, id: String) {
        let stores = readableStores()
        guard stores.count > 1 else { return (self, try resolve(reference, prefixes: prefixes)) }
        var owners: [String: ReportStore] = [:]
        for store in stores {
            for id in store.ids() where owners[id] == nil { owners[id] = store }
        }
        let id = try resolve(reference, prefixes: prefixes, among: owners.keys.sorted(by: >))
        return (owners[id] ?? self, id)
    }
}
