/*
 * actions.h: the program's own signal actions, as the kernel would hold them without crashport.
 *
 * crashport keeps the kernel's slot for every signal it handles, for the life of the process
 * (the way a Mach exception port is not a slot a signal handler can take). What the program
 * sets with sigaction/signal/sigset lands here instead (interpose.c), and the crash path
 * (entry.c, forward.c) runs it the way the kernel would have. Readers and writers may be any thread, a
 * signal handler, or the crash path: nothing here locks, allocates or touches errno. See
 * cp_program_action in stub_state.h for the versioning scheme.
 */
#ifndef CRASHPORT_STUB_ACTIONS_H
#define CRASHPORT_STUB_ACTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>

#include "safe.h"
#include "stub_state.h"

/* Readers retry when a writer replaced the version under them; past this many, the copy made
 * last is used (a writer would have to republish thousands of times during one copy). */
#define CP_ACTION_READ_ATTEMPTS 1000

/** Starts the record of `signo` as `initial` (install time, before any handler is live). */
static inline void cp_actions_reset(cp_stub_state *state, int signo, const cp_kernel_sigaction *initial)
{
    cp_program_action *slot = &state->program[signo];
    cp_safe_set(slot, 0, sizeof *slot);
    slot->versions[0].action = *initial;
    slot->current = 0;
    slot->free = ((1u << CP_ACTION_VERSIONS) - 1) & ~1u;
    slot->changes = 0;
}

/** The program's current action for a handled signal, copied whole; `changes` (may be NULL)
 *  gets how many times the program set it since install. */
static inline void cp_actions_load(const cp_stub_state *state, int signo, cp_kernel_sigaction *out,
                                   uint32_t *changes)
{
    const cp_program_action *slot = &state->program[signo];
    for (int attempt = 0; attempt < CP_ACTION_READ_ATTEMPTS; attempt++) {
        uint32_t index = __atomic_load_n(&slot->current, __ATOMIC_ACQUIRE) % CP_ACTION_VERSIONS;
        const cp_action_version *version = &slot->versions[index];
        uint32_t before = __atomic_load_n(&version->sequence, __ATOMIC_ACQUIRE);
        out->handler = __atomic_load_n(&version->action.handler, __ATOMIC_RELAXED);
        out->flags = __atomic_load_n(&version->action.flags, __ATOMIC_RELAXED);
        out->restorer = __atomic_load_n(&version->action.restorer, __ATOMIC_RELAXED);
        out->mask = __atomic_load_n(&version->action.mask, __ATOMIC_RELAXED);
        if (changes != NULL) {
            *changes = __atomic_load_n(&slot->changes, __ATOMIC_RELAXED);
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        uint32_t after = __atomic_load_n(&version->sequence, __ATOMIC_RELAXED);
        if (before == after && (before & 1u) == 0 &&
            __atomic_load_n(&slot->current, __ATOMIC_RELAXED) % CP_ACTION_VERSIONS == index) {
            return;
        }
    }
}

/** Publishes `action` as the program's action for `signo` and copies the one it replaces into
 *  `old` (may be NULL), atomically with respect to every other writer. */
static inline void cp_actions_store(cp_stub_state *state, int signo, const cp_kernel_sigaction *action,
                                    cp_kernel_sigaction *old)
{
    cp_program_action *slot = &state->program[signo];
    uint32_t index = 0;
    for (;;) {
        uint32_t free = __atomic_load_n(&slot->free, __ATOMIC_ACQUIRE);
        if (free == 0) {
            /* Every spare version is being written by another writer (more than seven at once,
             * or nested in signal handlers): let them finish. */
            (void)cp_safe_syscall0(SYS_sched_yield);
            continue;
        }
        index = (uint32_t)__builtin_ctz(free);
        if (__atomic_compare_exchange_n(&slot->free, &free, free & ~(1u << index), false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            break;
        }
    }
    cp_action_version *version = &slot->versions[index];
    uint32_t sequence = __atomic_load_n(&version->sequence, __ATOMIC_RELAXED);
    __atomic_store_n(&version->sequence, sequence + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&version->action.handler, action->handler, __ATOMIC_RELAXED);
    __atomic_store_n(&version->action.flags, action->flags, __ATOMIC_RELAXED);
    __atomic_store_n(&version->action.restorer, action->restorer, __ATOMIC_RELAXED);
    __atomic_store_n(&version->action.mask, action->mask, __ATOMIC_RELAXED);
    __atomic_store_n(&version->sequence, sequence + 2, __ATOMIC_RELEASE);

    uint32_t replaced = __atomic_exchange_n(&slot->current, index, __ATOMIC_ACQ_REL);
    __atomic_fetch_add(&slot->changes, 1, __ATOMIC_RELAXED);
    if (old != NULL) {
        /* Ours until it is freed below: no other writer can claim it, so it cannot change. */
        *old = slot->versions[replaced % CP_ACTION_VERSIONS].action;
    }
    __atomic_fetch_or(&slot->free, 1u << (replaced % CP_ACTION_VERSIONS), __ATOMIC_RELEASE);
}

/** True when `signo` is one crashport handles (its action is virtual). */
static inline bool cp_actions_virtual(const cp_stub_state *state, int signo)
{
    return signo > 0 && signo < CP_SIGNAL_LIMIT &&
           (__atomic_load_n(&state->handled, __ATOMIC_ACQUIRE) & (1ull << signo)) != 0;
}

#endif /* CRASHPORT_STUB_ACTIONS_H */
