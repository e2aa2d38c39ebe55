// WireBytes: the wire ABI's structures written as the stub writes them, at the offsets the C
// header gives (CSupport/protocol/include/crashport_protocol.h, through MemoryLayout), for tests
// that hand the decoders bytes: a crash record to decode or break, an app-area header whose
// heartbeat the hang monitor judges. All little-endian.

import CCrashPortProtocol
import ReportModel

public enum WireBytes {
    /// cp_header's 16 bytes: CP_MAGIC, CP_VERSION, the whole message's size, its type.
    public static func header(type: UInt32, size: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        for field in [CP_MAGIC, CP_VERSION, UInt32(size), type] { bytes.append(u32: field) }
        return bytes
    }

    /// A CP_MSG_CRASH record: cp_crash up to its stack (CrashRecord.fixedSize bytes), then
    /// `stack`. The sender's thread is the process's; every field not named here is 0.
    public static func crashRecord(
        pid: UInt32, signal: Int32, code: Int32, arch: UInt32 = CP_ARCH_X86_64, faultAddress: UInt64, appArea: UInt64,
        stackStart: UInt64, stack: [UInt8]
    ) -> [UInt8] {
        func offset<T>(_ field: KeyPath<cp_crash, T>) -> Int { MemoryLayout<cp_crash>.offset(of: field)! }
        var bytes = header(type: CP_MSG_CRASH.rawValue, size: CrashRecord.fixedSize + stack.count)
        bytes.pad(to: CrashRecord.fixedSize)
        bytes.put(u32: pid, at: offset(\.pid))
        bytes.put(u32: pid, at: offset(\.tid))
        bytes.put(u32: UInt32(bitPattern: signal), at: offset(\.signo))
        bytes.put(u32: UInt32(bitPattern: code), at: offset(\.code))
        bytes.put(u32: arch, at: offset(\.arch))
        bytes.put(u64: faultAddress, at: offset(\.fault_address))
        bytes.put(u64: appArea, at: offset(\.app_area))
        bytes.put(u64: stackStart, at: offset(\.stack_start))
        bytes.put(u32: UInt32(stack.count), at: offset(\.stack_size))
        return bytes + stack
    }

    /// The first 64 bytes of a cp_app_area (the header capture reads before the rest): its magic,
    /// CP_APP_VERSION, and the heartbeat's count and thread; the rest 0.
    public static func appAreaHeader(magic: UInt32 = CP_APP_MAGIC, heartbeatCount: UInt64, heartbeatThread: Int32) -> [UInt8] {
        func offset<T>(_ field: KeyPath<cp_app_area, T>) -> Int { MemoryLayout<cp_app_area>.offset(of: field)! }
        var bytes = [UInt8](repeating: 0, count: offset(\.annotations))
        bytes.put(u32: magic, at: offset(\.magic))
        bytes.put(u32: CP_APP_VERSION, at: offset(\.version))
        bytes.put(u64: heartbeatCount, at: offset(\.heartbeat_count))
        bytes.put(u32: UInt32(bitPattern: heartbeatThread), at: offset(\.heartbeat_tid))
        return bytes
    }
}
