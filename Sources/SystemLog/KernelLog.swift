// KernelLog: the kernel's ring buffer read through /dev/kmsg, from its oldest record to its
// newest, bounded in bytes, records and time, keeping only the records since a moment.
//
// /dev/kmsg is opened O_RDONLY|O_NONBLOCK (never a wait for new records) by the watcher as
// itself (WatcherIdentity: under kernel.dmesg_restrict only CAP_SYSLOG may open it, and a report
// thread holds its client's credentials, which have none); the open descriptor is then read as
// the client, and nothing else is. Each read(2) returns one record; EPIPE says records were
// overwritten under the reader (it goes on from the oldest left), EAGAIN that the newest was
// read. A record that does not parse is skipped and counted.

import BoundedBytes
import ObjectFile

#if canImport(Glibc)
import Glibc
#endif

public enum KernelLog {
    public struct Limits: Sendable {
        /// Bytes read from the ring in all (the ring is 256 KiB to a few MiB; CONFIG_LOG_BUF_SHIFT).
        public var bytes = 16 << 20
        /// Records kept (those since the window's start).
        public var records = 100_000
        /// Time spent reading, at most (a second: the ring is read after the process is gone,
        /// on a report's thread, and a loaded machine must still reach its newest records).
        public var nanoseconds: UInt64 = 1_000_000_000

        public init() {}
    }

    /// What a read gave: the records since the window's start, in order, and what stopped it short.
    public struct Reading: Sendable {
        public var records: [KernelLogRecord] = []
        /// Records that did not parse, and records overwritten while the ring was read.
        public var malformed = 0
        public var overwritten = false
        /// Why the read stopped before the newest record (a limit), if it did.
        public var cut: String?
    }

    /// The device, for the tests.
    public static let device = "/dev/kmsg"

    /// Reads the ring, keeping the records printed at or after `since` (microseconds of the
    /// kernel's clock). Throws why the log cannot be read (the open's errno: EPERM without
    /// CAP_SYSLOG under dmesg_restrict, ENOENT where there is no /dev/kmsg).
    public static func read(
        since: UInt64, limits: Limits = Limits(), path: String = device
    ) throws(SystemCallError)
        -> Reading
    {
        let fd = WatcherIdentity.run { () -> Int32? in open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY) } ?? -1
        guard fd >= 0 else { throw SystemCallError("open \(path)", errno: errno) }
        defer { close(fd) }
        return read(fd, since: since, limits: limits)
    }

    /// Reads records from `fd` (a /dev/kmsg descriptor, or anything that gives one record a read).
    public static func read(_ fd: Int32, since: UInt64, limits: Limits = Limits()) -> Reading {
        var reading = Reading()
        // The oldest record still in the ring (SEEK_DATA would start after the last `dmesg -C`).
        _ = lseek(fd, 0, SEEK_SET)
        let deadline = monotonicNanoseconds() &+ limits.nanoseconds
        var total = 0
        // A record is at most 8 KiB with its key/value lines (CONSOLE_EXT_LOG_MAX).
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            if total >= limits.bytes {
                reading.cut = "stopped after \(limits.bytes >> 20) MiB of the kernel's log"
                break
            }
            if monotonicNanoseconds() > deadline {
                reading.cut = "stopped after \(limits.nanoseconds / 1_000_000) ms reading the kernel's log"
                break
            }
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EPIPE {
                    reading.overwritten = true
                    continue
                }
                if errno != EAGAIN { reading.cut = "read: \(String(cString: strerror(errno)))" }
                break
            }
            if count == 0 { break }
            total += count
            // A record before the window is skipped on its header's time alone, unparsed: most of
            // the ring is, and parsing each would spend the time limit on them.
            if let time = headerMicroseconds(buffer, count), time < since { continue }
            guard let record = KernelLogRecord(buffer[..<count]) else {
                reading.malformed += 1
                continue
            }
            guard record.microseconds >= since else { continue }
            if reading.records.count >= limits.records {
                reading.cut = "kept the first \(limits.records) records of the window"
                break
            }
            reading.records.append(record)
        }
        return reading
    }

    /// The kernel's clock now, in microseconds, as its records are stamped (CLOCK_MONOTONIC).
    /// The third field of a record's header ("prio,seq,usec,flags;"), nil when it is not digits.
    public static func headerMicroseconds(_ buffer: [UInt8], _ count: Int) -> UInt64? {
        buffer.withUnsafeBufferPointer { bytes in
            var commas = 0
            var value: UInt64 = 0
            var digits = 0
            for index in 0..<min(count, bytes.count) {
                let byte = bytes[index]
                if byte == UInt8(ascii: ",") {
                    commas += 1
                    if commas == 3 { return digits > 0 ? value : nil }
                } else if byte == UInt8(ascii: ";") {
                    return nil
                } else if commas == 2 {
                    guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 20,
                        let next = value.checkedMultiplying(10)?.checkedAdding(UInt64(byte - UInt8(ascii: "0")))
                    else { return nil }
                    value = next
                    digits += 1
                }
            }
            return nil
        }
    }

    public static func now() -> UInt64 { monotonicNanoseconds() / 1000 }

    /// The value of a sysctl of the kernel's (`debug/exception-trace`), nil when unreadable.
    public static func sysctl(_ name: String) -> Int? {
        let fd = open("/proc/sys/" + name, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return Int(String(decoding: bytes[..<count], as: UTF8.self).trimmed)
    }
}
