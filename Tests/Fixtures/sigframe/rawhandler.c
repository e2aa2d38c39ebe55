// Signal frames for EndToEndTests (SignalFrameTests): stacks that only an unwind across the
// kernel's signal frame, onto the stack the signal interrupted, can report. argv[1] picks:
//
// reraise  main -> level_one -> level_two -> fault_here stores through NULL. Before that, a
//          SIGSEGV handler is installed with the raw rt_sigaction system call (no libc wrapper
//          to interpose), with its own restorer (mov $15,%eax; syscall, not glibc's
//          __restore_rt) and SA_ONSTACK on a sigaltstack of its own: it prints a line, puts
//          back the action it replaced (crashport's, when run under it) and raises SIGSEGV
//          again, so the report is taken on the alternate stack, inside the handler.
// parked   a worker thread (worker -> worker_loop -> spin_here) is interrupted by SIGUSR1,
//          whose SA_ONSTACK handler, on the thread's own sigaltstack, blocks in pause(); then
//          main crashes through NULL (level_one -> level_two -> fault_here).
// nested   as parked, but the SIGUSR1 handler raises SIGUSR2, whose handler (on the same
//          altstack, below it) blocks in pause(): two signal frames on one thread.
// forged   main builds a fake rt_sigframe on its stack whose ucontext points back at itself
//          (rip the restorer, rsp the ucontext) and faults with rsp at it: an unwind that
//          followed it without a bound would never end.
// garbage  the same with garbage saved registers.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

// The kernel's struct sigaction for rt_sigaction (not glibc's).
struct kernel_sigaction {
    void (*handler)(int, siginfo_t *, void *);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
};

void fixture_restorer(void);
__asm__(".text\n"
        ".globl fixture_restorer\n"
        ".type fixture_restorer, @function\n"
        "fixture_restorer:\n"
        "    mov $15, %eax\n"
        "    syscall\n"
        ".size fixture_restorer, . - fixture_restorer\n");

// Sets rsp to its argument, then stores through NULL. Its CFI stays the entry state (the return
// address at rsp), so an unwinder takes the word at the new rsp for the return address.
void forged_fault(uint64_t *frame);
__asm__(".text\n"
        ".globl forged_fault\n"
        ".type forged_fault, @function\n"
        "forged_fault:\n"
        "    .cfi_startproc\n"
        "    mov %rdi, %rsp\n"
        "    movl $0, 0\n"
        "    ud2\n"
        "    .cfi_endproc\n"
        ".size forged_fault, . - forged_fault\n");

volatile int *volatile target;
volatile unsigned long spins;
static volatile sig_atomic_t ready, parked;
static struct kernel_sigaction replaced;

static void write_line(const char *text) { (void)!write(2, text, strlen(text)); }

static void use_own_altstack(void) {
    size_t size = 64 * 1024;
    void *memory = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) _exit(90);
    stack_t stack = {.ss_sp = memory, .ss_size = size};
    if (sigaltstack(&stack, NULL) != 0) _exit(91);
}

__attribute__((noinline)) void raw_handler(int signal, siginfo_t *info, void *context) {
    (void)info, (void)context;
    write_line("rawhandler: SIGSEGV in the raw handler, re-raising\n");
    syscall(SYS_rt_sigaction, signal, &replaced, NULL, 8);
    raise(signal);
    write_line("rawhandler: raise returned\n");  // not reached; keeps raise() from being a tail call
}

__attribute__((noinline)) int fault_here(int x) {
    *target = x;
    return x + 1;
}

__attribute__((noinline)) int level_two(int x) { return fault_here(x * 3) + 1; }

__attribute__((noinline)) int level_one(int x) { return level_two(x + 2) * 2; }

__attribute__((noinline)) void parked_handler(int signal, siginfo_t *info, void *context) {
    (void)signal, (void)info, (void)context;
    parked = 1;
    for (;;) pause();
}

__attribute__((noinline)) void nesting_handler(int signal, siginfo_t *info, void *context) {
    (void)signal, (void)info, (void)context;
    raise(SIGUSR2);
    write_line("rawhandler: SIGUSR2 handler returned\n");  // not reached; no tail call
}

__attribute__((noinline)) void spin_here(void) {
    for (;;) spins++;
}

__attribute__((noinline)) void worker_loop(void) {
    use_own_altstack();
    ready = 1;
    spin_here();
}

static void *worker(void *argument) {
    (void)argument;
    worker_loop();
    return NULL;
}

static int forged(int garbage) {
    uint64_t frame[64];
    for (int i = 0; i < 64; i++) frame[i] = 0x4141414141414141ull;
    uint64_t *ucontext = frame + 1;
    frame[0] = (uint64_t)(uintptr_t)fixture_restorer;
    // uc_flags, uc_link, uc_stack (5 words), then the saved registers: rsp is the 16th, rip
    // the 17th.
    ucontext[5 + 15] = garbage ? 0x4141414141410000ull : (uint64_t)(uintptr_t)ucontext;
    ucontext[5 + 16] = garbage ? 0x4141ull : (uint64_t)(uintptr_t)fixture_restorer;
    forged_fault(frame);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "reraise") == 0) {
        use_own_altstack();
        struct kernel_sigaction action = {
            .handler = raw_handler,
            .flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTORER,
            .restorer = fixture_restorer,
        };
        if (syscall(SYS_rt_sigaction, SIGSEGV, &action, &replaced, 8) != 0) return 92;
        return level_one(argc) < 0;
    }
    if (strcmp(mode, "parked") == 0 || strcmp(mode, "nested") == 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = parked_handler;
        action.sa_flags = SA_SIGINFO | SA_ONSTACK;
        if (strcmp(mode, "nested") == 0) {
            sigaction(SIGUSR2, &action, NULL);
            action.sa_sigaction = nesting_handler;
        }
        sigaction(SIGUSR1, &action, NULL);
        pthread_t thread;
        if (pthread_create(&thread, NULL, worker, NULL) != 0) return 93;
        while (!ready) sched_yield();
        pthread_kill(thread, SIGUSR1);
        while (!parked) sched_yield();
        return level_one(argc) < 0;
    }
    if (strcmp(mode, "forged") == 0 || strcmp(mode, "garbage") == 0) return forged(strcmp(mode, "garbage") == 0);
    fprintf(stderr, "usage: rawhandler reraise|parked|nested|forged|garbage\n");
    return 2;
}
