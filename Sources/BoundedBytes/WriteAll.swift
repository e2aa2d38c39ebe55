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
    var offset = 0
    while offset < bytes.count {
        let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return false }
        offset += written
    }
    return true
}

/// Writes all of `bytes` to `fd` at `offset` (pwrite(2), again after a short or interrupted
/// write); false, with errno set, when a write fails or writes nothing.
@discardableResult
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> Bool {
    var done = 0
    while done < bytes.count {
        let written = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return false }
        done += written
    }
    return true
}

/// Fills `buffer` from `fd` at `offset` (pread(2), again after a short or interrupted read);
/// false when a read fails or the file ends first (errno is set for a failure).
public func readAll(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Bool {
    var done = 0
    while done < buffer.count {
        let read = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
        if read < 0 && errno == EINTR { continue }
        guard read > 0 else { return false }
        done += read
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
