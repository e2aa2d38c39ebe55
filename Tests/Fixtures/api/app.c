/* The app-facing API end to end (Tests/EndToEndTests/AppAPITests.swift): a program that tells
 * crashport about itself, then crashes (or not). Modes:
 *   tell DIR      annotations (plain, escaped, cut, removed, too many), 130 breadcrumbs, and
 *                 attachments (DIR/app.log, a FIFO, a missing file, DIR/link if it exists),
 *                 printing each call's result, then a NULL store in crash_after_telling
 *   busy          50 threads annotating and adding breadcrumbs without pause; main crashes
 *                 while they run
 *   plain         every call with crashport not installed; exits 0
 *   doublefree    frees a block twice (glibc's check aborts, with its message)
 *   error         reports a handled error from parse_config, then 50 threads report at once
 *                 (the rate limit lets 9 more through), then one from a signal handler;
 *                 prints each outcome and exits 0
 *   run HOW       prints what crashport_last_run says, then: "crash" (during launch), "late"
 *                 (crashport_launch_completed, then crash), "clean" (exit 0), "sigkill" (raises
 *                 SIGKILL), "disable" (crashport_set_enabled(0), then crash), "enable" (turn it
 *                 back on, exit 0)
 *   dialog [send|discard ID]...
 *                 a consent dialog: the count at start, the reports awaiting consent as listed
 *                 (one "report ID<TAB>KIND<TAB>TIME_MS<TAB>TITLE" line each), each decision's
 *                 result, then the list once more (which the watcher answers after the decisions)
 */
#define _GNU_SOURCE
#include <crashport.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

__attribute__((noinline)) static void crash_after_telling(void)
{
    volatile int *volatile nowhere = NULL; /* neither the pointer nor the store can be dropped */
    *nowhere = 1;
}

static void tell(const char *directory)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/app.log", directory);
    FILE *log = fopen(path, "w");
    fputs("started\nconfig loaded\n", log);
    fclose(log);
    printf("user %d\n", crashport_annotate("user", "alice"));
    printf("escaped %d\n", crashport_annotate("build", "nightly\n\x1b[31mred"));
    printf("replaced %d\n", crashport_annotate("user", "bob"));
    char value[2000];
    memset(value, 'v', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    printf("long value %d\n", crashport_annotate("long", value));
    char key[100];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    printf("long key %d\n", crashport_annotate(key, "x"));
    int added = crashport_annotate("gone", "soon");
    printf("removed %d %d\n", added, crashport_annotate("gone", NULL));
    printf("empty key %d\n", crashport_annotate("", "x"));
    int full = 0;
    for (int index = 0; index < 70 && full == 0; index++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", index);
        full = crashport_annotate(name, "filler");
        if (full != 0) printf("full at n%d %d\n", index, full);
    }
    for (int index = 0; index < 130; index++) {
        char message[32];
        snprintf(message, sizeof message, "step %d", index);
        crashport_breadcrumb("loop", message);
    }
    printf("attach log %d\n", crashport_attach_file(path));
    printf("attach again %d\n", crashport_attach_file(path));
    snprintf(path, sizeof path, "%s/fifo", directory);
    mkfifo(path, 0644);
    printf("attach fifo %d\n", crashport_attach_file(path));
    printf("attach missing %d\n", crashport_attach_file("/nonexistent/file"));
    snprintf(path, sizeof path, "%s/link", directory);
    struct stat link;
    if (lstat(path, &link) == 0) printf("attach link %d\n", crashport_attach_file(path));
    snprintf(path, sizeof path, "%s/detached", directory);
    int attached = crashport_attach_file(path);
    int detached = crashport_detach_file(path);
    printf("detach %d %d %d\n", attached, detached, crashport_detach_file(path));
    fflush(stdout);
    crash_after_telling();
}

__attribute__((noinline)) static int parse_config(void)
{
    return crashport_report_error("ParseError", "line 3: unexpected '}'");
}

static int outcomes[50];

static void *report_once(void *argument)
{
    int number = (int)(long)argument;
    char message[32];
    snprintf(message, sizeof message, "from thread %d", number);
    outcomes[number] = crashport_report_error("ThreadError", message);
    return NULL;
}

static volatile int from_handler = 1;

static void report_from_handler(int signo)
{
    (void)signo;
    from_handler = crashport_report_error("SignalError", "reported from a signal handler");
}

static void *keep_telling(void *argument)
{
    int number = (int)(long)argument;
    char key[16], value[64];
    snprintf(key, sizeof key, "t%d", number);
    for (unsigned long round = 0;; round++) {
        snprintf(value, sizeof value, "t%d:%lu", number, round);
        if (crashport_annotate(key, value) < 0) (void)!write(1, "annotate failed\n", 16); /* unbuffered: the crash follows */
        crashport_breadcrumb(key, value);
        if (round % 64 == 0) usleep(100); /* a busy program, not one that only annotates */
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "tell") == 0 && argc > 2) {
        tell(argv[2]);
    } else if (strcmp(mode, "busy") == 0) {
        for (long number = 0; number < 50; number++) {
            pthread_t thread;
            pthread_create(&thread, NULL, keep_telling, (void *)number);
        }
        usleep(200 * 1000);
        crash_after_telling();
    } else if (strcmp(mode, "error") == 0) {
        printf("parse_config %d\n", parse_config());
        pthread_t threads[50];
        for (long number = 0; number < 50; number++) pthread_create(&threads[number], NULL, report_once, (void *)number);
        int reported = 0, limited = 0, other = 0;
        for (int number = 0; number < 50; number++) {
            pthread_join(threads[number], NULL);
            if (outcomes[number] == 0) reported++;
            else if (outcomes[number] == -11) limited++;
            else other++;
        }
        printf("threads reported %d limited %d other %d\n", reported, limited, other);
        signal(SIGUSR1, report_from_handler);
        raise(SIGUSR1);
        printf("handler %d\n", from_handler);
        return 0;
    } else if (strcmp(mode, "run") == 0 && argc > 2) {
        crashport_last_run_info last;
        int known = crashport_last_run(&last);
        printf("last_run %d crashed %d during_launch %d consecutive %d report %s enabled %d\n", known, last.crashed,
               last.crashed_during_launch, last.consecutive_launch_crashes, last.report_id[0] ? last.report_id : "-",
               crashport_is_enabled());
        fflush(stdout);
        const char *how = argv[2];
        if (strcmp(how, "clean") == 0) return 0;
        if (strcmp(how, "sigkill") == 0) raise(SIGKILL);
        if (strcmp(how, "late") == 0) crashport_launch_completed();
        if (strcmp(how, "disable") == 0) printf("disabled %d\n", crashport_set_enabled(0));
        if (strcmp(how, "enable") == 0) {
            printf("enabled %d\n", crashport_set_enabled(1));
            return 0;
        }
        fflush(stdout);
        crash_after_telling();
    } else if (strcmp(mode, "consent") == 0 && argc > 2) {
        /* What a program asking its user at start does: how many wait, then the user's answer. */
        printf("pending %d\n", crashport_pending_reports());
        const char *answer = argv[2];
        int result = 0;
        if (strcmp(answer, "send") == 0) result = crashport_send_pending();
        if (strcmp(answer, "discard") == 0) result = crashport_discard_pending();
        if (strcmp(answer, "never") == 0) result = crashport_set_consent(CRASHPORT_CONSENT_NEVER);
        if (strcmp(answer, "bogus") == 0) result = crashport_set_consent(7);
        printf("answer %s %d pending %d\n", answer, result, crashport_pending_reports());
        fflush(stdout);
        if (strcmp(answer, "crash") == 0) crash_after_telling();
        return 0;
    } else if (strcmp(mode, "dialog") == 0) {
        printf("pending %d\n", crashport_pending_reports());
        crashport_pending_report pending[CRASHPORT_PENDING_MAX];
        int listed = crashport_pending_list(pending, CRASHPORT_PENDING_MAX);
        printf("listed %d\n", listed);
        for (int i = 0; i < listed; i++) {
            printf("report %s\t%s\t%lld\t%s\n", pending[i].id, pending[i].kind, (long long)pending[i].time_ms,
                   pending[i].title);
        }
        for (int i = 2; i + 1 < argc; i += 2) {
            int result = strcmp(argv[i], "send") == 0 ? crashport_send_report(argv[i + 1])
                                                      : crashport_discard_report(argv[i + 1]);
            printf("%s %s %d pending %d\n", argv[i], argv[i + 1], result, crashport_pending_reports());
        }
        printf("empty id %d, long id %d, NULL list %d\n", crashport_send_report(""),
               crashport_discard_report("0123456789012345678901234567890123456789012345678901234567890123456789"),
               crashport_pending_list(NULL, 1));
        printf("after %d\n", crashport_pending_list(pending, CRASHPORT_PENDING_MAX));
        return 0;
    } else if (strcmp(mode, "doublefree") == 0) {
        char *volatile block = malloc(16);
        free(block);
        free(block);
    } else if (strcmp(mode, "plain") == 0) {
        int results = crashport_annotate("k", "v");
        results += crashport_attach_file("/etc/hostname");
        results += crashport_detach_file("/etc/hostname");
        results += crashport_report_error("E", "not installed") == -107 /* ENOTCONN */ ? 0 : 100;
        results += crashport_pending_list(NULL, 0) == -107 ? 0 : 100;
        results += crashport_send_report("20261126T230000.000Z-1-0000") == -107 ? 0 : 100;
        crashport_breadcrumb("c", "m");
        printf("plain %d\n", results);
        return 0;
    }
    return 2;
}
