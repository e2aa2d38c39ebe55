/*
 * report.h: what the reporter (report.c) offers the rest of the stub. The crash path calls one
 * way, entry.c → forward.c → report.c: this header is how the two above reach the reporter,
 * and report.c reaches neither of them. install.c, interpose.c and app.c use it too (the
 * sidecar connection, GOODBYE, a handled error's record).
 *
 * Everything here is made of raw system calls (safe.h), takes no lock and allocates nothing;
 * cp_fault_copy, cp_report_fault, cp_handler_goodbye and cp_handler_connect_sidecar run in
 * signal context, cp_report_error on a program thread (report.c says what each may do).
 */
#ifndef CRASHPORT_STUB_REPORT_H
#define CRASHPORT_STUB_REPORT_H

#include <signal.h>
#include <stdint.h>
#include <sys/un.h> /* struct sockaddr_un: a type only */
#include <ucontext.h>

#include "crashport_protocol.h"
#include "stub_state.h"

/* One signal as the kernel delivered it, copied: what a report names. */
typedef struct cp_fault {
    int32_t signo;
    uint32_t has_fpregs;
    siginfo_t info;
    greg_t gregs[NGREG]; /* uc_mcontext.gregs */
    uint8_t fpregs[512]; /* the FXSAVE image */
} cp_fault;

/** Copies a delivered signal (info may be NULL, context may be NULL). Runs in signal context. */
void cp_fault_copy(cp_fault *fault, int signo, const siginfo_t *info, const ucontext_t *context) CP_HIDDEN;

/** Reports `original` (with `reraise` when a program handler ran on it first; may be NULL) unless
 *  another thread is reporting (then waits for it, bounded) or this process already reported.
 *  Returns after the watcher's verdict or the timeout. Runs in signal context. */
void cp_report_fault(cp_stub_state *state, uint32_t tid, const cp_fault *original, const cp_reraise *reraise,
                     uint32_t record_flags) CP_HIDDEN;

/** Sends a handled error's ERROR record (the caller's registers in `fault`, signo 0) on the
 *  watcher connection and waits, bounded by the timeout, for the verdict: 0 once the watcher
 *  has its snapshot, -ENOTCONN without a connection, -ETIMEDOUT, or -errno of the send. Never
 *  reconnects or spools; one caller at a time (app.c serializes). Not signal context, but
 *  made of the same raw system calls (report.c). */
long cp_report_error(cp_stub_state *state, const void *fault, uint32_t tid) CP_HIDDEN;

/** Says GOODBYE on the watcher connection: the process that said HELLO exits normally with
 *  `status` (exit's or _exit's argument). At most once per process, never from a forked child
 *  on its parent's connection, never while a crash is reported, never waiting (report.c).
 *  Runs in signal context (a program may call _exit from its signal handler). */
void cp_handler_goodbye(cp_stub_state *state, int32_t status) CP_HIDDEN;

/** cp_handler_connect_sidecar's result when someone listens at the address, but as a uid it
 *  may not trust: neither 0 nor the process's effective uid at install (state->trusted_uid),
 *  nor, in a process whose real and effective ids are the same and that was not secure at
 *  install, its uid now. A setuid program's real user is never trusted. */
#define CP_CONNECT_UNTRUSTED (-10000)

/** Connects a new SOCK_SEQPACKET socket (SOCK_NONBLOCK | SOCK_CLOEXEC) to the sidecar at
 *  address, retrying while its backlog is full until deadline (CLOCK_MONOTONIC ns), then checks
 *  the listener with SO_PEERCRED. Returns the connected fd with *peer_pid and *peer_uid set (the
 *  kernel's word, never a message's), or -errno, or CP_CONNECT_UNTRUSTED (then *peer_uid says
 *  whose the listener is, and nothing stays open). Raw system calls only: runs in signal context
 *  (the reporter's reconnect), and install uses it too, so that both check the peer alike. */
long cp_handler_connect_sidecar(const cp_stub_state *state, const struct sockaddr_un *address, uint32_t length,
                                uint64_t deadline, int32_t *peer_pid, uint32_t *peer_uid) CP_HIDDEN;

#endif /* CRASHPORT_STUB_REPORT_H */
