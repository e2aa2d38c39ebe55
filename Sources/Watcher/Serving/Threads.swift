// Threads and a condition variable over pthreads: what the report pool needs of Foundation's
// Thread and NSCondition, which the watcher no longer links (docs/architecture.md).

import CShims
import Glibc

/// A mutex and its condition variable.
/// Unchecked: a pthread mutex and condition variable, which synchronize themselves.
final class Condition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    /// Waits for a broadcast; the lock is held again on return.
    func wait() { pthread_cond_wait(condition, mutex) }
    func broadcast() { pthread_cond_broadcast(condition) }
}

/// Starts a detached thread named `name` (15 bytes of it show) running `body`, on an 8 MB
/// stack; false when the system would not make one.
@discardableResult
func startThread(name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
    final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setstacksize(&attributes, 8 << 20)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
    var thread = pthread_t()
    let created = pthread_create(
        &thread, &attributes,
        { context in
            let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
            cp_name_thread(start.name)
            start.body()
            return nil
        }, start)
    if created != 0 {
        Unmanaged<Start>.fromOpaque(start).release()
        return false
    }
    return true
}
