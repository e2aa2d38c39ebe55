/*
 * forward.c: the program's own signal handlers, run by crashport the way the kernel would have
 * run them (issue 11; docs/architecture.md "crashport keeps the kernel's slot").
 *
 * crashport's handler (entry.c) owns the kernel's slot of every signal it handles; the program's action
 * is kept by the stub (actions.h). To run a program handler, this file does what the kernel's
 * signal delivery does: it picks the stack the kernel would pick (the alternate stack for an
 * SA_ONSTACK action, else the interrupted stack), builds there a copy of the kernel's signal
 * frame (siginfo, ucontext, FP state), sets the mask the kernel would set, and jumps to the
 * handler with a return address of its own. A handler that returns comes back to
 * cp_forward_return, which looks at what the handler did, then finishes with rt_sigreturn on
 * that frame: whatever the handler changed in the context takes effect, as with the kernel. A
 * handler that siglongjmps never comes back, and leaves nothing that matters behind.
 *
 * While a program handler runs, this thread's entry in a preallocated table holds the original
 * fault; a signal that arrives inside the handler (a re-raise, abort(), a fault of the handler
 * itself) finds it there, and the report names the original fault, not the second signal.
 *
 * Where it sits: the crash path calls one way, entry.c → forward.c → report.c. entry.c calls in
 * here; what is not recovered is reported through report.h (cp_report_fault, naming the original
 * fault); cp_forward_returned is entered from a program handler's return, not from entry.c, and
 * calls only down too.
 *
 * What it may do:
 *  - call cp_safe_* (safe.h) and cp_actions_* (actions.h), both static inline: raw system calls
 *    and a tiny libc; report.c's cp_fault_copy and cp_report_fault (report.h); the cp_forward_*
 *    functions and trampolines of this file; nothing else: no function of entry.c;
 *  - set the kernel's slot to SIG_DFL (the default action, as the kernel applies it), the
 *    signal mask the kernel would set, and the program's action as the kernel resets a one-shot
 *    one (SA_RESETHAND); queue a signal again to this thread;
 *  - write a program handler's signal frame on the stack the kernel would have chosen, and the
 *    preallocated tables of this file (each thread's entry claimed with __atomic builtins).
 *
 * What it must never do:
 *  - call libc or any other library function, lock, or allocate: tools/check-stub-safety fails
 *    the build if the crash path's object (entry.o, forward.o and report.o linked as one)
 *    references any symbol beyond memcpy/memset/memmove;
 *  - call back into entry.c: tools/build-stub fails the build if forward.o references anything
 *    entry.o defines;
 *  - read memory it does not own by dereferencing it: the stack a frame goes on is checked with
 *    process_vm_readv, which fails at an unmapped page instead of faulting;
 *  - run a program handler where the kernel could not have (no room on its stack): the process
 *    dies then, as the kernel would kill it, after the report.
 */
/* The crash path's code-generation rules, in the source for builds that cannot pass
 * tools/build-stub's flags (SwiftPM's, CCrashPort): no stack protector, no sanitizer. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((no_stack_protector, disable_sanitizer_instrumentation)), apply_to = function)
#endif
#define _GNU_SOURCE
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>

#include "actions.h"
#include "errors.h"
#include "forward.h"
#include "safe.h"
#include "stub_state.h"

/* Threads that may be inside a forwarded handler at once, and handlers nested on one thread. */
#define CP_FORWARD_THREADS 64
#define CP_FORWARD_DEPTH 4
/* A signal arrived inside a handler when it interrupted code at most this far below the
 * handler's frame. */
#define CP_HANDLER_STACK_MAX (1u << 20)
/* Room left below crashport's own frame before the handler's frame starts. */
#define CP_FRAME_MARGIN 512u
#define CP_FPSTATE_MAX (16u * 1024u)
/* A fault this close to the stack pointer may be the stack overflowing. */
#define CP_STACK_FAULT_NEAR (1ull << 20)
/* A handler that runs nested in another one on the alternate stack must leave this much of it:
 * room for the next signal frame and for crashport's report. A handler that re-raises into
 * itself forever would otherwise exhaust the alternate stack, and the kernel would kill the
 * process with nothing reported. */
#define CP_NESTED_RESERVE (12u * 1024u)

/* Kernel sigset bit of a signal (signal n is bit n - 1). */
#define CP_KBIT(signo) (1ull << ((signo) - 1))
/* Synchronous signals: kept unblocked for real while a program handler runs, so that a fault the
 * kernel would have turned into a silent kill (a blocked fault signal) reaches crashport. */
#define CP_SYNC_SIGNALS                                                                         \
    (CP_KBIT(SIGSEGV) | CP_KBIT(SIGBUS) | CP_KBIT(SIGILL) | CP_KBIT(SIGFPE) | CP_KBIT(SIGTRAP) | \
     CP_KBIT(SIGSYS))

/* The kernel's x86_64 rt_sigframe: the handler's return address, then the ucontext (the
 * kernel's own layout: glibc's ucontext_t up to and including the first 8 bytes of
 * uc_sigmask), then the siginfo. The FP state lives elsewhere, pointed to by the ucontext. */
#define CP_KERNEL_UCONTEXT_BYTES 304u
#define CP_UCONTEXT_SIGMASK 296u
typedef struct cp_sigframe {
    uint64_t pretcode;
    unsigned char uc[CP_KERNEL_UCONTEXT_BYTES];
    siginfo_t info;
} cp_sigframe;
_Static_assert(offsetof(ucontext_t, uc_sigmask) == CP_UCONTEXT_SIGMASK, "kernel ucontext layout");
_Static_assert(offsetof(cp_sigframe, info) == 8 + CP_KERNEL_UCONTEXT_BYTES, "rt_sigframe layout");

struct cp_forward_frame {
    uint64_t uc;           /* the ucontext given to the handler (its return address is at uc - 8) */
    uint64_t handler;      /* the program handler running */
    uint64_t pc;           /* where the signal it runs on interrupted the program */
    uint64_t sync_blocked; /* kernel sigset: signals the kernel would block here, left unblocked */
    int32_t signo;
    int32_t code;          /* si_code of the signal it runs on */
    int32_t pending_signo; /* a blocked synchronous signal raised inside it, delivered on return */
    uint32_t slot;         /* its thread's entry */
    siginfo_t pending;
};

typedef struct cp_forward_thread {
    uint32_t depth;
    uint32_t reserved;
    cp_fault original; /* what the outermost handler ran on: what a report names */
    cp_forward_frame frames[CP_FORWARD_DEPTH];
} cp_forward_thread;

/* The fault a handler last returned from on a thread (slot tid % CP_FORWARD_THREADS), with the
 * registers it returned to: the same fault again with the same registers came straight back. */
typedef struct cp_forward_memo {
    uint32_t tid;
    int32_t signo;
    uint64_t address;
    uint64_t handler;
    greg_t gregs[REG_RIP + 1];
} cp_forward_memo;

static uint32_t cp_forward_tids[CP_FORWARD_THREADS]; /* 0: free */
static cp_forward_thread cp_forward_threads[CP_FORWARD_THREADS];
static cp_forward_memo cp_forward_memos[CP_FORWARD_THREADS];

/* The trampolines (x86_64). cp_forward_enter(frame, handler, signo, info, uc) switches to the
 * frame built for the handler and jumps to it as the kernel would; the handler's return address
 * (frame->pretcode) is cp_forward_return, which runs cp_forward_returned on the handler's stack
 * and then rt_sigreturn with the frame's ucontext. */
__attribute__((noreturn)) void cp_forward_enter(uint64_t frame, uint64_t handler, long signo, uint64_t info,
                                                uint64_t uc) CP_HIDDEN;
void cp_forward_return(void) CP_HIDDEN;
void cp_forward_returned(ucontext_t *uc) CP_HIDDEN;
__asm__(".text\n"
        ".globl cp_forward_enter\n"
        ".hidden cp_forward_enter\n"
        ".type cp_forward_enter, @function\n"
        "cp_forward_enter:\n"
        "    mov %rdi, %rsp\n"
        "    mov %rsi, %rax\n"
        "    mov %rdx, %rdi\n"
        "    mov %rcx, %rsi\n"
        "    mov %r8, %rdx\n"
        "    jmp *%rax\n"
        ".size cp_forward_enter, . - cp_forward_enter\n"
        /* Unwind information like glibc's __restore_rt: a signal frame whose caller's registers
         * are in the ucontext at rsp (DW_CFA_def_cfa_expression / DW_CFA_expression with
         * DW_OP_breg7 = rsp + offset), so gdb and libunwind step through a thread that is inside
         * a handler crashport runs. The nop keeps a return-address lookup (pc - 1) inside. */
        ".globl cp_forward_return\n"
        ".hidden cp_forward_return\n"
        ".type cp_forward_return, @function\n"
        "    .cfi_startproc simple\n"
        "    .cfi_signal_frame\n"
        "    .cfi_escape 0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06\n" /* CFA = *(rsp + 160): saved rsp */
        "    .cfi_escape 0x10, 0x10, 0x03, 0x77, 0xa8, 0x01\n" /* rip at rsp + 168 */
        "    .cfi_escape 0x10, 0x07, 0x03, 0x77, 0xa0, 0x01\n" /* rsp at rsp + 160 */
        "    .cfi_escape 0x10, 0x06, 0x03, 0x77, 0xf8, 0x00\n" /* rbp at rsp + 120 */
        "    .cfi_escape 0x10, 0x03, 0x03, 0x77, 0x80, 0x01\n" /* rbx at rsp + 128 */
        "    .cfi_escape 0x10, 0x0c, 0x03, 0x77, 0xc8, 0x00\n" /* r12 at rsp + 72 */
        "    .cfi_escape 0x10, 0x0d, 0x03, 0x77, 0xd0, 0x00\n" /* r13 at rsp + 80 */
        "    .cfi_escape 0x10, 0x0e, 0x03, 0x77, 0xd8, 0x00\n" /* r14 at rsp + 88 */
        "    .cfi_escape 0x10, 0x0f, 0x03, 0x77, 0xe0, 0x00\n" /* r15 at rsp + 96 */
        "    nop\n"
        "cp_forward_return:\n"
        "    mov %rsp, %rdi\n"
        "    call cp_forward_returned\n"
        "    mov $15, %eax\n" /* rt_sigreturn, with rsp at the frame's ucontext */
        "    syscall\n"
        "    hlt\n"
        "    .cfi_endproc\n"
        ".size cp_forward_return, . - cp_forward_return\n");

static inline uint64_t cp_forward_sp(void)
{
    uint64_t sp;
    __asm__ volatile("mov %%rsp, %0" : "=r"(sp));
    return sp;
}

/** Reads one word of our own memory without faulting (0 when unreadable). */
static uint64_t cp_forward_peek(uint64_t address)
{
    uint64_t value = 0;
    struct iovec local = {.iov_base = &value, .iov_len = sizeof value};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)address, .iov_len = sizeof value};
    long read = cp_safe_syscall6(SYS_process_vm_readv, cp_safe_getpid(), (long)&local, 1, (long)&remote, 1, 0);
    return read == (long)sizeof value ? value : 0;
}

/** True when every page of [low, high) is mapped readable (a stack the kernel could write a
 *  signal frame to: stacks are read-write, guard pages unreadable). */
static bool cp_forward_mapped(uint64_t low, uint64_t high)
{
    enum { pages = CP_FPSTATE_MAX / 4096 + 4 };
    unsigned char sink[pages];
    struct iovec remote[pages];
    size_t count = 0;
    for (uint64_t page = low & ~4095ull; page < high && count < pages; page += 4096) {
        uint64_t address = page < low ? low : page;
        remote[count].iov_base = (void *)(uintptr_t)address;
        remote[count].iov_len = 1;
        count++;
    }
    if (count == 0 || count == pages) {
        return false;
    }
    struct iovec local = {.iov_base = sink, .iov_len = count};
    long read = cp_safe_syscall6(SYS_process_vm_readv, cp_safe_getpid(), (long)&local, 1, (long)remote, (long)count, 0);
    return read == (long)count;
}

/** This thread's entry, or -1; with `claim`, takes a free one (or one of a thread that is gone). */
static int cp_forward_slot(uint32_t tid, bool claim)
{
    for (int i = 0; i < CP_FORWARD_THREADS; i++) {
        if (__atomic_load_n(&cp_forward_tids[i], __ATOMIC_ACQUIRE) == tid) {
            return i;
        }
    }
    if (!claim) {
        return -1;
    }
    uint32_t pid = cp_safe_getpid();
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < CP_FORWARD_THREADS; i++) {
            uint32_t holder = __atomic_load_n(&cp_forward_tids[i], __ATOMIC_ACQUIRE);
            /* Second pass: an entry left by a thread that siglongjmp'd out and then exited. */
            if (holder != 0 && (pass == 0 || cp_safe_syscall3(SYS_tgkill, pid, holder, 0) != -CP_ESRCH)) {
                continue;
            }
            if (__atomic_compare_exchange_n(&cp_forward_tids[i], &holder, tid, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                cp_forward_threads[i].depth = 0;
                return i;
            }
        }
    }
    return -1;
}

static void cp_forward_release(int slot)
{
    cp_forward_threads[slot].depth = 0;
    __atomic_store_n(&cp_forward_tids[slot], 0, __ATOMIC_RELEASE);
}

cp_forward_frame *cp_forward_active(uint32_t tid, const ucontext_t *context)
{
    int slot = cp_forward_slot(tid, false);
    if (slot < 0) {
        return NULL;
    }
    cp_forward_thread *thread = &cp_forward_threads[slot];
    uint64_t sp = context != NULL ? (uint64_t)context->uc_mcontext.gregs[REG_RSP] : cp_forward_sp();
    while (thread->depth > 0 && thread->depth <= CP_FORWARD_DEPTH) {
        cp_forward_frame *frame = &thread->frames[thread->depth - 1];
        /* Running: the interrupted code is below the handler's frame, on its stack, and the
         * handler's return address is still ours. Otherwise it siglongjmp'd out: forget it. */
        if (sp < frame->uc && frame->uc - sp <= CP_HANDLER_STACK_MAX &&
            cp_forward_peek(frame->uc - 8) == (uint64_t)(uintptr_t)&cp_forward_return) {
            return frame;
        }
        thread->depth--;
    }
    cp_forward_release(slot);
    return NULL;
}

/** The program handler this thread is running now, found without changing anything (a caller
 *  outside a signal handler, which a signal may interrupt): the innermost frame still running. */
static cp_forward_frame *cp_forward_running(void)
{
    int slot = cp_forward_slot(cp_safe_gettid(), false);
    if (slot < 0) {
        return NULL;
    }
    cp_forward_thread *thread = &cp_forward_threads[slot];
    uint64_t sp = cp_forward_sp();
    for (uint32_t depth = thread->depth; depth > 0 && depth <= CP_FORWARD_DEPTH; depth--) {
        cp_forward_frame *frame = &thread->frames[depth - 1];
        if (sp < frame->uc && frame->uc - sp <= CP_HANDLER_STACK_MAX &&
            cp_forward_peek(frame->uc - 8) == (uint64_t)(uintptr_t)&cp_forward_return) {
            return frame;
        }
    }
    return NULL;
}

uint64_t cp_forward_virtually_blocked(void)
{
    cp_forward_frame *frame = cp_forward_running();
    return frame != NULL ? frame->sync_blocked : 0;
}

void cp_forward_unblocked(uint64_t signals)
{
    cp_forward_frame *frame = cp_forward_running();
    if (frame != NULL) {
        frame->sync_blocked &= ~signals;
    }
}

/** SIG_DFL in the kernel's slot: the process is about to die by the default action. */
static void cp_forward_kernel_default(int signo)
{
    cp_kernel_sigaction fallback;
    cp_safe_set(&fallback, 0, sizeof fallback);
    (void)cp_safe_syscall4(SYS_rt_sigaction, signo, (long)&fallback, 0, 8);
}

void cp_forward_die(int signo, const siginfo_t *info, uint32_t tid)
{
    cp_forward_kernel_default(signo);
    uint32_t pid = cp_safe_getpid();
    if (info == NULL) {
        (void)cp_safe_syscall3(SYS_tgkill, pid, tid, signo);
        return;
    }
    if (info->si_code > 0) {
        return; /* a fault recurs by itself when the instruction runs again */
    }
    long queued = cp_safe_syscall4(SYS_rt_tgsigqueueinfo, pid, tid, signo, (long)info);
    /* The kernel refuses SI_TKILL and si_code >= 0 from any thread but the main one: send it
     * again without its original siginfo. */
    if (queued == -CP_EPERM) {
        (void)cp_safe_syscall3(SYS_tgkill, pid, tid, signo);
    }
}

/** Size of the FP state the kernel saved (the XSAVE area it describes in the FXSAVE image's
 *  software-reserved bytes, else the FXSAVE image). */
static uint64_t cp_forward_fpstate_size(const unsigned char *fpstate)
{
    uint32_t magic = 0, extended = 0;
    cp_safe_copy(&magic, fpstate + 464, sizeof magic);
    cp_safe_copy(&extended, fpstate + 468, sizeof extended);
    if (magic == 0x46505853u /* FP_XSTATE_MAGIC1 */ && extended >= 512 && extended <= CP_FPSTATE_MAX) {
        return extended;
    }
    return 512;
}

void cp_forward_deliver(cp_stub_state *state, uint32_t tid, int signo, siginfo_t *info, ucontext_t *context,
                        const cp_kernel_sigaction *action, const cp_fault *original)
{
    bool fault = info != NULL && info->si_code > 0;
    if (action->handler == (uint64_t)(uintptr_t)SIG_DFL || (action->handler == (uint64_t)(uintptr_t)SIG_IGN && fault)) {
        cp_forward_die(signo, info, tid);
        return;
    }
    if (action->handler == (uint64_t)(uintptr_t)SIG_IGN) {
        return;
    }

    /* The stack the kernel would build the handler's frame on. */
    stack_t alternate;
    cp_safe_set(&alternate, 0, sizeof alternate);
    (void)cp_safe_syscall2(SYS_sigaltstack, 0, (long)&alternate);
    uint64_t here = cp_forward_sp();
    uint64_t alt_low = (uint64_t)(uintptr_t)alternate.ss_sp;
    uint64_t alt_high = alt_low + alternate.ss_size;
    bool on_alternate = (alternate.ss_flags & SS_ONSTACK) != 0;
    uint64_t interrupted = context != NULL ? (uint64_t)context->uc_mcontext.gregs[REG_RSP] : here;
    bool interrupted_on_alternate = interrupted >= alt_low && interrupted < alt_high;
    uint64_t top, floor = 0;
    bool check = false;
    if (!on_alternate || (action->flags & SA_ONSTACK) || interrupted_on_alternate) {
        /* Where crashport runs now: below its own frame. */
        top = here - CP_FRAME_MARGIN;
        floor = on_alternate ? alt_low + (original != NULL && interrupted_on_alternate ? CP_NESTED_RESERVE : 0) : 0;
    } else {
        /* An action without SA_ONSTACK runs on the stack the signal interrupted. Whether the
         * kernel could have written its frame there is checked when the fault may be the stack
         * itself (its address near the stack pointer, or a signal that names no address): a
         * JVM's null check, at a small address far from any stack, costs no check. */
        top = interrupted - CP_RED_ZONE; /* crashport_protocol.h: the ABI's red zone */
        uint64_t address = fault ? (uint64_t)(uintptr_t)info->si_addr : interrupted;
        check = address + CP_STACK_FAULT_NEAR >= interrupted && address <= interrupted + CP_STACK_FAULT_NEAR;
    }

    /* The frame, laid out as the kernel's get_sigframe does: FP state (64-byte aligned), then
     * the rt_sigframe, 16-byte aligned less 8 as if called. */
    const unsigned char *fpstate = context != NULL ? (const unsigned char *)context->uc_mcontext.fpregs : NULL;
    uint64_t fp_size = fpstate != NULL ? cp_forward_fpstate_size(fpstate) : 0;
    uint64_t fp_copy = (top - fp_size) & ~63ull;
    uint64_t frame_address = ((fp_copy - sizeof(cp_sigframe)) & ~15ull) - 8;
    if (frame_address >= top || frame_address < floor || (check && !cp_forward_mapped(frame_address, top))) {
        /* No room: the kernel could not have delivered the signal and would kill the process
         * (a stack overflow without an alternate stack, an alternate stack too small). */
        cp_fault here_fault;
        if (original == NULL) {
            cp_fault_copy(&here_fault, signo, info, context);
        }
        cp_report_fault(state, tid, original != NULL ? original : &here_fault, NULL, 0);
        cp_forward_die(signo, info, tid);
        return;
    }
    cp_sigframe *frame = (cp_sigframe *)(uintptr_t)frame_address;
    if (fpstate != NULL) {
        cp_safe_copy((void *)(uintptr_t)fp_copy, fpstate, fp_size);
    }
    if (context != NULL) {
        cp_safe_copy(frame->uc, context, sizeof frame->uc);
    } else {
        cp_safe_set(frame->uc, 0, sizeof frame->uc);
    }
    ucontext_t *uc = (ucontext_t *)(void *)frame->uc;
    uc->uc_mcontext.fpregs = fpstate != NULL ? (fpregset_t)(uintptr_t)fp_copy : NULL;
    if (info != NULL) {
        cp_safe_copy(&frame->info, info, sizeof frame->info);
    } else {
        cp_safe_set(&frame->info, 0, sizeof frame->info);
        frame->info.si_signo = signo;
    }
    frame->pretcode = (uint64_t)(uintptr_t)&cp_forward_return;

    /* The mask the kernel would set: the interrupted one, the action's, and the signal itself
     * unless SA_NODEFER. Fault signals stay unblocked for real (see CP_SYNC_SIGNALS). */
    uint64_t interrupted_mask = 0;
    if (context != NULL) {
        cp_safe_copy(&interrupted_mask, frame->uc + CP_UCONTEXT_SIGMASK, sizeof interrupted_mask);
    } else {
        (void)cp_safe_syscall4(SYS_rt_sigprocmask, SIG_BLOCK, 0, (long)&interrupted_mask, 8);
    }
    uint64_t blocked = interrupted_mask | action->mask | ((action->flags & SA_NODEFER) ? 0 : CP_KBIT(signo));
    uint64_t handled_kernel_bits = state->handled >> 1;
    uint64_t sync_blocked = blocked & CP_SYNC_SIGNALS & handled_kernel_bits;

    /* Remember what it runs on, for a signal that arrives inside it. */
    int slot = cp_forward_slot(tid, true);
    if (slot >= 0) {
        cp_forward_thread *thread = &cp_forward_threads[slot];
        if (thread->depth == 0) {
            if (original != NULL) {
                cp_safe_copy(&thread->original, original, sizeof thread->original);
            } else {
                cp_fault_copy(&thread->original, signo, info, context);
            }
        }
        if (thread->depth < CP_FORWARD_DEPTH) {
            cp_forward_frame *entry = &thread->frames[thread->depth];
            entry->uc = frame_address + 8;
            entry->handler = action->handler;
            entry->pc = context != NULL ? (uint64_t)context->uc_mcontext.gregs[REG_RIP] : 0;
            entry->sync_blocked = sync_blocked;
            entry->signo = signo;
            entry->code = info != NULL ? info->si_code : 0;
            entry->pending_signo = 0;
            entry->slot = (uint32_t)slot;
            thread->depth++;
        }
    }
    if (action->flags & SA_RESETHAND) {
        /* The kernel resets a one-shot action as it delivers the signal. */
        cp_kernel_sigaction fallback;
        cp_safe_set(&fallback, 0, sizeof fallback);
        cp_actions_store(state, signo, &fallback, NULL);
    }
    uint64_t real = blocked & ~sync_blocked;
    (void)cp_safe_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, (long)&real, 0, 8);
    cp_forward_enter(frame_address, action->handler, signo, (uint64_t)(uintptr_t)&frame->info,
                     (uint64_t)(uintptr_t)uc);
}

void cp_forward_nested(cp_stub_state *state, cp_forward_frame *frame, uint32_t tid, int signo, siginfo_t *info,
                       ucontext_t *context)
{
    cp_forward_thread *thread = &cp_forward_threads[frame->slot];
    bool fault = info != NULL && info->si_code > 0;
    cp_reraise reraise;
    cp_safe_set(&reraise, 0, sizeof reraise);
    reraise.how = fault ? CP_RERAISE_FAULTED : CP_RERAISE_RAISED;
    reraise.signo = signo;
    reraise.code = info != NULL ? info->si_code : 0;
    reraise.depth = (int32_t)thread->depth;
    reraise.handler = frame->handler;
    reraise.pc = context != NULL ? (uint64_t)context->uc_mcontext.gregs[REG_RIP] : 0;

    if (frame->sync_blocked & CP_KBIT(signo)) {
        if (fault) {
            /* A fault of a signal the kernel had blocked: it would kill the process at once. */
            cp_report_fault(state, tid, &thread->original, &reraise, CP_CRASH_FORWARD_FIRST);
            cp_forward_die(signo, info, tid);
            return;
        }
        /* Raised while blocked: the kernel would hold it until the handler returns. */
        if (frame->pending_signo == 0) {
            frame->pending_signo = signo;
            if (info != NULL) {
                cp_safe_copy(&frame->pending, info, sizeof frame->pending);
            } else {
                cp_safe_set(&frame->pending, 0, sizeof frame->pending);
            }
        }
        return;
    }
    cp_kernel_sigaction action;
    cp_actions_load(state, signo, &action, NULL);
    if (action.handler > (uint64_t)(uintptr_t)SIG_IGN) {
        /* Another program handler, or the same one again (SA_NODEFER): it runs, nested, as the
         * kernel would run it; a report comes only if that one does not recover either. */
        cp_forward_deliver(state, tid, signo, info, context, &action, &thread->original);
        return;
    }
    if (!fault && action.handler == (uint64_t)(uintptr_t)SIG_IGN) {
        return; /* the kernel would have discarded it */
    }
    cp_report_fault(state, tid, &thread->original, &reraise, CP_CRASH_FORWARD_FIRST);
    cp_forward_die(signo, info, tid);
}

bool cp_forward_came_back(uint32_t tid, int signo, const siginfo_t *info, const ucontext_t *context,
                          cp_reraise *reraise)
{
    cp_forward_memo *memo = &cp_forward_memos[tid % CP_FORWARD_THREADS];
    if (memo->tid != tid || info == NULL || info->si_code <= 0 || context == NULL) {
        return false;
    }
    bool same = memo->signo == signo && memo->address == (uint64_t)(uintptr_t)info->si_addr;
    for (int i = 0; same && i <= REG_RIP; i++) {
        same = memo->gregs[i] == context->uc_mcontext.gregs[i];
    }
    if (!same) {
        return false;
    }
    memo->tid = 0;
    cp_safe_set(reraise, 0, sizeof *reraise);
    reraise->how = CP_RERAISE_CAME_BACK;
    reraise->depth = 1;
    reraise->handler = memo->handler;
    return true;
}

/** Whether a handler returning from `fault` with `uc` resumes in a call it pushed: the stack
 *  pointer one word below the fault's, holding the fault's pc as the return address (Go's
 *  sigctxt.pushCall of runtime.sigpanic). A JVM's handler, which only moves the pc, does not. */
static bool cp_forward_made_a_call(const cp_fault *fault, const ucontext_t *uc)
{
    uint64_t fault_pc = (uint64_t)fault->gregs[REG_RIP];
    uint64_t fault_sp = (uint64_t)fault->gregs[REG_RSP];
    uint64_t sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
    return fault_pc != 0 && (uint64_t)uc->uc_mcontext.gregs[REG_RIP] != fault_pc && sp == fault_sp - 8 &&
           cp_forward_peek(sp) == fault_pc;
}

void cp_forward_returned(ucontext_t *uc)
{
    cp_stub_state *state = &cp_state;
    /* This thread's entry is the one whose frame holds this ucontext (no system call needed to
     * learn who we are: a frame's address is unique to its stack). */
    int slot = -1, index = -1;
    for (int i = 0; i < CP_FORWARD_THREADS && slot < 0; i++) {
        if (__atomic_load_n(&cp_forward_tids[i], __ATOMIC_ACQUIRE) == 0) {
            continue;
        }
        for (int depth = (int)cp_forward_threads[i].depth - 1; depth >= 0 && depth < CP_FORWARD_DEPTH; depth--) {
            if (cp_forward_threads[i].frames[depth].uc == (uint64_t)(uintptr_t)uc) {
                slot = i;
                index = depth; /* frames above it were left by siglongjmp */
                break;
            }
        }
    }
    if (slot < 0) {
        return;
    }
    uint32_t tid = __atomic_load_n(&cp_forward_tids[slot], __ATOMIC_ACQUIRE);
    cp_forward_thread *thread = &cp_forward_threads[slot];
    cp_forward_frame *frame = &thread->frames[index];
    thread->depth = (uint32_t)index;
    int signo = frame->signo;

    cp_reraise reraise;
    cp_safe_set(&reraise, 0, sizeof reraise);
    reraise.depth = index + 1;
    reraise.handler = frame->handler;
    reraise.pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    uint64_t resume_mask = 0;
    cp_safe_copy(&resume_mask, (const unsigned char *)uc + CP_UCONTEXT_SIGMASK, sizeof resume_mask);
    uint64_t pending = 0;
    (void)cp_safe_syscall2(SYS_rt_sigpending, (long)&pending, 8);
    pending &= (state->handled >> 1) & ~resume_mask;
    cp_kernel_sigaction now;
    cp_actions_load(state, signo, &now, NULL);

    if (frame->pending_signo != 0) {
        /* Raised inside the handler while the kernel would have blocked it: it is delivered now
         * that the handler is over (held blocked until the rt_sigreturn below). */
        reraise.how = CP_RERAISE_RAISED;
        reraise.signo = frame->pending_signo;
        reraise.code = frame->pending.si_code;
        cp_report_fault(state, tid, &thread->original, &reraise, CP_CRASH_FORWARD_FIRST);
        uint64_t block = CP_KBIT(frame->pending_signo);
        (void)cp_safe_syscall4(SYS_rt_sigprocmask, SIG_BLOCK, (long)&block, 0, 8);
        uint32_t pid = cp_safe_getpid();
        if (cp_safe_syscall4(SYS_rt_tgsigqueueinfo, pid, tid, frame->pending_signo, (long)&frame->pending) != 0) {
            (void)cp_safe_syscall3(SYS_tgkill, pid, tid, frame->pending_signo);
        }
    } else if (pending != 0) {
        /* It raised a signal it had blocked: the kernel delivers it after this rt_sigreturn. */
        reraise.how = CP_RERAISE_RAISED;
        reraise.signo = __builtin_ctzll(pending) + 1;
        cp_report_fault(state, tid, &thread->original, &reraise, CP_CRASH_FORWARD_FIRST);
    } else if (now.handler <= 1 && frame->code > 0 && (uint64_t)uc->uc_mcontext.gregs[REG_RIP] == frame->pc) {
        /* It reset the action and returned: the fault recurs, and the default action ends the
         * process. */
        reraise.how = CP_RERAISE_RESET;
        cp_report_fault(state, tid, &thread->original, &reraise, CP_CRASH_FORWARD_FIRST);
        cp_forward_kernel_default(signo);
    } else if (index == 0 && frame->code > 0 && cp_forward_made_a_call(&thread->original, uc)) {
        /* It made the faulting instruction seem to call something: Go's runtime turning the
         * fault into a panic. Whether that ends the process (a fault in C code, an unrecovered
         * panic) only the process's end will say: the watcher captures it now and holds it. */
        reraise.how = CP_RERAISE_CALLED;
        cp_report_fault(state, tid, &thread->original, &reraise, CP_CRASH_FORWARD_FIRST);
    } else if (frame->code > 0) {
        /* Handled, presumably: remember the fault and the registers it resumes with. */
        cp_forward_memo *memo = &cp_forward_memos[tid % CP_FORWARD_THREADS];
        memo->tid = tid;
        memo->signo = signo;
        memo->address = (uint64_t)(uintptr_t)(index == 0 ? thread->original.info.si_addr : frame->pending.si_addr);
        memo->handler = frame->handler;
        cp_safe_copy(memo->gregs, uc->uc_mcontext.gregs, sizeof memo->gregs);
    }
    if (index == 0) {
        cp_forward_release(slot);
    }
}

#if defined(__clang__)
#pragma clang attribute pop
#endif
