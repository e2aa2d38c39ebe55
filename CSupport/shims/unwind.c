/*
 * unwind.c: libunwind over an abstract source of registers and memory (DESIGN §5).
 *
 * libunwind's remote API takes a table of accessors. Ours answer from cp_unwind_source
 * callbacks: memory reads come from whatever the caller captured (a live process, a snapshot
 * taken before the process was released, a minidump), and FDE lookup goes through the
 * module's .eh_frame_hdr search table (UNW_INFO_FORMAT_REMOTE_TABLE), read through the same
 * memory callback. So libunwind never touches /proc or ptrace itself.
 *
 * Method labels: a caller frame is "cfi" when libunwind had an FDE for its callee, otherwise
 * "frame_pointer" (libunwind's rbp-chain fallback). When libunwind gives up before the end of
 * the stack we scan the stack for a word that is a plausible return address (it points into
 * code, right after a call instruction) and restart from there: "scan".
 */
#include "crashport_shims.h"

#include <libunwind.h>
#include <stdlib.h>
#include <string.h>

/* Exported by libunwind-x86_64 but declared only in its private headers. */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
                                             unw_proc_info_t *pi, int need_unwind_info, void *arg);

typedef struct session {
    const cp_unwind_source *source;
    uint64_t regs[27]; /* struct user_regs_struct of the frame unw_init_remote starts from */
    /* Set by find_proc_info during a step: 1 FDE found, 0 not found; -1 when libunwind did not
     * look (its cache answered, and it caches only CFI-derived states). */
    int lookup;
} session;

/* libunwind x86_64 register number -> index in struct user_regs_struct. */
static const int user_regs_index[17] = {
    10, /* RAX */ 12, /* RDX */ 11, /* RCX */ 5,  /* RBX */ 13, /* RSI */ 14, /* RDI */
    4,  /* RBP */ 19, /* RSP */ 9,  /* R8 */  8,  /* R9 */  7,  /* R10 */ 6,  /* R11 */
    3,  /* R12 */ 2,  /* R13 */ 1,  /* R14 */ 0,  /* R15 */ 16, /* RIP */
};

static int read_word(session *s, uint64_t address, uint64_t *value) {
    return s->source->read_memory(s->source->context, address, value, sizeof *value);
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg) {
    (void)as;
    if (write) return -UNW_EREADONLYREG;
    uint64_t value = 0;
    if (read_word(arg, addr, &value) != 0) return -UNW_EINVAL;
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

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need_unwind_info, void *arg) {
    session *s = arg;
    cp_unwind_table table;
    s->lookup = 0;
    if (s->source->find_table(s->source->context, ip, &table) != 0) return -UNW_ENOINFO;
    unw_dyn_info_t di;
    memset(&di, 0, sizeof di);
    di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di.start_ip = table.start_ip;
    di.end_ip = table.end_ip;
    di.u.rti.segbase = table.eh_frame_hdr;
    di.u.rti.table_data = table.table_data;
    /* In words: each entry is two int32 (8 bytes). */
    di.u.rti.table_len = table.table_entries * 8 / sizeof(unw_word_t);
    int found = _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
    s->lookup = found >= 0;
    return found;
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg) {
    (void)as; (void)arg;
    /* dwarf_search_unwind_table allocates remote-table unwind info with malloc, as
     * libunwind-ptrace's _UPT_put_unwind_info assumes. */
    free(pi->unwind_info);
    pi->unwind_info = NULL;
}

/* True when the bytes before `ret` end with a call instruction. */
static int follows_call(session *s, uint64_t ret) {
    uint8_t bytes[8];
    if (ret < 8 || s->source->read_memory(s->source->context, ret - 8, bytes, 8) != 0) return 0;
    if (bytes[3] == 0xE8) return 1; /* call rel32 */
    /* call r/m64: FF /2, with modrm lengths 2 (register, [reg]), 3 (disp8/SIB), 6-7 (disp32). */
    for (int length = 2; length <= 7; length++) {
        uint8_t opcode = bytes[8 - length];
        uint8_t modrm = bytes[8 - length + 1];
        if (opcode == 0xFF && ((modrm >> 3) & 7) == 2) return 1;
    }
    return 0;
}

/* Scan upwards from sp for a plausible return address; returns the slot address or 0. */
static uint64_t scan_for_return(session *s, uint64_t sp, int words) {
    for (int i = 0; i < words; i++) {
        uint64_t slot = sp + (uint64_t)i * 8, value = 0;
        if (read_word(s, slot, &value) != 0) return 0;
        if (s->source->is_code(s->source->context, value) && follows_call(s, value)) return slot;
    }
    return 0;
}

typedef struct frame_sink {
    cp_frame *frames;
    int max_frames, head_frames, count, walked;
} frame_sink;

/* Keeps the first head_frames frames, then a ring of the most recent ones. */
static void sink_push(frame_sink *sink, cp_frame frame) {
    int tail = sink->max_frames - sink->head_frames;
    if (sink->walked < sink->head_frames || sink->walked < sink->max_frames) {
        sink->frames[sink->walked] = frame;
    } else if (tail > 0) {
        sink->frames[sink->head_frames + (sink->walked - sink->head_frames) % tail] = frame;
    }
    sink->walked++;
}

/* Restores the ring into order; returns the number of frames kept and sets *skipped. */
static int sink_finish(frame_sink *sink, int *skipped) {
    int tail = sink->max_frames - sink->head_frames;
    if (sink->walked <= sink->max_frames) {
        *skipped = 0;
        return sink->walked;
    }
    *skipped = sink->walked - sink->max_frames;
    /* The ring's oldest entry sits at head + (walked - head) % tail: rotate it to the front. */
    int start = (sink->walked - sink->head_frames) % tail;
    cp_frame *ring = sink->frames + sink->head_frames;
    cp_frame *copy = malloc(sizeof(cp_frame) * (size_t)tail);
    if (copy) {
        for (int i = 0; i < tail; i++) copy[i] = ring[(start + i) % tail];
        memcpy(ring, copy, sizeof(cp_frame) * (size_t)tail);
        free(copy);
    }
    return sink->max_frames;
}

struct cp_unwinder {
    unw_addr_space_t space;
    session session;
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

int cp_unwind_x86_64(cp_unwinder *unwinder, const uint64_t regs[27], cp_frame *frames,
                     int max_frames, int head_frames, int frame_limit, int *skipped) {
    *skipped = 0;
    if (max_frames <= 0) return 0;
    if (head_frames > max_frames) head_frames = max_frames;
    unw_addr_space_t as = unwinder->space;
    const cp_unwind_source *source = unwinder->session.source;
    session *state = &unwinder->session;
    memcpy(state->regs, regs, sizeof state->regs);
    frame_sink sink = {.frames = frames, .max_frames = max_frames, .head_frames = head_frames};

    uint64_t pc = regs[16], sp = regs[19];
    sink_push(&sink, (cp_frame){.pc = pc, .sp = sp, .method = CP_FRAME_CONTEXT});

    /* A call through a bad pointer leaves pc outside any code: the caller's return address is
     * the word at sp. Start the unwind from the caller then. */
    if (!source->is_code(source->context, pc)) {
        uint64_t ret = 0;
        if (read_word(state, sp, &ret) != 0 || !source->is_code(source->context, ret)) goto done;
        state->regs[16] = ret;
        state->regs[19] = sp + 8;
        pc = ret;
        sp += 8;
        sink_push(&sink, (cp_frame){.pc = pc, .sp = sp, .method = CP_FRAME_SCAN});
    }

    unw_cursor_t cursor;
    if (unw_init_remote(&cursor, as, state) < 0) goto done;
    while (sink.walked < frame_limit) {
        state->lookup = -1;
        int step = unw_step(&cursor);
        /* A cache hit (no lookup) replays a state libunwind derived from CFI. */
        int has_cfi = state->lookup != 0;
        unw_word_t next_pc = 0, next_sp = 0;
        if (step > 0) {
            unw_get_reg(&cursor, UNW_REG_IP, &next_pc);
            unw_get_reg(&cursor, UNW_REG_SP, &next_sp);
        }
        int signal_frame = step > 0 && unw_is_signal_frame(&cursor) > 0;
        if (step > 0 && next_pc != 0 && (next_sp > sp || signal_frame)) {
            pc = next_pc;
            sp = next_sp;
            sink_push(&sink, (cp_frame){.pc = pc, .sp = sp,
                                        .method = has_cfi ? CP_FRAME_CFI : CP_FRAME_FRAME_POINTER,
                                        .signal_frame = (uint32_t)signal_frame});
            continue;
        }
        /* CFI that says "no caller" is the real end of the stack (_start, clone). */
        if (step == 0 && has_cfi) break;
        if (step > 0 && next_pc == 0) break;
        /* Otherwise libunwind lost the thread: look for a return address above sp. */
        uint64_t slot = scan_for_return(state, sp, 256);
        if (!slot) break;
        uint64_t ret = 0;
        read_word(state, slot, &ret);
        state->regs[16] = ret;
        state->regs[19] = slot + 8;
        pc = ret;
        sp = slot + 8;
        sink_push(&sink, (cp_frame){.pc = pc, .sp = sp, .method = CP_FRAME_SCAN});
        if (unw_init_remote(&cursor, as, state) < 0) break;
    }
done:
    return sink_finish(&sink, skipped);
}
