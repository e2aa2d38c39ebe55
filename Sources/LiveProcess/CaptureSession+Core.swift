// CaptureSession.core: a crash the kernel dumped (core_pattern's pipe or socket), from its core
// stream (CoreDump) to the Capture a live crash gives, so the same report pipeline (ReportBuilder)
// unwinds and symbolicates it with the same code.
//
// The core gives the registers, the signal, the stacks and the windows around registers
// (CoreDumpReader keeps them as a live capture would, CaptureWindows). /proc gives the rest while
// the kernel still holds the dying process (until the pipe helper exits or the socket closes):
// its maps with devices and inodes (the module files opened as its user, ModuleMap), its status,
// command line and start time, its threads' names. Where /proc is gone (a core read after the
// process ended, or from a file), the core's NT_FILE and loads stand in for the maps, and its
// NT_PRPSINFO for the command line. Build-ids come from the first page of each mapped file, which
// the kernel dumps (coredump_filter's ELF headers bit, on by default), and the vDSO from its
// dumped image: as a live capture reads them from memory.

import BoundedBytes
import CoreDump
import ObjectFile
import Processes
import ReportModel
import Runtimes

#if canImport(Glibc)
import Glibc
#endif

extension CaptureSession {
    /// The capture of a crash from its core. `access`: the dying process as its user may read
    /// it, while the kernel holds it (nil: its /proc is not asked; module files are opened by
    /// the paths the core names, with the caller's credentials). Thread ids and the snapshot's
    /// pid are the process's own, as the core names them.
    /// Nil for a dump with no thread (a stream that ended before any NT_PRSTATUS: the reader
    /// throws for one, but a caller that reports what was read may hold an empty dump).
    public static func core(
        _ dump: CoreDump, access: ProcessAccess?, cache: ELFCache, timeNanoseconds: UInt64 = realtimeNanoseconds()
    ) -> Capture? {
        guard !dump.threads.isEmpty else { return nil }
        var notes = [
            "reported from the kernel's core stream (\(dump.bytesRead) bytes read, \(dump.threadCount) threads): no stub ran in the process"
        ]
        notes += dump.notes
        let pid = dump.processInfo?.pid ?? access?.pid ?? ProcessID(dump.threads.first?.tid.rawValue ?? 0)

        // /proc while the kernel holds the process: one change of credentials.
        let proc = access?.procFiles(["maps", "cmdline", "status", "cgroup"]) ?? (files: [:], executable: nil)
        var mappings = proc.files["maps"].map { MemoryMapping.parse($0) } ?? []
        var maps = proc.files["maps"]
        if mappings.isEmpty {
            if access != nil {
                notes.append("/proc/\(access!.pid)/maps unreadable (the process is gone): the core's mappings stand in")
            }
            mappings = dump.mappings
            maps = Array(dump.mapsText.utf8)
        }
        let executable = proc.executable ?? executablePath(dump, mappings: mappings)

        // Build-ids and the vDSO from the core's copy of their first bytes.
        let memory = RegionMemory(regions: dump.imageMemory + dump.threads.compactMap(\.stack) + dump.extraMemory)
        let pending = ModuleMap.pending(access: access, mappings: mappings, executable: executable, memory: memory, cache: cache)
        let modules = ModuleMap.open(pending, access: access, cache: cache)
        for module in modules {
            if let problem = module.problem { notes.append("module \(module.path): \(problem)") }
        }

        // While the kernel holds the process, its memory as its user may read it.
        let python = PythonCapture.read(access: access, modules: modules, notes: &notes)
        let threads = threadSnapshots(dump, access: access, pid: pid)
        // dump.threads is not empty (above).
        let crashed = threads[0]
        let signal = dump.signalInfo ?? CoreDump.SignalInfo(signal: dump.threads[0].signal, code: 0)
        let record = CrashRecord(
            kernelDumpOf: pid, tid: crashed.tid, signal: signal.signal, code: signal.code, faultAddress: signal.faultAddress,
            senderPID: signal.senderPID, senderUID: signal.senderUID, threadName: crashed.name, registers: crashed.registers,
            timeNanoseconds: timeNanoseconds)

        var files = LinuxFiles()
        (files.maps, files.procStatus, files.cmdLine, files.auxv) = (maps, proc.files["status"], proc.files["cmdline"], dump.auxv)
        (files.cpuInfo, files.lsbRelease) = (SystemProbe.cpuInfo, SystemProbe.lsbRelease)
        var arguments = ProcFiles.arguments(cmdline: files.cmdLine ?? [])
        if arguments.isEmpty, let psargs = dump.processInfo?.arguments, !psargs.isEmpty {
            arguments = psargs.split(separator: " ").map(String.init)
            notes.append("the arguments are the core's NT_PRPSINFO (split at spaces, cut at 79 bytes by the kernel)")
        }

        let snapshot = ProcessSnapshot(
            pid: pid, crashedThreadID: crashed.tid,
            exception: ExceptionInfo(
                signal: signal.signal, code: signal.code, faultAddress: signal.faultAddress, senderPID: signal.senderPID),
            threads: threads, modules: modules, extraMemory: dump.extraMemory, system: SystemProbe.current(),
            linuxFiles: files, captureTime: UInt32(clamping: timeNanoseconds / 1_000_000_000),
            processStartTime: access.flatMap { startTime(of: $0.pid) })
        var capture = Capture(
            snapshot: snapshot, executable: executable, arguments: arguments, notes: notes, record: record,
            suspendedNanoseconds: 0, heldNanoseconds: 0)
        // The runtimes' files, while the kernel holds the process's working directory and root.
        if let access {
            capture.runtime = RuntimeFiles.read(
                access: access, mappings: mappings, arguments: arguments, executable: executable,
                started: snapshot.processStartTime, now: Int64(timeNanoseconds / 1_000_000_000)
            ).state(threads: threads)
        }
        capture.runtime.python = python
        // Its container: the cgroup, its own hostname while the kernel holds it, the node's files.
        if let access,
            var container = proc.files["cgroup"].flatMap({
                ContainerIdentity.parse(procCgroup: String(decoding: $0, as: UTF8.self))
            })
        {
            let hostname = container.isContainer ? ContainerNames.ownHostname(access) : nil
            ContainerNames().name(&container, hostname: hostname, notes: &capture.notes)
            capture.container = container
        }
        return capture
    }

    /// The core's threads, named as /proc names them while the kernel holds the process (the
    /// main thread by the core's command when its name is gone).
    static func threadSnapshots(_ dump: CoreDump, access: ProcessAccess?, pid: ProcessID) -> [ThreadSnapshot] {
        let names = access.map { threadNames(dump, access: $0) } ?? [:]
        return dump.threads.map { thread in
            var name = names[thread.tid] ?? ""
            if name.isEmpty, thread.tid.rawValue == pid.rawValue { name = dump.processInfo?.command ?? "" }
            return ThreadSnapshot(tid: thread.tid, name: name, registers: thread.registers, stack: thread.stack)
        }
    }

    /// The main executable: the file mapped where the program's entry point is (AT_ENTRY), or its
    /// program headers (AT_PHDR).
    static func executablePath(_ dump: CoreDump, mappings: [MemoryMapping]) -> String? {
        for type: UInt64 in [9, 3] {  // AT_ENTRY, AT_PHDR
            guard let address = dump.auxiliaryValue(type),
                let mapping = mappings.first(where: { $0.contains(address) }), mapping.path.hasPrefix("/")
            else { continue }
            return ModuleMap.filePath(mapping.path)
        }
        return nil
    }

    /// The threads' names from /proc/PID/task/TID/comm, as the process's user may read them. The
    /// core names threads in the process's pid namespace; /proc in ours: in a container, each
    /// of our thread ids is matched to its innermost one (NSpid).
    static func threadNames(_ dump: CoreDump, access: ProcessAccess) -> [ThreadID: String] {
        let pid = access.pid
        let wanted = dump.threads.map(\.tid)
        guard (ProcFiles.namespaceIDs(of: pid)?.count ?? 1) > 1 else { return access.threadNames(wanted) }
        var ours: [ThreadID: ThreadID] = [:]
        for tid in ProcFiles.threads(of: pid) {
            if let inner = ProcFiles.namespaceIDs(of: pid, thread: tid)?.last { ours[ThreadID(inner)] = tid }
        }
        let names = access.threadNames(wanted.compactMap { ours[$0] })
        return Dictionary(
            wanted.compactMap { inner in ours[inner].flatMap { names[$0] }.map { (inner, $0) } }, uniquingKeysWith: { a, _ in a })
    }
}
