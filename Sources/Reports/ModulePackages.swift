// ModulePackages: each module's package for its record in the report (ModuleRecord.package),
// and the release a crashed program's package gives when nothing else names one.
//
// A module's package is its file's package metadata note (ELFFile.packageNote, read with the
// file, so cached with it), else, for a module with no file (not found, not readable by the
// process's user, not the code that ran), the note capture read from its mapped image. A note that was refused is said in the report's notes. A module
// with no usable note is looked up in dpkg's database (DpkgDatabase) when the caller gives one
// (the watcher, for a crash on this machine): only when the file at the module's path here is
// the file the module maps (same inode and size), so a container's file or one replaced since
// is never named after the host's package.

import ObjectFile
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

enum ModulePackages {
    /// Each module's package (nil where none is known), in the modules' order, and the notes
    /// for the report: refused notes, an incomplete dpkg lookup.
    static func read(_ modules: [LoadedModule], dpkg: DpkgDatabase?) -> (packages: [PackageMetadata?], notes: [String]) {
        var packages = [PackageMetadata?](repeating: nil, count: modules.count)
        var notes: [String] = []
        var unowned: [(index: Int, path: String)] = []
        for (index, module) in modules.enumerated() {
            // The file's note; else the mapped image's, for a module whose file is not used.
            switch module.object?.packageNote ?? (module.object == nil ? module.imagePackageNote : nil) {
            case .success(let metadata)?:
                packages[index] = metadata
                continue
            case .failure(let refusal)?:
                notes.append("module \(module.path): its package metadata note (.note.package) is ignored: \(refusal)")
            case nil:
                break
            }
            if dpkg != nil, DpkgDatabase.mayOwn(module.path), let object = module.object,
                isFileHere(object.file, at: module.path)
            {
                unowned.append((index, module.path))
            }
        }
        if let dpkg, !unowned.isEmpty {
            let lookup = dpkg.packages(owning: unowned.map(\.path))
            for (index, path) in unowned { packages[index] = lookup.packages[path] }
            if let note = lookup.note { notes.append(note) }
        }
        return (packages, notes)
    }

    /// Whether the file at `path` in this process's file system is `file`: the same inode and
    /// size (a module of a process in another mount namespace is not, nor one replaced since).
    static func isFileHere(_ file: MappedFile, at path: String) -> Bool {
        guard path.hasPrefix("/"), !path.hasSuffix(" (deleted)"), let inode = file.inode else { return false }
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return false }
        return UInt64(info.st_ino) == inode && Int(info.st_size) == file.bytes.count
    }

    /// The record of a package in the event.
    static func record(_ package: PackageMetadata) -> PackageRecord {
        PackageRecord(
            type: package.type, name: package.name, version: package.version, architecture: package.architecture,
            os: package.os, osVersion: package.osVersion, debuginfodURL: package.debugInfoURL,
            source: package.source.rawValue)
    }

    /// The release the crashed program's package gives (`name@version`, PackageMetadata.release):
    /// the package of the module that is the executable.
    static func release(_ records: [ModuleRecord], executable: String?) -> String? {
        // Without an executable's path, capture's order: the main executable first.
        let main = if let executable { records.first { $0.path == executable } } else { records.first }
        guard let package = main?.package, let name = package.name else { return nil }
        return package.version.map { "\(name)@\($0)" } ?? name
    }
}
