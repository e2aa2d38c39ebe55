/*
 * unwind.c: libunwind over an abstract source of registers and memory (docs/architecture.md, "The crash path").
 *
 * libunwind's remote API takes a table of accessors. Ours answer from cp_unwind_source
 * callbacks: memory reads come from whatever the caller captured (a live process, a snapshot
 * taken before the process was released, a minidump), and FDE lookup goes through the
 * module's .eh_frame_hdr search table (UNW_INFO_FORMAT_REMOTE_TABLE), read through the same
 * memory callback. So libunwind never touches /proc or ptrace itself.
 *
 * Only libunwind's macro API and its accessor table are here: one step at a time, reported as
 * is. The walk (when to stop, when to scan the stack, how to label frames) is Swift's
 * (Sources/Unwinding).
 */
#include "crashport_shims.h"

#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* Exported by libunwind-x86_64 but declared only in its private headers. */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
                                             unw_proc_info_t *pi, int need_unwind_info, void *arg);

typedef struct session {
    const cp_unwind_source *source;
    /* The frame unw_init_remote started from. libunwind reads registers through access_reg
     * lazily, during later steps too, so these stay as given until the next cp_unwind_begin. */
    uint64_t regs[CP_USER_REGS_COUNT];
    /* Set by find_proc_info during a step: 1 FDE found, 0 not found; -1 when libunwind did not
     * look (its cache answered, and it caches only CFI-derived states). */
    int lookup;
    int table; /* when lookup is 1: the kind of the table that had the FDE */
} session;

/* libunwind x86_64 register number (UNW_X86_64_RAX..UNW_X86_64_RIP) -> index in struct
 * user_regs_struct. */
static const int user_regs_index[UNW_X86_64_RIP + 1] = {
    [UNW_X86_64_RAX] = CP_USER_REG_RAX, [UNW_X86_64_RDX] = CP_USER_REG_RDX, [UNW_X86_64_RCX] = CP_USER_REG_RCX,
    [UNW_X86_64_RBX] = CP_USER_REG_RBX, [UNW_X86_64_RSI] = CP_USER_REG_RSI, [UNW_X86_64_RDI] = CP_USER_REG_RDI,
    [UNW_X86_64_RBP] = CP_USER_REG_RBP, [UNW_X86_64_RSP] = CP_USER_REG_RSP, [UNW_X86_64_R8] = CP_USER_REG_R8,
    [UNW_X86_64_R9] = CP_USER_REG_R9,   [UNW_X86_64_R10] = CP_USER_REG_R10, [UNW_X86_64_R11] = CP_USER_REG_R11,
    [UNW_X86_64_R12] = CP_USER_REG_R12, [UNW_X86_64_R13] = CP_USER_REG_R13, [UNW_X86_64_R14] = CP_USER_REG_R14,
    [UNW_X86_64_R15] = CP_USER_REG_R15, [UNW_X86_64_RIP] = CP_USER_REG_RIP,
};

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg) {
    (void)as;
    session *s = arg;
    if (write) return -UNW_EREADONLYREG;
    uint64_t value = 0;
    if (s->source->read_memory(s->source->context, addr, &value, sizeof value) != 0) return -UNW_EINVAL;
    *val = value;
    return 0;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg) {
    (void)as;
    session *s = arg;
    if (write) return -UNW_EREADONLYREG;
    if (reg < 0 || reg > UNW_X86_64_RIP) return -UNW_EBADREG;
    *val = s->regs[user_regs_index[reg]];
    return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg) {
    (void)as; (void)reg; (void)val; (void)write; (void)arg;
    return -UNW_EBADREG;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg) {
    (void)as; (void)c; (void)arg;
    return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len, unw_word_t *off, void *arg) {
    (void)as; (void)addr; (void)buf; (void)len; (void)off; (void)arg;
    return -UNW_ENOINFO; /* symbolication is ours, not libunwind's */
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dil, void *arg) {
    (void)as; (void)dil; (void)arg;
    return -UNW_ENOINFO;
}

/* The tables of the module holding ip, in the order the source prefers them (.eh_frame's, then
 * .debug_frame's): the first with an FDE covering ip wins. */
static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need_unwind_info, void *arg) {
    session *s = arg;
    /* libunwind calls this with every signal blocked: its find_reg_state holds the register-state
     * cache's lock, taken with sigprocmask(SIG_SETMASK, all signals), across this lookup and the
     * parse of the FDE and CIE it finds, and puts the caller's mask back when it lets go. Those
     * are read from module files through guarded mappings (guarded.c), and a fault's SIGBUS that
     * is blocked kills the process instead of reaching the guard. So SIGBUS is let through until
     * libunwind puts the mask back. (Its blocking guards against a signal handler that unwinds
     * with libunwind and would wait for the lock; the guard's handler never calls it.) */
    sigset_t bus;
    sigemptyset(&bus);
    sigaddset(&bus, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
    s->lookup = 0;
    int found = -UNW_ENOINFO;
    for (int index = 0; index < 4; index++) {
        cp_unwind_table table;
        memset(&table, 0, sizeof table);
        if (s->source->find_table(s->source->context, ip, index, &table) != 0) break;
        if (ip < table.start_ip || ip >= table.end_ip) continue;
        unw_dyn_info_t di;
        memset(&di, 0, sizeof di);
        di.format = table.ip_relative ? UNW_INFO_FORMAT_IP_OFFSET : UNW_INFO_FORMAT_REMOTE_TABLE;
        di.start_ip = table.start_ip;
        di.end_ip = table.end_ip;
        di.u.rti.segbase = table.eh_frame_hdr;
        di.u.rti.table_data = table.table_data;
        /* In words: each entry is two int32 (8 bytes). */
        di.u.rti.table_len = table.table_entries * 8 / sizeof(unw_word_t);
        found = _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
        if (found >= 0) {
            s->lookup = 1;
            s->table = table.kind;
            return found;
        }
        if (found != -UNW_ENOINFO) return found;
    }
    return found;
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg) {
    (void)as; (void)arg;
    /* dwarf_search_unwind_table allocates remote-table unwind info with malloc, as
     * libunwind-ptrace's _UPT_put_unwind_info assumes. */
    free(pi->unwind_info);
    pi->unwind_info = NULL;
}

struct cp_unwinder {
    unw_addr_space_t space;
    session session;
    unw_cursor_t cursor;
    int cursor_ready; /* the last cp_unwind_begin succeeded */
};

cp_unwinder *cp_unwinder_create(const cp_unwind_source *source) {
    static unw_accessors_t accessors = {
        .find_proc_info = find_proc_info,
        .put_unwind_info = put_unwind_info,
        .get_dyn_info_list_addr = get_dyn_info_list_addr,
        .access_mem = access_mem,
        .access_reg = access_reg,
        .access_fpreg = access_fpreg,
        .resume = resume,
        .get_proc_name = get_proc_name,
    };
    cp_unwinder *unwinder = calloc(1, sizeof *unwinder);
    if (!unwinder) return NULL;
    unwinder->space = unw_create_addr_space(&accessors, 0);
    if (!unwinder->space) {
        free(unwinder);
        return NULL;
    }
    unw_set_caching_policy(unwinder->space, UNW_CACHE_GLOBAL);
    unwinder->session.source = source;
    return unwinder;
}

void cp_unwinder_destroy(cp_unwinder *unwinder) {
    if (!unwinder) return;
    unw_destroy_addr_space(unwinder->space);
    free(unwinder);
}

int cp_unwind_begin(cp_unwinder *unwinder, const uint64_t regs[CP_USER_REGS_COUNT]) {
    memcpy(unwinder->session.regs, regs, sizeof unwinder->session.regs);
    int result = unw_init_remote(&unwinder->cursor, unwinder->space, &unwinder->session);
    unwinder->cursor_ready = result >= 0;
    return result;
}

int cp_unwind_step(cp_unwinder *unwinder, cp_step_result *out) {
    memset(out, 0, sizeof *out);
    if (!unwinder->cursor_ready) return out->step = -UNW_EINVAL;
    unwinder->session.lookup = -1;
    int step = unw_step(&unwinder->cursor);
    out->step = step;
    out->lookup = unwinder->session.lookup;
    out->table = unwinder->session.table;
    if (step > 0) {
        unw_word_t pc = 0, sp = 0;
        unw_get_reg(&unwinder->cursor, UNW_REG_IP, &pc);
        unw_get_reg(&unwinder->cursor, UNW_REG_SP, &sp);
        out->pc = pc;
        out->sp = sp;
        out->signal_frame = unw_is_signal_frame(&unwinder->cursor) > 0;
        static const int saved[6] = {UNW_X86_64_RBX, UNW_X86_64_RBP, UNW_X86_64_R12,
                                     UNW_X86_64_R13, UNW_X86_64_R14, UNW_X86_64_R15};
        for (int i = 0; i < 6; i++) {
            unw_word_t value = 0;
            unw_get_reg(&unwinder->cursor, saved[i], &value);
            out->callee_saved[i] = value;
        }
    }
    return step;
}
