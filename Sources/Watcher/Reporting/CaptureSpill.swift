// CaptureSpill: a storm's captures wait for their second step on disk, not in the sidecar's
// memory.
//
// A deferred second step holds its capture: every thread's stack, the memory around the fault,
// the process's /proc files (14 KB for a small program, 25 KB of the heap with malloc's
// overhead; 2 MB of a 100-crash storm's peak). Their first step has just written the same
// bytes into the minidump, so they are safe; what waits in memory is only a working copy.
// When a second step would wait behind another, its capture's bytes go into one unlinked file
// of the watcher's own (O_TMPFILE in the report root, opened at start with the watcher's
// credentials, so no client's directory or file system is involved), each array written at an
// offset reserved for it, and come back, each read into an array of its own, when it runs. Page
// cache is the kernel's to write back and drop under pressure; the heap is not. A capture read
// back gives its blocks back at once (a hole punched), the file is emptied whenever no spilled
// capture is left, and a steady stream of crashes that never lets it empty stops spilling once
// its offsets reach `maximumEnd` (the captures then wait in memory, within the pool's budget).
//
// Reading back is bounded (a local file of the watcher's, a fixed length); a capture whose
// bytes cannot be read back stays as captured (its first step's report is whole). Where the
// file cannot be made (a file system without O_TMPFILE), captures wait in memory as before.

import BoundedBytes
import CShims
import ReportModel
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

final class CaptureSpill: Sendable {
    /// Where one capture's bytes are in the file.
    struct Place: Sendable {
        let offset: Int
        let lengths: [Int]
    }

    let fd: Int32
    /// The end of the file's used part, the captures spilled and not yet read back, and those
    /// spilled since `takeSpilled` last asked.
    private let state = Mutex<(end: Int, live: Int, spilled: Int)>((0, 0, 0))

    /// The offsets the file may use before it is next emptied (its blocks are given back as
    /// captures are read, so this bounds its size only where holes cannot be punched).
    let maximumEnd: Int

    /// An unlinked file in `directory`; nil where none can be made there.
    init?(directory: String, maximumEnd: Int = 256 << 20) {
        let fd = cp_open_unnamed(directory)
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.maximumEnd = maximumEnd
    }

    deinit { close(fd) }

    /// Moves the capture's stacks, copied memory and /proc files into the file, leaving them
    /// empty in `capture`. Nil, the capture untouched, when the write fails or the file is full.
    func spill(_ capture: inout Capture) -> Place? {
        let arrays = Self.arrays(of: capture)
        let lengths = arrays.map(\.count)
        let total = lengths.reduce(0, +)
        guard total > 0 else { return nil }
        let offset = state.withLock { state -> Int? in
            guard state.end + total <= maximumEnd else { return nil }
            defer {
                state.end += total
                state.live += 1
                state.spilled += 1
            }
            return state.end
        }
        guard let offset else { return nil }
        var position = offset
        for array in arrays {
            let written = array.withUnsafeBytes { writeAll(fd, $0, at: position) }
            guard written else {
                state.withLock { $0.spilled -= 1 }
                release(offset: offset, count: total)
                return nil
            }
            position += array.count
        }
        Self.replace(in: &capture) { _ in [] }
        return Place(offset: offset, lengths: lengths)
    }

    /// Puts the bytes back. False when they cannot be read whole (the capture stays empty).
    func restore(_ capture: inout Capture, from place: Place) -> Bool {
        let total = place.lengths.reduce(0, +)
        defer { release(offset: place.offset, count: total) }
        var arrays: [[UInt8]] = []
        arrays.reserveCapacity(place.lengths.count)
        var position = place.offset
        for length in place.lengths {
            var complete = false
            let array = [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
                complete = readAll(fd, into: UnsafeMutableRawBufferPointer(buffer), at: position)
                count = complete ? length : 0
            }
            guard complete else { return false }
            arrays.append(array)
            position += length
        }
        var index = 0
        Self.replace(in: &capture) { _ in
            defer { index += 1 }
            return index < arrays.count ? arrays[index] : []
        }
        return true
    }

    /// How many captures were spilled since the last call (the sidecar logs it after a storm).
    func takeSpilled() -> Int {
        state.withLock { state in
            defer { state.spilled = 0 }
            return state.spilled
        }
    }

    /// One spilled capture is done with: its blocks go back at once, and the file is emptied
    /// once none is left.
    private func release(offset: Int, count: Int) {
        _ = cp_punch_hole(fd, Int64(offset), Int64(count))
        state.withLock { state in
            state.live -= 1
            if state.live == 0 {
                state.end = 0
                _ = ftruncate(fd, 0)
            }
        }
    }

    /// The byte arrays spilled, in order: each thread's stack, each region of extra memory, then
    /// the process's own /proc files (cpuinfo and lsb-release are the machine's, shared by every
    /// capture).
    private static func arrays(of capture: Capture) -> [[UInt8]] {
        var arrays: [[UInt8]] = []
        var copy = capture
        replace(in: &copy) { array in
            arrays.append(array)
            return array
        }
        return arrays
    }

    /// Calls `body` on each spilled array in order, replacing it with what it returns. A thread
    /// without a stack and a file not read are not arrays, so spilling keeps them as they are.
    private static func replace(in capture: inout Capture, _ body: ([UInt8]) -> [UInt8]) {
        for index in capture.snapshot.threads.indices {
            if let stack = capture.snapshot.threads[index].stack {
                capture.snapshot.threads[index].stack?.bytes = body(stack.bytes)
            }
        }
        for index in capture.snapshot.extraMemory.indices {
            capture.snapshot.extraMemory[index].bytes = body(capture.snapshot.extraMemory[index].bytes)
        }
        let files: [WritableKeyPath<LinuxFiles, [UInt8]?>] = [\.procStatus, \.cmdLine, \.environ, \.auxv, \.maps]
        for file in files {
            if let bytes = capture.snapshot.linuxFiles[keyPath: file] {
                capture.snapshot.linuxFiles[keyPath: file] = body(bytes)
            }
        }
    }
}
