/*
 * handlers.c: programs whose own signal handlers are installed AFTER crashport (its LD_PRELOAD
 * constructor runs first), each doing what real runtimes do. Under crashport each must die, or
 * survive, exactly as without it, and a report must name the original fault.
 *
 *   reraise      a handler on its own altstack, SA_NODEFER: prints, restores the old action
 *                and raise()s (Python's faulthandler does this)
 *   faulting     a handler (no SA_NODEFER) that faults itself
 *   other        a handler that raises a different signal (SIGBUS, default action)
 *   loop         a handler (SA_NODEFER) that raises the signal again and again, never resetting
 *   nested-jump  a handler that faults inside itself; the nested run siglongjmps out; then a
 *                real crash
 *   ignore       SIGSEGV set to SIG_IGN, then a fault (the kernel kills anyway)
 *   in-handler   a handler that calls sigaction from inside itself and recovers by siglongjmp;
 *                then the program restores the default and crashes
 *   recover-pc   a handler that repairs the context (skips the faulting instruction), 1000 times,
 *                then exits 0 (the JVM does this for every implicit null check)
 *   storm        4 threads set and reset SIGSEGV's action 1,000,000 times in all while the main
 *                thread takes 20,000 faults that the current action recovers; exits 0
 *   tiny-stack   a handler on an alternate stack of 4 KiB that recurses deeply
 *   api          what sigaction, signal, sysv_signal and sigset return, as without crashport;
 *                prints "api ok" and exits 0
 *   parked       a thread faults and parks inside the handler (pause), then main crashes: the
 *                parked thread unwinds through the frame crashport built for the handler
 *   bypass       a SIGBUS handler installed with the raw rt_sigaction system call (invisible to
 *                crashport until the crash), then a SIGSEGV crash
 *
 * Every crash goes through crash_outer -> crash_middle -> crash_inner (a NULL store).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static int *volatile nowhere;
static struct sigaction saved;
static sigjmp_buf jump;
static volatile sig_atomic_t depth;

__attribute__((noinline)) void crash_inner(void) { *nowhere = 1; }
__attribute__((noinline)) void crash_middle(void) { crash_inner(); __asm__ volatile(""); }
__attribute__((noinline)) void crash_outer(void) { crash_middle(); __asm__ volatile(""); }

static void say(const char *text) { (void)!write(2, text, strlen(text)); }

static void install(void (*handler)(int, siginfo_t *, void *), int flags)
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &saved);
}

static void own_altstack(size_t size)
{
    stack_t stack = {.ss_sp = malloc(size), .ss_size = size, .ss_flags = 0};
    sigaltstack(&stack, NULL);
}

void reraise_handler(int signo, siginfo_t *info, void *context)
{
    (void)info, (void)context;
    say("reraise_handler ran\n");
    sigaction(signo, &saved, NULL);
    raise(signo);
}

void faulting_handler(int signo, siginfo_t *info, void *context)
{
    (void)signo, (void)info, (void)context;
    say("faulting_handler ran\n");
    *(volatile int *)(uintptr_t)0x10 = 2;
}

void other_handler(int signo, siginfo_t *info, void *context)
{
    (void)signo, (void)info, (void)context;
    say("other_handler ran\n");
    raise(SIGBUS);
}

void loop_handler(int signo, siginfo_t *info, void *context)
{
    (void)info, (void)context;
    if (depth++ == 0) say("loop_handler ran\n");
    raise(signo);
}

void nested_handler(int signo, siginfo_t *info, void *context)
{
    (void)signo, (void)context;
    if (info->si_addr == (void *)(uintptr_t)0x20) {
        siglongjmp(jump, 1); /* the nested fault: jump out of both */
    }
    say("nested_handler ran\n");
    *(volatile int *)(uintptr_t)0x20 = 3;
}

void in_handler_handler(int signo, siginfo_t *info, void *context)
{
    (void)info, (void)context;
    struct sigaction query;
    sigaction(signo, NULL, &query); /* async-signal-safe, even interposed */
    if (query.sa_sigaction == in_handler_handler) say("in_handler_handler sees itself\n");
    siglongjmp(jump, 1);
}

static volatile uint64_t skipped;

void skip_handler(int signo, siginfo_t *info, void *context)
{
    (void)signo, (void)info;
    ucontext_t *uc = context;
    uc->uc_mcontext.gregs[REG_RIP] += 2; /* past `mov (%rax),%eax`: 8b 00 */
    skipped++;
}

void skip_handler_b(int signo, siginfo_t *info, void *context) { skip_handler(signo, info, context); }

static int load_null(void)
{
    int value = 7;
    __asm__ volatile("xor %%eax, %%eax\n\t.byte 0x8b, 0x00\n\t" : "=a"(value) : : "memory");
    return value;
}

static volatile int stop_storm;

static void *storm_thread(void *argument)
{
    (void)argument;
    struct sigaction a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.sa_sigaction = skip_handler;
    b.sa_sigaction = skip_handler_b;
    a.sa_flags = b.sa_flags = SA_SIGINFO;
    sigemptyset(&a.sa_mask);
    sigfillset(&b.sa_mask);
    sigdelset(&b.sa_mask, SIGSEGV);
    for (int i = 0; i < 250000; i++) {
        struct sigaction old;
        sigaction(SIGSEGV, (i & 1) ? &a : &b, &old);
        if (old.sa_sigaction != skip_handler && old.sa_sigaction != skip_handler_b) {
            say("storm: torn or foreign action read back\n");
            _exit(3);
        }
    }
    return NULL;
}

__attribute__((noinline)) int recurse(int n)
{
    volatile char pad[256];
    pad[0] = (char)n;
    return n <= 0 ? pad[0] : recurse(n - 1) + pad[0];
}

void tiny_handler(int signo, siginfo_t *info, void *context)
{
    (void)signo, (void)info, (void)context;
    recurse(1000);
    _exit(4);
}

void bypass_handler(int signo) { (void)signo; }

/* The kernel's x86_64 struct sigaction, for the raw system call; libc's restorer is not
 * reachable from here, so this one is ours: `mov $15, %eax; syscall`. */
__asm__(".text\nbypass_restorer:\n    mov $15, %eax\n    syscall\n");
extern void bypass_restorer(void);

static void install_raw_sigbus(void)
{
    struct {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        uint64_t mask;
    } action = {bypass_handler, 0x04000000 /* SA_RESTORER */, bypass_restorer, 0};
    syscall(SYS_rt_sigaction, SIGBUS, &action, NULL, 8);
}

static int check(int ok, const char *what)
{
    if (!ok) fprintf(stderr, "api: %s\n", what);
    return ok;
}

void plain_handler(int signo) { (void)signo; }

/* The interposed functions answer as libc's would without crashport. */
static int api(void)
{
    int ok = 1;
    struct sigaction query;
    ok &= check(sigaction(SIGSEGV, NULL, &query) == 0 && query.sa_handler == SIG_DFL, "first query is SIG_DFL");
    ok &= check(signal(SIGSEGV, plain_handler) == SIG_DFL, "signal returns SIG_DFL first");
    ok &= check(sigaction(SIGSEGV, NULL, &query) == 0 && query.sa_handler == plain_handler &&
                    (query.sa_flags & SA_RESTART) && sigismember(&query.sa_mask, SIGSEGV) == 1,
                "signal's action has SA_RESTART and blocks itself");
    ok &= check(sysv_signal(SIGSEGV, SIG_IGN) == plain_handler, "sysv_signal returns the previous handler");
    ok &= check(sigaction(SIGSEGV, NULL, &query) == 0 && (query.sa_flags & SA_RESETHAND) && (query.sa_flags & SA_NODEFER),
                "sysv_signal is one-shot");
    ok &= check(sigset(SIGSEGV, SIG_HOLD) == SIG_IGN, "sigset(SIG_HOLD) returns the handler");
    ok &= check(sigset(SIGSEGV, SIG_DFL) == SIG_HOLD, "sigset after SIG_HOLD returns SIG_HOLD");
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    ok &= check(sigismember(&mask, SIGSEGV) == 0, "sigset unblocks");
    struct sigaction full;
    memset(&full, 0, sizeof full);
    full.sa_handler = plain_handler;
    sigfillset(&full.sa_mask);
    sigaction(SIGSEGV, &full, NULL);
    ok &= check(sigaction(SIGSEGV, NULL, &query) == 0 && sigismember(&query.sa_mask, SIGKILL) == 0 &&
                    sigismember(&query.sa_mask, SIGSTOP) == 0 && sigismember(&query.sa_mask, SIGBUS) == 1,
                "SIGKILL and SIGSTOP are never in a handler's mask");
    signal(SIGSEGV, SIG_DFL);
    ok &= check(signal(0, SIG_DFL) == SIG_ERR && signal(SIGKILL, plain_handler) == SIG_ERR, "bad signals refused");
    ok &= check(signal(SIGUSR1, plain_handler) == SIG_DFL && signal(SIGUSR1, SIG_DFL) == plain_handler,
                "other signals pass through");
    return ok;
}

static volatile sig_atomic_t parked;

void park_handler(int signo, siginfo_t *info, void *context)
{
    (void)context;
    if (info->si_addr == (void *)(uintptr_t)0x30) {
        parked = 1;
        for (;;) pause();
    }
    signal(signo, SIG_DFL); /* the real crash: give up */
}

__attribute__((noinline)) void worker_fault(void) { *(volatile int *)(uintptr_t)0x30 = 5; }

static void *worker_thread(void *argument)
{
    (void)argument;
    worker_fault();
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "reraise") == 0) {
        own_altstack(64 * 1024);
        install(reraise_handler, SA_NODEFER | SA_ONSTACK);
    } else if (strcmp(mode, "faulting") == 0) {
        install(faulting_handler, 0);
    } else if (strcmp(mode, "other") == 0) {
        install(other_handler, 0);
    } else if (strcmp(mode, "loop") == 0) {
        install(loop_handler, SA_NODEFER | SA_ONSTACK);
    } else if (strcmp(mode, "nested-jump") == 0) {
        install(nested_handler, SA_NODEFER);
        if (sigsetjmp(jump, 1) == 0) {
            crash_outer();
        }
        say("nested-jump: recovered\n");
        signal(SIGSEGV, SIG_DFL);
    } else if (strcmp(mode, "ignore") == 0) {
        signal(SIGSEGV, SIG_IGN);
    } else if (strcmp(mode, "in-handler") == 0) {
        install(in_handler_handler, 0);
        if (sigsetjmp(jump, 1) == 0) {
            crash_outer();
        }
        sigaction(SIGSEGV, &saved, NULL);
    } else if (strcmp(mode, "recover-pc") == 0) {
        install(skip_handler, 0);
        for (int i = 0; i < 1000; i++) load_null();
        printf("recovered %llu\n", (unsigned long long)skipped);
        return 0;
    } else if (strcmp(mode, "storm") == 0) {
        install(skip_handler, 0);
        pthread_t threads[4];
        for (int i = 0; i < 4; i++) pthread_create(&threads[i], NULL, storm_thread, NULL);
        for (int i = 0; i < 20000; i++) load_null();
        for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
        printf("storm recovered %llu\n", (unsigned long long)skipped);
        return 0;
    } else if (strcmp(mode, "api") == 0) {
        if (!api()) return 1;
        printf("api ok\n");
        return 0;
    } else if (strcmp(mode, "parked") == 0) {
        install(park_handler, 0);
        pthread_t worker;
        pthread_create(&worker, NULL, worker_thread, NULL);
        while (!parked) usleep(1000);
    } else if (strcmp(mode, "bypass") == 0) {
        install_raw_sigbus();
    } else if (strcmp(mode, "tiny-stack") == 0) {
        own_altstack(4096);
        install(tiny_handler, SA_ONSTACK);
    } else {
        fprintf(stderr, "usage: handlers MODE\n");
        return 2;
    }
    crash_outer();
    return 0;
}
