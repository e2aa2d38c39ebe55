/*
 * overflow.c: runaway recursion until the stack overflows, for the stack-overflow verdict.
 *   main             recurse() on the main thread (the kernel's grows-down [stack])
 *   thread           recurse() on a pthread named "worker" (a guard page below its stack)
 *   main-handler     as main, with the program's own SIGSEGV handler on its own alternate
 *   thread-handler   as thread, likewise; the handler is a language runtime's: it says
 *                    "overflow.c: handler ran", resets SIGSEGV to SIG_DFL and returns, so the
 *                    fault comes back and kills the process with SIGSEGV
 *   probe            recurse_probed() on the "worker" pthread: 64 KiB frames, which a build with
 *                    -fstack-clash-protection probes page by page in the prologue, so the fault
 *                    is taken in the probe loop, before the frame is set up
 *   probe-helper     recurse_helper() on the "worker" pthread: each call has a 64 KiB frame
 *                    that a helper probes before the caller moves sp, as Rust's
 *                    __rust_probestack (and Windows' __chkstk) do, so the fault is taken inside
 *                    the helper, called from the prologue
 *   null             a NULL write (a fault that is not an overflow), for contrast
 * Without crashport every mode dies of SIGSEGV.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

volatile int sink;
static int with_handler;

/* Not a tail call (the pad is read after the call returns), so -O2 keeps every frame. */
NOINLINE int recurse(int depth) {
    volatile char pad[128];
    pad[depth % 128] = (char)depth;
    return recurse(depth + 1) + pad[0];
}

/* Large frames: with -fstack-clash-protection the prologue touches each page it allocates. */
NOINLINE int recurse_probed(int depth) {
    volatile char pad[64 << 10];
    pad[depth % sizeof pad] = (char)depth;
    return recurse_probed(depth + 1) + pad[0];
}

/* x86_64 assembly, as rustc emitted it before inline probes: the caller asks probestack to touch
 * every page of the 64 KiB it is about to allocate (rax bytes below the caller's sp), then moves
 * sp. Each has the CFI its compiler would give it: rbp frames, like __rust_probestack's. */
int recurse_helper(long depth);
__asm__(".text\n"
        ".globl recurse_helper\n"
        ".type recurse_helper, @function\n"
        "recurse_helper:\n"
        "  .cfi_startproc\n"
        "  push %rbp\n"
        "  .cfi_def_cfa_offset 16\n"
        "  .cfi_offset %rbp, -16\n"
        "  mov %rsp, %rbp\n"
        "  .cfi_def_cfa_register %rbp\n"
        "  mov $0x10000, %eax\n"
        "  call probestack\n"
        "  sub %rax, %rsp\n"
        "  inc %rdi\n"
        "  call recurse_helper\n"
        "  leave\n"
        "  .cfi_def_cfa %rsp, 8\n"
        "  ret\n"
        "  .cfi_endproc\n"
        ".size recurse_helper, .-recurse_helper\n"
        ".type probestack, @function\n"
        "probestack:\n"
        "  .cfi_startproc\n"
        "  push %rbp\n"
        "  .cfi_def_cfa_offset 16\n"
        "  .cfi_offset %rbp, -16\n"
        "  mov %rsp, %rbp\n"
        "  .cfi_def_cfa_register %rbp\n"
        "  mov %rax, %r11\n"
        "1:\n"
        "  sub $0x1000, %rsp\n"
        "  test %rsp, 8(%rsp)\n"
        "  sub $0x1000, %r11\n"
        "  cmp $0x1000, %r11\n"
        "  ja 1b\n"
        "  sub %r11, %rsp\n"
        "  test %rsp, 8(%rsp)\n"
        "  add %rax, %rsp\n"
        "  leave\n"
        "  .cfi_def_cfa %rsp, 8\n"
        "  ret\n"
        "  .cfi_endproc\n"
        ".size probestack, .-probestack\n");

/* A field of a NULL struct pointer (a store to 0 itself -O2 may delete as undefined). */
NOINLINE void write_null(void) { *(volatile int *)16 = 1; }

static void runtime_handler(int signo, siginfo_t *info, void *context) {
    (void)info; (void)context;
    static const char text[] = "overflow.c: handler ran\n";
    (void)!write(2, text, sizeof text - 1);
    signal(signo, SIG_DFL);
}

/* Each thread's alternate stack and the handler, as a runtime installs them. */
static void install_runtime_handler(void) {
    stack_t stack = {.ss_size = 64 << 10};
    stack.ss_sp = mmap(NULL, stack.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack.ss_sp == MAP_FAILED || sigaltstack(&stack, NULL) != 0) abort();
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = runtime_handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, NULL) != 0) abort();
}

static void *worker(void *argument) {
    pthread_setname_np(pthread_self(), "worker");
    if (with_handler) install_runtime_handler();
    const char *which = argument;
    sink = !which ? recurse(0) : strcmp(which, "probe") == 0 ? recurse_probed(0) : recurse_helper(0);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    with_handler = strstr(mode, "-handler") != NULL;
    if (strncmp(mode, "main", 4) == 0) {
        if (with_handler) install_runtime_handler();
        sink = recurse(0);
    } else if (strncmp(mode, "thread", 6) == 0) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, worker, NULL) != 0) return 2;
        pthread_join(thread, NULL);
    } else if (strcmp(mode, "probe") == 0 || strcmp(mode, "probe-helper") == 0) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, worker, (void *)mode) != 0) return 2;
        pthread_join(thread, NULL);
    } else if (strcmp(mode, "null") == 0) {
        write_null();
    } else {
        return 2;
    }
    return 0;
}
