// Finding an image by build-id alone, for offline symbolication: the report names a module
// and its build-id; the binary or its debug file may be anywhere the user points us.

import BoundedBytes
import ObjectFile

extension DebugFileLocator {
    /// An ELF file with this build-id: `<dir>/.build-id/xx/rest.debug` in each debug
    /// directory, then any ELF file in a user's directory (flat layout) with that build-id.
    /// Where `file(forBuildID:)` looks, in order, for saying so when it finds nothing.
    public func placesSearched(forBuildID buildID: BuildID) -> [String] {
        let hex = buildID.hex
        guard hex.count > 2 else { return [] }
        let relative = ".build-id/\(hex.prefix(2))/\(hex.dropFirst(2)).debug"
        return debugDirectories.map { $0 + "/" + relative }
            + debugDirectories.filter { $0 != DebugFileLocator.systemDebugDirectory }.map {
                $0 + "/* (any ELF file with that build-id)"
            } + (useDebuginfod ? ["debuginfod (\(Debuginfod.outcome(for: buildID) ?? "not asked: found here first"))"] : [])
    }

    public func file(forBuildID buildID: BuildID) -> ELFFile? {
        guard buildID.bytes.count > 1 else { return nil }
        let hex = buildID.hex
        let relative = ".build-id/\(hex.prefix(2))/\(hex.dropFirst(2))"
        for directory in debugDirectories {
            for suffix in [".debug", ""] {
                if let candidate = try? ELFFile(path: directory + "/" + relative + suffix), candidate.buildID == buildID {
                    return candidate
                }
            }
        }
        for directory in debugDirectories where directory != DebugFileLocator.systemDebugDirectory {
            for path in DebugDirectoryIndex.shared.paths(forBuildID: hex, in: directory) {
                if let candidate = try? ELFFile(path: path), candidate.buildID == buildID { return candidate }
            }
        }
        if useDebuginfod, case .success(let fetched) = Debuginfod.fetch(buildID) { return fetched }
        return nil
    }
}
