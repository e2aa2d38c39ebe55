/*
 * report.c: the reporter, the crash path's bottom: it tells the watcher about a fault and waits,
 * bounded, for its verdict. The crash path calls one way, entry.c → forward.c → report.c: the
 * signal entry and forward.c call in here through report.h; nothing here calls them.
 *
 * What it does: cp_report_fault reports once per process. The first thread to get here
 * reports (first-crasher election, on cp_state.crashing_tid); any other thread that crashes
 * meanwhile waits for that report to end (bounded), and a thread that already reported
 * returns. The reporting thread fills the record preallocated at install, makes the process
 * ptrace-able by the watcher, sends the record with a private reply channel, and waits (bounded)
 * for the watcher's verdict; then it returns to its caller, which does with the signal what the
 * kernel would have done (forward.c).
 *
 * Sidecar mode (CRASHPORT_SOCKET): the stub has its own connection to `crashport watch`, which
 * may have been down at install or restarted since. With no connection, or one whose peer is
 * gone (EPIPE, ECONNRESET...), the reporting thread reconnects once (non-blocking, bounded by
 * the connect wait and the verdict timeout, the listener's uid checked as at install), names the
 * new peer as ptracer, sends the HELLO built at install, then the record. When no verdict comes
 * (nobody to send to, send failed, wait over) and a spool directory was opened at install, the
 * record is written there with the executable's path, /proc/self/maps and /proc/self/cmdline
 * (the spool file of crashport_protocol.h) for the sidecar to ingest later, and one line on
 * stderr names it.
 * Either way the chain then continues at once: a missing sidecar costs one failed connect.
 *
 * Not dumpable means not reported by memory: a process that is not dumpable at the crash
 * (PR_GET_DUMPABLE != 1: it made itself so, like ssh-agent; it is setuid or setgid; its
 * credentials changed) sends and spools a record with CP_CRASH_NOT_DUMPABLE and none of its
 * memory (no registers, no stack copy, no addresses, no /proc/self/maps in the spool), and the
 * reporter never makes it dumpable: what the kernel would refuse its user, the record does not
 * carry either.
 *
 * GOODBYE (cp_handler_goodbye) lives here too: it is sent from the exit path, and _exit, which
 * the stub interposes, may be called from a program's signal handler; so it is made of the
 * same raw system calls and checked with the crash path. So is a handled error's ERROR record
 * (cp_report_error, for app.c: a program thread, not signal context, but the same record and
 * the same send and wait), and the sidecar connection install.c shares with the reconnect.
 *
 * What it may do:
 *  - call cp_safe_* (safe.h) and cp_actions_load (actions.h), both static inline: raw system
 *    calls and a tiny libc, and the functions of this file; nothing else: no
 *    function of entry.c or forward.c;
 *  - read the configuration in cp_state, write the preallocated record and scratch buffer, use
 *    __atomic builtins on cp_state's crash-time words, and a few hundred bytes of (alternate)
 *    stack; on the one reporting thread, replace cp_state.fd and watcher_pid (reconnect);
 *  - create files only in the spool directory opened at install (openat on its fd, O_EXCL and
 *    O_NOFOLLOW, mode 0600, under a name no other user can guess; renamed without replacing),
 *    and write one line on fd 2 when the crash was not answered.
 *
 * What it must never do:
 *  - call libc or any other library function: it may hold the lock we would need (malloc,
 *    stdio, the dynamic loader), or touch errno. tools/check-stub-safety fails the build if the
 *    crash path's object (entry.o, forward.o and report.o linked as one) references any symbol
 *    beyond memcpy/memset/memmove;
 *  - call back up the crash path (entry.c, forward.c): tools/build-stub fails the build if
 *    report.o references anything they define;
 *  - allocate, lock, or wait without a bound: the watcher may be dead or hung and the process
 *    must still die properly;
 *  - dereference memory it does not own: the stack is copied with process_vm_readv, which
 *    stops at an unmapped page instead of faulting;
 *  - change how the process dies: it reads the kernel's slot of each handled signal (for the
 *    record's chain) but never sets an action; forward.c applies what the kernel would;
 *  - make the process dumpable, or copy its memory into a record when it is not.
 */
/* The crash path's code-generation rules, in the source for builds that cannot pass
 * tools/build-stub's flags (SwiftPM's, CCrashPort): no stack protector, no sanitizer. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((no_stack_protector, disable_sanitizer_instrumentation)), apply_to = function)
#endif
#define _GNU_SOURCE
#include <asm/prctl.h>     /* ARCH_GET_FS, ARCH_GET_GS */
#include <fcntl.h>         /* O_*, AT_FDCWD (macros only: no function of it is called) */
#include <limits.h>        /* INT_MAX */
#include <linux/futex.h>   /* FUTEX_* */
#include <poll.h>          /* struct pollfd, POLL* */
#include <signal.h>        /* siginfo_t, SIG* */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>     /* PR_* */
#include <sys/socket.h>    /* struct msghdr, CMSG_* macros, AF_UNIX, SCM_RIGHTS, MSG_* */
#include <sys/uio.h>       /* struct iovec */
#include <sys/un.h>        /* struct sockaddr_un */
#include <time.h>          /* CLOCK_* */
#include <ucontext.h>      /* ucontext_t, REG_* */

#include "actions.h"
#include "crashport_protocol.h"
#include "errors.h"
#include "report.h"
#include "safe.h"
#include "stub_state.h"

/* renameat2's flag (linux/fs.h), spelled out so that its header is not needed here. */
#define CP_RENAME_NOREPLACE 1
/* getrandom's flag (sys/random.h): never wait for the entropy pool. */
#define CP_GRND_NONBLOCK 1
/* Tries at a spool name (a temporary one another user took, a final one that exists). */
#define CP_SPOOL_NAME_TRIES 8

#define CP_NS_PER_MS 1000000ull

/* The process-wide stub state (stub_state.h): defined at the bottom of the crash path, so that
 * every crash-path file refers to it downward. */
cp_stub_state cp_state = {
    .fd = -1,
    .timing_fd = -1,
    .spool_fd = -1,
};

/* Zero until the program first annotates (app.c); here so that the crash path's object names
 * it without a reference outside itself. */
cp_app_area cp_app;

/** Copies a delivered signal into what a report names (report.h). Runs in signal context. */
void cp_fault_copy(cp_fault *fault, int signo, const siginfo_t *info, const ucontext_t *context)
{
    fault->signo = signo;
    fault->has_fpregs = 0;
    if (info != NULL) {
        cp_safe_copy(&fault->info, info, sizeof fault->info);
    } else {
        cp_safe_set(&fault->info, 0, sizeof fault->info);
        fault->info.si_signo = signo;
    }
    if (context != NULL) {
        cp_safe_copy(fault->gregs, context->uc_mcontext.gregs, sizeof fault->gregs);
        if (context->uc_mcontext.fpregs != NULL) {
            /* The kernel wrote this FXSAVE image into the signal frame: our own memory. */
            cp_safe_copy(fault->fpregs, context->uc_mcontext.fpregs, sizeof fault->fpregs);
            fault->has_fpregs = 1;
        }
    } else {
        cp_safe_set(fault->gregs, 0, sizeof fault->gregs);
    }
}

/** Raw rt_sigaction with the kernel's own struct (sigsetsize 8); returns 0 or -errno. Runs in
 *  signal context. */
static long cp_handler_sigaction(int signo, const cp_kernel_sigaction *action,
                                 cp_kernel_sigaction *old)
{
    return cp_safe_syscall4(SYS_rt_sigaction, signo, (long)action, (long)old, 8);
}

/** cp_kernel_sigaction (kernel field order) to the wire's cp_action. Runs in signal context. */
static void cp_handler_wire_action(cp_action *wire, const cp_kernel_sigaction *kernel)
{
    wire->handler = kernel->handler;
    wire->flags = kernel->flags;
    wire->mask = kernel->mask;
    wire->restorer = kernel->restorer;
}

/** Milliseconds for poll() until deadline (rounded up, capped at INT_MAX); 0 once it passed.
 *  Runs in signal context. */
static int cp_handler_poll_ms(uint64_t now, uint64_t deadline)
{
    if (now >= deadline) {
        return 0;
    }
    uint64_t ms = (deadline - now + CP_NS_PER_MS - 1) / CP_NS_PER_MS;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/** Copies the faulting registers into the record in struct user_regs_struct order (what
 *  PTRACE_GETREGSET returns), and the FXSAVE image when there is one. Runs in signal context. */
static void cp_handler_copy_registers(cp_crash *record, const cp_fault *fault)
{
    const greg_t *g = fault->gregs;
    uint64_t csgsfs = (uint64_t)g[REG_CSGSFS]; /* u16 cs, gs, fs, ss (kernel sigcontext) */
    uint64_t fs_base = 0;
    uint64_t gs_base = 0;
    /* The handler runs on the faulting thread, so its bases are the faulting ones. */
    (void)cp_safe_syscall2(SYS_arch_prctl, ARCH_GET_FS, (long)&fs_base);
    (void)cp_safe_syscall2(SYS_arch_prctl, ARCH_GET_GS, (long)&gs_base);

    uint64_t *r = record->regs;
    r[0] = (uint64_t)g[REG_R15];
    r[1] = (uint64_t)g[REG_R14];
    r[2] = (uint64_t)g[REG_R13];
    r[3] = (uint64_t)g[REG_R12];
    r[4] = (uint64_t)g[REG_RBP];
    r[5] = (uint64_t)g[REG_RBX];
    r[6] = (uint64_t)g[REG_R11];
    r[7] = (uint64_t)g[REG_R10];
    r[8] = (uint64_t)g[REG_R9];
    r[9] = (uint64_t)g[REG_R8];
    r[10] = (uint64_t)g[REG_RAX];
    r[11] = (uint64_t)g[REG_RCX];
    r[12] = (uint64_t)g[REG_RDX];
    r[13] = (uint64_t)g[REG_RSI];
    r[14] = (uint64_t)g[REG_RDI];
    r[15] = UINT64_MAX; /* orig_rax: not in a system call */
    r[16] = (uint64_t)g[REG_RIP];
    r[17] = csgsfs & 0xffff; /* cs */
    r[18] = (uint64_t)g[REG_EFL];
    r[19] = (uint64_t)g[REG_RSP];
    r[20] = (csgsfs >> 48) & 0xffff; /* ss */
    r[21] = fs_base;
    r[22] = gs_base;
    r[23] = 0;                        /* ds */
    r[24] = 0;                        /* es */
    r[25] = (csgsfs >> 32) & 0xffff; /* fs */
    r[26] = (csgsfs >> 16) & 0xffff; /* gs */

    if (fault->has_fpregs) {
        cp_safe_copy(record->fpregs, fault->fpregs, 512);
        record->flags |= CP_CRASH_HAS_FPREGS;
    }
}

/** Copies the top of the faulting stack (from SP less the red zone, up to CP_STACK_COPY_MAX
 *  bytes) with process_vm_readv on our own pid: it stops at the first unreadable page and
 *  returns what it copied, where a plain copy would fault. One remote iovec per page, so the
 *  partial result holds even under the man page's per-iovec reading. Runs in signal context. */
static long cp_handler_copy_from(cp_crash *record, uint64_t start)
{
    enum { page = 4096, vectors = CP_STACK_COPY_MAX / page + 1 };
    struct iovec local = {.iov_base = record->stack, .iov_len = CP_STACK_COPY_MAX};
    struct iovec remote[vectors];
    size_t count = 0;
    uint64_t address = start;
    uint64_t left = CP_STACK_COPY_MAX;
    while (left > 0 && count < vectors) {
        uint64_t to_page_end = page - (address % page);
        uint64_t length = to_page_end < left ? to_page_end : left;
        remote[count].iov_base = (void *)(uintptr_t)address;
        remote[count].iov_len = length;
        count++;
        address += length;
        left -= length;
    }
    return cp_safe_syscall6(SYS_process_vm_readv, record->pid, (long)&local, 1, (long)remote, (long)count, 0);
}

static void cp_handler_copy_stack(cp_crash *record, uint64_t sp)
{
    uint64_t start = sp > CP_RED_ZONE ? sp - CP_RED_ZONE : 0;
    long copied = cp_handler_copy_from(record, start);
    /* A stack overflow leaves sp in the guard page below the stack: the frames that matter
     * start at the first mapped page above it. */
    for (int page = 1; copied <= 0 && page <= 4; page++) {
        start = (sp & ~(uint64_t)4095) + (uint64_t)page * 4096;
        copied = cp_handler_copy_from(record, start);
    }
    record->stack_start = start;
    record->stack_size = copied > 0 ? (uint32_t)copied : 0;
    if (record->stack_size == CP_STACK_COPY_MAX) {
        record->flags |= CP_CRASH_STACK_TRUNCATED;
    }
}

/** Fills the preallocated record with everything the crashing thread knows about its fault.
 *  Runs in signal context. */
static void cp_handler_fill_record(cp_stub_state *state, cp_crash *record, const cp_fault *fault, uint32_t tid)
{
    /* 1 is SUID_DUMP_USER; 0 (disabled) and 2 (SUID_DUMP_ROOT, a setuid program under
     * suid_dumpable 2) both mean its user may not read its memory. An error (none: the call
     * exists since 2.3.20) counts as not dumpable. */
    bool hidden = cp_safe_syscall2(SYS_prctl, PR_GET_DUMPABLE, 0) != 1;
    int signo = fault->signo;
    const siginfo_t *info = &fault->info;
    record->header.magic = CP_MAGIC;
    record->header.version = CP_VERSION;
    record->header.type = CP_MSG_CRASH;
    record->pid = cp_safe_getpid();
    record->tid = tid;
    record->signo = signo;
    record->arch = CP_ARCH_X86_64;
    /* crashport_test_crash() names its thread before it faults: that thread's crash is a test. */
    record->flags = tid == __atomic_load_n(&state->test_crash_tid, __ATOMIC_ACQUIRE) ? CP_CRASH_TEST : 0u;
    record->time_ns = cp_safe_clock_ns(CLOCK_REALTIME);
    record->code = 0;
    record->sig_errno = 0;
    record->fault_address = 0;
    record->sender_pid = 0;
    record->sender_uid = 0;
    record->stack_start = 0;
    record->stack_size = 0;
    record->app_area = (uint64_t)(uintptr_t)&cp_app;
    {
        record->code = info->si_code;
        record->sig_errno = info->si_errno;
        /* si_addr shares a union with si_pid/si_uid: each is meaningful for one kind of
         * sender only (kernel-generated: si_code > 0; kill/tgkill/sigqueue: si_code <= 0). */
        if (info->si_code > 0) {
            record->fault_address = (uint64_t)(uintptr_t)info->si_addr;
        } else {
            record->sender_pid = info->si_pid;
            record->sender_uid = info->si_uid;
        }
    }
    (void)cp_safe_syscall2(SYS_prctl, PR_GET_NAME, (long)record->thread_name);
    record->thread_name[sizeof record->thread_name - 1] = '\0';
    record->other_crashes = __atomic_load_n(&state->other_crashes, __ATOMIC_RELAXED);

    if (hidden) {
        /* Signal, code, sender, thread name and time only: the registers, the stack, the fault
         * address, the chain's handlers and the app area are the process's memory or its
         * layout. The record is reused (ERROR records), so what an earlier one held goes. */
        cp_safe_set(record->regs, 0, sizeof record->regs);
        cp_safe_set(record->fpregs, 0, sizeof record->fpregs);
        record->fault_address = 0;
        record->app_area = 0;
        record->chain_count = 0;
        record->flags |= CP_CRASH_NOT_DUMPABLE;
        record->header.size = (uint32_t)offsetof(cp_crash, stack);
        return;
    }

    /* The chain of every handled signal: what was below crashport at install, the program's
     * action now, and what the kernel holds if someone bypassed libc's sigaction to replace
     * crashport's. */
    record->chain_count = 0;
    for (int chained = 1; chained < CP_SIGNAL_LIMIT && record->chain_count < CP_CHAIN_MAX; chained++) {
        if (!(state->handled & (1ull << chained))) {
            continue;
        }
        cp_chain_entry *entry = &record->chain[record->chain_count++];
        cp_safe_set(entry, 0, sizeof *entry);
        entry->signo = chained;
        if (state->has_previous & (1ull << chained)) {
            cp_handler_wire_action(&entry->previous, &state->previous[chained]);
            entry->flags |= CP_CHAIN_HAS_PREVIOUS;
        }
        if (state->forward_first & (1ull << chained)) {
            entry->flags |= CP_CHAIN_FORWARD_FIRST;
        }
        cp_kernel_sigaction program;
        uint32_t changes = 0;
        cp_actions_load(state, chained, &program, &changes);
        cp_handler_wire_action(&entry->program, &program);
        if (changes != 0) {
            entry->flags |= CP_CHAIN_PROGRAM_CHANGED;
        }
        cp_kernel_sigaction kernel;
        cp_safe_set(&kernel, 0, sizeof kernel);
        if (cp_handler_sigaction(chained, NULL, &kernel) == 0 && kernel.handler != state->handler_address) {
            cp_handler_wire_action(&entry->kernel, &kernel);
            entry->flags |= CP_CHAIN_KERNEL_BYPASSED;
        }
    }

    cp_handler_copy_registers(record, fault);
    cp_handler_copy_stack(record, (uint64_t)fault->gregs[REG_RSP]);
    record->header.size = (uint32_t)offsetof(cp_crash, stack) + record->stack_size;
}

/** Lets the watcher ptrace us where Yama mode 1 wants the tracer named. Errors ignored (no
 *  Yama: EINVAL). Never PR_SET_DUMPABLE: a process that is not dumpable (it hid its memory, it
 *  is setuid, its credentials changed) stays so, and only a watcher the kernel lets read it
 *  anyway (its effective user's, or one with CAP_SYS_PTRACE) may. Runs in signal context. */
static void cp_handler_allow_ptrace(const cp_stub_state *state)
{
    if (state->watcher_pid > 0) {
        (void)cp_safe_syscall2(SYS_prctl, PR_SET_PTRACER, state->watcher_pid);
    }
}

/** poll() one fd for events until deadline (CLOCK_MONOTONIC ns), recomputing the time left
 *  after EINTR (a ptrace attach interrupts it). Returns revents, 0 on timeout, -errno on
 *  failure. Runs in signal context. */
static long cp_handler_poll(int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = cp_safe_clock_ns(CLOCK_MONOTONIC);
        if (now >= deadline) {
            return 0;
        }
        struct pollfd entry = {.fd = fd, .events = events, .revents = 0};
        long ready = cp_safe_syscall3(SYS_poll, (long)&entry, 1, cp_handler_poll_ms(now, deadline));
        if (ready == -CP_EINTR || ready == 0) {
            continue; /* the loop re-checks the deadline */
        }
        if (ready < 0) {
            return ready;
        }
        return entry.revents;
    }
}

/** Sleeps until deadline or for at most ms, whichever comes first (poll with no fd). Runs in
 *  signal context. */
static void cp_handler_nap(uint64_t deadline, int ms)
{
    uint64_t now = cp_safe_clock_ns(CLOCK_MONOTONIC);
    int left = cp_handler_poll_ms(now, deadline);
    (void)cp_safe_syscall3(SYS_poll, 0, 0, left < ms ? left : ms);
}

long cp_handler_connect_sidecar(const cp_stub_state *state, const struct sockaddr_un *address, uint32_t length,
                                uint64_t deadline, int32_t *peer_pid, uint32_t *peer_uid)
{
    long fd = cp_safe_syscall3(SYS_socket, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return fd;
    }
    for (;;) {
        long result = cp_safe_syscall3(SYS_connect, fd, (long)address, length);
        if (result == 0 || result == -CP_EISCONN) {
            break;
        }
        if (result == -CP_EINTR) {
            continue;
        }
        /* A Unix socket answers EAGAIN when the listener's backlog is full (nothing is queued:
         * connect again); EINPROGRESS/EALREADY are the general non-blocking answers. Either
         * way: retry every 10 ms until the deadline. A missing listener (ENOENT, ECONNREFUSED)
         * fails at once. */
        if (result == -CP_EAGAIN || result == -CP_EINPROGRESS || result == -CP_EALREADY) {
            if (cp_safe_clock_ns(CLOCK_MONOTONIC) >= deadline) {
                (void)cp_safe_close((int)fd);
                return -CP_ETIMEDOUT;
            }
            cp_handler_nap(deadline, 10);
            continue;
        }
        (void)cp_safe_close((int)fd);
        return result;
    }
    /* Who listens there: only root or our own user may be given ptrace rights over us and our
     * record (an abstract name can be taken by anyone). "Our own user" is the effective one
     * at install; in a process with privileges its real user lacks (state->secure, or ids that
     * differ now) never the real one, who chose its environment and may be the attacker.
     * struct ucred: pid, uid, gid as 32-bit ints. */
    struct {
        int32_t pid;
        uint32_t uid;
        uint32_t gid;
    } peer = {0, 0, 0};
    uint32_t peer_length = sizeof peer;
    long got = cp_safe_syscall5(SYS_getsockopt, fd, SOL_SOCKET, SO_PEERCRED, (long)&peer, (long)&peer_length);
    if (got != 0) {
        (void)cp_safe_close((int)fd);
        return got;
    }
    *peer_uid = peer.uid;
    uint32_t euid = (uint32_t)cp_safe_syscall0(SYS_geteuid);
    bool secure = state->secure || (uint32_t)cp_safe_syscall0(SYS_getuid) != euid ||
                  cp_safe_syscall0(SYS_getgid) != cp_safe_syscall0(SYS_getegid);
    if (peer.uid != 0 && peer.uid != state->trusted_uid && (secure || peer.uid != euid)) {
        (void)cp_safe_close((int)fd);
        return CP_CONNECT_UNTRUSTED;
    }
    *peer_pid = peer.pid;
    return fd;
}

/** Reconnects to the sidecar once (sidecar mode, not refused): a new connection before
 *  deadline, the new peer named ptracer and remembered, and the HELLO built at install sent
 *  first (with this process's pid: a forked child reports as itself), as at install. Returns
 *  true when state->fd is a fresh connection. Runs in signal context, on the reporting thread. */
static bool cp_handler_reconnect(cp_stub_state *state, uint64_t deadline)
{
    if (state->sidecar_address_length == 0) {
        return false;
    }
    int32_t peer_pid = 0;
    uint32_t peer_uid = 0;
    long fd = cp_handler_connect_sidecar(state, &state->sidecar_address, state->sidecar_address_length,
                                         deadline, &peer_pid, &peer_uid);
    if (fd < 0) {
        return false;
    }
    state->fd = (int)fd;
    if (peer_pid > 0 && (uint32_t)peer_pid != cp_safe_getpid()) {
        state->watcher_pid = peer_pid;
        (void)cp_safe_syscall2(SYS_prctl, PR_SET_PTRACER, peer_pid);
    }
    if (state->hello != NULL) {
        state->hello->pid = cp_safe_getpid();
        struct iovec iov = {.iov_base = state->hello, .iov_len = sizeof *state->hello};
        struct msghdr message;
        cp_safe_set(&message, 0, sizeof message);
        message.msg_iov = &iov;
        message.msg_iovlen = 1;
        /* A fresh connection's queue is empty: no wait. A failure shows at the record's send. */
        (void)cp_safe_syscall3(SYS_sendmsg, fd, (long)&message, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    return true;
}

/** True for a send error that means the watcher's end is gone (the sidecar exited or
 *  restarted, or the fd is no longer ours): worth one reconnect. */
static bool cp_handler_peer_gone(long error)
{
    return error == -CP_EPIPE || error == -CP_ECONNRESET || error == -CP_ENOTCONN ||
           error == -CP_ECONNREFUSED || error == -CP_EBADF || error == -CP_ENOTSOCK;
}

/** Sends the record with reply_fd attached (SCM_RIGHTS), without blocking past deadline: the
 *  watcher's queue may be full. Returns 0 or -errno. Runs in signal context. */
static long cp_handler_send_record(const cp_stub_state *state, const cp_crash *record, int reply_fd,
                                   uint64_t deadline)
{
    struct iovec iov = {.iov_base = (void *)record, .iov_len = record->header.size};
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(int))];
    } control;
    cp_safe_set(&control, 0, sizeof control);
    struct msghdr message;
    cp_safe_set(&message, 0, sizeof message);
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof control.bytes;
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    cp_safe_copy(CMSG_DATA(header), &reply_fd, sizeof reply_fd);

    for (;;) {
        long sent = cp_safe_syscall3(SYS_sendmsg, state->fd, (long)&message,
                                     MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent >= 0) {
            return 0; /* SOCK_SEQPACKET: all of it or nothing */
        }
        if (sent == -CP_EINTR) {
            continue;
        }
        if (sent != -CP_EAGAIN) {
            return sent;
        }
        long revents = cp_handler_poll(state->fd, POLLOUT, deadline);
        if (revents <= 0) {
            return revents < 0 ? revents : -CP_EAGAIN; /* timed out */
        }
    }
}

/** What the wait for the watcher's answer ended with. */
typedef struct cp_handler_answer {
    bool has_verdict;
    bool sent;           /* the record reached a watcher's queue */
    uint64_t send_ns;    /* CLOCK_MONOTONIC just before sendmsg */
    uint64_t verdict_ns; /* CLOCK_MONOTONIC when the verdict arrived */
    cp_verdict verdict;
} cp_handler_answer;

/** Waits on the private reply channel for HEARTBEAT* then VERDICT, until the deadline (moved by
 *  heartbeats, never past cap). EOF, hang-up, error, garbage and timeout end the wait too.
 *  Runs in signal context. */
static void cp_handler_wait_for_verdict(int reply_fd, uint64_t deadline, uint64_t cap,
                                        cp_handler_answer *answer)
{
    for (;;) {
        long revents = cp_handler_poll(reply_fd, POLLIN, deadline);
        if (revents <= 0) {
            return; /* timeout or poll failure */
        }
        if (!(revents & POLLIN)) {
            return; /* POLLHUP / POLLERR without data: the watcher is gone */
        }
        union {
            cp_header header;
            cp_verdict verdict;
            cp_heartbeat heartbeat;
            unsigned char bytes[64]; /* a longer message is truncated: its length will not match */
        } message;
        long received = cp_safe_syscall6(SYS_recvfrom, reply_fd, (long)&message,
                                         sizeof message, MSG_DONTWAIT, 0, 0);
        if (received == -CP_EINTR || received == -CP_EAGAIN) {
            continue;
        }
        if (received < (long)sizeof(cp_header)) {
            return; /* EOF (0), error, or too short to be anything */
        }
        const cp_header *header = &message.header;
        if (header->magic != CP_MAGIC || header->version != CP_VERSION ||
            header->size != (uint64_t)received) {
            return; /* garbage */
        }
        uint64_t now = cp_safe_clock_ns(CLOCK_MONOTONIC);
        if (header->type == CP_MSG_HEARTBEAT && received == (long)sizeof(cp_heartbeat)) {
            uint64_t extended = now + (uint64_t)message.heartbeat.extend_ms * CP_NS_PER_MS;
            deadline = extended < cap ? extended : cap;
            continue;
        }
        if (header->type == CP_MSG_VERDICT && received == (long)sizeof(cp_verdict)) {
            answer->has_verdict = true;
            answer->verdict_ns = now;
            cp_safe_copy(&answer->verdict, &message.verdict, sizeof answer->verdict);
            return; /* every verdict continues the chain (CP_VERDICT_CONTINUE is the only one) */
        }
        return; /* wrong type or size */
    }
}

/** Sends the filled record to the watcher with a fresh reply channel and waits, bounded, for
 *  its verdict. In sidecar mode, connects first when there is no connection, or reconnects once
 *  when the send finds the peer gone; the connect counts against the verdict timeout (and never
 *  takes more than CP_CONNECT_WAIT_MS). Runs in signal context. */
static void cp_handler_report(cp_stub_state *state, cp_handler_answer *answer)
{
    uint64_t timeout = (uint64_t)state->timeout_ms * CP_NS_PER_MS;
    uint64_t start = cp_safe_clock_ns(CLOCK_MONOTONIC);
    uint64_t deadline = start + timeout;
    uint64_t cap = start + 6 * timeout;
    uint64_t connect_wait = (uint64_t)CP_CONNECT_WAIT_MS * CP_NS_PER_MS;
    uint64_t connect_deadline = start + (connect_wait < timeout ? connect_wait : timeout);
    bool reconnected = false;
    if (state->fd < 0) {
        if (!cp_handler_reconnect(state, connect_deadline)) {
            return; /* nobody to send to */
        }
        reconnected = true;
    }
    int reply[2];
    if (cp_safe_syscall4(SYS_socketpair, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
                         (long)reply) != 0) {
        return; /* no fd left: nothing to wait on; the chain still continues */
    }
    answer->send_ns = cp_safe_clock_ns(CLOCK_MONOTONIC);
    long sent = cp_handler_send_record(state, state->record, reply[1], deadline);
    if (sent != 0 && !reconnected && cp_handler_peer_gone(sent) && state->sidecar_address_length != 0) {
        /* The sidecar restarted since install: our connection is dead. EBADF/ENOTSOCK: the fd
         * is not ours any more (the program closed it), so it is left alone. */
        if (sent != -CP_EBADF && sent != -CP_ENOTSOCK) {
            (void)cp_safe_close(state->fd);
        }
        state->fd = -1;
        if (cp_handler_reconnect(state, connect_deadline)) {
            answer->send_ns = cp_safe_clock_ns(CLOCK_MONOTONIC);
            sent = cp_handler_send_record(state, state->record, reply[1], deadline);
        }
    }
    /* Our copy of the watcher's end goes: then the watcher's death (or its closing the fd,
     * or the record dying unread in its queue) shows up here as a hang-up. */
    (void)cp_safe_close(reply[1]);
    if (sent == 0) {
        answer->sent = true;
        cp_handler_wait_for_verdict(reply[0], deadline, cap, answer);
    }
    (void)cp_safe_close(reply[0]);
}

long cp_report_error(cp_stub_state *state, const void *caller, uint32_t tid)
{
    const cp_fault *fault = caller;
    int fd = __atomic_load_n(&state->fd, __ATOMIC_RELAXED);
    if (state->error_record == NULL || fd < 0) {
        return -CP_ENOTCONN;
    }
    cp_crash *record = state->error_record;
    cp_handler_fill_record(state, record, fault, tid);
    record->header.type = CP_MSG_ERROR;
    uint64_t timeout = (uint64_t)state->timeout_ms * CP_NS_PER_MS;
    uint64_t start = cp_safe_clock_ns(CLOCK_MONOTONIC);
    int reply[2];
    long made = cp_safe_syscall4(SYS_socketpair, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, (long)reply);
    if (made != 0) {
        return made;
    }
    cp_handler_allow_ptrace(state);
    long sent = cp_handler_send_record(state, record, reply[1], start + timeout);
    (void)cp_safe_close(reply[1]);
    cp_handler_answer answer;
    cp_safe_set(&answer, 0, sizeof answer);
    if (sent == 0) {
        cp_handler_wait_for_verdict(reply[0], start + timeout, start + 6 * timeout, &answer);
    }
    (void)cp_safe_close(reply[0]);
    if (sent != 0) {
        return sent;
    }
    return answer.has_verdict ? 0 : -CP_ETIMEDOUT;
}

void cp_handler_goodbye(cp_stub_state *state, int32_t status)
{
    int fd = __atomic_load_n(&state->fd, __ATOMIC_RELAXED);
    /* A forked child shares its parent's connection (and a vfork child its memory): only the
     * process that said HELLO may say goodbye on it, and it is asked before anything is
     * written. A crash being reported already says how this process ends. */
    if (fd < 0 || state->hello == NULL || state->hello->pid != cp_safe_getpid() ||
        __atomic_load_n(&state->crashing_tid, __ATOMIC_ACQUIRE) != 0 ||
        __atomic_exchange_n(&state->goodbye_sent, 1, __ATOMIC_ACQ_REL) != 0) {
        return;
    }
    cp_goodbye goodbye;
    cp_safe_set(&goodbye, 0, sizeof goodbye);
    goodbye.header.magic = CP_MAGIC;
    goodbye.header.version = CP_VERSION;
    goodbye.header.size = sizeof goodbye;
    goodbye.header.type = CP_MSG_GOODBYE;
    goodbye.exit_status = status;
    struct iovec iov = {.iov_base = &goodbye, .iov_len = sizeof goodbye};
    struct msghdr message;
    cp_safe_set(&message, 0, sizeof message);
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    /* Never a wait: with the watcher's queue full the goodbye is lost, and the watcher then
     * learns the exit from the kernel (its pidfd) instead. */
    long sent;
    do {
        sent = cp_safe_syscall3(SYS_sendmsg, fd, (long)&message, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (sent == -CP_EINTR);
}

/** Appends "<pid>-<tid>" to name at *used. Runs in signal context. */
static int cp_handler_append_ids(char *name, size_t capacity, size_t *used, const cp_crash *record)
{
    int failed = 0;
    failed |= cp_safe_append_u64(name, capacity, used, record->pid);
    failed |= cp_safe_append_string(name, capacity, used, "-");
    failed |= cp_safe_append_u64(name, capacity, used, record->tid);
    return failed;
}

/** Writes size bytes at offset of fd (pwrite64), retrying EINTR and short writes; 0 or -errno.
 *  Runs in signal context. */
static long cp_handler_pwrite_all(int fd, const void *buffer, size_t size, long offset)
{
    const char *p = buffer;
    while (size > 0) {
        long written = cp_safe_syscall4(SYS_pwrite64, fd, (long)p, (long)size, offset);
        if (written == -CP_EINTR) {
            continue;
        }
        if (written <= 0) {
            return written < 0 ? written : -CP_EIO;
        }
        p += written;
        size -= (size_t)written;
        offset += written;
    }
    return 0;
}

/** Copies the file at path (/proc/self/maps, /proc/self/cmdline) into fd through the scratch
 *  buffer, at most limit bytes, adding what it copied to *size (then, cut at the limit, sets
 *  truncated in header->flags). A file that cannot be read leaves what was copied. Returns 0 or
 *  -errno of a failed write. Runs in signal context. */
static long cp_handler_spool_file(const cp_stub_state *state, int fd, const char *path, uint32_t limit,
                                  uint32_t *size, uint32_t truncated, cp_spool_header *header)
{
    long file = cp_safe_syscall4(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0);
    if (file < 0) {
        return 0;
    }
    long result = 0;
    for (;;) {
        long got = cp_safe_syscall3(SYS_read, file, (long)state->scratch, CP_SCRATCH_BYTES);
        if (got == -CP_EINTR) {
            continue;
        }
        if (got <= 0) {
            break;
        }
        uint64_t take = (uint64_t)got;
        if (*size + take > limit) {
            take = limit - *size;
            header->flags |= truncated;
        }
        result = cp_safe_write_all(fd, state->scratch, (size_t)take);
        if (result != 0) {
            break;
        }
        *size += (uint32_t)take;
        if (header->flags & truncated) {
            break;
        }
    }
    (void)cp_safe_close((int)file);
    return result;
}

/** A number no other user can guess: getrandom (never waiting for the pool), else, where it
 *  fails (ENOSYS before 3.17, EAGAIN early at boot), the clocks and the stack's address mixed
 *  (splitmix64), which still differs at every try. Runs in signal context. */
static uint64_t cp_handler_unguessable(uint64_t salt)
{
    uint64_t value = 0;
    if (cp_safe_syscall3(SYS_getrandom, (long)&value, sizeof value, CP_GRND_NONBLOCK) == (long)sizeof value) {
        return value;
    }
    value = salt ^ cp_safe_clock_ns(CLOCK_MONOTONIC) ^ (cp_safe_clock_ns(CLOCK_REALTIME) << 17) ^
            (uint64_t)(uintptr_t)&value;
    value += 0x9e3779b97f4a7c15ull;
    value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
    value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
    return value ^ (value >> 31);
}

/** Creates the temporary spool file under ".tmp-<pid>-<tid>-<unguessable>" in the spool
 *  directory: O_CREAT | O_EXCL | O_NOFOLLOW, so a name someone else made (a file, a symlink to
 *  a file of ours) is never opened, only passed over for another, up to CP_SPOOL_NAME_TRIES
 *  times. The spool is a shared 1733 directory: a predictable name could be taken ahead by any
 *  user (and one we do not own cannot be removed), so that our crash could not be spooled.
 *  Returns the fd with temporary set, or -errno. Runs in signal context. */
static long cp_handler_spool_create(int spool, const cp_crash *record, char *temporary, size_t capacity)
{
    long flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
    long fd = -CP_EEXIST;
    for (int attempt = 0; attempt < CP_SPOOL_NAME_TRIES && fd == -CP_EEXIST; attempt++) {
        size_t used = 0;
        int failed = cp_safe_append_string(temporary, capacity - 1, &used, ".tmp-");
        failed |= cp_handler_append_ids(temporary, capacity - 1, &used, record);
        failed |= cp_safe_append_string(temporary, capacity - 1, &used, "-");
        failed |= cp_safe_append_u64(temporary, capacity - 1, &used,
                                     cp_handler_unguessable(record->time_ns + (uint64_t)attempt));
        temporary[used] = '\0';
        if (failed) {
            return -CP_ENAMETOOLONG; /* cannot happen with these sizes */
        }
        fd = cp_safe_syscall4(SYS_openat, spool, (long)temporary, flags, 0600);
    }
    return fd;
}

/** Gives the finished temporary file its name, "<pid>-<tid>-<time_ns>.crash", never replacing
 *  a file that has it (renameat2 RENAME_NOREPLACE, else link then unlink where the file system
 *  cannot do that: both fail with EEXIST rather than replace; a plain rename as the last
 *  resort). A name that exists (another
 *  process's, one made ahead) moves the time on by 1 ns, still a spool file's name, up to
 *  CP_SPOOL_NAME_TRIES times. Returns 0 with name set, or -errno. Runs in signal context. */
static long cp_handler_spool_publish(int spool, const cp_crash *record, const char *temporary, char *name,
                                     size_t capacity)
{
    long result = -CP_EEXIST;
    for (int attempt = 0; attempt < CP_SPOOL_NAME_TRIES && result == -CP_EEXIST; attempt++) {
        size_t used = 0;
        int failed = cp_handler_append_ids(name, capacity - 1, &used, record);
        failed |= cp_safe_append_string(name, capacity - 1, &used, "-");
        failed |= cp_safe_append_u64(name, capacity - 1, &used, record->time_ns + (uint64_t)attempt);
        failed |= cp_safe_append_string(name, capacity - 1, &used, ".crash");
        name[used] = '\0';
        if (failed) {
            return -CP_ENAMETOOLONG; /* cannot happen with these sizes */
        }
        result = cp_safe_syscall5(SYS_renameat2, spool, (long)temporary, spool, (long)name, CP_RENAME_NOREPLACE);
        if (result == -CP_EINVAL || result == -CP_ENOSYS) {
            result = cp_safe_syscall5(SYS_linkat, spool, (long)temporary, spool, (long)name, 0);
            if (result == 0) {
                (void)cp_safe_syscall3(SYS_unlinkat, spool, (long)temporary, 0);
            } else if (result != -CP_EEXIST) {
                /* No hard links there either: a plain rename, as before (in a sticky spool it
                 * still cannot replace another user's file). */
                result = cp_safe_syscall4(SYS_renameat, spool, (long)temporary, spool, (long)name);
            }
        }
    }
    return result;
}

/** Writes the spool file of crashport_protocol.h for a record no watcher answered: under a
 *  temporary name no other user can guess or take (cp_handler_spool_create), the header last,
 *  then renamed to name, "<pid>-<tid>-<time_ns>.crash", replacing nothing. A process that is not
 *  dumpable spools no /proc/self/maps (its layout), as its record holds no memory. On any
 *  failure the temporary file is removed. Returns 0 or -errno. Runs in signal context. */
static long cp_handler_spool(const cp_stub_state *state, bool sent, char *name, size_t capacity)
{
    const cp_crash *record = state->record;
    int spool = state->spool_fd;
    char temporary[80];
    long fd = cp_handler_spool_create(spool, record, temporary, sizeof temporary);
    if (fd < 0) {
        return fd;
    }

    /* A placeholder first: a file cut short keeps a zero header (no magic, sizes 0). */
    cp_spool_header header;
    cp_safe_set(&header, 0, sizeof header);
    long result = cp_safe_write_all((int)fd, &header, sizeof header);
    if (result == 0) {
        header.record_size = record->header.size;
        result = cp_safe_write_all((int)fd, record, record->header.size);
    }
    if (result == 0) {
        long exe = cp_safe_syscall3(SYS_readlink, (long)"/proc/self/exe", (long)state->scratch,
                                    CP_SPOOL_EXE_MAX);
        if (exe > 0) {
            header.exe_size = (uint32_t)exe;
            result = cp_safe_write_all((int)fd, state->scratch, (size_t)exe);
        }
    }
    if (result == 0 && !(record->flags & CP_CRASH_NOT_DUMPABLE)) {
        result = cp_handler_spool_file(state, (int)fd, "/proc/self/maps", CP_SPOOL_MAPS_MAX, &header.maps_size,
                                       CP_SPOOL_MAPS_TRUNCATED, &header);
    }
    /* The command line, as the live watcher reads it from /proc/PID/cmdline: what the process
     * set its arguments to. A process that is not dumpable is still reported with it (its
     * user may read it; docs/security.md). */
    if (result == 0) {
        result = cp_handler_spool_file(state, (int)fd, "/proc/self/cmdline", CP_SPOOL_CMDLINE_MAX,
                                       &header.cmdline_size, CP_SPOOL_CMDLINE_TRUNCATED, &header);
    }
    if (result == 0) {
        header.header.magic = CP_MAGIC;
        header.header.version = CP_VERSION;
        header.header.size = sizeof header;
        header.header.type = CP_MSG_SPOOLED;
        header.flags |= sent ? CP_SPOOL_SENT : 0;
        result = cp_handler_pwrite_all((int)fd, &header, sizeof header, 0);
    }
    long closed = cp_safe_close((int)fd);
    if (result == 0) {
        result = closed;
    }
    if (result == 0) {
        result = cp_handler_spool_publish(spool, record, temporary, name, capacity);
    }
    if (result != 0) {
        (void)cp_safe_syscall3(SYS_unlinkat, spool, (long)temporary, 0);
    }
    return result;
}

/** Spools a record no watcher answered (when there is a spool directory) and says so on stderr
 *  in one line. Runs in signal context. */
static void cp_handler_unanswered(const cp_stub_state *state, bool sent)
{
    char line[160];
    size_t used = 0;
    int failed = cp_safe_append_string(line, sizeof line, &used, "crashport: no watcher answered; ");
    if (state->spool_fd >= 0) {
        char name[96];
        long result = cp_handler_spool(state, sent, name, sizeof name);
        if (result == 0) {
            failed |= cp_safe_append_string(line, sizeof line, &used, "the crash was spooled as ");
            failed |= cp_safe_append_string(line, sizeof line, &used, name);
        } else {
            failed |= cp_safe_append_string(line, sizeof line, &used,
                                            "the crash could not be spooled (errno ");
            failed |= cp_safe_append_u64(line, sizeof line, &used, (uint64_t)-result);
            failed |= cp_safe_append_string(line, sizeof line, &used, ") and was not reported");
        }
    } else if (state->sidecar_mode) {
        failed |= cp_safe_append_string(line, sizeof line, &used, "the crash was not reported");
    } else {
        return; /* launcher mode without a spool: as before, the launcher sees the death */
    }
    failed |= cp_safe_append_string(line, sizeof line, &used, "\n");
    if (!failed) {
        (void)cp_safe_write_all(2, line, used);
    }
}

/** Writes the bench line `crashport-timing send_to_verdict_ns=N capture_ns=N`. Runs in signal
 *  context. */
static void cp_handler_write_timing(int fd, const cp_handler_answer *answer)
{
    char line[128];
    size_t used = 0;
    int failed = 0;
    failed |= cp_safe_append_string(line, sizeof line, &used,
                                    "crashport-timing send_to_verdict_ns=");
    failed |= cp_safe_append_u64(line, sizeof line, &used, answer->verdict_ns - answer->send_ns);
    failed |= cp_safe_append_string(line, sizeof line, &used, " capture_ns=");
    failed |= cp_safe_append_u64(line, sizeof line, &used, answer->verdict.capture_ns);
    failed |= cp_safe_append_string(line, sizeof line, &used, "\n");
    if (!failed) {
        (void)cp_safe_write_all(fd, line, used);
    }
}

/** A thread that crashed while another one reports: wait until that report is over, at most
 *  6 × timeout + 1 s (the reporter's own wait may be extended by heartbeats up to 6 × timeout,
 *  and a second thread must not end the process while the watcher is still capturing),
 *  retrying the futex wait after EINTR. Runs in signal context. */
static void cp_handler_wait_for_report(cp_stub_state *state)
{
    uint64_t deadline = cp_safe_clock_ns(CLOCK_MONOTONIC) +
                        (6u * (uint64_t)state->timeout_ms + 1000u) * CP_NS_PER_MS;
    while (__atomic_load_n(&state->crash_done, __ATOMIC_ACQUIRE) == 0) {
        uint64_t now = cp_safe_clock_ns(CLOCK_MONOTONIC);
        if (now >= deadline) {
            return;
        }
        uint64_t left = deadline - now;
        struct {
            int64_t seconds;
            int64_t nanoseconds;
        } relative = {(int64_t)(left / 1000000000u), (int64_t)(left % 1000000000u)};
        /* Returns at once (EAGAIN) if the word is no longer 0. */
        (void)cp_safe_syscall6(SYS_futex, (long)&state->crash_done, FUTEX_WAIT_PRIVATE, 0,
                               (long)&relative, 0, 0);
    }
}

void cp_report_fault(cp_stub_state *state, uint32_t tid, const cp_fault *original, const cp_reraise *reraise,
                     uint32_t record_flags)
{
    if (__atomic_load_n(&state->disabled, __ATOMIC_RELAXED) != 0) {
        return; /* crashport_set_enabled(0): the chain continues as if crashport were not here */
    }
    uint32_t holder = 0;
    if (!__atomic_compare_exchange_n(&state->crashing_tid, &holder, tid, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE)) {
        if (holder != tid) {
            /* Another thread is reporting: it describes the process, we wait for it. */
            __atomic_fetch_add(&state->other_crashes, 1, __ATOMIC_RELAXED);
            cp_handler_wait_for_report(state);
        }
        return; /* holder == tid: this thread already reported; one report per process */
    }
    /* A report runs now (the word may be left at 1 by a fault a handler turned into a call). */
    __atomic_store_n(&state->crash_done, 0, __ATOMIC_RELEASE);
    /* A fault a program handler turned into a call (CP_RERAISE_CALLED) is not yet the
     * process's crash: the watcher holds it until the process ends, nothing is spooled for it,
     * and a later fault is reported again. */
    bool provisional = reraise != NULL && reraise->how == CP_RERAISE_CALLED;

    cp_handler_answer answer;
    cp_safe_set(&answer, 0, sizeof answer);
    if (state->record != NULL &&
        (state->fd >= 0 || state->sidecar_address_length != 0 || state->spool_fd >= 0)) {
        cp_handler_fill_record(state, state->record, original, tid);
        if (reraise != NULL) {
            cp_safe_copy(&state->record->reraise, reraise, sizeof state->record->reraise);
            if (state->record->flags & CP_CRASH_NOT_DUMPABLE) {
                state->record->reraise.handler = 0; /* addresses: the process's layout */
                state->record->reraise.pc = 0;
            }
        } else {
            cp_safe_set(&state->record->reraise, 0, sizeof state->record->reraise);
        }
        state->record->flags |= record_flags;
        cp_handler_allow_ptrace(state);
        cp_handler_report(state, &answer);
        if (!answer.has_verdict && !provisional) {
            cp_handler_unanswered(state, answer.sent);
        }
    }

    __atomic_store_n(&state->crash_done, 1, __ATOMIC_RELEASE);
    (void)cp_safe_syscall3(SYS_futex, (long)&state->crash_done, FUTEX_WAKE_PRIVATE, INT_MAX);
    if (provisional) {
        __atomic_store_n(&state->crashing_tid, 0, __ATOMIC_RELEASE);
    }

    if (answer.has_verdict && state->timing_fd >= 0) {
        cp_handler_write_timing(state->timing_fd, &answer);
    }
}

#if defined(__clang__)
#pragma clang attribute pop
#endif
