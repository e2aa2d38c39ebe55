// CaptureSession: from a verified crash record to a ProcessSnapshot.
//
// `hold`: record → suspend every other thread (none when the crashing one is alone) →
// registers (the crashing thread's from the record, not from where its handler is now) →
// stacks, and the stacks signal handlers on them interrupted (InterruptedStacks.swift) →
// maps, build-ids, the module files mapped, the process's /proc files → release the process.
// `HeldCapture.finish`, after the verdict: the module files parsed, the machine's files read,
// the snapshot. Capture is best-effort: whatever cannot be read is noted in `notes` and the
// report goes on without it. Where ptrace is denied (or --no-ptrace), the crashing thread is
// still reported from the record's own stack copy.

import BoundedBytes
import ObjectFile
import Processes
import ReportModel
import Runtimes

#if canImport(Glibc)
import Glibc
#endif

public struct CaptureOptions: Sendable {
    public var usePtrace = true
    public var captureEnvironment = false
    /// Whether a report's symbolication asks debuginfod for debug files found nowhere here
    /// (`--debuginfod`): after the verdict, when the process has gone on, never during capture.
    public var debuginfod = false
    /// Stack bytes kept per thread, from the stack pointer up (CaptureWindows says why these).
    public var crashedThreadStackLimit = CaptureWindows.crashedThreadStackLimit
    public var threadStackLimit = CaptureWindows.threadStackLimit
    /// Whether each report is also a journal entry, as systemd-coredump writes one
    /// (Watcher's JournalEntry; off with --no-journal).
    public var journal = true

    public init() {}
}

/// What capture took from a live process before releasing it. `finish` does the rest, which
/// needs no live process: it parses the module files, reads the machine's own files and builds
/// the snapshot, on a report thread after the verdict has let the process go.
public struct HeldCapture: Sendable {
    let record: CrashRecord
    /// Whose credentials the module files are opened with after release.
    let access: ProcessAccess
    let threads: [ThreadSnapshot]
    let pendingModules: [PendingModule]
    let extraMemory: [MemoryRegion]
    let files: LinuxFiles
    let executable: String?
    let startTicks: UInt64?
    /// Its memory cgroup, found while it was held (its files are read after release).
    var memoryCgroup: MemoryState.Cgroup? = nil
    /// A death seen at its exit: when its stacks were taken.
    var stackTaken: StackTaken? = nil
    /// Its cgroup and the container that is, named while it was held and from the node's files.
    var container: ContainerIdentity? = nil
    /// The process's cp_app_area as read while it was held, when it was in use, until
    /// `decodeAppArea` decodes it, and the runtimes' abort messages it led to.
    var appArea: [UInt8]?
    let messages: (abort: String?, swift: String?)
    /// The program's attachments from memory, read while it was held.
    var memoryAttachments: [MemoryAttachment] = []
    /// An ERROR record's own stack block (cp_error_stack), as read while it was held.
    var errorStack: [UInt8]? = nil
    /// The app area decoded (by `decodeAppArea`), with the abort messages: nil before, when
    /// none was read, or when it does not decode (a note says why).
    public internal(set) var app: AppArea? = nil
    let stackStrings: [StackString]
    /// The Python frames of a CPython process (PythonCapture), read while it was held.
    var python: PythonStacks? = nil
    /// The runtimes' files found while it was held (RuntimeFiles), parsed by `finish`.
    var runtimeFiles: RuntimeFiles? = nil
    var notes: [String]
    /// Nanoseconds from the start of capture until the process was released.
    public let suspendedNanoseconds: UInt64
    let heldNanoseconds: UInt64

    /// Decodes the app area and lets its bytes go: 44 KB of mostly unused slots each, and a
    /// storm's captures wait for their second step (4.4 MB of a 100-crash storm's peak). The
    /// serving thread calls it after the verdict, not while the process waits for it; `finish`
    /// if no one did.
    public mutating func decodeAppArea() {
        guard let area = appArea else { return }
        appArea = nil
        do {
            app = try AppArea(bytes: area)
            app?.abortMessage = messages.abort
            app?.swiftMessage = messages.swift
            app?.memoryAttachments = memoryAttachments
            memoryAttachments = []
            app?.handledErrorStack = errorStack.flatMap(HandledErrorStack.init(bytes:))
            errorStack = nil
        } catch {
            notes.append("the program's annotations, breadcrumbs and attachments could not be read: \(error)")
        }
    }

    public func finish(cache: ELFCache) -> Capture {
        var decoded = self
        decoded.decodeAppArea()
        let app = decoded.app
        var notes = decoded.notes
        let modules = ModuleMap.open(pendingModules, access: access, cache: cache)
        for module in modules {
            if let problem = module.problem { notes.append("module \(module.path): \(problem)") }
        }
        var files = files
        files.cpuInfo = SystemProbe.cpuInfo
        files.lsbRelease = SystemProbe.lsbRelease
        let arguments = ProcFiles.arguments(cmdline: files.cmdLine ?? [])
        if let app, app.slotsInFlux > 0 {
            notes.append(
                "\(app.slotsInFlux) annotation, breadcrumb or attachment slot(s) were being written when the process stopped, and were left out"
            )
        }
        var snapshot = ProcessSnapshot(
            pid: record.pid, crashedThreadID: record.tid,
            exception: ExceptionInfo(
                signal: record.signal, code: record.code, faultAddress: record.faultAddress,
                senderPID: record.code <= 0 ? record.senderPID : nil),
            threads: threads, modules: modules, extraMemory: extraMemory, system: SystemProbe.current(),
            linuxFiles: files, captureTime: UInt32(clamping: Int(time(nil))),
            processStartTime: startTicks.flatMap(CaptureSession.unixTime(ofStartTicks:)))
        snapshot.annotations = app?.annotations ?? []
        var capture = Capture(
            snapshot: snapshot, executable: executable, arguments: arguments, notes: notes,
            record: record, suspendedNanoseconds: suspendedNanoseconds, heldNanoseconds: heldNanoseconds)
        capture.app = app
        capture.stackStrings = stackStrings
        capture.stackTaken = stackTaken
        capture.container = container
        if let runtimeFiles { capture.runtime = runtimeFiles.state(threads: threads) }
        capture.runtime.python = python
        if memoryCgroup != nil || files.procStatus != nil {
            capture.memory = MemoryState.record(
                cgroup: memoryCgroup, status: files.procStatus.map { String(decoding: $0, as: UTF8.self) })
        }
        return capture
    }
}

public enum CaptureSession {
    /// Parses the watcher's own vDSO, which the captures of processes with the same one share
    /// (ModuleMap.vdso): at start, so that no capture pays for it while its process waits.
    public static func prepareSharedVDSO() { _ = ModuleMap.ownVDSO }

    /// Captures and releases the process. `threads` is /proc/PID/task and `status`
    /// /proc/PID/status as the caller read them when it checked the record (read here when
    /// nil). A process whose only thread is the crashing one, which is waiting in the stub for
    /// the verdict, is read without ptrace: nothing in it can run. `earlier`: for a death seen at
    /// its exit, a snapshot taken under memory pressure, used for the threads whose stacks are
    /// gone (an OOM kill's, once the reaper has run).
    public static func hold(
        record: CrashRecord, access given: ProcessAccess? = nil, threads listed: [ThreadID]? = nil,
        status: [UInt8]? = nil, options: CaptureOptions, cache: ELFCache, holder: ThreadHold? = nil,
        earlier: PressureSnapshot? = nil
    ) -> HeldCapture {
        let started = monotonicNanoseconds()
        let pid = record.pid
        let access = given ?? .own(pid)
        var notes: [String] = []
        // A record the watcher made itself, or one a non-dumpable process sent without its
        // memory, names a thread whose registers only ptrace gives.
        let alone =
            (listed ?? ProcFiles.threads(of: pid)) == [record.tid] && record.observation == nil && !record.notDumpable
            && holder == nil
        var session = options.usePtrace && !alone ? suspend(pid, using: holder ?? PtraceSession(pid: pid), notes: &notes) : nil
        if !options.usePtrace {
            notes.append(
                "ptrace not used (--no-ptrace); other threads were not captured; the crashing thread comes from the record's stack copy"
            )
        }
        // Every thread is stopped (or the only one waits in the stub): the kernel now says, as
        // the client's user, whether this process's memory is theirs to read. Nothing else is
        // read before it has.
        let memory: ProcessMemory
        switch memoryVerdict(record: record, access: access, session: session) {
        case .read(let opened):
            memory = opened
        case .gone:
            memory = ProcessMemory(pid: pid, boundDescriptor: -1)
        case .recordOnly(let note):
            session?.detachAll(timeoutMilliseconds: 1000)
            session = nil
            notes.append(note)
            memory = ProcessMemory(pid: pid, boundDescriptor: -1)
        case .refused(let why):
            session?.detachAll(timeoutMilliseconds: 1000)
            return withoutMemory(record, access: access, status: status, started: started, session: session, why: why)
        }
        return readHeld(
            record: record, access: access, session: session, memory: memory, alone: alone,
            given: (status: status, earlier: earlier), options: options, cache: cache, started: started, notes: notes)
    }

    /// Everything a report needs from a process that is held (stopped by `session`, or alone in
    /// the stub's handler), read and then released: the /proc files, every thread's registers and
    /// stack, the modules, the code around the crash, the app area, the strings on the stack.
    /// `given`: the status read when the record was checked, and a snapshot taken under memory
    /// pressure (hold's).
    static func readHeld(
        record: CrashRecord, access: ProcessAccess, session: ThreadHold?, memory: ProcessMemory, alone: Bool,
        given: (status: [UInt8]?, earlier: PressureSnapshot?), options: CaptureOptions, cache: ELFCache,
        started: UInt64, notes initial: [String]
    ) -> HeldCapture {
        var notes = initial
        // The /proc files a report keeps, read now with one change of credentials.
        let proc = access.procFiles(
            ["maps", "cmdline", "auxv", "cgroup"] + (given.status == nil ? ["status"] : [])
                + (options.captureEnvironment ? ["environ"] : []))
        let mapsBytes = proc.files["maps"]
        let mappings = mapsBytes.map { MemoryMapping.parse($0) } ?? []
        if mapsBytes == nil { notes.append("/proc/\(record.pid)/maps unreadable: modules unknown") }
        // /proc/PID/stat: fields[0] is field 3, the state; fields[19] field 22, the start time.
        let stat = ProcFiles.statFields(of: record.pid)
        let live =
            session != nil
            || (options.usePtrace && alone && isReadable(memory, stat: stat, mappings: mappings, notes: &notes))
        let stacks = StackReader(mappings: mappings, memory: memory)
        var threads = threadSnapshots(
            record: record, access: access, session: session, live: live, stacks: stacks, options: options, notes: &notes)
        var stackTaken: StackTaken?
        var commandLine: [UInt8]?
        if case .exit? = record.observation, session != nil {
            stackTaken = takenAtDeath(threads: &threads, earlier: given.earlier, commandLine: &commandLine, notes: &notes)
        }
        let pendingModules = ModuleMap.pending(
            access: access, mappings: mappings, executable: proc.executable, memory: live ? memory : nil, cache: cache)
        var extra =
            live
            ? instructionBytes(at: threads.first?.registers.rip ?? record.registers.rip, threads: threads, stacks: stacks) : []
        if live {
            extra += interruptedStacks(
                threads: threads, crashedThreadID: record.tid, extra: extra, stacks: stacks, options: options)
        }
        var files = linuxFiles(proc.files, status: given.status)
        if files.cmdLine?.isEmpty != false, let commandLine { files.cmdLine = commandLine }
        let appArea =
            live ? readAppArea(at: record.appArea, memory: memory, notes: &notes, errorDetails: record.isError) : nil
        let messages = appArea.map { AppArea.readMessages(area: $0) { memory.bytes(at: $0, count: $1) } } ?? (nil, nil)
        let memoryAttachments =
            appArea.map { AppArea.readMemoryAttachments(area: $0) { memory.bytes(at: $0, count: $1) } } ?? []
        let errorStack = record.isError ? appArea.flatMap { readErrorStack(area: $0, memory: memory, notes: &notes) } : nil
        let stackStrings =
            live ? StackStrings.read(record: record, threads: threads, mappings: mappings, memory: memory) : []
        let python = live ? PythonCapture.read(memory: memory, pending: pendingModules, access: access, cache: cache) : nil
        // Its runtimes' files, while its working directory and root are still there to name them.
        let runtimeFiles =
            live
            ? RuntimeFiles.read(
                access: access, mappings: mappings, arguments: ProcFiles.arguments(cmdline: proc.files["cmdline"] ?? []),
                executable: proc.executable,
                started: stat.flatMap { $0.count > 19 ? UInt64($0[19]) : nil }.flatMap(unixTime(ofStartTicks:)))
            : nil

        // Its container: the cgroup read above, and the container's own hostname while it is
        // there to read (the node's files are read after the release).
        var container = proc.files["cgroup"].flatMap { ContainerIdentity.parse(procCgroup: String(decoding: $0, as: UTF8.self)) }
        let hostname = container?.isContainer == true ? ContainerNames.ownHostname(access) : nil

        // Everything needed from the live process is in hand: release it.
        session?.detachAll(timeoutMilliseconds: 1000)
        if container != nil { ContainerNames().name(&container!, hostname: hostname, notes: &notes) }
        // The record's copy of the crashing thread's stack is in `threads` (or was replaced there
        // by the longer live one): the record keeps no second copy while it waits for its report.
        var kept = record
        kept.stack = MemoryRegion(start: record.stack.start, bytes: [])
        var held = HeldCapture(
            record: kept, access: access, threads: threads, pendingModules: pendingModules, extraMemory: extra,
            files: files, executable: proc.executable, startTicks: stat.flatMap { $0.count > 19 ? UInt64($0[19]) : nil },
            appArea: appArea, messages: messages, stackStrings: stackStrings, notes: notes,
            suspendedNanoseconds: monotonicNanoseconds() - started,
            heldNanoseconds: session.map { $0.releasedNanoseconds &- $0.firstSeizeNanoseconds } ?? 0)
        // Its memory cgroup, from the text read above (the mounts are looked at after the release).
        held.memoryCgroup =
            live
            ? proc.files["cgroup"].flatMap { OOMCounters.counterFile(cgroups: String(decoding: $0, as: UTF8.self)) }
                .flatMap(MemoryState.cgroup(ofCounterFile:)) : nil
        held.stackTaken = stackTaken
        held.container = container
        held.errorStack = errorStack
        held.python = python
        held.runtimeFiles = runtimeFiles
        held.memoryAttachments = memoryAttachments
        return held
    }

    /// Whether the memory of a process alone in the stub's handler (not stopped by ptrace) is
    /// ours to read: process_vm_readv makes the same permission check as ptrace. Says why not.
    static func isReadable(
        _ memory: ProcessMemory, stat: [Substring]?, mappings: [MemoryMapping], notes: inout [String]
    ) -> Bool {
        if hasExited(stat: stat) {
            notes.append(alreadyExited)
            return false
        }
        guard let first = mappings.first(where: { $0.readable }) else { return false }
        guard memory.bytes(at: first.start, count: 1).isEmpty else { return true }
        notes.append(
            "the process's memory could not be read (\(String(cString: strerror(errno)))); the crashing thread comes from the record's stack copy"
        )
        return false
    }

    /// The /proc files a minidump keeps (its Linux streams), from what was read.
    static func linuxFiles(_ proc: [String: [UInt8]], status: [UInt8]?) -> LinuxFiles {
        var files = LinuxFiles()
        files.procStatus = status ?? proc["status"]
        files.cmdLine = proc["cmdline"]
        files.auxv = proc["auxv"]
        files.maps = proc["maps"]
        files.environ = proc["environ"]
        return files
    }

    /// A death seen at its exit: whether its stacks were there to read. When the lead thread's
    /// stack is gone (the OOM reaper freed it) and a pressure snapshot was taken, every thread
    /// whose stack is gone gets the snapshot's registers and stack (together: a stack belongs
    /// with the registers of its moment), and the arguments too when they are gone.
    static func takenAtDeath(
        threads: inout [ThreadSnapshot], earlier: PressureSnapshot?, commandLine: inout [UInt8]?, notes: inout [String]
    ) -> StackTaken {
        guard let lead = threads.first, PressureSnapshot.isGone(lead.stack) else { return StackTaken(when: StackTaken.atDeath) }
        let reaped =
            "its stack was gone when read at its death (the kernel's OOM reaper frees an OOM-killed process's memory; a watcher in the same memory cgroup cannot read it before then)"
        guard let earlier, earlier.threads.contains(where: { $0.tid == lead.tid }) else {
            notes.append(
                reaped
                    + ", and no snapshot was taken under memory pressure before it: its frames are what its registers alone give")
            return StackTaken(when: StackTaken.lost)
        }
        // To the last moment the watcher saw it alive: the death came within a sampling
        // interval after (the watcher's own wait on the cgroup's reclaim comes after the kill).
        let milliseconds = (earlier.aliveNanoseconds &- earlier.takenNanoseconds) / 1_000_000
        var replaced = 0
        for index in threads.indices where PressureSnapshot.isGone(threads[index].stack) {
            guard let then = earlier.threads.first(where: { $0.tid == threads[index].tid }) else { continue }
            threads[index].registers = then.registers
            threads[index].stack = then.stack
            replaced += 1
        }
        commandLine = earlier.commandLine
        notes.append(
            reaped
                + ": the registers and stacks of \(replaced) thread(s) are from a snapshot taken \(milliseconds) ms before it was last seen alive, when its memory cgroup's usage reached \(earlier.usage) bytes (\(earlier.cause.map { "at \($0); " } ?? "")--trace-exit in a memory cgroup with a limit)"
        )
        return StackTaken(when: StackTaken.beforeDeath, millisecondsBefore: milliseconds, usage: earlier.usage)
    }

    /// What capture may read of a process, as the kernel answers for its user.
    enum MemoryVerdict {
        /// Its memory, opened as the user.
        case read(ProcessMemory)
        /// Gone: the record alone (it said it was dumpable when it sent it).
        case gone
        /// Its user may read it but not attach to it (Yama's ptrace_scope 2 or 3): as where ptrace
        /// is denied, only the record, which the process sent about itself; the note says so.
        case recordOnly(note: String)
        /// Nothing of it may be read for its user: why.
        case refused(why: String)
    }

    /// Opens the process's memory as `access`'s user and says what capture may do with it. Called
    /// once every thread is held (`session`), so the process the kernel judges is the one read.
    static func memoryVerdict(record: CrashRecord, access: ProcessAccess, session: ThreadHold?) -> MemoryVerdict {
        let notDumpable = "the process was not dumpable when it crashed (its stub sent none of its memory)"
        switch access.openMemory() {
        case .success(let memory):
            // Not dumpable at its crash, and read for another user: what the process asked for
            // holds, whatever the kernel says now. (Read for its own user, the sidecar's owner,
            // it is captured live: the crashing thread's registers from ptrace.)
            if record.notDumpable && record.observation == nil && access.credentials != nil {
                return .refused(why: notDumpable)
            }
            // Every thread of it held (none failed, none appeared unseized): see ProcessMemory.frozen.
            memory.frozen =
                session.map { held in
                    held.failures.isEmpty && !held.stopped.isEmpty
                        && Set(ProcFiles.threads(of: record.pid)).isSubset(of: Set(held.stopped))
                } ?? false
            return .read(memory)
        case .failure(let error) where error.errno == ENOENT || error.errno == ESRCH:
            return record.notDumpable ? .refused(why: notDumpable) : .gone
        case .failure(let error) where access.read("environ", limit: 0) != nil:
            return .recordOnly(
                note:
                    "its user may read it but not attach to it (\(error); Yama's ptrace_scope): other threads and the live stack were not captured; the crashing thread comes from the record's stack copy"
            )
        case .failure(let error):
            return .refused(
                why:
                    "its memory is not its user's to read (\(error): the kernel refused it to uid \(access.credentials?.uid ?? getuid()), as it would refuse that user; a setuid, setgid or file-capability program, or one that made itself not dumpable)"
            )
        }
    }

    /// A process whose memory its user may not read (or that said so itself): reported with
    /// what that user may see of it (the signal and its code, the thread's id and name, the
    /// process's status and command line, which /proc shows everyone), never with anything
    /// from its memory: no registers, no stack, no fault address, no modules, no annotations.
    static func withoutMemory(
        _ record: CrashRecord, access: ProcessAccess, status: [UInt8]?, started: UInt64, session: ThreadHold?, why: String
    ) -> HeldCapture {
        var bare = record
        bare.registers = X86_64Registers(gpr: [UInt64](repeating: 0, count: X86_64Registers.gprCount))
        bare.stack = MemoryRegion(start: 0, bytes: [])
        bare.faultAddress = 0
        bare.chain = []
        bare.reraise = nil
        bare.appArea = 0
        var files = LinuxFiles()
        let proc = access.procFiles(["cmdline"] + (status == nil ? ["status"] : []))
        files.procStatus = status ?? proc.files["status"]
        files.cmdLine = proc.files["cmdline"]
        return HeldCapture(
            record: bare, access: access,
            threads: [ThreadSnapshot(tid: record.tid, name: record.threadName, registers: bare.registers, stack: nil)],
            pendingModules: [], extraMemory: [], files: files, executable: nil, startTicks: nil, appArea: nil,
            messages: (nil, nil), stackStrings: [],
            notes: ["reported without its memory: \(why)"],
            suspendedNanoseconds: monotonicNanoseconds() - started,
            heldNanoseconds: session.map { $0.releasedNanoseconds &- $0.firstSeizeNanoseconds } ?? 0)
    }

    /// A crash the stub spooled because no watcher answered: its process is gone (or, its pid
    /// reused, is another process that must not be read), so the snapshot holds only what the
    /// stub wrote: the crashing thread's registers and stack copy, and the modules of the
    /// /proc/self/maps it read at the crash, opened from disk now.
    public static func spooled(
        record: CrashRecord, executable: String?, maps: String, mapsTruncated: Bool, commandLine: [UInt8] = [],
        commandLineTruncated: Bool = false, cache: ELFCache
    ) -> Capture {
        var notes = [
            "reported from the spool: no watcher answered when the process crashed; only the crashing thread, unwound from the stub's \(record.stack.bytes.count)-byte copy of its stack; modules named by the /proc/self/maps the stub copied, read from disk at ingestion"
        ]
        if mapsTruncated { notes.append("the stub's copy of /proc/self/maps was cut at its limit: some modules are unknown") }
        if commandLineTruncated {
            notes.append("the stub's copy of /proc/self/cmdline was cut at its limit: the last arguments are missing")
        }
        let mappings = MemoryMapping.parse(maps)
        let crashed = ThreadSnapshot(tid: record.tid, name: record.threadName, registers: record.registers, stack: record.stack)
        let pending = ModuleMap.pending(access: nil, mappings: mappings, executable: executable, memory: nil, cache: cache)
        let modules = ModuleMap.open(pending, access: nil, cache: cache)
        for module in modules {
            if let problem = module.problem { notes.append("module \(module.path): \(problem)") }
        }
        var files = LinuxFiles()
        files.maps = Array(maps.utf8)
        if !commandLine.isEmpty { files.cmdLine = commandLine }
        let snapshot = ProcessSnapshot(
            pid: record.pid, crashedThreadID: record.tid,
            exception: ExceptionInfo(
                signal: record.signal, code: record.code, faultAddress: record.faultAddress,
                senderPID: record.code <= 0 ? record.senderPID : nil),
            threads: [crashed], modules: modules, extraMemory: [], system: SystemProbe.current(),
            linuxFiles: files, captureTime: UInt32(clamping: record.timeNanoseconds / 1_000_000_000), processStartTime: nil)
        return Capture(
            snapshot: snapshot, executable: executable,
            arguments: commandLine.isEmpty ? [] : ProcFiles.arguments(cmdline: commandLine), notes: notes,
            record: record, suspendedNanoseconds: 0, heldNanoseconds: 0)
    }

    /// The process's cp_app_area: its header first, then only the slots its high-water marks
    /// say were ever used and its tail (a program that never annotates costs 2.6 KB read, not
    /// 120 KB), and with `errorDetails` (an ERROR record) the handled error's own block, laid
    /// into a zeroed area of the full size.
    static func readAppArea(
        at address: UInt64, memory: ProcessMemory, notes: inout [String], errorDetails: Bool = false
    ) -> [UInt8]? {
        guard let header = readAppAreaHeader(at: address, memory: memory), AppArea.inUse(header: header) else { return nil }
        var bytes = [UInt8](repeating: 0, count: AppArea.size)
        for range in AppArea.rangesToRead(header: header, errorDetails: errorDetails) {
            let part = memory.bytes(at: address &+ UInt64(range.lowerBound), count: range.count)
            guard part.count == range.count else {
                notes.append(
                    "the program's annotation area at \(HexAddress(address)) could not be read whole (\(part.count) of \(range.count) bytes at offset \(range.lowerBound))"
                )
                return nil
            }
            bytes.replaceSubrange(range, with: part)
        }
        return bytes
    }

    /// The handled error's own stack block the area names (cp_error_stack): its header, then
    /// only the frames its count says are used (at most 512, 200 KB); nil when none is named or
    /// it cannot be read (a note says so).
    static func readErrorStack(area: [UInt8], memory: ProcessMemory, notes: inout [String]) -> [UInt8]? {
        let address = AppArea.errorStackAddress(area: area)
        guard address != 0 else { return nil }
        let header = memory.bytes(at: address, count: HandledErrorStack.headerSize)
        let size = HandledErrorStack.size(header: header)
        let frames = size > header.count ? memory.bytes(at: address &+ UInt64(header.count), count: size - header.count) : []
        guard size > 0, header.count + frames.count == size else {
            notes.append("the handled error's own stack at \(HexAddress(address)) could not be read whole")
            return nil
        }
        return header + frames
    }

    /// The app area's header (AppArea.headerSize bytes: its magic, high-water marks and the
    /// heartbeat), nil when `address` is 0 or it cannot be read whole.
    public static func readAppAreaHeader(at address: UInt64, memory: ProcessMemory) -> [UInt8]? {
        guard address != 0 else { return nil }
        let header = memory.bytes(at: address, count: AppArea.headerSize)
        return header.count == AppArea.headerSize ? header : nil
    }

    static let alreadyExited =
        "the process had already exited when the watcher got to it (the stub stops waiting after its timeout, CRASHPORT_TIMEOUT_MS); the crashing thread comes from the record's stack copy"

    /// Stops every thread; nil (with a note saying why) when ptrace is denied or the process is
    /// already gone.
    static func suspend(_ pid: ProcessID, using session: ThreadHold, notes: inout [String]) -> ThreadHold? {
        do {
            _ = try session.suspendAll(timeoutMilliseconds: 2000)
            for failure in session.failures { notes.append("thread \(failure.tid) not suspended: \(failure.reason)") }
            return session
        } catch {
            if Self.hasExited(pid: pid) {
                notes.append(alreadyExited)
            } else {
                notes.append(
                    "ptrace denied (\(error)); other threads, their registers and the live stack were not captured; the crashing thread comes from the record's stack copy"
                )
            }
            return nil
        }
    }

    /// Reads a thread's stack from its stack pointer (less the red zone) towards the end of its
    /// mapping, as CaptureWindows says (a capture from a core keeps the same range).
    struct StackReader {
        /// /proc/PID/maps, in its (address) order.
        let mappings: [MemoryMapping]
        let memory: ProcessMemory

        /// At most `limit` bytes, and none from `below` on.
        func stack(from sp: UInt64, limit: Int, below: UInt64? = nil) -> MemoryRegion? {
            guard let range = CaptureWindows.stack(from: sp, limit: limit, below: below, in: mappings) else { return nil }
            // The range is at most `limit` bytes: an Int.
            let bytes = memory.bytes(at: range.lowerBound, count: Int(range.upperBound - range.lowerBound))
            return bytes.isEmpty ? nil : MemoryRegion(start: range.lowerBound, bytes: bytes)
        }
    }

    /// The crashing thread first, with the registers of the fault from the record (not of its
    /// handler now) and the live stack when we hold the process (it may extend past the record's
    /// copy); then every other stopped thread.
    static func threadSnapshots(
        record: CrashRecord, access: ProcessAccess, session: ThreadHold?, live: Bool, stacks: StackReader,
        options: CaptureOptions, notes: inout [String]
    ) -> [ThreadSnapshot] {
        var crashed = ThreadSnapshot(tid: record.tid, name: record.threadName, registers: record.registers, stack: record.stack)
        // A death or hang the watcher observed, or a record that carries no registers (a
        // non-dumpable process's): the thread it leads with is read like the others (its stack
        // then runs through crashport's handler and the kernel's signal frame to the fault).
        if record.observation != nil || record.notDumpable, let session, session.stopped.contains(record.tid),
            let registers = try? session.registers(of: record.tid)
        {
            crashed.registers = X86_64Registers(gpr: registers.gpr, fxsave: registers.fxsave)
        }
        if live, let stack = stacks.stack(from: crashed.registers.rsp, limit: options.crashedThreadStackLimit),
            stack.bytes.count > record.stack.bytes.count
        {
            crashed.stack = stack
        }
        // Every thread's name, with one change of credentials.
        let others = session?.stopped.filter { $0 != record.tid } ?? []
        let names = access.threadNames(crashed.name.isEmpty ? [record.tid] + others : others)
        if crashed.name.isEmpty { crashed.name = names[record.tid] ?? "" }
        var threads = [crashed]
        guard let session else { return threads }
        for tid in others {
            do {
                let registers = try session.registers(of: tid)
                let set = X86_64Registers(gpr: registers.gpr, fxsave: registers.fxsave)
                threads.append(
                    ThreadSnapshot(
                        tid: tid, name: names[tid] ?? "", registers: set,
                        stack: stacks.stack(from: set.rsp, limit: options.threadStackLimit)))
            } catch {
                notes.append("thread \(tid): \(error)")
            }
        }
        return threads
    }

    /// The stacks that signal handlers on the captured stacks interrupted (a handler on an
    /// alternate stack), each read like a thread's stack from the saved rsp, the crashing
    /// thread's with its larger limit.
    static func interruptedStacks(
        threads: [ThreadSnapshot], crashedThreadID: ThreadID, extra: [MemoryRegion], stacks: StackReader,
        options: CaptureOptions
    ) -> [MemoryRegion] {
        var search = InterruptedStacks(stacks: stacks, threads: threads, extra: extra)
        for thread in threads {
            let limit = thread.tid == crashedThreadID ? options.crashedThreadStackLimit : options.threadStackLimit
            search.follow(thread, limit: limit)
        }
        return search.found
    }

    /// The bytes around the faulting instruction (CaptureWindows.window), so readers can show
    /// the instruction (unless it is already inside a captured stack).
    static func instructionBytes(at pc: UInt64, threads: [ThreadSnapshot], stacks: StackReader) -> [MemoryRegion] {
        guard !threads.contains(where: { $0.stack?.contains(pc) ?? false }),
            let range = CaptureWindows.window(around: pc, in: stacks.mappings)
        else { return [] }
        let bytes = stacks.memory.bytes(at: range.lowerBound, count: Int(range.upperBound - range.lowerBound))
        return bytes.isEmpty ? [] : [MemoryRegion(start: range.lowerBound, bytes: bytes)]
    }

    /// Whether the process is gone or a zombie (/proc/PID/stat state Z or X).
    static func hasExited(pid: ProcessID) -> Bool { hasExited(stat: ProcFiles.statFields(of: pid)) }

    /// Whether /proc/PID/stat fields (nil: the process is gone) say it has exited.
    static func hasExited(stat fields: [Substring]?) -> Bool {
        guard let state = fields?.first else { return true }
        return state == "Z" || state == "X"
    }

    /// Unix seconds at which a process started `ticks` clock ticks after boot (/proc/stat
    /// btime, read once).
    /// When `pid` started, in Unix seconds (/proc/PID/stat's start time, field 22); nil when it
    /// is gone.
    public static func startTime(of pid: ProcessID) -> UInt32? {
        ProcFiles.statFields(of: pid).flatMap { $0.count > 19 ? UInt64($0[19]) : nil }.flatMap(unixTime(ofStartTicks:))
    }

    public static func unixTime(ofStartTicks ticks: UInt64) -> UInt32? {
        guard let boot = bootTime else { return nil }
        let hertz = UInt64(max(sysconf(Int32(_SC_CLK_TCK)), 1))
        return UInt32(clamping: boot + ticks / hertz)
    }

    static let bootTime: UInt64? = {
        guard let procStat = ProcFiles.readText("/proc/stat"),
            let line = procStat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") })
        else { return nil }
        return UInt64(line.dropFirst(6))
    }()
}
