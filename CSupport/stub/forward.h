/*
 * forward.h: running the program's own action for a signal the way the kernel would have
 * (forward.c), and the report of a fault (handler.c). Both run in signal context: the rules of
 * handler.c apply (raw system calls, no libc, no lock, no allocation).
 */
#ifndef CRASHPORT_STUB_FORWARD_H
#define CRASHPORT_STUB_FORWARD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
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

/** Copies a delivered signal (info may be NULL, context may be NULL). */
void cp_fault_copy(cp_fault *fault, int signo, const siginfo_t *info, const ucontext_t *context) CP_HIDDEN;

/** Reports `original` (with `reraise` when a program handler ran on it first; may be NULL) unless
 *  another thread is reporting (then waits for it, bounded) or this process already reported.
 *  Returns after the watcher's verdict or the timeout. */
void cp_report_fault(cp_stub_state *state, uint32_t tid, const cp_fault *original, const cp_reraise *reraise,
                     uint32_t record_flags) CP_HIDDEN;

/** A program handler crashport is running on this thread, which the signal with `context`
 *  interrupted; NULL when there is none (or only stale ones: left by siglongjmp). */
typedef struct cp_forward_frame cp_forward_frame;
cp_forward_frame *cp_forward_active(uint32_t tid, const ucontext_t *context) CP_HIDDEN;

/** A signal that arrived inside a running program handler (`frame`): a re-raise, an abort, a
 *  fault of the handler itself. Reports the original fault, then does what the kernel would. */
void cp_forward_nested(cp_stub_state *state, cp_forward_frame *frame, uint32_t tid, int signo, siginfo_t *info,
                       ucontext_t *context) CP_HIDDEN;

/** The same fault straight back after a program handler returned from it, changing nothing:
 *  fills `reraise` (CAME_BACK) and returns true. */
bool cp_forward_came_back(uint32_t tid, int signo, const siginfo_t *info, const ucontext_t *context,
                          cp_reraise *reraise) CP_HIDDEN;

/** Does with the signal what the kernel would do with `action`: the default action or ignore,
 *  or a call of the program's handler on the stack the kernel would choose (this then does not
 *  return: the handler returns into a sigreturn of its own frame). When no stack can take the
 *  handler's frame, the kernel would kill the process: so does this, after reporting `original`
 *  (NULL: this signal). */
void cp_forward_deliver(cp_stub_state *state, uint32_t tid, int signo, siginfo_t *info, ucontext_t *context,
                        const cp_kernel_sigaction *action, const cp_fault *original) CP_HIDDEN;

/** The default action, as the kernel applies it: SIG_DFL in the kernel's slot, and the signal
 *  queued again to this thread (a fault recurs by itself on return). */
void cp_forward_die(int signo, const siginfo_t *info, uint32_t tid) CP_HIDDEN;

#endif /* CRASHPORT_STUB_FORWARD_H */
