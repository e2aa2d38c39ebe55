// Errors of live-process inspection; OS failures carry the errno.

#if canImport(Glibc)
import Glibc
#endif

public enum InspectionError: Error, CustomStringConvertible, Equatable {
    case system(call: String, errno: Int32)
    case noSuchThread(Int32)
    case malformed(String)

    public var description: String {
        switch self {
        case .system(let call, let errno): return "\(call): \(String(cString: strerror(errno)))"
        case .noSuchThread(let tid): return "thread \(tid) is not in the process"
        case .malformed(let what): return what
        }
    }

    public var errno: Int32? {
        if case .system(_, let errno) = self { return errno }
        return nil
    }
}
