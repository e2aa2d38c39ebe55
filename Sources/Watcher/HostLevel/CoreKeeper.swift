// CoreKeeper: `crashport watch --host --keep-core`, the core stream kept beside its report as
// `core.gz` (gzip, zlib's fastest level: the stream is read while the dying process is held, so
// compression must keep up with it), for `gdb -c` and whoever wants the whole process. Written
// as the process's user into a staging file in that user's reports directory, and moved into the
// report's directory once the report is committed; counted by the reports quota from the next
// prune on. zlib's gz* calls are here and nowhere else in Watcher.

import CShims
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Made and fed by the dump thread that reads its core, finished by the report thread that
/// writes its report: its file and failure behind a Mutex.
final class CoreKeeper: Sendable {
    let staging: String
    private let state: Mutex<(file: gzFile?, failure: String?)>

    /// Why the core could not be kept, once a write failed.
    var failure: String? { state.withLock { $0.failure } }

    /// A staging file in `directory` (the user's reports directory), opened with the calling
    /// thread's credentials; nil with why when it cannot be made.
    init?(directory: String, id: String) {
        staging = directory + "/.core-\(id).gz.partial"
        let fd = open(staging, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        guard let file = gzdopen(fd, "wb1") else {
            close(fd)
            unlink(staging)
            return nil
        }
        state = Mutex((file, nil))
    }

    /// Appends what the stream gave; after a failure (a full disk) it stops keeping and says why.
    func append(_ bytes: UnsafeRawBufferPointer) {
        state.withLock { state in
            guard let file = state.file, state.failure == nil, bytes.count > 0 else { return }
            if gzwrite(file, bytes.baseAddress, UInt32(bytes.count)) != Int32(bytes.count) {
                state.failure = "the core could not be kept: \(String(cString: strerror(errno)))"
            }
        }
    }

    /// Closes the file and moves it to `report`/core.gz (the calling thread's credentials, as at
    /// init); the note for the report.
    func finish(into report: String?) -> String {
        let failure = state.withLock { state -> String? in
            if let file = state.file { gzclose(file) }
            state.file = nil
            return state.failure
        }
        guard failure == nil, let report, rename(staging, report + "/core.gz") == 0 else {
            unlink(staging)
            return failure ?? "the core could not be kept: the report was not written"
        }
        return "the core is kept in core.gz (gdb: zcat core.gz > core; gdb -c core EXECUTABLE)"
    }
}
