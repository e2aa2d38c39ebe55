/*
 * crashport.h: the public C API of libcrashport, crashport's in-process stub.
 *
 * The stub hands every crash of this process to a separate watcher process over a socket and
 * then lets the signal continue down the chain of handlers that were installed before it.
 * Programs started with `crashport run` (or with LD_PRELOAD=libcrashport.so and CRASHPORT_FD
 * set) are installed automatically by a constructor; others call crashport_install().
 */
#ifndef CRASHPORT_H
#define CRASHPORT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crashport_options {
    int fd;              /* the watcher socket (SOCK_SEQPACKET); -1: take CRASHPORT_FD */
    unsigned timeout_ms; /* verdict wait; 0: CRASHPORT_TIMEOUT_MS, else 10000 */
    uint64_t signals;    /* bitmask 1 << signo; 0: SIGSEGV SIGBUS SIGILL SIGFPE SIGABRT
                            SIGTRAP SIGSYS */
    uint64_t forward_first; /* bitmask 1 << signo of signals whose previous handler runs first
                               (crashport reports only if the fault comes back unhandled);
                               0: CRASHPORT_FORWARD_FIRST (e.g. "SIGSEGV,SIGBUS"), else none */
} crashport_options;

/* Every option at its default: note that fd 0 is stdin, so a zeroed struct is not this. */
#define CRASHPORT_OPTIONS_DEFAULT {-1, 0u, 0u, 0u}

/*
 * Installs crashport: checks the socket, preallocates everything the signal handler needs,
 * gives the watcher ptrace permission, gives the calling thread an alternate signal stack if
 * it has none large enough, saves the previous action of each signal and installs its own,
 * then says HELLO to the watcher. options may be NULL (all defaults).
 *
 * Returns 0, or -errno (the process is left as it was, and one line on stderr says why crash
 * reporting is off). Thread-safe and idempotent: once it has succeeded, later calls do nothing
 * and return 0. It never aborts the program.
 */
__attribute__((visibility("default"))) int crashport_install(const crashport_options *options);

#ifdef __cplusplus
}
#endif

#endif /* CRASHPORT_H */
