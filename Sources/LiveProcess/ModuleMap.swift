// ModuleMap: the ELF images mapped into a process, from /proc/PID/maps.
//
// A module starts at the mapping of its file at offset 0 (the ELF header) and spans the
// following mappings of the same file (same path and inode); it is kept when one of them is
// executable. The main executable comes first. Files are opened through
// /proc/PID/map_files/START-END when possible, which names the exact inode that is mapped even
// if the path was replaced or deleted since. With the process's memory at hand, the build-id is
// read from the mapped image itself, and a file on disk whose build-id differs is not used: it is
// not the code that ran. The vDSO is read from memory.

import BoundedBytes
import ObjectFile
import Synchronization
import ReportModel

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
        pid: ProcessID, mappings: [MemoryMapping], executable: String?, memory: ProcessMemory?, cache: ELFCache
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
            let mapped = memory.flatMap { ELFFile.buildID(ofImageAt: first.start, in: $0) }
            var module = LoadedModule(path: first.path, base: first.start, size: size, buildID: mapped)
            do {
                let object = try cache.file(key: "\(first.path)|\(first.inode)") {
                    let mapFile = "/proc/\(pid)/map_files/\(String(first.start, radix: 16))-\(String(first.end, radix: 16))"
                    if let file = try? ELFFile(path: mapFile) { return file }
                    return try ELFFile(path: first.path.hasSuffix(" (deleted)") ? String(first.path.dropLast(10)) : first.path)
                }
                let onDisk = object.buildID
                if let mapped, mapped != onDisk {
                    // The file was replaced since it was mapped: do not symbolicate with a file
                    // that is not the code that ran.
                    module.problem =
                        "the file on disk (build-id \(onDisk?.hex ?? "none")) is not what was mapped (build-id \(mapped.hex)); not symbolicated from it"
                } else {
                    module.object = object
                    module.buildID = onDisk
                }
            } catch {
                module.problem = "\(error)"
            }
            modules.append(module)
        }
        // The main executable first.
        if let executable, let position = modules.firstIndex(where: { $0.path == executable }), position > 0 {
            modules.insert(modules.remove(at: position), at: 0)
        }
        return modules
    }

    static func vdso(_ mapping: MemoryMapping, memory: ProcessMemory?) -> LoadedModule {
        let size = mapping.end.checkedSubtracting(mapping.start) ?? 0
        var module = LoadedModule(path: "[vdso]", base: mapping.start, size: size, buildID: nil)
        guard let memory, size > 0, size <= 1 << 20 else { return module }
        let bytes = memory.bytes(at: mapping.start, count: Int(size))
        if let object = try? ELFFile(file: MappedFile(bytes: bytes, name: "[vdso]")) {
            module.object = object
            module.buildID = object.buildID
        }
        return module
    }
}
