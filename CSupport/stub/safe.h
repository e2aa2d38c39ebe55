/*
 * safe.h: the stub's async-signal-safe toolbox: raw Linux x86_64 system calls and a tiny libc
 * subset (copy, set, strlen, decimal formatting, write-all loop).
 *
 * Everything here is `static inline`, takes no lock, allocates nothing and never touches errno:
 * a system call returns its result, or -errno as a negative value, exactly as the kernel gives
 * it. So every function may run inside the signal handler (the crash path: entry.c, forward.c,
 * report.c) as well as at install.
 *
 * The byte loops below must stay loops: the crash path is compiled with -fno-builtin and
 * -fno-tree-loop-distribute-patterns so that the compiler does not turn them back into calls to
 * libc's memcpy/memset (tools/check-stub-safety would catch it if it did).
 */
#ifndef CRASHPORT_STUB_SAFE_H
#define CRASHPORT_STUB_SAFE_H

#if !defined(__x86_64__)
#error "crashport's stub supports x86_64 Linux only for now"
#endif

#include <stddef.h>
#include <stdint.h>

#include "errors.h"

/* -- raw system calls ------------------------------------------------------------------------ */
/* x86_64 syscall ABI: number in rax, arguments in rdi rsi rdx r10 r8 r9; the instruction
 * clobbers rcx and r11; the result (or -errno) comes back in rax. */

/** Raw system call, no argument; returns the result or -errno. Async-signal-safe. */
static inline long cp_safe_syscall0(long number)
{
    long result;
    __asm__ volatile("syscall" : "=a"(result) : "a"(number) : "rcx", "r11", "memory");
    return result;
}

/** Raw system call, one argument; returns the result or -errno. Async-signal-safe. */
static inline long cp_safe_syscall1(long number, long a1)
{
    long result;
    __asm__ volatile("syscall" : "=a"(result) : "a"(number), "D"(a1) : "rcx", "r11", "memory");
    return result;
}

/** Raw system call, two arguments; returns the result or -errno. Async-signal-safe. */
static inline long cp_safe_syscall2(long number, long a1, long a2)
{
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a1), "S"(a2)
                     : "rcx", "r11", "memory");
    return result;
}

/** Raw system call, three arguments; returns the result or -errno. Async-signal-safe. */
static inline long cp_safe_syscall3(long number, long a1, long a2, long a3)
{
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a1), "S"(a2), "d"(a3)
                     : "rcx", "r11", "memory");
    return result;
}

/** Raw system call, four arguments; returns the result or -errno. Async-signal-safe. */
static inline long cp_safe_syscall4(long number, long a1, long a2, long a3, long a4)
{
    long result;
    register long r10 __asm__("r10") = a4;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a1), "S"(a2), "d"(a3), "r"(r10)
                     : "rcx", "r11", "memory");
    return result;
}

/** Raw system call, five arguments; returns the result or -errno. Async-signal-safe. */
static inline long cp_safe_syscall5(long number, long a1, long a2, long a3, long a4, long a5)
{
    long result;
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return result;
}

/** Raw system call, six arguments; returns the result or -errno. Async-signal-safe. */
static inline long cp_safe_syscall6(long number, long a1, long a2, long a3, long a4, long a5,
                                    long a6)
{
    long result;
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return result;
}

/* -- a tiny libc ----------------------------------------------------------------------------- */

/** Copies size bytes from source to destination (no overlap). Async-signal-safe. */
static inline void cp_safe_copy(void *destination, const void *source, size_t size)
{
    unsigned char *d = destination;
    const unsigned char *s = source;
    for (size_t i = 0; i < size; i++) {
        d[i] = s[i];
    }
}

/** Sets size bytes at destination to byte. Async-signal-safe. */
static inline void cp_safe_set(void *destination, unsigned char byte, size_t size)
{
    unsigned char *d = destination;
    for (size_t i = 0; i < size; i++) {
        d[i] = byte;
    }
}

/** Length of a NUL-terminated string. Async-signal-safe. */
static inline size_t cp_safe_strlen(const char *string)
{
    size_t length = 0;
    while (string[length] != '\0') {
        length++;
        /* Opaque to the optimizer: clang at -O2 turns this loop into a call to libc's strlen
         * unless -fno-builtin, which a SwiftPM build of the stub (CCrashPort) cannot pass. */
        __asm__("" : "+r"(length));
    }
    return length;
}

/** Writes value in decimal at buffer[0..], no NUL; returns the digits written, or 0 when
 *  capacity is too small (20 always suffices). Async-signal-safe. */
static inline size_t cp_safe_format_u64(char *buffer, size_t capacity, uint64_t value)
{
    char digits[20];
    size_t count = 0;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    if (count > capacity) {
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        buffer[i] = digits[count - 1 - i];
    }
    return count;
}

/** Appends the NUL-terminated string to buffer at *used, never past capacity; returns 0, or -1
 *  when it did not fit (nothing is appended then). Async-signal-safe. */
static inline int cp_safe_append_string(char *buffer, size_t capacity, size_t *used,
                                        const char *string)
{
    size_t length = cp_safe_strlen(string);
    if (length > capacity - *used) {
        return -1;
    }
    cp_safe_copy(buffer + *used, string, length);
    *used += length;
    return 0;
}

/** Appends value in decimal to buffer at *used, never past capacity; returns 0, or -1 when it
 *  did not fit. Async-signal-safe. */
static inline int cp_safe_append_u64(char *buffer, size_t capacity, size_t *used, uint64_t value)
{
    size_t written = cp_safe_format_u64(buffer + *used, capacity - *used, value);
    if (written == 0) {
        return -1;
    }
    *used += written;
    return 0;
}

/* -- system calls with a typed face ---------------------------------------------------------- */

#include <sys/syscall.h> /* SYS_* numbers: macros only, no libc symbol */

/** Writes all size bytes to fd, retrying on EINTR and short writes; returns 0 or -errno.
 *  Async-signal-safe. */
static inline long cp_safe_write_all(int fd, const void *buffer, size_t size)
{
    const char *p = buffer;
    while (size > 0) {
        long written = cp_safe_syscall3(SYS_write, fd, (long)p, (long)size);
        if (written == -CP_EINTR) {
            continue;
        }
        if (written <= 0) {
            return written < 0 ? written : -CP_EIO; /* no progress */
        }
        p += written;
        size -= (size_t)written;
    }
    return 0;
}

/** The calling thread's id (gettid). Async-signal-safe. */
static inline uint32_t cp_safe_gettid(void)
{
    return (uint32_t)cp_safe_syscall0(SYS_gettid);
}

/** The process id (getpid). Async-signal-safe. */
static inline uint32_t cp_safe_getpid(void)
{
    return (uint32_t)cp_safe_syscall0(SYS_getpid);
}

/** Closes fd; returns 0 or -errno (the fd is gone either way on Linux). Async-signal-safe. */
static inline long cp_safe_close(int fd)
{
    return cp_safe_syscall1(SYS_close, fd);
}

/** Nanoseconds on clock (CLOCK_MONOTONIC, CLOCK_REALTIME...) by the raw clock_gettime system
 *  call, not the vDSO; 0 if the call fails. Async-signal-safe. */
static inline uint64_t cp_safe_clock_ns(int clock)
{
    struct {
        int64_t seconds;
        int64_t nanoseconds;
    } now = {0, 0}; /* struct timespec on x86_64 */
    if (cp_safe_syscall2(SYS_clock_gettime, clock, (long)&now) != 0) {
        return 0;
    }
    return (uint64_t)now.seconds * 1000000000u + (uint64_t)now.nanoseconds;
}

#endif /* CRASHPORT_STUB_SAFE_H */
