// AppAreaMonitor: a live process's breadcrumbs and annotations, read now and then while it
// runs, so that a death no crash record describes (SIGKILL, the OOM killer) can still be
// reported with what the program last said: by then its memory is gone.
//
// Cheap by construction: at most one check a second, and a check reads the area's 64-byte
// header only; the area itself (the used slots and its tail, CaptureSession.readAppArea) is read
// again only when the header's breadcrumb count or high-water marks moved. An annotation whose
// value is replaced in place moves neither: it is picked up with the next breadcrumb or new
// key. Everything read is decoded as hostile (AppArea), and the monitor keeps only the decoded
// breadcrumbs and annotations.

import ReportModel

/// One process's monitor, owned by the thread that checks it (the sidecar's serving loop).
public struct AppAreaMonitor: Sendable {
    /// The process, read as its user may read it: its memory is opened anew at each check, so
    /// the kernel decides each time (after an exec into a setuid program, it refuses).
    public let access: ProcessAccess
    public var pid: ProcessID { access.pid }
    public let address: UInt64
    /// CLOCK_MONOTONIC (ns) of the last check; of the last one that read the header (what
    /// `area` holds was still current then); and of the last read that decoded the area.
    public private(set) var lastCheck: UInt64
    public private(set) var confirmed: UInt64?
    public private(set) var lastRead: UInt64?
    /// What the last read decoded, nil until one found the area in use.
    public private(set) var area: AppArea?
    /// Why the last check could not read the area, nil when it could.
    public private(set) var problem: String?
    /// The header fields whose change means new content: breadcrumb_count, annotations_used,
    /// attachments_used.
    var signature: [UInt8]?

    /// The least time between two checks.
    public static let interval: UInt64 = 1_000_000_000

    /// `address` is the HELLO's; `now` starts the first interval (the stub marks the area in
    /// use after its HELLO, so there is nothing to read at once).
    public init(access: ProcessAccess, address: UInt64, now: UInt64) {
        self.access = access
        self.address = address
        lastCheck = now
    }

    /// Whether a check is due: a second after the last one, ten after one that failed (a
    /// process that hides its memory is not asked every second).
    public func isDue(at now: UInt64) -> Bool { now &- lastCheck >= (problem == nil ? Self.interval : 10 * Self.interval) }

    /// What one check did.
    public enum Outcome: Equatable, Sendable {
        /// The header did not change (or the area is still unused): nothing else read.
        case unchanged
        /// The area was read again and decoded (`bytes` read from the process).
        case read(bytes: Int)
        /// The area could not be read or decoded (`problem` says why).
        case failed
    }

    /// Checks the area once: reads its header, and the area when the header moved. Call only
    /// when `isDue`. `budget` caps the bytes the area read may take (the caller's share of its
    /// per-second allowance); an area that would take more is left for a later check.
    public mutating func check(now: UInt64, budget: Int) -> Outcome {
        lastCheck = now
        guard case .success(let memory) = access.openMemory(),
            let header = CaptureSession.readAppAreaHeader(at: address, memory: memory)
        else {
            problem = "its memory could not be read"
            return .failed
        }
        guard AppArea.inUse(header: header) else {
            confirmed = now
            return .unchanged
        }
        let fields = AppArea.changeSignature(header: header)
        guard fields != signature else {
            confirmed = now
            return .unchanged
        }
        let cost = AppArea.rangesToRead(header: header).reduce(0) { $0 + $1.count }
        guard cost <= budget else { return .unchanged }
        var notes: [String] = []
        guard let bytes = CaptureSession.readAppArea(at: address, memory: memory, notes: &notes) else {
            problem = notes.first ?? "its annotation area is no longer in use"
            return .failed
        }
        do {
            area = try AppArea(bytes: bytes)
            signature = fields
            lastRead = now
            confirmed = now
            problem = nil
            return .read(bytes: cost)
        } catch {
            problem = "\(error)"
            return .failed
        }
    }

    /// Bytes the decoded area keeps (its texts), for the caller's memory cap.
    public var retainedBytes: Int {
        guard let area else { return 0 }
        return area.breadcrumbs.reduce(0) { $0 + $1.category.utf8.count + $1.message.utf8.count + 48 }
            + area.annotations.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 32 }
    }

    /// Forgets what was read (the caller's memory cap was reached).
    public mutating func forget() {
        area = nil
        signature = nil
    }
}
