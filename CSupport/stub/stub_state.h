/*
 * stub_state.h: the state shared by install (install.c) and the signal handler (handler.c).
 *
 * Ownership and lifetime: one process-wide instance, cp_state, defined in handler.c (so the
 * handler's object references nothing outside itself). install.c fills it, once, before it
 * installs the first signal handler; after that the handler only reads the configuration and
 * touches the fields marked "atomic". Nothing in it is ever freed: the record and the
 * alternate stack live until the process dies.
 */
#ifndef CRASHPORT_STUB_STATE_H
#define CRASHPORT_STUB_STATE_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "crashport_protocol.h"

#define CP_HIDDEN __attribute__((visibility("hidden")))

/* Signals are numbered 1..63 in the uint64_t masks below (bit 1 << signo, bit 0 unused). */
#define CP_SIGNAL_LIMIT 64

#define CP_DEFAULT_TIMEOUT_MS 10000u
#define CP_STUB_VERSION 1u

/*
 * A sigaction exactly as the x86_64 kernel stores it (struct kernel_sigaction, what the raw
 * rt_sigaction system call reads and writes with sigsetsize 8). The wire's cp_action has the
 * same field order; still convert field by field, never cast.
 */
typedef struct cp_kernel_sigaction {
    uint64_t handler; /* SIG_DFL = 0, SIG_IGN = 1, else an address */
    uint64_t flags;   /* SA_*, including SA_RESTORER when libc installed it */
    uint64_t restorer;
    uint64_t mask; /* signals 1..64 as bits 0..63 */
} cp_kernel_sigaction;

#define CP_FORWARD_SLOTS 16

typedef struct cp_forward_memo {
    uint32_t tid;
    int32_t signo;
    uint64_t pc;
    uint64_t address;
} cp_forward_memo;

typedef struct cp_stub_state {
    /* -- configuration: written by install before any handler is live, then read-only -- */
    cp_crash *record;      /* mmap'd once at install, sizeof(cp_crash) bytes, never unmapped */
    int fd;                /* the SOCK_SEQPACKET socket shared with the watcher */
    int timing_fd;         /* CRASHPORT_TIMING_FD (bench), or -1 */
    uint32_t timeout_ms;   /* verdict wait; heartbeats may extend it up to 6x */
    int32_t watcher_pid;   /* the socket's peer (SO_PEERCRED), 0 when unknown */
    uint64_t handled;      /* 1 << signo for every signal crashport handles */
    uint64_t has_previous; /* 1 << signo when previous[signo] holds the saved action */
    uint64_t handler_address;                     /* &cp_handler_signal, as the kernel sees it */
    uint64_t forward_first; /* 1 << signo: the previous handler gets these signals first */
    cp_kernel_sigaction previous[CP_SIGNAL_LIMIT]; /* indexed by signo: the chain below us */

    /* -- crash time: touched only with __atomic builtins -- */
    uint32_t crashing_tid;  /* 0, or the tid of the thread reporting the crash (first wins) */
    uint32_t crash_done;    /* futex word: 0 while the report runs, 1 once it is over */
    uint32_t other_crashes; /* threads that faulted while the first one was reporting */
    uint32_t reserved;
    /* The last fault each thread slot (tid % CP_FORWARD_SLOTS) gave to a previous handler
     * first: when the same fault comes straight back, that handler did not recover. */
    cp_forward_memo forwarded[CP_FORWARD_SLOTS];
} cp_stub_state;

/** The process-wide stub state (defined in handler.c). */
extern cp_stub_state cp_state CP_HIDDEN;

/** Size of every alternate signal stack crashport creates (threads.c, install.c). */
#define CP_ALTSTACK_BYTES (64u * 1024u)

/** Per-thread alternate stacks (threads.c): the key whose destructor releases a thread's
 *  stack at exit, created at install; cp_thread_key_ready says whether it exists. */
extern pthread_key_t cp_thread_key CP_HIDDEN;
extern int cp_thread_key_ready CP_HIDDEN;
void cp_thread_release(void *region) CP_HIDDEN;

/** The SA_SIGINFO handler crashport installs; runs in signal context (handler.c). */
void cp_handler_signal(int signo, siginfo_t *info, void *context) CP_HIDDEN;

#endif /* CRASHPORT_STUB_STATE_H */
