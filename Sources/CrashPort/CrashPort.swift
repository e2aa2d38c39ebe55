// CrashPort: crashport's app-facing API for Swift programs, a thin layer over the stub's C API
// (CSupport/stub/include/crashport.h, module CCrashPort). The stub does the work, in C, with
// everything preallocated: nothing here runs in a crash.
//
// Link: nothing to do. SwiftPM compiles the stub's C sources into the program (CCrashPort), so
// a package that depends on crashport builds with plain `swift build`.

import CCrashPort
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Tells crashport about the program (annotations, breadcrumbs, attachments, handled errors) and
/// answers what crashport knows about its last run. Every call is safe from any thread, and a
/// harmless no-op when crashport is not installed.
public enum CrashPort {
    /// How to install: every field nil takes the stub's default (and its environment variables).
    public struct Options: Sendable, Equatable {
        /// The sidecar's socket (`crashport watch`); nil: `CRASHPORT_SOCKET`.
        public var socketPath: String?
        /// How long a crashing process waits for the watcher; nil: `CRASHPORT_TIMEOUT_MS`, else 10 s.
        public var timeoutMilliseconds: UInt32?
        /// Where a crash no watcher answered is written; nil: `CRASHPORT_SPOOL` or the sidecar's.
        public var spoolPath: String?
        /// The signals reported (`Signal.defaults.subtracting([.illegalInstruction])` leaves
        /// Swift's traps to the program); nil: `CRASHPORT_SIGNALS`, else `Signal.defaults`. An
        /// empty set, SIGKILL or SIGSTOP, or a number outside 1...63: `start` throws EINVAL.
        public var signals: Set<Signal>?

        public init(
            socketPath: String? = nil, timeoutMilliseconds: UInt32? = nil, spoolPath: String? = nil,
            signals: Set<Signal>? = nil
        ) {
            self.socketPath = socketPath
            self.timeoutMilliseconds = timeoutMilliseconds
            self.spoolPath = spoolPath
            self.signals = signals
        }
    }

    /// Why crashport could not do what was asked: the C call's negative errno.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var code: Int32

        public var description: String { String(cString: strerror(code)) }
    }

    /// Installs crashport (idempotent: later calls do nothing). A missing sidecar is not a
    /// failure: the stub says on stderr what a crash will do instead.
    public static func start(_ options: Options = Options()) throws(Failure) {
        var raw = crashport_options(
            fd: -1, timeout_ms: options.timeoutMilliseconds ?? 0, signals: 0, forward_first: 0, socket_path: nil,
            spool_path: nil)
        if let signals = options.signals {
            guard !signals.isEmpty, signals.allSatisfy({ (1...63).contains($0.rawValue) }) else {
                throw Failure(code: EINVAL)
            }
            raw.signals = signals.reduce(0) { $0 | 1 << UInt64($1.rawValue) }
        }
        let result = withOptionalCString(options.socketPath) { socket in
            withOptionalCString(options.spoolPath) { spool in
                raw.socket_path = socket
                raw.spool_path = spool
                return crashport_install(&raw)
            }
        }
        if result < 0 { throw Failure(code: -result) }
    }

    /// The previous run of this program (same executable and build-id), as crashport keeps it
    /// (crashport_last_run_detail). What the watcher did not know is nil.
    public struct LastRun: Sendable, Equatable {
        /// How a run ended, the first that applies.
        public enum Kind: Int32, Sendable {
            /// It ended without a crash, a kill, a hang or a handled error.
            case clean = 1
            /// It crashed (a test crash too: `testCrash`).
            case crash = 2
            /// It was killed without crashing (SIGKILL, the OOM killer).
            case termination = 3
            /// It ended, not crashing, after a hang was reported.
            case hang = 4
            /// It ended, not crashing, having reported handled errors.
            case errors = 5
        }

        /// It crashed or was killed.
        public var crashed: Bool
        public var crashedDuringLaunch: Bool
        /// Runs in a row that crashed during their launch (0 after a run that did not crash).
        public var consecutiveLaunchCrashes: Int
        /// The crash's report (`crashport show ID`), nil when it did not crash.
        public var reportID: String?
        public var kind: Kind?
        /// It ended abnormally: a crash or a kill (not a test crash).
        public var endedAbnormally = false
        /// The signal it crashed with or was killed by (`SIGSEGV`, `SIGKILL`).
        public var signal: Int32?
        public var signalName: String?
        /// Its exit status, when it exited.
        public var exitStatus: Int32?
        /// Why it ended, as its report says (the runtime's message, the fault).
        public var reason: String?
        public var title: String?
        /// Its report's directory.
        public var reportPath: String?
        /// When it started, in milliseconds since the epoch, and how long it ran.
        public var startedMilliseconds: Int64?
        public var duration: Duration?
        /// Its memory was under pressure (App Center's hasReceivedMemoryWarningInLastSession).
        public var memoryPressure = false
        /// The OOM killer ended it.
        public var oomKilled = false
        public var testCrash = false
        /// It ran the protect work of `launch(threshold:protect:launch:)`.
        public var launchProtected = false
        /// Its asynchronous protect work did not finish within its timeout, and the launch went
        /// on without it.
        public var protectTimedOut = false
        /// What became of its report's upload when this run started; nil when it made none.
        public var send: SendState?
        public var errors = 0
        public var hangs = 0
    }

    /// The last run, nil when none is on record or crashport is not installed. Known from the
    /// start: a program can choose a safe mode on its first line.
    public static var lastRun: LastRun? {
        var info = crashport_run_detail()
        info.size = MemoryLayout<crashport_run_detail>.size
        guard crashport_last_run_detail(&info) == 0 else { return nil }
        return LastRun(info)
    }

    /// How `launch(threshold:protect:launch:)` launched.
    public enum Launch: Sendable, Equatable {
        /// The launch work alone.
        case normal
        /// The protect work first, then the launch work.
        case protected
        /// The protect work did not finish within its timeout: the launch went on without it.
        case protectTimedOut
    }

    /// Launch protection (crashport_launch): when the launches before this one crashed
    /// `threshold` times in a row (the watcher's count, `lastRun?.consecutiveLaunchCrashes`),
    /// `protect` runs first (clear caches, reset the configuration), then, in the same process,
    /// `launch`. From this call on the launch lasts until `launchCompleted()`: call it at the
    /// program's milestone. A protected launch leaves a breadcrumb and its session says so. Called
    /// once per process (a second call runs nothing and returns nil).
    @discardableResult
    public static func launch(threshold: Int = 3, protect: () -> Void, launch: () -> Void) -> Launch? {
        final class Work {
            let protect: () -> Void
            let launch: () -> Void
            init(protect: @escaping () -> Void, launch: @escaping () -> Void) {
                self.protect = protect
                self.launch = launch
            }
        }
        return withoutActuallyEscaping(protect) { protect in
            withoutActuallyEscaping(launch) { launch in
                let work = Work(protect: protect, launch: launch)
                let result = withExtendedLifetime(work) {
                    crashport_launch(
                        UInt32(clamping: max(0, threshold)),
                        { Unmanaged<Work>.fromOpaque($0!).takeUnretainedValue().protect() },
                        { Unmanaged<Work>.fromOpaque($0!).takeUnretainedValue().launch() },
                        Unmanaged.passUnretained(work).toOpaque())
                }
                switch result {
                case CRASHPORT_LAUNCH_PROTECTED: return .protected
                case CRASHPORT_LAUNCH_NORMAL: return .normal
                default: return nil
                }
            }
        }
    }

    /// Launch protection for real programs (crashport_launch_with): `shouldProtect`, when given,
    /// decides instead of the threshold, from the last run (nil: none on record); `protect` is
    /// awaited for at most `protectTimeout`, and then, in the same process, `launch` runs. A
    /// protect that does not finish in time does not stop the launch: it goes on (the protect
    /// task is not cancelled), a breadcrumb and the run's session say so, and the next start's
    /// `lastRun?.protectTimedOut` is true. From this call on the launch lasts until
    /// `launchCompleted()`. Called once per process (a second call runs nothing and returns nil).
    /// No thread of the Swift concurrency pool is blocked: the wait is the stub's, on a thread of
    /// its own.
    @discardableResult
    public static func launch(
        threshold: Int = 3, shouldProtect: (@Sendable (LastRun?) -> Bool)? = nil,
        protectTimeout: Duration = .seconds(30), protect: @escaping @Sendable () async -> Void,
        launch: () async -> Void
    ) async -> Launch? {
        let work = AsyncLaunch(shouldProtect: shouldProtect, protect: protect)
        let milliseconds =
            protectTimeout.components.seconds * 1000 + protectTimeout.components.attoseconds / 1_000_000_000_000_000
        work.options.threshold = UInt32(clamping: max(0, threshold))
        work.options.protect_timeout_ms = UInt32(clamping: max(1, milliseconds))
        let result = await work.run()
        guard result >= 0 else { return nil }
        await launch()
        switch result {
        case CRASHPORT_LAUNCH_PROTECTED: return .protected
        case CRASHPORT_LAUNCH_PROTECT_TIMED_OUT: return .protectTimedOut
        default: return .normal
        }
    }

    /// crashport_launch_with, asynchronous, on a thread of its own: the protect work is a Task
    /// that says crashport_protect_finished when it returns.
    private final class AsyncLaunch: @unchecked Sendable {
        let shouldProtect: (@Sendable (LastRun?) -> Bool)?
        let protect: @Sendable () async -> Void
        var options = crashport_launch_options()
        var continuation: CheckedContinuation<Int32, Never>?

        init(shouldProtect: (@Sendable (LastRun?) -> Bool)?, protect: @escaping @Sendable () async -> Void) {
            self.shouldProtect = shouldProtect
            self.protect = protect
            options.size = MemoryLayout<crashport_launch_options>.size
            options.asynchronous = 1
            options.protect = { context in
                let protect = Unmanaged<AsyncLaunch>.fromOpaque(context!).takeUnretainedValue().protect
                Task {
                    await protect()
                    _ = crashport_protect_finished()
                }
            }
            if shouldProtect != nil {
                options.should_protect = { detail, context in
                    let work = Unmanaged<AsyncLaunch>.fromOpaque(context!).takeUnretainedValue()
                    return work.shouldProtect?(detail.flatMap { CrashPort.LastRun($0.pointee) }) == true ? 1 : 0
                }
            }
        }

        func run() async -> Int32 {
            await withCheckedContinuation { continuation in
                self.continuation = continuation
                let retained = Unmanaged.passRetained(self)
                options.context = retained.toOpaque()
                var thread = pthread_t()
                let started = pthread_create(
                    &thread, nil,
                    { context in
                        let work = Unmanaged<AsyncLaunch>.fromOpaque(context!).takeRetainedValue()
                        let result = crashport_launch_with(&work.options)
                        work.continuation?.resume(returning: result)
                        return nil
                    }, retained.toOpaque())
                if started != 0 {
                    retained.release()
                    continuation.resume(returning: -started)
                } else {
                    pthread_detach(thread)
                }
            }
        }
    }

    /// The keyed life-cycle tasks (`registerTask(_:_:)`): kept here, alive while registered.
    private final class Tasks: Sendable {
        final class Task: Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        /// Registered with the stub and kept under one lock: the task the stub holds for a key is
        /// always the one kept alive here.
        private let tasks = Mutex<[String: Task]>([:])

        func set(_ key: String, _ task: Task?) -> Int32 {
            tasks.withLock { tasks in
                let result = crashport_register_task(
                    key, task == nil ? nil : { Unmanaged<Task>.fromOpaque($0!).takeUnretainedValue().body() },
                    task.map { Unmanaged.passUnretained($0).toOpaque() })
                if result == 0 { tasks[key] = task }
                return result
            }
        }

        /// Runs `key`'s task once (the stub removes it before calling it), then forgets it here
        /// unless it was registered again meanwhile: the task the stub called stays alive while
        /// it runs.
        func run(_ key: String) -> Bool {
            let task = tasks.withLock { $0[key] }
            let ran = withExtendedLifetime(task) { crashport_run_task(key) == 0 }
            if ran { tasks.withLock { if $0[key] === task { $0[key] = nil } } }
            return ran
        }
    }
    private static let tasks = Tasks()

    /// Registers `task` under `key` (at most 16 keys of 63 bytes; again replaces it), to run by
    /// key with `runTask(_:)` when the program decides (after its protect work, after launch).
    public static func registerTask(_ key: String, _ task: @escaping @Sendable () -> Void) throws(Failure) {
        let result = tasks.set(key, Tasks.Task(task))
        if result < 0 { throw Failure(code: -result) }
    }

    /// Removes the task registered under `key`.
    public static func removeTask(_ key: String) throws(Failure) {
        let result = tasks.set(key, nil)
        if result < 0 { throw Failure(code: -result) }
    }

    /// Runs the task registered under `key` on this thread (a breadcrumb first), once: it is
    /// removed as it runs (it may register itself again); false when none is registered.
    @discardableResult
    public static func runTask(_ key: String) -> Bool {
        tasks.run(key)
    }

    /// Crashes the program on purpose, for real (crashport_test_crash: SIGSEGV on this thread),
    /// so that the whole path (capture, report, upload) can be seen working once: the report is
    /// titled "test crash: …", marked `test`, and kept out of crash-free statistics.
    public static func testCrash() -> Never {
        crashport_test_crash()
    }

    /// Ends the launch (CRASHPORT_LAUNCH_MS after start, 5 s by default; after
    /// `launch(threshold:protect:launch:)`, only this call ends it): a crash from now on is not a
    /// launch crash.
    public static func launchCompleted() {
        crashport_launch_completed()
    }

    /// Sets, replaces or (nil) removes an annotation. At most 64 keys of 63 bytes and values of
    /// 1023 bytes; longer ones are cut and marked in the report. Returns false when it could not
    /// be stored (64 other keys are set, or an empty key).
    @discardableResult
    public static func annotate(_ key: String, _ value: String?) -> Bool {
        let result = value.map { value in crashport_annotate(key, value) } ?? crashport_annotate(key, nil)
        return result >= 0
    }

    /// An annotation's value (nil when not set); setting it is `annotate(_:_:)`.
    public static subscript(annotation key: String) -> String? {
        get {
            var buffer = [CChar](repeating: 0, count: 1024)
            let length = crashport_annotation(key, &buffer, buffer.count)
            guard length >= 0 else { return nil }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        set { annotate(key, newValue) }
    }

    /// Says the program is alive, for `crashport run --hang-ms` (crashport_heartbeat): call it
    /// from the loop whose stall is a hang, at least every hang-ms. No system call.
    public static func heartbeat() {
        crashport_heartbeat()
    }

    /// Adds a breadcrumb (the last 100 are in a crash's report, oldest first).
    public static func breadcrumb(_ message: String, category: String = "default") {
        crashport_breadcrumb(category, message)
    }

    /// Names a file to copy into the report if the program crashes (16 files, 7 MiB each).
    public static func attach(file path: String) throws(Failure) {
        let result = crashport_attach_file(path)
        if result < 0 { throw Failure(code: -result) }
    }

    /// Stops attaching a file.
    public static func detach(file path: String) throws(Failure) {
        let result = crashport_detach_file(path)
        if result < 0 { throw Failure(code: -result) }
    }

    /// Attaches `text` from memory as `name` (crashport_attach_text: text/plain; charset=utf-8),
    /// replacing what the name held: written beside the report when the program crashes, reports
    /// an error or hangs, and uploaded with its content type. 16 attachments from memory, 7 MiB
    /// each (more is cut and marked), names of 63 bytes without '/'. Returns false when the text
    /// was cut.
    @discardableResult
    public static func attach(_ name: String, text: String) throws(Failure) -> Bool {
        try checked(crashport_attach_text(name, text))
    }

    /// Attaches `bytes` from memory as `name`, with their content type (crashport_attach_bytes).
    @discardableResult
    public static func attach(
        _ name: String, bytes: [UInt8], contentType: String = "application/octet-stream"
    ) throws(Failure) -> Bool {
        try checked(bytes.withUnsafeBytes { crashport_attach_bytes(name, contentType, $0.baseAddress, $0.count) })
    }

    /// Makes `name` a ring of `capacity` bytes (at most 7 MiB) the program appends to with
    /// `append(_:to:)`: the report holds its last `capacity` bytes, oldest first (the last
    /// lines of a log kept in memory).
    public static func attachRing(
        _ name: String, capacity: Int, contentType: String = "text/plain; charset=utf-8"
    ) throws(Failure) {
        _ = try checked(crashport_attach_ring(name, contentType, max(0, capacity)))
    }

    /// Appends `text` to the ring `name` (crashport_attach_append): lock-free against the crash
    /// path, no system call, safe from any thread.
    public static func append(_ text: String, to name: String) throws(Failure) {
        var text = text
        _ = try checked(text.withUTF8 { crashport_attach_append(name, $0.baseAddress, $0.count) })
    }

    /// Removes the attachment from memory `name`.
    public static func detachMemory(_ name: String) throws(Failure) {
        _ = try checked(crashport_detach_memory(name))
    }

    /// A call's answer: true when whole, false when cut (CRASHPORT_TRUNCATED); a Failure for -errno.
    private static func checked(_ result: Int32) throws(Failure) -> Bool {
        if result < 0 { throw Failure(code: -result) }
        return result != CRASHPORT_TRUNCATED
    }

    /// Reports an error the program handled: a report of kind `error` with every thread's
    /// stack, this thread marked, the error's type name and `String(describing:)`. The program
    /// is held only for the capture; returns once the watcher has it. Rate-limited (10 in a row,
    /// then one every 6 s): past it, or without crashport, nothing is sent and it says why.
    ///
    /// `properties` and `attachments` are this error's own (crashport_report_error_with): in its
    /// report only, whichever thread reports another error at the same time. 16 properties,
    /// keys of 63 bytes and values of 1023 (longer ones are cut and marked); 4 files, copied as
    /// `attach(file:)`'s are. What is past the limits is left out, and the report says how
    /// much. An empty key or path fails with EINVAL.
    @discardableResult
    public static func report(
        _ error: any Error, properties: [String: String] = [:], attachments: [String] = []
    ) -> Result<Void, Failure> {
        report(error, frames: nil, properties: properties, attachments: attachments)
    }

    /// One frame of a handled error's own stack: an address in this process's code (a return
    /// address, as `Thread.callStackReturnAddresses` gives it), or a frame an interpreter names.
    public struct Frame: Sendable, Equatable {
        public var address: UInt
        public var function: String?
        public var file: String?
        public var line: Int

        public init(address: UInt) {
            self.init(address: address, function: nil, file: nil, line: 0)
        }

        public init(function: String, file: String? = nil, line: Int = 0) {
            self.init(address: 0, function: function, file: file, line: line)
        }

        public init(address: UInt, function: String?, file: String?, line: Int) {
            self.address = address
            self.function = function
            self.file = file
            self.line = line
        }
    }

    /// Reports a handled error with a stack of its own (crashport_report_error_stack): the
    /// report's crashed thread is `stack` (innermost first), symbolicated like any frame, and
    /// this thread's own stack stays among the threads. The addresses of an error's saved
    /// stack, or `Thread.callStackReturnAddresses.map(\.uintValue)` where it was made. The first
    /// 512 frames are kept, the rest counted in the report's notes.
    @discardableResult
    public static func report(
        _ error: any Error, stack: [UInt], properties: [String: String] = [:], attachments: [String] = []
    ) -> Result<Void, Failure> {
        report(
            error, frames: stack.prefix(Self.maximumErrorFrames).map(Frame.init(address:)), frameCount: stack.count,
            properties: properties, attachments: attachments)
    }

    /// The same with an interpreter's frames (function, file, line), or addresses and names mixed.
    @discardableResult
    public static func report(
        _ error: any Error, stack: [Frame], properties: [String: String] = [:], attachments: [String] = []
    ) -> Result<Void, Failure> {
        report(
            error, frames: Array(stack.prefix(Self.maximumErrorFrames)), frameCount: stack.count, properties: properties,
            attachments: attachments)
    }

    /// The frames the stub reads of an error's own stack (it counts the rest without reading them).
    static let maximumErrorFrames = 512

    /// Every `report`: laid out for C until the call returns, and inlined into its caller (no
    /// closure), so that the report's frames go from the stub straight to the program's.
    @inline(__always)
    static func report(
        _ error: any Error, frames: [Frame]?, frameCount: Int = 0, properties: [String: String], attachments: [String]
    ) -> Result<Void, Failure> {
        let type = String(reflecting: Swift.type(of: error))
        let message = String(describing: error)
        guard !properties.isEmpty || !attachments.isEmpty || frames != nil else {
            let result = crashport_report_error(type, message)
            return result < 0 ? .failure(Failure(code: -result)) : .success(())
        }
        let raw = UnsafeMutableBufferPointer<crashport_property>.allocate(capacity: max(properties.count, 1))
        let paths = UnsafeMutableBufferPointer<UnsafePointer<CChar>?>.allocate(capacity: max(attachments.count, 1))
        let stack = UnsafeMutableBufferPointer<crashport_frame>.allocate(capacity: max(frames?.count ?? 0, 1))
        var owned: [UnsafeMutablePointer<CChar>?] = []
        func copy(_ text: String?) -> UnsafePointer<CChar>? {
            guard let text else { return nil }
            owned.append(strdup(text))
            return UnsafePointer(owned[owned.count - 1])
        }
        for (index, (key, value)) in properties.sorted(by: { $0.key < $1.key }).enumerated() {
            raw[index] = crashport_property(key: copy(key), value: copy(value))
        }
        for (index, path) in attachments.enumerated() { paths[index] = copy(path) }
        for (index, frame) in (frames ?? []).enumerated() {
            stack[index] = crashport_frame(
                address: frame.address, function: copy(frame.function), file: copy(frame.file),
                line: UInt32(clamping: frame.line))
        }
        defer {
            for pointer in owned { free(pointer) }
            raw.deallocate()
            paths.deallocate()
            stack.deallocate()
        }
        let result =
            frames == nil
            ? crashport_report_error_with(
                type, message, raw.baseAddress, properties.count, paths.baseAddress, attachments.count)
            : crashport_report_error_stack(
                type, message, raw.baseAddress, properties.count, paths.baseAddress, attachments.count, stack.baseAddress,
                frameCount)
        return result < 0 ? .failure(Failure(code: -result)) : .success(())
    }

    /// Whether crash reporting is on for this program; setting it is kept for its next runs.
    public static var isEnabled: Bool {
        get { crashport_is_enabled() != 0 }
        set { _ = crashport_set_enabled(newValue ? 1 : 0) }
    }

    /// Whether this program's reports may leave the machine (crashport consent): `ask` holds
    /// each until the user decides (`sendPending()` or `discardPending()`), App Center style.
    public enum Consent: Int32, Sendable {
        case ask = 0, always = 1, never = 2
    }

    /// Sets this program's consent, kept by the watcher for its next runs.
    public static func setConsent(_ consent: Consent) throws {
        let result = crashport_set_consent(consent.rawValue)
        if result < 0 { throw Failure(code: -result) }
    }

    /// This program's reports awaiting consent, as counted when it started (0 after a decision).
    public static var pendingReports: Int { max(0, Int(crashport_pending_reports())) }

    /// The reports awaiting consent may be sent.
    public static func sendPending() throws {
        let result = crashport_send_pending()
        if result < 0 { throw Failure(code: -result) }
    }

    /// The reports awaiting consent are never sent (they stay on the machine).
    public static func discardPending() throws {
        let result = crashport_discard_pending()
        if result < 0 { throw Failure(code: -result) }
    }

    /// A report awaiting consent, as a consent dialog shows it.
    public struct PendingReport: Sendable, Equatable {
        /// Its id (`crashport show ID`), for `send(reportID:)` and `discard(reportID:)`.
        public var id: String
        /// One line: what happened and where ("SIGSEGV: … in parse_config (config.c:42)").
        public var title: String
        /// crash, termination, error or hang; nil when unknown.
        public var kind: String?
        /// When it happened, in milliseconds since the epoch; nil when unknown.
        public var timeMilliseconds: Int64?
    }

    /// This program's reports awaiting consent, newest first, at most 32 (the watcher lists no
    /// more; `pendingReports` may count more), asked of the watcher now: it waits up to 2 s for
    /// the answer. Throws when crashport is not installed (ENOTCONN), the watcher did not answer
    /// (ETIMEDOUT) or refused (EPROTO, an older watcher).
    public static func listPendingReports() throws -> [PendingReport] {
        let capacity = Int(CRASHPORT_PENDING_MAX)
        var buffer = [crashport_pending_report](repeating: crashport_pending_report(), count: capacity)
        let count = buffer.withUnsafeMutableBufferPointer { crashport_pending_list($0.baseAddress, capacity) }
        if count < 0 { throw Failure(code: -count) }
        return buffer.prefix(Int(count)).map(PendingReport.init)
    }

    /// What became of a report's upload, the first that applies.
    public struct SendState: Sendable, Equatable {
        public enum Kind: Int32, Sendable {
            /// Consent ask: it waits for the user's decision.
            case awaitingConsent = 1
            /// It is to be sent: not tried yet, or to be tried again.
            case pending = 2
            /// A destination took it: `serverID` is the server's id.
            case sent = 3
            /// It failed for good: `reason` says why.
            case failed = 4
            /// It will not be sent: the user said no, consent never, or no destination.
            case notSent = 5
        }
        public var kind: Kind
        /// The server's id for it once sent (Sentry's event id, a collector's report id).
        public var serverID: String?
        /// When it was sent, in milliseconds since the epoch.
        public var sentMilliseconds: Int64?
        /// Why it failed, waits or is not sent.
        public var reason: String?

        /// The C fields' meaning; nil for CRASHPORT_SEND_NONE (no report, nothing known).
        init?(state: Int32, sentMilliseconds: Int64, serverID: String, reason: String) {
            guard let kind = Kind(rawValue: state) else { return nil }
            self.kind = kind
            self.serverID = serverID.isEmpty ? nil : serverID
            self.sentMilliseconds = sentMilliseconds == 0 ? nil : sentMilliseconds
            self.reason = reason.isEmpty ? nil : reason
        }
    }

    /// One of this program's recent reports and what became of its upload.
    public struct ReportState: Sendable, Equatable {
        public var report: PendingReport
        public var send: SendState?
    }

    /// This program's recent reports, of any state, newest first, at most 32, each with what
    /// became of its upload (crashport_report_states): for "your report was sent". Asked of the
    /// watcher now (up to 2 s); throws as `listPendingReports`.
    public static func reportStates() throws -> [ReportState] {
        let capacity = Int(CRASHPORT_PENDING_MAX)
        var buffer = [crashport_report_state](repeating: crashport_report_state(), count: capacity)
        let count = buffer.withUnsafeMutableBufferPointer { crashport_report_states($0.baseAddress, capacity) }
        if count < 0 { throw Failure(code: -count) }
        return buffer.prefix(Int(count)).map { entry in
            ReportState(
                report: PendingReport(entry.report),
                send: SendState(
                    state: entry.send_state, sentMilliseconds: entry.sent_ms, serverID: cText(entry.send_id),
                    reason: cText(entry.send_reason)))
        }
    }

    /// A NUL-terminated C array field as text ("" when empty).
    static func cText<T>(_ field: T) -> String {
        withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// The same, nil when empty.
    static func cTextOrNil<T>(_ field: T) -> String? {
        let text = cText(field)
        return text.isEmpty ? nil : text
    }

    /// One report awaiting consent may be sent (the watcher refuses an id that is not one of
    /// this program's reports awaiting consent).
    public static func send(reportID: String) throws {
        let result = crashport_send_report(reportID)
        if result < 0 { throw Failure(code: -result) }
    }

    /// One report awaiting consent is never sent (it stays on the machine).
    public static func discard(reportID: String) throws {
        let result = crashport_discard_report(reportID)
        if result < 0 { throw Failure(code: -result) }
    }

    private static func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
        guard let text else { return body(nil) }
        return text.withCString { body($0) }
    }
}

extension CrashPort.LastRun {
    /// The run crashport_last_run_detail described; nil when none is on record.
    init?(_ info: crashport_run_detail) {
        guard info.known != 0 else { return nil }
        func text<T>(_ field: T) -> String? { CrashPort.cTextOrNil(field) }
        var run = CrashPort.LastRun(
            crashed: info.crashed != 0, crashedDuringLaunch: info.during_launch != 0,
            consecutiveLaunchCrashes: Int(info.consecutive_launch_crashes), reportID: text(info.report_id))
        run.kind = Kind(rawValue: info.kind)
        run.endedAbnormally = info.abnormal != 0
        run.signal = info.signal != 0 ? info.signal : nil
        run.signalName = text(info.signal_name)
        run.exitStatus = info.exit_status >= 0 ? info.exit_status : nil
        run.reason = text(info.reason)
        run.title = text(info.title)
        run.reportPath = text(info.report_path)
        run.startedMilliseconds = info.started_ms > 0 ? info.started_ms : nil
        run.duration = run.kind != nil ? .milliseconds(info.duration_ms) : nil
        run.memoryPressure = info.memory_pressure != 0
        run.oomKilled = info.oom_killed != 0
        run.testCrash = info.test_crash != 0
        run.launchProtected = info.launch_protected != 0
        run.protectTimedOut = info.protect_timed_out != 0
        run.send = CrashPort.SendState(
            state: info.send_state, sentMilliseconds: info.sent_ms, serverID: CrashPort.cText(info.send_id),
            reason: CrashPort.cText(info.send_reason))
        run.errors = Int(info.errors)
        run.hangs = Int(info.hangs)
        self = run
    }
}

extension CrashPort.PendingReport {
    /// A report as crashport_pending_list and crashport_report_states give it.
    init(_ entry: crashport_pending_report) {
        id = CrashPort.cText(entry.id)
        title = CrashPort.cText(entry.title)
        kind = CrashPort.cTextOrNil(entry.kind)
        timeMilliseconds = entry.time_ms == 0 ? nil : entry.time_ms
    }
}
