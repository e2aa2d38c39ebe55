// The `python` target: PythonStackReader over memory the fuzzer writes. Input byte 0 picks the
// interpreter's version (and so the layout route: 3.11's and 3.12's built-in offsets, or
// `_Py_DebugOffsets` read from the image for 3.13 and 3.14; else no Py_Version); the rest is
// one region of memory at `pythonBase`, `_PyRuntime` at its start, so every pointer the input
// holds into [pythonBase, pythonBase + count) is followed. Small limits, so that each cap (threads,
// frames, strings, line tables, code objects, bytes) is reached by inputs of a few KB. The seeds
// (Tests/Fuzz/seeds/python) are TestSupport's PythonImage: a two-thread interpreter of each
// route, with every string kind.

import BoundedBytes
import ReportModel
import Runtimes

extension FuzzTarget {
    /// Where the input's memory starts (and `_PyRuntime`).
    public static let pythonBase: UInt64 = 0x10000

    /// The PY_VERSION_HEX input byte 0 selects (nil: the process has no Py_Version).
    public static func pythonVersion(selector: UInt8) -> UInt32? {
        switch selector % 5 {
        case 0: return 0x030B_07F0
        case 1: return 0x030C_01F0
        case 2: return 0x030D_00F0
        case 3: return 0x030E_00F0
        default: return nil
        }
    }

    static func python(_ input: UnsafeRawBufferPointer) {
        guard let selector = input.first else { return }
        let memory = RegionMemory(regions: [MemoryRegion(start: pythonBase, bytes: Array(input.dropFirst()))])
        var limits = PythonStackReader.Limits()
        limits.interpreters = 4
        limits.threads = 8
        limits.framesPerThread = 64
        limits.totalFrames = 256
        limits.stringBytes = 64
        limits.lineTableBytes = 512
        limits.codeObjects = 32
        limits.totalBytes = 256 * 1024
        let stacks = PythonStackReader.read(
            memory: memory, runtimeAddress: pythonBase, versionHex: pythonVersion(selector: selector), limits: limits)
        // What a report does with them: every field touched.
        var characters = stacks.version.count + stacks.layout.count + stacks.notes.count
        for thread in stacks.threads {
            characters += thread.problem?.count ?? 0
            for frame in thread.frames {
                characters += frame.function.count + frame.file.count + (frame.qualifiedName?.count ?? 0)
            }
        }
        _ = characters
    }
}
