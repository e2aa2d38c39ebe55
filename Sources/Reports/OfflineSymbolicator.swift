// OfflineSymbolicator: `crashport symbolicate FILE`. FILE is an event.json or a minidump
// (crashport's, Breakpad's or Crashpad's), possibly from another machine and from stripped
// binaries. Modules are matched by build-id, so the binaries or debug files found here
// (--debug-dir, /usr/lib/debug, or the module's own path when its build-id still matches) need
// only match by build-id. Never touches a live process.

import BoundedBytes
import FoundationEssentials
import ObjectFile
import ReportModel
import Symbolication

public enum OfflineError: Error, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case unrecognised(path: String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): return "\(path): \(reason)"
        case .unrecognised(let path): return "\(path) is neither a minidump nor a crashport event.json"
        }
    }
}

public struct OfflineSymbolicator {
    public var locator: DebugFileLocator

    public init(debugDirectories: [String]) {
        locator = DebugFileLocator(debugDirectories: debugDirectories)
    }

    public func symbolicate(path: String) throws -> Event {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw OfflineError.unreadable(path: path, reason: "cannot be read")
        }
        if data.starts(with: Array("MDMP".utf8)) {
            var event = try symbolicate(minidump: Minidump(bytes: Array(data)), name: path)
            Self.nameAsItsReport(&event, minidump: path)
            return event
        }
        let event: Event
        do {
            event = try Event.decode(data)
        } catch {
            if data.first == UInt8(ascii: "{") {
                throw OfflineError.unreadable(path: path, reason: "not a valid event (\(Event.describe(decodingError: error)))")
            }
            throw OfflineError.unrecognised(path: path)
        }
        return symbolicate(event: event)
    }

    /// The ELF image of a module here: its own path if the build-id still matches, else one
    /// found by build-id.
    func image(path: String?, buildID: BuildID?) -> ELFFile? {
        if let path, path.hasPrefix("/"), let file = try? ELFFile(path: path) {
            if buildID == nil || file.buildID == buildID { return file }
        }
        return buildID.flatMap { locator.file(forBuildID: $0) }
    }

    /// Why a module's frames keep module+offset: which build-id was looked for, and where.
    func missing(name: String, path: String, buildID: BuildID?) -> String {
        guard let buildID else {
            return "no binary for \(name) at \(path), and no build-id to look for another: its frames keep module+offset"
        }
        let asked = locator.useDebuginfod ? Debuginfod.outcome(for: buildID).map { " (\($0))" } ?? "" : ""
        return
            "no binary or debug file for \(name) with build-id \(buildID.hex)\(asked): its frames keep module+offset; --debug-dir DIR adds a place, --debuginfod asks debuginfod, --verbose lists where crashport looked"
    }

    /// `symbolicate --verbose`: for each module of `event`, the build-id looked for, every place
    /// looked at, and what was used (the binary, and where its symbols and lines came from).
    public func searchLog(for event: Event) -> [String] {
        (event.modules ?? []).compactMap { module -> String? in
            guard let path = module.path, path != "[vdso]" else { return nil }
            let name = path.split(separator: "/").last.map(String.init) ?? path
            let buildID = module.buildID.flatMap { BuildID(hex: $0) }
            let head = "\(name) (build-id \(buildID?.hex ?? "none"))"
            let places = [path] + (buildID.map { locator.placesSearched(forBuildID: $0) } ?? [])
            guard let elf = image(path: path, buildID: buildID) else {
                return "\(head): not found; looked at \(places.joined(separator: ", "))"
            }
            let debug = DebugImageCache.shared.image(for: elf, locator: locator)
            return "\(head): \(elf.path), \(debug.provenance); looked at \(places.joined(separator: ", "))"
        }
    }

    /// Re-symbolicates every frame of an event from its module and module offset.
    public func symbolicate(event original: Event) -> Event {
        var event = original
        var images: [String: ELFFile?] = [:]
        var notes = event.notes ?? []
        for module in event.modules ?? [] {
            guard let path = module.path else { continue }
            let name = path.split(separator: "/").last.map(String.init) ?? path
            let found = image(path: path, buildID: module.buildID.flatMap { BuildID(hex: $0) })
            images[name] = found
            if found == nil && path != "[vdso]" {
                notes.append(missing(name: name, path: path, buildID: module.buildID.flatMap { BuildID(hex: $0) }))
            }
        }
        event.threads = event.threads?.map { thread in
            var thread = thread
            var frames: [FrameRecord] = []
            // Inlined and tail-call frames are derived: drop them, derive them again.
            let physical = (thread.frames ?? []).filter { $0.inlined != true && $0.tailCall != true }
            var callee: TailCallEnd?
            for (position, frame) in physical.enumerated() {
                guard let module = frame.module, let offset = frame.moduleOffset?.value, let elf = images[module] ?? nil else {
                    var kept = frame
                    kept.index = frames.count
                    frames.append(kept)
                    callee = nil
                    continue
                }
                let debug = DebugImageCache.shared.image(for: elf, locator: locator)
                var template = SymbolicatedFrame()
                template.module = module
                template.moduleOffset = offset
                let isReturnAddress = position > 0 && frame.trust != .context
                // Functions that left the stack by a tail call between the callee and this
                // frame, found as the watcher finds them (TailCalls; not after a scanned frame).
                let end = frame.pc.map {
                    TailCallEnd(
                        image: debug, module: module, pc: $0.value, virtualPC: offset &+ elf.imageVirtualBase,
                        isReturnAddress: isReturnAddress)
                }
                if let callee, let end, isReturnAddress, frame.trust != .signalFrame, frame.trust != .scan {
                    for elided in TailCalls.frames(callee: callee, caller: end) {
                        frames.append(
                            FrameRecord(index: frames.count, pc: HexAddress(elided.pc), symbol: elided.frame, trust: frame.trust))
                    }
                }
                callee = frame.trust == .signalFrame ? nil : end
                for symbol in Symbolizer.frames(
                    in: debug, virtualAddress: offset &+ elf.imageVirtualBase,
                    isReturnAddress: isReturnAddress, template: template)
                {
                    frames.append(FrameRecord(index: frames.count, pc: frame.pc, symbol: symbol, trust: frame.trust))
                }
            }
            thread.frames = frames
            return thread
        }
        // Debug data refused while symbolicating (a decompression bomb): say whose.
        for (name, elf) in images.sorted(by: { $0.key < $1.key }) {
            guard let elf, let loaded = DebugImageCache.shared.loadedImage(for: elf, locator: locator) else { continue }
            for var refusal in loaded.refusals {
                refusal.module = name
                if !notes.contains(refusal.description) { notes.append(refusal.description) }
            }
        }
        event.notes = notes.isEmpty ? nil : notes
        // Names found now may move the culprit (a stripped program's frames had none online).
        Culprit.mark(&event)
        return event
    }

    /// A report's minidump (REPORT/minidump.dmp) is named as `crashport show` names the report:
    /// the id and the timestamp of the event.json beside it (a minidump keeps whole seconds),
    /// else the report directory's name; any other minidump keeps its file name.
    static func nameAsItsReport(_ event: inout Event, minidump path: String) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[..<$0]) } ?? "."
        let report = FileManager.default.contents(atPath: directory + "/event.json").flatMap { try? Event.decode($0) }
        if let id = report?.id {
            event.id = id
        } else if path.pathBaseName == "minidump.dmp", slash != nil, !directory.pathBaseName.isEmpty {
            event.id = directory.pathBaseName
        }
        if let timestamp = report?.timestamp { event.timestamp = timestamp }
    }

    /// Unwinds and symbolicates a minidump: threads, registers and stacks from the dump; code,
    /// CFI, symbols and lines from the binaries and debug files found by build-id.
    public func symbolicate(minidump: Minidump, name: String) throws -> Event {
        var notes: [String] = []
        let modules: [LoadedModule] = minidump.modules.map { module in
            var module = module
            module.object = image(path: module.path, buildID: module.buildID)
            if module.object == nil && module.path != "[vdso]" {
                notes.append(missing(name: module.name, path: module.path, buildID: module.buildID))
            }
            return module
        }
        guard let exception = minidump.exception else {
            throw OfflineError.unreadable(path: name, reason: "the minidump has no exception stream")
        }
        let threads: [ThreadSnapshot] = minidump.threads.compactMap { thread in
            let registers = thread.tid == exception.threadID ? (exception.registers ?? thread.registers) : thread.registers
            guard let registers else { return nil }
            return ThreadSnapshot(
                tid: ThreadID(Int32(bitPattern: thread.tid)), name: thread.name ?? minidump.threadNames[thread.tid] ?? "",
                registers: registers, stack: thread.stack)
        }
        let stacks = Set(threads.compactMap { $0.stack?.start })
        // The maps at the crash, for the verdicts read from them (a stack overflow).
        var files = LinuxFiles()
        files.maps = minidump.stream(MinidumpFormat.MINIDUMP_STREAM_TYPE.LinuxMaps)
        var snapshot = ProcessSnapshot(
            pid: ProcessID(minidump.pid ?? 0), crashedThreadID: ThreadID(Int32(bitPattern: exception.threadID)),
            exception: exception.info, threads: threads, modules: modules,
            extraMemory: minidump.memory.regions.filter { !stacks.contains($0.start) }, linuxFiles: files,
            captureTime: minidump.timeDateStamp)
        snapshot.annotations = minidump.annotations
        let arguments =
            minidump.stream(MinidumpFormat.MINIDUMP_STREAM_TYPE.LinuxCmdLine).map { bytes in
                bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            } ?? []
        var event = ReportBuilder.event(
            snapshot: snapshot, executable: minidump.modules.first?.path, arguments: arguments,
            notes: notes + minidump.warnings, id: name.pathBaseName,
            timestamp: Event.timestamp(Date(timeIntervalSince1970: TimeInterval(minidump.timeDateStamp))), locator: locator)
        event.minidump = name
        return event
    }
}
