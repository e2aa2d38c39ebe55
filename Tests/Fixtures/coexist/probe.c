/*
 * probe.c: a program that owns SIGSEGV for its own work: it probes addresses and recovers from
 * the faults with siglongjmp, then crashes for real. `probe below` installs its handler first
 * and then crashport (CRASHPORT_INSTALL=manual, crashport_install()), so the handler is below
 * crashport; `probe above` lets crashport install from its constructor and installs its handler
 * afterwards, chaining real crashes to the previous action (crashport's), as SDKs do.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crashport.h"

static sigjmp_buf probe_jump;
static volatile sig_atomic_t probing;
static struct sigaction previous;

static void probe_handler(int signo, siginfo_t *info, void *context) {
    if (probing) siglongjmp(probe_jump, 1);
    if (previous.sa_flags & SA_SIGINFO && previous.sa_sigaction != NULL) {
        previous.sa_sigaction(signo, info, context); /* chain (the "above" order) */
        return;
    }
    /* Not a probe and nothing to chain to: give up the way most programs do. */
    signal(signo, SIG_DFL);
}

static int probe(volatile int *address) {
    probing = 1;
    if (sigsetjmp(probe_jump, 1) == 0) {
        int value = *address;
        probing = 0;
        return value;
    }
    probing = 0;
    return -1;
}

static int *volatile nowhere; /* NULL, but the compiler cannot prove it */

__attribute__((noinline)) void real_crash(void) { *nowhere = 7; }

int main(int argc, char **argv) {
    int below = argc > 1 && strcmp(argv[1], "below") == 0;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = probe_handler;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous);
    if (below) {
        memset(&previous, 0, sizeof previous); /* below crashport: nothing of ours to chain to */
        if (crashport_install(NULL) != 0) return 3;
    }
    int recovered = 0;
    for (int i = 1; i <= 3; i++) recovered += probe((volatile int *)(uintptr_t)(0x1000 * i)) == -1;
    fprintf(stderr, "probe recovered %d\n", recovered);
    real_crash();
    return 0;
}
