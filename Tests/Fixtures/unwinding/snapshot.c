// A captured snapshot for UnwindingTests, taken by the program itself: inner() (called from
// main through outer() and middle(), none inlined, none a tail call) saves its registers with
// getcontext and writes to argv[1]: 27 little-endian u64 in struct user_regs_struct order, the
// stack's start address and length (u64 each), then the stack bytes from just below rsp to
// the end of its mapping (at most 64 KiB). /proc/self/maps is copied to argv[2].
// With a third argument "signal", the snapshot is taken instead in a SIGSEGV handler (on the
// thread's own stack) for a fault in crash_here(), called from main through crash_caller().
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static const char *regs_path, *maps_path;

static void copy_maps(void) {
    FILE *in = fopen("/proc/self/maps", "r"), *out = fopen(maps_path, "w");
    char line[4096];
    while (in && out && fgets(line, sizeof line, in)) fputs(line, out);
    if (in) fclose(in);
    if (out) fclose(out);
}

static uint64_t stack_end(uint64_t sp) {
    FILE *in = fopen("/proc/self/maps", "r");
    char line[4096];
    uint64_t found = sp;
    unsigned long start, end;
    while (in && fgets(line, sizeof line, in)) {
        if (sscanf(line, "%lx-%lx", &start, &end) == 2 && start <= sp && sp < end) found = end;
    }
    if (in) fclose(in);
    return found;
}

__attribute__((noinline)) static int capture(const ucontext_t *context, int x) {
    const greg_t *g = context->uc_mcontext.gregs;
    // struct user_regs_struct: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi
    // orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs
    uint64_t regs[27] = {0};
    const int order[] = {REG_R15, REG_R14, REG_R13, REG_R12, REG_RBP, REG_RBX, REG_R11, REG_R10,
                         REG_R9,  REG_R8,  REG_RAX, REG_RCX, REG_RDX, REG_RSI, REG_RDI};
    for (int i = 0; i < 15; i++) regs[i] = (uint64_t)g[order[i]];
    regs[16] = (uint64_t)g[REG_RIP];
    regs[18] = (uint64_t)g[REG_EFL];
    regs[19] = (uint64_t)g[REG_RSP];
    uint64_t start = regs[19] - 128, end = stack_end(regs[19]);
    if (end - start > 65536) end = start + 65536;
    uint64_t length = end - start;
    FILE *out = fopen(regs_path, "wb");
    if (!out) return -1;
    fwrite(regs, sizeof regs, 1, out);
    fwrite(&start, 8, 1, out);
    fwrite(&length, 8, 1, out);
    fwrite((const void *)(uintptr_t)start, 1, length, out);
    fclose(out);
    copy_maps();
    return x * 2;
}

__attribute__((noinline)) int inner(int x) {
    ucontext_t context;
    getcontext(&context);
    return capture(&context, x);
}

__attribute__((noinline)) int middle(int x) { return inner(x + 1) * 3 + 1; }

__attribute__((noinline)) int outer(int x) { return middle(x + 2) * 5 + 2; }

__attribute__((noinline)) void segv_handler(int signal, siginfo_t *info, void *unused) {
    (void)signal, (void)info, (void)unused;
    ucontext_t context;
    getcontext(&context);
    _exit(capture(&context, 1) < 0);
}

volatile int *volatile target;

__attribute__((noinline)) int crash_here(int x) {
    int y = x * 7 + 1;
    *target = y;
    return y;
}

__attribute__((noinline)) int crash_caller(int x) { return crash_here(x + 3) * 5 + 2; }

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    regs_path = argv[1];
    maps_path = argv[2];
    if (argc > 3 && strcmp(argv[3], "signal") == 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = segv_handler;
        action.sa_flags = SA_SIGINFO;
        sigaction(SIGSEGV, &action, NULL);
        return crash_caller(argc) < 0;
    }
    return outer(argc) < 0;
}
