// Syscalls: the one file of CoreDump that calls C: read(2) of the stream's descriptor, retried
// on EINTR here and nowhere else.

#if canImport(Glibc)
import Glibc
#endif

enum Syscalls {
    /// read(2) into `buffer`: the count (0 at the end of the stream), or the errno.
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, CoreDumpError> {
        while true {
            let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if count >= 0 { return .success(count) }
            if errno != EINTR { return .failure(.read(errno: errno)) }
        }
    }
}
