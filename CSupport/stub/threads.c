/*
 * threads.c: an alternate signal stack for every thread (docs/architecture.md, "The crash path"), so that a stack overflow
 * on any thread, not only the installing one, is a reported crash.
 *
 * The pthread_create interposer (interpose.c, in libcrashport.so) asks cp_thread_prepare, in
 * the creating thread, for one mapping per new thread:
 *     [guard page, PROT_NONE][alternate stack, CP_ALTSTACK_BYTES][start record, one page]
 * The new thread's first code, cp_thread_start, installs that alternate stack with a raw
 * sigaltstack, registers the mapping for release at thread exit, and runs the program's start
 * routine. The whole start path allocates nothing and takes no lock: it is raw system calls
 * plus pthread_setspecific, and tools/check-stub-safety checks this object against the signal
 * handler's allowlist plus that one name. The mapping is released by a pthread key destructor
 * at thread exit (return, pthread_exit or cancellation); only touched pages cost memory, so a
 * thread that never takes a signal pays one page (the start record). Released mappings are
 * kept in a few slots for the next threads (an atomic exchange per slot: no lock, no ABA), so
 * a program that keeps creating threads pays two sigaltstack calls per thread, not five.
 */
/* The crash path's code-generation rules, in the source for builds that cannot pass
 * tools/build-stub's flags (SwiftPM's, CCrashPort): no stack protector, no sanitizer. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((no_stack_protector, disable_sanitizer_instrumentation)), apply_to = function)
#endif
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "safe.h"
#include "stub_state.h"

#define CP_PAGE 4096u

pthread_key_t cp_thread_key;
int cp_thread_key_ready;

#define CP_SPARE_SLOTS 32
static struct cp_thread_region *cp_spare[CP_SPARE_SLOTS];

typedef struct cp_thread_region {
    void *(*start)(void *);
    void *argument;
    char *base;    /* the whole mapping */
    uint64_t size;
    char *stack;   /* the alternate stack's lowest address */
} cp_thread_region;

/** Maps a new thread's guard page, alternate stack and start record; NULL on failure (the
 *  thread is then created without one). Called by the creating thread, not in signal context. */
cp_thread_region *cp_thread_prepare(void *(*start)(void *), void *argument)
{
    if (!__atomic_load_n(&cp_thread_key_ready, __ATOMIC_ACQUIRE)) {
        return NULL;
    }
    for (int slot = 0; slot < CP_SPARE_SLOTS; slot++) {
        if (__atomic_load_n(&cp_spare[slot], __ATOMIC_RELAXED) == NULL) {
            continue;
        }
        cp_thread_region *spare = __atomic_exchange_n(&cp_spare[slot], NULL, __ATOMIC_ACQ_REL);
        if (spare != NULL) {
            spare->start = start;
            spare->argument = argument;
            return spare;
        }
    }
    uint64_t size = CP_PAGE + CP_ALTSTACK_BYTES + CP_PAGE;
    long mapped = cp_safe_syscall6(SYS_mmap, 0, (long)size, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
    if (mapped < 0 && mapped > -4096) {
        return NULL;
    }
    char *base = (char *)(uintptr_t)mapped;
    if (cp_safe_syscall3(SYS_mprotect, (long)base, CP_PAGE, PROT_NONE) != 0) {
        (void)cp_safe_syscall2(SYS_munmap, (long)base, (long)size);
        return NULL;
    }
    cp_thread_region *region = (cp_thread_region *)(base + CP_PAGE + CP_ALTSTACK_BYTES);
    region->start = start;
    region->argument = argument;
    region->base = base;
    region->size = size;
    region->stack = base + CP_PAGE;
    return region;
}

/** Unmaps a region whose thread never started. Not in signal context. */
void cp_thread_discard(cp_thread_region *region)
{
    (void)cp_safe_syscall2(SYS_munmap, (long)region->base, (long)region->size);
}

/** Key destructor, at thread exit: turns our alternate stack off (unless the program replaced
 *  it with its own since) and unmaps the region. */
void cp_thread_release(void *value)
{
    cp_thread_region *region = value;
    stack_t current;
    if (cp_safe_syscall2(SYS_sigaltstack, 0, (long)&current) == 0 && current.ss_sp == region->stack &&
        !(current.ss_flags & SS_ONSTACK)) {
        stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
        (void)cp_safe_syscall2(SYS_sigaltstack, (long)&off, 0);
    } else if (current.ss_sp == region->stack) {
        return; /* still in use: leave it mapped rather than pull it from under a handler */
    }
    for (int slot = 0; slot < CP_SPARE_SLOTS; slot++) {
        cp_thread_region *empty = NULL;
        if (__atomic_compare_exchange_n(&cp_spare[slot], &empty, region, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            return; /* kept for the next thread */
        }
    }
    (void)cp_safe_syscall2(SYS_munmap, (long)region->base, (long)region->size);
}

/** Gives the new thread its alternate stack (the region's), or gives the region back. */
__attribute__((noinline)) static void cp_thread_setup(cp_thread_region *region)
{
    stack_t stack = {.ss_sp = region->stack, .ss_flags = 0, .ss_size = CP_ALTSTACK_BYTES};
    if (cp_safe_syscall2(SYS_sigaltstack, (long)&stack, 0) == 0) {
        (void)pthread_setspecific(cp_thread_key, region);
    } else {
        cp_thread_discard(region);
    }
}

/** The first code of every thread created through the interposer: installs the alternate
 *  stack, then runs the program's start routine. Allocates nothing, takes no lock.
 *
 *  The start routine is a tail call (a jump: no local of ours is live across it), so this
 *  function leaves no frame: crashport's reports, gdb and LLDB all see start_thread call the
 *  program's own routine, as without crashport. */
void *cp_thread_start(void *argument)
{
    cp_thread_region *region = argument;
    void *(*start)(void *) = region->start;
    void *start_argument = region->argument;
    cp_thread_setup(region);
    return start(start_argument); /* -O2: a sibling call (jmp), checked by tools/build-stub */
}

#if defined(__clang__)
#pragma clang attribute pop
#endif
