/*
 * launch.c: the program's side of its launches: the previous run in full
 * (crashport_last_run_detail), launch protection (crashport_launch: the protect work when the
 * launches before crashed in a row, then the launch work, in one process) and keyed life-cycle
 * tasks (crashport_register_task, crashport_run_task). crashport.h documents each call.
 *
 * The decision is the watcher's history, handed down at install (a launcher in
 * CRASHPORT_LAST_RUN, which app.c reads, and CRASHPORT_LAST_RUN_DETAIL, which cp_launch_install
 * reads; a sidecar in its HELLO_REPLY, which install.c hands to both), so it holds under
 * `crashport run`, a sidecar and the host level alike. Not signal context: the program's own
 * calls. The task table takes a spin flag of its own (never the crash path's, never held while a
 * task runs).
 *
 * Off the crash path the stub's files call one way (off_path.h): install.c → launch.c → attach.c
 * → app.c → settings.c. install.c calls into this file (cp_launch_install, cp_launch_set_detail); this
 * file calls app.c (the last run, sending to the watcher, breadcrumbs) and settings.c, never
 * install.c, and app.c never calls it (tools/build-stub checks it on the built objects).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "crashport.h"
#include "off_path.h"
#include "stub_state.h"

/* The previous run in full, as the watcher gave it (zero: not given). */
static cp_run_detail cp_launch_detail;
static bool cp_launch_detail_given;

CP_HIDDEN void cp_launch_set_detail(const cp_run_detail *detail)
{
    cp_launch_detail = *detail;
    cp_launch_detail.signal_name[sizeof cp_launch_detail.signal_name - 1] = '\0';
    cp_launch_detail.reason[sizeof cp_launch_detail.reason - 1] = '\0';
    cp_launch_detail.title[sizeof cp_launch_detail.title - 1] = '\0';
    cp_launch_detail.report_path[sizeof cp_launch_detail.report_path - 1] = '\0';
    cp_launch_detail_given = true;
}

/* What became of the last run's report (zero: nothing known). */
static cp_send_state cp_launch_send;

CP_HIDDEN void cp_launch_set_send(const cp_send_state *send)
{
    cp_launch_send = *send;
    if (cp_launch_send.state > CP_SEND_NOT_SENT) cp_launch_send.state = CP_SEND_NONE;
    cp_launch_send.server_id[sizeof cp_launch_send.server_id - 1] = '\0';
    cp_launch_send.reason[sizeof cp_launch_send.reason - 1] = '\0';
}

/* Copies up to `count` fields, each after a tab, into `fields` (cut to their capacities); returns
 * where the text goes on after them. */
static const char *cp_launch_tab_fields(const char *cursor, char *const fields[], const size_t capacities[],
                                        size_t count)
{
    for (size_t i = 0; i < count && *cursor == '\t'; i++) {
        cursor++;
        const char *end = strchr(cursor, '\t');
        size_t length = end != NULL ? (size_t)(end - cursor) : strlen(cursor);
        cp_app_copy_text(fields[i], capacities[i], cursor, length);
        cursor += length;
    }
    return cursor;
}

/* CRASHPORT_LAST_RUN_DETAIL="kind flags signo exit_status started_ms duration_ms errors hangs",
 * then, each after a tab, the signal's name, the reason, the title and the report's path; then,
 * after a tab, "send_state sent_ms", and after a tab each, the server's id and the send's reason
 * (a watcher before them sends none). A value that does not parse leaves the detail unknown. */
CP_HIDDEN void cp_launch_install(void)
{
    if (cp_launch_detail_given) return;
    const char *text = cp_settings_getenv("CRASHPORT_LAST_RUN_DETAIL");
    if (text == NULL) return;
    cp_run_detail detail;
    memset(&detail, 0, sizeof detail);
    unsigned kind = 0, flags = 0, errors = 0, hangs = 0;
    int signo = 0, exit_status = -1;
    unsigned long long started = 0, duration = 0;
    int used = 0;
    if (sscanf(text, "%u %u %d %d %llu %llu %u %u%n", &kind, &flags, &signo, &exit_status, &started, &duration,
               &errors, &hangs, &used) < 8) {
        return;
    }
    detail.kind = kind;
    detail.flags = flags;
    detail.signo = signo;
    detail.exit_status = exit_status;
    detail.started_ms = started;
    detail.duration_ms = duration;
    detail.errors = errors;
    detail.hangs = hangs;
    char *fields[] = {detail.signal_name, detail.reason, detail.title, detail.report_path};
    size_t capacities[] = {sizeof detail.signal_name, sizeof detail.reason, sizeof detail.title,
                           sizeof detail.report_path};
    const char *cursor = cp_launch_tab_fields(text + used, fields, capacities, sizeof fields / sizeof fields[0]);
    cp_launch_set_detail(&detail);
    unsigned send_state = 0;
    long long sent_ms = 0;
    if (*cursor == '\t' && sscanf(cursor + 1, "%u %lld%n", &send_state, &sent_ms, &used) == 2) {
        cp_send_state send;
        memset(&send, 0, sizeof send);
        send.state = send_state;
        send.sent_ms = sent_ms;
        cursor += 1 + used;
        char *send_fields[] = {send.server_id, send.reason};
        size_t send_capacities[] = {sizeof send.server_id, sizeof send.reason};
        (void)cp_launch_tab_fields(cursor, send_fields, send_capacities, 2);
        cp_launch_set_send(&send);
    }
}

__attribute__((visibility("default"))) int crashport_last_run_detail(crashport_run_detail *detail)
{
    if (detail == NULL || detail->size < sizeof detail->size + sizeof detail->known) return -EINVAL;
    size_t size = detail->size < sizeof(crashport_run_detail) ? detail->size : sizeof(crashport_run_detail);
    crashport_run_detail full;
    memset(&full, 0, sizeof full);
    full.size = detail->size;
    full.exit_status = -1;
    const cp_last_run *run = cp_app_previous_run();
    int result = !cp_app_is_installed() ? -ENOTCONN : run == NULL ? -ENOENT : 0;
    if (result == 0) {
        full.known = 1;
        full.consecutive_launch_crashes = (int)run->consecutive_launch_crashes;
        full.crashed = (int)run->crashed;
        full.during_launch = (int)run->crashed_during_launch;
        memcpy(full.report_id, run->report_id, sizeof full.report_id);
        full.report_id[sizeof full.report_id - 1] = '\0';
        if (cp_launch_detail_given) {
            const cp_run_detail *given = &cp_launch_detail;
            full.kind = (int)given->kind;
            full.signal = given->signo;
            full.exit_status = given->exit_status;
            full.abnormal = (given->flags & CP_RUN_ABNORMAL) != 0;
            full.memory_pressure = (given->flags & CP_RUN_MEMORY_PRESSURE) != 0;
            full.oom_killed = (given->flags & CP_RUN_OOM_KILLED) != 0;
            full.test_crash = (given->flags & CP_RUN_TEST) != 0;
            full.launch_protected = (given->flags & CP_RUN_PROTECTED) != 0;
            full.protect_timed_out = (given->flags & CP_RUN_PROTECT_TIMED_OUT) != 0;
            full.started_ms = (int64_t)given->started_ms;
            full.duration_ms = (int64_t)given->duration_ms;
            full.errors = given->errors;
            full.hangs = given->hangs;
            memcpy(full.signal_name, given->signal_name, sizeof full.signal_name);
            memcpy(full.reason, given->reason, sizeof full.reason);
            memcpy(full.title, given->title, sizeof full.title);
            memcpy(full.report_path, given->report_path, sizeof full.report_path);
        }
        full.send_state = (int)cp_launch_send.state;
        full.sent_ms = cp_launch_send.sent_ms;
        memcpy(full.send_id, cp_launch_send.server_id, sizeof full.send_id);
        memcpy(full.send_reason, cp_launch_send.reason, sizeof full.send_reason);
    }
    memcpy(detail, &full, size);
    return result;
}

/* Keyed tasks: a fixed table, a spin flag of its own. */
#define CP_TASK_MAX 16u
#define CP_TASK_KEY_BYTES 64u

typedef struct cp_task {
    char key[CP_TASK_KEY_BYTES];
    crashport_task function;
    void *context;
} cp_task;

static cp_task cp_tasks[CP_TASK_MAX];
static uint32_t cp_tasks_writer;

static void cp_tasks_lock(void)
{
    uint32_t expected = 0;
    while (!__atomic_compare_exchange_n(&cp_tasks_writer, &expected, 1u, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        expected = 0;
        sched_yield();
    }
}

static void cp_tasks_unlock(void) { __atomic_store_n(&cp_tasks_writer, 0u, __ATOMIC_RELEASE); }

static cp_task *cp_tasks_find(const char *key)
{
    for (uint32_t i = 0; i < CP_TASK_MAX; i++) {
        if (cp_tasks[i].function != NULL && strcmp(cp_tasks[i].key, key) == 0) return &cp_tasks[i];
    }
    return NULL;
}

__attribute__((visibility("default"))) int crashport_register_task(const char *key, crashport_task task, void *context)
{
    if (key == NULL || key[0] == '\0') return -EINVAL;
    if (strlen(key) >= CP_TASK_KEY_BYTES) return -ENAMETOOLONG;
    cp_tasks_lock();
    cp_task *slot = cp_tasks_find(key);
    if (slot == NULL && task != NULL) {
        for (uint32_t i = 0; i < CP_TASK_MAX && slot == NULL; i++) {
            if (cp_tasks[i].function == NULL) slot = &cp_tasks[i];
        }
    }
    int result = 0;
    if (task == NULL) {
        if (slot != NULL) memset(slot, 0, sizeof *slot);
        else result = -ENOENT;
    } else if (slot == NULL) {
        result = -ENOSPC;
    } else {
        memcpy(slot->key, key, strlen(key) + 1);
        slot->function = task;
        slot->context = context;
    }
    cp_tasks_unlock();
    return result;
}

__attribute__((visibility("default"))) int crashport_run_task(const char *key)
{
    if (key == NULL || key[0] == '\0') return -EINVAL;
    cp_tasks_lock();
    cp_task *slot = cp_tasks_find(key);
    cp_task task;
    if (slot != NULL) {
        /* One-shot: the task is removed before it runs, so it runs once (it may register again). */
        task = *slot;
        memset(slot, 0, sizeof *slot);
    }
    cp_tasks_unlock();
    if (slot == NULL) return -ENOENT;
    char message[CP_TASK_KEY_BYTES + 16];
    snprintf(message, sizeof message, "task %s", task.key);
    crashport_breadcrumb("launch", message);
    task.function(task.context);
    return 0;
}

/* Once per process: a second crashport_launch or crashport_launch_with runs nothing. */
static uint32_t cp_launch_called;

/* An asynchronous protect's state: CP_PROTECT_IDLE until crashport_launch_with starts one, then
 * RUNNING until crashport_protect_finished (FINISHED) or the timeout (TIMED_OUT). The word is the
 * futex the launch waits on. */
#define CP_PROTECT_IDLE 0u
#define CP_PROTECT_RUNNING 1u
#define CP_PROTECT_FINISHED 2u
#define CP_PROTECT_TIMED_OUT 3u
#define CP_PROTECT_TIMEOUT_MS 30000u
static uint32_t cp_protect_state;

/* Tells the watcher how the launch was protected, for its session (never answered). */
static void cp_launch_tell(unsigned consecutive, unsigned threshold, uint32_t outcome)
{
    cp_launch note;
    memset(&note, 0, sizeof note);
    note.protected_run = 1;
    note.consecutive_launch_crashes = consecutive;
    note.threshold = threshold;
    note.outcome = outcome;
    (void)cp_app_send(&note, sizeof note, CP_MSG_LAUNCH);
}

static int64_t cp_launch_now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* Waits until the protect work said it finished or `timeout_ms` passed; true when it finished. A
 * crashport_protect_finished that comes after the timeout finds TIMED_OUT and changes nothing. */
static bool cp_launch_wait_protect(unsigned timeout_ms)
{
    int64_t deadline = cp_launch_now_ms() + timeout_ms;
    for (;;) {
        uint32_t state = __atomic_load_n(&cp_protect_state, __ATOMIC_ACQUIRE);
        if (state == CP_PROTECT_FINISHED) return true;
        int64_t left = deadline - cp_launch_now_ms();
        if (left <= 0) {
            uint32_t expected = CP_PROTECT_RUNNING;
            if (__atomic_compare_exchange_n(&cp_protect_state, &expected, CP_PROTECT_TIMED_OUT, false,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                return false;
            }
            return expected == CP_PROTECT_FINISHED;
        }
        struct timespec wait = {(time_t)(left / 1000), (long)(left % 1000) * 1000000};
        (void)syscall(SYS_futex, &cp_protect_state, FUTEX_WAIT_PRIVATE, state, &wait, NULL, 0);
    }
}

__attribute__((visibility("default"))) int crashport_protect_finished(void)
{
    uint32_t expected = CP_PROTECT_RUNNING;
    if (__atomic_compare_exchange_n(&cp_protect_state, &expected, CP_PROTECT_FINISHED, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        (void)syscall(SYS_futex, &cp_protect_state, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
        return 0;
    }
    return expected == CP_PROTECT_TIMED_OUT ? -ETIMEDOUT : expected == CP_PROTECT_FINISHED ? -EALREADY : -ENOENT;
}

__attribute__((visibility("default"))) int crashport_launch_with(const crashport_launch_options *given)
{
    if (given == NULL || given->size < sizeof given->size) return -EINVAL;
    crashport_launch_options options;
    memset(&options, 0, sizeof options);
    memcpy(&options, given, given->size < sizeof options ? given->size : sizeof options);
    if (__atomic_exchange_n(&cp_launch_called, 1u, __ATOMIC_ACQ_REL) != 0) return -EALREADY;
    unsigned threshold = options.threshold != 0 ? options.threshold : CRASHPORT_LAUNCH_THRESHOLD;
    unsigned timeout_ms = options.protect_timeout_ms != 0 ? options.protect_timeout_ms : CP_PROTECT_TIMEOUT_MS;
    /* The launch lasts until the program's milestone, not a timer. */
    __atomic_store_n(&cp_app.launch_ms, 0u, __ATOMIC_RELAXED);
    const cp_last_run *run = cp_app_is_installed() ? cp_app_previous_run() : NULL;
    unsigned consecutive = run != NULL ? run->consecutive_launch_crashes : 0;
    bool protect = false;
    char message[192];
    if (options.protect != NULL && options.should_protect != NULL) {
        /* The program's own decision: a crash in it is a launch crash, and the report's last
         * breadcrumb says where it came. */
        crashport_run_detail last;
        memset(&last, 0, sizeof last);
        last.size = sizeof last;
        (void)crashport_last_run_detail(&last);
        crashport_breadcrumb("launch", "launch protection: asking the program whether to protect");
        protect = options.should_protect(&last, options.context) != 0;
        snprintf(message, sizeof message,
                 "launch protection: the program decided to %s (%u launch crashes in a row)",
                 protect ? "protect" : "launch normally", consecutive);
        crashport_breadcrumb("launch", message);
    } else if (options.protect != NULL && consecutive >= threshold) {
        protect = true;
        snprintf(message, sizeof message,
                 "launch protection: %u launch crashes in a row (threshold %u): running the protect work",
                 consecutive, threshold);
        crashport_breadcrumb("launch", message);
    }
    int result = CRASHPORT_LAUNCH_NORMAL;
    if (protect) {
        /* The run's session says so before the work starts: a protect that crashes still counts. */
        cp_launch_tell(consecutive, options.should_protect != NULL ? 0u : threshold, CP_LAUNCH_PROTECT_STARTED);
        if (options.asynchronous) __atomic_store_n(&cp_protect_state, CP_PROTECT_RUNNING, __ATOMIC_RELEASE);
        options.protect(options.context);
        result = CRASHPORT_LAUNCH_PROTECTED;
        if (options.asynchronous && !cp_launch_wait_protect(timeout_ms)) {
            snprintf(message, sizeof message,
                     "launch protection: the protect work did not finish within %u ms; launching", timeout_ms);
            crashport_breadcrumb("launch", message);
            cp_launch_tell(consecutive, options.should_protect != NULL ? 0u : threshold, CP_LAUNCH_PROTECT_TIMED_OUT);
            result = CRASHPORT_LAUNCH_PROTECT_TIMED_OUT;
        } else {
            crashport_breadcrumb("launch", "launch protection: the protect work is done; launching");
        }
    }
    if (options.launch != NULL) options.launch(options.context);
    return result;
}

__attribute__((visibility("default"))) int crashport_launch(unsigned threshold, crashport_task protect,
                                                            crashport_task launch, void *context)
{
    crashport_launch_options options;
    memset(&options, 0, sizeof options);
    options.size = sizeof options;
    options.threshold = threshold;
    options.protect = protect;
    options.launch = launch;
    options.context = context;
    return crashport_launch_with(&options);
}
