// Writing a whole buffer to a file descriptor, and reading one whole at an offset (write(2) and
// read(2) may move less than asked, or be interrupted first), and making a directory with its
// parents.

#if canImport(Glibc)
import Glibc
#endif

/// Writes all of `bytes` to `fd`, again after a short or interrupted write; false, with errno
/// set, when a write fails or writes nothing.
@discardableResult
public func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { writeAll(fd, $0) }
}

/// The same for bytes in place.
@discardableResult
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
    moveAll(bytes.count) { done in write(fd, bytes.baseAddress! + done, bytes.count - done) }
}

/// Writes all of `bytes` to `fd` at `offset` (pwrite(2), again after a short or interrupted
/// write); false, with errno set, when a write fails or writes nothing.
@discardableResult
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> Bool {
    moveAll(bytes.count) { done in pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done)) }
}

/// Fills `buffer` from `fd` at `offset` (pread(2), again after a short or interrupted read);
/// false when a read fails or the file ends first (errno is set for a failure).
public func readAll(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Bool {
    moveAll(buffer.count) { done in pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done)) }
}

/// Calls `step` with the bytes moved so far until `count` are (again after EINTR); false when
/// a step fails or moves nothing.
private func moveAll(_ count: Int, _ step: (_ done: Int) -> Int) -> Bool {
    var done = 0
    while done < count {
        let moved = step(done)
        if moved < 0 && errno == EINTR { continue }
        guard moved > 0 else { return false }
        done += moved
    }
    return true
}

/// Text to stderr as it is (no limit, no prefix): the command line's messages.
public enum StandardError {
    public static func write(_ text: String) {
        writeAll(STDERR_FILENO, Array(text.utf8))
    }
}

/// mkdir -p: every missing directory of `path` (absolute or relative) created with `mode`.
/// Nil, or what failed ("mkdir PATH: reason").
public func makeDirectories(_ path: String, mode: mode_t) -> String? {
    // The whole path first: one call when it exists already (every report of a sidecar's) or
    // only its last directory is missing.
    if mkdir(path, mode) == 0 || errno == EEXIST { return nil }
    var prefix = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/") {
        prefix += "/" + component
        if mkdir(prefix, mode) != 0 && errno != EEXIST { return "mkdir \(prefix): \(String(cString: strerror(errno)))" }
    }
    return nil
}
