// The clocks every layer measures with, in nanoseconds: CLOCK_MONOTONIC for deadlines and
// timings, CLOCK_REALTIME for the time a record is stamped with. Here, at the leaf, so that a
// layer that only waits (Store's lock, a child's deadline) needs nothing above it.

#if canImport(Glibc)
import Glibc
#endif

/// CLOCK_MONOTONIC in nanoseconds: what capture timings and deadlines are measured in.
public func monotonicNanoseconds() -> UInt64 { nanoseconds(of: CLOCK_MONOTONIC) }

/// CLOCK_REALTIME in nanoseconds since the Unix epoch: a record's time, as the stub stamps it.
public func realtimeNanoseconds() -> UInt64 { nanoseconds(of: CLOCK_REALTIME) }

/// clock_gettime(2) of `clock`, in nanoseconds.
func nanoseconds(of clock: clockid_t) -> UInt64 {
    var time = timespec()
    clock_gettime(clock, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}
