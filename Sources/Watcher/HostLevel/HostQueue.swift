// HostQueue: which core the host level reads next. Every core the kernel hands over is taken
// (none is dropped for being one too many), and read by a dump thread when its turn comes:
//
// - at most `places` are read at once in all, and at most `perUser` of any one user's, so that
//   one user's slow or huge dumps (a 1 TiB sparse mapping streams 1 TiB of zeros) wait for that
//   user's places only: another user's crash gets a place at once;
// - the queued take turns user by user (round robin), each user's in the order they came;
// - every core has its deadline from its arrival; one still queued when its deadline is near
//   (`lateMargin`) starts anyway, in one of `latePlaces` more, so that it is reported from what
//   it reads in its last seconds (its notes, with every thread's registers, come first) rather
//   than only counted; one whose deadline passes in the queue all the same is let go unread;
// - a user's queue holds at most `perUserQueue` cores: a flood of one user's crashes (a fork bomb
//   of crashing processes) is let go at once past it, so that it holds neither the guard's slots
//   nor the kernel's backlog from another user's crash.
//
// HostSchedule is the policy, a value without threads or clocks (HostQueueTests); HostQueue runs
// it: the serving thread adds, dump threads take the next when they finish, and the serving
// loop's look (at least once a second) starts the late and lets the expired go.

import BoundedBytes
import LiveProcess
import Synchronization

/// The order and places of the cores waiting to be read.
struct HostSchedule<Item> {
    struct Entry {
        var item: Item
        var uid: UInt32
        /// CLOCK_MONOTONIC nanoseconds after which the process may no longer be held.
        var deadline: UInt64
    }

    /// Reads at once, in all and per user, and the extra places for cores near their deadline.
    let places: Int
    let perUser: Int
    let latePlaces: Int
    /// How long before its deadline a queued core starts in a late place.
    let lateMargin: UInt64

    private var queues: [UInt32: [Entry]] = [:]
    /// Users with queued cores, in turn order.
    private var turns: [UInt32] = []
    private var running: [UInt32: Int] = [:]
    private(set) var runningCount = 0
    private(set) var lateCount = 0
    private(set) var queuedCount = 0

    init(places: Int, perUser: Int, latePlaces: Int, lateMargin: UInt64) {
        self.places = max(1, places)
        self.perUser = max(1, perUser)
        self.latePlaces = max(0, latePlaces)
        self.lateMargin = lateMargin
    }

    /// The cores of `uid` waiting.
    func queued(uid: UInt32) -> Int { queues[uid]?.count ?? 0 }

    mutating func enqueue(_ item: Item, uid: UInt32, deadline: UInt64) {
        if queues[uid, default: []].isEmpty { turns.append(uid) }
        queues[uid, default: []].append(Entry(item: item, uid: uid, deadline: deadline))
        queuedCount += 1
    }

    /// The next core to start at `now`, and whether in a late place; nil when none may.
    mutating func next(now: UInt64) -> (entry: Entry, late: Bool)? {
        if runningCount < places {
            for (turn, uid) in turns.enumerated() where running[uid, default: 0] < perUser {
                let entry = take(uid: uid, turn: turn)
                running[uid, default: 0] += 1
                runningCount += 1
                return (entry, false)
            }
        }
        guard lateCount < latePlaces, let (turn, uid) = nearestDeadline(), queues[uid]![0].deadline <= now &+ lateMargin
        else { return nil }
        let entry = take(uid: uid, turn: turn)
        lateCount += 1
        return (entry, true)
    }

    /// A core started by `next` is done.
    mutating func finished(uid: UInt32, late: Bool) {
        if late {
            lateCount -= 1
            return
        }
        runningCount -= 1
        let count = running[uid, default: 1] - 1
        running[uid] = count > 0 ? count : nil
    }

    /// Queued cores whose deadline has passed, taken out of the queue: let them go.
    mutating func expired(now: UInt64) -> [Entry] {
        var gone: [Entry] = []
        for uid in turns {
            let queue = queues[uid]!
            let (past, left) = (queue.filter { $0.deadline <= now }, queue.filter { $0.deadline > now })
            gone += past
            queues[uid] = left
        }
        queuedCount -= gone.count
        turns.removeAll { queues[$0]!.isEmpty }
        queues = queues.filter { !$0.value.isEmpty }
        return gone
    }

    /// The user whose first queued core has the nearest deadline, and its turn.
    private func nearestDeadline() -> (Int, UInt32)? {
        var best: (Int, UInt32)?
        for (turn, uid) in turns.enumerated() where best == nil || queues[uid]![0].deadline < queues[best!.1]![0].deadline {
            best = (turn, uid)
        }
        return best
    }

    /// The first of `uid`'s queue; the user goes to the back of the turns (or out, if that was its last).
    private mutating func take(uid: UInt32, turn: Int) -> Entry {
        let entry = queues[uid]!.removeFirst()
        queuedCount -= 1
        turns.remove(at: turn)
        if queues[uid]!.isEmpty {
            queues[uid] = nil
        } else {
            turns.append(uid)
        }
        return entry
    }
}

/// The schedule run with threads: one per core being read, each taking the next when it is done.
final class HostQueue<Item: Sendable>: Sendable {
    private let schedule: Mutex<HostSchedule<Item>>
    private let run: @Sendable (Item, _ deadline: UInt64) -> Void
    private let letGo: @Sendable (Item) -> Void
    private let name: @Sendable (Item) -> String
    let perUserQueue: Int

    /// `run` reads one core (on a dump thread, by its deadline); `letGo` releases one whose
    /// deadline passed before it could start (or for which no thread could be made).
    init(
        places: Int = HostLevelLimits.concurrentDumps, perUser: Int = HostLevelLimits.dumpsPerUser,
        latePlaces: Int = HostLevelLimits.lateDumps, lateMargin: UInt64 = HostLevelLimits.lateMarginNanoseconds,
        perUserQueue: Int = HostLevelLimits.queuedPerUser,
        name: @escaping @Sendable (Item) -> String, run: @escaping @Sendable (Item, UInt64) -> Void,
        letGo: @escaping @Sendable (Item) -> Void
    ) {
        schedule = Mutex(HostSchedule(places: places, perUser: perUser, latePlaces: latePlaces, lateMargin: lateMargin))
        self.name = name
        self.perUserQueue = perUserQueue
        self.run = run
        self.letGo = letGo
    }

    /// Cores being read, and waiting.
    var counts: (running: Int, late: Int, queued: Int) {
        schedule.withLock { ($0.runningCount, $0.lateCount, $0.queuedCount) }
    }

    /// Queues a core, and starts what may start; false (nothing queued) when `uid` has
    /// `perUserQueue` cores waiting already: a user's flood of crashes waits in its own queue, up
    /// to a point, and past it is let go at once rather than held.
    @discardableResult
    func add(_ item: Item, uid: UInt32, deadline: UInt64) -> Bool {
        let taken = schedule.withLock { schedule -> Bool in
            guard schedule.queued(uid: uid) < perUserQueue else { return false }
            schedule.enqueue(item, uid: uid, deadline: deadline)
            return true
        }
        if taken { startWhatMay() }
        return taken
    }

    /// The serving loop's look: the expired let go, the near their deadline started.
    func look() {
        let now = monotonicNanoseconds()
        for entry in schedule.withLock({ $0.expired(now: now) }) { letGo(entry.item) }
        startWhatMay()
    }

    private func startWhatMay() {
        while let (entry, late) = schedule.withLock({ $0.next(now: monotonicNanoseconds()) }) {
            let started = startThread(name: name(entry.item)) { [self] in work(entry, late: late) }
            if !started {
                schedule.withLock { $0.finished(uid: entry.uid, late: late) }
                letGo(entry.item)
                return
            }
        }
    }

    /// A dump thread: its core, then the next one its place may take, until none is waiting.
    private func work(_ first: HostSchedule<Item>.Entry, late: Bool) {
        var current = (entry: first, late: late)
        while true {
            run(current.entry.item, current.entry.deadline)
            let next = schedule.withLock { schedule -> (entry: HostSchedule<Item>.Entry, late: Bool)? in
                schedule.finished(uid: current.entry.uid, late: current.late)
                return schedule.next(now: monotonicNanoseconds())
            }
            guard let next else { return }
            current = next
        }
    }
}

extension HostSchedule: Sendable where Item: Sendable {}
extension HostSchedule.Entry: Sendable where Item: Sendable {}
