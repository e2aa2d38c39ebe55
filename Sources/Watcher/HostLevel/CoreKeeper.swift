// CoreKeeper: `crashport watch --host --keep-core`, the core stream kept beside its report as
// `core.zst` (zstd at level 1: the stream is read while the dying process is held, so compression
// must keep up with it, and zstd is the format systemd-coredump writes and coredumpctl
// decompresses; it reads zstd, xz and lz4, not gzip), for `coredumpctl gdb`, `gdb -c` and whoever
// wants the whole process. Written as the process's user into a staging file in that user's
// reports directory, and moved into the report's directory once the report is committed;
// counted by the reports quota from the next prune on. libzstd's calls are here and nowhere else
// in Watcher.

import BoundedBytes
import CShims
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Made and fed by the dump thread that reads its core, finished by the report thread that
/// writes its report: its file, compressor and failure behind a Mutex.
final class CoreKeeper: Sendable {
    let staging: String
    /// The kept core's name in its report's directory.
    static let fileName = "core.zst"
    private struct State: @unchecked Sendable {
        var fd: Int32
        var stream: OpaquePointer?
        var failure: String?
        var output: [UInt8]
    }
    private let state: Mutex<State>

    /// Why the core could not be kept, once a write failed.
    var failure: String? { state.withLock { $0.failure } }

    /// A staging file in `directory` (the user's reports directory), opened with the calling
    /// thread's credentials; nil with why when it cannot be made.
    init?(directory: String, id: String) {
        staging = directory + "/.core-\(id).zst.partial"
        let fd = open(staging, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        guard let stream = ZSTD_createCCtx() else {
            close(fd)
            unlink(staging)
            return nil
        }
        ZSTD_CCtx_setParameter(stream, ZSTD_c_compressionLevel, 1)
        ZSTD_CCtx_setParameter(stream, ZSTD_c_checksumFlag, 1)
        state = Mutex(State(fd: fd, stream: stream, failure: nil, output: [UInt8](repeating: 0, count: ZSTD_CStreamOutSize())))
    }

    /// Appends what the stream gave; after a failure (a full disk) it stops keeping and says why.
    func append(_ bytes: UnsafeRawBufferPointer) {
        state.withLock { state in
            guard state.stream != nil, state.failure == nil, bytes.count > 0 else { return }
            state.failure = Self.compress(&state, bytes, end: false)
        }
    }

    /// Feeds `bytes` (at `end`, the frame's end) to the compressor and writes what it gives;
    /// why it failed, or nil.
    private static func compress(_ state: inout State, _ bytes: UnsafeRawBufferPointer, end: Bool) -> String? {
        guard let stream = state.stream else { return nil }
        var input = ZSTD_inBuffer(src: bytes.baseAddress, size: bytes.count, pos: 0)
        let fd = state.fd
        return state.output.withUnsafeMutableBytes { buffer -> String? in
            while true {
                var output = ZSTD_outBuffer(dst: buffer.baseAddress, size: buffer.count, pos: 0)
                let left = ZSTD_compressStream2(stream, &output, &input, end ? ZSTD_e_end : ZSTD_e_continue)
                if ZSTD_isError(left) != 0 {
                    return "the core could not be kept: zstd: \(String(cString: ZSTD_getErrorName(left)))"
                }
                if output.pos > 0, !writeAll(fd, UnsafeRawBufferPointer(rebasing: buffer[0..<output.pos])) {
                    return "the core could not be kept: \(String(cString: strerror(errno)))"
                }
                if end ? left == 0 : input.pos == input.size { return nil }
            }
        }
    }

    /// Ends the frame, closes the file and moves it to `report`/core.zst (the calling thread's
    /// credentials, as at init); the note for the report.
    func finish(into report: String?) -> String {
        let failure = state.withLock { state -> String? in
            if state.failure == nil, state.stream != nil {
                state.failure = Self.compress(&state, UnsafeRawBufferPointer(start: nil, count: 0), end: true)
            }
            if let stream = state.stream { ZSTD_freeCCtx(stream) }
            state.stream = nil
            if state.fd >= 0 { close(state.fd) }
            state.fd = -1
            return state.failure
        }
        guard failure == nil, let report, rename(staging, report + "/" + Self.fileName) == 0 else {
            unlink(staging)
            return failure ?? "the core could not be kept: the report was not written"
        }
        return "the core is kept in \(Self.fileName) (coredumpctl gdb PID; or: zstd -d \(Self.fileName); gdb -c core EXECUTABLE)"
    }
}
