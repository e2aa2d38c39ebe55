/*
 * crashport_shims.h: thin C over what Swift cannot call directly.
 *  - ptrace(2) is variadic;
 *  - libunwind's API is macros over arch-prefixed names (_Ux86_64_*) and a table of callbacks.
 * Nothing here holds policy: the Swift modules decide what to read and how to label frames.
 * The C libraries Swift calls are declared in crashport_libraries.h, beside this file.
 */
#ifndef CRASHPORT_SHIMS_H
#define CRASHPORT_SHIMS_H

#include <stdint.h>
#include <sys/types.h>

/* ptrace(request, pid, addr, data); returns -1 with errno set on failure. */
long cp_ptrace(int request, pid_t pid, uintptr_t addr, uintptr_t data);

/* What waitpid(tid, __WALL) would report for a thread we trace, without consuming it
 * (waitid with WNOWAIT): so that the leader of a process whose parent we are is never reaped
 * by the ptrace side, whose exit status belongs to the parent's own waitpid. */
enum cp_wait_state { CP_WAIT_NOTHING = 0, CP_WAIT_STOPPED = 1, CP_WAIT_EXITED = 2 };
/* A cp_wait_state, or -1 with errno (ECHILD: not traced by us, or already reaped). */
int cp_wait_peek(pid_t tid);

/* The ELF .eh_frame_hdr binary-search table of the module that contains an address, in target
 * addresses: what libunwind needs to find an FDE (UNW_INFO_FORMAT_REMOTE_TABLE). */
typedef struct cp_unwind_table {
    uint64_t start_ip;       /* first address the table covers (module text start) */
    uint64_t end_ip;         /* one past the last */
    uint64_t eh_frame_hdr;   /* address of .eh_frame_hdr: the segbase of its encodings */
    uint64_t table_data;     /* address of the sorted (initial_location, fde) pairs */
    uint64_t table_entries;  /* number of pairs */
} cp_unwind_table;

/* The source an unwind runs against: registers come in cp_unwind's arguments; memory and
 * unwind tables come from these callbacks, so the same unwinder serves a live process, a
 * captured snapshot or a minidump. Callbacks run synchronously on the calling thread. */
typedef struct cp_unwind_source {
    void *context;
    /* Copy size bytes at address into buffer; 0 on success, -1 when not readable. */
    int (*read_memory)(void *context, uint64_t address, void *buffer, uint64_t size);
    /* Fill table for the module containing ip; 0 on success, -1 when no module/table covers it. */
    int (*find_table)(void *context, uint64_t ip, cp_unwind_table *table);
    /* 1 when address lies in executable code of a known module (stack-scan candidates). */
    int (*is_code)(void *context, uint64_t address);
} cp_unwind_source;

/* How a frame was found. */
enum cp_frame_method {
    CP_FRAME_CONTEXT = 0,       /* frame 0: the registers given */
    CP_FRAME_CFI = 1,           /* DWARF call-frame information */
    CP_FRAME_FRAME_POINTER = 2, /* rbp chain (libunwind's fallback when no CFI covers the caller) */
    CP_FRAME_SCAN = 3,          /* a return address found by scanning the stack */
};

typedef struct cp_frame {
    uint64_t pc;  /* the frame's instruction pointer (a return address for callers) */
    uint64_t sp;
    uint32_t method;        /* enum cp_frame_method */
    /* 1 when libunwind restored this frame's registers from a kernel signal frame (after
     * stepping through the trampoline, unw_is_signal_frame is true at the interrupted frame):
     * its pc is the interrupted instruction itself, not a return address. */
    uint32_t signal_frame;
} cp_frame;

/* An unwinder bound to one source: libunwind's address space with its FDE cache, reused for
 * every thread of a process (the cache is keyed by instruction address, which all threads of a
 * process share). Not thread-safe; destroy with cp_unwinder_destroy. */
typedef struct cp_unwinder cp_unwinder;
cp_unwinder *cp_unwinder_create(const cp_unwind_source *source);
void cp_unwinder_destroy(cp_unwinder *unwinder);

/*
 * Unwind one x86_64 thread. regs is struct user_regs_struct (27 x u64). Frames are written
 * to frames[0..max_frames) keeping the first head_frames and, when the stack is deeper, the
 * last (max_frames - head_frames) frames; *skipped receives how many were left out between.
 * At most frame_limit frames are walked in all. Returns the number of frames written.
 */
int cp_unwind_x86_64(cp_unwinder *unwinder, const uint64_t regs[27], cp_frame *frames,
                     int max_frames, int head_frames, int frame_limit, int *skipped);

/* A message received on a SOCK_SEQPACKET socket with SO_PASSCRED, with its credentials and any
 * passed descriptors (at most max_fds kept; the rest are closed). Returns the byte count, -1
 * with errno on failure, 0 at EOF. *truncated is set when the message was larger than capacity. */
long cp_receive_message(int fd, void *buffer, unsigned long capacity, int *truncated, int *pid, unsigned *uid,
                        int *fds, int max_fds, int *fd_count, int flags);

/* process_vm_readv(2) of one range (declared by glibc only under _GNU_SOURCE): bytes copied,
 * short when the range runs into unmapped memory, -1 with errno. */
long cp_read_process_memory(int pid, uint64_t address, void *buffer, unsigned long size);

/* Blocks the given signals (count entries of signals[]) in the calling thread, stores the
 * previous mask in *previous_mask_out (an opaque sigset_t, 128 bytes), and returns a
 * non-blocking signalfd for them; -1 with errno. */
int cp_block_signals_to_fd(const int *signals, int count, void *previous_mask_out);

/* Reads one pending signal from a signalfd: its number and si_code; 0 when none is pending. */
int cp_read_signal(int fd, int *code);

/* pidfd_open(2): a descriptor that becomes readable when the process exits; -1 with errno. */
int cp_pidfd_open(int pid);

#endif
