/*
 * crashport_shims.h: thin C over what Swift cannot call directly.
 *  - ptrace(2) is variadic;
 *  - libunwind's API is macros over arch-prefixed names (_Ux86_64_*) and a table of callbacks.
 * Nothing here holds policy: the Swift modules decide what to read, when an unwind stops or
 * scans the stack, and how to label frames (Sources/Unwinding/Unwinder.swift).
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

/* x86_64 struct user_regs_struct (<sys/user.h>): 27 u64, in this order. What ptrace
 * (PTRACE_GETREGS), the stub's crash record and the snapshot's gpr hold. */
#define CP_USER_REGS_COUNT 27
enum {
    CP_USER_REG_R15 = 0, CP_USER_REG_R14 = 1, CP_USER_REG_R13 = 2, CP_USER_REG_R12 = 3,
    CP_USER_REG_RBP = 4, CP_USER_REG_RBX = 5, CP_USER_REG_R11 = 6, CP_USER_REG_R10 = 7,
    CP_USER_REG_R9 = 8, CP_USER_REG_R8 = 9, CP_USER_REG_RAX = 10, CP_USER_REG_RCX = 11,
    CP_USER_REG_RDX = 12, CP_USER_REG_RSI = 13, CP_USER_REG_RDI = 14, CP_USER_REG_ORIG_RAX = 15,
    CP_USER_REG_RIP = 16, CP_USER_REG_CS = 17, CP_USER_REG_EFLAGS = 18, CP_USER_REG_RSP = 19,
    CP_USER_REG_SS = 20, CP_USER_REG_FS_BASE = 21, CP_USER_REG_GS_BASE = 22, CP_USER_REG_DS = 23,
    CP_USER_REG_ES = 24, CP_USER_REG_FS = 25, CP_USER_REG_GS = 26,
};

/* The ELF .eh_frame_hdr binary-search table of the module that contains an address, in target
 * addresses: what libunwind needs to find an FDE (UNW_INFO_FORMAT_REMOTE_TABLE). */
typedef struct cp_unwind_table {
    uint64_t start_ip;       /* first address the table covers (module text start) */
    uint64_t end_ip;         /* one past the last */
    uint64_t eh_frame_hdr;   /* address of .eh_frame_hdr: the segbase of its encodings */
    uint64_t table_data;     /* address of the sorted (initial_location, fde) pairs */
    uint64_t table_entries;  /* number of pairs */
    /* 0: each pair's initial location is relative to eh_frame_hdr, as in .eh_frame_hdr
     * (UNW_INFO_FORMAT_REMOTE_TABLE); 1: relative to start_ip, the FDEs to eh_frame_hdr
     * (UNW_INFO_FORMAT_IP_OFFSET): a table whose FDEs lie far from the code they describe. */
    int32_t ip_relative;
    /* The caller's name for this table, reported back in cp_step_result.table. */
    int32_t kind;
} cp_unwind_table;

/* The source an unwind runs against: registers come in cp_unwind_begin's argument; memory and
 * unwind tables come from these callbacks, so the same unwinder serves a live process, a
 * captured snapshot or a minidump. Callbacks run synchronously on the calling thread. */
typedef struct cp_unwind_source {
    void *context;
    /* Copy size bytes at address into buffer; 0 on success, -1 when not readable. */
    int (*read_memory)(void *context, uint64_t address, void *buffer, uint64_t size);
    /* Fill the index-th table (0, 1, ...) for the module containing ip, tried in that order
     * until one has an FDE for ip; 0 on success, -1 when there is no such table. */
    int (*find_table)(void *context, uint64_t ip, int index, cp_unwind_table *table);
} cp_unwind_source;

/* An unwinder bound to one source: libunwind's address space with its FDE cache, reused for
 * every thread of a process (the cache is keyed by instruction address, which all threads of a
 * process share), and one cursor. Not thread-safe; destroy with cp_unwinder_destroy. */
typedef struct cp_unwinder cp_unwinder;
cp_unwinder *cp_unwinder_create(const cp_unwind_source *source);
void cp_unwinder_destroy(cp_unwinder *unwinder);

/* Starts the cursor at an x86_64 frame (unw_init_remote): regs is struct user_regs_struct,
 * copied (libunwind reads it while stepping, until the next cp_unwind_begin). Restarting
 * elsewhere (a return address found on the stack) is another cp_unwind_begin. Returns
 * libunwind's result, < 0 on failure. */
int cp_unwind_begin(cp_unwinder *unwinder, const uint64_t regs[CP_USER_REGS_COUNT]);

/* One unw_step from the cursor, as libunwind reported it. */
typedef struct cp_step_result {
    int32_t step;   /* unw_step's result: > 0 stepped to a caller, 0 no caller, < 0 error */
    /* Whether find_proc_info looked up unwind info for this step: 1 an FDE was found, 0 none
     * was; -1 libunwind did not look, its cache answered (and it caches only states derived
     * from CFI). */
    int32_t lookup;
    uint64_t pc;    /* after a step > 0: the caller's UNW_REG_IP and UNW_REG_SP; else 0 */
    uint64_t sp;
    /* After a step > 0, 1 when unw_is_signal_frame is true at the new frame: libunwind stepped
     * through the kernel's signal trampoline and restored the registers of the frame the signal
     * interrupted (whose pc is the interrupted instruction, not a return address). */
    int32_t signal_frame;
    /* When lookup is 1: the kind of the table whose FDE was used (cp_unwind_table.kind). */
    int32_t table;
    /* After a step > 0: the caller's callee-saved registers as the CFI restores them (rbx,
     * rbp, r12, r13, r14, r15), for its variables that live in them. */
    uint64_t callee_saved[6];
} cp_step_result;

/* Steps the cursor once and fills *out; returns out->step (< 0 too when no cp_unwind_begin
 * succeeded since the last failure). */
int cp_unwind_step(cp_unwinder *unwinder, cp_step_result *out);

/* A message received on a SOCK_SEQPACKET socket with SO_PASSCRED, with its credentials and any
 * passed descriptors (at most max_fds kept; the rest are closed). Returns the byte count, -1
 * with errno on failure, 0 at EOF. *truncated is set when the message was larger than capacity. */
long cp_receive_message(int fd, void *buffer, unsigned long capacity, int *truncated, int *pid, unsigned *uid,
                        unsigned *gid, int *fds, int max_fds, int *fd_count, int flags);

/* process_vm_readv(2) of one range (declared by glibc only under _GNU_SOURCE): bytes copied,
 * short when the range runs into unmapped memory, -1 with errno. */
long cp_read_process_memory(int pid, uint64_t address, void *buffer, unsigned long size);

/* Blocks the given signals (count entries of signals[]) in the calling thread, stores the
 * previous mask in *previous_mask_out (an opaque sigset_t, 128 bytes), and returns a
 * non-blocking signalfd for them; -1 with errno. */
int cp_block_signals_to_fd(const int *signals, int count, void *previous_mask_out);

/* Reads one pending signal from a signalfd: its number, si_code and si_pid (the sender, for a
 * signal a process sent); 0 when none is pending. */
int cp_read_signal(int fd, int *code, int *sender);

/* eventfd(initial, EFD_CLOEXEC, and EFD_NONBLOCK when nonblocking != 0) (eventfd.c); -1 with errno. */
int cp_eventfd(unsigned initial, int nonblocking);

/* What cp_spawn does with each of the child's standard descriptors (0, 1, 2, in that order). */
enum cp_spawn_standard {
    CP_SPAWN_INHERIT = 0,    /* left as it is */
    CP_SPAWN_DESCRIPTOR = 1, /* dup2 of `descriptor` there: the child's, at that point (1 for 2: its stdout) */
    CP_SPAWN_NULL = 2,       /* /dev/null (read-only for 0, write-only for 1 and 2) */
    CP_SPAWN_APPEND = 3,     /* append_path, opened after the ids changed (so the file is the user's) */
};
/* The child's process group. */
enum cp_spawn_group { CP_SPAWN_SAME_GROUP = 0, CP_SPAWN_OWN_GROUP = 1, CP_SPAWN_OWN_SESSION = 2 };
/* The step of the child that failed, as cp_spawn_outcome tells it. */
enum cp_spawn_step {
    CP_SPAWN_STEP_CHDIR = 1,
    CP_SPAWN_STEP_SETPGID = 2,
    CP_SPAWN_STEP_IDS = 3,
    CP_SPAWN_STEP_STANDARD = 4,
    CP_SPAWN_STEP_EXEC = 5,
};
/* A child's exit status when it failed before its exec (127 for the exec itself, as a shell's). */
enum cp_spawn_exit { CP_SPAWN_EXIT_NOT_RELEASED = 125, CP_SPAWN_EXIT_STANDARD = 125, CP_SPAWN_EXIT_IDS = 126 };

/* Everything a child gets (Sources/Processes/ChildProcess.swift fills it). */
typedef struct cp_spawn_request {
    const char *path;
    char *const *argv;
    char *const *envp;
    /* chdir(2) there before anything else the program sees; NULL: ours. */
    const char *directory;
    int standard[3];   /* a cp_spawn_standard for 0, 1, 2 */
    int descriptor[3]; /* CP_SPAWN_DESCRIPTOR's source for each */
    const char *append_path;
    int group; /* a cp_spawn_group */
    /* drop_ids: setgroups(groups), setgid(gid), setuid(uid), for good, when uid or gid differ
     * from ours (a root sidecar starting a user's process). */
    int drop_ids;
    unsigned uid, gid;
    const unsigned *groups;
    int group_count;
    /* Writes 0 to /proc/self/oom_score_adj (the sidecar's own protection is not the child's). */
    int reset_oom_score;
    /* The sigset_t the program starts with; NULL: the calling thread's. */
    const void *signal_mask;
    /* Signals set to SIG_DFL even when crashport ignores them. */
    const int *default_signals;
    int default_count;
    /* held: the child waits on a pipe, before anything else, until cp_spawn_outcome releases it. */
    int held;
    /* report: a failed step comes back through a close-on-exec pipe, for cp_spawn_outcome;
     * without, only the child's exit status says it (cp_spawn_exit). */
    int report;
} cp_spawn_request;

/* fork, and the child set up as `request` says, then execve; every crashport handler reset to
 * SIG_DFL and every signal blocked until the exec's mask (spawn.c). Returns the child's pid and
 * the parent's close-on-exec ends of the hold and report pipes (-1 when not asked), or -1 with
 * errno. Never waits: the caller reaps the child. */
pid_t cp_spawn(const cp_spawn_request *request, int *release_fd, int *report_fd);

/* Releases a held child (release_fd >= 0) and waits for its exec: 0 once it happened (or
 * without a report pipe), else the failed step's errno and *step (a cp_spawn_step); the child
 * is then exiting, for the caller to reap. Closes both descriptors. */
int cp_spawn_outcome(int release_fd, int report_fd, int *step);

/* pipe2(2) with O_CLOEXEC (declared by glibc only under _GNU_SOURCE): 0, or -1 with errno. */
int cp_pipe(int fds[2]);

/* Names the calling thread (pthread_setname_np; at most 15 bytes are kept). */
void cp_name_thread(const char *name);

/* pidfd_open(2): a descriptor that becomes readable when the process exits; -1 with errno. */
int cp_pidfd_open(int pid);

/* SO_PEERPIDFD (Linux 6.5): a pidfd for the process at the other end of a connected Unix
 * socket, the one that connected, with no pid to race against; -1 with errno (ENOPROTOOPT on
 * older kernels). */
int cp_peer_pidfd(int fd);

/* Whether the process of a pidfd still exists (running or a zombie not yet reaped): 1, 0 once
 * it is reaped, -1 with errno (pidfd_send_signal with signal 0). */
int cp_pidfd_exists(int pidfd);

/* The exit status of the process of a pidfd, in waitpid's form, whoever its parent is
 * (ioctl PIDFD_GET_INFO with PIDFD_INFO_EXIT, Linux 6.15: recorded once the process is reaped).
 * 1 with *status set; 0 when the kernel has none yet (the process runs, or is a zombie its
 * parent has not reaped); -1 with errno (ENOTTY or EINVAL: a kernel without it; ESRCH: reaped
 * with nothing recorded). */
int cp_pidfd_exit_status(int pidfd, int *status);

/* The host level (coredump.c). An AF_UNIX SOCK_STREAM socket bound at path with mode 0600,
 * listening, non-blocking and close-on-exec: the coredump socket the kernel connects to; -1 with
 * errno. */
int cp_stream_listen(const char *path, int backlog);

/* accept4 on a stream listener, close-on-exec, blocking: -1 with errno. */
int cp_stream_accept(int listener);

/* What the kernel says of a pidfd's process (ioctl PIDFD_GET_INFO, Linux 6.16 for the coredump
 * part): its pid, real uid and gid, and coredump_mask (PIDFD_COREDUMPED 1, PIDFD_COREDUMP_SKIP 2,
 * PIDFD_COREDUMP_USER 4: dumped as its user, PIDFD_COREDUMP_ROOT 8: suid_dumpable 2, root's only). */
struct cp_coredump_info {
    int pid;
    unsigned ruid;
    unsigned rgid;
    unsigned coredump_mask;
};
/* 1 with *info filled; 0 when the kernel gave the pid and ids but no coredump part; -1 with errno. */
int cp_pidfd_coredump_info(int pidfd, struct cp_coredump_info *info);

/* prctl(PR_SET_DUMPABLE, 0): the host level's own crash must not be dumped to itself (the
 * kernel would wait on the very process that died). 0, or -1 with errno. */
int cp_set_not_dumpable(void);

/* prlimit(pid, RLIMIT_CORE, {1, 1}): the kernel's recursion guard, for a handler crashport starts
 * as the kernel would. 0, or -1 with errno. */
int cp_limit_core_to_one(int pid);

/* The host level's guard (hostguard.c): a process forked from the sidecar that accepts every
 * connection on `listener` (the coredump socket), hands each to the sidecar over a SOCK_SEQPACKET
 * pair (CP_HOST_GUARD_ARRIVAL with the connection), and shuts down any the sidecar has not taken within
 * taken_ns or not finished within hold_ns of its arrival (CP_HOST_GUARD_RELEASED says which). Returns
 * the guard's pid and, in *channel, the sidecar's end of the pair (close-on-exec, non-blocking),
 * or -1 with errno. */
struct cp_host_guard_message {
    uint32_t type;
    uint32_t reason;
    uint64_t id;
    uint64_t arrived_ns; /* CLOCK_MONOTONIC, when the guard accepted it */
};
enum { CP_HOST_GUARD_ARRIVAL = 1, CP_HOST_GUARD_TAKEN = 2, CP_HOST_GUARD_DONE = 3, CP_HOST_GUARD_RELEASED = 4 };
enum { CP_HOST_GUARD_NOT_TAKEN = 1, CP_HOST_GUARD_PAST_DEADLINE = 2 };
pid_t cp_host_guard_start(int listener, uint64_t taken_ns, uint64_t hold_ns, int *channel);
/* CP_HOST_GUARD_TAKEN or CP_HOST_GUARD_DONE for connection `id`, without blocking: 0, or -1 with errno. */
int cp_host_guard_tell(int channel, uint32_t type, uint64_t id);
/* The next message from the guard, without blocking, and its descriptor (-1 when none; any
 * other is closed): 1, 0 when the guard has gone, -1 with errno (EAGAIN: none waiting). */
int cp_host_guard_receive(int channel, struct cp_host_guard_message *message, int *fd);

/* The pipe helper's relay (coredump.c): moves the core from `from` (the kernel's pipe) to `to`
 * (the pipe the sidecar reads) with splice, until the core's end (0), the sidecar answering on
 * `answer` or closing `to` (1), or deadline_ns on CLOCK_MONOTONIC (2); -1 with errno. */
int cp_relay_core(int from, int to, int answer, uint64_t deadline_ns);

/* sendmsg of length bytes with up to 4 descriptors (SCM_RIGHTS), MSG_NOSIGNAL: 0, or -1 with errno. */
int cp_send_with_fds(int fd, const void *bytes, unsigned long length, const int *fds, int count);

/* A Unix socket name for bind/connect: a path, or with a leading '@' the abstract namespace.
 * Returns 0 and fills *address (a struct sockaddr_un, 110 bytes) and *length, or -1 with errno
 * ENAMETOOLONG (longer than sun_path) or EINVAL (empty). */
int cp_unix_address(const char *name, void *address, unsigned *length);

/* A SOCK_SEQPACKET socket (close-on-exec, non-blocking) bound to name and listening with
 * SO_PASSCRED set; -1 with errno. */
int cp_unix_listen(const char *name, int backlog);

/* A SOCK_SEQPACKET socket (close-on-exec) connected to name, or -1 with errno. */
int cp_unix_connect(const char *name);

/* accept4 with close-on-exec and non-blocking; SO_PASSCRED is set on the new socket. -1 with
 * errno. */
int cp_unix_accept(int listener);

/* SO_PEERCRED of a connected Unix socket: 0, or -1 with errno. */
int cp_peer_credentials(int fd, int *pid, unsigned *uid, unsigned *gid);

/* SO_TYPE, SO_DOMAIN and SO_ACCEPTCONN of fd: 1 when it is a listening AF_UNIX SOCK_SEQPACKET
 * socket, else 0 (socket activation hands us whatever the unit says). */
int cp_is_listening_seqpacket(int fd);

/* One journal entry in journald's native protocol to the datagram socket at path (journald's
 * /run/systemd/journal/socket), never waiting longer than timeout_ms: connected without
 * blocking (a path that is no socket, or a FIFO, fails at once), sent whole when the socket
 * takes it, else (EMSGSIZE: larger than a datagram may be) through a sealed memfd passed with
 * SCM_RIGHTS, as sd_journal_send does. A full socket (journald slow or stopped) is waited for
 * with poll until the deadline, then given up. 0, or -1 with errno (ETIMEDOUT at the deadline). */
int cp_journal_send(const char *path, const void *bytes, unsigned long length, int timeout_ms);

/* sd_notify: one datagram of text to the socket named by path ('@' abstract), -1 with errno. */
int cp_notify(const char *path, const char *text);

/* The calling thread only (raw system calls: glibc would apply setgroups and capset to every
 * thread): takes on uid's filesystem ids, gid, exactly `groups` as its supplementary groups, and
 * no effective capabilities, keeping its real and saved ids and its permitted capabilities so
 * that cp_thread_restore can give everything back. Nests for the same uid (the outer call's
 * credentials stay); another user's while one is assumed fails with EBUSY. 0, or -1 with errno and nothing changed
 * (CSupport/shims/credentials.c). */
#define CP_THREAD_GROUPS_MAX 256
int cp_thread_assume(unsigned uid, unsigned gid, const unsigned *groups, int group_count);
/* Undoes the matching cp_thread_assume; 0, or -1 when something could not be restored. */
int cp_thread_restore(void);
/* Between cp_thread_assume and cp_thread_restore: the thread's own identity back for a moment
 * (the watcher's cache files, by names it makes itself), then the user's again. step_out: 1 when
 * it stepped out, 0 when no user's credentials were on, -1 when they could not be taken off
 * (still on), -2 when the thread holds neither's (the caller stops). step_in: 0, or -1 when the user's could not be put back on: the thread then still
 * holds its own, and must not read for the user (the caller stops). */
int cp_thread_step_out(void);
int cp_thread_step_in(void);

/* One HTTP POST through libcurl, loaded at the first call (CSupport/shims/http.c): url, headers
 * ("Name: value"), body; a whole-request timeout; a CA file for a private CA (NULL: the system's
 * store). HTTPS_PROXY and NO_PROXY come from the environment; redirects are not followed. Returns
 * 0 when the server answered (*status: its code; *response and *response_headers: what it sent,
 * each capped, to be freed with cp_http_free), -1 when it did not (error says why: no libcurl,
 * refused, timed out, TLS). */
int cp_http_post(const char *url, const char *const *headers, int header_count, const void *body, size_t body_size,
                 long timeout_ms, const char *ca_file, long *status, char **response, size_t *response_size,
                 char **response_headers, size_t *response_headers_size, char *error, size_t error_size);
void cp_http_free(void *bytes);

/* gzip (RFC 1952) of size bytes: *output is malloc'd (free with cp_http_free). 0, or -1. */
int cp_gzip(const void *input, size_t size, void **output, size_t *output_size);

/* A debug file (executable != 0: the binary) for a build-id from the debuginfod servers in
 * DEBUGINFOD_URLS, through libdebuginfod (loaded at the first call), into its cache, given at
 * most `seconds`: an open fd (the caller closes it) and *path (malloc'd, the caller frees it),
 * or -errno with *why when the library says nothing more (CSupport/shims/debuginfod.c). */
int cp_debuginfod_find(const unsigned char *build_id, int length, int executable, double seconds, char **path,
                       const char **why);

/* An unnamed file in `directory` (O_TMPFILE), read-write, mode 0600, close-on-exec; -1 with
 * errno where the file system has none. */
int cp_open_unnamed(const char *directory);

/* Gives the file system back the blocks of a range of `fd` (FALLOC_FL_PUNCH_HOLE, the file's
 * size kept); -1 with errno where it cannot. */
int cp_punch_hole(int fd, int64_t offset, int64_t length);

/* File mappings a truncation cannot make fatal (CSupport/shims/guarded.c): a SIGBUS inside a
 * registered range turns the rest of the range into zero pages (prot: the mapping's own) and
 * marks it torn. register: the range's slot, or -1 (the table is full, or no handler could be
 * installed: then the file must not be read through a mapping); unregister before munmap, once
 * nothing reads the range; torn: 1 once a fault was recovered in it. */
int cp_guard_register(const void *start, size_t length, int prot);
void cp_guard_unregister(int slot);
int cp_guard_torn(int slot);

#endif
