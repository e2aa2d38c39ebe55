/*
 * guarded.c: file mappings whose reads a truncation cannot turn into a fatal SIGBUS
 * (Sources/ObjectFile/MappedFile.swift is the one caller).
 *
 * A private mapping of a file past the file's end (it was truncated after it was mapped), or of
 * a page the file system cannot read (an I/O error on a network or FUSE file system), raises
 * SIGBUS on the read. The watcher maps files its users own (their libraries, their debug files),
 * so a user could kill a root sidecar, and with it the machine's core handler. Every file
 * mapping crashport reads is registered here, and one SIGBUS handler (SA_SIGINFO | SA_ONSTACK)
 * recovers a fault inside a registered range: the pages from the faulting one to the range's end
 * become anonymous zero pages (mmap MAP_FIXED, the range's own protection), the range is marked
 * torn, and the handler returns, so the read that faulted runs again and reads zeros. Every
 * parser here takes a file's bytes as hostile (they may change under a reader at any moment
 * anyway: a private mapping shows the file's writes until a page is copied), so zeros are one
 * more shape of hostile bytes. A fault anywhere else goes to the handler that was there before
 * (the Swift runtime's backtracer, when it installed one), or, where there was none, to the
 * default action: the process dies with SIGBUS as it would have without this file.
 *
 * The handler may run on any thread at any moment, so it only reads the table below (atomics,
 * no lock) and calls mmap (glibc's is the bare system call: no lock, errno only, saved and put
 * back), sigaction, pthread_sigmask, the sigset functions and raise (async-signal-safe); it never
 * allocates, locks or touches a registered range itself. The table is fixed: CP_GUARD_SLOTS
 * slots, each a seqlock (a sequence that is odd while the slot is written), so that a slot read
 * while another thread frees and reuses it is skipped, never read half old and half new. A
 * range's slot cannot change while its range is read: its owner unregisters it only when nothing
 * reads the mapping any more, before unmapping it. When the table is full the caller must not
 * read the file through a mapping (MappedFile reads it with pread instead).
 *
 * What it cannot do: run while SIGBUS is blocked. The kernel kills a thread whose fault raises a
 * blocked SIGBUS, handler or not, so no thread may read a registered range with SIGBUS blocked
 * (crashport blocks it nowhere; libunwind blocks every signal around its callbacks, and unwind.c
 * lets SIGBUS through again).
 */
#define _GNU_SOURCE
#include "crashport_shims.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define CP_GUARD_SLOTS 4096

struct cp_guard_slot {
    /* Even: stable; odd: being written. A free slot has start == end == 0. */
    _Atomic uint32_t sequence;
    _Atomic int32_t prot;
    _Atomic uintptr_t start;
    _Atomic uintptr_t end;
    _Atomic int32_t torn;
    /* 1 while the slot is taken (claimed with a compare-exchange). */
    _Atomic int32_t taken;
};

static struct cp_guard_slot cp_guard_slots[CP_GUARD_SLOTS];
/* One past the highest slot ever taken: how far the handler looks. */
static _Atomic int cp_guard_used;
static struct sigaction cp_guard_previous;
static uintptr_t cp_guard_page_size;
static pthread_once_t cp_guard_once = PTHREAD_ONCE_INIT;
static _Atomic int cp_guard_installed;

/* Signal-safe: a fault this handler does not recover goes where it would have gone without it.
 * The previous handler runs as the kernel would have run it: with the mask of the moment of the
 * fault, its own sa_mask and the signal itself unless SA_NODEFER (Swift's backtracer has
 * SA_NODEFER: the thread it starts to read the process's memory inherits this mask, and a fault
 * it takes with SIGBUS blocked would kill the process before the backtrace is written), and reset
 * first when it was installed with SA_RESETHAND. */
static void cp_guard_chain(int signal, siginfo_t *info, void *context) {
    struct sigaction previous = cp_guard_previous;
    /* A fault recurs when the handler returns; a SIGBUS another process sent does not. */
    int sent = info == NULL || info->si_code <= 0;
    int handled = (previous.sa_flags & SA_SIGINFO) ? previous.sa_sigaction != NULL
                                                   : previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN;
    if (!handled) {
        if (previous.sa_handler == SIG_IGN && !(previous.sa_flags & SA_SIGINFO) && sent) return;
        /* The default action, as without this handler: a fault runs again into SIG_DFL (and dies
         * with SIGBUS and its core dump); a sent one is raised again, to this thread. */
        struct sigaction fallback = {0};
        fallback.sa_handler = SIG_DFL;
        sigemptyset(&fallback.sa_mask);
        sigaction(signal, &fallback, NULL);
        if (sent) raise(signal);
        return;
    }
    if (previous.sa_flags & SA_RESETHAND) {
        struct sigaction fallback = {0};
        fallback.sa_handler = SIG_DFL;
        sigemptyset(&fallback.sa_mask);
        sigaction(signal, &fallback, NULL);
    }
    sigset_t mask, saved;
    if (context != NULL) {
        mask = ((const ucontext_t *)context)->uc_sigmask;
    } else {
        pthread_sigmask(SIG_SETMASK, NULL, &mask);
    }
    sigorset(&mask, &mask, &previous.sa_mask);
    if (previous.sa_flags & SA_NODEFER) {
        sigdelset(&mask, signal);
    } else {
        sigaddset(&mask, signal);
    }
    pthread_sigmask(SIG_SETMASK, &mask, &saved);
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(signal, info, context);
    } else {
        previous.sa_handler(signal);
    }
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

/* Signal-safe: the registered range holding `address`, made readable as zeros from its page on. */
static int cp_guard_recover(uintptr_t address) {
    int used = atomic_load_explicit(&cp_guard_used, memory_order_acquire);
    for (int index = 0; index < used; index++) {
        struct cp_guard_slot *slot = &cp_guard_slots[index];
        uint32_t before = atomic_load_explicit(&slot->sequence, memory_order_acquire);
        if (before & 1) continue;
        uintptr_t start = atomic_load_explicit(&slot->start, memory_order_relaxed);
        uintptr_t end = atomic_load_explicit(&slot->end, memory_order_relaxed);
        int prot = atomic_load_explicit(&slot->prot, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&slot->sequence, memory_order_relaxed) != before) continue;
        if (address < start || address >= end) continue;
        uintptr_t page = address & ~(cp_guard_page_size - 1);
        uintptr_t last = (end + cp_guard_page_size - 1) & ~(cp_guard_page_size - 1);
        void *zeros = mmap((void *)page, last - page, prot, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (zeros == MAP_FAILED) return 0;
        atomic_store_explicit(&slot->torn, 1, memory_order_release);
        return 1;
    }
    return 0;
}

/* The SIGBUS handler. Signal-safe. */
static void cp_guard_handler(int signal, siginfo_t *info, void *context) {
    int saved = errno;
    /* Only a fault the kernel raised (si_code > 0) names the address that faulted. */
    int recovered = info != NULL && info->si_code > 0 && cp_guard_recover((uintptr_t)info->si_addr);
    errno = saved;
    if (!recovered) cp_guard_chain(signal, info, context);
    errno = saved;
}

static void cp_guard_install(void) {
    long page = sysconf(_SC_PAGESIZE);
    cp_guard_page_size = page > 0 ? (uintptr_t)page : 4096;
    struct sigaction action = {0};
    action.sa_sigaction = cp_guard_handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGBUS, &action, &cp_guard_previous) == 0) atomic_store(&cp_guard_installed, 1);
}

int cp_guard_register(const void *start, size_t length, int prot) {
    pthread_once(&cp_guard_once, cp_guard_install);
    if (!atomic_load(&cp_guard_installed) || start == NULL || length == 0) return -1;
    uintptr_t first = (uintptr_t)start;
    if (first + length < first) return -1;
    for (int index = 0; index < CP_GUARD_SLOTS; index++) {
        struct cp_guard_slot *slot = &cp_guard_slots[index];
        int32_t free_slot = 0;
        if (!atomic_compare_exchange_strong(&slot->taken, &free_slot, 1)) continue;
        atomic_fetch_add_explicit(&slot->sequence, 1, memory_order_relaxed);  // odd: being written
        atomic_thread_fence(memory_order_release);
        atomic_store_explicit(&slot->start, first, memory_order_relaxed);
        atomic_store_explicit(&slot->end, first + length, memory_order_relaxed);
        atomic_store_explicit(&slot->prot, prot, memory_order_relaxed);
        atomic_store_explicit(&slot->torn, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&slot->sequence, 1, memory_order_release);  // even: in use
        int used = atomic_load(&cp_guard_used);
        while (used < index + 1 && !atomic_compare_exchange_weak(&cp_guard_used, &used, index + 1)) {
        }
        return index;
    }
    return -1;
}

void cp_guard_unregister(int slot_index) {
    if (slot_index < 0 || slot_index >= CP_GUARD_SLOTS) return;
    struct cp_guard_slot *slot = &cp_guard_slots[slot_index];
    atomic_fetch_add_explicit(&slot->sequence, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&slot->start, 0, memory_order_relaxed);
    atomic_store_explicit(&slot->end, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&slot->sequence, 1, memory_order_release);
    atomic_store_explicit(&slot->taken, 0, memory_order_release);
}

int cp_guard_torn(int slot_index) {
    if (slot_index < 0 || slot_index >= CP_GUARD_SLOTS) return 0;
    return atomic_load_explicit(&cp_guard_slots[slot_index].torn, memory_order_acquire);
}
