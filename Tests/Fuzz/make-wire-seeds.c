/* Writes a hello and a crash record as the stub would send them, from this process's own
 * registers (getcontext) and stack, an app area as the stub's API fills it (annotations,
 * breadcrumbs past the ring's wrap, an attachment, an uncaught exception, a handled error with its
 * own properties and file), and a goodbye.
 *   cc -I CSupport/protocol/include Tests/Fuzz/make-wire-seeds.c -o /tmp/seeds
 *   cd Tests/Fuzz/seeds/wire && /tmp/seeds hello.bin crash-record.bin app-area.bin goodbye.bin
 * (relative names: the stack copy holds the output path, which must not name this machine) */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <time.h>
#include <ucontext.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "crashport_protocol.h"
static cp_crash record;
static cp_app_area area;
int main(int argc, char **argv) {
    cp_hello hello; memset(&hello, 0, sizeof hello);
    hello.header = (cp_header){CP_MAGIC, CP_VERSION, sizeof hello, CP_MSG_HELLO};
    hello.pid = getpid(); hello.stub_version = 1; hello.build_id_size = 20;
    for (int i = 0; i < 20; i++) hello.build_id[i] = (unsigned char)(0x11 * i + 3);
    FILE *f = fopen(argv[1], "wb"); fwrite(&hello, 1, sizeof hello, f); fclose(f);
    ucontext_t uc; getcontext(&uc);
    greg_t *g = uc.uc_mcontext.gregs;
    /* user_regs_struct order: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs */
    uint64_t regs[27] = {g[REG_R15], g[REG_R14], g[REG_R13], g[REG_R12], g[REG_RBP], g[REG_RBX], g[REG_R11], g[REG_R10], g[REG_R9], g[REG_R8],
        g[REG_RAX], g[REG_RCX], g[REG_RDX], g[REG_RSI], g[REG_RDI], (uint64_t)-1, g[REG_RIP], 0x33, g[REG_EFL], g[REG_RSP], 0x2b, 0, 0, 0, 0, 0, 0};
    memcpy(record.regs, regs, sizeof regs);
    if (uc.uc_mcontext.fpregs) { memcpy(record.fpregs, uc.uc_mcontext.fpregs, 512); record.flags |= CP_CRASH_HAS_FPREGS; }
    uint32_t stack = 512;
    record.stack_start = g[REG_RSP] - CP_RED_ZONE;
    memcpy(record.stack, (void *)(uintptr_t)record.stack_start, stack);
    record.stack_size = stack;
    size_t size = offsetof(cp_crash, stack) + stack;
    record.header = (cp_header){CP_MAGIC, CP_VERSION, (uint32_t)size, CP_MSG_CRASH};
    record.pid = getpid(); record.tid = syscall(SYS_gettid); record.signo = SIGSEGV; record.code = 1;
    record.sender_pid = 0; record.sender_uid = getuid(); record.arch = CP_ARCH_X86_64; record.fault_address = 0;
    struct timespec now; clock_gettime(CLOCK_REALTIME, &now); record.time_ns = now.tv_sec * 1000000000ull + now.tv_nsec;
    prctl(PR_GET_NAME, record.thread_name);
    record.chain_count = 2;
    record.chain[0] = (cp_chain_entry){SIGSEGV, CP_CHAIN_HAS_PREVIOUS | CP_CHAIN_PROGRAM_CHANGED, {0, 0, 0, 0},
        {0x403000, 0x4c000004, 0x7f0000001000, 0}, {0, 0, 0, 0}};
    record.chain[1] = (cp_chain_entry){SIGABRT, CP_CHAIN_HAS_PREVIOUS | CP_CHAIN_KERNEL_BYPASSED | CP_CHAIN_FORWARD_FIRST,
        {0x401000, 0x04000004, 0x7f0000001000, 1 << 5}, {0x401000, 0x04000004, 0x7f0000001000, 1 << 5},
        {0x402000, 0x0c000004, 0x7f0000001000, 0}};
    record.reraise = (cp_reraise){CP_RERAISE_RAISED, SIGSEGV, -6, 1, 0x403000, 0x7f0000002000};
    record.app_area = (uint64_t)(uintptr_t)&area;
    f = fopen(argv[2], "wb"); fwrite(&record, 1, size, f); fclose(f);
    area.magic = CP_APP_MAGIC; area.version = CP_APP_VERSION; area.size = sizeof area;
    const char *pairs[][2] = {{"user", "alice"}, {"build", "nightly\n\x1b[31m"}, {"region", "eu-west-1"}};
    for (int i = 0; i < 3; i++) {
        area.annotations[i].sequence = 2; area.annotations[i].flags = CP_SLOT_USED | (i == 1 ? CP_SLOT_TRUNCATED : 0);
        strcpy(area.annotations[i].key, pairs[i][0]); strcpy(area.annotations[i].value, pairs[i][1]);
    }
    area.annotations_used = 3; area.attachments_used = 1;
    area.breadcrumb_count = 130;
    for (uint64_t n = 30; n < 130; n++) {
        cp_breadcrumb *crumb = &area.breadcrumbs[n % CP_BREADCRUMB_MAX];
        crumb->sequence = 2 * n + 2; crumb->time_ns = record.time_ns + n;
        strcpy(crumb->category, "loop"); snprintf(crumb->message, sizeof crumb->message, "step %llu", (unsigned long long)n);
    }
    area.attachments[0].sequence = 2; area.attachments[0].flags = CP_SLOT_USED; strcpy(area.attachments[0].path, "/var/log/app.log");
    area.exception_sequence = 2; area.exception_flags = CP_SLOT_USED;
    strcpy(area.exception_type, "config_error"); strcpy(area.exception_message, "the config file is missing");
    area.install_time_ns = record.time_ns - 2000000000ull; area.launch_ms = 5000; strcpy(area.release, "app@1.2.3");
    /* A handled error's own block, as crashport_report_error_with leaves it during its report. */
    area.error_sequence = 2; area.error_flags = CP_SLOT_USED;
    strcpy(area.error_type, "OrderError"); strcpy(area.error_message, "order 1234 refused");
    cp_error_details *details = &area.error_details;
    details->sequence = 4; details->flags = CP_SLOT_USED; details->tid = 4242;
    details->property_count = 2; details->file_count = 1; details->properties_left_out = 3; details->files_left_out = 1;
    details->properties[0].flags = CP_SLOT_USED; strcpy(details->properties[0].key, "order"); strcpy(details->properties[0].value, "1234");
    details->properties[1].flags = CP_SLOT_USED | CP_SLOT_TRUNCATED; strcpy(details->properties[1].key, "note"); strcpy(details->properties[1].value, "cut");
    details->files[0].flags = CP_SLOT_USED; strcpy(details->files[0].path, "/var/log/order.log");
    /* A log ring from memory (crashport_attach_ring) that wrapped: 100 bytes appended to 64. */
    area.memory_attachments_used = 1;
    cp_memory_attachment *ring = &area.memory_attachments[0];
    ring->sequence = 2; ring->flags = CP_SLOT_USED | CP_SLOT_RING; strcpy(ring->name, "app.log");
    strcpy(ring->content_type, "text/plain"); ring->address = 0x10000; ring->capacity = 64; ring->length = 100;
    f = fopen(argv[3], "wb"); fwrite(&area, 1, sizeof area, f); fclose(f);
    if (argc > 4) {
        cp_goodbye goodbye; memset(&goodbye, 0, sizeof goodbye);
        goodbye.header = (cp_header){CP_MAGIC, CP_VERSION, sizeof goodbye, CP_MSG_GOODBYE};
        goodbye.exit_status = 3;
        f = fopen(argv[4], "wb"); fwrite(&goodbye, 1, sizeof goodbye, f); fclose(f);
    }
    return 0;
}
