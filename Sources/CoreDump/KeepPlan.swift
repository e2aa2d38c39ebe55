// KeepPlan: which bytes of the loads a report keeps, decided once the notes are read (every
// register is known then, and no load has streamed past yet), and filled as the loads stream.
//
// In order of worth, each cut to what is left of the cap on kept bytes: the crashing thread's
// stack and the windows around its registers, the first page of each mapped file and the vDSO
// (build-ids; the vDSO's own unwind tables), then the other threads' stacks, then the windows
// around their registers. Ranges follow CaptureWindows, as a live capture's do. Each region
// belongs to the one load that holds it; a load's regions are filled in address order as its
// bytes pass, each only while its bytes arrive contiguously from its start (a load that
// overlapped another, or a stream that ended, leaves a region short, never with a hole).

import BoundedBytes
import ReportModel

struct KeepPlan {
    enum Owner: Equatable {
        /// Thread `index` of the dump's threads.
        case stack(Int)
        case window
        case image
    }

    struct Region {
        let owner: Owner
        let start: UInt64
        /// Bytes planned; `bytes` holds those received so far, from `start`.
        let count: Int
        let load: Int
        var bytes: [UInt8] = []

        var end: UInt64 { start + UInt64(count) }
    }

    /// Mapped files whose first page is kept: a process maps at most a few hundred libraries;
    /// past this many, their build-ids come from their files on disk alone.
    static let imageLimit = 1024
    /// The most of the vDSO kept (ModuleMap reads no larger vDSO either).
    static let vdsoLimit: UInt64 = 1 << 20
    /// The first page of a mapped ELF file: its header, program headers and notes.
    static let imagePage: UInt64 = 4096

    private(set) var regions: [Region] = []
    /// Per load index, its regions' indices sorted by start.
    private var byLoad: [Int: [Int]] = [:]
    /// Per load index, the first of its regions not yet passed.
    private var cursor: [Int: Int] = [:]
    private(set) var notes: [String] = []
    /// The bytes the plan keeps once every region is filled.
    var plannedBytes: Int { regions.reduce(0) { $0 + $1.count } }

    /// The dumped part of each load (address..<address + fileSize), sorted by address, and
    /// the load each came from.
    private let mappings: [MemoryMapping]
    private let loadOf: [Int]
    private var remaining: Int

    init(dump: CoreDump, limits: CoreDumpReader.Limits) {
        var dumped: [(MemoryMapping, Int)] = []
        for (index, load) in dump.loads.enumerated() where load.fileSize > 0 {
            guard let range = UInt64.checkedRange(start: load.address, count: load.fileSize) else { continue }
            dumped.append(
                (
                    MemoryMapping(
                        start: range.lowerBound, end: range.upperBound, readable: load.readable, writable: load.writable,
                        executable: load.executable, offset: 0, inode: 0, path: ""), index
                ))
        }
        dumped.sort { $0.0.start < $1.0.start }
        mappings = dumped.map(\.0)
        loadOf = dumped.map(\.1)
        remaining = max(limits.keptBytes, 0)

        let threads = dump.threads
        let stacks: [Range<UInt64>?] = threads.enumerated().map { index, thread in
            CaptureWindows.stack(
                from: thread.registers.rsp, limit: index == 0 ? limits.crashedThreadStack : limits.threadStack, in: mappings)
        }
        // Windows never overlap a stack: the union of the stacks, sorted and disjoint.
        let union = Self.union(stacks.compactMap { $0 })
        var windows: [(Range<UInt64>, thread: Int)] = []
        for (index, thread) in threads.enumerated() {
            for value in thread.registers.gpr {
                guard let window = CaptureWindows.window(around: value, in: mappings) else { continue }
                windows += Self.subtract(union, from: window).map { ($0, index) }
            }
        }

        if let first = stacks.first, let range = first { keep(range, as: .stack(0), tid: threads[0].tid) }
        keepWindows(windows.filter { $0.thread == 0 }.map(\.0))
        keepImages(dump)
        for index in threads.indices.dropFirst() {
            if let range = stacks[index] { keep(range, as: .stack(index), tid: threads[index].tid) }
        }
        keepWindows(windows.filter { $0.thread != 0 }.map(\.0))
        for (index, region) in regions.enumerated() { byLoad[region.load, default: []].append(index) }
        for (load, indices) in byLoad { byLoad[load] = indices.sorted { regions[$0].start < regions[$1].start } }
    }

    /// The index of the load whose dumped part holds `address`.
    private func load(holding address: UInt64) -> Int? {
        guard let index = mappings.lastIndex(atOrBelow: address, key: \.start), mappings[index].contains(address) else {
            return nil
        }
        return loadOf[index]
    }

    /// Plans `range` (inside one load's dumped part), cut to what is left of the cap.
    private mutating func keep(_ range: Range<UInt64>, as owner: Owner, tid: ThreadID? = nil) {
        guard let load = load(holding: range.lowerBound), !range.isEmpty else { return }
        let wanted = range.upperBound - range.lowerBound
        let count = Int(min(wanted, UInt64(remaining)))
        if UInt64(count) < wanted, let tid {
            notes.append(
                "thread \(tid)'s stack was cut to \(count) of \(wanted) bytes: the cap on the memory kept from a core")
        }
        guard count > 0 else { return }
        remaining -= count
        regions.append(Region(owner: owner, start: range.lowerBound, count: count, load: load))
    }

    /// Windows, each within one load: merged where they overlap or touch within one load.
    private mutating func keepWindows(_ windows: [Range<UInt64>]) {
        var kept: [Range<UInt64>] = []
        var budget = remaining
        for window in windows {
            let count = Int(window.upperBound - window.lowerBound)  // at most 2 × addressReach
            guard count <= budget else { break }
            budget -= count
            kept.append(window)
        }
        if kept.count < windows.count {
            notes.append("\(windows.count - kept.count) windows around registers were left out: the cap on kept memory")
        }
        kept.sort { $0.lowerBound < $1.lowerBound }
        var merged: [Range<UInt64>] = []
        for window in kept {
            if let last = merged.last, window.lowerBound <= last.upperBound,
                load(holding: window.lowerBound) == load(holding: last.lowerBound)
            {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, window.upperBound)
            } else {
                merged.append(window)
            }
        }
        for window in merged { keep(window, as: .window) }
    }

    /// The first page of each file mapped from offset 0, and the vDSO (AT_SYSINFO_EHDR).
    private mutating func keepImages(_ dump: CoreDump) {
        var starts = Set<UInt64>()
        var images: [Range<UInt64>] = []
        for file in dump.files where file.offset == 0 && starts.insert(file.start).inserted {
            guard images.count < Self.imageLimit else {
                notes.append("the first pages of mapped files past the first \(Self.imageLimit) were not kept")
                break
            }
            if let range = clipped(from: file.start, count: Self.imagePage) { images.append(range) }
        }
        if let vdso = dump.auxiliaryValue(33), !starts.contains(vdso), let range = clipped(from: vdso, count: Self.vdsoLimit) {
            images.append(range)
        }
        for range in images { keep(range, as: .image) }
    }

    /// start..<start + count, cut at the end of the load holding `start` (nil: none does).
    private func clipped(from start: UInt64, count: UInt64) -> Range<UInt64>? {
        guard let index = mappings.lastIndex(atOrBelow: start, key: \.start), mappings[index].contains(start) else {
            return nil
        }
        return start..<min(mappings[index].end, start.checkedAdding(count) ?? .max)
    }

    /// Ranges sorted and merged where they overlap.
    static func union(_ ranges: [Range<UInt64>]) -> [Range<UInt64>] {
        var merged: [Range<UInt64>] = []
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = merged.last, range.lowerBound <= last.upperBound {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        return merged
    }

    /// The parts of `range` outside every range of `union` (sorted, disjoint).
    static func subtract(_ union: [Range<UInt64>], from range: Range<UInt64>) -> [Range<UInt64>] {
        var pieces: [Range<UInt64>] = []
        var from = range.lowerBound
        var index = union.lastIndex(atOrBelow: range.lowerBound, key: \.lowerBound) ?? 0
        while index < union.count, union[index].lowerBound < range.upperBound, from < range.upperBound {
            let taken = union[index]
            if taken.upperBound > from {
                if taken.lowerBound > from { pieces.append(from..<taken.lowerBound) }
                from = max(from, taken.upperBound)
            }
            index += 1
        }
        if from < range.upperBound { pieces.append(from..<range.upperBound) }
        return pieces
    }

    /// Load `load`'s bytes at `address` passing by: copied into the regions they continue.
    mutating func fill(load: Int, address: UInt64, chunk: UnsafeRawBufferPointer) {
        guard let indices = byLoad[load] else { return }
        // The caller checked address + chunk.count against the load's dumped range.
        let chunkEnd = address + UInt64(chunk.count)
        var first = cursor[load] ?? 0
        while first < indices.count, regions[indices[first]].end <= address { first += 1 }
        cursor[load] = first
        var position = first
        while position < indices.count, regions[indices[position]].start < chunkEnd {
            let index = indices[position]
            position += 1
            let region = regions[index]
            let next = region.start + UInt64(region.bytes.count)
            // Only bytes that continue the region from where it stands.
            guard next >= address, next < chunkEnd, next < region.end else { continue }
            let to = min(chunkEnd, region.end)
            if regions[index].bytes.isEmpty { regions[index].bytes.reserveCapacity(region.count) }
            regions[index].bytes.append(contentsOf: chunk[Int(next - address)..<Int(to - address)])
        }
    }

    /// The kept bytes into the dump: the threads' stacks, the windows, the images; a note for
    /// each region the stream left short.
    func apply(to dump: inout CoreDump) {
        var short = 0
        for region in regions {
            if region.bytes.count < region.count {
                if case .stack(let thread) = region.owner {
                    notes(
                        &dump,
                        "thread \(dump.threads[thread].tid)'s stack: \(region.bytes.count) of \(region.count) bytes arrived")
                } else {
                    short += 1
                }
            }
            guard !region.bytes.isEmpty else { continue }
            let kept = MemoryRegion(start: region.start, bytes: region.bytes)
            switch region.owner {
            case .stack(let thread): dump.threads[thread].stack = kept
            case .window: dump.extraMemory.append(kept)
            case .image: dump.imageMemory.append(kept)
            }
        }
        if short > 0 {
            notes(&dump, "\(short) windows or image pages were not whole (the stream ended, or their load overlapped another)")
        }
    }

    private func notes(_ dump: inout CoreDump, _ text: String) { dump.notes.append(text) }
}
