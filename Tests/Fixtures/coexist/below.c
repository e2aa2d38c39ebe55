/*
 * below.c: a shared library whose constructor installs a SIGSEGV handler. Preloaded after the
 * stub (LD_PRELOAD="stub:below.so"), its constructor runs first, so its handler sits *below*
 * crashport in the chain. BELOW_MODE picks the handler's kind:
 *   exit42   SA_SIGINFO handler: writes "below-ran" and _exit(42)
 *   plain    plain handler (no SA_SIGINFO, no SA_ONSTACK): writes "below-plain-ran", _exit(43)
 *   crash    the handler itself crashes (null write inside the SIGSEGV handler)
 *   garbled  the saved action points at an address that is in no mapping
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void say(const char *text) { (void)!write(2, text, strlen(text)); }

__attribute__((noinline)) void below_handler(int signo, siginfo_t *info, void *context) {
    (void)signo; (void)info; (void)context;
    say("below-ran\n");
    _exit(42);
}

__attribute__((noinline)) void below_plain_handler(int signo) {
    (void)signo;
    say("below-plain-ran\n");
    _exit(43);
}

__attribute__((noinline)) void below_crashing_handler(int signo, siginfo_t *info, void *context) {
    (void)signo; (void)info; (void)context;
    say("below-crashing\n");
    *(volatile int *)16 = 1;
}

__attribute__((constructor)) static void install_below(void) {
    const char *mode = getenv("BELOW_MODE");
    if (mode == NULL) return;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    sigemptyset(&action.sa_mask);
    if (strcmp(mode, "exit42") == 0) {
        action.sa_sigaction = below_handler;
        action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    } else if (strcmp(mode, "plain") == 0) {
        action.sa_handler = below_plain_handler;
        action.sa_flags = 0;
    } else if (strcmp(mode, "crash") == 0) {
        action.sa_sigaction = below_crashing_handler;
        action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    } else if (strcmp(mode, "garbled") == 0) {
        action.sa_sigaction = (void (*)(int, siginfo_t *, void *))(uintptr_t)0x10; /* in no mapping */
        action.sa_flags = SA_SIGINFO;
    } else {
        return;
    }
    sigaction(SIGSEGV, &action, NULL);
}
