// DirectoryEntry: the name of an entry readdir returned, read in place. glibc hands back a
// pointer into its getdents buffer, where each record is d_reclen bytes, its name ending with a
// NUL; `struct dirent` declares a 256-byte name, so reading `entry.pointee` or its `d_name`
// tuple in Swift copies up to 256 bytes past a short record's end. For the buffer's last record
// that is past the buffer: a fault when the buffer ends a mapping, as a report thread's malloc
// arena can (a sidecar crashed so, reading dpkg's info directory). Every readdir in crashport
// names its entries through here.

#if canImport(Glibc)
import Glibc
#endif

/// The name of `entry` (readdir's), read within its record.
public func directoryEntryName(_ entry: UnsafePointer<dirent>) -> String {
    let raw = UnsafeRawPointer(entry)
    let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
    let recordLength = Int(raw.load(fromByteOffset: MemoryLayout<dirent>.offset(of: \dirent.d_reclen)!, as: UInt16.self))
    let limit = max(0, min(recordLength - nameOffset, 256))
    let name = UnsafeRawBufferPointer(start: raw + nameOffset, count: limit)
    return String(decoding: name.prefix { $0 != 0 }, as: UTF8.self)
}
