// ReportPool: the sidecar's bounded pool for everything after a process is released
// (unwinding, symbolication, writing the report). Capture stays serial on the sidecar's main
// thread, so a crashing process waits only for its own capture and the captures queued before
// it; `capacity` bounds the captures held in memory, and a full queue makes the main thread
// write one report itself before taking the next crash (back-pressure, not growth).

import Glibc

/// Unchecked: its queue is guarded by the pthread mutex and condition variable it holds.
public final class ReportPool: @unchecked Sendable {
    private let condition = Condition()
    private var queue: [@Sendable () -> Void] = []
    private var running = 0
    private var stopping = false
    private let capacity: Int

    public init(threads count: Int, capacity: Int = 32) {
        self.capacity = max(1, capacity)
        for index in 0..<max(1, count) {
            startThread(name: "report-\(index)") { [self] in work() }
        }
    }

    /// Queues a job; runs it on the calling thread when the queue is full.
    public func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        if queue.count >= capacity {
            condition.unlock()
            job()
            return
        }
        queue.append(job)
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until every queued job has run.
    public func drain() {
        condition.lock()
        while !queue.isEmpty || running > 0 { condition.wait() }
        condition.unlock()
    }

    /// Jobs queued or running now.
    public var pending: Int {
        condition.lock()
        defer { condition.unlock() }
        return queue.count + running
    }

    private func work() {
        while true {
            condition.lock()
            while queue.isEmpty && !stopping { condition.wait() }
            if queue.isEmpty && stopping {
                condition.unlock()
                return
            }
            let job = queue.removeFirst()
            running += 1
            condition.unlock()
            job()
            condition.lock()
            running -= 1
            condition.broadcast()
            condition.unlock()
        }
    }
}
