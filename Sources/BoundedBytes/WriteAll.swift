// Writing a whole buffer to a file descriptor (write(2) may write less than asked, or be
// interrupted before it writes anything), and making a directory with its parents.

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
