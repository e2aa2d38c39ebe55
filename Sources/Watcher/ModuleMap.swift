// ModuleMap: the ELF images mapped into a process, from /proc/PID/maps.
//
// A module starts at the mapping of its file at offset 0 (the ELF header) and spans the
// following mappings of the same file (same path and inode); it is kept when one of them is
// executable. The main executable comes first. Files are opened through
// /proc/PID/map_files/START-END when possible, which names the exact inode that is mapped even
// if the path was replaced or deleted since; the vDSO is read from memory.

import BoundedBytes
import Inspection
import ReportModel
import Symbolication
import Synchronization

public struct LoadedModule: Sendable {
    public var info: ModuleInfo
    public var elf: ELFFile?
    /// Why the module's file could not be read, when it could not.
    public var problem: String?
}

/// ELF files opened for earlier captures, reused while their identity (path, inode) holds.
/// Safe to share between threads.
public final class ELFCache: Sendable {
    private let files = Mutex<[String: ELFFile]>([:])

    public init() {}

    /// The cached file for `key`, else `open()`'s (called outside the lock).
    func file(key: String, open: () throws -> ELFFile) throws -> ELFFile {
        if let cached = files.withLock({ $0[key] }) { return cached }
        let file = try open()
        files.withLock { files in
            if files.count > 512 { files.removeAll() }
            files[key] = file
        }
        return file
    }
}

enum ModuleMap {
    static func modules(
        pid: Int32, mappings: [MemoryMapping], executable: String?, memory: ProcessMemory?, cache: ELFCache
    ) -> [LoadedModule] {
        var modules: [LoadedModule] = []
        var index = 0
        while index < mappings.count {
            let first = mappings[index]
            index += 1
            if first.path == "[vdso]" {
                modules.append(vdso(first, memory: memory))
                continue
            }
            guard first.path.hasPrefix("/"), first.offset == 0 else { continue }
            var last = first
            var executable = first.executable
            while index < mappings.count, mappings[index].path == first.path, mappings[index].inode == first.inode,
                mappings[index].offset >= last.offset
            {
                last = mappings[index]
                executable = executable || last.executable
                index += 1
            }
            guard executable, let size = last.end.checkedSubtracting(first.start) else { continue }
            var module = LoadedModule(info: ModuleInfo(path: first.path, base: first.start, size: size, buildID: []))
            let key = "\(first.path)|\(first.inode)"
            do {
                let elf = try cache.file(key: key) {
                    let mapFile = "/proc/\(pid)/map_files/\(String(first.start, radix: 16))-\(String(first.end, radix: 16))"
                    if let file = try? ELFFile(path: mapFile) { return file }
                    return try ELFFile(path: first.path.hasSuffix(" (deleted)") ? String(first.path.dropLast(10)) : first.path)
                }
                module.elf = elf
                module.info.buildID = elf.buildID ?? []
                if let memory, let mapped = mappedBuildID(elf: elf, base: first.start, memory: memory),
                    !mapped.isEmpty, mapped != module.info.buildID
                {
                    // The file was replaced since it was mapped: trust the memory, and do not
                    // symbolicate with a file that is not the code that ran.
                    module.problem =
                        "the file on disk (build-id \(DebugFileLocator.hex(module.info.buildID))) is not what was mapped (build-id \(DebugFileLocator.hex(mapped))); not symbolicated from it"
                    module.info.buildID = mapped
                    module.elf = nil
                }
            } catch {
                module.problem = "\(error)"
            }
            modules.append(module)
        }
        // The main executable first.
        if let executable, let position = modules.firstIndex(where: { $0.info.path == executable }), position > 0 {
            modules.insert(modules.remove(at: position), at: 0)
        }
        return modules
    }

    /// The GNU build-id read from the mapped image itself, through the file's PT_NOTE
    /// headers (notes lie in the first PT_LOAD, which is mapped at the module base).
    static func mappedBuildID(elf: ELFFile, base: UInt64, memory: ProcessMemory) -> [UInt8]? {
        for segment in elf.segments where segment.type == ELFSegment.note && segment.fileSize <= 4096 {
            let address = base &+ (segment.vaddr &- elf.imageVirtualBase)
            let bytes = memory.bytes(at: address, count: Int(segment.fileSize))
            guard bytes.count == Int(segment.fileSize) else { continue }
            if let found = bytes.withUnsafeBytes({ ELFFile.buildID(inNotes: ByteView($0)) }) { return found }
        }
        return nil
    }

    static func vdso(_ mapping: MemoryMapping, memory: ProcessMemory?) -> LoadedModule {
        let size = mapping.end.checkedSubtracting(mapping.start) ?? 0
        var module = LoadedModule(info: ModuleInfo(path: "[vdso]", base: mapping.start, size: size, buildID: []))
        guard let memory, size > 0, size <= 1 << 20 else { return module }
        let bytes = memory.bytes(at: mapping.start, count: Int(size))
        if let elf = try? ELFFile(file: MappedFile(bytes: bytes, name: "[vdso]")) {
            module.elf = elf
            module.info.buildID = elf.buildID ?? []
        }
        return module
    }
}
