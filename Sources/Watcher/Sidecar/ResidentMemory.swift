// ResidentMemory: what an idle sidecar keeps mapped.
//
// Starting a Swift program touches far more than its idle loop ever will: the dynamic loader
// reads the relocation and symbol tables, the runtime and the argument parser walk type
// metadata, and each page fault maps its neighbours too (the kernel's fault-around). Those are
// pages of files (the executable's code and data, its libraries'), still in the page cache after
// start-up, counted in the sidecar's resident set for as long as they stay mapped. Once the
// sidecar is serving, it unmaps them (madvise MADV_DONTNEED): the page cache keeps them, and the
// few that the idle loop and the next capture touch come back as minor faults. Only pages that
// are still the file's own are unmapped, found page by page in /proc/self/pagemap: in a private
// mapping a page ever written is an anonymous copy (relocated data, variables), and those are
// never touched, since dropping one would lose what was written.

import LiveProcess
import Processes
import ReportModel
#if canImport(Glibc)
import Glibc
#endif

public enum ResidentMemory {
    /// Unmaps the pages of private file mappings that are the file's own; the kilobytes that
    /// were resident in them.
    @discardableResult
    public static func releaseCleanFilePages() -> Int {
        guard let maps = ProcFiles.read("/proc/self/maps") else { return 0 }
        let pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)
        guard pagemap >= 0 else { return 0 }
        defer { close(pagemap) }
        let pageSize = UInt64(sysconf(Int32(_SC_PAGESIZE)))
        var released = 0
        for line in maps.split(separator: UInt8(ascii: "\n")) {
            // start-end perms ...: the fourth permission letter says private (p) or shared (s).
            guard let mapping = MemoryMapping.parse(Array(line)).first, mapping.path.hasPrefix("/"),
                let space = line.firstIndex(of: UInt8(ascii: " ")), line.count > space + 4 - line.startIndex,
                line[space + 4] == UInt8(ascii: "p")
            else { continue }
            // In chunks of 4096 pages (32 KB of pagemap), whatever the mapping's size.
            var chunkStart = mapping.start
            while chunkStart < mapping.end {
                let pages = Int(min((mapping.end - chunkStart) / pageSize, 4096))
                guard pages > 0 else { break }
                released += release(from: chunkStart, pages: pages, pagemap: pagemap, pageSize: pageSize)
                chunkStart += UInt64(pages) * pageSize
            }
        }
        return released
    }

    /// Unmaps the file's own pages among `pages` pages from `start`; the kilobytes released.
    static func release(from start: UInt64, pages: Int, pagemap: Int32, pageSize: UInt64) -> Int {
        var entries = [UInt64](repeating: 0, count: pages)
        let wanted = pages * MemoryLayout<UInt64>.size
        let read = entries.withUnsafeMutableBytes { pread(pagemap, $0.baseAddress, wanted, off_t(start / pageSize) * 8) }
        guard read == wanted else { return 0 }
        var released = 0
        var index = 0
        while index < pages {
            guard isFilePage(entries[index]) else {
                index += 1
                continue
            }
            var end = index + 1
            while end < pages && isFilePage(entries[end]) { end += 1 }
            let address = UnsafeMutableRawPointer(bitPattern: UInt(start + UInt64(index) * pageSize))
            if madvise(address, (end - index) * Int(pageSize), MADV_DONTNEED) == 0 {
                released += (end - index) * Int(pageSize) / 1024
            }
            index = end
        }
        return released
    }

    /// A pagemap entry (Documentation/admin-guide/mm/pagemap.rst): bit 63 present, bit 61 a
    /// page of a file (or shared anonymous memory, which private file mappings do not hold).
    static func isFilePage(_ entry: UInt64) -> Bool {
        entry & (1 << 63) != 0 && entry & (1 << 61) != 0
    }
}
