/*
 * errors.h: the errno values the stub's raw system calls return (negated: -CP_EINTR), spelled
 * out once for every stub file. The crash path includes no libc header that declares errno
 * (safe.h: a system call returns -errno, errno itself is never touched), so it cannot use
 * <errno.h>'s names; these are the x86_64 Linux values (asm-generic/errno-base.h, errno.h).
 * Macros only: nothing here is code, so any file may include it. A file that has <errno.h> too
 * (install.c) checks them against libc's at compile time.
 */
#ifndef CRASHPORT_STUB_ERRORS_H
#define CRASHPORT_STUB_ERRORS_H

#define CP_EPERM 1
#define CP_ESRCH 3
#define CP_EINTR 4
#define CP_EIO 5
#define CP_EBADF 9
#define CP_EAGAIN 11
#define CP_EEXIST 17
#define CP_EINVAL 22
#define CP_EPIPE 32
#define CP_ENAMETOOLONG 36
#define CP_ENOSYS 38
#define CP_ENOTSOCK 88
#define CP_ECONNRESET 104
#define CP_EISCONN 106
#define CP_ENOTCONN 107
#define CP_ETIMEDOUT 110
#define CP_ECONNREFUSED 111
#define CP_EALREADY 114
#define CP_EINPROGRESS 115

#ifdef EINPROGRESS /* <errno.h> came first: the values above must be its own */
_Static_assert(CP_EPERM == EPERM && CP_ESRCH == ESRCH && CP_EINTR == EINTR && CP_EIO == EIO &&
                   CP_EBADF == EBADF && CP_EAGAIN == EAGAIN && CP_EEXIST == EEXIST && CP_EINVAL == EINVAL &&
                   CP_EPIPE == EPIPE && CP_ENAMETOOLONG == ENAMETOOLONG && CP_ENOSYS == ENOSYS &&
                   CP_ENOTSOCK == ENOTSOCK && CP_ECONNRESET == ECONNRESET && CP_EISCONN == EISCONN &&
                   CP_ENOTCONN == ENOTCONN && CP_ETIMEDOUT == ETIMEDOUT && CP_ECONNREFUSED == ECONNREFUSED &&
                   CP_EALREADY == EALREADY && CP_EINPROGRESS == EINPROGRESS,
               "errors.h: an errno value differs from <errno.h>'s");
#endif

#endif /* CRASHPORT_STUB_ERRORS_H */
