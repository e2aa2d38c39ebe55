// MinidumpBytes: the minidump's framing written by hand, for tests that build a dump the writer
// would never make (a stream directory that lies, strings shared by a thousand entries) or append
// to one it made. Field by field as in MinidumpFormat (the spec's names); all little-endian.

import ReportModel

public enum MinidumpBytes {
    /// MINIDUMP_HEADER (32 bytes): "MDMP", the version, the stream count and the directory's
    /// RVA; checksum, time stamp and flags 0.
    public static func header(
        streams: UInt32, directory: UInt32, version: UInt32 = MinidumpFormat.MINIDUMP_HEADER.version
    ) -> [UInt8] {
        var bytes: [UInt8] = []
        // signature, version, stream_count, stream_directory_rva, checksum, time_date_stamp
        for field in [MinidumpFormat.MINIDUMP_HEADER.signature, version, streams, directory, 0, 0] { bytes.append(u32: field) }
        bytes.append(u64: 0)  // flags
        return bytes
    }

    /// MINIDUMP_DIRECTORY (12 bytes): the stream's type and its location (size, then RVA).
    public static func directoryEntry(type: UInt32, size: UInt32, rva: UInt32) -> [UInt8] {
        var bytes: [UInt8] = []
        for field in [type, size, rva] { bytes.append(u32: field) }
        return bytes
    }

    /// MINIDUMP_UTF8_STRING: the length in bytes, the bytes, a NUL the length does not count.
    public static func utf8String(_ text: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.append(u32: UInt32(text.count))
        bytes.append(contentsOf: text)
        bytes.append(0)
        return bytes
    }
}
