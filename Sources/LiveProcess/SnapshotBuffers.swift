// SnapshotBuffers: the memory a PressureSnapshot is taken into, prepared before it is needed.
// The watcher that takes it shares the memory cgroup whose limit is near: a page it faults in
// while the program is at the limit waits on the cgroup's reclaim, and once the OOM killer has
// chosen its victim, until the reaper has freed the victim's memory, stacks included (about two
// seconds). So the stacks (PressureSnapshot.totalStackLimit), the threads' registers (at most
// `threadLimit` threads, two sets) and what says where each thread's copy lies are one anonymous
// mapping, made, written to page by page (and locked, where RLIMIT_MEMLOCK allows) when the
// sampler is set up, and reused by every snapshot: registers (PTRACE_GETREGSET) and stacks
// (process_vm_readv) go straight into it, and nothing a snapshot keeps is allocated while the
// program is held. Nor is a /proc file read then, as a rule: /proc/PID/maps, which places each
// stack, and the command line are read ahead (`prepare`, at the sampler's looks while usage is
// low, after a new thread or an exec), and during a snapshot only when a thread's stack pointer
// lies outside every mapping read so far, after the stacks they did place are copied.
//
// The latest snapshot stays whole while the next is taken: the next fills the other set of
// registers and the larger stretch of the stack buffer the latest leaves free (nearly all of it:
// stacks copied from the stack pointer up are a few KB each as a rule), and replaces it only if
// its leader's stack was read, so a snapshot taken once the reaper has run (zeros) never
// replaces a good one. (Only a latest that leaves less than one thread's stack free is
// overwritten in place.) The capture at a death asks for the latest as a PressureSnapshot
// (`snapshot(alive:)`), copied out then. Used from the tracer's thread only.

import BoundedBytes
import Processes
import ReportModel

#if canImport(Glibc)
import Glibc
#endif

public final class SnapshotBuffers {
    /// Threads whose registers a snapshot keeps; past it, threads keep what the capture at the
    /// death reads (their registers survive the reaper; only their stacks go).
    public static let threadLimit = 256

    public let pid: ProcessID
    /// Bytes mapped and touched for the buffers, and how long preparing them took.
    public let preparedBytes: Int
    public let preparedNanoseconds: UInt64
    /// Whether mlock keeps them resident (it needs RLIMIT_MEMLOCK room); else they are touched
    /// only, and on a machine with swap could be swapped out.
    public let locked: Bool

    /// Where a thread's copy lies in the buffers. A trivial type: it lives in the mapping.
    struct ThreadSlot {
        var tid: Int32 = 0
        var hasFPU = false
        var stackStart: UInt64 = 0
        var stackOffset = 0
        var stackCount = 0
    }

    /// One snapshot's account of what it holds.
    struct Taken {
        var count = 0
        var takenNanoseconds: UInt64 = 0
        var usage: UInt64 = 0
        var stoppedNanoseconds: UInt64 = 0
        var cause = ""
        /// Its stretch of the stack buffer.
        var stacks: Range<Int> = 0..<0
        /// Whether its first thread is the leader, with a stack that is not zeros.
        var usable = false
    }

    private let base: UnsafeMutableRawPointer
    private let stacks: UnsafeMutableRawBufferPointer
    /// Per set (0 and 1): registers, FXSAVE images, slots.
    private let registers: [UnsafeMutableRawPointer]
    private let fpu: [UnsafeMutableRawPointer]
    private let slots: [UnsafeMutablePointer<ThreadSlot>]
    private static let gprBytes = X86_64Registers.gprCount * MemoryLayout<UInt64>.size
    private static let fpuBytes = PtraceSession.fxsaveSize

    /// The set holding the latest snapshot, and each set's account.
    private var latestSet: Int?
    private var taken = [Taken(), Taken()]
    /// /proc/PID/maps as last read, in address order.
    private var mappings: [MemoryMapping] = []
    /// /proc/PID/cmdline, read at the first snapshot (the reaper takes the arguments too).
    private var commandLine: [UInt8]?

    /// How many times the maps were read (ahead or during a snapshot), what `prepare` was last
    /// given, and how long the last take kept the process stopped (whether or not it replaced
    /// the latest).
    public private(set) var mapsReads = 0
    public private(set) var preparedFor: Int?
    public private(set) var lastStoppedNanoseconds: UInt64 = 0

    /// Maps and touches the buffers for `pid`'s snapshots; nil when the mapping cannot be made.
    public init?(pid: ProcessID) {
        let started = monotonicNanoseconds()
        let page = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)
        let limit = Self.threadLimit
        let setBytes = limit * (Self.gprBytes + Self.fpuBytes + MemoryLayout<ThreadSlot>.stride)
        let size = (PressureSnapshot.totalStackLimit + 2 * setBytes + page - 1) / page * page
        guard
            let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0),
            mapped != MAP_FAILED
        else { return nil }
        // A child crashport forks must not share these pages: the next write here would copy
        // them, allocating, at the worst moment.
        _ = madvise(mapped, size, MADV_DONTFORK)
        // Written to page by page: MAP_POPULATE is a hint, and a page never written to could
        // still be the shared zero page.
        for offset in stride(from: 0, to: size, by: page) { mapped.storeBytes(of: 0, toByteOffset: offset, as: UInt8.self) }
        locked = mlock(mapped, size) == 0
        base = mapped
        preparedBytes = size
        stacks = UnsafeMutableRawBufferPointer(start: mapped, count: PressureSnapshot.totalStackLimit)
        // Each set: registers (8-byte words), then FXSAVE images, then slots (8-aligned: every
        // size before them is a multiple of 8).
        let sets = [0, 1].map { mapped + PressureSnapshot.totalStackLimit + $0 * setBytes }
        registers = sets
        fpu = sets.map { $0 + limit * Self.gprBytes }
        slots = sets.map {
            let slots = ($0 + limit * (Self.gprBytes + Self.fpuBytes)).bindMemory(to: ThreadSlot.self, capacity: limit)
            slots.initialize(repeating: ThreadSlot(), count: limit)
            return slots
        }
        self.pid = pid
        preparedNanoseconds = monotonicNanoseconds() - started
    }

    deinit {
        for set in slots { set.deinitialize(count: Self.threadLimit) }
        munmap(base, preparedBytes)
    }

    /// The latest snapshot's account: nil until one was taken.
    var latest: Taken? { latestSet.map { taken[$0] } }
    /// CLOCK_MONOTONIC when the latest snapshot's threads were stopped (0: none yet), and the
    /// cgroup's usage that led to it.
    public var takenNanoseconds: UInt64 { latest?.takenNanoseconds ?? 0 }
    public var usage: UInt64 { latest?.usage ?? 0 }

    private func gpr(_ set: Int, _ index: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: registers[set] + index * Self.gprBytes, count: Self.gprBytes)
    }

    private func fxsave(_ set: Int, _ index: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: fpu[set] + index * Self.fpuBytes, count: Self.fpuBytes)
    }

    /// The stretch of the stack buffer a new snapshot may fill: the larger of the two the
    /// latest leaves free; all of it when there is no latest, or when the latest leaves less
    /// than one thread's stack free (threads whose stacks fill 2 MB from their stack pointers
    /// up: the new one then overwrites it, rather than never replace it).
    static func freeStretch(besides used: Range<Int>?, capacity: Int) -> Range<Int> {
        guard let used, !used.isEmpty else { return 0..<capacity }
        let free = used.lowerBound >= capacity - used.upperBound ? 0..<used.lowerBound : used.upperBound..<capacity
        return free.count >= min(PressureSnapshot.threadStackLimit, capacity / 2) ? free : 0..<capacity
    }

    /// Stops every thread of the process (held by `holder`, the tracer that has them), copies
    /// their registers and stacks into the buffers, and lets them go: the stop is a capture's
    /// (ThreadHold.suspendAll, bounded by PressureSnapshot.stopTimeoutMilliseconds). True when
    /// it became the latest: some thread stopped, and its leader's stack was read or the latest
    /// had none either.
    public func take(holder: ThreadHold, usage: UInt64, cause: String) -> Bool {
        let started = monotonicNanoseconds()
        guard let stopped = try? holder.suspendAll(timeoutMilliseconds: PressureSnapshot.stopTimeoutMilliseconds),
            !stopped.isEmpty
        else {
            holder.detachAll(timeoutMilliseconds: 100)
            lastStoppedNanoseconds = monotonicNanoseconds() - started
            return false
        }
        let stoppedAt = monotonicNanoseconds()
        let set = latestSet.map { 1 - $0 } ?? 0
        let stretch = Self.freeStretch(besides: latest?.stacks, capacity: stacks.count)
        if let latest, stretch.overlaps(latest.stacks) { latestSet = nil }
        var cursor = stretch.lowerBound
        let memory = ProcessMemory(pid: pid)
        if mappings.isEmpty { readMappings() }
        var count = 0
        var unplaced = 0
        // The leader first: the thread a termination report leads with, and the first served
        // from the stack budget.
        for tid in stopped.filter({ $0 == pid.mainThread }) + stopped.filter({ $0 != pid.mainThread }) {
            guard count < Self.threadLimit else { break }
            let read = holder.registers(of: tid, gpr: gpr(set, count), fxsave: fxsave(set, count))
            guard read.gpr else { continue }
            slots[set][count] = ThreadSlot(tid: tid.rawValue, hasFPU: read.fxsave)
            if !copyStack(set, count, into: &cursor, end: stretch.upperBound, memory: memory, placedOnly: true) {
                unplaced += 1
            }
            count += 1
        }
        // Threads the maps read so far do not place: read them again, now that every stack they
        // did place is safe in the buffers.
        if unplaced > 0 {
            readMappings()
            for index in 0..<count where slots[set][index].stackCount == 0 {
                _ = copyStack(set, index, into: &cursor, end: stretch.upperBound, memory: memory, placedOnly: false)
            }
        }
        if commandLine == nil { commandLine = ProcFiles.read("/proc/\(pid)/cmdline", limit: 64 << 10) }
        holder.detachAll(timeoutMilliseconds: 100)
        lastStoppedNanoseconds = monotonicNanoseconds() - started
        let first = slots[set][0]
        let usable =
            count > 0 && first.tid == pid.rawValue && first.stackCount > 0
            && UnsafeRawBufferPointer(rebasing: stacks[first.stackOffset..<first.stackOffset + first.stackCount])
                .contains { $0 != 0 }
        guard usable || latest?.usable != true else { return false }
        taken[set] = Taken(
            count: count, takenNanoseconds: stoppedAt, usage: usage, stoppedNanoseconds: lastStoppedNanoseconds,
            cause: cause, stacks: stretch.lowerBound..<cursor, usable: usable)
        latestSet = set
        return true
    }

    /// Reads the maps and the command line now, ahead of a snapshot, and notes `changes` (the
    /// tracer's layoutChanges: `preparedFor` tells the caller when to do it again). Call it while
    /// usage is well below the limit: the reads allocate, in the kernel too.
    public func prepare(changes: Int) {
        readMappings()
        commandLine = ProcFiles.read("/proc/\(pid)/cmdline", limit: 64 << 10)
        preparedFor = changes
    }

    private func readMappings() {
        mappings = ProcFiles.read("/proc/\(pid)/maps").map { MemoryMapping.parse($0) } ?? []
        mapsReads += 1
    }

    /// Copies thread `index`'s stack in `set`, from its stack pointer (CaptureWindows' range),
    /// to the stack buffer at `cursor`, within the thread's budget and `end`. With
    /// `placedOnly`, only when a mapping read so far holds the stack pointer: false when none
    /// does.
    private func copyStack(
        _ set: Int, _ index: Int, into cursor: inout Int, end: Int, memory: ProcessMemory, placedOnly: Bool
    ) -> Bool {
        let sp = gpr(set, index).load(fromByteOffset: X86_64Registers.rspIndex * 8, as: UInt64.self)
        if placedOnly {
            let below = sp.checkedSubtracting(CaptureWindows.redZone) ?? 0
            guard
                CaptureWindows.readableMapping(containing: sp, in: mappings) != nil
                    || CaptureWindows.readableMapping(containing: below, in: mappings) != nil
            else { return false }
        }
        let budget = min(PressureSnapshot.threadStackLimit, end - cursor)
        guard budget > 0, let range = CaptureWindows.stack(from: sp, limit: budget, in: mappings) else { return true }
        // The range is at most `budget` bytes: an Int.
        let into = UnsafeMutableRawBufferPointer(rebasing: stacks[cursor..<cursor + Int(range.count)])
        let copied = memory.readUpTo(from: range.lowerBound, into: into)
        slots[set][index].stackStart = range.lowerBound
        slots[set][index].stackOffset = cursor
        slots[set][index].stackCount = copied
        cursor += copied
        return true
    }

    /// The latest snapshot, copied out of the buffers (this allocates: call it at the death,
    /// where it is used), with `alive`, the last moment the watcher saw the process alive after
    /// taking it. Nil when none was taken.
    public func snapshot(alive: UInt64) -> PressureSnapshot? {
        guard let set = latestSet else { return nil }
        let latest = taken[set]
        let threads = (0..<latest.count).map { index in
            let slot = slots[set][index]
            let words = gpr(set, index)
            let gpr = (0..<X86_64Registers.gprCount).map { words.load(fromByteOffset: $0 * 8, as: UInt64.self) }
            let fxsave = slot.hasFPU ? Array(UnsafeRawBufferPointer(fxsave(set, index))) : []
            let stack =
                slot.stackCount > 0
                ? MemoryRegion(
                    start: slot.stackStart,
                    bytes: Array(UnsafeRawBufferPointer(rebasing: stacks[slot.stackOffset..<slot.stackOffset + slot.stackCount])))
                : nil
            return ThreadSnapshot(
                tid: ThreadID(slot.tid), name: "", registers: X86_64Registers(gpr: gpr, fxsave: fxsave), stack: stack)
        }
        return PressureSnapshot(
            threads: threads, commandLine: commandLine, takenNanoseconds: latest.takenNanoseconds, usage: latest.usage,
            stoppedNanoseconds: latest.stoppedNanoseconds, aliveNanoseconds: max(alive, latest.takenNanoseconds),
            cause: latest.cause)
    }
}
