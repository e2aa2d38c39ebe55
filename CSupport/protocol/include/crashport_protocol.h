/*
 * crashport_protocol.h: every byte that crosses the socket between the stub (libcrashport.so,
 * inside the watched process) and the watcher (the crashport executable).
 *
 * One header for both sides: the C stub includes it, and Swift imports it as the module
 * CCrashPortProtocol. The watcher never casts received bytes to these structs; it decodes them
 * field by field with bounds checks, using the offsets fixed here (a Swift test mirrors them).
 *
 * Rules (docs/architecture.md, "The crash path"):
 *  - every message starts with magic, version, size (then type); size counts the whole message;
 *  - fixed-width little-endian fields only (both supported hosts, x86_64 and aarch64, are LE);
 *  - every address in the watched process is a uint64_t, never a pointer: the watcher may be
 *    built for another pointer size and must never dereference it, only read it remotely;
 *  - no implicit padding: explicit reserved fields, sizes checked with _Static_assert.
 *
 * Transport: an AF_UNIX SOCK_SEQPACKET socket: in launcher mode one socket shared by every
 * watched process (the inherited fd named by CRASHPORT_FD); in sidecar mode each process's own
 * connection to `crashport watch` (CRASHPORT_SOCKET), which answers its HELLO with HELLO_REPLY. The watcher's end has SO_PASSCRED, so the kernel
 * attaches each sender's real pid/uid; the watcher trusts those, never the message body.
 * A CRASH message carries, as SCM_RIGHTS, one end of a fresh socketpair made in the signal
 * handler: the private reply channel on which the watcher sends HEARTBEAT* then VERDICT. Replies
 * therefore never reach the wrong process even when many processes share the socket.
 */
#ifndef CRASHPORT_PROTOCOL_H
#define CRASHPORT_PROTOCOL_H

#include <stdint.h>

#define CP_MAGIC 0x54525043u /* bytes "CPRT" */
#define CP_VERSION 3u

enum cp_message_type {
    CP_MSG_HELLO = 1,     /* stub -> watcher, at install */
    CP_MSG_CRASH = 2,     /* stub -> watcher, in the signal handler, with a reply fd */
    CP_MSG_VERDICT = 3,   /* watcher -> stub, on the reply channel: capture finished */
    CP_MSG_HEARTBEAT = 4, /* watcher -> stub, on the reply channel: still working, extend wait */
    CP_MSG_HELLO_REPLY = 5, /* sidecar -> stub, on its connection, answering HELLO */
    CP_MSG_SPOOLED = 6,   /* the header of a spool file (no socket: written when none answers) */
    CP_MSG_ERROR = 7,     /* stub -> watcher, from crashport_report_error, with a reply fd: a
                             cp_crash laid out as CRASH (signo 0, the caller's registers and
                             stack); the error's type and message are in the app area */
    CP_MSG_SETTING = 8,   /* stub -> watcher, from crashport_set_enabled: persist it */
    CP_MSG_GOODBYE = 9,   /* stub -> watcher, as the process exits normally (exit, _exit):
                             never answered; a connection that ends without it and without a
                             crash record ended abnormally */
    CP_MSG_CONSENT = 10,  /* stub -> watcher, from crashport_set_consent, crashport_send_pending
                             and crashport_discard_pending: never answered */
    CP_MSG_LAUNCH = 16,   /* stub -> watcher, from crashport_launch: the run's launch protection
                             (cp_launch): never answered */
    CP_MSG_PENDING_QUERY = 24,  /* stub -> watcher, from crashport_pending_list, with a reply fd
                                   (one end of a SOCK_SEQPACKET socketpair): cp_pending_query */
    CP_MSG_PENDING_LIST = 25,   /* watcher -> stub, on that reply fd: cp_pending_list, sent once
                                   without blocking; a refused query gets none (the fd closes) */
    CP_MSG_CONSENT_REPORT = 26, /* stub -> watcher, from crashport_send_report and
                                   crashport_discard_report: cp_consent_report, never answered */
    CP_MSG_REPORT_STATES = 27,  /* watcher -> stub, on a PENDING_QUERY's reply fd when the query
                                   asked for CP_QUERY_SEND_STATES: cp_report_states, sent once */
};

/* First 16 bytes of every message. */
typedef struct cp_header {
    uint32_t magic;   /* CP_MAGIC */
    uint32_t version; /* CP_VERSION */
    uint32_t size;    /* bytes in the whole message, this header included */
    uint32_t type;    /* enum cp_message_type */
} cp_header;

/* What a process asks of a sidecar in its HELLO (from its environment at install): the
 * sidecar honours them for that process unless its own configuration says no. A launcher
 * (`crashport run`) takes its flags instead. */
#define CP_WANTS_TRACE_EXIT 0x1u       /* CRASHPORT_TRACE_EXIT=1: keep it traced (SIGKILL, OOM) */
#define CP_WANTS_TRACE_EXIT_CODES 0x2u /* CRASHPORT_TRACE_EXIT=codes: and non-zero exits */
#define CP_WANTS_HANG_KILL 0x4u        /* CRASHPORT_HANG_KILL=1: SIGABRT after a hang report */
#define CP_WANTS_RUN_DETAIL 0x8u       /* the stub reads cp_hello_reply's run_detail (a sidecar
                                          answers a HELLO without it with the 496 bytes that end
                                          at last_run, which stubs before it require) */
#define CP_WANTS_SEND_STATE 0x10u      /* and its last_send (a sidecar answers a HELLO without it
                                          with the 2088 bytes that end at run_detail) */
#define CP_WANTS_ALL 0x1Fu

/* Sent once by each process when the stub installs. A watcher also accepts the 80 bytes that
 * end at build_id (stubs before `wants`), as wanting nothing. */
typedef struct cp_hello {
    cp_header header;
    uint32_t pid;
    uint32_t stub_version;
    uint64_t annotations_address; /* in-process annotation area, 0 if none */
    uint32_t build_id_size;       /* bytes used in build_id */
    uint32_t reserved;
    uint8_t build_id[40];         /* GNU build-id of the main executable */
    uint32_t wants;               /* CP_WANTS_* */
    uint32_t hang_ms;             /* CRASHPORT_HANG_MS: a hang after this long without a
                                     crashport_heartbeat(); 0: the sidecar's default */
} cp_hello;

/* HELLO_REPLY status. */
#define CP_HELLO_ACCEPTED 0u /* the sidecar will capture this process's crashes */
#define CP_HELLO_REFUSED 1u  /* it will not (another user, not allowed): message says why */

/* What the watcher keeps of a program's previous run (same executable path and build-id):
 * crashport_last_run's answer, sent in HELLO_REPLY by a sidecar and, by a launcher, in the
 * environment as CRASHPORT_LAST_RUN="known crashed during_launch consecutive disabled ID". */
typedef struct cp_last_run {
    uint32_t known;   /* 1: a previous run is on record */
    uint32_t crashed; /* it ended in a crash */
    uint32_t crashed_during_launch;
    uint32_t consecutive_launch_crashes;
    uint32_t disabled; /* crashport_set_enabled(0) is on record for the program */
    uint32_t pending_reports; /* its reports awaiting consent (crashport consent ask) */
    char report_id[64]; /* NUL-terminated: the crash's report, "" if none */
} cp_last_run;

/* How the previous run ended (cp_run_detail.kind), the first that applies. */
#define CP_RUN_UNKNOWN 0u     /* not on record (a record from before the detail was kept) */
#define CP_RUN_CLEAN 1u       /* it ended without a crash, a kill, a hang or a handled error */
#define CP_RUN_CRASH 2u       /* it crashed (a test crash too: CP_RUN_TEST) */
#define CP_RUN_TERMINATION 3u /* it was killed without a crash (SIGKILL, the OOM killer) */
#define CP_RUN_HANG 4u        /* it ended without a crash after a hang was reported */
#define CP_RUN_ERRORS 5u      /* it ended without a crash, having reported handled errors */

/* Flags of cp_run_detail. */
#define CP_RUN_DURING_LAUNCH 0x1u   /* its crash or kill came during its launch */
#define CP_RUN_ABNORMAL 0x2u        /* it ended abnormally: a crash or a kill */
#define CP_RUN_MEMORY_PRESSURE 0x4u /* its memory was under pressure (near its cgroup's limit, the
                                       limit hit, or an OOM kill in its cgroup) */
#define CP_RUN_OOM_KILLED 0x8u      /* the OOM killer ended it */
#define CP_RUN_TEST 0x10u           /* it crashed on purpose (crashport_test_crash) */
#define CP_RUN_PROTECTED 0x20u      /* it ran its launch protection (crashport_launch) */
#define CP_RUN_PROTECT_TIMED_OUT 0x40u /* its asynchronous protect work did not finish in time */

/* The previous run in full (crashport_last_run_detail), sent after last_run in HELLO_REPLY to a
 * stub that asked (CP_WANTS_RUN_DETAIL), and by a launcher in CRASHPORT_LAST_RUN_DETAIL. */
typedef struct cp_run_detail {
    uint32_t kind;        /* CP_RUN_CLEAN ... */
    uint32_t flags;       /* CP_RUN_* flags */
    int32_t signo;        /* the signal it crashed with or was killed by, 0 if none */
    int32_t exit_status;  /* its exit status when it exited, -1 when it did not or is unknown */
    uint64_t started_ms;  /* when it started, ms since the epoch, 0 if unknown */
    uint64_t duration_ms; /* how long it ran */
    uint32_t errors;      /* handled errors it reported */
    uint32_t hangs;       /* hangs reported */
    char signal_name[16]; /* NUL-terminated: "SIGSEGV", "" if none */
    char reason[256];     /* NUL-terminated, cut: why it ended (the runtime's message, the fault) */
    char title[256];      /* NUL-terminated, cut: its report's title, "" if none */
    char report_path[1024]; /* NUL-terminated: its report's directory, "" if none */
} cp_run_detail;

/* What became of a report's upload (crashport_run_detail's send_state, crashport_report_states):
 * the first that applies. */
#define CP_SEND_NONE 0u             /* no report, or nothing known of it */
#define CP_SEND_AWAITING_CONSENT 1u /* consent ask: it waits for the user's decision */
#define CP_SEND_PENDING 2u          /* it is to be sent: not tried yet, or to be tried again */
#define CP_SEND_SENT 3u             /* a destination took it (server_id: the server's id) */
#define CP_SEND_FAILED 4u           /* it failed for good (reason: why), and none took it */
#define CP_SEND_NOT_SENT 5u         /* it will not be sent: consent said no, or no destination */
#define CP_SEND_REASON_BYTES 256u

typedef struct cp_send_state {
    uint32_t state;   /* CP_SEND_* */
    uint32_t reserved;
    int64_t sent_ms;  /* when it was sent, Unix milliseconds; 0 when not */
    char server_id[64];                  /* NUL-terminated: the server's id for it, "" if none */
    char reason[CP_SEND_REASON_BYTES];   /* NUL-terminated, cut: why it failed or is not sent */
} cp_send_state;

/* The sidecar's answer to HELLO (sidecar mode only; a launcher never answers). The stub trusts
 * it only from a peer whose uid (SO_PEERCRED) is 0 or its own. A HELLO without
 * CP_WANTS_RUN_DETAIL gets the message cut after last_run (header.size says so). */
typedef struct cp_hello_reply {
    cp_header header;
    uint32_t status;      /* CP_HELLO_* */
    uint32_t reserved;
    char spool[256];      /* NUL-terminated: the spool directory the sidecar ingests, "" if none */
    char message[128];    /* NUL-terminated: with CP_HELLO_REFUSED, why */
    cp_last_run last_run;
    cp_run_detail run_detail;
    cp_send_state last_send; /* what became of the last run's report (CP_WANTS_SEND_STATE) */
} cp_hello_reply;

/* The size of a HELLO_REPLY without run_detail (the only size stubs before it accept). */
#define CP_HELLO_REPLY_SHORT_SIZE 496u
/* The size of a HELLO_REPLY without last_send (what stubs before it accept). */
#define CP_HELLO_REPLY_DETAIL_SIZE 2088u

/* crashport_launch's word on the run, for its session (never answered). */
#define CP_LAUNCH_PROTECT_STARTED 0u   /* the protect work is starting */
#define CP_LAUNCH_PROTECT_TIMED_OUT 1u /* it did not finish within its timeout: the launch went on */
typedef struct cp_launch {
    cp_header header;
    uint32_t protected_run;              /* 1: the protect work ran before the launch work */
    uint32_t consecutive_launch_crashes; /* the count it was decided on */
    uint32_t threshold;                  /* the program's threshold; 0: its own predicate decided */
    uint32_t outcome;                    /* CP_LAUNCH_PROTECT_*: sent as the protect work starts,
                                            and again if an asynchronous one timed out */
} cp_launch;

/* crashport_set_enabled's choice, for the watcher to keep with the program's runs. */
typedef struct cp_setting {
    cp_header header;
    uint32_t enabled; /* 0 or 1 */
    uint32_t reserved;
} cp_setting;

/* The program's say over uploading (crashport_set_consent and friends): for its own reports. */
#define CP_CONSENT_SET 1u     /* value: CP_CONSENT_ASK, _ALWAYS or _NEVER, for this program */
#define CP_CONSENT_SEND 2u    /* its reports awaiting consent may be sent */
#define CP_CONSENT_DISCARD 3u /* its reports awaiting consent are never sent */
#define CP_CONSENT_ASK 0u
#define CP_CONSENT_ALWAYS 1u
#define CP_CONSENT_NEVER 2u

typedef struct cp_consent {
    cp_header header;
    uint32_t action; /* CP_CONSENT_SET, _SEND, _DISCARD */
    uint32_t value;  /* with SET: the choice; else 0 */
} cp_consent;

/* The program's reports awaiting consent, for its consent dialog (crashport_pending_list): the
 * query carries nothing but its reply fd; the answer lists at most CP_PENDING_MAX of the
 * program's (and its user's) reports awaiting consent, newest first. Every text is
 * NUL-terminated within its field; the watcher cuts longer ones at a character boundary. */
#define CP_PENDING_MAX 32u
#define CP_PENDING_ID_SIZE 64u
#define CP_PENDING_TITLE_SIZE 256u
#define CP_PENDING_KIND_SIZE 16u

#define CP_QUERY_SEND_STATES 1u /* cp_pending_query.flags: the program's recent reports (of any
                                   state, newest first) with their send states, answered with
                                   CP_MSG_REPORT_STATES (crashport_report_states) */

typedef struct cp_pending_query {
    cp_header header;
    uint32_t flags;    /* 0 (the reports awaiting consent) or CP_QUERY_SEND_STATES */
    uint32_t reserved; /* 0 */
} cp_pending_query;

typedef struct cp_pending_entry {
    char id[CP_PENDING_ID_SIZE];       /* the report's id (its directory's name) */
    char title[CP_PENDING_TITLE_SIZE]; /* its one-line title ("SIGSEGV: ... in parse") */
    char kind[CP_PENDING_KIND_SIZE];   /* crash, termination, error, hang, or empty */
    int64_t time_ms;                   /* when it happened, Unix milliseconds; 0 unknown */
} cp_pending_entry;

typedef struct cp_pending_list {
    cp_header header;
    uint32_t count; /* entries filled, at most CP_PENDING_MAX */
    uint32_t total; /* the program's reports awaiting consent in all (may exceed count) */
    cp_pending_entry entries[CP_PENDING_MAX];
} cp_pending_list;

/* The program's recent reports and what became of each (crashport_report_states). */
typedef struct cp_report_state {
    cp_pending_entry report;
    cp_send_state send;
} cp_report_state;

typedef struct cp_report_states {
    cp_header header;
    uint32_t count; /* entries filled, at most CP_PENDING_MAX */
    uint32_t total; /* the program's reports in all */
    cp_report_state entries[CP_PENDING_MAX];
} cp_report_states;

/* One report's consent: CP_CONSENT_SEND or CP_CONSENT_DISCARD for the report named by id, which
 * the watcher honours only for a report of the sender's program, in the sender's user's reports,
 * awaiting consent. */
typedef struct cp_consent_report {
    cp_header header;
    uint32_t action;               /* CP_CONSENT_SEND or CP_CONSENT_DISCARD */
    uint32_t reserved;             /* 0 */
    char id[CP_PENDING_ID_SIZE];   /* NUL-terminated */
} cp_consent_report;

/* Said once by the process that said HELLO, as it exits normally: from exit() (the stub's
 * on_exit hook records the status, its destructor sends it, after the program's own atexit
 * handlers and destructors) or from _exit()/_Exit() (interposed, libcrashport.so only). Sent
 * non-blocking; nothing answers it. */
typedef struct cp_goodbye {
    cp_header header;
    int32_t exit_status; /* the status passed to exit() or _exit(); the parent sees its low byte */
    uint32_t reserved;
} cp_goodbye;

/*
 * A spool file: what the stub writes when no watcher answers at crash time (the sidecar is
 * down or restarting), into the spool directory it opened at install, as
 * .tmp-<pid>-<tid> then renamed to <pid>-<tid>-<time_ns>.crash. The sidecar ingests it later
 * (it trusts the file's owner, never the bytes). Layout: this header, then record_size bytes of
 * the CRASH record (exactly as it would have been sent), then exe_size bytes of
 * /proc/self/exe's target (no NUL), then maps_size bytes of /proc/self/maps as read at the
 * crash, then cmdline_size bytes of /proc/self/cmdline as read at the crash (the arguments,
 * each NUL-terminated, as the live watcher reads them). The stub writes the header last
 * (pwrite at 0), so a file cut short has sizes of 0. A header of 32 bytes (header.size; files
 * written before cmdline_size was added) ends at flags and has no command line.
 */
#define CP_SPOOL_SENT 0x1u            /* the record reached a watcher, but no verdict came */
#define CP_SPOOL_MAPS_TRUNCATED 0x2u  /* /proc/self/maps was longer than CP_SPOOL_MAPS_MAX */
#define CP_SPOOL_CMDLINE_TRUNCATED 0x4u /* /proc/self/cmdline was longer than CP_SPOOL_CMDLINE_MAX */
#define CP_SPOOL_MAPS_MAX (1024u * 1024u)
#define CP_SPOOL_EXE_MAX 4096u
#define CP_SPOOL_CMDLINE_MAX (64u * 1024u)

typedef struct cp_spool_header {
    cp_header header; /* magic, version, size = sizeof(cp_spool_header), type CP_MSG_SPOOLED */
    uint32_t record_size;
    uint32_t exe_size;
    uint32_t maps_size;
    uint32_t flags; /* CP_SPOOL_* */
    uint32_t cmdline_size;
    uint32_t reserved;
} cp_spool_header;

/* ELF e_machine values naming the register layout of a record. */
#define CP_ARCH_X86_64 62u
#define CP_ARCH_AARCH64 183u

/* A sigaction in the field order of the kernel's x86_64 struct kernel_sigaction. */
typedef struct cp_action {
    uint64_t handler;  /* SIG_DFL = 0, SIG_IGN = 1, else the handler's address */
    uint64_t flags;    /* SA_* */
    uint64_t restorer; /* SA_RESTORER trampoline (glibc's __restore_rt) */
    uint64_t mask;     /* first 64 signals blocked while the handler runs */
} cp_action;

/* Flags of a crash record. */
#define CP_CRASH_HAS_FPREGS 0x1u      /* fpregs holds the faulting FP state */
#define CP_CRASH_STACK_TRUNCATED 0x8u /* the stack copy stopped before the end of the stack */
#define CP_CRASH_FORWARD_FIRST 0x10u  /* a program handler ran first and did not recover */
/* The process was not dumpable at the crash (PR_GET_DUMPABLE != 1: it made itself so, like
 * ssh-agent, or it is setuid/setgid, or its credentials changed): the record carries no memory
 * of it. regs, fpregs, the stack copy (stack_size 0), fault_address, app_area, the chain's and
 * the reraise's addresses are all zero; signal, code, sender, thread name and time remain. */
#define CP_CRASH_NOT_DUMPABLE 0x20u
/* The crash is a test: the thread that faulted was in crashport_test_crash(), crashing on purpose
 * so that the program's developer sees capture, report and upload work once. The watcher reports
 * it as any crash, titled as a test and kept out of crash-free statistics. */
#define CP_CRASH_TEST 0x40u
/* Never sent by the stub: a record the host level made from a kernel's core dump and kept in the
 * spool because its report could not be written (the report says `source: host`). */
#define CP_CRASH_HOST_DUMP 0x80u

/* Flags of a chain entry. */
#define CP_CHAIN_HAS_PREVIOUS 0x1u   /* previous holds the action saved at install */
#define CP_CHAIN_KERNEL_BYPASSED 0x2u /* kernel holds an action someone installed without libc's
                                        sigaction (a raw rt_sigaction), in crashport's place */
#define CP_CHAIN_FORWARD_FIRST 0x4u  /* policy: the handler installed before crashport runs first */
#define CP_CHAIN_PROGRAM_CHANGED 0x8u /* the program changed its action since install */

/* The signals the stub handles unless crashport_install's options name others, one bit per
 * signal (1ull << signo): SIGILL 4, SIGTRAP 5, SIGABRT 6, SIGBUS 7, SIGFPE 8, SIGSEGV 11, SIGSYS
 * 31, Linux's numbers on both supported hosts (protocol.c checks them against <signal.h>). A
 * literal so that Swift imports it: the watcher takes the set from here (`crashport run
 * --forward-first` accepts only these), never from a copy. */
#define CP_DEFAULT_SIGNALS 0x800009F0ull

/* One handled signal's chain at crash time. crashport owns the kernel's slot; the program's own
 * action is kept by the stub (its interposed sigaction), the way an exception port sits outside
 * the signal dispositions. */
typedef struct cp_chain_entry {
    int32_t signo;
    uint32_t flags;     /* CP_CHAIN_* */
    cp_action previous; /* saved at install: the action below crashport */
    cp_action program;  /* the program's action now (starts as previous) */
    cp_action kernel;   /* with CP_CHAIN_KERNEL_BYPASSED: what the kernel held at the crash */
} cp_chain_entry;

/* How a program handler that ran on the fault first ended up not recovering. */
#define CP_RERAISE_NONE 0u
#define CP_RERAISE_RAISED 1u    /* raise(), abort(), kill() or sigqueue() from this process */
#define CP_RERAISE_FAULTED 2u   /* the handler faulted itself */
#define CP_RERAISE_RESET 3u     /* it reset the action to SIG_DFL and returned: the fault recurs */
#define CP_RERAISE_CAME_BACK 4u /* it returned, changing nothing, and the same fault came back */
/* It returned into a call it made the faulting instruction seem to make (the fault's pc pushed as
 * the return address), as Go's runtime does to turn a fault into a panic (runtime.sigpanic): the
 * fault is a crash only if the process then ends by the runtime's fatal path (Go: exit status 2),
 * so the watcher holds the report until the process's end says (docs/using.md, "Go"). The stub
 * goes on as if the fault were handled. */
#define CP_RERAISE_CALLED 5u

/* The second signal of a fault that a program handler ran on first. The record's signo, code,
 * fault_address, registers and stack are always the ORIGINAL fault's. */
typedef struct cp_reraise {
    uint32_t how;       /* CP_RERAISE_* */
    int32_t signo;      /* the second signal (RAISED, FAULTED), else 0 */
    int32_t code;       /* its si_code */
    int32_t depth;      /* program handlers running on this thread (nested) */
    uint64_t handler;   /* the program handler that was running */
    uint64_t pc;        /* where the second signal came from (in the handler, raise, abort) */
} cp_reraise;

#define CP_CHAIN_MAX 8u

#define CP_STACK_COPY_MAX (64u * 1024u)
#define CP_RED_ZONE 128u

/*
 * The crash record: what the crashing thread knows about its own fault. Registers are in the
 * kernel's ptrace layout, so the watcher decodes a record and a PTRACE_GETREGSET with one code:
 * x86_64 regs = struct user_regs_struct (27 x u64), fpregs = struct user_fpregs_struct (512 B,
 * the FXSAVE image); aarch64 regs = struct user_pt_regs (34 x u64), fpregs = user_fpsimd_state.
 * Sent with only the first stack_size bytes of stack: header.size == offsetof(stack) + stack_size.
 */
typedef struct cp_crash {
    cp_header header;
    uint32_t pid;
    uint32_t tid;
    int32_t signo;
    int32_t code;         /* si_code */
    int32_t sig_errno;    /* si_errno */
    int32_t sender_pid;   /* si_pid, meaningful for SI_USER/SI_TKILL/SI_QUEUE */
    uint32_t sender_uid;  /* si_uid */
    uint32_t arch;        /* CP_ARCH_* */
    uint64_t fault_address; /* si_addr */
    uint32_t flags;       /* CP_CRASH_* */
    uint32_t other_crashes; /* other threads that faulted while this one was being reported */
    uint64_t time_ns;     /* CLOCK_REALTIME at the fault */
    char thread_name[16]; /* NUL-terminated, from PR_GET_NAME */
    uint64_t regs[34];
    uint8_t fpregs[528];
    uint32_t chain_count; /* entries used in chain */
    uint32_t reserved0;
    cp_chain_entry chain[CP_CHAIN_MAX]; /* every handled signal, in signal order */
    cp_reraise reraise;
    uint64_t app_area;    /* address of the process's cp_app_area (annotations, breadcrumbs,
                             attachments), 0 if none: the watcher reads it, bounds-checked */
    uint64_t stack_start; /* address of stack[0]: the faulting SP less the red zone */
    uint32_t stack_size;  /* bytes of stack that follow */
    uint32_t reserved;
    uint8_t stack[CP_STACK_COPY_MAX];
} cp_crash;

/*
 * The app area: what the program tells crashport about itself (crashport_annotate,
 * crashport_breadcrumb, crashport_attach_file), one per process, inside the process (static
 * memory of libcrashport, zero until first used). The watcher reads it from the crashed process
 * at capture (cp_crash.app_area names it) and trusts nothing in it: a slot is taken only when
 * its sequence is even (not being written), its text is cut at the first NUL or the end of its
 * array, and anything else is skipped.
 *
 * Writers never lock against the crash path (the watcher reads a stopped process):
 *  - an annotation or attachment slot's sequence is odd while a writer changes it; writers
 *    take `writer` (a spin flag, never held across a system call) to keep keys unique;
 *  - a breadcrumb takes number n = breadcrumb_count++ (atomic), writes slot n % 100 with
 *    sequence 2n+1, then 2n+2: a reader keeps the slots whose sequence says they hold one of
 *    the last 100 breadcrumbs and orders them by n.
 */
#define CP_APP_MAGIC 0x50504143u /* bytes "CAPP" */
#define CP_APP_VERSION 2u /* fields are only appended: `size` says how far an area goes */
#define CP_ANNOTATION_MAX 64u
#define CP_ANNOTATION_KEY_BYTES 64u     /* NUL included: keys keep 63 bytes */
#define CP_ANNOTATION_VALUE_BYTES 1024u /* NUL included: values keep 1023 bytes */
#define CP_BREADCRUMB_MAX 100u
#define CP_BREADCRUMB_CATEGORY_BYTES 32u
#define CP_BREADCRUMB_MESSAGE_BYTES 256u
#define CP_ATTACHMENT_MAX 16u
#define CP_ATTACHMENT_PATH_BYTES 1024u
#define CP_EXCEPTION_TYPE_BYTES 256u
#define CP_EXCEPTION_MESSAGE_BYTES 1024u
#define CP_ERROR_TYPE_BYTES 128u
#define CP_ERROR_MESSAGE_BYTES 1024u
#define CP_RELEASE_BYTES 128u
#define CP_ERROR_PROPERTY_MAX 16u
#define CP_ERROR_KEY_BYTES 64u     /* NUL included: keys keep 63 bytes */
#define CP_ERROR_VALUE_BYTES 1024u /* NUL included: values keep 1023 bytes */
#define CP_ERROR_FILE_MAX 4u
#define CP_ERROR_PATH_BYTES 1024u  /* NUL included: absolute paths of up to 1023 bytes */
#define CP_ERROR_FRAME_MAX 512u      /* a handled error's own stack keeps its first 512 frames */
#define CP_ERROR_FUNCTION_BYTES 128u /* NUL included: a text frame's function keeps 127 bytes */
#define CP_ERROR_FILE_BYTES 256u     /* NUL included: a text frame's file keeps 255 bytes */

#define CP_MEMORY_ATTACHMENT_MAX 16u
#define CP_MEMORY_NAME_BYTES 64u      /* NUL included: names keep 63 bytes */
#define CP_CONTENT_TYPE_BYTES 64u     /* NUL included: content types keep 63 bytes */
#define CP_MEMORY_ATTACHMENT_CAP (7u << 20) /* bytes one memory attachment holds at most */

/* Flags of a slot. */
#define CP_SLOT_USED 0x1u
#define CP_SLOT_TRUNCATED 0x2u /* the program's text was longer than the slot and was cut */
#define CP_SLOT_RING 0x4u      /* a memory attachment the program appends to (its last bytes) */

typedef struct cp_annotation {
    uint32_t sequence; /* odd while being written */
    uint32_t flags;    /* CP_SLOT_* */
    char key[CP_ANNOTATION_KEY_BYTES];
    char value[CP_ANNOTATION_VALUE_BYTES];
} cp_annotation;

typedef struct cp_breadcrumb {
    uint64_t sequence; /* 0: never written; 2n+1 while breadcrumb n is written; 2n+2 once it is */
    uint64_t time_ns;  /* CLOCK_REALTIME when it was added */
    uint32_t flags;    /* CP_SLOT_TRUNCATED */
    uint32_t reserved;
    char category[CP_BREADCRUMB_CATEGORY_BYTES];
    char message[CP_BREADCRUMB_MESSAGE_BYTES];
} cp_breadcrumb;

typedef struct cp_attachment {
    uint32_t sequence; /* odd while being written */
    uint32_t flags;    /* CP_SLOT_* (a path too long is refused, never cut) */
    char path[CP_ATTACHMENT_PATH_BYTES];
} cp_attachment;

/* One property of a handled error (crashport_report_error_with). */
typedef struct cp_error_property {
    uint32_t flags; /* CP_SLOT_* */
    uint32_t reserved;
    char key[CP_ERROR_KEY_BYTES];
    char value[CP_ERROR_VALUE_BYTES];
} cp_error_property;

/* One file of a handled error, absolute. */
typedef struct cp_error_file {
    uint32_t flags; /* CP_SLOT_USED */
    uint32_t reserved;
    char path[CP_ERROR_PATH_BYTES];
} cp_error_file;

/* The properties and files of the handled error being reported (crashport_report_error_with),
 * for that error only: written under the error reporting's lock before its ERROR record is sent,
 * cleared (flags 0) once the watcher answered. The watcher reads it for an ERROR record only,
 * and takes it only when sequence is even, CP_SLOT_USED is set and tid is the record's thread. */
typedef struct cp_error_details {
    uint32_t sequence;            /* odd while being written */
    uint32_t flags;               /* CP_SLOT_USED while the error being reported has details */
    uint32_t tid;                 /* the reporting thread: the ERROR record's tid */
    uint32_t property_count;      /* slots used in properties, from the first */
    uint32_t file_count;          /* slots used in files, from the first */
    uint32_t properties_left_out; /* given past CP_ERROR_PROPERTY_MAX */
    uint32_t files_left_out;      /* given past CP_ERROR_FILE_MAX, or whose path was too long */
    uint32_t reserved;
    cp_error_property properties[CP_ERROR_PROPERTY_MAX];
    cp_error_file files[CP_ERROR_FILE_MAX];
} cp_error_details;

/*
 * A memory attachment (crashport_attach_bytes, crashport_attach_ring): a named buffer with a
 * content type, in memory the stub mapped for it (at most CP_MEMORY_ATTACHMENT_CAP bytes). The
 * slot's sequence is also its writers' lock: a writer turns it odd (compare-and-swap from even)
 * for as long as it changes the slot or its bytes, and even again after. A reader that finds it
 * odd takes the bytes all the same and says the last write may be partial. A plain buffer holds
 * `length` bytes at `address`; a ring has had `length` bytes appended in all, and holds the last
 * min(length, capacity) of them, the oldest at offset length % capacity once it wrapped.
 */
typedef struct cp_memory_attachment {
    uint32_t sequence; /* odd while written */
    uint32_t flags;    /* CP_SLOT_USED, _TRUNCATED (more was given than it holds), _RING */
    char name[CP_MEMORY_NAME_BYTES];
    char content_type[CP_CONTENT_TYPE_BYTES];
    uint64_t address;  /* the buffer, in this process */
    uint64_t capacity; /* its bytes */
    uint64_t length;   /* a plain buffer's bytes; a ring's bytes appended in all */
} cp_memory_attachment;

/* One frame of a handled error's own stack: an address in the process (a return address, as
 * backtrace(3) gives it: symbolicated at the byte before it), or a text frame an interpreter
 * named (function, file, line), or both. */
typedef struct cp_error_frame {
    uint64_t address; /* 0: none (a text frame) */
    uint32_t line;    /* 0: unknown */
    uint32_t flags;   /* CP_SLOT_USED, CP_SLOT_TRUNCATED (function or file cut) */
    char function[CP_ERROR_FUNCTION_BYTES];
    char file[CP_ERROR_FILE_BYTES];
} cp_error_frame;

/* A handled error's own stack (crashport_report_error_stack), innermost frame first: static
 * memory of the stub apart from the area (200 KB, untouched until used), which names it
 * (cp_app_area.error_stack). Written under the error reporting's lock before the ERROR record
 * is sent and cleared once the watcher answered, as cp_error_details; the watcher reads its
 * header, then `count` frames (at most CP_ERROR_FRAME_MAX), for an ERROR record only, and takes
 * it only when sequence is even, CP_SLOT_USED is set and tid is the record's thread. */
typedef struct cp_error_stack {
    uint32_t sequence; /* odd while being written */
    uint32_t flags;    /* CP_SLOT_USED while the error being reported has a stack of its own */
    uint32_t tid;      /* the reporting thread: the ERROR record's tid */
    uint32_t count;    /* frames used, from the first */
    uint64_t left_out; /* frames given past CP_ERROR_FRAME_MAX */
    cp_error_frame frames[CP_ERROR_FRAME_MAX];
} cp_error_stack;

typedef struct cp_app_area {
    uint32_t magic;   /* CP_APP_MAGIC once the area is in use */
    uint32_t version; /* CP_APP_VERSION */
    uint32_t size;    /* sizeof(cp_app_area) */
    uint32_t writer;  /* the annotation and attachment writers' spin flag */
    uint64_t breadcrumb_count; /* breadcrumbs ever added */
    uint64_t writer_thread;    /* pthread_self() of the writer holding `writer`, 0 if none */
    /* High-water marks: no slot at or past these was ever used (the watcher reads only below
     * them: most programs never annotate, and a capture should not read 120 KB for nothing). */
    uint32_t annotations_used;
    uint32_t attachments_used;
    /* The heartbeat (crashport_heartbeat), in the header so that the watcher's hang monitor
     * reads 64 bytes per look: any change of count is a beat, judged by the watcher's clock. */
    uint64_t heartbeat_ns;    /* CLOCK_MONOTONIC of the last beat, 0: never */
    uint64_t heartbeat_count; /* beats so far */
    uint32_t heartbeat_tid;   /* the thread that beat last (the one a hang report leads with) */
    uint32_t heartbeat_reserved;
    cp_annotation annotations[CP_ANNOTATION_MAX];
    cp_breadcrumb breadcrumbs[CP_BREADCRUMB_MAX];
    cp_attachment attachments[CP_ATTACHMENT_MAX];
    /* Where the runtimes keep why they aborted, found by the stub at install (0: not loaded):
     * glibc's __abort_msg (a struct abort_msg_s *: u32 size of its mapping, then the message;
     * failed asserts, malloc's checks, __libc_fatal), and the Swift runtime's fatal error
     * message (swift_getFatalErrorMessageBuffer(): an atomic const char *). */
    uint64_t abort_message_address;
    uint64_t swift_message_address;
    /* An uncaught C++ exception, filled by the stub's std::terminate handler (libstdc++ only):
     * its demangled type and what() when it derives from std::exception. */
    uint32_t exception_sequence; /* odd while being written */
    uint32_t exception_flags;    /* CP_SLOT_* */
    char exception_type[CP_EXCEPTION_TYPE_BYTES];
    char exception_message[CP_EXCEPTION_MESSAGE_BYTES];
    /* The handled error being reported (crashport_report_error), read for an ERROR record. */
    uint32_t error_sequence; /* odd while being written */
    uint32_t error_flags;    /* CP_SLOT_* */
    char error_type[CP_ERROR_TYPE_BYTES];
    char error_message[CP_ERROR_MESSAGE_BYTES];
    /* The launch window (crashport_launch_completed): a crash before it ends is a launch crash. */
    uint64_t install_time_ns;  /* CLOCK_REALTIME at crashport_install */
    uint32_t launch_ms;        /* CRASHPORT_LAUNCH_MS (default 5000); 0: until launch_completed */
    uint32_t launch_completed; /* 1 once crashport_launch_completed() was called */
    char release[CP_RELEASE_BYTES]; /* CRASHPORT_RELEASE at install, "" if unset */
    /* Appended: an area of a stub before it ends here (its size is CP_APP_SIZE_MIN), and a
     * watcher before it reads the area without it (it reads only the size it knows). */
    cp_error_details error_details;
    /* Appended: the address of the stub's cp_error_stack (0: none). An area of a stub before it
     * ends here (its size is CP_APP_SIZE_DETAILS). */
    uint64_t error_stack;
    /* Appended after it (an area that ends at CP_APP_SIZE_STACK has none): the memory
     * attachments, and the high-water mark of their slots. */
    uint32_t memory_attachments_used;
    uint32_t memory_reserved;
    cp_memory_attachment memory_attachments[CP_MEMORY_ATTACHMENT_MAX];
} cp_app_area;

/* The smallest area a watcher reads: one without error_details, from a stub before it. */
#define CP_APP_SIZE_MIN 120528u
/* An area with error_details and without error_stack, from a stub before the latter. */
#define CP_APP_SIZE_DETAILS 142224u
/* An area with error_stack and without memory attachments, from a stub before them. */
#define CP_APP_SIZE_STACK 142232u

/* Verdict values. */
#define CP_VERDICT_CONTINUE 0u /* not handled: continue down the chain (Mach's KERN_FAILURE) */

typedef struct cp_verdict {
    cp_header header;
    uint32_t verdict;
    uint32_t reserved;
    uint64_t capture_ns; /* the watcher's own time from receiving the record to this verdict */
} cp_verdict;

typedef struct cp_heartbeat {
    cp_header header;
    uint32_t extend_ms; /* give the watcher this much more time from now */
    uint32_t reserved;
} cp_heartbeat;

#ifndef __cplusplus
_Static_assert(sizeof(cp_header) == 16, "cp_header is 16 bytes");
_Static_assert(sizeof(cp_consent) == 24, "cp_consent is 24 bytes");
_Static_assert(sizeof(cp_pending_query) == 24, "cp_pending_query is 24 bytes");
_Static_assert(sizeof(cp_pending_entry) == 344, "cp_pending_entry is 344 bytes");
_Static_assert(__builtin_offsetof(cp_pending_list, entries) == 24, "entries at 24");
_Static_assert(sizeof(cp_pending_list) == 24 + 32 * 344, "cp_pending_list is packed");
_Static_assert(sizeof(cp_consent_report) == 88, "cp_consent_report is 88 bytes");
_Static_assert(sizeof(cp_hello) == 88, "cp_hello is 88 bytes");
_Static_assert(sizeof(cp_last_run) == 88, "cp_last_run is 88 bytes");
_Static_assert(sizeof(cp_run_detail) == 1592, "cp_run_detail is 1592 bytes");
_Static_assert(__builtin_offsetof(cp_hello_reply, run_detail) == CP_HELLO_REPLY_SHORT_SIZE, "run_detail at 496");
_Static_assert(__builtin_offsetof(cp_hello_reply, last_send) == CP_HELLO_REPLY_DETAIL_SIZE, "last_send at 2088");
_Static_assert(sizeof(cp_send_state) == 336, "cp_send_state is 336 bytes");
_Static_assert(sizeof(cp_hello_reply) == 2088 + 336, "cp_hello_reply is 2424 bytes");
_Static_assert(sizeof(cp_report_state) == 344 + 336, "cp_report_state is packed");
_Static_assert(sizeof(cp_report_states) == 24 + 32 * 680, "cp_report_states is packed");
_Static_assert(sizeof(cp_launch) == 32, "cp_launch is 32 bytes");
_Static_assert(sizeof(cp_setting) == 24, "cp_setting is 24 bytes");
_Static_assert(sizeof(cp_goodbye) == 24, "cp_goodbye is 24 bytes");
_Static_assert(sizeof(cp_spool_header) == 40, "cp_spool_header is 40 bytes");
_Static_assert(sizeof(cp_action) == 32, "cp_action is 32 bytes");
_Static_assert(__builtin_offsetof(cp_crash, regs) == 88, "regs at 88");
_Static_assert(__builtin_offsetof(cp_crash, fpregs) == 360, "fpregs at 360");
_Static_assert(sizeof(cp_chain_entry) == 104, "cp_chain_entry is 104 bytes");
_Static_assert(sizeof(cp_reraise) == 32, "cp_reraise is 32 bytes");
_Static_assert(__builtin_offsetof(cp_crash, chain) == 896, "chain at 896");
_Static_assert(__builtin_offsetof(cp_crash, reraise) == 1728, "reraise at 1728");
_Static_assert(__builtin_offsetof(cp_crash, app_area) == 1760, "app_area at 1760");
_Static_assert(__builtin_offsetof(cp_crash, stack_start) == 1768, "stack_start at 1768");
_Static_assert(__builtin_offsetof(cp_crash, stack) == 1784, "stack at 1784");
_Static_assert(sizeof(cp_crash) == 1784 + CP_STACK_COPY_MAX, "cp_crash has no tail padding");
_Static_assert(sizeof(cp_annotation) == 1096, "cp_annotation is 1096 bytes");
_Static_assert(sizeof(cp_breadcrumb) == 312, "cp_breadcrumb is 312 bytes");
_Static_assert(sizeof(cp_attachment) == 1032, "cp_attachment is 1032 bytes");
_Static_assert(__builtin_offsetof(cp_app_area, annotations) == 64, "annotations at 64");
_Static_assert(sizeof(cp_error_property) == 1096, "cp_error_property is 1096 bytes");
_Static_assert(sizeof(cp_error_file) == 1032, "cp_error_file is 1032 bytes");
_Static_assert(sizeof(cp_error_details) == 32 + 16 * 1096 + 4 * 1032, "cp_error_details is packed");
_Static_assert(__builtin_offsetof(cp_app_area, error_details) == CP_APP_SIZE_MIN, "error_details is appended");
_Static_assert(sizeof(cp_error_frame) == 400, "cp_error_frame is 400 bytes");
_Static_assert(__builtin_offsetof(cp_error_stack, frames) == 24, "frames at 24");
_Static_assert(sizeof(cp_error_stack) == 24 + 512 * 400, "cp_error_stack is packed");
_Static_assert(__builtin_offsetof(cp_app_area, error_stack) == CP_APP_SIZE_DETAILS, "error_stack is appended");
_Static_assert(CP_APP_SIZE_DETAILS == CP_APP_SIZE_MIN + sizeof(cp_error_details), "CP_APP_SIZE_DETAILS ends error_details");
_Static_assert(sizeof(cp_memory_attachment) == 160, "cp_memory_attachment is 160 bytes");
_Static_assert(__builtin_offsetof(cp_app_area, memory_attachments_used) == CP_APP_SIZE_STACK,
               "memory attachments are appended");
_Static_assert(sizeof(cp_app_area) == 64 + 64 * 1096 + 100 * 312 + 16 * 1032 + 24 + 256 + 1024 + 8 + 128 + 1024 + 16 + 128
                                          + sizeof(cp_error_details) + 8 + 8 + 16 * 160,
               "cp_app_area is packed");
_Static_assert(sizeof(cp_verdict) == 32, "cp_verdict is 32 bytes");
_Static_assert(sizeof(cp_heartbeat) == 24, "cp_heartbeat is 24 bytes");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format is little-endian");
#endif

#endif /* CRASHPORT_PROTOCOL_H */
