// MemoryNotices: the kernel's own notices that a memory cgroup's usage is nearing or at its
// limit, as descriptors the serving loop polls with its others, so that the crossing itself
// wakes PressureSampler: a program going from idle to its limit in tens of milliseconds falls
// between two of its looks (100 ms apart at idle), never between the kernel's notices.
//
// cgroup v1 (the memory controller's cgroup.event_control, Documentation/admin-guide/cgroup-v1/
// memory.rst, "Memory thresholds" and "OOM Control"): one eventfd registered for each usage
// threshold ("<eventfd> <fd of memory.usage_in_bytes> <bytes>"; the kernel signals it whenever
// usage crosses one, either way, checked every 128 pages charged per CPU), and one for the
// cgroup's OOM ("<eventfd> <fd of memory.oom_control>"; signalled before the OOM killer picks
// its victim). Thresholds stay registered until the eventfd is closed: nothing to re-arm.
//
// cgroup v2 (Documentation/admin-guide/cgroup-v2.rst, Documentation/accounting/psi.rst), which
// has no usage threshold: memory.events, polled for POLLPRI (a counter changed: `high`, `max`,
// `oom`, `oom_kill`; read again to re-arm it), and a PSI trigger on memory.pressure (opened
// read-write, "some 10000 500000" written: 10 ms of stall within half a second; an unprivileged
// writer needs a window of a multiple of 2 s, tried next), polled for POLLPRI. memory.high may
// be unset, so `max` and PSI are what come before the OOM killer there.
//
// What cannot be set up (a file not writable in a container, PSI disabled) is left out and said
// in `missing`: the sampler's looks stand in.

import LiveProcess

#if canImport(Glibc)
import Glibc
#endif

final class MemoryNotices {
    /// What woke the loop, in order of urgency.
    enum Notice: Int, Comparable {
        /// v1: usage crossed a threshold (either way: the usage says which).
        case threshold
        /// v2: PSI's trigger: tasks stalled on memory in the cgroup.
        case pressure
        /// v2: memory.events' `high` or `max` counted: usage reached memory.high or memory.max.
        case limit
        /// v1: the cgroup's OOM notice; v2: `oom` or `oom_kill` counted.
        case oom

        static func < (a: Notice, b: Notice) -> Bool { a.rawValue < b.rawValue }

        /// Why a snapshot it led to was taken, for the report's notes.
        var cause: String {
            switch self {
            case .threshold: return "the kernel's notice that the usage crossed a threshold"
            case .pressure: return "the kernel's notice of memory pressure (PSI)"
            case .limit: return "the kernel's notice that the usage reached the cgroup's high or max"
            case .oom: return "the kernel's notice of an OOM in the cgroup"
            }
        }
    }

    enum Source: String {
        case thresholds = "v1-thresholds"
        case oomControl = "v1-oom"
        case events = "v2-events"
        case pressure = "v2-psi"
    }

    /// A descriptor the serving loop polls for `events`.
    struct Descriptor {
        var fd: Int32
        var events: Int16
        var source: Source
        /// False once it failed: polled as -1 from then on, closed with the rest.
        var live = true
    }

    private(set) var descriptors: [Descriptor] = []
    /// What could not be set up, in words.
    private(set) var missing: [String] = []
    /// memory.events' counters as last read (v2), and a buffer read into, made once.
    private var counts = EventCounts()
    private var buffer = [UInt8](repeating: 0, count: 1024)

    /// The usage thresholds registered on v1, in percent of the limit: half (a program at half
    /// its limit and growing fast is where the sampler's rate rule begins), the sampler's own
    /// threshold (PressureSampler.thresholdPercent), and steps above it.
    static let thresholdPercents: [UInt64] = [50, PressureSampler.thresholdPercent, 85, 90, 95]

    /// v2's PSI triggers, tried in order: 10 ms of stall within 500 ms (CAP_SYS_RESOURCE), then
    /// within 2 s (what an unprivileged writer may ask for).
    static let pressureTriggers = ["some 10000 500000", "some 10000 2000000"]

    /// Sets up the notices of `cgroup` for a `limit` read at the start; `usageFD` is the
    /// sampler's open memory.usage_in_bytes (v1).
    init(cgroup: MemoryState.Cgroup, limit: UInt64, usageFD: Int32) {
        if cgroup.v2 {
            watchEvents(cgroup.directory + "/memory.events")
            triggerPressure(cgroup.directory + "/memory.pressure")
        } else {
            registerThresholds(cgroup.directory, limit: limit, usageFD: usageFD)
        }
    }

    deinit {
        // Closing a v1 eventfd unregisters its events; closing memory.pressure removes the trigger.
        for descriptor in descriptors { close(descriptor.fd) }
    }

    var sources: [Source] { descriptors.map(\.source) }

    /// The thresholds for `limit`, in bytes, ascending: each above 0 and below the limit.
    static func thresholds(limit: UInt64) -> [UInt64] {
        var result: [UInt64] = []
        for percent in thresholdPercents {
            let bytes = limit / 100 * percent
            if bytes > (result.last ?? 0) && bytes < limit { result.append(bytes) }
        }
        return result
    }

    /// The line cgroup.event_control takes for a usage threshold, or (no threshold) for the
    /// OOM notice of the memory.oom_control open as `controlFD`.
    static func eventControlLine(eventFD: Int32, controlFD: Int32, threshold: UInt64? = nil) -> String {
        "\(eventFD) \(controlFD)" + (threshold.map { " \($0)" } ?? "")
    }

    private func registerThresholds(_ directory: String, limit: UInt64, usageFD: Int32) {
        let control = open(directory + "/cgroup.event_control", O_WRONLY | O_CLOEXEC)
        guard control >= 0 else {
            missing.append("\(directory)/cgroup.event_control: \(String(cString: strerror(errno)))")
            return
        }
        defer { close(control) }
        func register(_ line: String) -> Bool {
            line.withCString { write(control, $0, strlen($0)) } >= 0
        }
        do {
            let thresholds = try EventDescriptor.make()
            var registered = 0
            for bytes in Self.thresholds(limit: limit)
            where register(Self.eventControlLine(eventFD: thresholds.fd, controlFD: usageFD, threshold: bytes)) {
                registered += 1
            }
            if registered > 0 {
                descriptors.append(Descriptor(fd: thresholds.fd, events: Int16(POLLIN), source: .thresholds))
            } else {
                missing.append("usage thresholds: \(String(cString: strerror(errno)))")
                close(thresholds.fd)
            }
        } catch {
            missing.append("usage thresholds: \(error)")
        }
        // The kernel keeps the eventfd, not the control file: it is closed once registered.
        let oomControl = open(directory + "/memory.oom_control", O_RDONLY | O_CLOEXEC)
        defer { if oomControl >= 0 { close(oomControl) } }
        do {
            let oom = try EventDescriptor.make()
            if oomControl >= 0, register(Self.eventControlLine(eventFD: oom.fd, controlFD: oomControl)) {
                descriptors.append(Descriptor(fd: oom.fd, events: Int16(POLLIN), source: .oomControl))
            } else {
                missing.append("the OOM notice: \(String(cString: strerror(errno)))")
                close(oom.fd)
            }
        } catch {
            missing.append("the OOM notice: \(error)")
        }
    }

    private func watchEvents(_ path: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            missing.append("\(path): \(String(cString: strerror(errno)))")
            return
        }
        // Reading it sets the count poll compares with: without it the first poll fires at once.
        guard let read = readEvents(fd) else {
            missing.append("\(path): \(String(cString: strerror(errno)))")
            close(fd)
            return
        }
        counts = read
        descriptors.append(Descriptor(fd: fd, events: Int16(POLLPRI), source: .events))
    }

    private func triggerPressure(_ path: String) {
        let fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            missing.append("\(path): \(String(cString: strerror(errno)))")
            return
        }
        // The kernel reads the trigger as a C string: its terminating NUL is written too.
        for trigger in Self.pressureTriggers where trigger.withCString({ write(fd, $0, strlen($0) + 1) }) > 0 {
            descriptors.append(Descriptor(fd: fd, events: Int16(POLLPRI), source: .pressure))
            return
        }
        missing.append("a PSI trigger on \(path): \(String(cString: strerror(errno)))")
        close(fd)
    }

    private func readEvents(_ fd: Int32) -> EventCounts? {
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count >= 0 else { return nil }
        return EventCounts(text: buffer[..<count])
    }

    /// What the descriptor at `index`, which poll found ready with `revents`, says: consumed (an
    /// eventfd read, memory.events read again, which re-arms it), so that it wakes the loop
    /// again only at the next notice. Nil when it says nothing that matters (a v1 threshold
    /// crossed downwards still says `.threshold`: the usage tells). A descriptor that fails is
    /// dropped (polled as -1 from then on) so that it cannot wake the loop in a spin.
    func drain(_ index: Int, revents: Int16) -> Notice? {
        guard descriptors.indices.contains(index), descriptors[index].live, revents != 0 else { return nil }
        let descriptor = descriptors[index]
        let failed = revents & Int16(POLLNVAL) != 0
        switch descriptor.source {
        case .thresholds, .oomControl:
            // POLLERR: the counter overflowed, which a notice never makes it do.
            if failed || revents & Int16(POLLERR) != 0 { drop(index) }
            guard EventDescriptor(fd: descriptor.fd).take() > 0 else { return nil }
            return descriptor.source == .oomControl ? .oom : .threshold
        case .events:
            guard !failed, let now = readEvents(descriptor.fd) else {
                drop(index)
                return nil
            }
            defer { counts = now }
            return Self.notice(before: counts, after: now)
        case .pressure:
            // POLLERR without POLLPRI: the trigger is gone (its cgroup removed).
            if failed || revents & Int16(POLLPRI) == 0 { drop(index) }
            return revents & Int16(POLLPRI) != 0 ? .pressure : nil
        }
    }

    private func drop(_ index: Int) { descriptors[index].live = false }

    /// pollfds for the serving loop, in `descriptors`' order (a dropped one polled as -1).
    var pollDescriptors: [pollfd] {
        descriptors.map { pollfd(fd: $0.live ? $0.fd : -1, events: $0.events, revents: 0) }
    }

    /// The counters of memory.events (v2) that say the limit was reached or the OOM killer ran.
    struct EventCounts: Equatable {
        var high: UInt64 = 0
        var max: UInt64 = 0
        var oom: UInt64 = 0
        var oomKill: UInt64 = 0

        init(high: UInt64 = 0, max: UInt64 = 0, oom: UInt64 = 0, oomKill: UInt64 = 0) {
            self.high = high
            self.max = max
            self.oom = oom
            self.oomKill = oomKill
        }

        /// From memory.events' text ("low 0\nhigh 3\nmax 12\noom 1\noom_kill 1\n..."): hostile
        /// bytes; a line that does not parse is skipped, a counter not there is 0.
        init(text: ArraySlice<UInt8>) {
            for line in text.split(separator: UInt8(ascii: "\n")) {
                let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 1)
                guard fields.count == 2, let value = Self.number(fields[1]) else { continue }
                switch String(decoding: fields[0], as: UTF8.self) {
                case "high": high = value
                case "max": max = value
                case "oom": oom = value
                case "oom_kill": oomKill = value
                default: break
                }
            }
        }

        /// Decimal digits, at most 20 of them, and nothing else; nil on overflow.
        static func number(_ digits: ArraySlice<UInt8>) -> UInt64? {
            guard !digits.isEmpty, digits.count <= 20 else { return nil }
            var value: UInt64 = 0
            for byte in digits {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                let (times, overflow) = value.multipliedReportingOverflow(by: 10)
                let (sum, carry) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
                guard !overflow, !carry else { return nil }
                value = sum
            }
            return value
        }
    }

    /// What a change of memory.events' counters says: an OOM before a limit; nil when neither
    /// moved (another counter did, `low` or `sock_throttled`).
    static func notice(before: EventCounts, after: EventCounts) -> Notice? {
        if after.oom != before.oom || after.oomKill != before.oomKill { return .oom }
        if after.max != before.max || after.high != before.high { return .limit }
        return nil
    }
}
