// debuginfod, for offline symbolication only (`crashport symbolicate --debuginfod`): when no
// binary or debug file for a module's build-id is found here, its debug file is fetched from the
// servers in DEBUGINFOD_URLS by elfutils' own client (CShims' debuginfod.c loads libdebuginfod
// at the first fetch), into the client's standard cache ($XDG_CACHE_HOME/debuginfod_client).
// Never in the capture path: the watcher's locators leave it off. Each fetch is bounded, asked
// once per build-id per process, and its file is used only when its build-id matches.

import CShims
import ObjectFile
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

public enum Debuginfod {
    /// The most a fetch may take, in seconds (the client's own DEBUGINFOD_TIMEOUT applies too).
    public static let fetchSeconds = 30.0

    /// What each build-id came to, for the search log: the file used, or why none.
    static let outcomes = Mutex<[String: Result<String, DebuginfodFailure>]>([:])

    public struct DebuginfodFailure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The debug file for `buildID`, fetched (or found in the client's cache), checked to carry
    /// the same build-id; the reason when there is none.
    public static func fetch(_ buildID: BuildID) -> Result<ELFFile, DebuginfodFailure> {
        let hex = buildID.hex
        if let known = outcomes.withLock({ $0[hex] }) {
            switch known {
            case .success(let path):
                if let file = try? ELFFile(path: path) { return .success(file) }
            case .failure(let failure): return .failure(failure)
            }
        }
        let result = fetchUncached(buildID)
        outcomes.withLock { $0[hex] = result.map(\.path) }
        return result
    }

    static func fetchUncached(_ buildID: BuildID) -> Result<ELFFile, DebuginfodFailure> {
        let servers = getenv("DEBUGINFOD_URLS").map { String(cString: $0) } ?? ""
        guard servers.contains(where: { $0 != " " && $0 != "\t" }) else {
            return .failure(DebuginfodFailure(description: "DEBUGINFOD_URLS is not set: no server to ask"))
        }
        var path: UnsafeMutablePointer<CChar>?
        var why: UnsafePointer<CChar>?
        let fd = buildID.bytes.withUnsafeBufferPointer {
            cp_debuginfod_find($0.baseAddress, Int32($0.count), 0, fetchSeconds, &path, &why)
        }
        defer { free(path) }
        guard fd >= 0, let path else {
            let reason = why.map { String(cString: $0) } ?? String(cString: strerror(-fd))
            return .failure(DebuginfodFailure(description: "debuginfod (\(servers)): \(reason)"))
        }
        close(fd)
        let file = String(cString: path)
        guard let elf = try? ELFFile(path: file) else {
            return .failure(DebuginfodFailure(description: "debuginfod (\(servers)) sent \(file), which is not an ELF file"))
        }
        guard elf.buildID == buildID else {
            return .failure(
                DebuginfodFailure(
                    description:
                        "debuginfod (\(servers)) sent \(file) with build-id \(elf.buildID?.hex ?? "none"), not \(buildID.hex): not used"
                ))
        }
        return .success(elf)
    }

    /// What the fetch for `buildID` came to, when one was made: for `symbolicate --verbose`.
    public static func outcome(for buildID: BuildID) -> String? {
        switch outcomes.withLock({ $0[buildID.hex] }) {
        case .success(let path)?: return "fetched by debuginfod into \(path)"
        case .failure(let failure)?: return failure.description
        case nil: return nil
        }
    }
}
