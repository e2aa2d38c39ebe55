/*
 * sigcost.c: what crashport's kept signal slot costs a program that uses signals for its own
 * work. tools/bench runs it as is and under `crashport run` (the stub preloaded, connected to a
 * real watcher) and compares. Prints one line of key=value figures (one measurement; tools/bench
 * takes the median over its runs):
 *
 *   sigcost sigaction   sigaction_segv_ns   sigaction(SIGSEGV, &act, &old), a signal crashport
 *                                           handles: under crashport only the program's own
 *                                           action changes, no system call
 *                       sigaction_usr1_ns   sigaction(SIGUSR1, &act, &old), which crashport
 *                                           passes straight to libc's
 *   sigcost fault [N]   fault_ns            one of N (100,000) SIGSEGVs recovered by a handler that moves the pc
 *                                           past the faulting load in the ucontext and returns
 *   sigcost longjmp [N] fault_ns            one of N (100,000) SIGSEGVs recovered by siglongjmp to a sigsetjmp
 *                                           taken before each fault (savemask 1: the sigsetjmp's
 *                                           sigprocmask is in both runs alike)
 *
 * The handlers are installed as the JVM installs its own: SA_SIGINFO, no SA_ONSTACK. Each
 * faulting load reads address 0 (SEGV_MAPERR), as an implicit null check does.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

/* The faulting load, in assembly so its bounds are known exactly: `movl (%rdi), %eax` (2 bytes,
 * 8b 07) from sigcost_load to sigcost_load_end. The fault handler resumes at the end label. */
__asm__(".text\n"
        ".globl sigcost_load\n"
        ".type sigcost_load, @function\n"
        "sigcost_load:\n"
        "    movl (%rdi), %eax\n"
        ".globl sigcost_load_end\n"
        "sigcost_load_end:\n"
        "    ret\n"
        ".size sigcost_load, . - sigcost_load\n");
int sigcost_load(const volatile int *address);
extern const char sigcost_load_end[];

static double now_ns(void)
{
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return time.tv_sec * 1e9 + time.tv_nsec;
}

static volatile unsigned long recovered;
static sigjmp_buf jump;

/* Steps over the faulting load, with 0 as what it read. Anything else is a real crash. */
static void skip_handler(int signo, siginfo_t *info, void *context)
{
    ucontext_t *uc = context;
    if (uc->uc_mcontext.gregs[REG_RIP] != (greg_t)(uintptr_t)sigcost_load) {
        signal(signo, SIG_DFL);
        return;
    }
    (void)info;
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)sigcost_load_end;
    uc->uc_mcontext.gregs[REG_RAX] = 0;
    recovered++;
}

static void jump_handler(int signo, siginfo_t *info, void *context)
{
    (void)signo;
    (void)info;
    (void)context;
    recovered++;
    siglongjmp(jump, 1);
}

static void install(void (*handler)(int, siginfo_t *, void *))
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, NULL) != 0) {
        perror("sigaction");
        exit(1);
    }
}

static double sigaction_ns(int signo)
{
    enum { calls = 200000 };
    struct sigaction action, old;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_IGN;
    sigemptyset(&action.sa_mask);
    /* Alternate two actions so every call really changes something. */
    double start = now_ns();
    for (int i = 0; i < calls; i++) {
        action.sa_flags = i & 1 ? SA_RESTART : 0;
        sigaction(signo, &action, &old);
    }
    double per_call = (now_ns() - start) / calls;
    signal(signo, SIG_DFL);
    return per_call;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    long faults = argc > 2 ? atol(argv[2]) : 100000;
    if (strcmp(mode, "sigaction") == 0) {
        double segv = sigaction_ns(SIGSEGV);
        double usr1 = sigaction_ns(SIGUSR1);
        printf("sigaction_segv_ns=%.1f sigaction_usr1_ns=%.1f\n", segv, usr1);
        return 0;
    }
    int jumping = strcmp(mode, "longjmp") == 0;
    if (!jumping && strcmp(mode, "fault") != 0) {
        fprintf(stderr, "usage: sigcost sigaction | fault [N] | longjmp [N]\n");
        return 64;
    }
    install(jumping ? jump_handler : skip_handler);
    static const volatile int *volatile null_pointer; /* NULL, unknown to the compiler */
    double start = now_ns();
    for (long i = 0; i < faults; i++) {
        if (jumping) {
            if (sigsetjmp(jump, 1) == 0) {
                sigcost_load(null_pointer);
            }
        } else {
            sigcost_load(null_pointer);
        }
    }
    double per_fault = (now_ns() - start) / faults;
    if (recovered != (unsigned long)faults) {
        fprintf(stderr, "sigcost: %lu faults recovered, %ld expected\n", recovered, faults);
        return 1;
    }
    printf("fault_ns=%.1f\n", per_fault);
    return 0;
}
