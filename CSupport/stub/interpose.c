/*
 * interpose.c: libc functions crashport stands in front of (libcrashport.so only, where
 * LD_PRELOAD or link order puts it before libc's). A static archive leaves this file out: there
 * it would collide with libc.a's own definitions (docs/using.md: what differs without interposition).
 *
 *  - pthread_create, so that every new thread gets an alternate signal stack (threads.c). When
 *    crashport is not installed, or the mapping fails, the thread is created exactly as
 *    without crashport. Not signal context: dlsym is fine there.
 *  - sigaction and the older signal-setting functions, so that crashport keeps the kernel's
 *    slot of the signals it handles while the program sees and sets only its own actions.
 *  - std::set_terminate and std::get_terminate (libstdc++'s, by their mangled names), so that a
 *    terminate handler the program sets after install becomes the next in crashport's chain
 *    instead of replacing crashport's, as for signals (app.c keeps the chain).
 *  - _exit and _Exit, so that a program leaving without exit() (a daemon skipping its exit
 *    handlers, a program's own signal handler ending the process) still says GOODBYE, as exit()
 *    does through the on_exit hook install registers. exit() itself reaches libc's _exit
 *    directly, never this one. May run in a signal handler: raw system calls only, libc's _exit
 *    resolved at install.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>

#include "actions.h"
#include "forward.h"
#include "off_path.h"
#include "report.h"
#include "safe.h"
#include "stub_state.h"

typedef struct cp_thread_region cp_thread_region;
cp_thread_region *cp_thread_prepare(void *(*start)(void *), void *argument) __attribute__((visibility("hidden")));
void cp_thread_discard(cp_thread_region *region) __attribute__((visibility("hidden")));
void *cp_thread_start(void *argument) __attribute__((visibility("hidden")));

typedef int (*cp_create_function)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

__attribute__((visibility("default"))) int pthread_create(pthread_t *thread, const pthread_attr_t *attributes,
                                                           void *(*start)(void *), void *argument)
{
    static cp_create_function real;
    cp_create_function create = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (create == NULL) {
        create = (cp_create_function)dlsym(RTLD_NEXT, "pthread_create");
        if (create == NULL) {
            return EAGAIN;
        }
        __atomic_store_n(&real, create, __ATOMIC_RELEASE);
    }
    cp_thread_region *region = cp_thread_prepare(start, argument);
    if (region == NULL) {
        return create(thread, attributes, start, argument);
    }
    int result = create(thread, attributes, cp_thread_start, region);
    if (result != 0) {
        cp_thread_discard(region);
    }
    return result;
}

/*
 * Signal dispositions, made virtual. For a signal crashport handles (once installed), the
 * program's sigaction changes the program's action kept in cp_state (actions.h), not the
 * kernel's: the kernel's slot stays crashport's, and the crash handler runs the program's action
 * the way the kernel would have. What the program reads back (the old action, a query) is its
 * own action, as if crashport were not there. Every other signal, and every call before install,
 * goes straight to libc's.
 *
 * Async-signal-safe like the real sigaction: once installed, no lock and no allocation (libc's
 * functions were resolved at install, cp_interpose_resolve).
 */
typedef int (*cp_sigaction_function)(int, const struct sigaction *, struct sigaction *);
typedef int (*cp_sigprocmask_function)(int, const sigset_t *, sigset_t *);

typedef sighandler_t (*cp_sigset_function)(int, sighandler_t);

typedef void (*cp_exit_function)(int);

/* install.c's weak definition says false where this file is not linked; the note says it to
 * another copy of the stub (stub_state.h). */
__attribute__((visibility("hidden"))) bool cp_interposing = true;
__attribute__((section(".note.crashport"), used, aligned(4))) static const cp_mark_note cp_interpose_mark = {
    10, 4, CP_MARK_INTERPOSER, "crashport", 1};

static cp_sigaction_function cp_real_sigaction;
static cp_sigprocmask_function cp_real_sigprocmask;
static cp_sigprocmask_function cp_real_pthread_sigmask;
static cp_sigset_function cp_real_sigset;
static cp_exit_function cp_real_exit;
static cp_exit_function cp_real_Exit;

__attribute__((visibility("hidden"))) void cp_interpose_resolve(void)
{
    if (__atomic_load_n(&cp_real_exit, __ATOMIC_ACQUIRE) == NULL) {
        __atomic_store_n(&cp_real_Exit, (cp_exit_function)dlsym(RTLD_NEXT, "_Exit"), __ATOMIC_RELEASE);
        __atomic_store_n(&cp_real_exit, (cp_exit_function)dlsym(RTLD_NEXT, "_exit"), __ATOMIC_RELEASE);
    }
    if (__atomic_load_n(&cp_real_sigaction, __ATOMIC_ACQUIRE) == NULL) {
        cp_sigset_function sigset_found = (cp_sigset_function)dlsym(RTLD_NEXT, "sigset");
        __atomic_store_n(&cp_real_sigset, sigset_found, __ATOMIC_RELEASE);
        __atomic_store_n(&cp_real_sigprocmask, (cp_sigprocmask_function)dlsym(RTLD_NEXT, "sigprocmask"),
                         __ATOMIC_RELEASE);
        __atomic_store_n(&cp_real_pthread_sigmask, (cp_sigprocmask_function)dlsym(RTLD_NEXT, "pthread_sigmask"),
                         __ATOMIC_RELEASE);
        cp_sigaction_function found = (cp_sigaction_function)dlsym(RTLD_NEXT, "sigaction");
        __atomic_store_n(&cp_real_sigaction, found, __ATOMIC_RELEASE);
    }
}

static int cp_interpose_real_sigaction(int signo, const struct sigaction *action, struct sigaction *old)
{
    cp_sigaction_function real = __atomic_load_n(&cp_real_sigaction, __ATOMIC_ACQUIRE);
    if (real == NULL) {
        cp_interpose_resolve(); /* a call before crashport's constructor ran */
        real = __atomic_load_n(&cp_real_sigaction, __ATOMIC_ACQUIRE);
        if (real == NULL) {
            errno = ENOSYS;
            return -1;
        }
    }
    return real(signo, action, old);
}

/* libc's struct sigaction <-> the kernel's form the stub keeps (signals 1..64 of the mask). */
static void cp_interpose_to_kernel(const struct sigaction *action, cp_kernel_sigaction *kernel)
{
    uint64_t mask = 0;
    for (int signo = 1; signo <= 64; signo++) {
        /* The kernel never keeps SIGKILL or SIGSTOP in a handler's mask. */
        if (signo != SIGKILL && signo != SIGSTOP && sigismember(&action->sa_mask, signo) == 1) {
            mask |= 1ull << (signo - 1);
        }
    }
    kernel->handler = (uint64_t)(uintptr_t)action->sa_handler;
    /* libc adds its restorer to every action it gives the kernel: so does this one. */
    kernel->flags = (uint64_t)(uint32_t)action->sa_flags | CP_SA_RESTORER;
    kernel->restorer = cp_state.restorer;
    kernel->mask = mask;
}

static void cp_interpose_from_kernel(const cp_kernel_sigaction *kernel, struct sigaction *action)
{
    memset(action, 0, sizeof *action);
    action->sa_handler = (void (*)(int))(uintptr_t)kernel->handler;
    sigemptyset(&action->sa_mask);
    for (int signo = 1; signo <= 64; signo++) {
        if (kernel->mask & (1ull << (signo - 1))) {
            sigaddset(&action->sa_mask, signo);
        }
    }
    action->sa_flags = (int)(uint32_t)kernel->flags;
    action->sa_restorer = (void (*)(void))(uintptr_t)kernel->restorer;
}

__attribute__((visibility("default"))) int sigaction(int signo, const struct sigaction *action,
                                                      struct sigaction *old)
{
    if (!cp_actions_virtual(&cp_state, signo)) {
        return cp_interpose_real_sigaction(signo, action, old);
    }
    cp_kernel_sigaction previous;
    if (action != NULL) {
        cp_kernel_sigaction wanted;
        cp_interpose_to_kernel(action, &wanted);
        cp_actions_store(&cp_state, signo, &wanted, &previous);
    } else {
        cp_actions_load(&cp_state, signo, &previous, NULL);
    }
    if (old != NULL) {
        cp_interpose_from_kernel(&previous, old);
    }
    return 0;
}

__attribute__((visibility("default"))) int __sigaction(int signo, const struct sigaction *action,
                                                        struct sigaction *old)
{
    return sigaction(signo, action, old);
}

/*
 * Signal masks inside a program handler crashport runs. The kernel blocks the handler's signal
 * (and its sa_mask) while it runs; crashport keeps the synchronous ones unblocked for real and
 * remembers them as blocked (forward.c), so a fault inside the handler reaches it. A program
 * that unblocks one there (a JVM's error reporting, which catches its own secondary faults with
 * the handler it installs then) must get what the kernel would give it: the fault goes to its
 * action. So a change of mask inside a handler is told to forward.c, and the mask read back
 * holds what the kernel would hold. Outside a handler these are libc's own.
 */
static uint64_t cp_interpose_kernel_set(const sigset_t *set)
{
    uint64_t bits = 0;
    for (int signo = 1; signo <= 64; signo++) {
        if (sigismember(set, signo) == 1) {
            bits |= 1ull << (signo - 1);
        }
    }
    return bits;
}

/* `sets_errno`: sigprocmask's convention (-1 and errno), else pthread_sigmask's (the error). */
static int cp_interpose_mask(cp_sigprocmask_function *real, int how, const sigset_t *set, sigset_t *old,
                             bool sets_errno)
{
    cp_sigprocmask_function function = __atomic_load_n(real, __ATOMIC_ACQUIRE);
    if (function == NULL) {
        cp_interpose_resolve();
        function = __atomic_load_n(real, __ATOMIC_ACQUIRE);
        if (function == NULL) {
            /* libc's own, as the raw system call (what both are made of). */
            long result = cp_safe_syscall4(SYS_rt_sigprocmask, how, (long)set, (long)old, 8);
            if (result < 0 && sets_errno) {
                errno = (int)-result;
                return -1;
            }
            return result < 0 ? (int)-result : 0;
        }
    }
    uint64_t held = cp_forward_virtually_blocked();
    int result = function(how, set, old);
    if (result != 0 || held == 0) {
        return result;
    }
    if (old != NULL) {
        for (int signo = 1; signo <= 64; signo++) {
            if (held & (1ull << (signo - 1))) {
                sigaddset(old, signo);
            }
        }
    }
    if (set != NULL && (how == SIG_UNBLOCK || how == SIG_SETMASK)) {
        uint64_t bits = cp_interpose_kernel_set(set);
        cp_forward_unblocked(how == SIG_UNBLOCK ? bits : ~bits);
    }
    return result;
}

__attribute__((visibility("default"))) int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    return cp_interpose_mask(&cp_real_pthread_sigmask, how, set, old, false);
}

__attribute__((visibility("default"))) int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    return cp_interpose_mask(&cp_real_sigprocmask, how, set, old, true);
}

/* The older interfaces, as glibc defines them on top of sigaction: `flags`, and the signal
 * blocked in its own handler when `block_self`. Returns the previous handler or SIG_ERR. */
static sighandler_t cp_interpose_signal(int signo, sighandler_t handler, int flags, bool block_self)
{
    struct sigaction action, old;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = flags;
    if (handler == SIG_ERR || (block_self && sigaddset(&action.sa_mask, signo) != 0) ||
        sigaction(signo, &action, &old) != 0) {
        errno = EINVAL;
        return SIG_ERR;
    }
    return old.sa_handler;
}

/* signal(): BSD semantics, system calls restarted. */
__attribute__((visibility("default"))) sighandler_t signal(int signo, sighandler_t handler)
{
    return cp_interpose_signal(signo, handler, SA_RESTART, true);
}

__attribute__((visibility("default"))) sighandler_t bsd_signal(int signo, sighandler_t handler)
{
    return signal(signo, handler);
}

/* System V semantics: one shot, not blocked in its own handler. */
__attribute__((visibility("default"))) sighandler_t sysv_signal(int signo, sighandler_t handler)
{
    return cp_interpose_signal(signo, handler, SA_RESETHAND | SA_NODEFER, false);
}

__attribute__((visibility("default"))) sighandler_t __sysv_signal(int signo, sighandler_t handler)
{
    return sysv_signal(signo, handler);
}

/* sigset(): SIG_HOLD blocks the signal; anything else sets the action and unblocks it. Returns
 * SIG_HOLD when the signal was blocked before, else the previous handler. */
__attribute__((visibility("default"))) sighandler_t sigset(int signo, sighandler_t handler)
{
    if (!cp_actions_virtual(&cp_state, signo)) {
        cp_interpose_resolve();
        cp_sigset_function real = __atomic_load_n(&cp_real_sigset, __ATOMIC_ACQUIRE);
        if (real == NULL) {
            errno = ENOSYS;
            return SIG_ERR;
        }
        return real(signo, handler);
    }
    sigset_t one, before;
    sigemptyset(&one);
    sigaddset(&one, signo);
    struct sigaction old;
    if (handler == SIG_HOLD) {
        if (sigaction(signo, NULL, &old) != 0 || pthread_sigmask(SIG_BLOCK, &one, &before) != 0) {
            return SIG_ERR;
        }
    } else {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = handler;
        sigemptyset(&action.sa_mask);
        if (handler == SIG_ERR || sigaction(signo, &action, &old) != 0 ||
            pthread_sigmask(SIG_UNBLOCK, &one, &before) != 0) {
            errno = EINVAL;
            return SIG_ERR;
        }
    }
    return sigismember(&before, signo) == 1 ? SIG_HOLD : old.sa_handler;
}

/* Ends the process as libc's _exit (or _Exit) would, after GOODBYE. Before install, or when
 * libc's could not be found, the raw exit_group system call is what libc's makes itself. */
static void __attribute__((noreturn)) cp_interpose_exit(cp_exit_function *real, int status)
{
    cp_handler_goodbye(&cp_state, status);
    cp_exit_function function = __atomic_load_n(real, __ATOMIC_ACQUIRE);
    if (function != NULL) {
        function(status);
    }
    for (;;) {
        (void)cp_safe_syscall1(SYS_exit_group, status);
    }
}

__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    cp_interpose_exit(&cp_real_exit, status);
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status)
{
    cp_interpose_exit(&cp_real_Exit, status);
}

/*
 * std::terminate handlers, made a chain (C++ programs with libstdc++). Once crashport's handler
 * holds libstdc++'s slot (cp_app_install), a handler the program sets is kept as the program's
 * (app.c, cp_app_chain_terminate), which crashport's calls after it has noted the uncaught
 * exception's type and what(); what the program reads back is its own handler, as if crashport
 * were not there. Before install, without libstdc++, or under libc++abi (which defines the same
 * names; crashport does not chain there), the call goes to the next definition (RTLD_NEXT).
 * Reached when libcrashport.so comes before libstdc++ in the symbol search order: preloaded, or
 * linked with -lcrashport (the compiler driver adds -lstdc++ after the program's libraries).
 *
 * libstdc++ calls std::get_terminate itself, through its PLT, so it reaches this one too: a
 * throw keeps the handler of that moment in the exception (__cxa_init_primary_exception), and an
 * uncaught one ends in that handler. Its own calls (from its code) get its own answer,
 * crashport's handler; only the program's get the program's.
 *
 * Not signal context; no lock and no allocation once resolved (the first call looks up
 * libstdc++'s with dlsym and dl_iterate_phdr).
 */
typedef cp_terminate_handler (*cp_set_terminate_function)(cp_terminate_handler);
typedef cp_terminate_handler (*cp_get_terminate_function)(void);

/* The next definition of `name`, found once (dlsym: off the crash path). NULL when none. */
static void *cp_interpose_next(void **cache, const char *name)
{
    void *found = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (found == NULL) {
        found = dlsym(RTLD_NEXT, name);
        __atomic_store_n(cache, found, __ATOMIC_RELEASE);
    }
    return found;
}

/* std::set_terminate(std::terminate_handler) */
__attribute__((visibility("default"))) cp_terminate_handler _ZSt13set_terminatePFvvE(cp_terminate_handler handler)
{
    cp_terminate_handler previous = NULL;
    if (cp_app_chain_terminate(handler, &previous)) return previous;
    static void *real;
    cp_set_terminate_function set = (cp_set_terminate_function)cp_interpose_next(&real, "_ZSt13set_terminatePFvvE");
    return set != NULL ? set(handler) : NULL;
}

/* The span of the loaded object holding `address` (its PT_LOAD segments), for dl_iterate_phdr. */
typedef struct cp_interpose_span {
    uintptr_t address;
    uintptr_t start;
    uintptr_t end;
} cp_interpose_span;

static int cp_interpose_find_span(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    cp_interpose_span *span = data;
    uintptr_t low = UINTPTR_MAX, high = 0;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[index];
        if (segment->p_type != PT_LOAD) continue;
        uintptr_t start = (uintptr_t)info->dlpi_addr + (uintptr_t)segment->p_vaddr;
        if (start < low) low = start;
        if (start + (uintptr_t)segment->p_memsz > high) high = start + (uintptr_t)segment->p_memsz;
    }
    if (span->address < low || span->address >= high) return 0;
    span->start = low;
    span->end = high;
    return 1;
}

/* std::get_terminate() */
__attribute__((visibility("default"), noinline)) cp_terminate_handler _ZSt13get_terminatev(void)
{
    static void *real;
    static uintptr_t real_start, real_end; /* the object defining it: libstdc++ */
    cp_get_terminate_function get = (cp_get_terminate_function)cp_interpose_next(&real, "_ZSt13get_terminatev");
    cp_terminate_handler current = NULL;
    if (get != NULL && cp_app_chained_terminate(&current)) {
        if (__atomic_load_n(&real_end, __ATOMIC_ACQUIRE) == 0) {
            cp_interpose_span span = {(uintptr_t)get, 0, 0};
            if (dl_iterate_phdr(cp_interpose_find_span, &span) != 0) {
                __atomic_store_n(&real_start, span.start, __ATOMIC_RELAXED);
                __atomic_store_n(&real_end, span.end, __ATOMIC_RELEASE);
            }
        }
        uintptr_t caller = (uintptr_t)__builtin_return_address(0);
        bool own = caller >= __atomic_load_n(&real_start, __ATOMIC_RELAXED) &&
                   caller < __atomic_load_n(&real_end, __ATOMIC_ACQUIRE);
        if (!own) return current;
    }
    return get != NULL ? get() : NULL;
}
