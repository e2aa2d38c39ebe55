/*
 * crashport.h: the public C API of libcrashport, crashport's in-process stub.
 *
 * The stub hands every crash of this process to a separate watcher process over a socket and
 * then lets the signal continue down the chain of handlers that were installed before it. The
 * watcher is either a launcher (`crashport run`, which hands down its socket as CRASHPORT_FD) or
 * a long-running sidecar (`crashport watch --socket PATH`; CRASHPORT_SOCKET=PATH, '@' first for
 * an abstract name), which the stub connects to itself. A constructor installs the stub in any
 * process that loads libcrashport.so (LD_PRELOAD, or simply linked with it) when CRASHPORT_FD or
 * CRASHPORT_SOCKET is set, unless CRASHPORT_INSTALL=manual; others call crashport_install().
 * (A program that links it without calling it needs -Wl,--no-as-needed before -lcrashport, or
 * the linker drops the library; a static program links libcrashport.a whole.)
 *
 * A sidecar that is not running does not stop the install: at a crash the stub connects again,
 * and when no watcher answers it writes the crash to a spool directory (CRASHPORT_SPOOL, or the
 * sidecar's own, or /var/spool/crashport) for the sidecar to pick up later, and says so in one
 * line on stderr. Either way the process then dies as it would without crashport.
 *
 * Environment (read once, by crashport_install; an option set in the struct wins):
 *   CRASHPORT_FD          launcher mode: the inherited socket
 *   CRASHPORT_SOCKET      sidecar mode (only when there is no launcher socket): its path
 *   CRASHPORT_SPOOL       the spool directory ("" for none)
 *   CRASHPORT_TIMEOUT_MS  the verdict wait (default 10000)
 *   CRASHPORT_FORWARD_FIRST  e.g. "SIGSEGV,SIGBUS"
 *   CRASHPORT_SIGNALS     the signals reported: "SEGV,BUS,ABRT" (the set) or "-ILL,+10" (the
 *                         default set edited); a bad value is said once and the default kept
 *   CRASHPORT_INSTALL=manual  the constructor leaves the install to the program
 *   CRASHPORT_LAUNCH_MS   the launch window (default 5000; 0: until crashport_launch_completed)
 *   CRASHPORT_RELEASE     the program's release, for sessions and reports
 *   CRASHPORT_LAST_RUN    set by `crashport run`: the previous run (crashport_last_run)
 *   CRASHPORT_LAST_RUN_DETAIL  set by `crashport run`: the same in full (crashport_last_run_detail)
 *
 * A process with privileges its user does not have (setuid or setgid, file capabilities: the
 * kernel's AT_SECURE; or real and effective ids that differ) reads none of these: its
 * environment is its user's choice. It reports only where the program says (the options), to
 * a listener running as root or as its effective uid, never as its real one. And a process
 * that is not dumpable at the crash (PR_SET_DUMPABLE 0, setuid) sends and spools a record with
 * none of its memory (CP_CRASH_NOT_DUMPABLE): crashport never makes it dumpable.
 */
#ifndef CRASHPORT_H
#define CRASHPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Options of crashport_install(). Start from CRASHPORT_OPTIONS_DEFAULT (never a zeroed struct:
 * fd 0 is stdin) and set what you need; new fields are only ever appended. The struct and its
 * strings are read during the call only (nothing is kept), so they may live on the stack.
 */
typedef struct crashport_options {
    int fd;              /* the launcher's socket (SOCK_SEQPACKET); -1: take CRASHPORT_FD, and
                            when that is unset too, sidecar mode (socket_path) */
    unsigned timeout_ms; /* verdict wait; 0: CRASHPORT_TIMEOUT_MS, else 10000 */
    uint64_t signals;    /* bitmask 1 << signo; 0: CRASHPORT_SIGNALS, else SIGSEGV SIGBUS
                            SIGILL SIGFPE SIGABRT SIGTRAP SIGSYS */
    uint64_t forward_first; /* bitmask 1 << signo of signals whose previous handler runs first
                               (crashport reports only if the fault comes back unhandled);
                               0: CRASHPORT_FORWARD_FIRST (e.g. "SIGSEGV,SIGBUS"), else none */
    const char *socket_path; /* sidecar mode, used only when there is no launcher socket (fd
                                -1 and no CRASHPORT_FD): the path `crashport watch` listens on,
                                '@' first for the abstract namespace; at most 107 bytes
                                (108 with the '@'), longer is refused; NULL: CRASHPORT_SOCKET */
    const char *spool_path;  /* the directory a crash no watcher answered is written to; NULL:
                                CRASHPORT_SPOOL ("" there: none), else in sidecar mode the
                                directory the sidecar names, else /var/spool/crashport when
                                this process may write it */
} crashport_options;

/* Every option at its default: note that fd 0 is stdin, so a zeroed struct is not this. */
#define CRASHPORT_OPTIONS_DEFAULT {-1, 0u, 0u, 0u, NULL, NULL}

/*
 * Installs crashport: checks the socket (launcher mode) or connects to the sidecar (sidecar
 * mode: the listener must run as root or as this process's user; HELLO, then up to 1 s for
 * its answer), opens the spool directory, preallocates everything the signal handler needs,
 * gives the watcher ptrace permission, gives the calling thread an alternate signal stack if
 * it has none large enough, saves the previous action of each signal and installs its own,
 * registers an on_exit handler (GOODBYE at a normal exit: the watcher then knows the end was
 * not a death no handler saw), then says HELLO to a launcher. options may be NULL (all
 * defaults).
 *
 * Returns 0, or -errno (the process is left as it was, and one line on stderr says why crash
 * reporting is off). A sidecar that is missing, untrusted or refuses this process is not a
 * failure: it returns 0, says on stderr what a crash will do instead (reconnect, spool), and a
 * crash then reconnects (unless refused) or is spooled. Thread-safe and idempotent: once it has
 * succeeded, later calls do nothing and return 0. It never aborts the program.
 *
 * System calls: only during this call (socket, connect, sendmsg, poll, mmap, open, sigaction,
 * sigaltstack, prctl...) and in a crash (the signal handler: raw system calls only). In between
 * the stub makes none, apart from giving each new thread its alternate stack, and one
 * non-blocking send as the process exits through exit(), _exit() or _Exit() (GOODBYE; the last
 * two are interposed by libcrashport.so only).
 */
__attribute__((visibility("default"))) int crashport_install(const crashport_options *options);

/*
 * What the program tells crashport about itself. The watcher reads it out of the process when
 * it crashes, into the report (event.json: annotations, breadcrumbs, attachments; the minidump:
 * a Crashpad info stream of simple annotations). All of it lives in static memory of
 * libcrashport: nothing allocates, and nothing locks against the crash path, so each call is
 * safe from any thread at any time, before or without crashport_install() (then it is only
 * memory nobody reads) and cheap enough for a hot loop. None makes a system call unless its
 * comment says so. Text is stored as given (any bytes but NUL; the report escapes it when
 * printed), cut to the limits below at a UTF-8 character boundary and marked as cut.
 */

/* crashport_annotate's answer when it stored the key or value cut to its limit. */
#define CRASHPORT_TRUNCATED 1

/*
 * Sets, replaces or (value NULL) removes the annotation `key`. At most 64 keys of up to 63
 * bytes, values of up to 1023 bytes (longer ones are cut and marked "truncated" in the report).
 *
 * Returns 0, CRASHPORT_TRUNCATED when it stored a cut key or value, -EINVAL for a NULL or empty
 * key, -ENOSPC when 64 other keys are set, -EDEADLK when called from a signal handler that
 * interrupted this thread's own crashport_annotate or crashport_attach_file, and -EBUSY when
 * other threads kept the annotations for a whole second (one was stopped mid-call). Thread-safe;
 * concurrent writers spin briefly on a flag of their own (never the crash path's), and only when
 * another thread is writing at that very moment do they yield (sched_yield, a system call).
 */
__attribute__((visibility("default"))) int crashport_annotate(const char *key, const char *value);

/*
 * The value of annotation `key` (as stored: cut keys match cut), copied into value[size] and
 * NUL-terminated (cut to fit). Returns the value's full length (like snprintf: a result >= size
 * means it was cut), -ENOENT when the key is not set, -EINVAL, or as crashport_annotate
 * -EDEADLK / -EBUSY. No system call (unless contended, as crashport_annotate).
 */
__attribute__((visibility("default"))) int crashport_annotation(const char *key, char *value, size_t size);

/*
 * Adds a breadcrumb: a timestamped (CLOCK_REALTIME, read through the vDSO) category and
 * message, kept in a ring of the last 100 and reported oldest first. Categories keep 31 bytes,
 * messages 255 (longer ones are cut and marked). NULL is taken as "". Lock-free: safe from any
 * thread and from signal handlers.
 */
__attribute__((visibility("default"))) void crashport_breadcrumb(const char *category, const char *message);

/*
 * Names a file the watcher copies into the report (attachments/) when this process crashes:
 * at most 16 files, each copied up to 7 MB and all of them up to 20 MB (what was cut is
 * recorded). The watcher reads it as this process's user would: a file that user cannot read
 * is not copied, and only regular files are. A relative path is made absolute against the
 * current directory now (getcwd, a system call); paths keep 1023 bytes, a longer one is
 * refused. Attaching a file already attached does nothing.
 *
 * Returns 0, -EINVAL (NULL or empty), -ENAMETOOLONG, -ENOSPC (16 attached), or as
 * crashport_annotate -EDEADLK / -EBUSY.
 */
__attribute__((visibility("default"))) int crashport_attach_file(const char *path);

/* Stops attaching `path` (made absolute as crashport_attach_file does). Returns 0, -ENOENT when
 * it was not attached, or as crashport_attach_file. */
__attribute__((visibility("default"))) int crashport_detach_file(const char *path);

/*
 * Attachments from memory: named text or bytes with a content type, set and updated at any time,
 * which the watcher writes beside the report (attachments/NAME) when this process is held for one
 * (a crash, a handled error, a hang) and uploads with their content type. The bytes are copied
 * into memory the stub maps for each attachment (mmap at the call; nothing is read from the
 * program's own buffers at crash time), so the program's buffer may change or go right after.
 *
 *     crashport_attach_text("state.txt", dump_state());                    // replaced each call
 *     crashport_attach_bytes("frame.png", "image/png", pixels, size);
 *     crashport_attach_ring("app.log", "text/plain", 64 * 1024);           // the last 64 KiB
 *     crashport_attach_append("app.log", line, strlen(line));              // from any thread
 *
 * Limits: 16 attachments from memory (besides the 16 files), names of 63 bytes (no '/'), content
 * types of 63 bytes (NULL or "": application/octet-stream; crashport_attach_text and a ring:
 * text/plain; charset=utf-8), 7 MiB each (more is cut to its first 7 MiB and marked), and all the
 * report's attachments, files and memory, 20 MiB (memory first: what the program kept in memory
 * dies with it, a file does not). A ring holds the last `capacity` bytes appended (at most 7
 * MiB), oldest first in the report; an append larger than the ring keeps its last bytes. A name
 * the watcher's own files take (system.log) is written as 2-NAME. Setting
 * a name again replaces its content, type and kind (a ring becomes a buffer, or the reverse).
 *
 * Returns 0, CRASHPORT_TRUNCATED when the bytes or the content type were cut, -EINVAL (NULL or
 * empty name, a name with '/', "." or "..", NULL bytes with a size, a ring of 0 bytes; crashport_attach_append
 * to a name that is not a ring), -ENAMETOOLONG, -ENOSPC (16 set), -ENOENT (appending to or
 * detaching a name not set), -ENOMEM (the mapping failed), -EDEADLK / -EBUSY as
 * crashport_annotate (a writer of the same attachment stopped or crashed mid-write holds it for
 * a whole second at most). Thread-safe: writers of one attachment go one at a time (a spin, then
 * sched_yield), never against the crash path; a crash in the middle of a write still gets the
 * attachment, marked as being written. System calls: mmap (and munmap of a buffer replaced) when
 * setting, munmap when detaching; crashport_attach_append makes none (unless contended). Memory
 * attachments are read while the process is held: a death seen only after it happened (SIGKILL,
 * the OOM killer) has the files, not these.
 */
__attribute__((visibility("default"))) int crashport_attach_bytes(const char *name, const char *content_type,
                                                                  const void *bytes, size_t size);
__attribute__((visibility("default"))) int crashport_attach_text(const char *name, const char *text);
__attribute__((visibility("default"))) int crashport_attach_ring(const char *name, const char *content_type,
                                                                 size_t capacity);
__attribute__((visibility("default"))) int crashport_attach_append(const char *name, const void *bytes, size_t size);
/* Removes the attachment from memory `name` and unmaps its bytes. */
__attribute__((visibility("default"))) int crashport_detach_memory(const char *name);

/*
 * Reports an error the program handled: a report of kind "error" with every thread's stack,
 * this thread marked, `type` and `message` (cut to 127 and 1023 bytes; NULL type: "error"). The
 * process is held for the capture only (as long as a crash capture, a few ms), then continues
 * unharmed; the call returns once the watcher has its snapshot (it writes the report after),
 * or after the timeout (CRASHPORT_TIMEOUT_MS).
 *
 * Returns 0, -ENOTCONN when crashport is not installed or has no watcher connection (nothing
 * is sent), -EAGAIN past the rate limit (10 in a row, then one every 6 s; nothing is sent),
 * -EDEADLK from a signal handler that interrupted this thread's own report, -ETIMEDOUT, or
 * -errno of the send. Thread-safe: reports from several threads go one at a time. Makes system
 * calls (it talks to the watcher); not async-signal-safe, though a signal handler gets an
 * error, never a deadlock, when it interrupts a report on its own thread.
 */
__attribute__((visibility("default"))) int crashport_report_error(const char *type, const char *message);

/* One key/value of a handled error (crashport_report_error_with). */
typedef struct crashport_property {
    const char *key;   /* not NULL, not "" */
    const char *value; /* NULL is taken as "" */
} crashport_property;

/*
 * Reports a handled error, as crashport_report_error, with key/values and files of its own (App
 * Center's trackError properties and attachments): they are in this error's report only, never
 * in another's, so two threads reporting at once each get their own (the annotations, global,
 * are in every report as well). In event.json the properties are `exception.properties` (cut
 * keys in `exception.properties_truncated`), and each file is copied into the report's
 * attachments/ as crashport_attach_file's are (read as this process's user, 7 MB per file)
 * and marked `"scope": "error"`.
 *
 * Limits: 16 properties, keys of 63 bytes, values of 1023 (longer ones are cut at a UTF-8
 * character boundary and marked); a key given twice keeps its last value. 4 files (a relative
 * path is made absolute against the current directory, getcwd), paths of 1023 bytes. Properties
 * and files past the limits (or a path too long) are left out, and the report says how many.
 * The strings are read during the call only.
 *
 * Returns 0, CRASHPORT_TRUNCATED when the report was made with something cut or left out,
 * -EINVAL for a NULL or empty key or file, or NULL arrays with a count, else as
 * crashport_report_error. Thread-safe: reports go one at a time, each with its own properties.
 */
__attribute__((visibility("default"))) int crashport_report_error_with(const char *type, const char *message,
                                                                       const crashport_property *properties,
                                                                       size_t property_count,
                                                                       const char *const *files, size_t file_count);

/*
 * One frame of a handled error's own stack (crashport_report_error_stack): an address in this
 * process's code, or a frame an interpreter names (function, file, line), or both. An address
 * is taken as a return address, as backtrace(3) and Swift's Thread.callStackReturnAddresses
 * give them, and symbolicated at the byte before it (to name a function by its first byte,
 * give that address + 1); one in no module is shown as an unknown frame.
 */
typedef struct crashport_frame {
    uintptr_t address;    /* 0: none (a text frame) */
    const char *function; /* the function's name as the interpreter gives it; NULL: none */
    const char *file;     /* its source file; NULL: none */
    uint32_t line;        /* its line; 0: unknown */
} crashport_frame;

/*
 * Reports a handled error, as crashport_report_error_with, with a stack of its own: the stack of
 * an exception caught from an embedded interpreter, or one saved when it was thrown (App
 * Center's trackException with the exception's stack). `frames` is innermost first. The report's
 * crashed thread is that stack (event.json: the first thread, `"error_stack": true`, with this
 * thread's id; addresses symbolicated like any frame, text frames as given), and this thread's
 * own stack stays among the threads. frames NULL (count 0) is crashport_report_error_with.
 *
 * Limits: the first 512 frames are kept, the rest counted (the report's notes say how many);
 * a function keeps 127 bytes, a file 255 (cut at a UTF-8 character boundary and marked). Only
 * the first 512 frames are ever read, so the array may hold just those with frame_count the
 * whole stack's depth; they and their strings are read during the call only, and the cost of a
 * call is bounded by the 512 frames it copies, whatever the count. Properties and files as crashport_report_error_with.
 * The minidump's threads stay the real ones: the error's stack is in event.json only.
 *
 * Returns 0, CRASHPORT_TRUNCATED when something was cut or left out (frames past 512
 * included), -EINVAL for NULL frames with a count or as crashport_report_error_with, else as
 * crashport_report_error (same system calls, same thread safety: reports go one at a time, each
 * with its own stack, kept in static memory of the stub under the error reporting's lock).
 */
__attribute__((visibility("default"))) int crashport_report_error_stack(const char *type, const char *message,
                                                                        const crashport_property *properties,
                                                                        size_t property_count,
                                                                        const char *const *files, size_t file_count,
                                                                        const crashport_frame *frames,
                                                                        size_t frame_count);

/*
 * Crashes this process on purpose, for real, so that a developer sees the whole path work once
 * (App Center's generateTestCrash): a write to address 0 on the calling thread, SIGSEGV, which
 * crashport reports as any crash (the handler, the watcher's capture, the report, the upload),
 * titled "test crash: ..." and marked `"test": true` in event.json (a Sentry tag
 * crashport.test=true), and keeps out of crash-free statistics (`crashport stats` counts it
 * apart) and the launch-crash count; at the next start crashport_last_run says it crashed (not
 * during launch) and names its report. The process then dies by SIGSEGV, as without crashport
 * (a handler of the program's that skips the store: SIGILL). Without crashport installed it
 * crashes all the same, unreported. Never returns. One system call (gettid) before the fault.
 */
__attribute__((visibility("default"), noreturn)) void crashport_test_crash(void);

/*
 * The previous run of this program (same executable path and build-id), as the watcher keeps it
 * in its reports directory (Bugsnag's lastRunInfo, App Center's hasCrashedInLastSession):
 * whether it crashed, whether during its launch, and how many runs in a row crashed during
 * launch. A crash during launch adds one to the count; a crash after launch keeps it; a run that
 * ends without crashing sets it to 0. Known at install, before main: a program can pick a safe
 * mode on its first line.
 */
typedef struct crashport_last_run_info {
    int crashed;
    int crashed_during_launch;
    int consecutive_launch_crashes;
    char report_id[64]; /* NUL-terminated: the crash's report id (crashport show ID), "" if none */
} crashport_last_run_info;

/* Fills `info`. Returns 0, -ENOENT when no previous run is on record (info zeroed), -ENOTCONN when
 * crashport is not installed, -EINVAL for NULL. No system call. */
__attribute__((visibility("default"))) int crashport_last_run(crashport_last_run_info *info);

/*
 * The previous run in full (App Center's lastSessionCrashReport): how it ended, when, for how
 * long, why, and its report. Set `size` to sizeof(crashport_run_detail) (CRASHPORT_RUN_DETAIL_INIT
 * does) before the call: fields are only ever appended, and a library older than the header the
 * program was built with leaves the fields it does not know as they were (zero, from the
 * initializer). Known at install, before main.
 */
#define CRASHPORT_RUN_UNKNOWN 0     /* the watcher kept no detail of it (a record from before) */
#define CRASHPORT_RUN_CLEAN 1       /* it ended without a crash, a kill, a hang or a handled error */
#define CRASHPORT_RUN_CRASH 2       /* it crashed (a test crash too: test_crash) */
#define CRASHPORT_RUN_TERMINATION 3 /* it was killed without crashing (SIGKILL, the OOM killer) */
#define CRASHPORT_RUN_HANG 4        /* it ended, not crashing, after a hang was reported */
#define CRASHPORT_RUN_ERRORS 5      /* it ended, not crashing, having reported handled errors */

typedef struct crashport_run_detail {
    size_t size;  /* in: sizeof(crashport_run_detail) */
    int known;    /* 1: a previous run is on record; everything below is zero (-1) when not */
    int kind;     /* CRASHPORT_RUN_*: the first that applies, in that order */
    int crashed;  /* it crashed or was killed (crashport_last_run's `crashed`) */
    int abnormal; /* it ended abnormally: a crash or a kill (not a test crash) */
    int during_launch;              /* the crash or kill came during its launch */
    int consecutive_launch_crashes; /* as crashport_last_run */
    int signal;                     /* the signal it crashed with or was killed by, 0: none */
    char signal_name[16];           /* "SIGSEGV", "" when none */
    int exit_status;                /* its exit status when it exited and it is known, else -1 */
    int memory_pressure;  /* its memory was under pressure: near its cgroup's limit, the limit hit,
                             or the OOM killer at work in its cgroup (App Center's
                             hasReceivedMemoryWarningInLastSession) */
    int oom_killed;       /* the OOM killer ended it */
    int test_crash;       /* it crashed on purpose (crashport_test_crash) */
    int launch_protected; /* it ran the protect work of crashport_launch */
    unsigned errors;      /* handled errors it reported */
    unsigned hangs;       /* hangs reported */
    int64_t started_ms;   /* when it started, ms since the epoch (0: unknown) */
    int64_t duration_ms;  /* how long it ran */
    char reason[256];     /* why it ended, as its report says (the runtime's message, the fault);
                             cut; "" when none */
    char title[256];      /* its report's title, cut; "" when none */
    char report_id[64];   /* its report's id (crashport show ID), "" when none */
    char report_path[1024]; /* its report's directory, "" when none */
    int protect_timed_out; /* its asynchronous protect work did not finish within its timeout
                              (crashport_launch_with), and the launch went on without it */
    int send_state;        /* what became of its report's upload when this run started:
                              CRASHPORT_SEND_* (NONE when it made no report) */
    int64_t sent_ms;       /* when it was sent, ms since the epoch (0: not sent) */
    char send_id[64];      /* the server's id for it once sent (Sentry's event id, a collector's
                              report id), "" otherwise */
    char send_reason[256]; /* why it failed, waits or is not sent, "" when sent */
} crashport_run_detail;

/* What became of a report's upload (crashport_run_detail.send_state, crashport_report_states):
 * the first that applies. */
#define CRASHPORT_SEND_NONE 0             /* no report, or nothing known of it */
#define CRASHPORT_SEND_AWAITING_CONSENT 1 /* consent ask: it waits for the user's decision */
#define CRASHPORT_SEND_PENDING 2          /* it is to be sent: not tried yet, or tried again later */
#define CRASHPORT_SEND_SENT 3             /* a destination took it: send_id is the server's id */
#define CRASHPORT_SEND_FAILED 4           /* it failed for good (send_reason says why) */
#define CRASHPORT_SEND_NOT_SENT 5         /* it will not be sent: the user said no, consent
                                             never, or no upload destination is configured */

#define CRASHPORT_RUN_DETAIL_INIT {sizeof(crashport_run_detail)}

/* Fills `detail` (up to detail->size bytes). Returns 0, -ENOENT when no previous run is on
 * record (known 0), -ENOTCONN when crashport is not installed, -EINVAL for NULL or a size too
 * small to hold `known`. No system call. */
__attribute__((visibility("default"))) int crashport_last_run_detail(crashport_run_detail *detail);

/* Ends the launch: a crash before it is a launch crash. The launch is CRASHPORT_LAUNCH_MS after
 * install (default 5000; 0: until this call), or, once crashport_launch was called, until this
 * call: the program's own milestone (its first request served, its first frame drawn). No
 * system call. */
__attribute__((visibility("default"))) void crashport_launch_completed(void);

/*
 * Launch protection (the launch-protection pattern of iOS apps; Bugsnag's launch-crash
 * handling): when the launches before this one crashed `threshold` times in a row, the protect
 * work runs first (clear caches, reset the configuration, drop a database that will not open),
 * and then, in the same process, the launch work. The count is the watcher's
 * (consecutive_launch_crashes: a crash or kill during launch adds one, a run that ends without
 * one resets it), so it holds under `crashport run`, a sidecar and the host level alike:
 *
 *     static void repair(void *context) { remove_cache(); reset_settings(); }
 *     static void start(void *context) { open_database(); serve(); }
 *     int main(void) {
 *         crashport_launch(3, repair, start, NULL);   // start() calls crashport_launch_completed()
 *     }                                              // once it serves its first request
 *
 * From this call on the launch lasts until crashport_launch_completed(): call it at the
 * program's milestone, or every later crash counts as a launch crash. A protected launch leaves
 * a breadcrumb ("launch protection: N launch crashes in a row...") and its session says
 * `launch_protected` (crashport stats, the next run's crashport_last_run_detail). threshold 0:
 * CRASHPORT_LAUNCH_THRESHOLD. protect or launch may be NULL (nothing to run). Without crashport
 * installed nothing is on record, so only the launch work runs.
 *
 * Returns CRASHPORT_LAUNCH_PROTECTED when the protect work ran, CRASHPORT_LAUNCH_NORMAL when it
 * did not, after the launch work returned; -EALREADY (running nothing) when called before in
 * this process. One system call (a non-blocking send) when it protects, none otherwise.
 */
typedef void (*crashport_task)(void *context);
#define CRASHPORT_LAUNCH_THRESHOLD 3
#define CRASHPORT_LAUNCH_NORMAL 0
#define CRASHPORT_LAUNCH_PROTECTED 1
__attribute__((visibility("default"))) int crashport_launch(unsigned threshold, crashport_task protect,
                                                            crashport_task launch, void *context);

/*
 * Launch protection for real programs: the program's own decision, an asynchronous protect, and
 * a timeout. Start from CRASHPORT_LAUNCH_OPTIONS_INIT (fields are only ever appended):
 *
 *     static int should_protect(const crashport_run_detail *last, void *context) {
 *         return last->consecutive_launch_crashes >= 2 && cache_is_newer_than_binary();
 *     }
 *     static void repair(void *context) { start_fetching_config(on_fetched); }  // returns at once
 *     static void on_fetched(void) { write_config(); crashport_protect_finished(); }  // any thread
 *
 *     crashport_launch_options options = CRASHPORT_LAUNCH_OPTIONS_INIT;
 *     options.should_protect = should_protect;
 *     options.protect = repair;
 *     options.launch = start;
 *     options.asynchronous = 1;
 *     options.protect_timeout_ms = 10000;
 *     crashport_launch_with(&options);
 *
 * should_protect, when set, decides instead of the threshold: it gets the previous run in full
 * (crashport_last_run_detail; `known` 0 when none is on record) and returns non-zero to protect.
 * A crash in it is a launch crash like any other (a breadcrumb before it says where it came).
 * With `asynchronous`, protect only starts the work and may return at once; the calling thread
 * then waits (a futex, no busy loop) until crashport_protect_finished() is called from any
 * thread (from protect itself too), or protect_timeout_ms passed (0: 30000). Then the launch work
 * runs on the calling thread, in the same process. A protect that never finishes does not stop
 * the launch: after the timeout the launch goes on (the protect work, still running on its own
 * threads, is not stopped), a breadcrumb says so, its session says so, and the next start's
 * crashport_last_run_detail has protect_timed_out set.
 *
 * Returns CRASHPORT_LAUNCH_PROTECTED, CRASHPORT_LAUNCH_NORMAL, or CRASHPORT_LAUNCH_PROTECT_TIMED_OUT
 * (the launch went on without the protect work's end), after the launch work returned; -EALREADY
 * when crashport_launch or crashport_launch_with ran before in this process; -EINVAL for NULL.
 * crashport_launch(threshold, protect, launch, context) is this call with those four set.
 */
typedef int (*crashport_launch_predicate)(const crashport_run_detail *last_run, void *context);
typedef struct crashport_launch_options {
    size_t size;                              /* sizeof(crashport_launch_options) */
    unsigned threshold;                       /* without should_protect; 0: CRASHPORT_LAUNCH_THRESHOLD */
    crashport_launch_predicate should_protect; /* the program's decision; NULL: the threshold */
    crashport_task protect;                   /* NULL: nothing to protect */
    crashport_task launch;                    /* NULL: nothing to run after */
    void *context;                            /* given to all three */
    int asynchronous;                         /* 1: protect ends with crashport_protect_finished() */
    unsigned protect_timeout_ms;              /* asynchronous: the wait for it; 0: 30000 */
} crashport_launch_options;
#define CRASHPORT_LAUNCH_OPTIONS_INIT {sizeof(crashport_launch_options)}
#define CRASHPORT_LAUNCH_PROTECT_TIMED_OUT 2
__attribute__((visibility("default"))) int crashport_launch_with(const crashport_launch_options *options);

/* Ends an asynchronous protect (crashport_launch_with's `asynchronous`): the launch work runs now.
 * Returns 0, -ETIMEDOUT when the launch already went on without it, -EALREADY when called twice,
 * -ENOENT when no asynchronous protect is running. Thread-safe; one system call (futex wake). */
__attribute__((visibility("default"))) int crashport_protect_finished(void);

/* Life-cycle tasks by key, as the pattern keeps them: register a task (at most 16 keys of up to
 * 63 bytes; registering a key again replaces it; task NULL removes it), and run it by key when
 * the program decides (after its protect work, after its launch): crashport_run_task calls it on
 * the calling thread, with a breadcrumb "task KEY" first. Tasks are one-shot, as the pattern
 * describes: crashport_run_task removes the task before calling it, so a second run of the key
 * finds nothing (-ENOENT) unless the program registered it again (the task itself may). Register
 * returns 0, -EINVAL (NULL or empty key), -ENAMETOOLONG, -ENOSPC (16 registered), -ENOENT
 * (removing a key not registered); run returns 0 once the task returned, or -ENOENT / -EINVAL.
 * Thread-safe; no system call. */
__attribute__((visibility("default"))) int crashport_register_task(const char *key, crashport_task task,
                                                                   void *context);
__attribute__((visibility("default"))) int crashport_run_task(const char *key);

/* Says the program is alive, for the watcher's hang monitor (crashport run --hang-ms MS, or
 * CRASHPORT_HANG_MS): call it from the loop whose stall is a hang (an event loop, a worker's
 * main loop) at least every MS milliseconds. When the watcher sees no beat for MS, it takes
 * every thread's stack without stopping the program for longer than a capture, and writes a
 * report of kind "hang" (once per stall) that leads with the thread that beat last. Stores a
 * timestamp and the thread's id: no system call after a thread's first call; safe from any
 * thread, lock-free. */
__attribute__((visibility("default"))) void crashport_heartbeat(void);

/* Turns crash reporting off (0) or on for this program, now and, through the watcher, for its
 * next runs. Disabled, a crash goes straight down the chain of handlers as if crashport were not
 * installed, no report is written, and crashport_report_error returns -ECANCELED. Returns 0, or
 * -ENOTCONN / -errno when the choice could not be sent to the watcher (it still holds for this
 * run). Makes one system call (send, non-blocking). */
__attribute__((visibility("default"))) int crashport_set_enabled(int enabled);

/* 1 when crashport is installed and enabled, else 0. No system call. */
__attribute__((visibility("default"))) int crashport_is_enabled(void);

/*
 * Consent over uploading (crashport consent, App Center's "send / don't send / always send"), for
 * this program's reports: ask holds each report until the user decides, always sends, never keeps
 * them on the machine. A program with consent ask asks its user at its next start:
 *
 *     int pending = crashport_pending_reports();
 *     if (pending > 0) user_says_yes() ? crashport_send_pending() : crashport_discard_pending();
 *
 * Each returns 0, or -ENOTCONN / -errno when it could not be sent to the watcher (one system
 * call, send, non-blocking); -EINVAL for an unknown choice.
 */
#define CRASHPORT_CONSENT_ASK 0
#define CRASHPORT_CONSENT_ALWAYS 1
#define CRASHPORT_CONSENT_NEVER 2
__attribute__((visibility("default"))) int crashport_set_consent(int consent);
/* This program's reports awaiting consent, as the watcher counted them at install (0 after
 * crashport_send_pending or crashport_discard_pending); -ENOTCONN when not installed. No system
 * call. */
__attribute__((visibility("default"))) int crashport_pending_reports(void);
__attribute__((visibility("default"))) int crashport_send_pending(void);
__attribute__((visibility("default"))) int crashport_discard_pending(void);

/*
 * The reports awaiting consent one by one, for a consent dialog that shows them (App Center's
 * "send / don't send" with the reports' titles): each report's id, title, kind and time, newest
 * first, at most CRASHPORT_PENDING_MAX (the watcher lists no more; crashport_pending_reports
 * may count more). Only this program's reports, of this user. Asked of the watcher each call,
 * so always current:
 *
 *     crashport_pending_report pending[CRASHPORT_PENDING_MAX];
 *     int count = crashport_pending_list(pending, CRASHPORT_PENDING_MAX);
 *     for (int i = 0; i < count; i++) {
 *         if (user_says_yes(pending[i].title, pending[i].time_ms)) crashport_send_report(pending[i].id);
 *         else crashport_discard_report(pending[i].id);
 *     }
 *
 * crashport_pending_list fills at most capacity entries (every text NUL-terminated) and returns
 * how many, or -ENOTCONN when not installed, -EINVAL for a NULL out with a capacity,
 * -ETIMEDOUT when the watcher did not answer within 2 s, -EPROTO when it refused the query (an
 * older watcher) or answered nonsense, or -errno. It waits for the watcher (poll, up to 2 s):
 * call it from the program's start, not from a signal handler.
 *
 * crashport_send_report and crashport_discard_report decide for one report: the watcher honours
 * them only for a report of this program, of this user, awaiting consent (any other id is
 * refused and logged); crashport_pending_reports drops by one. Each returns 0, -EINVAL for an
 * empty id or one of 64 bytes or more, -ENOTCONN / -errno when it could not be sent (one send,
 * non-blocking).
 */
#define CRASHPORT_PENDING_MAX 32
typedef struct crashport_pending_report {
    char id[64];     /* the report's id: crashport show ID, crashport send ID */
    char title[256]; /* one line: what happened and where */
    char kind[16];   /* "crash", "termination", "error", "hang", or "" */
    int64_t time_ms; /* when it happened, milliseconds since the Unix epoch; 0 unknown */
} crashport_pending_report;
__attribute__((visibility("default"))) int crashport_pending_list(crashport_pending_report *out, size_t capacity);

/*
 * The program's recent reports, of any state, newest first, each with what became of its upload
 * (App Center's sendingSucceeded / failedSendingErrorReport, for a program that shows "your
 * report was sent"). The same request as crashport_pending_list (asked of the watcher each call,
 * up to 2 s), answered with this program's reports of this user only, at most
 * CRASHPORT_PENDING_MAX (the newest the watcher's quota keeps).
 *
 * Returns how many it filled, or as crashport_pending_list (-EPROTO from a watcher before it).
 */
typedef struct crashport_report_state {
    crashport_pending_report report; /* id, title, kind, time */
    int send_state;                  /* CRASHPORT_SEND_* */
    int64_t sent_ms;                 /* when it was sent, ms since the epoch; 0: not sent */
    char send_id[64];                /* the server's id once sent, "" otherwise */
    char send_reason[256];           /* why it failed, waits or is not sent */
} crashport_report_state;
__attribute__((visibility("default"))) int crashport_report_states(crashport_report_state *out, size_t capacity);
__attribute__((visibility("default"))) int crashport_send_report(const char *id);
__attribute__((visibility("default"))) int crashport_discard_report(const char *id);

#ifdef __cplusplus
}
#endif

#endif /* CRASHPORT_H */
