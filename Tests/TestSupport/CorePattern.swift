// CorePattern: a test's own kernel core handler for as long as it runs. The machine's
// /proc/sys/kernel/core_pattern (and core_pipe_limit) are saved, set, and put back when the body
// ends, however it ends. Tests that set the pattern take one lock file first, so two of them
// (in this process or another test run on the machine) never replace each other's.

import Foundation

#if canImport(Glibc)
import Glibc
#endif

public enum CorePattern {
    public static let patternFile = "/proc/sys/kernel/core_pattern"
    public static let pipeLimitFile = "/proc/sys/kernel/core_pipe_limit"
    /// Held (flock) while a test's pattern is installed.
    public static let lockFile = "/tmp/crashport-core-pattern.lock"

    /// Why a test cannot install its own pattern here, nil when it can (root, and the file is
    /// writable: not in a container that mounts /proc/sys read-only).
    public static var unavailable: String? {
        if geteuid() != 0 { return "not root: \(patternFile) is root's to write" }
        if access(patternFile, W_OK) != 0 { return "\(patternFile) is not writable here (\(String(cString: strerror(errno))))" }
        return nil
    }

    /// Runs `body` with `pattern` (and `pipeLimit`, when given) installed, then restores both.
    public static func with<T>(_ pattern: String, pipeLimit: Int? = nil, _ body: () throws -> T) throws -> T {
        let reservation = try Reservation()
        defer { reservation.release() }
        if let pipeLimit { try "\(pipeLimit)\n".write(toFile: pipeLimitFile, atomically: false, encoding: .utf8) }
        try (pattern + "\n").write(toFile: patternFile, atomically: false, encoding: .utf8)
        return try body()
    }

    /// The pattern and pipe limit held for one test (the lock taken, both saved) until `release`
    /// puts them back: for a test whose program under test sets the pattern itself.
    public final class Reservation {
        let lock: Int32
        /// What was there when the reservation was made (without the newline).
        public let pattern: String
        let savedPattern: String
        let savedLimit: String
        private var released = false

        public init() throws {
            lock = open(CorePattern.lockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard lock >= 0 else { throw TestFailure("cannot open \(CorePattern.lockFile)") }
            guard flock(lock, LOCK_EX) == 0 else {
                close(lock)
                throw TestFailure("cannot lock \(CorePattern.lockFile)")
            }
            do {
                savedPattern = try String(contentsOfFile: CorePattern.patternFile, encoding: .utf8)
                savedLimit = try String(contentsOfFile: CorePattern.pipeLimitFile, encoding: .utf8)
            } catch {
                close(lock)
                throw error
            }
            pattern = savedPattern.trimmingCharacters(in: .newlines)
        }

        public func release() {
            guard !released else { return }
            released = true
            try? savedPattern.write(toFile: CorePattern.patternFile, atomically: false, encoding: .utf8)
            try? savedLimit.write(toFile: CorePattern.pipeLimitFile, atomically: false, encoding: .utf8)
            close(lock)
        }

        deinit { release() }
    }
}
