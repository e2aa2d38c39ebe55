/*
 * forward.h: running the program's own action for a signal the way the kernel would have
 * (forward.c), for the signal entry (entry.c). Runs in signal context: the rules at the top of
 * forward.c apply (raw system calls, no libc, no lock, no allocation). What forward.c needs of
 * the reporter (the fault it names, the report) is report.h's: forward.c calls report.c, never
 * entry.c, and report.c calls neither.
 */
#ifndef CRASHPORT_STUB_FORWARD_H
#define CRASHPORT_STUB_FORWARD_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>

#include "crashport_protocol.h"
#include "report.h"
#include "stub_state.h"

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

/** The synchronous signals the kernel would block in the program handler this thread runs
 *  now, which crashport keeps unblocked for real (so that a fault inside it reaches crashport):
 *  part of the mask the program reads back. 0 outside a program handler. Not async-signal
 *  context only: the interposed pthread_sigmask calls it. */
uint64_t cp_forward_virtually_blocked(void) CP_HIDDEN;

/** The program unblocked `signals` (a kernel sigset) inside the handler it runs: as the kernel
 *  would, a fault of one of them now goes to the program's action (a JVM's error reporting
 *  catches its own secondary faults so), not to the kill a blocked fault gets. */
void cp_forward_unblocked(uint64_t signals) CP_HIDDEN;

#endif /* CRASHPORT_STUB_FORWARD_H */
