/* Writes the record-report seeds: crash records as the stub would send them, from this
 * process's own registers (getcontext) and 4 KiB of its stack, each followed by this process's
 * /proc/self/maps (the fuzz target's maps text), so the record's addresses fall in its maps:
 *   abort-with-message.bin  SIGABRT at abort() in libc, a (pointer, length) pair of a panic
 *                           message on the stack (what StackStrings looks for)
 *   segv-near-sp.bin        SIGSEGV (SEGV_MAPERR) 8 bytes below sp: the stack-overflow shape
 *   error-record.bin        an ERROR record (signo 0), as crashport_report_error sends it
 *   hang.bin                the same record marked as a hang the watcher saw (reserved = 1)
 *   cc -O0 -I CSupport/protocol/include Tests/Fuzz/make-record-seeds.c -o /tmp/record-seeds
 *   cd Tests/Fuzz/seeds/record-report && env -i /tmp/record-seeds
 * (an empty environment: the copy reaches the top of the stack, where the environment is) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include "crashport_protocol.h"
static cp_crash record;
static char maps[256 * 1024];
static size_t maps_size;

static void write_seed(const char *name, uint32_t type, int signo, int code, uint64_t fault, uint32_t reserved) {
    size_t size = offsetof(cp_crash, stack) + record.stack_size;
    record.header = (cp_header){CP_MAGIC, CP_VERSION, (uint32_t)size, type};
    record.signo = signo; record.code = code; record.fault_address = fault; record.reserved = reserved;
    record.sender_pid = code <= 0 ? record.pid : 0;
    FILE *f = fopen(name, "wb");
    fwrite(&record, 1, size, f);
    fwrite(maps, 1, maps_size, f);
    fclose(f);
}

static __attribute__((noinline)) void capture(const char *message) {
    /* A Rust panic's &str as its machinery keeps it on the stack: (pointer, length). */
    volatile uint64_t pair[2] = {(uint64_t)(uintptr_t)message, strlen(message)};
    ucontext_t uc; getcontext(&uc);
    greg_t *g = uc.uc_mcontext.gregs;
    /* user_regs_struct order: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs */
    uint64_t regs[27] = {g[REG_R15], g[REG_R14], g[REG_R13], g[REG_R12], g[REG_RBP], g[REG_RBX], g[REG_R11], g[REG_R10], g[REG_R9], g[REG_R8],
        g[REG_RAX], g[REG_RCX], g[REG_RDX], g[REG_RSI], g[REG_RDI], (uint64_t)-1, (uint64_t)(uintptr_t)&abort, 0x33, g[REG_EFL], g[REG_RSP], 0x2b, 0, 0, 0, 0, 0, 0};
    memcpy(record.regs, regs, sizeof regs);
    if (uc.uc_mcontext.fpregs) { memcpy(record.fpregs, uc.uc_mcontext.fpregs, 512); record.flags |= CP_CRASH_HAS_FPREGS; }
    record.stack_start = g[REG_RSP] - CP_RED_ZONE;
    record.stack_size = 4096;
    memcpy(record.stack, (void *)(uintptr_t)record.stack_start, record.stack_size);
    (void)pair[0];
}

int main(void) {
    int fd = open("/proc/self/maps", O_RDONLY);
    ssize_t got;
    while ((got = read(fd, maps + maps_size, sizeof maps - maps_size)) > 0) maps_size += (size_t)got;
    close(fd);
    /* On the stack, inside the copy: the fuzz target reads texts from the record's copy only. */
    char message[] = "panicked at src/main.rs:3:5: index out of bounds: the len is 3 but the index is 7";
    capture(message);
    record.pid = getpid(); record.tid = syscall(SYS_gettid);
    record.sender_uid = getuid(); record.arch = CP_ARCH_X86_64;
    struct timespec now; clock_gettime(CLOCK_REALTIME, &now); record.time_ns = now.tv_sec * 1000000000ull + now.tv_nsec;
    prctl(PR_GET_NAME, record.thread_name);
    record.chain_count = 1;
    record.chain[0] = (cp_chain_entry){SIGABRT, CP_CHAIN_HAS_PREVIOUS, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    write_seed("abort-with-message.bin", CP_MSG_CRASH, SIGABRT, -6, 0, 0);
    write_seed("segv-near-sp.bin", CP_MSG_CRASH, SIGSEGV, 1, record.regs[19] - 8, 0);
    write_seed("error-record.bin", CP_MSG_ERROR, 0, 0, 0, 0);
    write_seed("hang.bin", CP_MSG_CRASH, SIGABRT, -6, 5000, 1);
    return 0;
}
