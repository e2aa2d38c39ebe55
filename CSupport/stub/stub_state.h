/*
 * stub_state.h: the state shared by install (install.c) and the crash path (entry.c, forward.c,
 * report.c). The calls between the files off the crash path are off_path.h's (they go one way:
 * install.c → launch.c → attach.c → app.c → settings.c).
 *
 * Ownership and lifetime: one process-wide instance, cp_state, defined in report.c (so the
 * crash path's object references nothing outside itself, and its files refer to it downward).
 * install.c fills it, once, before it installs the first signal handler; after that the handler
 * only reads the configuration and touches the fields marked "atomic" (and, on the one thread
 * that reports, fd and watcher_pid when it reconnects to a sidecar). Nothing in it is ever
 * freed: the record, the scratch buffer, the sidecar connection, the spool directory and the
 * alternate stack live until the process dies.
 */
#ifndef CRASHPORT_STUB_STATE_H
#define CRASHPORT_STUB_STATE_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h> /* struct timespec: a type only */
#include <sys/un.h> /* struct sockaddr_un: a type only */

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
/* The kernel's flag for an action that brings its own return trampoline (libc always sets it;
 * <signal.h> does not define it for programs). */
#define CP_SA_RESTORER 0x04000000ull

typedef struct cp_kernel_sigaction {
    uint64_t handler; /* SIG_DFL = 0, SIG_IGN = 1, else an address */
    uint64_t flags;   /* SA_*, including SA_RESTORER when libc installed it */
    uint64_t restorer;
    uint64_t mask; /* signals 1..64 as bits 0..63 */
} cp_kernel_sigaction;

/*
 * The program's own action for one handled signal (what the kernel would hold without
 * crashport), kept lock-free: versions are immutable while published. A writer claims a free
 * version (CAS on `free`), fills it between two `sequence` bumps (odd while it writes), then
 * publishes it by exchanging `current` and frees the one it replaced. A reader loads `current`,
 * copies that version and retries if its sequence moved: no lock, no torn read, and a writer
 * interrupted by a signal whose handler writes too still has versions left (actions.h).
 */
#define CP_ACTION_VERSIONS 8

typedef struct cp_action_version {
    uint32_t sequence; /* odd while being written */
    uint32_t reserved;
    cp_kernel_sigaction action;
} cp_action_version;

typedef struct cp_program_action {
    uint32_t current; /* index of the published version */
    uint32_t free;    /* bit i: versions[i] may be claimed */
    uint32_t changes; /* how many times the program set it since install (0: as saved) */
    uint32_t reserved;
    cp_action_version versions[CP_ACTION_VERSIONS];
} cp_program_action;

/* Bytes of scratch the handler has for copying /proc/self/maps into a spool file (and for the
 * executable's path, CP_SPOOL_EXE_MAX). */
#define CP_SCRATCH_BYTES 4096u
_Static_assert(CP_SCRATCH_BYTES >= CP_SPOOL_EXE_MAX, "the scratch holds the executable's path");

/* The one mapping install makes for the handler (mmap'd, never unmapped): the record, the HELLO
 * built at install (sent again, pid updated, when the handler reconnects to a sidecar), and the
 * spool's scratch buffer. */
typedef struct cp_crash_area {
    cp_crash record;
    cp_crash error_record; /* crashport_report_error's (its pages untouched until one is sent) */
    cp_hello hello;
    uint8_t scratch[CP_SCRATCH_BYTES];
} cp_crash_area;

/* How long install and the handler wait to connect to a sidecar whose backlog is full. */
#define CP_CONNECT_WAIT_MS 1000u

typedef struct cp_stub_state {
    /* -- configuration: written by install before any handler is live, then read-only, except
     *    fd and watcher_pid, which the one reporting thread may replace at crash time when it
     *    reconnects to a sidecar (report.c; one report per process, so no other writer) -- */
    cp_crash *record;      /* &area->record: the start of the install-time cp_crash_area */
    cp_crash *error_record; /* &area->error_record */
    cp_hello *hello;       /* &area->hello */
    uint8_t *scratch;      /* area->scratch, CP_SCRATCH_BYTES */
    int fd;                /* the SOCK_SEQPACKET socket to the watcher; -1: none (sidecar mode) */
    int timing_fd;         /* CRASHPORT_TIMING_FD (bench), or -1 */
    uint32_t timeout_ms;   /* verdict wait; heartbeats may extend it up to 6x */
    int32_t watcher_pid;   /* the socket's peer (SO_PEERCRED), 0 when unknown */
    int spool_fd;          /* O_DIRECTORY fd of the spool directory, or -1 (no spool) */
    uint32_t sidecar_mode; /* 1: CRASHPORT_SOCKET (the handler may reconnect), 0: launcher */
    uint32_t sidecar_address_length; /* bytes of sidecar_address; 0: never reconnect (launcher
                                        mode, or the sidecar refused this process) */
    struct sockaddr_un sidecar_address; /* where the sidecar listens ('\0' first: abstract) */
    uint64_t handled;      /* 1 << signo for every signal crashport handles */
    uint64_t has_previous; /* 1 << signo when previous[signo] holds the saved action */
    uint64_t handler_address;                     /* &cp_handler_signal, as the kernel sees it */
    uint64_t forward_first; /* 1 << signo: the previous handler gets these signals first */
    cp_kernel_sigaction previous[CP_SIGNAL_LIMIT]; /* indexed by signo: the chain below us */
    uint64_t restorer; /* the SA_RESTORER trampoline libc gave crashport's own action */
    uint32_t secure;      /* 1: at install the process had privileges its real user lacks
                             (AT_SECURE: setuid, setgid, file capabilities; or real and
                             effective ids differed): no CRASHPORT_* from the environment, and
                             only root or trusted_uid may be its listener */
    uint32_t trusted_uid; /* the effective uid at install: the listener's uid, besides root */

    /* -- the program's actions: written by the interposed sigaction (interpose.c), read
     *    anywhere, lock-free (actions.h); valid for the signals in `handled` -- */
    cp_program_action program[CP_SIGNAL_LIMIT];

    /* -- crash time: touched only with __atomic builtins -- */
    uint32_t crashing_tid;  /* 0, or the tid of the thread reporting the crash (first wins) */
    uint32_t crash_done;    /* futex word: 0 while the report runs, 1 once it is over */
    uint32_t other_crashes; /* threads that faulted while the first one was reporting */
    uint32_t disabled;      /* crashport_set_enabled(0): crashes pass straight down the chain */
    uint32_t goodbye_sent;  /* 1 once GOODBYE was sent (cp_handler_goodbye): at most once */
    uint32_t test_crash_tid; /* the thread crashing on purpose in crashport_test_crash(), 0: none
                                (its record carries CP_CRASH_TEST) */
} cp_stub_state;

/** The process-wide stub state (defined in report.c). */
extern cp_stub_state cp_state CP_HIDDEN;

/** What the program tells crashport about itself (defined in report.c, written by app.c). */
extern cp_app_area cp_app CP_HIDDEN;

/* The calls between install.c, launch.c, app.c and settings.c, which go one way: off_path.h. */

/** Size of every alternate signal stack crashport creates (threads.c, install.c). */
#define CP_ALTSTACK_BYTES (64u * 1024u)

/** Per-thread alternate stacks (threads.c): the key whose destructor releases a thread's
 *  stack at exit, created at install; cp_thread_key_ready says whether it exists. */
extern pthread_key_t cp_thread_key CP_HIDDEN;
extern int cp_thread_key_ready CP_HIDDEN;
void cp_thread_release(void *region) CP_HIDDEN;

/* The ELF notes that mark a copy of the stub in a loaded object (owner "crashport"):
 * CP_MARK_STUB in every copy (install.c), CP_MARK_INTERPOSER in libcrashport.so only
 * (interpose.c). A preloaded libcrashport.so stands down before a copy compiled into the
 * program (install.c, cp_install_other_copy). */
#define CP_MARK_STUB 1u
#define CP_MARK_INTERPOSER 2u
typedef struct cp_mark_note {
    uint32_t name_size, description_size, type;
    char name[12]; /* "crashport\0", padded to 4 bytes */
    uint32_t description;
} cp_mark_note;

#endif /* CRASHPORT_STUB_STATE_H */
