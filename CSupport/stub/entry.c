/*
 * entry.c: the signal entry, crashport's SA_SIGINFO handler: the function the kernel calls in a
 * crashing process for every signal crashport handles. It decides, and does nothing else; the
 * crash path reads one way from here: entry.c → forward.c → report.c, never back.
 *
 * What it decides: crashport owns the kernel's slot of the signals it handles; the program's own
 * action is kept by the stub (actions.h). A signal that arrives inside a program handler
 * crashport is running on this thread (a re-raise, an abort, a fault of the handler itself) goes
 * to forward.c, which reports the original fault. A signal the program installed a handler for
 * after crashport (or a forward-first one) goes first to that handler, run by forward.c as the
 * kernel would; only what it does not recover from is reported. A signal another process sent
 * that the program ignores is dropped, as the kernel would. Anything else is a crash: report.c
 * reports it (the first crashing thread reports; another one waits for that report, bounded),
 * then forward.c does with the signal what the kernel would have done with the program's
 * action: run its handler (crashport keeps the slot), or the default action (same signal, core
 * dump and exit status as without crashport).
 *
 * What it may do:
 *  - call cp_safe_* (safe.h) and cp_actions_* (actions.h), both static inline: raw system calls
 *    and a tiny libc; forward.c's cp_forward_* (forward.h) and report.c's cp_fault_copy and
 *    cp_report_fault (report.h); nothing else;
 *  - read the configuration and the program's actions in cp_state, and a few hundred bytes of
 *    (alternate) stack.
 *
 * What it must never do:
 *  - call libc or any other library function: it may hold the lock we would need (malloc,
 *    stdio, the dynamic loader), or touch errno. tools/check-stub-safety fails the build if the
 *    crash path's object (entry.o, forward.o and report.o linked as one) references any symbol
 *    beyond memcpy/memset/memmove;
 *  - allocate, lock, or wait: the waits of a report are report.c's, each bounded;
 *  - report, copy the fault's memory or send anything itself: that is report.c's;
 *  - change the program's actions or the kernel's slot: that is forward.c's (the default
 *    action) and interpose.c's (the program's sigaction).
 */
/* The crash path's code-generation rules, in the source for builds that cannot pass
 * tools/build-stub's flags (SwiftPM's, CCrashPort): no stack protector, no sanitizer. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((no_stack_protector, disable_sanitizer_instrumentation)), apply_to = function)
#endif
#define _GNU_SOURCE
#include <signal.h>   /* siginfo_t, SIG_IGN */
#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h> /* ucontext_t */

#include "actions.h"
#include "entry.h"
#include "forward.h"
#include "report.h"
#include "safe.h"
#include "stub_state.h"

void cp_handler_signal(int signo, siginfo_t *info, void *context)
{
    cp_stub_state *state = &cp_state;
    ucontext_t *uc = context;
    if (signo <= 0 || signo >= CP_SIGNAL_LIMIT) {
        return;
    }
    uint32_t tid = cp_safe_gettid();

    /* Inside a program handler crashport is running on this thread: a re-raise, an abort(), a
     * fault of the handler itself. (A signal another process sent is just a signal.) */
    cp_forward_frame *running = cp_forward_active(tid, uc);
    if (running != NULL &&
        !(info != NULL && info->si_code <= 0 && (uint32_t)info->si_pid != cp_safe_getpid())) {
        cp_forward_nested(state, running, tid, signo, info, uc);
        return;
    }

    cp_kernel_sigaction action;
    uint32_t changes = 0;
    cp_actions_load(state, signo, &action, &changes);
    bool function = action.handler > (uint64_t)(uintptr_t)SIG_IGN;
    cp_reraise came_back;
    bool again = function && cp_forward_came_back(tid, signo, info, uc, &came_back);

    /* The program's handler first, as the kernel would run it, when the program installed it
     * after crashport (or the signal is forward-first): only what it does not recover from is
     * a crash. A handler installed before crashport runs after the report. */
    if (function && !again && (changes != 0 || (state->forward_first & (1ull << signo)))) {
        cp_forward_deliver(state, tid, signo, info, uc, &action, NULL);
        return;
    }
    if (action.handler == (uint64_t)(uintptr_t)SIG_IGN && !(info != NULL && info->si_code > 0)) {
        return; /* sent, and the program ignores it: the kernel would have discarded it */
    }
    cp_fault fault;
    cp_fault_copy(&fault, signo, info, uc);
    cp_report_fault(state, tid, &fault, again ? &came_back : NULL, again ? CP_CRASH_FORWARD_FIRST : 0);
    cp_forward_deliver(state, tid, signo, info, uc, &action, &fault);
}

#if defined(__clang__)
#pragma clang attribute pop
#endif
